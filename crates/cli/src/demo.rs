//! `helina demo`: one private inner-product query between a client and a server, each
//! with only its own keys, checked against the plaintext reference; the same query on
//! the simulator and the counting backend reports identical operation counts.
//!
//! The client holds x, the server a weight vector w. The client sends a seeded
//! symmetric encryption of x; the server multiplies by w, folds the products with a
//! hoisted rotate-and-sum, masks with a fresh uniform r, re-randomises with a flooding
//! encryption of zero, switches to the last level and returns; the client decrypts
//! w·x + r and the server keeps −r. (The matvec and conv kernels generalise this.)

use std::time::Instant;

use clap::Args;
use he::{random_slots, Backend, Bfv, Count, Counting, Dir, GaloisSpec, Params, Sim};
use serde::Serialize;

#[derive(Args)]
pub struct DemoArgs {
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Length of the private vectors (≤ n/2).
    #[arg(long, default_value_t = 1024)]
    len: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    params: String,
    len: usize,
    reference: i64,
    reconstructed: i64,
    correct: bool,
    client_ms: f64,
    server_ms: f64,
    bytes_up: u64,
    bytes_down: u64,
    key_bytes: usize,
    noise_budget_left: Option<u32>,
    counts: he::OpCounts,
    counts_identical_on_sim_and_count: bool,
}

/// The server's side of the query, generic over the backend.
fn server_step<B: Backend>(
    b: &B,
    q: &B::Ct,
    w: &B::PreparedPt,
    len: usize,
    r: &[u64],
) -> he::Result<B::Ct> {
    let mut acc = b.mul_plain(q, w)?;
    let steps: Vec<i64> = std::iter::successors(Some(1i64), |s| Some(s * 2))
        .take_while(|&s| (s as usize) < len)
        .collect();
    for s in steps {
        let rot = b.rotate_rows(&acc, s)?;
        acc = b.add(&acc, &rot)?;
    }
    let masked = b.add_plain(&acc, &b.encode(r)?)?;
    let flooded = b.add(&masked, &b.encrypt_zero_flood(40)?)?;
    b.switch_to_last(&flooded)
}

fn query<B: Backend>(
    client: &B,
    server: &B,
    x: &[u64],
    w: &[u64],
    r: &[u64],
) -> he::Result<(Vec<u64>, f64, f64, Option<u32>)> {
    let t = Instant::now();
    let q = client.encrypt_sym(&client.encode(x)?)?;
    let q = client.transfer(Dir::Up, &q)?;
    let mut client_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let wp = server.prepare(w)?;
    let resp = server_step(server, &q, &wp, x.len(), r)?;
    let resp = server.transfer(Dir::Down, &resp)?;
    let server_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let out = client.decrypt(&resp)?;
    client_s += t.elapsed().as_secs_f64();
    let budget = client.noise_budget(&resp)?;
    Ok((out, client_s * 1e3, server_s * 1e3, budget))
}

pub fn run(a: &DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    let params = Params::preset(&a.params)?;
    let (n, p) = (params.n(), params.p());
    let len = a.len.clamp(1, n / 2).next_power_of_two().min(n / 2);
    let steps: Vec<i64> = std::iter::successors(Some(1i64), |s| Some(s * 2))
        .take_while(|&s| (s as usize) < len)
        .collect();
    let spec = GaloisSpec::new(steps);
    let mut rng = rand::rng();
    // Small signed inputs, reduced mod p (centred representation).
    let xs: Vec<i64> = (0..len)
        .map(|_| rand::Rng::random_range(&mut rng, -8..=8))
        .collect();
    let ws: Vec<i64> = (0..len)
        .map(|_| rand::Rng::random_range(&mut rng, -8..=8))
        .collect();
    let x: Vec<u64> = xs.iter().map(|&v| params.reduce(v)).collect();
    let w: Vec<u64> = ws.iter().map(|&v| params.reduce(v)).collect();
    let reference: i64 = xs.iter().zip(&ws).map(|(a, b)| a * b).sum();
    let r = random_slots(n, p, &mut rng);

    let client = Counting::new(Bfv::keygen(&params, spec.clone())?);
    let server = Counting::new(Bfv::server(&params, client.inner().public_keys())?);
    let (out, client_ms, server_ms, budget) = query(&client, &server, &x, &w, &r)?;
    let server_share = (p - r[0]) % p;
    let reconstructed = params.center((out[0] + server_share) % p);
    let counts = client.counts() + server.counts();

    let sim = Counting::new(Sim::new(&params, spec.clone()));
    query(&sim, &sim, &x, &w, &r)?;
    let cnt = Count::real(&params, spec);
    query(&cnt, &cnt, &x, &w, &r)?;
    let report = Report {
        params: params.name().to_string(),
        len,
        reference,
        reconstructed,
        correct: reference == reconstructed,
        client_ms,
        server_ms,
        bytes_up: counts.bytes_up,
        bytes_down: counts.bytes_down,
        key_bytes: client.inner().public_keys().galois_bytes()
            + client.inner().public_keys().public_key_bytes(),
        noise_budget_left: budget,
        counts,
        counts_identical_on_sim_and_count: sim.counts() == counts && cnt.counts() == counts,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "helina demo: private inner product of length {} ({}, n = {})",
            len, report.params, n
        );
        println!(
            "  plaintext reference {}   reconstructed from shares {}   {}",
            reference,
            reconstructed,
            if report.correct { "OK" } else { "MISMATCH" }
        );
        println!(
            "  client {:.1} ms, server {:.1} ms; {} B up, {} B down; keys {} B (once)",
            client_ms, server_ms, report.bytes_up, report.bytes_down, report.key_bytes
        );
        println!(
            "  ops: {} ScMult, {} Perm, {} Add, {} enc, {} dec; noise budget left {:?} bits",
            counts.sc_mult, counts.perm, counts.add, counts.encrypt, counts.decrypt, budget
        );
        println!(
            "  same counts on Sim and Count: {}",
            report.counts_identical_on_sim_and_count
        );
    }
    if !report.correct || !report.counts_identical_on_sim_and_count {
        return Err("demo result did not check out".into());
    }
    Ok(())
}
