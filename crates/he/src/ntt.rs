//! The negacyclic NTT modulo one prime that helina's own transforms run on (weight
//! plaintexts prepared for products, slot encoding mod p, the row-constant basis).
//!
//! fhe-math 0.1.1 transforms with tfhe-ntt 0.6, whose AVX-512 code needs a nightly
//! toolchain, so on stable Rust it runs its AVX2 code. tfhe-ntt 0.7 has the same
//! transforms (the same roots and output order) with AVX-512 on stable: on a CPU with
//! AVX-512 it transforms n = 8192 about 1.6x (primes of 51-62 bits) to 2.7x (below 50
//! bits, with IFMA) faster. [`NttPlan::new`] checks on a probe that its forward transform
//! equals fhe-math's before using it, and keeps fhe-math's operator otherwise, so NTT
//! forms made here and by fhe.rs always agree.

use fhe_math::ntt::NttOperator;
use fhe_math::zq::Modulus;

/// A negacyclic NTT of length n modulo a prime q ≡ 1 (mod 2n), in fhe-math's order.
#[derive(Clone, Debug)]
pub(crate) struct NttPlan {
    /// tfhe-ntt 0.7's plan, where it agrees with `op`.
    fast: Option<tfhe_ntt::prime64::Plan>,
    op: NttOperator,
}

impl NttPlan {
    /// `None` where fhe-math has no transform for (q, n).
    pub(crate) fn new(q: &Modulus, n: usize) -> Option<Self> {
        let op = NttOperator::new(q, n)?;
        let fast = tfhe_ntt::prime64::Plan::try_new(n, **q).filter(|plan| {
            let probe: Vec<u64> = (0..n as u64)
                .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 7)) % **q)
                .collect();
            let (mut a, mut b) = (probe.clone(), probe);
            op.forward(&mut a);
            plan.fwd(&mut b);
            a == b
        });
        Some(Self { fast, op })
    }
    /// In-place forward transform of n reduced values.
    pub(crate) fn forward(&self, a: &mut [u64]) {
        match &self.fast {
            Some(plan) => plan.fwd(a),
            None => self.op.forward(a),
        }
    }
    /// In-place inverse transform (normalised) of n reduced values.
    pub(crate) fn backward(&self, a: &mut [u64]) {
        match &self.fast {
            Some(plan) => {
                plan.inv(a);
                plan.normalize(a);
            }
            None => self.op.backward(a),
        }
    }
}
