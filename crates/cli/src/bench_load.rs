//! `helina bench load`: one `helina server --model` process and several clients at
//! once in this process, each sending its inputs in one session, round after round.
//! Per round: wall time, inferences per second, each session's time (median and
//! slowest), failures, and the server process's resident memory after the round (read
//! from `/proc/<pid>/status`, so the clients' memory is not in it): a server that keeps
//! something per session shows it as growth from round to round.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;
use serde::Serialize;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct LoadArgs {
    /// The model the server serves (ONNX).
    #[arg(long)]
    model: String,
    /// The server's calibration inputs (.npy, batch first).
    #[arg(long)]
    calibration: String,
    /// The clients' inputs (.npy, batch first): client c sends inputs c·n, c·n + 1, …
    /// (cycling through the file).
    #[arg(long)]
    input: String,
    /// Clients at once (the server takes as many sessions at once).
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Inputs per client session.
    #[arg(long, default_value_t = 16)]
    inputs: usize,
    /// Rounds (all clients again).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Round {
    wall_ms: f64,
    inferences: usize,
    inferences_per_s: f64,
    session_ms_median: f64,
    session_ms_max: f64,
    failures: Vec<String>,
    server_rss_bytes: Option<u64>,
    server_peak_rss_bytes: Option<u64>,
}

#[derive(Serialize)]
struct Report {
    model: String,
    clients: usize,
    inputs_per_session: usize,
    server_startup_ms: f64,
    rounds: Vec<Round>,
}

/// `VmRSS` and `VmHWM` of a process, bytes.
fn memory(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return (None, None);
    };
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub fn run(a: &LoadArgs) -> Res<()> {
    if a.clients == 0 || a.inputs == 0 || a.rounds == 0 {
        return Err("--clients, --inputs and --rounds must be at least 1".into());
    }
    let xs = helina::array::read_batch_any(&a.input)?;
    if xs.is_empty() {
        return Err(format!("{}: no inputs", a.input).into());
    }
    let t0 = Instant::now();
    let mut server = Command::new(std::env::current_exe()?)
        .args(["server", "--listen", "127.0.0.1:0", "--model", &a.model])
        .args(["--calibration", &a.calibration])
        .args(["--max-clients", &a.clients.to_string()])
        .args(["--sessions", &(a.clients * a.rounds).to_string()])
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = server.id();
    let mut err = BufReader::new(server.stderr.take().ok_or("no server stderr")?);
    let mut first = String::new();
    err.read_line(&mut first)?;
    let addr = first
        .split_whitespace()
        .nth(4)
        .filter(|_| first.contains("listening on"))
        .ok_or_else(|| format!("the server did not start: {first}"))?
        .to_string();
    // the server's log goes to ours
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            tracing::info!("{line}");
        }
    });
    let startup_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut rounds = Vec::new();
    for r in 0..a.rounds {
        let t = Instant::now();
        let sessions: Vec<_> = (0..a.clients)
            .map(|c| {
                let inputs: Vec<Vec<f32>> = (0..a.inputs)
                    .map(|k| xs[(c * a.inputs + k) % xs.len()].clone())
                    .collect();
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let t = Instant::now();
                    let out = helina::Client::new(&addr, helina::ClientOptions::default())
                        .infer(&inputs, &mut |_| {});
                    (
                        out.map(|o| o.outputs.len()),
                        t.elapsed().as_secs_f64() * 1e3,
                    )
                })
            })
            .collect();
        let mut times = Vec::new();
        let mut failures = Vec::new();
        let mut inferences = 0;
        for (c, s) in sessions.into_iter().enumerate() {
            match s.join() {
                Ok((Ok(n), ms)) => {
                    inferences += n;
                    times.push(ms);
                }
                Ok((Err(e), _)) => failures.push(format!("client {c}: {e}")),
                Err(_) => failures.push(format!("client {c}: its thread panicked")),
            }
        }
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        times.sort_by(f64::total_cmp);
        let (rss, peak) = memory(pid);
        let round = Round {
            wall_ms,
            inferences,
            inferences_per_s: inferences as f64 / (wall_ms / 1e3),
            session_ms_median: times.get(times.len() / 2).copied().unwrap_or(0.0),
            session_ms_max: times.last().copied().unwrap_or(0.0),
            failures,
            server_rss_bytes: rss,
            server_peak_rss_bytes: peak,
        };
        if !a.json {
            let mb =
                |b: Option<u64>| b.map_or("n/a".into(), |b| format!("{:.1} MB", b as f64 / 1e6));
            println!(
                "round {}: {} clients x {} inputs in {:.1} s ({:.2} inferences/s; sessions median {:.1} s, slowest {:.1} s); {} failure(s); server RSS {} (peak {})",
                r + 1,
                a.clients,
                a.inputs,
                wall_ms / 1e3,
                round.inferences_per_s,
                round.session_ms_median / 1e3,
                round.session_ms_max / 1e3,
                round.failures.len(),
                mb(rss),
                mb(peak)
            );
            for f in &round.failures {
                println!("  {f}");
            }
        }
        rounds.push(round);
    }
    let status = server.wait()?;
    let failed = rounds.iter().any(|r| !r.failures.is_empty());
    if a.json {
        let report = Report {
            model: a.model.clone(),
            clients: a.clients,
            inputs_per_session: a.inputs,
            server_startup_ms: startup_ms,
            rounds,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    if failed || !status.success() {
        return Err("a session failed".into());
    }
    Ok(())
}
