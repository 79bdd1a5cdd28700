//! `helina demo`: one private fully-connected layer (a 10 x 128 matrix, the last layer
//! of the MNIST MLP 784-128-128-10 shape) between a client and a server that each hold
//! only their own keys, for several kernels side by side. The client sends a seeded
//! symmetric encryption of x; the server runs the kernel and `share_output` (mask,
//! flood, switch to the last level); the client decrypts its share of W·x, the server
//! keeps −r; the two shares are reconstructed and checked against the plaintext
//! reference. The same run on the simulator and the counting backend reports identical
//! operation counts.

use std::time::Instant;

use clap::Args;
use he::{Backend, Bfv, Count, Counting, Layout, Params, Sim, SlotInfo};
use kernels::{FloodPool, LinearLayer, MatvecPlan, Method};
use rand::Rng;
use serde::Serialize;

#[derive(Args)]
pub struct DemoArgs {
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Output rows of the sample layer.
    #[arg(long, default_value_t = 10)]
    rows: usize,
    /// Input columns of the sample layer.
    #[arg(long, default_value_t = 128)]
    cols: usize,
    /// Methods, comma-separated, or `all`.
    #[arg(long, default_value = "hybrid,gala,heliks")]
    method: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    method: String,
    params: String,
    rows: usize,
    cols: usize,
    correct: bool,
    max_abs_output: i64,
    client_ms: f64,
    server_ms: f64,
    bytes_up: u64,
    bytes_down: u64,
    key_bytes: usize,
    noise_budget_left: Option<u32>,
    counts: he::OpCounts,
    counts_identical_on_sim_and_count: bool,
}

/// The server's online work on any backend (used for Bfv, Sim and Count alike).
fn serve<B: Backend>(
    b: &B,
    plan: &MatvecPlan,
    w: &[i64],
    q: &[B::Ct],
    bits: u32,
) -> Result<(Vec<B::Ct>, Vec<u64>), kernels::KernelError> {
    let m = plan.encode(b, w)?;
    let mut pool = FloodPool::new(bits);
    pool.fill(b, plan.output_cts())?;
    plan.respond(b, &m, q, &mut pool)
}

fn one(
    method: Method,
    params: &Params,
    a: &DemoArgs,
    w: &[i64],
    x: &[i64],
) -> Result<Report, Box<dyn std::error::Error>> {
    let slots = SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: Layout::TwoRows,
    };
    let plan = MatvecPlan::new(method, a.rows, a.cols, slots)?;
    let bits = plan.flood_bits(params)?;
    let p = params.p();
    let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();

    // Client: keys (only those the plan needs), then the query.
    let client = Bfv::keygen(params, plan.galois())?;
    let t = Instant::now();
    let q = plan.query(&client, &xr)?;
    let up: Vec<Vec<u8>> = q
        .iter()
        .map(|c| client.serialize(c))
        .collect::<Result<_, _>>()?;
    let mut client_ms = t.elapsed().as_secs_f64() * 1e3;

    // Server: its own object, built from the client's public material only.
    let server = Counting::new(Bfv::server(params, client.public_keys())?);
    let t = Instant::now();
    let q: Vec<_> = up
        .iter()
        .map(|b| server.deserialize(b))
        .collect::<Result<_, _>>()?;
    let (resp, server_share) = serve(&server, &plan, w, &q, bits)?;
    let down: Vec<Vec<u8>> = resp
        .iter()
        .map(|c| server.serialize(c))
        .collect::<Result<_, _>>()?;
    let server_ms = t.elapsed().as_secs_f64() * 1e3;
    let counts = server.counts();

    let t = Instant::now();
    let resp: Vec<_> = down
        .iter()
        .map(|b| client.deserialize(b))
        .collect::<Result<_, _>>()?;
    let client_share = plan.decrypt(&client, &resp)?;
    client_ms += t.elapsed().as_secs_f64() * 1e3;
    let budget = resp
        .iter()
        .filter_map(|c| client.noise_budget(c).ok().flatten())
        .min();

    let got: Vec<i64> = client_share
        .iter()
        .zip(&server_share)
        .map(|(c, s)| params.center((c + s) % p))
        .collect();
    let want: Vec<i64> = (0..a.rows)
        .map(|r| (0..a.cols).map(|c| w[r * a.cols + c] * x[c]).sum())
        .collect();

    // The same server work on Sim and Count: identical operation counts.
    let sim = Counting::new(Sim::new(params, plan.galois()));
    let sq = plan.query(&sim, &xr)?;
    sim.take();
    serve(&sim, &plan, w, &sq, bits)?;
    let cnt = Count::real(params, plan.galois());
    let cq = plan.query(&cnt, &xr)?;
    cnt.take();
    serve(&cnt, &plan, w, &cq, bits)?;

    Ok(Report {
        method: method.to_string(),
        params: params.name().to_string(),
        rows: a.rows,
        cols: a.cols,
        correct: got == want,
        max_abs_output: want.iter().map(|v| v.abs()).max().unwrap_or(0),
        client_ms,
        server_ms,
        bytes_up: up.iter().map(|b| b.len() as u64).sum(),
        bytes_down: down.iter().map(|b| b.len() as u64).sum(),
        key_bytes: client.public_keys().galois_bytes() + client.public_keys().public_key_bytes(),
        noise_budget_left: budget,
        counts,
        counts_identical_on_sim_and_count: sim.counts() == counts && cnt.counts() == counts,
    })
}

pub fn run(a: &DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    let params = Params::preset(&a.params)?;
    let methods: Vec<Method> = if a.method == "all" {
        Method::ALL.to_vec()
    } else {
        a.method
            .split(',')
            .map(|m| Method::parse(m.trim()).ok_or(format!("unknown method `{m}`")))
            .collect::<Result<_, _>>()?
    };
    let mut rng = rand::rng();
    // Small signed fixed-point-like values.
    let w: Vec<i64> = (0..a.rows * a.cols)
        .map(|_| rng.random_range(-127..=127))
        .collect();
    let x: Vec<i64> = (0..a.cols).map(|_| rng.random_range(-127..=127)).collect();
    let reports = methods
        .iter()
        .map(|&m| one(m, &params, a, &w, &x))
        .collect::<Result<Vec<_>, _>>()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!(
            "helina demo: private {}x{} layer W·x, client and server with their own keys ({}, n = {})",
            a.rows,
            a.cols,
            params.name(),
            params.n()
        );
        for r in &reports {
            println!(
                "  {:<8} shares reconstruct W·x: {:<3}  client {:6.1} ms  server (incl. encoding W, flooding) {:6.1} ms  up {:>7} B  down {:>7} B  keys {:>9} B  Perm {:>3} ScMult {:>3}  budget left {:?}  same counts on Sim/Count: {}",
                r.method,
                if r.correct { "yes" } else { "NO" },
                r.client_ms,
                r.server_ms,
                r.bytes_up,
                r.bytes_down,
                r.key_bytes,
                r.counts.perm + r.counts.hst_perm,
                r.counts.sc_mult,
                r.noise_budget_left,
                r.counts_identical_on_sim_and_count
            );
        }
    }
    if reports
        .iter()
        .any(|r| !r.correct || !r.counts_identical_on_sim_and_count)
    {
        return Err("demo result did not check out".into());
    }
    Ok(())
}
