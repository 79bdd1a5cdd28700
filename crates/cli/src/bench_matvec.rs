//! `helina bench matvec`: every method on the same W and x, side by side, with op
//! counts, times split into offline / client / server (kernel + share_output) /
//! client, bytes, keys, noise budget left and a reconstruction check.

use std::time::Instant;

use clap::Args;
use he::{Backend, Bfv, Counting, Layout, OpCounts, Params, SlotInfo};
use kernels::{noise::NoiseModel, share_output, FloodPool, MatvecPlan, Method};
use rand::Rng;
use serde::Serialize;

use crate::timing::{median_us, progress};

#[derive(Args)]
pub struct MatvecArgs {
    /// Output rows n_o.
    #[arg(long, default_value_t = 16)]
    rows: usize,
    /// Input columns n_i.
    #[arg(long, default_value_t = 128)]
    cols: usize,
    /// Methods: `all` or a comma-separated list (naive,diagonal,bsgs,hybrid,gala,heliks).
    #[arg(long, default_value = "all")]
    method: String,
    /// Parameter preset, or `auto` (per method, the smallest chain whose modelled
    /// budget after share_output stays ≥ 10 bits).
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Galois-key budget per method.
    #[arg(long, default_value_t = kernels::rotate::DEFAULT_KEY_BUDGET)]
    key_budget: usize,
    /// Queries timed per method (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON rows instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default, Clone)]
struct Row {
    method: String,
    params: String,
    correct: bool,
    query_ms: f64,
    online_ms: f64,
    offline_ms: f64,
    flood_ms: f64,
    client_ms: f64,
    server_ms: f64,
    kernel_ms: f64,
    share_ms: f64,
    predicted_server_ms: f64,
    perm: u64,
    hst_perm: u64,
    dec_perm: u64,
    sc_mult: u64,
    add: u64,
    fused_add: u64,
    ntt: u64,
    intt: u64,
    galois_keys: usize,
    extra_hops: bool,
    bytes_up: u64,
    bytes_up_pk_query: u64,
    bytes_down: u64,
    key_bytes: usize,
    noise_budget_left: Option<u32>,
    speedup_vs_hybrid: Option<f64>,
}

fn methods(s: &str) -> Result<Vec<Method>, String> {
    if s == "all" {
        return Ok(Method::ALL.to_vec());
    }
    s.split(',')
        .map(|m| Method::parse(m.trim()).ok_or(format!("unknown method `{m}`")))
        .collect()
}

fn slots(p: &Params) -> SlotInfo {
    SlotInfo {
        n: p.n(),
        p: p.p(),
        layout: Layout::TwoRows,
    }
}

/// The smallest preset (by log2 q, n = 8192 first) on which `method` keeps ≥ 10 bits.
fn auto_params(method: Method, n_o: usize, n_i: usize, budget: usize) -> Result<Params, String> {
    let mut cands: Vec<Params> = ["n8192-q109", "n8192-q164", "n8192", "n8192-p32"]
        .iter()
        .filter_map(|n| Params::preset(n).ok())
        .collect();
    cands.sort_by_key(|p| p.log_q());
    for p in cands {
        let plan = MatvecPlan::with_key_budget(method, n_o, n_i, slots(&p), Some(budget))
            .map_err(|e| e.to_string())?;
        let m = NoiseModel::new(&p);
        let k = plan.kernel_noise(&m);
        if m.affords(k) && m.log_q.floor() - m.needed_bits(k) as f64 + 2.0 >= 10.0 {
            return Ok(p);
        }
    }
    Err(format!("no preset affords {method} on {n_o}x{n_i}"))
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
}

fn measure_costs(b: &Bfv, plan_steps: &[i64]) -> Result<Costs, Box<dyn std::error::Error>> {
    let n = b.slots().n;
    let mut rng = rand::rng();
    let v: Vec<u64> = (0..n).map(|_| rng.random_range(0..b.slots().p)).collect();
    let ct = b.encrypt_pk(&b.encode(&v)?)?;
    let ct2 = b.encrypt_pk(&b.encode(&v)?)?;
    let pt = b.prepare(&v)?;
    let terms: Vec<&he::BfvCt> = vec![&ct; 8];
    let pts: Vec<&he::BfvPrepared> = vec![&pt; 8];
    let step = plan_steps.first().copied();
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
    })
}

fn predict(c: &OpCounts, outputs: usize, k: &Costs) -> f64 {
    (outputs as f64 * k.share
        + c.perm as f64 * k.perm
        + c.dec_perm as f64 * k.dec_perm
        + c.hst_perm as f64 * k.hst_perm
        + c.sc_mult as f64 * k.sc_mult
        + (c.add - c.fused_add) as f64 * k.add)
        / 1e3
}

fn run_method(
    method: Method,
    a: &MatvecArgs,
    w: &[i64],
    x: &[i64],
) -> Result<Row, Box<dyn std::error::Error>> {
    let params = if a.params == "auto" {
        auto_params(method, a.rows, a.cols, a.key_budget)?
    } else {
        Params::preset(&a.params)?
    };
    let plan =
        MatvecPlan::with_key_budget(method, a.rows, a.cols, slots(&params), Some(a.key_budget))?;
    let bits = plan.flood_bits(&params)?;
    let client = Bfv::keygen(&params, plan.galois())?;
    let server = Counting::new(Bfv::server(&params, client.public_keys())?);
    let p = params.p();
    let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
    let want: Vec<u64> = (0..a.rows)
        .map(|r| {
            let s: i128 = (0..a.cols)
                .map(|c| w[r * a.cols + c] as i128 * x[c] as i128)
                .sum();
            s.rem_euclid(p as i128) as u64
        })
        .collect();

    let t = Instant::now();
    let m = plan.encode(&server, w)?;
    let offline_ms = t.elapsed().as_secs_f64() * 1e3;

    let mut samples: Vec<Row> = Vec::new();
    for _ in 0..a.reps.max(1) {
        let mut row = Row::default();
        // Client: encode + encrypt (seeded), serialize.
        let t = Instant::now();
        let q = plan.query(&client, &xr)?;
        let wire: Vec<Vec<u8>> = q
            .iter()
            .map(|c| client.serialize(c))
            .collect::<Result<_, _>>()?;
        let client_enc = t.elapsed().as_secs_f64() * 1e3;
        row.bytes_up = wire.iter().map(|b| b.len() as u64).sum();
        // Per-query offline: the flooding encryptions of zero.
        let t = Instant::now();
        let mut pool = FloodPool::new(bits);
        pool.fill(&server, plan.output_cts())?;
        row.flood_ms = t.elapsed().as_secs_f64() * 1e3;
        server.take();
        // Server online.
        let q: Vec<_> = wire
            .iter()
            .map(|b| server.deserialize(b))
            .collect::<Result<_, _>>()?;
        let t = Instant::now();
        let out = plan.compute(&server, &m, &q)?;
        row.kernel_ms = t.elapsed().as_secs_f64() * 1e3;
        let counts = server.take();
        let t = Instant::now();
        let shared = share_output(&server, out, &mut pool)?;
        let server_share = plan.finish(&shared.server_slots)?;
        row.share_ms = t.elapsed().as_secs_f64() * 1e3;
        let resp: Vec<Vec<u8>> = shared
            .response
            .iter()
            .map(|c| server.serialize(c))
            .collect::<Result<_, _>>()?;
        row.bytes_down = resp.iter().map(|b| b.len() as u64).sum();
        // Client: decrypt + finish.
        let t = Instant::now();
        let resp: Vec<_> = resp
            .iter()
            .map(|b| client.deserialize(b))
            .collect::<Result<_, _>>()?;
        let client_share = plan.decrypt(&client, &resp)?;
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
        row.server_ms = row.kernel_ms + row.share_ms;
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
    let costs = measure_costs(&client, &plan.galois().steps().collect::<Vec<_>>())?;
    let c = OpCounts {
        perm: row.perm,
        dec_perm: row.dec_perm,
        hst_perm: row.hst_perm,
        sc_mult: row.sc_mult,
        add: row.add,
        fused_add: row.fused_add,
        ..Default::default()
    };
    row.predicted_server_ms = predict(&c, plan.output_cts(), &costs);
    row.method = method.to_string();
    row.params = params.name().to_string();
    row.offline_ms = offline_ms;
    row.galois_keys = plan.galois().key_count(params.n() / 2);
    row.extra_hops = plan.rotations().composed();
    row.key_bytes = client.public_keys().galois_bytes() + client.public_keys().public_key_bytes();
    row.bytes_up_pk_query = (plan.query_cts() * params.ct_wire_size(0, false)) as u64;
    Ok(row)
}

pub fn run(a: &MatvecArgs) -> Result<(), Box<dyn std::error::Error>> {
    let list = methods(&a.method)?;
    let mut rng = rand::rng();
    let w: Vec<i64> = (0..a.rows * a.cols)
        .map(|_| rng.random_range(-128..=128))
        .collect();
    let x: Vec<i64> = (0..a.cols).map(|_| rng.random_range(-128..=128)).collect();
    let pb = progress(list.len() as u64, "bench matvec");
    let mut rows = Vec::new();
    for m in list {
        pb.set_message(format!("bench matvec: {m}"));
        rows.push(run_method(m, a, &w, &x)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let hybrid = rows
        .iter()
        .find(|r| r.method == "hybrid")
        .map(|r| r.server_ms);
    for r in &mut rows {
        r.speedup_vs_hybrid = hybrid.map(|h| h / r.server_ms);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "bench matvec {}x{} (n_o x n_i), params {}, key budget {}, median of {} queries, single thread",
        a.rows, a.cols, a.params, a.key_budget, a.reps
    );
    println!(
        "{:<9} {:>10} {:>5} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>4} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>5} {:>7} {:>3}",
        "method", "params", "Perm", "Hst", "Dec", "ScMul", "Add", "NTT", "iNTT", "keys", "offl ms",
        "query ms", "online", "server", "kernel", "share", "pred", "client", "up B", "down B",
        "noise", "x hyb", "ok"
    );
    for r in &rows {
        println!(
            "{:<9} {:>10} {:>5} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>4} {:>9.1} {:>9.1} {:>9.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>9} {:>9} {:>5} {:>7} {:>3}",
            r.method, r.params, r.perm, r.hst_perm, r.dec_perm, r.sc_mult, r.add, r.ntt, r.intt,
            r.galois_keys, r.offline_ms, r.query_ms, r.online_ms, r.server_ms, r.kernel_ms,
            r.share_ms, r.predicted_server_ms, r.client_ms, r.bytes_up, r.bytes_down,
            r.noise_budget_left.map_or("-".into(), |v| v.to_string()),
            r.speedup_vs_hybrid.map_or("-".into(), |v| format!("{v:.2}")),
            if r.correct { "yes" } else { "NO" }
        );
    }
    println!(
        "key bytes (one-time upload, Galois + public key): {}",
        rows.iter()
            .map(|r| format!("{} {}", r.method, r.key_bytes))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(r) = rows.first() {
        println!(
            "seeded symmetric query: {} B up vs {} B as a public-key query ({:.1}x smaller)",
            r.bytes_up,
            r.bytes_up_pk_query,
            r.bytes_up_pk_query as f64 / r.bytes_up.max(1) as f64
        );
    }
    println!("server = kernel + share_output (HE work, serialization excluded); pred = Σ(op count × per-op cost measured in this run), share_output included.");
    if rows.iter().any(|r| !r.correct) {
        return Err("a method's shares did not reconstruct W·x".into());
    }
    Ok(())
}
