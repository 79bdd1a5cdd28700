//! A worst-case noise model for deciding how much flooding a response needs.
//!
//! Bounds are on ‖e‖∞ in bits, for fhe.rs BFV (error and secret from a centred binomial
//! with variance 10, so |coefficient| ≤ 20):
//! - fresh (public-key) encryption: ‖u·e_pk + e1‖ ≤ n·20·20 → log2(400 n);
//! - a key switch (rotation) adds Σ_i digit_i·e_i with digits below q_i: L·n·q_max·20;
//! - a ScMult by a plaintext with centred coefficients below p/2 multiplies by n·p/2;
//! - a sum of k terms adds log2 k.
//!
//! Flooding (`share_output`): the smudging lemma gives statistical distance
//! ≤ n · B_kernel / B_flood over the n coefficients, so B_flood = 2^40 · n · B_kernel
//! keeps it ≤ 2^-40. Correct decryption then needs B_flood < q / (2p); a margin of
//! [`MARGIN_BITS`] is kept on top. These bounds are conservative (worst case); measured
//! noise is 10-30 bits lower (the bench prints the budget left).

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

/// The model for one parameter set.
#[derive(Clone, Copy, Debug)]
pub struct NoiseModel {
    /// Ring degree.
    pub n: usize,
    /// log2 p.
    pub log_p: f64,
    /// log2 of the top-level q.
    pub log_q: f64,
    /// Noise bits of a fresh encryption.
    pub fresh: f64,
    /// Noise bits a key switch adds.
    pub key_switch: f64,
    /// Bits a ScMult adds.
    pub sc_mult: f64,
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
            fresh: (400.0 * n).log2(),
            key_switch: (l * n * 20.0).log2() + q_max,
            sc_mult: (n * params.p() as f64 / 2.0).log2(),
        }
    }
    /// After a rotation.
    pub fn rotate(&self, b: f64) -> f64 {
        log2_add(b, self.key_switch)
    }
    /// After `k` rotate-and-add steps (each doubles the terms and adds a key switch).
    pub fn ras(&self, b: f64, k: u32) -> f64 {
        (0..k).fold(b, |acc, _| self.rotate(acc) + 1.0)
    }
    /// After a ScMult.
    pub fn mult(&self, b: f64) -> f64 {
        b + self.sc_mult
    }
    /// After summing `k` terms.
    pub fn sum(&self, b: f64, k: usize) -> f64 {
        b + (k.max(1) as f64).log2()
    }
    /// Flooding bits for a kernel whose noise is `kernel` bits.
    pub fn flood_bits(&self, kernel: f64) -> u32 {
        (kernel + FLOOD_SECURITY_BITS as f64 + (self.n as f64).log2()).ceil() as u32
    }
    /// Bits the whole response needs: flooding + p + 1 + margin.
    pub fn needed_bits(&self, kernel: f64) -> u32 {
        (self.flood_bits(kernel) as f64 + self.log_p + 1.0).ceil() as u32 + MARGIN_BITS
    }
    /// Whether the parameters afford a kernel of this noise.
    pub fn affords(&self, kernel: f64) -> bool {
        (self.needed_bits(kernel) as f64) <= self.log_q.floor()
    }
}
