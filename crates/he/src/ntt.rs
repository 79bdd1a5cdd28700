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

/// The shortest transform [`StridedNtt`] runs (tfhe-ntt's smallest plan).
const MIN_STRIDED_LEN: usize = 16;

/// The length of the transform BFV runs for a coefficient plaintext in X^(2^stride_log2)
/// of degree below n ([`crate::Backend::prepare_coeffs_strided`]): n/2^stride_log2, at
/// least 16, and n for stride_log2 = 0 (the planner prices the encoding by it).
pub fn strided_transform_len(n: usize, stride_log2: u32) -> usize {
    n.checked_shr(stride_log2)
        .unwrap_or(0)
        .max(MIN_STRIDED_LEN)
        .min(n)
}

/// The forward transform of a polynomial whose non-zero coefficients all lie at
/// multiples of 2^a: F(X) = V(X^(2^a)) with V of degree below n' = n/2^a. Every evaluation
/// point x of the length-n transform has x^(2^a) among the n' points of the negacyclic
/// transform of length n', so F's transform is V's (n'·log n' work instead of n·log n)
/// spread over the n outputs: `out[j] = small[spread[j]]`. Cheetah's filters of 1x1
/// convolutions have this form (a tile of H_w·W_w pixels: a = the twos in H_w·W_w).
///
/// [`StridedNtt::new`] finds the spread by transforming X^(2^a) and Y, and checks on a
/// probe that the spread transform equals the full one, so it is the same transform
/// whatever order either plan's outputs are in.
#[derive(Clone, Debug)]
pub(crate) struct StridedNtt {
    small: NttPlan,
    spread: Vec<u32>,
    log2: u32,
    /// `spread[j] = j >> a`: each small output fills 2^a neighbours (tfhe-ntt's and
    /// fhe-math's bit-reversed orders with the roots of one generator).
    runs: bool,
}

impl StridedNtt {
    /// The transform of length `n` with `full` for polynomials in X^(2^a); `None` where
    /// there is no length-n/2^a transform mod q or it does not agree with `full`.
    pub(crate) fn new(q: &Modulus, n: usize, a: u32, full: &NttPlan) -> Option<Self> {
        let small_n = n.checked_shr(a)?;
        if a == 0 || small_n < MIN_STRIDED_LEN {
            return None;
        }
        let small = NttPlan::new(q, small_n)?;
        // where each output of the full transform of X^(2^a) sits among the small
        // transform's outputs of Y: the same evaluation point of V
        let mut x = vec![0u64; n];
        x[1 << a] = 1;
        full.forward(&mut x);
        let mut y = vec![0u64; small_n];
        y[1] = 1;
        small.forward(&mut y);
        let at: std::collections::HashMap<u64, u32> =
            y.iter().enumerate().map(|(i, &v)| (v, i as u32)).collect();
        if at.len() != small_n {
            return None;
        }
        let spread = x
            .iter()
            .map(|v| at.get(v).copied())
            .collect::<Option<Vec<u32>>>()?;
        let runs = spread
            .iter()
            .enumerate()
            .all(|(j, &i)| i as usize == j >> a);
        let plan = Self {
            small,
            spread,
            log2: a,
            runs,
        };
        // a probe: the spread transform of V equals the full transform of V(X^(2^a))
        let probe: Vec<u64> = (0..small_n as u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 5)) % **q)
            .collect();
        let mut wide = vec![0u64; n];
        for (k, &v) in probe.iter().enumerate() {
            wide[k << a] = v;
        }
        full.forward(&mut wide);
        let mut narrow = probe;
        let mut out = vec![0u64; n];
        plan.forward(&mut narrow, &mut out);
        (out == wide).then_some(plan)
    }
    /// Length of the small transform, n/2^a.
    pub(crate) fn small_len(&self) -> usize {
        self.spread.len() >> self.log2
    }
    /// a: each small output stands for 2^a outputs of the full transform.
    pub(crate) fn log2(&self) -> u32 {
        self.log2
    }
    /// Whether the full transform is the small one with each output repeated 2^a times
    /// in a row (`out[j] = small[j >> a]`), so that it can be held small.
    pub(crate) fn runs(&self) -> bool {
        self.runs
    }
    /// `small` (the n/2^a coefficients of V, reduced) transformed in place: the values
    /// [`StridedNtt::forward`] spreads.
    pub(crate) fn forward_small(&self, small: &mut [u64]) {
        self.small.forward(small);
    }
    /// `small` (the n/2^a coefficients of V, reduced) transformed in place, and `out` (n
    /// values) the transform of V(X^(2^a)).
    pub(crate) fn forward(&self, small: &mut [u64], out: &mut [u64]) {
        self.small.forward(small);
        if self.runs {
            for (run, &v) in out.chunks_exact_mut(1 << self.log2).zip(small.iter()) {
                run.fill(v);
            }
        } else {
            for (o, &i) in out.iter_mut().zip(&self.spread) {
                *o = small[i as usize];
            }
        }
    }
}

/// The [`StridedNtt`]s of these moduli for polynomials in X^(2^a) of degree below `n`,
/// built once per (modulus, n, a) and shared by the process; `None` where a modulus has
/// none (the caller transforms in full).
pub(crate) fn strided(
    moduli: &[Modulus],
    n: usize,
    a: u32,
    full: &[NttPlan],
) -> Option<Vec<std::sync::Arc<StridedNtt>>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Plans = Mutex<HashMap<(u64, usize, u32), Option<Arc<StridedNtt>>>>;
    static PLANS: OnceLock<Plans> = OnceLock::new();
    let mut cache = PLANS.get_or_init(Default::default).lock().ok()?;
    moduli
        .iter()
        .zip(full)
        .map(|(q, plan)| {
            cache
                .entry((**q, n, a))
                .or_insert_with(|| StridedNtt::new(q, n, a, plan).map(Arc::new))
                .clone()
        })
        .collect()
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

    /// The strided transform exists for every modulus of the n8192 chains (five below
    /// 2^50, four of 53-58 bits) at every stride down to 16 points, and equals the full
    /// transform of the polynomial in X^(2^a) on random values; none for stride 1 or a
    /// transform shorter than 16 points.
    #[test]
    fn strided_transforms_equal_the_full_transform() {
        use rand::Rng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(12);
        for name in ["n8192-p28", "n8192-p40"] {
            let params = crate::Params::preset(name).unwrap();
            let ctx = params.fhe.context_at_level(0).unwrap();
            let n = params.n();
            let moduli = ctx.moduli_operators();
            let full: Vec<super::NttPlan> = moduli
                .iter()
                .map(|q| super::NttPlan::new(q, n).unwrap())
                .collect();
            for a in 1..=9u32 {
                let plans = super::strided(moduli, n, a, &full).unwrap();
                for ((q, plan), strided) in moduli.iter().zip(&full).zip(&plans) {
                    let m = n >> a;
                    assert_eq!(strided.small_len(), m);
                    let v: Vec<u64> = (0..m).map(|_| rng.random_range(0..**q)).collect();
                    let mut want = vec![0u64; n];
                    for (k, &x) in v.iter().enumerate() {
                        want[k << a] = x;
                    }
                    plan.forward(&mut want);
                    let (mut small, mut got) = (v, vec![0u64; n]);
                    strided.forward(&mut small, &mut got);
                    assert_eq!(got, want, "{name}: q = {}, stride 2^{a}", **q);
                }
            }
            assert!(super::strided(moduli, n, 0, &full).is_none());
            assert!(super::strided(moduli, n, 10, &full).is_none());
            assert_eq!(super::strided_transform_len(n, 0), n);
            assert_eq!(super::strided_transform_len(n, 6), n / 64);
            assert_eq!(super::strided_transform_len(n, 13), 16);
            assert_eq!(super::strided_transform_len(n, 200), 16);
        }
    }

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
