//! `helina bench serve` (also `bench load`): a `helina server --model` process and
//! several clients at once in this process, each sending its inputs in one session,
//! round after round, over plain TCP or TLS (`--tls`: a throwaway CA made for the run).
//!
//! Per round: wall time, inferences per second, latency per inference as a client sees
//! it (from one result to the next: p50, p99, max) and of a session's first result
//! (the handshake, keys and silent-OT setup included), failures by cause, the server process's resident memory at the
//! round's start, its peak (sampled every 20 ms) and its end (from `/proc/<pid>/status`,
//! so the clients' memory is not in it), and CPU time of the server and of the clients
//! (`/proc/<pid>/stat`, at 100 ticks per second). A server that keeps something per
//! session shows it as growth from round to round. At the end the server is sent
//! SIGTERM and must drain and exit 0.

use benchmarks::serve::{Round, ServeOptions, TlsFiles};
use clap::Args;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct ServeBenchArgs {
    /// The model the server serves (ONNX).
    #[arg(long)]
    model: String,
    /// The server's calibration inputs (.npy, batch first).
    #[arg(long, required_unless_present = "input_range")]
    calibration: Option<String>,
    /// The server's input range instead of calibration inputs (`LO,HI`).
    #[arg(long, allow_hyphen_values = true)]
    input_range: Option<String>,
    /// The clients' inputs (.npy, batch first): client c sends inputs c·n, c·n + 1, …
    /// (cycling through the file). Default: the calibration inputs (this measures load,
    /// not accuracy).
    #[arg(long)]
    input: Option<String>,
    /// Clients at once (the server takes as many sessions at once).
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Inputs per client session.
    #[arg(long, default_value_t = 16)]
    inputs: usize,
    /// Rounds (all clients again).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Sessions over TLS (certificates made for the run).
    #[arg(long)]
    tls: bool,
    /// The server's metrics endpoint (`--metrics` of `helina server`), to watch the run
    /// with curl or Prometheus.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// The server's `--session-timeout` (default: derived from each session's plan,
    /// which a debug build or a loaded machine can exceed).
    #[arg(long, value_name = "SECS")]
    session_timeout: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &ServeBenchArgs) -> Res<()> {
    let dir = std::env::temp_dir().join(format!("helina-bench-serve-{}", std::process::id()));
    let tls = if a.tls {
        let pki = crate::tls_certs::write_dev_pki(&dir, &["localhost".into(), "127.0.0.1".into()])?;
        Some(TlsFiles {
            ca: pki.ca,
            server_cert: pki.server_cert,
            server_key: pki.server_key,
        })
    } else {
        None
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut print_round = |r: usize, round: &Round| {
        if !a.json {
            let mb =
                |b: Option<u64>| b.map_or("n/a".into(), |b| format!("{:.1} MB", b as f64 / 1e6));
            println!(
                "round {}: {} clients x {} inputs{} in {:.1} s: {:.2} inferences/s; latency per inference p50 {:.0} ms, p99 {:.0} ms (first result p50 {:.0} ms); {} failure(s); server RSS {} -> peak {} -> {}; CPU server {:.1} s, clients {:.1} s ({:.0}% of {} cores)",
                r + 1,
                a.clients,
                a.inputs,
                if a.tls { " over TLS" } else { "" },
                round.wall_ms / 1e3,
                round.inferences_per_s,
                round.latency.p50_ms,
                round.latency.p99_ms,
                round.first_result.p50_ms,
                round.failure_messages.len(),
                mb(round.server_rss_start_bytes),
                mb(round.server_rss_peak_bytes),
                mb(round.server_rss_end_bytes),
                round.server_cpu_s.unwrap_or(0.0),
                round.clients_cpu_s.unwrap_or(0.0),
                round.cpu_utilisation.unwrap_or(0.0) * 100.0,
                cores,
            );
            for f in &round.failure_messages {
                println!("  {f}");
            }
        }
    };
    let report = benchmarks::serve::run(
        &ServeOptions {
            server_exe: std::env::current_exe()?,
            model: a.model.clone(),
            calibration: a.calibration.clone(),
            input_range: a.input_range.clone(),
            input: a.input.clone(),
            clients: a.clients,
            inputs: a.inputs,
            rounds: a.rounds,
            tls,
            metrics: a.metrics.clone(),
            session_timeout: a.session_timeout,
            echo_server_startup: !a.json,
        },
        &mut print_round,
    );
    if a.tls {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    let failed = report.rounds.iter().any(|r| !r.failures.is_empty());
    if failed || !report.server_exit_ok {
        return Err("a session failed".into());
    }
    Ok(())
}
