//! The nonlinear steps between two parties over loopback TCP (`helina bench
//! square|relu|maxpool`): offline and online time and bytes per phase, next to GAZELLE
//! Table 10 (the GAZELLE paper, §7) where it has the same count.

use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use he::{Bfv, Params};
use kernels::{FloodPool, LinearLayer, SquareLayout};
use net::{Channel, Counters, Link, TcpChannel, DEFAULT_MAX_FRAME};
use protocol::{recv, send, Msg, ProtocolError};
use rand::Rng;
use serde::Serialize;

use crate::matvec::slots;
use crate::Result as Res;

/// `bench square`: GAZELLE's interactive Square.
#[derive(Clone, Debug)]
pub struct SquareOptions {
    /// Number of values squared.
    pub count: usize,
    /// Parameter preset.
    pub params: String,
    /// Runs (the median is reported).
    pub reps: usize,
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
    let layout = SquareLayout::new(count, slots(params))?;
    let p = params.p();
    let (y, a, b) = random_shares(p, count, false);
    let (mut sch, mut cch) = loopback()?;
    let (sp, slayout) = (params.clone(), layout.clone());
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
        let mut pool = FloodPool::new(slayout.flood_bits(&sp)?);
        pool.fill(&srv, slayout.output_cts())?;
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
        let m = slayout.encode_weights(&srv, &w)?;
        let (resp, cross) = slayout.respond(&srv, &m, &q, &mut pool)?;
        let cts = resp
            .iter()
            .map(|c| he::Backend::serialize(&srv, c))
            .collect::<Result<Vec<_>, _>>()?;
        send(&mut sch, &Msg::Response { step: 0, cts })?;
        Ok((slayout.server_output(&b, &cross)?, offline_ms))
    });
    let client = Bfv::keygen(params, layout.galois())?;
    send(&mut cch, &Msg::Setup(client.public_keys().clone()))?;
    let c_setup = cch.counters();
    let t = Instant::now();
    match recv(&mut cch)? {
        Msg::Ready => {}
        m => return Err(format!("expected Ready, got {}", m.kind()).into()),
    }
    let c_offline = cch.counters();
    let t_online = Instant::now();
    let q = layout.query(&client, &a)?;
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
    let cross = layout.decrypt(&client, &resp)?;
    let zc = layout.client_output(&a, &cross)?;
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

/// Square between two threads, `reps` runs: the median row (`correct`: every run's
/// reconstruction equals y² mod p).
pub fn square(o: &SquareOptions) -> Res<Row> {
    let params = Params::preset(&o.params)?;
    let rows = (0..o.reps.max(1))
        .map(|_| square_once(&params, o.count))
        .collect::<Res<Vec<_>>>()?;
    median_row(rows)
}

/// `bench relu|maxpool`.
#[derive(Clone, Debug)]
pub struct NonlinearOptions {
    /// Number of outputs.
    pub count: usize,
    /// Truncation after the op (fractional bits f: floor division by 2^f).
    pub truncate: u32,
    /// MaxPool window side k (k x k elements per output); ignored for ReLU.
    pub window: usize,
    /// Silent OT or garbled circuits.
    pub protocol: protocol::NonlinearProtocol,
    /// With silent OT: approximate (Cheetah) truncation instead of faithful.
    pub approx_trunc: bool,
    /// Inputs drawn within (−p/4, p/4) and, with silent OT, the layer told so (max
    /// comparisons without signs, a truncating DReLU on the high bits: as in a planned
    /// network).
    pub within_quarter: bool,
    /// With `approx_trunc` and `within_quarter`: the coarse DReLU of this many bits
    /// (`ot::OtSpec::coarse_drelu_bits`; a ReLU may give 0 below `2^(f + bits)`).
    pub coarse_drelu_bits: u32,
    /// Parameter preset whose plaintext modulus p the shares live in.
    pub params: String,
    /// Runs (the median is reported).
    pub reps: usize,
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
/// The median row of `reps` runs (`correct`: every run equals the plaintext reference).
pub fn nonlinear(a: &NonlinearOptions, maxpool: bool) -> Res<Row> {
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
    let garbler = match a.protocol {
        protocol::NonlinearProtocol::SilentOt => return silent_ot(a, spec, name, maxpool),
        protocol::NonlinearProtocol::GarbledCircuits(g) => g,
    };
    let mut rows = Vec::new();
    for _ in 0..a.reps.max(1) {
        let (y, c, s) = random_shares(p, spec.inputs(), a.within_quarter);
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
    median_row(rows)
}

/// `--nonlinear ot`: the same layer with the silent-OT backend (crate `ot`), a fresh
/// session per run over loopback TCP; `bytes_setup` is the session setup.
fn silent_ot(a: &NonlinearOptions, spec: gc::NonlinSpec, name: &str, maxpool: bool) -> Res<Row> {
    let p = spec.p;
    let ospec = ot::OtSpec {
        spec,
        trunc: if a.approx_trunc {
            ot::Truncation::Approximate
        } else {
            ot::Truncation::Faithful
        },
        inputs_within_quarter: a.within_quarter,
        // within a quarter of p, |y| ≤ (p − 1)/2 − 2^f for every f ≤ ℓ − 3
        high_bits_drelu: a.within_quarter,
        coarse_drelu_bits: a.coarse_drelu_bits,
        // independent random windows: the window-by-window tree (a network's
        // overlapping MaxPool runs separably, `bench network` measures that)
        pooling: None,
    };
    let mut rows = Vec::new();
    for _ in 0..a.reps.max(1) {
        let (y, c, s) = random_shares(p, spec.inputs(), a.within_quarter);
        let (sch, cch) = loopback()?;
        let (zc, zs, rep) = ot::run_over(&ospec, &c, &s, cch, sch)?;
        let want = gc::reference(&spec, &y);
        // approximate: one below, or with a coarse DReLU 0 where ⌊y/2^f⌋ < 2^c
        let dead_zone = 1u64 << ospec.coarse_drelu_bits.min(63);
        let correct = zc.iter().zip(&zs).zip(&want).all(|((a, b), w)| {
            let g = (a + b) % p;
            g == *w
                || (a_trunc(&ospec) && (g + 1) % p == *w)
                || (ospec.coarse_drelu_bits > 0 && g == 0 && *w < dead_zone)
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
    median_row(rows)
}

fn a_trunc(s: &ot::OtSpec) -> bool {
    s.trunc == ot::Truncation::Approximate && s.spec.trunc_bits > 0
}

/// `n` uniform values mod `p` (centred within (−p/4, p/4) with `quarter`) and a random
/// sharing of them: (values, client shares, server shares).
fn random_shares(p: u64, n: usize, quarter: bool) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let mut rng = rand::rng();
    let q = (p / 4) as i128 - 1;
    let y: Vec<u64> = (0..n)
        .map(|_| {
            if quarter {
                rng.random_range(-q..=q).rem_euclid(p as i128) as u64
            } else {
                rng.random_range(0..p)
            }
        })
        .collect();
    let c: Vec<u64> = (0..n).map(|_| rng.random_range(0..p)).collect();
    let s = y.iter().zip(&c).map(|(y, c)| (y + p - c) % p).collect();
    (y, c, s)
}
