//! A noise model for deciding how much flooding a response needs.
//!
//! It tracks the standard deviation σ of each noise coefficient (in bits) for fhe.rs BFV
//! (error, secret and encryption randomness from a centred binomial of variance 10),
//! assuming independent noise coefficients and worst-case weights:
//! - a fresh query (symmetric-key encryption, `Backend::encrypt_sym`): σ² = 10, its
//!   error term (fhe.rs samples errors with the secret's variance);
//! - a key switch (rotation) adds Σ_i d_i·e_i, digits d_i uniform below q_i:
//!   σ² += L·n·q_max²/3·10; a rotation composed of `h` key switches (a step without a
//!   key of its own, beyond the Galois-key budget: one hop per set bit) adds `h` of
//!   them, σ of the key-switch term × h ([`NoiseModel::with_hops`]);
//! - a ScMult by a plaintext with centred coefficients |w| ≤ p/2: σ² ← n·(p/2)²·σ²
//!   (k·w²·σ² when at most k coefficients are non-zero, as in coefficient-encoded
//!   weights, whose coefficients are the weights themselves: w = p/2, or the program's
//!   public bound 2^s, [`he::Params::weight_bound_log2`]);
//! - a sum of k terms: σ ← k·σ (as if fully correlated, the safe side); √k·σ where the
//!   terms are independent (products of different query ciphertexts, each with fresh
//!   noise and rounding of its own, by fixed weights: coefficient-encoded kernels).
//!
//! The bound on ‖e‖∞ is 9σ: a sub-Gaussian tail exceeds it with probability below
//! 2^-40 over all n coefficients (√(2 ln(2n·2^40)) < 9 for n ≤ 2^17). Flooding
//! (`share_output`): the smudging lemma gives statistical distance ≤ n·B_kernel/B_flood
//! over the n coefficients, so B_flood = 2^40 · n · B_kernel; with the tail event the
//! response is within 2^-39 of one that depends on W·x + r alone. Over a session of R
//! responses the distance is at most R·2^-39 (union bound; the servers report R and
//! this bound per session). Correct decryption needs B_flood < q/(2p); a margin of
//! [`MARGIN_BITS`] is kept on top.

use he::Params;

/// Statistical security of response privacy, bits.
pub const FLOOD_SECURITY_BITS: u32 = 40;
/// log2 9: the bound on ‖e‖∞ is 9σ (tail probability below 2^-40).
pub const TAIL_BITS: f64 = 3.17;
/// Bits of noise budget kept free after flooding.
pub const MARGIN_BITS: u32 = 2;

/// log2(2^a + 2^b).
pub fn log2_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (1.0 + (lo - hi).exp2()).log2()
}

/// Checks signed weights against a public bound `|w| ≤ 2^bits`, the bound the noise of
/// coefficient-encoded kernels is sized by ([`he::Params::with_weight_bound`]).
pub fn check_weight_bound(w: &[i64], bits: u32) -> crate::Result<()> {
    let bound = 1u64.checked_shl(bits).unwrap_or(u64::MAX);
    match w.iter().enumerate().find(|(_, v)| v.unsigned_abs() > bound) {
        Some((index, &value)) => Err(crate::KernelError::WeightBound { index, value, bits }),
        None => Ok(()),
    }
}

/// The model for one parameter set.
#[derive(Clone, Copy, Debug)]
pub struct NoiseModel {
    /// Ring degree.
    pub n: usize,
    /// log2 p.
    pub log_p: f64,
    /// log2 of the top-level q.
    pub log_q: f64,
    /// log2 σ of a fresh encryption's noise.
    pub fresh: f64,
    /// log2 σ of the noise a key switch adds.
    pub key_switch: f64,
    /// Bits a ScMult adds to log2 σ.
    pub sc_mult: f64,
    /// log2 of the largest weight magnitude (a coefficient-encoded plaintext's
    /// coefficients are the weights: p/2, or the program's public bound,
    /// [`he::Params::weight_bound_log2`]).
    pub weight: f64,
}

impl NoiseModel {
    /// The model of a parameter set.
    pub fn new(params: &Params) -> Self {
        let n = params.n() as f64;
        let l = params.levels() as f64;
        let q_max = params
            .moduli()
            .iter()
            .map(|&q| (q as f64).log2())
            .fold(0.0, f64::max);
        Self {
            n: params.n(),
            log_p: (params.p() as f64).log2(),
            log_q: params.log_q_at(0),
            fresh: 0.5 * he::SECRET_KEY_VARIANCE.log2(),
            key_switch: q_max + 0.5 * (10.0 * l * n / 3.0).log2(),
            sc_mult: 0.5 * n.log2() + (params.p() as f64 / 2.0).log2(),
            weight: params.weight_bound_log2(),
        }
    }
    /// The model of a parameter set for ciphertexts at `level` (the moduli left there:
    /// the budget shrinks, the noise terms do not change).
    pub fn at_level(params: &Params, level: usize) -> Self {
        Self {
            log_q: params.log_q_at(level),
            ..Self::new(params)
        }
    }
    /// The lowest-modulus level (largest index) below the last whose budget affords a
    /// kernel of `kernel` bits (log2 σ) with its flooding: rotation-free kernels
    /// (coefficient encoding) query there — smaller queries, cheaper products and
    /// weight plaintexts — instead of at the top. 0 when only the top affords it (or
    /// none does: the caller reports the budget error at the top).
    pub fn lowest_level(params: &Params, kernel: f64) -> usize {
        (0..params.last_level())
            .rev()
            .find(|&l| Self::at_level(params, l).affords(kernel))
            .unwrap_or(0)
    }
    /// The model for queries whose c0 the client rounds for the wire, with an error of
    /// at most 2^`bound` per coefficient ([`he::Rounding`]): a bounded error is
    /// sub-Gaussian with σ at most its bound, and it adds to the fresh noise the weights
    /// multiply.
    pub fn with_query_rounding(&self, bound: f64) -> Self {
        Self {
            fresh: log2_add(self.fresh, bound),
            ..*self
        }
    }
    /// The model for a kernel whose rotations take up to `hops` key switches each
    /// (composed rotations, beyond the Galois-key budget).
    pub fn with_hops(&self, hops: usize) -> Self {
        Self {
            key_switch: self.key_switch + (hops.max(1) as f64).log2(),
            ..*self
        }
    }
    /// After a rotation (log2 σ).
    pub fn rotate(&self, b: f64) -> f64 {
        log2_add(b, self.key_switch)
    }
    /// After `k` rotate-and-add steps (each doubles σ and adds a key switch).
    pub fn ras(&self, b: f64, k: u32) -> f64 {
        (0..k).fold(b, |acc, _| self.rotate(acc) + 1.0)
    }
    /// After a ScMult.
    pub fn mult(&self, b: f64) -> f64 {
        b + self.sc_mult
    }
    /// After a ScMult by a plaintext with at most `nonzero` non-zero centred
    /// coefficients, the weights themselves (|w| ≤ 2^`weight`, at most p/2):
    /// σ² ← nonzero·|w|²·σ² (coefficient-encoded weights; at most the dense bound of
    /// [`NoiseModel::mult`]).
    pub fn mult_sparse(&self, b: f64, nonzero: usize) -> f64 {
        let k = nonzero.clamp(1, self.n) as f64;
        b + 0.5 * k.log2() + self.weight
    }
    /// After summing `k` terms.
    pub fn sum(&self, b: f64, k: usize) -> f64 {
        b + (k.max(1) as f64).log2()
    }
    /// After summing `k` independent zero-mean terms: σ ← √k·σ.
    pub fn sum_independent(&self, b: f64, k: usize) -> f64 {
        b + 0.5 * (k.max(1) as f64).log2()
    }
    /// Flooding bits for a kernel whose noise has log2 σ = `kernel` (bound 9σ).
    pub fn flood_bits(&self, kernel: f64) -> u32 {
        (kernel + TAIL_BITS + FLOOD_SECURITY_BITS as f64 + (self.n as f64).log2()).ceil() as u32
    }
    /// log2 of the statistical distance bound of `responses` flooded responses: each
    /// within 2^-(FLOOD_SECURITY_BITS − 1) of a simulated one, union bound over them.
    pub fn session_distance_log2(responses: usize) -> f64 {
        -(FLOOD_SECURITY_BITS as f64 - 1.0) + (responses.max(1) as f64).log2()
    }
    /// Bits the whole response needs: flooding + p + 1 + margin.
    pub fn needed_bits(&self, kernel: f64) -> u32 {
        (self.flood_bits(kernel) as f64 + self.log_p + 1.0).ceil() as u32 + MARGIN_BITS
    }
    /// Whether the parameters afford a kernel of this noise (log2 σ).
    pub fn affords(&self, kernel: f64) -> bool {
        (self.needed_bits(kernel) as f64) <= self.log_q.floor()
    }
}
