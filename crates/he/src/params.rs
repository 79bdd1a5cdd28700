//! BFV parameter sets: named presets, a validating builder, and the parameter hash that
//! two parties compare in their handshake.
//!
//! 128-bit security follows the HomomorphicEncryption.org standard (ternary/small secret,
//! classical): log2 q ≤ 27 / 54 / 109 / 218 / 438 / 881 bits for n = 1024 … 32768.
//! GAZELLE and GALA use n = 2048 with a 60-bit q; that is above the 54-bit bound, so
//! helina has **no n = 2048 preset**: such a set is rejected with
//! [`HeError::InsecureModulus`].
//!
//! fhe.rs has no special key-switching prime: the switch "to the last level" keeps the
//! first modulus of the chain, so presets put a small modulus first (small responses)
//! and large ones after it (noise budget for the kernel).

use std::sync::{Arc, OnceLock};

use prost::Message as _;

use fhe::bfv::{BfvParameters, BfvParametersBuilder};
use fhe_math::zq::primes::generate_prime;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{HeError, Result};
use crate::rounding::{Dropped, Rounding};

/// The variance of fhe.rs 0.1.1's secret-key coefficients (a centred binomial; its
/// `BfvParametersBuilder` default, which helina keeps).
pub const SECRET_KEY_VARIANCE: f64 = 10.0;

/// The NTT implementation this build uses. Builds with different NTT backends cannot
/// read each other's keys or ciphertexts, so it is part of [`Params::hash`].
pub const NTT_BACKEND: &str = if cfg!(feature = "tfhe-ntt-nightly") {
    "tfhe-ntt-nightly"
} else {
    "tfhe-ntt"
};

/// Largest log2 q with 128-bit security for ring degree `n` (HomomorphicEncryption.org
/// standard, Table 1, classical, ternary secret). `None` for unsupported degrees.
pub fn max_log_q_128(n: usize) -> Option<u32> {
    match n {
        1024 => Some(27),
        2048 => Some(54),
        4096 => Some(109),
        8192 => Some(218),
        16384 => Some(438),
        32768 => Some(881),
        _ => None,
    }
}

/// How the ciphertext moduli are given to the builder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Moduli {
    /// Bit sizes; the largest NTT-friendly primes of each size are chosen.
    Bits(Vec<u32>),
    /// Explicit primes.
    Explicit(Vec<u64>),
}

/// A serialisable description of a parameter set (what the handshake exchanges).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamsSpec {
    /// Preset name, or "custom".
    pub name: String,
    /// Ring degree.
    pub n: usize,
    /// Plaintext (= sharing) modulus.
    pub p: u64,
    /// Ciphertext moduli, first one kept at the last level.
    pub moduli: Moduli,
}

/// The factor c with P(|S| ≥ c·σ) ≤ 2^-40/n for a sum S of independent zero-mean terms
/// of total standard deviation σ, each bounded by `bound` (Bernstein's inequality:
/// P ≤ 2·exp(−t²/(2(σ² + bound·t/3))), solved for t = c·σ), so that the bound holds on
/// all n coefficients of a polynomial except with probability 2^-40.
fn bernstein_factor(n: f64, sigma: f64, bound: f64) -> f64 {
    let l = (2.0 * n).ln() + 40.0 * std::f64::consts::LN_2;
    let a = 2.0 * bound * l / (3.0 * sigma);
    (a + (a * a + 8.0 * l).sqrt()) / 2.0
}

/// A validated BFV parameter set.
#[derive(Clone)]
pub struct Params {
    name: String,
    n: usize,
    p: u64,
    moduli: Vec<u64>,
    pub(crate) fhe: Arc<BfvParameters>,
    wire_sizes: Arc<OnceLock<Vec<[usize; 2]>>>,
    weight_bound_bits: Option<u32>,
    session_responses_log2: u32,
}

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Params")
            .field("name", &self.name)
            .field("n", &self.n)
            .field("p", &self.p)
            .field("log_q", &self.log_q())
            .finish()
    }
}

impl PartialEq for Params {
    fn eq(&self, other: &Self) -> bool {
        self.n == other.n && self.p == other.p && self.moduli == other.moduli
    }
}
impl Eq for Params {}

/// The names of the presets, in the order `helina` lists them.
pub const PRESETS: &[&str] = &[
    "n4096",
    "n8192",
    "n8192-p24",
    "n8192-p28",
    "n8192-p32",
    "n8192-p36",
    "n8192-p40",
    "n8192-p44",
    "n8192-q164",
    "n8192-q109",
];

/// The 32-bit batching prime HELiKs uses: 2^32 − 2^20 + 1.
pub const P32: u64 = 4_293_918_721;

impl Params {
    /// A named preset:
    /// - `n4096`: n = 4096, q = 37+36+36 = 109 bits, 20-bit p. Logic tests and rotation-free kernels.
    /// - `n8192`: n = 8192, q = 38+45+45+45+45 = 218 bits, 20-bit p. The secure default.
    /// - `n8192-p24`, `n8192-p28`: n = 8192 with a 24-bit (q = 40+45+45+44+44) or 28-bit
    ///   (q = 46+43+43+43+43) batching p: the steps between 20 and 32 bits, for networks
    ///   whose accumulators outgrow 20 bits at the precision they need (comparisons and
    ///   OT messages grow with log p).
    /// - `n8192-p32`: as `n8192` with p = 4293918721 (32 bits) and q = 50+42+42+42+42.
    ///
    /// These four chains have five moduli below 2^50: helina's transforms and products
    /// run on 52-bit IFMA lanes (tfhe-ntt 0.7) on a CPU that has them, about twice as fast
    /// per modulus as on a wider one, and the five moduli give the coefficient-encoded
    /// kernels a level of three moduli (~130 bits) to query at. On a CPU without IFMA they
    /// cost about a quarter more than four wider moduli would. The first modulus (kept at
    /// the last level) is at least log2 p + 14 bits, so responses round to what
    /// decryption needs as they did on four moduli.
    /// - `n8192-p36`: n = 8192, a 36-bit batching p, q = 54+55+55+54 = 218 bits: the step
    ///   between 32 and 40 bits.
    /// - `n8192-p40`: n = 8192, a 40-bit batching p, q = 58+53+53+54 = 218 bits (models
    ///   whose accumulators need more than 32 bits; rotation-heavy methods may not afford
    ///   the flooding and are skipped by the planner).
    /// - `n8192-p44`: n = 8192, a 44-bit batching p, q = 60+52+52+54 = 218 bits: the
    ///   widest p the n = 8192 budget allows (every modulus must be 8 bits above p and
    ///   four of them fit 218 bits only up to p ≈ 2^44; the 60-bit first modulus keeps
    ///   the last-level response decryptable). Only kernels with little noise before
    ///   their product (rotation-free ones, HELiKs) afford the flooding; the planner
    ///   skips the others.
    /// - `n8192-q164`: n = 8192, q = 44+60+60 = 164 bits, 20-bit p (smaller, faster, less budget).
    /// - `n8192-q109`: n = 8192, q = 49+60 = 109 bits, 20-bit p (rotation-free kernels).
    pub fn preset(name: &str) -> Result<Self> {
        let (n, p_bits, p_fixed, bits): (usize, u32, Option<u64>, &[u32]) = match name {
            "n4096" => (4096, 20, None, &[37, 36, 36]),
            "n8192" => (8192, 20, None, &[38, 45, 45, 45, 45]),
            "n8192-p24" => (8192, 24, None, &[40, 45, 45, 44, 44]),
            "n8192-p28" => (8192, 28, None, &[46, 43, 43, 43, 43]),
            "n8192-p32" => (8192, 32, Some(P32), &[50, 42, 42, 42, 42]),
            "n8192-p36" => (8192, 36, None, &[54, 55, 55, 54]),
            "n8192-p40" => (8192, 40, None, &[58, 53, 53, 54]),
            "n8192-p44" => (8192, 44, None, &[60, 52, 52, 54]),
            "n8192-q164" => (8192, 20, None, &[44, 60, 60]),
            "n8192-q109" => (8192, 20, None, &[49, 60]),
            _ => {
                return Err(HeError::UnknownPreset {
                    name: name.to_string(),
                    known: PRESETS.join(", "),
                })
            }
        };
        let p = match p_fixed {
            Some(p) => p,
            None => batching_prime(p_bits, n)?,
        };
        ParamsBuilder::new()
            .name(name)
            .degree(n)
            .plaintext(p)
            .moduli(Moduli::Bits(bits.to_vec()))
            .build()
    }

    /// Rebuilds parameters from a spec (e.g. received in a handshake).
    pub fn from_spec(spec: &ParamsSpec) -> Result<Self> {
        ParamsBuilder::new()
            .name(&spec.name)
            .degree(spec.n)
            .plaintext(spec.p)
            .moduli(spec.moduli.clone())
            .build()
    }

    /// The spec of these parameters, with explicit moduli.
    pub fn spec(&self) -> ParamsSpec {
        ParamsSpec {
            name: self.name.clone(),
            n: self.n,
            p: self.p,
            moduli: Moduli::Explicit(self.moduli.clone()),
        }
    }

    /// Preset name or "custom".
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Ring degree = number of slots.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Slots per row (n/2).
    pub fn row_size(&self) -> usize {
        self.n / 2
    }
    /// Plaintext (sharing) modulus p.
    pub fn p(&self) -> u64 {
        self.p
    }
    /// These parameters for weights with a public bound `|w| ≤ 2^bits` (a fixed-point
    /// program's; `None`: only p bounds them, |w| ≤ p/2). Both
    /// parties derive it from the program they share; the noise model of
    /// coefficient-encoded kernels, whose plaintext coefficients are the weights
    /// themselves, uses it (slot-encoded plaintexts are uniform mod p whatever the
    /// weights). Equality and the hash ignore it.
    pub fn with_weight_bound(&self, bits: Option<u32>) -> Params {
        Params {
            weight_bound_bits: bits,
            ..self.clone()
        }
    }
    /// The bound of [`Params::with_weight_bound`], if any.
    pub fn weight_bound_bits(&self) -> Option<u32> {
        self.weight_bound_bits
    }
    /// These parameters for sessions of at most `2^log2` flooded responses: the
    /// flooding of each response is sized so that all of them together stay within the
    /// statistical distance the noise model targets (2^-40; `kernels::noise`). Both
    /// parties take it from the session's plan (the server's plan states it, so both
    /// derive the same query levels); the server refuses a session that would ask for
    /// more. 0 (the default): one response. Equality and the hash ignore it.
    pub fn with_session_responses(&self, log2: u32) -> Params {
        Params {
            session_responses_log2: log2,
            ..self.clone()
        }
    }
    /// log2 of the most responses a session may receive ([`Params::with_session_responses`]).
    pub fn session_responses_log2(&self) -> u32 {
        self.session_responses_log2
    }
    /// log2 of the largest weight magnitude: the bound, at most log2(p/2).
    pub fn weight_bound_log2(&self) -> f64 {
        let half = (self.p as f64 / 2.0).log2();
        self.weight_bound_bits
            .map_or(half, |b| (b as f64).min(half))
    }
    /// Bits of p (ceil(log2 p)).
    pub fn p_bits(&self) -> u32 {
        64 - self.p.leading_zeros()
    }
    /// The ciphertext moduli, first one kept at the last level.
    pub fn moduli(&self) -> &[u64] {
        &self.moduli
    }
    /// Number of levels (= number of moduli).
    pub fn levels(&self) -> usize {
        self.moduli.len()
    }
    /// Index of the last level (one modulus left).
    pub fn last_level(&self) -> usize {
        self.moduli.len() - 1
    }
    /// Sum of the moduli's bit lengths.
    pub fn log_q(&self) -> u32 {
        self.moduli.iter().map(|q| 64 - q.leading_zeros()).sum()
    }
    /// log2 of the modulus at `level` (as a float).
    pub fn log_q_at(&self, level: usize) -> f64 {
        self.moduli[..self.moduli.len() - level.min(self.moduli.len() - 1)]
            .iter()
            .map(|&q| (q as f64).log2())
            .sum()
    }

    /// Exact serialized size in bytes of a two-part ciphertext at `level`, in seeded
    /// form (c1 replaced by a 32-byte seed) or not.
    pub fn ct_wire_size(&self, level: usize, seeded: bool) -> usize {
        let sizes = self.wire_sizes.get_or_init(|| {
            (0..self.levels())
                .map(|l| {
                    // fhe.rs ciphertext polynomials are NTT form, variable-time allowed.
                    let poly = self
                        .fhe
                        .context_at_level(l)
                        .map(|ctx| {
                            let bytes: usize = ctx
                                .moduli_operators()
                                .iter()
                                .map(|q| q.serialization_length(self.n))
                                .sum();
                            crate::wire::RqWire {
                                representation: crate::wire::REPR_NTT,
                                degree: self.n as u32,
                                coefficients: vec![0; bytes],
                                allow_variable_time: true,
                            }
                            .encode_to_vec()
                        })
                        .unwrap_or_default();
                    let full = fhe::proto::bfv::Ciphertext {
                        c: vec![poly.clone(), poly.clone()],
                        seed: vec![],
                        level: l as u32,
                    };
                    let seeded = fhe::proto::bfv::Ciphertext {
                        c: vec![poly],
                        seed: vec![0u8; 32],
                        level: l as u32,
                    };
                    [full.encoded_len(), seeded.encoded_len()]
                })
                .collect()
        });
        sizes
            .get(level)
            .map(|s| s[usize::from(seeded)])
            .unwrap_or(0)
    }

    /// An upper bound (exact up to a few bytes of protobuf framing per key) on the
    /// bytes of the client's [`crate::PublicKeys`] for `galois`: the public key (a
    /// seeded ciphertext at level 0) and one seeded key-switching key (L polynomials
    /// at level 0) per Galois key the spec needs. A server reads the client's keys in a
    /// frame of at most this size (plus its message framing): keys the plan does not
    /// name cannot even arrive.
    pub fn public_keys_wire_bound(&self, galois: &crate::GaloisSpec) -> usize {
        let Ok(ctx) = self.fhe.context_at_level(0) else {
            return 0;
        };
        let poly = crate::wire::RqWire {
            representation: crate::wire::REPR_NTT_SHOUP,
            degree: self.n as u32,
            coefficients: vec![
                0;
                ctx.moduli_operators()
                    .iter()
                    .map(|q| q.serialization_length(self.n))
                    .sum()
            ],
            allow_variable_time: true,
        }
        .encoded_len();
        // per key: L polynomials (tag and length prefix each), a 32-byte seed, the
        // levels, the base and the exponent, and the key's own envelope
        let per_key = self.levels() * (poly + 8) + 32 + 64;
        // fhe.rs writes the public key seeded (c1 as a seed)
        let public_key = self.ct_wire_size(0, true) + 16;
        public_key + galois.key_count(self.n / 2) * per_key + 16
    }

    /// Exact serialized size in bytes of a selected ciphertext at `level` (see
    /// [`crate::Backend::select_coeffs`]) keeping `kept` coefficients in `runs` runs:
    /// c1 whole, c0 at the kept coefficients (padded to a multiple of 8), the runs as
    /// fixed 32-bit pairs.
    pub fn selected_ct_wire_size(&self, level: usize, runs: usize, kept: usize) -> usize {
        let Ok(ctx) = self.fhe.context_at_level(level) else {
            return 0;
        };
        let ops = ctx.moduli_operators();
        let rq = |repr: i32, values: usize, vt: bool| {
            crate::wire::RqWire {
                representation: repr,
                degree: self.n as u32,
                coefficients: vec![0; ops.iter().map(|q| q.serialization_length(values)).sum()],
                allow_variable_time: vt,
            }
            .encode_to_vec()
        };
        crate::wire::CtWire {
            c: vec![
                rq(crate::wire::REPR_POWER_BASIS, kept.div_ceil(8) * 8, false),
                rq(crate::wire::REPR_NTT, self.n, true),
            ],
            seed: vec![],
            level: level as u32,
            keep: vec![0; 2 * runs],
            ..Default::default()
        }
        .encoded_len()
    }

    /// The moduli of `level` (the first `levels − level`).
    pub fn moduli_at(&self, level: usize) -> &[u64] {
        &self.moduli[..self.moduli.len() - level.min(self.moduli.len() - 1)]
    }

    /// How a response (a flooded ciphertext at the last level, see
    /// `kernels::share_output`) is rounded for the wire: as much of c0 and c1 as
    /// decryption can lose. With T = q_0/(2p) the decryption bound, the flooding takes
    /// at most T/4 (the noise budget keeps 2 bits of margin above it, and switching down
    /// scales it), the switch to the last level adds its own rounding (≤ 1/2 +
    /// 9·√(10n/12), fhe.rs's secret key has variance 10), and T/64 is left for
    /// everything else. Of the rest, c1 takes up to 60%: the rounding error δ of a
    /// flooded (uniform) c1 is uniform with |δ_i| ≤ 2^(j−1), variance 2^(2(j−1))/3, and
    /// reaches the phase as δ·s, a sum of n independent terms of variance
    /// 2^(2(j−1))·10/3, each at most 20·2^(j−1) (the secret's support): by Bernstein's
    /// inequality it stays below c·√(10n/3)·2^(j−1) except with probability 2^-40 over
    /// the n coefficients (`bernstein_factor`: c ≈ 10.3 at n = 8192); c0 takes what
    /// remains.
    pub fn response_rounding(&self) -> Rounding {
        let q0 = self.moduli[0];
        let n = self.n as f64;
        let t = q0 as f64 / (2.0 * self.p as f64);
        let switch = 0.5 + 9.0 * (SECRET_KEY_VARIANCE * n / 12.0).sqrt();
        let avail = t * (0.75 - 1.0 / 64.0) - switch;
        if avail < 2.0 {
            return Rounding::NONE;
        }
        let top = 64 - (q0 - 1).leading_zeros();
        let sigma = (SECRET_KEY_VARIANCE * n / 3.0).sqrt();
        let spread = bernstein_factor(n, sigma, 2.0 * SECRET_KEY_VARIANCE) * sigma;
        // largest j with spread·2^(j−1) ≤ 0.6·avail
        let c1_bits = (1.0 + (0.6 * avail / spread).log2())
            .floor()
            .clamp(0.0, (top - 1) as f64) as u32;
        let c1_err = if c1_bits > 0 {
            spread * ((c1_bits - 1) as f64).exp2()
        } else {
            0.0
        };
        let c0_bits = (1.0 + (avail - c1_err).log2())
            .floor()
            .clamp(0.0, (top - 1) as f64) as u32;
        Rounding {
            c0: Dropped {
                limbs: 0,
                bits: c0_bits,
            },
            c1: Dropped {
                limbs: 0,
                bits: c1_bits,
            },
        }
    }

    /// Exact serialized size of a ciphertext at `level` rounded by `r` (seeded: c1 as a
    /// seed; `selected`: (runs, kept) of a selected ciphertext's c0). Without rounding,
    /// [`Params::ct_wire_size`] or [`Params::selected_ct_wire_size`].
    pub fn rounded_ct_wire_size(
        &self,
        level: usize,
        seeded: bool,
        selected: Option<(usize, usize)>,
        r: Rounding,
    ) -> usize {
        if r.is_none() {
            return match selected {
                None => self.ct_wire_size(level, seeded),
                Some((runs, kept)) => self.selected_ct_wire_size(level, runs, kept),
            };
        }
        let q = self.moduli_at(level);
        let c0_count = selected.map_or(self.n, |(_, kept)| kept);
        let mut c = vec![vec![0u8; crate::rounding::packed_len(q, r.c0, c0_count)]];
        if !seeded {
            c.push(vec![0u8; crate::rounding::packed_len(q, r.c1, self.n)]);
        }
        crate::wire::CtWire {
            c,
            seed: if seeded { vec![0u8; 32] } else { vec![] },
            level: level as u32,
            keep: vec![0; 2 * selected.map_or(0, |(runs, _)| runs)],
            c0_limbs: r.c0.limbs,
            c0_bits: r.c0.bits,
            c1_limbs: r.c1.limbs,
            c1_bits: r.c1.bits,
        }
        .encoded_len()
    }

    /// A hash identifying these parameters *and* this build's NTT backend (hex, 32 chars).
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"helina-params-v1");
        h.update((self.n as u64).to_le_bytes());
        h.update(self.p.to_le_bytes());
        for q in &self.moduli {
            h.update(q.to_le_bytes());
        }
        h.update(NTT_BACKEND.as_bytes());
        h.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Centered representative of `x mod p` in (−p/2, p/2].
    pub fn center(&self, x: u64) -> i64 {
        let x = x % self.p;
        if x > self.p / 2 {
            x as i64 - self.p as i64
        } else {
            x as i64
        }
    }

    /// Reduces a signed value into [0, p).
    pub fn reduce(&self, x: i64) -> u64 {
        x.rem_euclid(self.p as i64) as u64
    }
}

/// The largest `bits`-bit prime p ≡ 1 (mod 2n).
pub fn batching_prime(bits: u32, n: usize) -> Result<u64> {
    generate_prime(bits as usize, 2 * n as u64, 1u64 << bits).ok_or(HeError::NoBatching {
        p: 0,
        n,
        two_n: 2 * n,
    })
}

/// Builder for [`Params`]; `build()` checks every invariant.
#[derive(Clone, Debug, Default)]
pub struct ParamsBuilder {
    name: Option<String>,
    n: usize,
    p: u64,
    moduli: Option<Moduli>,
}

impl ParamsBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }
    /// Name shown in reports.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }
    /// Ring degree.
    pub fn degree(mut self, n: usize) -> Self {
        self.n = n;
        self
    }
    /// Plaintext modulus.
    pub fn plaintext(mut self, p: u64) -> Self {
        self.p = p;
        self
    }
    /// Ciphertext moduli.
    pub fn moduli(mut self, m: Moduli) -> Self {
        self.moduli = Some(m);
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Params> {
        let n = self.n;
        let max_log_q = max_log_q_128(n).ok_or(HeError::UnsupportedDegree { n })?;
        let two_n = 2 * n;
        let moduli = match self.moduli.unwrap_or(Moduli::Bits(vec![])) {
            Moduli::Bits(bits) => {
                let mut out: Vec<u64> = Vec::with_capacity(bits.len());
                for (index, &b) in bits.iter().enumerate() {
                    if !(10..=62).contains(&b) {
                        return Err(HeError::InvalidModulus {
                            index,
                            q: 1u64.checked_shl(b).unwrap_or(u64::MAX),
                            two_n,
                        });
                    }
                    let mut upper = 1u64 << b;
                    let q = loop {
                        match generate_prime(b as usize, two_n as u64, upper) {
                            Some(q) if out.contains(&q) => upper = q,
                            Some(q) => break q,
                            None => {
                                return Err(HeError::InvalidModulus {
                                    index,
                                    q: upper,
                                    two_n,
                                })
                            }
                        }
                    };
                    out.push(q);
                }
                out
            }
            Moduli::Explicit(m) => {
                for (index, &q) in m.iter().enumerate() {
                    let bits = 64 - q.leading_zeros();
                    if !(10..=62).contains(&bits)
                        || q % two_n as u64 != 1
                        || !fhe_util::is_prime(q)
                        || m[..index].contains(&q)
                    {
                        return Err(HeError::InvalidModulus { index, q, two_n });
                    }
                }
                m
            }
        };
        if moduli.is_empty() {
            return Err(HeError::ChainTooShort { min: 1, actual: 0 });
        }
        let log_q: u32 = moduli.iter().map(|q| 64 - q.leading_zeros()).sum();
        if log_q > max_log_q {
            return Err(HeError::InsecureModulus {
                n,
                log_q,
                max_log_q,
            });
        }
        let p = self.p;
        if p < 3 || p % two_n as u64 != 1 || !fhe_util::is_prime(p) {
            return Err(HeError::NoBatching { p, n, two_n });
        }
        let p_bits = 64 - p.leading_zeros();
        let q_min_bits = moduli
            .iter()
            .map(|q| 64 - q.leading_zeros())
            .min()
            .unwrap_or(0);
        if p_bits + 8 > q_min_bits {
            return Err(HeError::PlaintextTooLarge {
                p_bits,
                q_bits: q_min_bits,
            });
        }
        let fhe = BfvParametersBuilder::new()
            .set_degree(n)
            .set_plaintext_modulus(p)
            .set_moduli(&moduli)
            .build_arc()?;
        Ok(Params {
            name: self.name.unwrap_or_else(|| "custom".into()),
            n,
            p,
            moduli,
            fhe,
            wire_sizes: Arc::new(OnceLock::new()),
            weight_bound_bits: None,
            session_responses_log2: 0,
        })
    }
}
