//! A hostile client against a real server over loopback TCP: a crafted public key, a
//! panicking session, `Reveal` on private weights, a Hello of a thousand layers, a
//! session beyond its memory budget, a peer that drips one byte at a time, one more
//! network client than the server takes at once. Each gets a typed error, and the
//! server — with a single session slot — serves a normal client right after. The
//! attacks whose cost in server memory is checked are in `hostile_memory.rs`.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use he::{Bfv, GaloisSpec, PublicKeys};
use net::{Channel, TcpChannel};
use protocol::{
    recv, send, serve_sessions, AbortReason, LayerRequest, LayerShape, Msg, ProtocolError,
    ServeOptions, ServedLayers,
};

mod common;
use common::*;

/// Mirrors of fhe.rs's protobuf messages, to craft a public key byte by byte.
#[derive(Clone, PartialEq, prost::Message)]
struct RqWire {
    #[prost(int32, tag = "1")]
    representation: i32,
    #[prost(uint32, tag = "2")]
    degree: u32,
    #[prost(bytes = "vec", tag = "3")]
    coefficients: Vec<u8>,
    #[prost(bool, tag = "4")]
    allow_variable_time: bool,
}
#[derive(Clone, PartialEq, prost::Message)]
struct CtWire {
    #[prost(bytes = "vec", repeated, tag = "1")]
    c: Vec<Vec<u8>>,
    #[prost(bytes = "vec", tag = "2")]
    seed: Vec<u8>,
    #[prost(uint32, tag = "3")]
    level: u32,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PkWire {
    #[prost(message, optional, tag = "1")]
    c: Option<CtWire>,
}

/// A genuine client's keys with the public key's polynomials marked power-basis (the
/// key that used to panic inside fhe-math when the server encrypted zeros with it).
fn crafted_keys() -> PublicKeys {
    use prost::Message;
    let galois = GaloisSpec::none();
    let mut keys = Bfv::keygen(params(), galois).unwrap().public_keys().clone();
    let mut pk = PkWire::decode(keys.public_key.as_slice()).unwrap();
    for b in &mut pk.c.as_mut().unwrap().c {
        let mut rq = RqWire::decode(b.as_slice()).unwrap();
        rq.representation = 1;
        *b = rq.encode_to_vec();
    }
    keys.public_key = pk.encode_to_vec();
    keys
}

#[test]
fn a_crafted_public_key_is_refused_and_the_slot_is_released() {
    let (addr, reports, h) = server(ServedLayers::public_demo(layers()).unwrap(), 2, opts());
    let mut ch = client(&addr);
    send(&mut ch, &hello(request())).unwrap();
    assert!(matches!(recv(&mut ch).unwrap(), Msg::Offer(_)));
    send(&mut ch, &Msg::Setup(crafted_keys())).unwrap();
    assert_eq!(
        recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Malformed)
    );
    wait_for(&reports, 1);
    // one slot only: a normal client is served right after
    let out = normal(&addr, true).unwrap();
    assert_eq!(out.revealed.unwrap(), vec![vec![36, 36]]);
    h.join().unwrap();
    let reports = reports.lock().unwrap();
    assert!(matches!(
        &reports[0].result,
        Err(ProtocolError::He(he::HeError::Malformed {
            what: "public key",
            ..
        }))
    ));
    assert!(reports[1].result.is_ok());
}

/// A session that panics is contained: the peer hears `Abort(Internal)`, the report
/// says what happened, the slot is given back and the next client is served.
#[test]
fn a_panicking_session_gives_its_slot_back() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let reports: Arc<Mutex<Vec<protocol::SessionReport<u32>>>> = Arc::default();
    let r = reports.clone();
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let h = thread::spawn(move || {
        let opts = ServeOptions {
            max_concurrent: 1,
            stop_after: Some(2),
            ..opts()
        };
        serve_sessions(
            l,
            &opts,
            move |ch: &mut TcpChannel| {
                ch.recv()?;
                if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    panic!("a bug reached by peer data");
                }
                send(ch, &Msg::Ready)?;
                Ok(7)
            },
            move |rep| r.lock().unwrap().push(rep),
        )
        .unwrap();
    });
    let mut a = client(&addr);
    a.send(b"first").unwrap();
    assert_eq!(
        recv(&mut a).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Internal)
    );
    wait_for(&reports, 1);
    let mut b = client(&addr);
    b.send(b"second").unwrap();
    assert!(matches!(recv(&mut b).unwrap(), Msg::Ready));
    h.join().unwrap();
    let reports = reports.lock().unwrap();
    assert!(matches!(
        &reports[0].result,
        Err(ProtocolError::Internal { detail }) if detail.contains("a bug reached by peer data")
    ));
    assert_eq!(reports[1].result, Ok(7));
}

#[test]
fn reveal_is_refused_for_private_weights_and_allowed_for_the_demo() {
    let (addr, reports, h) = server(ServedLayers::new(layers()).unwrap(), 2, opts());
    assert_eq!(
        normal(&addr, true).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Refused)
    );
    wait_for(&reports, 1);
    // the same model without asking for the output works: each party keeps its share
    assert!(normal(&addr, false).unwrap().revealed.is_none());
    h.join().unwrap();
    assert_eq!(
        reports.lock().unwrap()[0].result.as_ref().unwrap_err(),
        &ProtocolError::RevealRefused
    );
    let (addr, _, h) = server(ServedLayers::public_demo(layers()).unwrap(), 1, opts());
    assert_eq!(
        normal(&addr, true).unwrap().revealed.unwrap(),
        vec![vec![36, 36]]
    );
    h.join().unwrap();
}

/// 1000 copies of one layer: a Hello larger than the few KB a Hello may take, refused
/// from its length prefix; 100 copies fit the frame and are refused at once, before any
/// planning, encoding or flooding (a session of a layer server serves one layer); a
/// shape the server does not hold is refused likewise.
#[test]
fn a_hello_of_a_thousand_layers_is_refused_before_any_allocation() {
    let (addr, reports, h) = server(ServedLayers::public_demo(layers()).unwrap(), 3, opts());
    let mut ch = client(&addr);
    send(&mut ch, &hello(request().repeat(1000))).unwrap();
    assert_eq!(
        recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Malformed)
    );
    wait_for(&reports, 1);
    assert!(matches!(
        reports.lock().unwrap()[0].result.as_ref().unwrap_err(),
        ProtocolError::Net(net::NetError::Oversized { max: 4096, .. })
    ));
    let mut ch = client(&addr);
    let t = Instant::now();
    send(&mut ch, &hello(request().repeat(100))).unwrap();
    assert_eq!(
        recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Unservable)
    );
    assert!(t.elapsed() < Duration::from_secs(2));
    wait_for(&reports, 2);
    let mut ch = client(&addr);
    send(
        &mut ch,
        &hello(vec![LayerRequest {
            shape: LayerShape::Matvec { rows: 3, cols: 8 },
            method: None,
        }]),
    )
    .unwrap();
    assert_eq!(
        recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Unservable)
    );
    h.join().unwrap();
    let reports = reports.lock().unwrap();
    assert_eq!(
        reports[1].result.as_ref().unwrap_err(),
        &ProtocolError::TooManyLayers {
            requested: 100,
            allowed: 1
        }
    );
    assert!(matches!(
        reports[2].result.as_ref().unwrap_err(),
        ProtocolError::NotServed { .. }
    ));
}

/// A session whose flooding zeros and ciphertexts would pass its memory budget is
/// refused before it allocates them; the next one, within budget, is served.
#[test]
fn a_session_beyond_its_memory_budget_is_refused() {
    let tight = ServeOptions {
        session_memory: Some(1 << 20),
        ..opts()
    };
    let (addr, reports, h) = server(ServedLayers::public_demo(layers()).unwrap(), 1, tight);
    assert_eq!(
        normal(&addr, true).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Busy)
    );
    h.join().unwrap();
    wait_for(&reports, 1);
    assert!(matches!(
        reports.lock().unwrap()[0].result.as_ref().unwrap_err(),
        ProtocolError::SessionMemory { budget: 1048576, needed } if needed > &(1 << 20)
    ));
    let roomy = ServeOptions {
        session_memory: Some(64 << 20),
        ..opts()
    };
    let (addr, _, h) = server(ServedLayers::public_demo(layers()).unwrap(), 1, roomy);
    assert!(normal(&addr, true).is_ok());
    h.join().unwrap();
}

/// A peer that announces a frame and sends one byte every 200 ms is dropped when the
/// frame deadline (1 s) passes — not after the frame would end — and frees the only
/// slot for a normal client.
#[test]
fn a_dripping_peer_is_dropped_at_the_frame_deadline() {
    let drip_opts = ServeOptions {
        timeout: Duration::from_secs(1),
        ..opts()
    };
    let (addr, reports, h) = server(ServedLayers::public_demo(layers()).unwrap(), 2, drip_opts);
    let t = Instant::now();
    let a = addr.clone();
    let drip = thread::spawn(move || {
        let mut s = TcpStream::connect(a).unwrap();
        s.write_all(&1000u32.to_be_bytes()).unwrap();
        for _ in 0..50 {
            if s.write_all(&[0]).is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(200));
        }
    });
    // the normal client waits for the slot: it is busy until the drip is dropped
    thread::sleep(Duration::from_millis(100));
    while reports.lock().unwrap().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the dripping peer was not dropped"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let dropped_after = t.elapsed();
    assert!(
        dropped_after < Duration::from_millis(2500),
        "{dropped_after:?}"
    );
    assert!(normal(&addr, true).is_ok());
    h.join().unwrap();
    drop(drip);
    let reports = reports.lock().unwrap();
    assert_eq!(
        reports[0].result.as_ref().unwrap_err(),
        &ProtocolError::Net(net::NetError::Timeout { millis: 1000 })
    );
}

/// A session deadline ends a client that keeps every frame in time but never finishes.
#[test]
fn the_session_deadline_ends_a_slow_session() {
    let slow = ServeOptions {
        session_timeout: Some(Duration::from_millis(800)),
        ..opts()
    };
    let (addr, reports, h) = server(ServedLayers::public_demo(layers()).unwrap(), 1, slow);
    let mut ch = client(&addr);
    send(&mut ch, &hello(request())).unwrap();
    assert!(matches!(recv(&mut ch).unwrap(), Msg::Offer(_)));
    thread::sleep(Duration::from_millis(1200)); // keys never come in time
    h.join().unwrap();
    assert!(matches!(
        reports.lock().unwrap()[0].result.as_ref().unwrap_err(),
        ProtocolError::Net(net::NetError::Deadline { .. })
    ));
}
