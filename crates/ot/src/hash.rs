//! The tweakable correlation-robust hash that turns correlated OTs into random and
//! chosen-message OTs: TMMO of Guo, Katz, Wang, Yu ("Efficient and secure multiparty
//! computation from fixed-key block ciphers", S&P 2020, §7.4),
//! `H(x, i) = π(π(x) ⊕ i) ⊕ π(x)` with `π` AES-128 under the fixed public key of
//! [`gc::label`] (the same permutation `gc`'s IKNP uses; a test checks that they
//! agree), batched so AES-NI (or VAES, see `.cargo/config.toml`) pipelines, with the
//! blocks converted once per call.
//!
//! Every hash input of the crate carries a distinct 128-bit tweak (`tweak`): a
//! domain byte, the COT direction, the COT's global index in its session and an
//! 8-bit sub-index. Each COT is used for exactly one purpose, so no tweak repeats in a
//! session; GKWY prove TMMO tweakable correlation robust (tccr) in the ideal
//! permutation model, which is what random OT from COT needs: the receiver, who
//! lacks `Δ`, sees `H(w ⊕ Δ, i)` only for distinct `i`.

use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes128;
use zeroize::Zeroize;

/// `gc::label`'s fixed key (private there; `tests::same_permutation_as_gc` keeps them
/// equal).
const FIXED_KEY: [u8; 16] = *b"helina-gc-fk-v1!";

/// Domain: COTs taken from the session pools (index = global COT index).
pub(crate) const DOMAIN_POOL: u8 = 2;

/// `domain ‖ dir ‖ index ‖ sub` as a tweak.
#[inline]
pub(crate) fn tweak(domain: u8, dir: u8, index: u64, sub: u8) -> u128 {
    ((domain as u128) << 120) | ((dir as u128) << 112) | ((index as u128) << 8) | sub as u128
}

/// Batched TMMO.
pub(crate) struct Tccr {
    aes: Aes128,
    px: Vec<aes::Block>,
    py: Vec<aes::Block>,
}

impl std::fmt::Debug for Tccr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tccr")
    }
}

impl Default for Tccr {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Tccr {
    fn drop(&mut self) {
        for b in self.px.iter_mut().chain(self.py.iter_mut()) {
            b.as_mut_slice().zeroize();
        }
    }
}

#[inline(always)]
fn block(x: u128) -> aes::Block {
    x.to_le_bytes().into()
}

#[inline(always)]
fn value(b: &aes::Block) -> u128 {
    u128::from_le_bytes((*b).into())
}

impl Tccr {
    pub(crate) fn new() -> Self {
        Self {
            aes: Aes128::new(&FIXED_KEY.into()),
            px: Vec::new(),
            py: Vec::new(),
        }
    }

    /// `xs[k] ← π(xs[k])`, batched: the first half of `H` for an input hashed under
    /// several tweaks (`H(x, i) = π(π(x) ⊕ i) ⊕ π(x)` needs `π(x)` once).
    pub(crate) fn permute(&mut self, xs: &mut [u128]) {
        self.px.clear();
        self.px.extend(xs.iter().map(|&x| block(x)));
        self.aes.encrypt_blocks(&mut self.px);
        for (x, p) in xs.iter_mut().zip(&self.px) {
            *x = value(p);
        }
    }

    /// `xs[k] ← H(xs[k], tweaks[k])`.
    pub(crate) fn hash(&mut self, xs: &mut [u128], tweaks: &[u128]) {
        debug_assert_eq!(xs.len(), tweaks.len());
        self.px.clear();
        self.px.extend(xs.iter().map(|&x| block(x)));
        self.aes.encrypt_blocks(&mut self.px);
        self.py.clear();
        self.py
            .extend(self.px.iter().zip(tweaks).map(|(p, t)| block(value(p) ^ t)));
        self.aes.encrypt_blocks(&mut self.py);
        for ((x, p), q) in xs.iter_mut().zip(&self.px).zip(&self.py) {
            *x = value(p) ^ value(q);
        }
    }

    /// `H(x, t)` for one input.
    #[cfg(test)]
    pub(crate) fn hash_one(&mut self, x: u128, t: u128) -> u128 {
        let mut v = [x];
        self.hash(&mut v, &[t]);
        v[0]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tweaks_are_distinct_and_hash_depends_on_them() {
        assert_ne!(tweak(1, 0, 5, 0), tweak(2, 0, 5, 0));
        assert_ne!(tweak(2, 0, 5, 0), tweak(2, 1, 5, 0));
        assert_ne!(tweak(2, 0, 5, 1), tweak(2, 0, 5, 0));
        let mut h = Tccr::new();
        let a = h.hash_one(7, tweak(2, 0, 1, 0));
        let b = h.hash_one(7, tweak(2, 0, 2, 0));
        assert_ne!(a, b);
        let mut xs = vec![7u128, 7];
        h.hash(&mut xs, &[tweak(2, 0, 1, 0), tweak(2, 0, 2, 0)]);
        assert_eq!(xs, vec![a, b]);
    }

    #[test]
    fn hash_from_a_shared_permutation_is_the_hash() {
        // π(π(x) ⊕ t) ⊕ π(x) with π(x) computed once, as the 1-of-2^k sender does
        let mut h = Tccr::new();
        let x = 0x1111_2222_3333_4444_5555_6666_7777_8888u128;
        let mut px = [x];
        h.permute(&mut px);
        for t in [tweak(2, 0, 9, 1), tweak(2, 0, 9, 2), tweak(2, 1, 9, 3)] {
            let mut y = [px[0] ^ t];
            h.permute(&mut y);
            assert_eq!(y[0] ^ px[0], h.hash_one(x, t));
        }
    }

    #[test]
    fn same_permutation_as_gc() {
        // H(x, t) = π(π(x) ⊕ t) ⊕ π(x) with gc's π
        let pi = gc::label::FixedKeyAes::new();
        let mut scratch = Vec::new();
        let (x, t) = (
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128,
            tweak(2, 1, 77, 3),
        );
        let mut p = [x];
        pi.permute(&mut p, &mut scratch);
        let mut q = [p[0] ^ t];
        pi.permute(&mut q, &mut scratch);
        assert_eq!(Tccr::new().hash_one(x, t), q[0] ^ p[0]);
    }
}
