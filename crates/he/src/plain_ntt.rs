//! A number-theoretic transform mod a plaintext prime, for cleartext transforms such as
//! ENSEI's frequency-domain convolution (the he crate's [`NttPlan`], so the kernels crate
//! need not name fhe.rs).

use fhe_math::zq::Modulus;

use crate::ntt::NttPlan;

/// Negacyclic NTT of length `len` modulo a prime p ≡ 1 (mod 2·len).
#[derive(Clone, Debug)]
pub struct PlainNtt {
    op: NttPlan,
    len: usize,
}

impl PlainNtt {
    /// `None` when p is not a prime ≡ 1 mod 2·len or len is not a power of two ≥ 8.
    pub fn new(p: u64, len: usize) -> Option<Self> {
        if len < 8 || !len.is_power_of_two() || p % (2 * len as u64) != 1 {
            return None;
        }
        let m = Modulus::new(p).ok()?;
        Some(Self {
            op: NttPlan::new(&m, len)?,
            len,
        })
    }
    /// Transform length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false (a transform has length ≥ 8).
    pub fn is_empty(&self) -> bool {
        false
    }
    /// In-place forward transform of `len` reduced values (other lengths are left as is).
    pub fn forward(&self, a: &mut [u64]) {
        if a.len() == self.len {
            self.op.forward(a)
        }
    }
    /// In-place inverse transform (normalised), the inverse of [`PlainNtt::forward`].
    pub fn backward(&self, a: &mut [u64]) {
        if a.len() == self.len {
            self.op.backward(a)
        }
    }
}
