//! Hostile clients against a real server over loopback TCP, each checked for what it
//! costs the server's memory: a first frame announcing 250 MiB, queries with the wrong
//! number of ciphertexts, surplus or other Galois keys, and a client that paces itself
//! past the default session deadline. The tests run one at a time (this binary's
//! resident memory is the server's).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use he::{Bfv, GaloisSpec, Params};
use kernels::Method;
use net::{Link, TcpChannel};
use protocol::{recv, send, AbortReason, Msg, ProtocolError, ServedLayers};

/// One test at a time: the process's memory is the server's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Resident memory of this process (Linux `VmRSS`), bytes.
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// A normal session first (the server's encoder and first session warm), then this
/// process's resident memory.
fn warm(addr: &str, reports: &Reports) -> u64 {
    assert!(normal(addr, true).is_ok());
    wait_for(reports, 1);
    rss()
}

/// How much the server's process may grow while it refuses an attack: far below what
/// the attacks used to cost (2.6 GB for the Hello, 2.1 GB for the query, 1.5 GB for the
/// keys).
const RSS_SLACK: u64 = 64 << 20;

/// A first frame announcing 250 MiB (a Hello, by its place): refused from its length
/// prefix within the Hello's few KB, before a byte of it is read, with `Abort`; the
/// server's memory does not grow and the next client is served.
#[test]
fn an_oversized_first_frame_is_refused_from_its_header() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (addr, reports, h) = server(ServedLayers::public_demo(layers()).unwrap(), 3, opts());
    let before = warm(&addr, &reports);
    let t = Instant::now();
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(&(250u32 << 20).to_be_bytes()).unwrap();
    let _ = s.write_all(&[7u8; 64 << 10]);
    let mut ch = TcpChannel::new(s, MAX, T, Link::NONE).unwrap();
    assert_eq!(
        recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Malformed)
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    wait_for(&reports, 2);
    assert!(rss() < before + RSS_SLACK);
    assert_eq!(
        reports.lock().unwrap()[1].result.as_ref().unwrap_err(),
        &ProtocolError::Net(net::NetError::Oversized {
            len: 250 << 20,
            max: 4096
        })
    );
    assert!(normal(&addr, true).is_ok());
    h.join().unwrap();
}

/// The plan's layer, its parameters (with the session's bounds) and genuine keys for
/// it, after a Hello on `ch`.
fn handshake(ch: &mut TcpChannel) -> (protocol::SessionOffer, Params, protocol::LayerLayout) {
    send(ch, &hello(request())).unwrap();
    let plan = match recv(ch).unwrap() {
        Msg::Offer(p) => *p,
        m => panic!("{m:?}"),
    };
    let spec = plan.methods[0].clone().unwrap();
    let p = params().with_session_responses(plan.session_responses_log2);
    let layer = protocol::LayerLayout::new(&spec, &p).unwrap();
    (plan, p, layer)
}

/// Queries with another number of ciphertexts than the step takes: read from the
/// frame's prefix and refused before anything is decoded (10 empty ones), or refused
/// from the length prefix (a million empty ones: larger than the step's query may be).
#[test]
fn a_query_with_too_many_ciphertexts_is_refused_before_decoding() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (addr, reports, h) = server(ServedLayers::public_demo(layers()).unwrap(), 4, opts());
    let before = warm(&addr, &reports);
    for (n, k) in [(10usize, 1usize), (1_000_000, 2)] {
        let mut ch = client(&addr);
        let (_, p, layer) = handshake(&mut ch);
        let b = Bfv::keygen(&p, layer.galois()).unwrap();
        send(&mut ch, &Msg::Setup(b.public_keys().clone())).unwrap();
        assert!(matches!(recv(&mut ch).unwrap(), Msg::Ready));
        let q = Msg::Query {
            step: 0,
            cts: vec![Vec::new(); n],
        };
        let sent = send(&mut ch, &q);
        if n == 10 {
            sent.unwrap();
            assert_eq!(
                recv(&mut ch).unwrap_err(),
                ProtocolError::PeerAborted(AbortReason::Malformed)
            );
        } // else: the server closes after refusing the frame's length, maybe mid-send
        wait_for(&reports, k + 1);
        let r = reports.lock().unwrap();
        let e = r[k].result.as_ref().unwrap_err();
        if n == 10 {
            assert_eq!(
                e,
                &ProtocolError::CiphertextCount {
                    message: "Query",
                    step: 0,
                    expected: layer.query_cts(),
                    actual: 10
                }
            );
        } else {
            assert!(
                matches!(e, ProtocolError::Net(net::NetError::Oversized { .. })),
                "{e}"
            );
        }
    }
    assert!(rss() < before + RSS_SLACK);
    assert!(normal(&addr, true).is_ok());
    h.join().unwrap();
}

/// Keys the plan does not name: 280 surplus Galois keys do not fit the Setup frame the
/// plan allows (refused from the length prefix, nothing of it read); as many keys as
/// the plan needs but for other rotations are refused by the exact check.
#[test]
fn surplus_or_other_galois_keys_are_refused() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let model = ServedLayers::public_demo(layers_with(Method::Diagonal)).unwrap();
    let (addr, reports, h) = server(model, 3, opts());
    let before = warm(&addr, &reports);
    // 280 keys more than needed: only the frame's length and a little of it are sent
    let mut raw = TcpStream::connect(&addr).unwrap();
    let m = protocol::encode(&hello(request())).unwrap();
    raw.write_all(&(m.len() as u32).to_be_bytes()).unwrap();
    raw.write_all(&m).unwrap();
    let plan = match protocol::decode(&net::read_frame(&mut raw, MAX).unwrap()).unwrap() {
        Msg::Offer(p) => *p,
        m => panic!("{m:?}"),
    };
    let spec = plan.methods[0].clone().unwrap();
    let p = params().with_session_responses(plan.session_responses_log2);
    let needed = protocol::LayerLayout::new(&spec, &p).unwrap().galois();
    assert!(
        needed.key_count(p.n() / 2) > 0,
        "the layer needs Galois keys"
    );
    let surplus = needed.union(&GaloisSpec::new(1000..1280));
    let announced = 64 + p.public_keys_wire_bound(&surplus);
    raw.write_all(&(announced as u32).to_be_bytes()).unwrap();
    let _ = raw.write_all(&[0u8; 4096]);
    let mut ch = TcpChannel::new(raw, MAX, T, Link::NONE).unwrap();
    assert_eq!(
        recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Malformed)
    );
    wait_for(&reports, 2);
    assert!(matches!(
        reports.lock().unwrap()[1].result.as_ref().unwrap_err(),
        ProtocolError::Net(net::NetError::Oversized { len, .. }) if *len == announced as u64
    ));
    // the same number of keys, other rotations
    let mut ch = client(&addr);
    let (_, p, layer) = handshake(&mut ch);
    let count = layer.galois().key_count(p.n() / 2);
    let other = GaloisSpec::new((0..count as i64).map(|i| 1001 + 2 * i));
    let b = Bfv::keygen(&p, other).unwrap();
    send(&mut ch, &Msg::Setup(b.public_keys().clone())).unwrap();
    assert_eq!(
        recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Malformed)
    );
    wait_for(&reports, 3);
    assert_eq!(
        reports.lock().unwrap()[2].result.as_ref().unwrap_err(),
        &ProtocolError::GaloisKeys {
            needed: count,
            offered: count
        }
    );
    assert!(rss() < before + RSS_SLACK);
    h.join().unwrap();
}

/// A client that keeps every frame well within the frame timeout but paces itself so
/// that the session never ends: cut by the default deadline the server derives from
/// its plan (no `session_timeout` given), not by the frame timeout.
#[test]
fn a_paced_slow_client_is_cut_by_the_default_deadline() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (addr, reports, h) = server(ServedLayers::public_demo(layers()).unwrap(), 2, opts());
    let before = warm(&addr, &reports);
    let mut ch = client(&addr);
    let t = Instant::now();
    let (plan, p, layer) = handshake(&mut ch);
    // the deadline the server derives, from the plan's public facts
    let limits = protocol::SessionLimits::new(
        &p,
        &plan.program,
        &[Some(layer.clone())],
        plan.nonlinear,
        true,
    )
    .unwrap();
    let deadline = limits.deadline(1);
    // three paced frames, each well within the frame timeout, that end past it
    let pause = (deadline + Duration::from_secs(3)) / 3;
    assert!(pause < T / 2, "{pause:?}");
    thread::sleep(pause);
    let b = Bfv::keygen(&p, layer.galois()).unwrap();
    let _ = send(&mut ch, &Msg::Setup(b.public_keys().clone()));
    let _ = recv(&mut ch);
    thread::sleep(pause);
    let x = [vec![1u64; 8]];
    let q = layer_query(&b, &layer, &x[0]);
    let _ = send(&mut ch, &Msg::Query { step: 0, cts: q });
    thread::sleep(pause);
    let _ = send(&mut ch, &Msg::Close);
    h.join().unwrap();
    let r = reports.lock().unwrap();
    match r[1].result.as_ref().unwrap_err() {
        ProtocolError::Net(net::NetError::Deadline { millis }) => {
            let d = deadline.as_millis() as u64;
            assert!(millis.abs_diff(d) < 1000, "{millis} ms vs {d} ms");
        }
        e => panic!("{e}"),
    }
    assert!(t.elapsed() >= deadline);
    assert!(rss() < before + RSS_SLACK);
}

/// A client's query for `layer` of `x`, serialised.
fn layer_query(b: &Bfv, layer: &protocol::LayerLayout, x: &[u64]) -> Vec<Vec<u8>> {
    use he::Backend;
    let cts = match layer {
        protocol::LayerLayout::Matvec(m) => kernels::LinearLayer::query(m, b, x).unwrap(),
        _ => panic!("a matvec layer"),
    };
    cts.iter().map(|c| b.serialize(c).unwrap()).collect()
}
