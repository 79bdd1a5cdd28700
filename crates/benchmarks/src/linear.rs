//! The measurement shared by `bench matvec` and `bench conv`: one linear layer, one
//! method, timed as client encode and encrypt, per-query offline flooding, server
//! kernel and share_output, client decrypt; with op counts, bytes, keys, the noise
//! budget left, a reconstruction check, and the server time predicted from op counts ×
//! per-op costs measured in the same run.

use rayon::prelude::*;
use std::time::Instant;

use he::{Backend, Bfv, Counting, OpCounts, Params};
use kernels::LinearLayer;
use rand::Rng;
use serde::Serialize;

use crate::median_us;
use crate::Result;

#[derive(Serialize, Default, Clone)]
pub struct Row {
    pub method: String,
    pub params: String,
    pub correct: bool,
    pub query_ms: f64,
    pub online_ms: f64,
    pub offline_ms: f64,
    pub flood_ms: f64,
    pub client_ms: f64,
    pub server_ms: f64,
    pub kernel_ms: f64,
    pub share_ms: f64,
    /// The server's deserialisation of the query and serialisation of the response.
    pub server_wire_ms: f64,
    pub predicted_server_ms: f64,
    pub perm: u64,
    pub hst_perm: u64,
    pub dec_perm: u64,
    pub sc_mult: u64,
    pub add: u64,
    pub fused_add: u64,
    pub ntt: u64,
    pub intt: u64,
    pub galois_keys: usize,
    pub extra_hops: bool,
    pub bytes_up: u64,
    pub bytes_up_pk_query: u64,
    pub bytes_down: u64,
    pub key_bytes: usize,
    pub noise_budget_left: Option<u32>,
    pub speedup_vs_baseline: Option<f64>,
}

/// Per-op costs (µs) measured in this run, for the Σ(count × cost) prediction.
struct Costs {
    perm: f64,
    dec_perm: f64,
    hst_perm: f64,
    sc_mult: f64,
    add: f64,
    /// share_output per response ciphertext: encode r, add_plain, add, switch.
    share: f64,
    /// Deserialising one query ciphertext (seeded, top level).
    deserialize: f64,
    /// Serialising one response ciphertext (last level).
    serialize: f64,
}

fn measure_costs(b: &Bfv, layout_steps: &[i64]) -> Result<Costs> {
    let n = b.slots().n;
    let mut rng = rand::rng();
    let v: Vec<u64> = (0..n).map(|_| rng.random_range(0..b.slots().p)).collect();
    let ct = b.encrypt_pk(&b.encode(&v)?)?;
    let ct2 = b.encrypt_pk(&b.encode(&v)?)?;
    let pt = b.prepare(&v)?;
    let query = b.serialize(&b.encrypt_sym(&b.encode(&v)?)?)?;
    let last = b.switch_to_last(&ct)?;
    let terms: Vec<&he::BfvCt> = vec![&ct; 8];
    let pts: Vec<&he::BfvPrepared> = vec![&pt; 8];
    let step = layout_steps.first().copied();
    let (perm, dec_perm, hst_perm) = match step {
        Some(s) => {
            let h = b.hoist(&ct)?;
            (
                median_us(5, || b.rotate_rows(&ct, s)),
                median_us(5, || b.hoist(&ct)),
                median_us(5, || b.rotate_hoisted(&h, s)),
            )
        }
        None => (0.0, 0.0, 0.0),
    };
    Ok(Costs {
        perm,
        dec_perm,
        hst_perm,
        sc_mult: median_us(5, || b.dot(&terms, &pts)) / 8.0,
        add: median_us(5, || b.add(&ct, &ct2)),
        share: median_us(5, || -> he::Result<_> {
            let m = b.add_plain(&ct, &b.encode(&v)?)?;
            b.switch_to_last(&b.add(&m, &ct2)?)
        }),
        deserialize: median_us(5, || b.deserialize(&query)),
        serialize: median_us(5, || b.serialize(&last)),
    })
}

fn predict(c: &OpCounts, queries: usize, outputs: usize, k: &Costs) -> f64 {
    (queries as f64 * k.deserialize
        + outputs as f64 * (k.share + k.serialize)
        + c.perm as f64 * k.perm
        + c.dec_perm as f64 * k.dec_perm
        + c.hst_perm as f64 * k.hst_perm
        + c.sc_mult as f64 * k.sc_mult
        + (c.add - c.fused_add) as f64 * k.add)
        / 1e3
}

/// Measures one layer on `params` (`reps` queries, median by query time); with
/// `on_the_fly` the weights are encoded per query: the kernel's time is then
/// `compute_on_the_fly`'s, encoding included, and nothing is encoded offline
/// (`offline_ms` 0).
pub fn measure<L: LinearLayer>(
    layout: &L,
    params: &Params,
    w: &[i64],
    xr: &[u64],
    want: &[u64],
    reps: usize,
    on_the_fly: bool,
) -> Result<Row> {
    layout.flood_bits(params)?; // fails early when the parameters cannot afford it
    let client = Bfv::keygen(params, layout.galois())?;
    let server = Counting::new(Bfv::server(params, client.public_keys())?);
    let p = params.p();

    let t = Instant::now();
    // On the fly nothing is encoded before a query.
    let m = if on_the_fly {
        None
    } else {
        Some(layout.encode_weights(&server, w)?)
    };
    let offline_ms = t.elapsed().as_secs_f64() * 1e3;

    let mut samples: Vec<Row> = Vec::new();
    for _ in 0..reps.max(1) {
        let mut row = Row::default();
        let t = Instant::now();
        let q = layout.query(&client, xr)?;
        let wire: Vec<Vec<u8>> = q
            .par_iter()
            .map(|c| client.serialize(c))
            .collect::<std::result::Result<_, _>>()?;
        let client_enc = t.elapsed().as_secs_f64() * 1e3;
        row.bytes_up = wire.iter().map(|b| b.len() as u64).sum();
        let t = Instant::now();
        let mut pool = layout.flood_pool(params)?;
        pool.fill(&server, layout.output_cts())?;
        row.flood_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let q: Vec<_> = wire
            .par_iter()
            .map(|b| server.deserialize(b))
            .collect::<std::result::Result<_, _>>()?;
        let server_deserialize = t.elapsed().as_secs_f64() * 1e3;
        server.take();
        let t = Instant::now();
        let out = match &m {
            Some(m) => layout.compute(&server, m, &q)?,
            None => layout.compute_on_the_fly(&server, w, &q)?,
        };
        row.kernel_ms = t.elapsed().as_secs_f64() * 1e3;
        let counts = server.take();
        let t = Instant::now();
        let (response, server_share) = layout.share_response(&server, out, &mut pool)?;
        row.share_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let resp: Vec<Vec<u8>> = response
            .par_iter()
            .map(|c| server.serialize(c))
            .collect::<std::result::Result<_, _>>()?;
        row.server_wire_ms = server_deserialize + t.elapsed().as_secs_f64() * 1e3;
        row.bytes_down = resp.iter().map(|b| b.len() as u64).sum();
        let t = Instant::now();
        let resp: Vec<_> = resp
            .par_iter()
            .map(|b| client.deserialize(b))
            .collect::<std::result::Result<_, _>>()?;
        let client_share = layout.decrypt(&client, &resp)?;
        let client_dec = t.elapsed().as_secs_f64() * 1e3;
        row.noise_budget_left = resp
            .iter()
            .filter_map(|c| client.noise_budget(c).ok().flatten())
            .min();
        row.correct = client_share
            .iter()
            .zip(&server_share)
            .map(|(c, s)| (c + s) % p)
            .eq(want.iter().copied());
        row.client_ms = client_enc + client_dec;
        row.server_ms = row.kernel_ms + row.share_ms + row.server_wire_ms;
        row.online_ms = row.client_ms + row.server_ms;
        row.query_ms = row.online_ms + row.flood_ms;
        row.perm = counts.perm;
        row.hst_perm = counts.hst_perm;
        row.dec_perm = counts.dec_perm;
        row.sc_mult = counts.sc_mult;
        row.add = counts.add;
        row.fused_add = counts.fused_add;
        row.ntt = counts.ntt;
        row.intt = counts.intt;
        samples.push(row);
    }
    samples.sort_by(|a, b| a.query_ms.total_cmp(&b.query_ms));
    let mut row = samples[samples.len() / 2].clone();
    row.correct = samples.iter().all(|s| s.correct);
    let costs = measure_costs(&client, &layout.galois().steps().collect::<Vec<_>>())?;
    let c = OpCounts {
        perm: row.perm,
        dec_perm: row.dec_perm,
        hst_perm: row.hst_perm,
        sc_mult: row.sc_mult,
        add: row.add,
        fused_add: row.fused_add,
        ..Default::default()
    };
    row.predicted_server_ms = predict(&c, layout.query_cts(), layout.output_cts(), &costs);
    row.method = layout.method_name();
    row.params = params.name().to_string();
    row.offline_ms = offline_ms;
    row.galois_keys = layout.galois().key_count(params.n() / 2);
    row.key_bytes = client.public_keys().galois_bytes() + client.public_keys().public_key_bytes();
    row.bytes_up_pk_query = (layout.query_cts() * params.ct_wire_size(0, false)) as u64;
    Ok(row)
}

/// One linear benchmark: what was measured, and a row per method.
#[derive(Serialize, Clone)]
pub struct LinearReport {
    /// What was measured (shape, parameters, repetitions, threads).
    pub title: String,
    /// The rows, with the speed-up against the baseline method filled in.
    pub rows: Vec<Row>,
}

impl LinearReport {
    /// The report with the speed-up column against `baseline` (the first row of that
    /// method, with or without a packing suffix such as `gazelle-out (padded)`).
    pub fn new(title: String, baseline: &str, mut rows: Vec<Row>) -> Self {
        let base = rows
            .iter()
            .find(|r| {
                r.method == baseline
                    || r.method
                        .strip_prefix(baseline)
                        .is_some_and(|rest| rest.starts_with(" ("))
            })
            .map(|r| r.server_ms);
        for r in &mut rows {
            r.speedup_vs_baseline = base.map(|h| h / r.server_ms);
        }
        LinearReport { title, rows }
    }

    /// Whether every method's shares reconstructed the plaintext result.
    pub fn correct(&self) -> bool {
        self.rows.iter().all(|r| r.correct)
    }
}
