//! `helina bench square|relu|maxpool`: the nonlinear steps between two parties over
//! loopback TCP, offline and online time and bytes per phase, next to GAZELLE Table 10
//! (gazelle-excerpt.txt; ../shared/papers.md §7).

use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use he::{Bfv, Params};
use kernels::{FloodPool, LinearLayer, SquareLayout};
use net::{Channel, Counters, Link, TcpChannel, DEFAULT_MAX_FRAME};
use protocol::{recv, send, Msg, ProtocolError};
use rand::Rng;
use serde::Serialize;

use crate::bench_matvec::slots;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct SquareArgs {
    /// Number of values squared.
    #[arg(long, default_value_t = 2048)]
    count: usize,
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Runs (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// One row of a nonlinear benchmark.
#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub op: String,
    pub count: usize,
    pub and_gates: u64,
    pub offline_ms: f64,
    pub online_ms: f64,
    pub bytes_offline: u64,
    pub bytes_online: u64,
    pub bytes_setup: u64,
    pub rounds_online: u64,
    pub correct: bool,
    /// GAZELLE Table 10 for the same count, where it has one: offline ms, online ms,
    /// offline MB, online MB.
    pub gazelle: Option<[f64; 4]>,
    /// `--nonlinear ot`: COTs the layer consumed per output element.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cots_per_element: Option<f64>,
    /// `--nonlinear ot`: bytes per output element (online + offline without silent-OT
    /// refills + the layer's COTs at the amortised silent-OT price).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_element: Option<f64>,
}

/// Two connected TCP channels on loopback.
pub fn loopback() -> Res<(TcpChannel, TcpChannel)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let c = TcpStream::connect(addr)?;
    let (s, _) = l.accept()?;
    let t = Duration::from_secs(120);
    Ok((
        TcpChannel::new(s, DEFAULT_MAX_FRAME, t, Link::NONE)?,
        TcpChannel::new(c, DEFAULT_MAX_FRAME, t, Link::NONE)?,
    ))
}

fn bytes(c: Counters) -> u64 {
    c.bytes_sent + c.bytes_received
}

/// One Square between two threads: the client's share a, the server's share b.
fn square_once(params: &Params, count: usize) -> Res<Row> {
    let plan = SquareLayout::new(count, slots(params))?;
    let p = params.p();
    let (y, a, b) = random_shares(p, count);
    let (mut sch, mut cch) = loopback()?;
    let (sp, splan) = (params.clone(), plan.clone());
    let server = thread::spawn(move || -> Result<(Vec<u64>, f64), ProtocolError> {
        let keys = match recv(&mut sch)? {
            Msg::Setup(k) => k,
            m => {
                return Err(ProtocolError::Unexpected {
                    expected: "Setup",
                    got: m.kind(),
                })
            }
        };
        let srv = Bfv::server(&sp, &keys)?;
        let t = Instant::now();
        let mut pool = FloodPool::new(splan.flood_bits(&sp)?);
        pool.fill(&srv, splan.output_cts())?;
        let offline_ms = t.elapsed().as_secs_f64() * 1e3;
        send(&mut sch, &Msg::Ready)?;
        let cts = match recv(&mut sch)? {
            Msg::Query { cts, .. } => cts,
            m => {
                return Err(ProtocolError::Unexpected {
                    expected: "Query",
                    got: m.kind(),
                })
            }
        };
        let q = cts
            .iter()
            .map(|c| he::Backend::deserialize(&srv, c))
            .collect::<Result<Vec<_>, _>>()?;
        let w: Vec<i64> = b.iter().map(|&v| v as i64).collect();
        let m = splan.encode_weights(&srv, &w)?;
        let (resp, cross) = splan.respond(&srv, &m, &q, &mut pool)?;
        let cts = resp
            .iter()
            .map(|c| he::Backend::serialize(&srv, c))
            .collect::<Result<Vec<_>, _>>()?;
        send(&mut sch, &Msg::Response { step: 0, cts })?;
        Ok((splan.server_output(&b, &cross)?, offline_ms))
    });
    let client = Bfv::keygen(params, plan.galois())?;
    send(&mut cch, &Msg::Setup(client.public_keys().clone()))?;
    let c_setup = cch.counters();
    let t = Instant::now();
    match recv(&mut cch)? {
        Msg::Ready => {}
        m => return Err(format!("expected Ready, got {}", m.kind()).into()),
    }
    let c_offline = cch.counters();
    let t_online = Instant::now();
    let q = plan.query(&client, &a)?;
    let cts = q
        .iter()
        .map(|c| he::Backend::serialize(&client, c))
        .collect::<Result<Vec<_>, _>>()?;
    send(&mut cch, &Msg::Query { step: 0, cts })?;
    let cts = match recv(&mut cch)? {
        Msg::Response { cts, .. } => cts,
        m => return Err(format!("expected Response, got {}", m.kind()).into()),
    };
    let resp = cts
        .iter()
        .map(|c| he::Backend::deserialize(&client, c))
        .collect::<Result<Vec<_>, _>>()?;
    let cross = plan.decrypt(&client, &resp)?;
    let zc = plan.client_output(&a, &cross)?;
    let online_ms = t_online.elapsed().as_secs_f64() * 1e3;
    let _ = t;
    let (zs, offline_ms) = server.join().map_err(|_| "server thread panicked")??;
    let correct =
        (0..count).all(|i| (zc[i] + zs[i]) % p == (y[i] as u128 * y[i] as u128 % p as u128) as u64);
    let end = cch.counters();
    Ok(Row {
        op: "square".into(),
        count,
        and_gates: 0,
        offline_ms,
        online_ms,
        bytes_offline: bytes(c_offline - c_setup),
        bytes_online: bytes(end - c_offline),
        bytes_setup: bytes(c_setup),
        rounds_online: (end - c_offline).flights,
        correct,
        gazelle: (count == 2048).then_some([0.5, 1.4, 0.0, 0.093]),
        cots_per_element: None,
        bytes_per_element: None,
    })
}

/// The row with the median online time of `reps` runs.
pub fn median_row(mut rows: Vec<Row>) -> Res<Row> {
    rows.sort_by(|a, b| a.online_ms.total_cmp(&b.online_ms));
    let mid = rows.len() / 2;
    let mut r = rows.get(mid).cloned().ok_or("no runs")?;
    let mut off: Vec<f64> = rows.iter().map(|r| r.offline_ms).collect();
    off.sort_by(|a, b| a.total_cmp(b));
    r.offline_ms = off[mid];
    r.correct = rows.iter().all(|r| r.correct);
    Ok(r)
}

pub fn print(r: &Row, json: bool) -> Res<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "{} x{}: offline {:.1} ms, {:.3} MB; online {:.1} ms, {:.3} MB, {} round(s); setup (keys) {:.3} MB; AND gates {}; correct: {}",
        r.op,
        r.count,
        r.offline_ms,
        mb(r.bytes_offline),
        r.online_ms,
        mb(r.bytes_online),
        r.rounds_online,
        mb(r.bytes_setup),
        r.and_gates,
        r.correct
    );
    if let (Some(c), Some(b)) = (r.cots_per_element, r.bytes_per_element) {
        println!("  silent OT: {c:.1} COTs and {b:.1} bytes per element (setup = base OT + IKNP + first silent batches, once per session)");
    }
    if let Some([off, on, boff, bon]) = r.gazelle {
        println!(
            "  GAZELLE Table 10 ({} x{}): offline {off} ms, {boff} MB; online {on} ms, {bon} MB → helina/GAZELLE time: offline {:.2}, online {:.2}; bytes: online {:.2}",
            r.op,
            r.count,
            r.offline_ms / off.max(1e-9),
            r.online_ms / on,
            mb(r.bytes_online) / bon
        );
    }
    Ok(())
}

pub fn square(a: &SquareArgs) -> Res<()> {
    let params = Params::preset(&a.params)?;
    let rows = (0..a.reps.max(1))
        .map(|_| square_once(&params, a.count))
        .collect::<Res<Vec<_>>>()?;
    let r = median_row(rows)?;
    print(&r, a.json)?;
    if !r.correct {
        return Err("the reconstructed squares differ from y² mod p".into());
    }
    Ok(())
}

#[derive(Args)]
pub struct NonlinearBenchArgs {
    /// Number of outputs.
    #[arg(long, default_value_t = 10000)]
    count: usize,
    /// Truncation after the op (fractional bits f: floor division by 2^f).
    #[arg(long, default_value_t = 0)]
    truncate: u32,
    /// MaxPool window side k (k x k elements per output); ignored for relu.
    #[arg(long, default_value_t = 2)]
    window: usize,
    #[command(flatten)]
    nonlinear: crate::args::NonlinearArgs,
    /// With `--nonlinear ot`: approximate (Cheetah) truncation instead of faithful.
    #[arg(long)]
    approx_trunc: bool,
    /// Parameter preset whose plaintext modulus p the shares live in.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Runs (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn gazelle_gc(op: &str, count: usize) -> Option<[f64; 4]> {
    match (op, count) {
        ("relu", 1000) => Some([89.0, 15.0, 5.43, 1.68]),
        ("relu", 10000) => Some([551.0, 136.0, 54.3, 16.8]),
        ("maxpool", 1000) => Some([164.0, 58.0, 15.6, 8.39]),
        ("maxpool", 10000) => Some([1413.0, 513.0, 156.0, 83.9]),
        _ => None,
    }
}

/// ReLU or MaxPool (with optional truncation) between two threads over loopback TCP.
pub fn nonlinear(a: &NonlinearBenchArgs, maxpool: bool) -> Res<()> {
    let params = Params::preset(&a.params)?;
    let p = params.p();
    let op = if maxpool {
        gc::Nonlinear::MaxPool {
            window: a.window * a.window,
        }
    } else {
        gc::Nonlinear::Relu
    };
    let spec = gc::NonlinSpec {
        p,
        op,
        trunc_bits: a.truncate,
        count: a.count,
    };
    let name = if maxpool { "maxpool" } else { "relu" };
    let garbler = match a.nonlinear.protocol() {
        protocol::NonlinearProtocol::SilentOt => return silent_ot(a, spec, name, maxpool),
        protocol::NonlinearProtocol::GarbledCircuits(g) => g,
    };
    let mut rows = Vec::new();
    for _ in 0..a.reps.max(1) {
        let (y, c, s) = random_shares(p, spec.inputs());
        let (sch, cch) = loopback()?;
        let (zc, zs, rep) = gc::run_over(&spec, garbler, &c, &s, cch, sch)?;
        let want = gc::reference(&spec, &y);
        let correct = zc.iter().zip(&zs).map(|(a, b)| (a + b) % p).eq(want);
        rows.push(Row {
            op: name.into(),
            count: a.count,
            and_gates: rep.and_gates,
            offline_ms: rep.offline_ms,
            online_ms: rep.online_ms,
            bytes_offline: rep.bytes_offline,
            bytes_online: rep.bytes_online,
            bytes_setup: 0,
            rounds_online: rep.rounds_online / 2,
            correct,
            gazelle: gazelle_gc(name, a.count).filter(|_| !maxpool || a.window == 2),
            cots_per_element: None,
            bytes_per_element: None,
        });
    }
    let r = median_row(rows)?;
    print(&r, a.json)?;
    if !a.json && !maxpool && a.count == 10000 {
        let mb = (r.bytes_offline + r.bytes_online) as f64 / 1e6;
        println!(
            "  peer (SecretFlow SPU 0.9.5, Cheetah silent-OT comparison, this machine kind): 0.096 s and 0.99 MB for 10000 ReLUs → helina/SPU time {:.2}, bytes {:.1}",
            (r.offline_ms + r.online_ms) / 96.0,
            mb / 0.99
        );
    }
    if !r.correct {
        return Err("the garbled result differs from the plaintext reference".into());
    }
    Ok(())
}

/// `--nonlinear ot`: the same layer with the silent-OT backend (crate `ot`), a fresh
/// session per run over loopback TCP; `bytes_setup` is the session setup.
fn silent_ot(a: &NonlinearBenchArgs, spec: gc::NonlinSpec, name: &str, maxpool: bool) -> Res<()> {
    let p = spec.p;
    let ospec = ot::OtSpec {
        spec,
        trunc: if a.approx_trunc {
            ot::Truncation::Approximate
        } else {
            ot::Truncation::Faithful
        },
    };
    let mut rows = Vec::new();
    for _ in 0..a.reps.max(1) {
        let (y, c, s) = random_shares(p, spec.inputs());
        let (sch, cch) = loopback()?;
        let (zc, zs, rep) = ot::run_over(&ospec, &c, &s, cch, sch)?;
        let want = gc::reference(&spec, &y);
        let correct = zc.iter().zip(&zs).zip(&want).all(|((a, b), w)| {
            let g = (a + b) % p;
            g == *w || (a_trunc(&ospec) && (g + 1) % p == *w)
        });
        rows.push(Row {
            op: format!(
                "{name} (ot{})",
                if a.approx_trunc { ", approx trunc" } else { "" }
            ),
            count: a.count,
            and_gates: 0,
            offline_ms: rep.offline_ms,
            online_ms: rep.online_ms,
            bytes_offline: rep.bytes_offline,
            bytes_online: rep.bytes_online,
            bytes_setup: rep.bytes_setup,
            rounds_online: rep.rounds_online.div_ceil(2),
            correct,
            gazelle: gazelle_gc(name, a.count).filter(|_| !maxpool || a.window == 2),
            cots_per_element: Some(rep.cots_per_element),
            bytes_per_element: Some(rep.bytes_per_element),
        });
    }
    let r = median_row(rows)?;
    print(&r, a.json)?;
    if !a.json && !maxpool && a.count == 10000 {
        let mb = r.bytes_per_element.unwrap_or(0.0) * a.count as f64 / 1e6;
        println!(
            "  peer (SecretFlow SPU 0.9.5, Cheetah silent-OT ReLU, this machine kind): 0.096 s and 0.99 MB for 10000 ReLUs \u{2192} helina/SPU time (online) {:.2}, bytes (per element figure) {:.2}",
            r.online_ms / 96.0,
            mb / 0.99
        );
    }
    if !r.correct {
        return Err("the OT result differs from the plaintext reference".into());
    }
    Ok(())
}

fn a_trunc(s: &ot::OtSpec) -> bool {
    s.trunc == ot::Truncation::Approximate && s.spec.trunc_bits > 0
}

/// `n` uniform values mod `p` and a random sharing of them: (values, client shares,
/// server shares).
fn random_shares(p: u64, n: usize) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let mut rng = rand::rng();
    let y: Vec<u64> = (0..n).map(|_| rng.random_range(0..p)).collect();
    let c: Vec<u64> = (0..n).map(|_| rng.random_range(0..p)).collect();
    let s = y.iter().zip(&c).map(|(y, c)| (y + p - c) % p).collect();
    (y, c, s)
}
