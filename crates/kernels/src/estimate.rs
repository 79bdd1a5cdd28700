//! Predicted cost of a planned layer without running any cryptography: the layer runs
//! on the counting backend ([`he::Count`]) with zero weights and input, and its
//! operation counts are priced with a [`CostModel`] (per-operation microseconds) and
//! a link (bytes / bandwidth + round trips). `helina server --method auto` picks the
//! cheapest method this way; `helina bench matvec|conv` prints measured next to
//! predicted times.
//!
//! The default model holds the single-thread figures measured for fhe.rs at n = 8192 on
//! this project's machine kind (DEVELOPERS.md): plain rotation 2.7 ms, hoisted
//! rotation 0.8 ms after a 1.5 ms decomposition, fused product 58 µs per term,
//! addition 40 µs, switch to the last level 2.7 ms; other ring degrees scale linearly
//! in n·L (the number of RNS coefficients).

use he::{Backend, Count, OpCounts, Params};

use crate::error::Result;
use crate::layer::LinearLayer;
use crate::share::FloodPool;

/// Per-operation costs in microseconds at one parameter set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// A plain rotation (Perm).
    pub perm_us: f64,
    /// A hoisting decomposition (DecPerm).
    pub dec_perm_us: f64,
    /// A hoisted rotation (HstPerm).
    pub hst_perm_us: f64,
    /// One ciphertext × plaintext product inside a fused sum.
    pub sc_mult_us: f64,
    /// One addition.
    pub add_us: f64,
    /// `share_output` per response ciphertext (mask, flood, switch to the last level).
    pub share_us: f64,
}

impl CostModel {
    /// The measured n = 8192, 218-bit figures, scaled by n·L/(8192·4) for other sets.
    pub fn reference(params: &Params) -> Self {
        let s = (params.n() * params.levels()) as f64 / (8192.0 * 4.0);
        Self {
            perm_us: 2700.0 * s,
            dec_perm_us: 1500.0 * s,
            hst_perm_us: 800.0 * s,
            sc_mult_us: 58.0 * s,
            add_us: 40.0 * s,
            share_us: 2800.0 * s,
        }
    }

    /// Predicted server time (ms) of a layer with these counts and response size.
    pub fn server_ms(&self, c: &OpCounts, output_cts: usize) -> f64 {
        (output_cts as f64 * self.share_us
            + c.perm as f64 * self.perm_us
            + c.dec_perm as f64 * self.dec_perm_us
            + c.hst_perm as f64 * self.hst_perm_us
            + c.sc_mult as f64 * self.sc_mult_us
            + c.add.saturating_sub(c.fused_add) as f64 * self.add_us)
            / 1e3
    }
}

/// What a layer is predicted to cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// The server's online operation counts (compute + `share_output`).
    pub counts: OpCounts,
    /// Predicted server time, ms.
    pub server_ms: f64,
    /// Query bytes (client → server).
    pub bytes_up: u64,
    /// Response bytes (server → client).
    pub bytes_down: u64,
    /// Galois keys the client uploads in setup.
    pub galois_keys: usize,
}

impl Estimate {
    /// Predicted time (ms) with the transfer over a link of `bytes_per_s` and `rtt_ms`
    /// (one round trip per query; infinite bandwidth when `bytes_per_s` is 0).
    pub fn total_ms(&self, bytes_per_s: f64, rtt_ms: f64) -> f64 {
        let wire = if bytes_per_s > 0.0 {
            (self.bytes_up + self.bytes_down) as f64 / bytes_per_s * 1e3
        } else {
            0.0
        };
        self.server_ms + wire + rtt_ms
    }
}

/// Runs the layer on the counting backend and prices it. Fails like the real run would
/// (for example when the parameters cannot afford the flooding).
pub fn estimate<L: LinearLayer>(plan: &L, params: &Params, model: &CostModel) -> Result<Estimate> {
    let galois = plan.galois();
    let galois_keys = galois.key_count(params.n() / 2);
    let b = Count::real(params, galois);
    let m = plan.encode_weights(&b, &vec![0; plan.weight_len()])?;
    let x = vec![0; plan.input_len()];
    b.take();
    let q = plan.query(&b, &x)?;
    let bytes_up = q.iter().map(|c| b.wire_size(c) as u64).sum();
    let mut pool = FloodPool::new(plan.flood_bits(params)?);
    pool.fill(&b, plan.output_cts())?;
    b.take();
    let (resp, _) = plan.respond(&b, &m, &q, &mut pool)?;
    let counts = b.take();
    let bytes_down = resp.iter().map(|c| b.wire_size(c) as u64).sum();
    Ok(Estimate {
        server_ms: model.server_ms(&counts, plan.output_cts()),
        counts,
        bytes_up,
        bytes_down,
        galois_keys,
    })
}
