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
//! **Flooding, per session.** A session may receive at most R = 2^r flooded responses
//! (the session offer states r: [`he::Params::session_responses_log2`]; the server refuses a
//! session that would ask for more), and all of them together must be within 2^-40
//! ([`FLOOD_SECURITY_BITS`]) of responses that depend on W·x + r alone: by the union
//! bound, each response within 2^-(40+r), half of it for the tail event and half for
//! the smudging. Tail: ‖e‖∞ ≤ t·σ except with probability 2n·exp(−t²/2) over the n
//! coefficients, so t = √(2 ln(2n·2^(41+r))) ([`NoiseModel::tail_bits`]: log2 t = 3.13
//! for n = 2^13 and r = 0, 3.38 for r = 24). Smudging (`share_output`): statistical
//! distance ≤ n·B_kernel/B_flood over the n coefficients, so B_flood =
//! 2^(41+r) · n · B_kernel. The cost of a session bound is r + 1 bits of flooding (and
//! a fraction of a bit of tail) over a single response's 2^-40, taken from the noise
//! budget: correct decryption needs B_flood < q/(2p); a margin of [`MARGIN_BITS`] is
//! kept on top.

use he::Params;

/// Statistical security of response privacy, bits.
pub const FLOOD_SECURITY_BITS: u32 = 40;
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
    /// log2 of the most responses a session may receive
    /// ([`he::Params::session_responses_log2`]).
    pub session_responses_log2: u32,
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
            session_responses_log2: params.session_responses_log2(),
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
    /// log2 of the statistical distance each response may have: 2^-(40 + r) for a
    /// session of at most 2^r responses.
    pub fn per_response_log2(&self) -> f64 {
        -(FLOOD_SECURITY_BITS as f64 + self.session_responses_log2 as f64)
    }
    /// log2 t for the tail bound ‖e‖∞ ≤ t·σ, which fails with probability at most half
    /// a response's share of the distance: 2n·exp(−t²/2) = 2^(per_response − 1).
    pub fn tail_bits(&self) -> f64 {
        let ln_inv = (1.0 - self.per_response_log2() + (2.0 * self.n as f64).log2())
            * std::f64::consts::LN_2;
        0.5 * (2.0 * ln_inv).log2()
    }
    /// Flooding bits for a kernel whose noise has log2 σ = `kernel`: B_flood = 2^(41 + r)
    /// · n · t·σ (see the module doc).
    pub fn flood_bits(&self, kernel: f64) -> u32 {
        (kernel + self.tail_bits() + 1.0 - self.per_response_log2() + (self.n as f64).log2()).ceil()
            as u32
    }
    /// log2 of the statistical distance bound of a session that received `responses`
    /// flooded responses, each sized for a session of at most 2^`responses_log2`: the
    /// union bound, at most 2^-40 while `responses` ≤ 2^`responses_log2`.
    pub fn session_distance_log2(responses: usize, responses_log2: u32) -> f64 {
        -(FLOOD_SECURITY_BITS as f64 + responses_log2 as f64) + (responses.max(1) as f64).log2()
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
