//! A server under load (`helina bench serve`, also `bench load`): a `helina server
//! --model` process and several clients at once in this process, each sending its
//! inputs in one session, round after round, over plain TCP or TLS.
//!
//! Per round: wall time, inferences per second, latency per inference as a client sees
//! it (from one result to the next: p50, p99, max) and of a session's first result
//! (the handshake, keys and silent-OT setup included), failures by cause, the server process's resident memory at the
//! round's start, its peak (sampled every 20 ms) and its end (from `/proc/<pid>/status`,
//! so the clients' memory is not in it), and CPU time of the server and of the clients
//! (`/proc/<pid>/stat`, at 100 ticks per second). A server that keeps something per
//! session shows it as growth from round to round. At the end the server is sent
//! SIGTERM and must drain and exit 0.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::Result as Res;

/// The server's TLS files (PEM): the CA the clients trust, its certificate and key.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The CA certificate.
    pub ca: std::path::PathBuf,
    /// The server's certificate.
    pub server_cert: std::path::PathBuf,
    /// The server's key.
    pub server_key: std::path::PathBuf,
}

/// `bench serve`.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The `helina` binary that runs the server (`helina server --model …`).
    pub server_exe: std::path::PathBuf,
    /// The model the server loads (ONNX or `.helina`).
    pub model: String,
    /// The server's calibration inputs (`.npy`).
    pub calibration: Option<String>,
    /// The server's input range (`LO,HI`) instead of calibration.
    pub input_range: Option<String>,
    /// The inputs the clients send (`.npy`); default: the calibration inputs.
    pub input: Option<String>,
    /// Clients at once.
    pub clients: usize,
    /// Inputs per session.
    pub inputs: usize,
    /// Rounds.
    pub rounds: usize,
    /// TLS files; `None`: plain TCP.
    pub tls: Option<TlsFiles>,
    /// The server's metrics address.
    pub metrics: Option<String>,
    /// The server's session deadline, seconds.
    pub session_timeout: Option<u64>,
    /// Copy the server's output before it listens to stderr (planning and warnings).
    pub echo_server_startup: bool,
}

/// Percentiles of a latency, ms.
#[derive(Serialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// One round: every client's session at once.
#[derive(Serialize)]
pub struct Round {
    pub wall_ms: f64,
    pub sessions: usize,
    pub inferences: usize,
    pub inferences_per_s: f64,
    /// From one result to the next within a session (each input's own time).
    pub latency: Latency,
    /// From a session's start to its first result (the handshake, keys and the
    /// session's silent-OT setup included).
    pub first_result: Latency,
    pub session_ms_median: f64,
    pub session_ms_max: f64,
    /// Failed sessions by cause (`busy`, `timeout`, `tls`, ...).
    pub failures: BTreeMap<String, usize>,
    pub failure_messages: Vec<String>,
    pub server_rss_start_bytes: Option<u64>,
    pub server_rss_peak_bytes: Option<u64>,
    pub server_rss_end_bytes: Option<u64>,
    pub server_cpu_s: Option<f64>,
    pub clients_cpu_s: Option<f64>,
    /// CPU time of both processes over wall time and cores (1 = every core busy).
    pub cpu_utilisation: Option<f64>,
}

/// What `bench serve` measured.
#[derive(Serialize)]
pub struct Report {
    pub model: String,
    pub tls: bool,
    pub clients: usize,
    pub inputs_per_session: usize,
    pub cores: usize,
    pub server_startup_ms: f64,
    pub rounds: Vec<Round>,
    /// Whether the server drained and exited 0 on SIGTERM.
    pub server_exit_ok: bool,
}

/// The server's process, killed if the benchmark stops early.
struct ServerProcess(std::process::Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `VmRSS` of a process, bytes.
fn rss(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// User + system CPU time of a process (`self` or a pid), seconds.
fn cpu_s(pid: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the command's closing parenthesis: state is field 3, utime 14, stime 15
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The cause of a failed session, as the server's metrics name it.
fn cause(e: &helina::Error) -> String {
    match e {
        helina::Error::Protocol(p) => protocol::metrics::outcome_label(Some(&**p)).into(),
        helina::Error::Net(n) => {
            protocol::metrics::outcome_label(Some(&protocol::ProtocolError::Net(n.clone()))).into()
        }
        helina::Error::Option { .. } => "connect".into(),
        _ => "other".into(),
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Starts the server, runs `a.rounds` rounds of `a.clients` sessions (`on_round` hears
/// each as it ends), then stops the server with SIGTERM.
pub fn run(a: &ServeOptions, on_round: &mut dyn FnMut(usize, &Round)) -> Res<Report> {
    if a.clients == 0 || a.inputs == 0 || a.rounds == 0 {
        return Err("--clients, --inputs and --rounds must be at least 1".into());
    }
    let input = a
        .input
        .as_deref()
        .or(a.calibration.as_deref())
        .ok_or("give --input (or --calibration, whose inputs the clients then send)")?;
    let xs = helina::array::read_batch_any(input)?;
    if xs.is_empty() {
        return Err(format!("{input}: no inputs").into());
    }
    let t0 = Instant::now();
    let mut cmd = Command::new(&a.server_exe);
    cmd.args(["server", "--listen", "127.0.0.1:0", "--model", &a.model])
        .args(["--max-clients", &a.clients.to_string()]);
    if let Some(c) = &a.calibration {
        cmd.args(["--calibration", c]);
    }
    if let Some(r) = &a.input_range {
        cmd.arg(format!("--input-range={r}"));
    }
    if let Some(m) = &a.metrics {
        cmd.args(["--metrics", m]);
    }
    if let Some(t) = a.session_timeout {
        cmd.args(["--session-timeout", &t.to_string()]);
    }
    if let Some(p) = &a.tls {
        cmd.arg("--tls-cert")
            .arg(&p.server_cert)
            .arg("--tls-key")
            .arg(&p.server_key);
    }
    let mut server = ServerProcess(cmd.stderr(Stdio::piped()).spawn()?);
    let pid = server.0.id();
    let mut err = BufReader::new(server.0.stderr.take().ok_or("no server stderr")?);
    let mut addr = None;
    let mut line = String::new();
    while addr.is_none() {
        line.clear();
        if err.read_line(&mut line)? == 0 {
            return Err("the server stopped before it listened".into());
        }
        if let Some(rest) = line.split("listening on ").nth(1) {
            addr = rest.split_whitespace().next().map(str::to_string);
        } else if a.echo_server_startup {
            eprint!("{line}");
        }
    }
    let addr = addr.ok_or("no address")?;
    // the server's log goes to ours
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            tracing::info!("{line}");
        }
    });
    let startup_ms = t0.elapsed().as_secs_f64() * 1e3;
    let tls = a
        .tls
        .as_ref()
        .map(|p| net::ClientTls::from_pem_files(&p.ca, None))
        .transpose()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rounds = Vec::new();
    for r in 0..a.rounds {
        let rss_start = rss(pid);
        let (server_cpu0, clients_cpu0) = (cpu_s(&pid.to_string()), cpu_s("self"));
        // the server's peak, sampled while the round runs
        let peak = Arc::new(AtomicU64::new(rss_start.unwrap_or(0)));
        let done = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peak, done) = (peak.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if let Some(b) = rss(pid) {
                        peak.fetch_max(b, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let t = Instant::now();
        let sessions: Vec<_> = (0..a.clients)
            .map(|c| {
                let inputs: Vec<Vec<f32>> = (0..a.inputs)
                    .map(|k| xs[(c * a.inputs + k) % xs.len()].clone())
                    .collect();
                let addr = addr.clone();
                let tls = tls.clone();
                std::thread::spawn(move || {
                    let t = Instant::now();
                    let mut last: Option<Instant> = None;
                    let mut first = None;
                    let mut latencies = Vec::new();
                    let client = helina::Client::new(
                        &addr,
                        helina::ClientOptions {
                            tls,
                            ..Default::default()
                        },
                    );
                    let out = client.infer_each(&inputs, &mut |_| {}, &mut |_, _| {
                        let now = Instant::now();
                        match last {
                            None => first = Some((now - t).as_secs_f64() * 1e3),
                            Some(l) => latencies.push((now - l).as_secs_f64() * 1e3),
                        }
                        last = Some(now);
                    });
                    (
                        out.map(|_| latencies.len() + usize::from(first.is_some())),
                        latencies,
                        first,
                        t.elapsed().as_secs_f64() * 1e3,
                    )
                })
            })
            .collect();
        let mut times = Vec::new();
        let mut latencies = Vec::new();
        let mut firsts = Vec::new();
        let mut failures = BTreeMap::new();
        let mut failure_messages = Vec::new();
        let mut inferences = 0;
        for (c, s) in sessions.into_iter().enumerate() {
            match s.join() {
                Ok((Ok(n), l, first, ms)) => {
                    inferences += n;
                    latencies.extend(l);
                    firsts.extend(first);
                    times.push(ms);
                }
                Ok((Err(e), _, _, _)) => {
                    *failures.entry(cause(&e)).or_insert(0) += 1;
                    failure_messages.push(format!("client {c}: {e}"));
                }
                Err(_) => {
                    *failures.entry("panic".to_string()).or_insert(0) += 1;
                    failure_messages.push(format!("client {c}: its thread panicked"));
                }
            }
        }
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        done.store(true, Ordering::Relaxed);
        let _ = sampler.join();
        // the server's end-of-round memory once its sessions have wound down
        std::thread::sleep(Duration::from_millis(100));
        let rss_end = rss(pid);
        let server_cpu = server_cpu0.zip(cpu_s(&pid.to_string())).map(|(a, b)| b - a);
        let clients_cpu = clients_cpu0.zip(cpu_s("self")).map(|(a, b)| b - a);
        times.sort_by(f64::total_cmp);
        latencies.sort_by(f64::total_cmp);
        firsts.sort_by(f64::total_cmp);
        let latency = |l: &[f64]| Latency {
            p50_ms: percentile(l, 0.5),
            p99_ms: percentile(l, 0.99),
            max_ms: l.last().copied().unwrap_or(0.0),
        };
        let round = Round {
            wall_ms,
            sessions: a.clients,
            inferences,
            inferences_per_s: inferences as f64 / (wall_ms / 1e3),
            latency: latency(&latencies),
            first_result: latency(&firsts),
            session_ms_median: percentile(&times, 0.5),
            session_ms_max: times.last().copied().unwrap_or(0.0),
            failures,
            failure_messages,
            server_rss_start_bytes: rss_start,
            server_rss_peak_bytes: Some(peak.load(Ordering::Relaxed))
                .filter(|&b| b > 0)
                .or(rss_end),
            server_rss_end_bytes: rss_end,
            server_cpu_s: server_cpu,
            clients_cpu_s: clients_cpu,
            cpu_utilisation: server_cpu
                .zip(clients_cpu)
                .map(|(s, c)| (s + c) / (wall_ms / 1e3) / cores as f64),
        };
        on_round(r, &round);
        rounds.push(round);
    }
    // the server drains (SIGTERM) and must exit 0
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    let status = server.0.wait()?;
    Ok(Report {
        model: a.model.clone(),
        tls: a.tls.is_some(),
        clients: a.clients,
        inputs_per_session: a.inputs,
        cores,
        server_startup_ms: startup_ms,
        rounds,
        server_exit_ok: status.success(),
    })
}
