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
    /// `acc[k] = (acc[k] + lhs[k]·rhs[k]) mod q` on 52-bit IFMA lanes, where this CPU
    /// has them and q < 2^50 (tfhe-ntt's `Plan::mul_accumulate`); `false` (nothing
    /// done) elsewhere, where a 128-bit accumulation is faster. Every input reduced.
    pub(crate) fn mul_accumulate_ifma(&self, acc: &mut [u64], lhs: &[u64], rhs: &[u64]) -> bool {
        match &self.fast {
            Some(plan) if plan.use_ifma() => {
                plan.mul_accumulate(acc, lhs, rhs);
                true
            }
            _ => false,
        }
    }
    /// Whether [`NttPlan::mul_accumulate_ifma`] runs.
    pub(crate) fn has_ifma(&self) -> bool {
        self.fast.as_ref().is_some_and(|p| p.use_ifma())
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

/// helina's transforms of whole ring elements: a polynomial of any level in the power
/// basis or NTT form, transformed modulus by modulus with the [`NttPlan`] of each (the
/// same values as fhe-math's `change_representation`, which on stable Rust transforms
/// with tfhe-ntt 0.6's AVX2 code; here tfhe-ntt 0.7's AVX-512, with IFMA for moduli below
/// 2^50: ~2.7x faster on such a CPU). The plans are built once per (modulus, degree) and
/// shared by the process.
pub(crate) mod poly {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};

    use fhe_math::rq::traits::TryConvertFrom;
    use fhe_math::rq::{Poly, Representation};

    use super::NttPlan;
    use crate::error::{HeError, Result};

    type Plans = Mutex<HashMap<(u64, usize), Arc<NttPlan>>>;

    fn plans(p: &Poly) -> Result<Vec<Arc<NttPlan>>> {
        static PLANS: OnceLock<Plans> = OnceLock::new();
        let n = p.coefficients().ncols();
        let mut cache = PLANS
            .get_or_init(Default::default)
            .lock()
            .map_err(|_| HeError::Engine("NTT plan cache poisoned".into()))?;
        p.ctx()
            .moduli_operators()
            .iter()
            .map(|q| match cache.get(&(**q, n)) {
                Some(plan) => Ok(plan.clone()),
                None => {
                    let plan = Arc::new(
                        NttPlan::new(q, n)
                            .ok_or_else(|| HeError::Engine("no NTT for a modulus".into()))?,
                    );
                    cache.insert((**q, n), plan.clone());
                    Ok(plan)
                }
            })
            .collect()
    }

    fn transform(p: &Poly, to: Representation, public: bool) -> Result<Poly> {
        let plans = plans(p)?;
        let mut rows = p.coefficients().to_owned();
        for (mut row, plan) in rows.outer_iter_mut().zip(&plans) {
            let row = row
                .as_slice_mut()
                .ok_or_else(|| HeError::Engine("polynomial rows not contiguous".into()))?;
            match to {
                Representation::PowerBasis => plan.backward(row),
                _ => plan.forward(row),
            }
        }
        Ok(Poly::try_convert_from(rows, p.ctx(), public, to)?)
    }

    /// `p` (power basis) in NTT form; `public`: the result may take fhe-math's
    /// variable-time paths (ciphertext data, never a secret or its products).
    pub(crate) fn forward(p: &Poly, public: bool) -> Result<Poly> {
        forward_as(p, Representation::Ntt, public)
    }

    /// `p` (power basis) in NTT form `to` (`Ntt`, or `NttShoup` with fhe-math's Shoup
    /// companions), `public` as [`forward`].
    pub(crate) fn forward_as(p: &Poly, to: Representation, public: bool) -> Result<Poly> {
        if *p.representation() != Representation::PowerBasis || to == Representation::PowerBasis {
            return Err(HeError::Engine(
                "forward NTT of a polynomial not in the power basis".into(),
            ));
        }
        transform(p, to, public)
    }

    /// `p` (NTT form) in the power basis; `public` as [`forward`].
    pub(crate) fn backward(p: &Poly, public: bool) -> Result<Poly> {
        if *p.representation() != Representation::Ntt {
            return Err(HeError::Engine(
                "inverse NTT of a polynomial not in NTT form".into(),
            ));
        }
        transform(p, Representation::PowerBasis, public)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use fhe_math::rq::{Poly, Representation};
    use rand::SeedableRng;

    /// helina's whole-polynomial transforms equal fhe-math's `change_representation`
    /// bit for bit, at every level of a five-modulus chain below 2^50 (IFMA lanes) and a
    /// four-modulus chain of 53-58 bits (64-bit lanes), NttShoup included, and refuse a
    /// polynomial in the wrong representation.
    #[test]
    fn polynomial_transforms_equal_fhe_math() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
        for name in ["n8192-p28", "n8192-p40"] {
            let params = crate::Params::preset(name).unwrap();
            for level in 0..params.levels() {
                let ctx = params.fhe.context_at_level(level).unwrap();
                let a = Poly::random(ctx, Representation::PowerBasis, &mut rng);
                // the same representation and coefficients (equality would also compare
                // the variable-time flag)
                let same = |x: &Poly, y: &Poly| {
                    x.representation() == y.representation() && x.coefficients() == y.coefficients()
                };
                for to in [Representation::Ntt, Representation::NttShoup] {
                    let mut want = a.clone();
                    want.change_representation(to);
                    let got = super::poly::forward_as(&a, to, true).unwrap();
                    assert!(same(&got, &want), "{name} level {level} {to:?}");
                    if to == Representation::NttShoup {
                        // the Shoup companions multiply alike
                        let ctx = params.fhe.context_at_level(level).unwrap();
                        let b = Poly::random(ctx, Representation::Ntt, &mut rng);
                        assert!(same(&(&b * &got), &(&b * &want)));
                    }
                }
                let mut ntt = a.clone();
                ntt.change_representation(Representation::Ntt);
                assert!(same(&super::poly::forward(&a, false).unwrap(), &ntt));
                assert!(same(&super::poly::backward(&ntt, true).unwrap(), &a));
                assert!(super::poly::backward(&a, true).is_err());
                assert!(super::poly::forward(&ntt, true).is_err());
            }
        }
    }
}
