//! End to end over real loopback sockets: a server thread and a client, for one matvec
//! and one conv layer; and the failure cases, each a typed error on both sides.
#![allow(clippy::unwrap_used)]

use std::net::{TcpListener, TcpStream};
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use he::Params;
use kernels::{ConvMethod, ConvShape, Method, Padding};
use net::{Channel, Link, TcpChannel};
use protocol::{query, send, serve, AbortReason, LayerSpec, Msg, ProtocolError, PROTOCOL_VERSION};
use rand::{Rng, SeedableRng};

const T: Duration = Duration::from_secs(20);
const MAX: usize = 64 << 20;

fn params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Params::preset("n8192").unwrap())
}

fn conv_shape() -> ConvShape {
    ConvShape {
        c_i: 3,
        h: 8,
        w: 8,
        c_o: 4,
        k_h: 3,
        k_w: 3,
        stride: 1,
        padding: Padding::Same,
    }
}

/// A server thread that serves `sessions` connections one after another and returns
/// each session's result.
fn server(
    layers: Vec<(LayerSpec, Vec<i64>)>,
    sessions: usize,
) -> (
    String,
    thread::JoinHandle<Vec<Result<protocol::ServerOutcome, ProtocolError>>>,
) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = thread::spawn(move || {
        (0..sessions)
            .map(|_| {
                let (s, _) = l.accept().unwrap();
                let mut ch = TcpChannel::new(s, MAX, T, Link::NONE).unwrap();
                serve(&mut ch, params(), &layers)
            })
            .collect()
    });
    (addr, h)
}

fn client(addr: &str) -> TcpChannel {
    TcpChannel::connect(addr, MAX, T, Link::NONE).unwrap()
}

#[test]
fn matvec_and_conv_layers_end_to_end() {
    let mut r = rand_chacha_like(1);
    let p = params().p();
    // Matvec 10x128, GALA.
    let (rows, cols) = (10, 128);
    let w: Vec<i64> = (0..rows * cols).map(|_| r.random_range(-50..=50)).collect();
    let x: Vec<i64> = (0..cols).map(|_| r.random_range(-50..=50)).collect();
    let spec = LayerSpec::Matvec {
        method: Method::Gala,
        rows,
        cols,
    };
    let (addr, h) = server(vec![(spec.clone(), w.clone())], 1);
    let xr: Vec<u64> = x.iter().map(|&v| params().reduce(v)).collect();
    let mut ch = client(&addr);
    let out = query(&mut ch, params(), &spec, &xr, true).unwrap();
    let want: Vec<u64> = (0..rows)
        .map(|i| {
            let s: i64 = (0..cols).map(|c| w[i * cols + c] * x[c]).sum();
            params().reduce(s)
        })
        .collect();
    assert_eq!(out.revealed.unwrap(), want);
    let server_side = h.join().unwrap().pop().unwrap().unwrap();
    assert!(server_side.revealed);
    let rec: Vec<u64> = out
        .share
        .iter()
        .zip(&server_side.shares[0])
        .map(|(a, b)| (a + b) % p)
        .collect();
    assert_eq!(rec, want);
    // Conv 3x8x8 -> 4 3x3 same, GALA; no reveal: the shares reconstruct.
    let sh = conv_shape();
    let f: Vec<i64> = (0..4 * 3 * 9).map(|_| r.random_range(-20..=20)).collect();
    let img: Vec<i64> = (0..3 * 64).map(|_| r.random_range(-20..=20)).collect();
    let spec = LayerSpec::Conv {
        method: ConvMethod::Gala,
        shape: sh,
    };
    let (addr, h) = server(vec![(spec.clone(), f.clone())], 1);
    let ir: Vec<u64> = img.iter().map(|&v| params().reduce(v)).collect();
    let mut ch = client(&addr);
    let out = query(&mut ch, params(), &spec, &ir, false).unwrap();
    let server_side = h.join().unwrap().pop().unwrap().unwrap();
    let rec: Vec<u64> = out
        .share
        .iter()
        .zip(&server_side.shares[0])
        .map(|(a, b)| (a + b) % p)
        .collect();
    let mut want = Vec::new();
    for o in 0..4 {
        for y in 0..8i64 {
            for xx in 0..8i64 {
                let mut s = 0i64;
                for c in 0..3 {
                    for dy in 0..3i64 {
                        for dx in 0..3i64 {
                            let (iy, ix) = (y + dy - 1, xx + dx - 1);
                            if (0..8).contains(&iy) && (0..8).contains(&ix) {
                                s += img[(c * 64 + iy * 8 + ix) as usize]
                                    * f[((o * 3 + c) * 9 + dy * 3 + dx) as usize];
                            }
                        }
                    }
                }
                want.push(params().reduce(s));
            }
        }
    }
    assert_eq!(rec, want);
    // Phases: setup carries the public key (Gala 3x8x8 also needs Galois keys), online
    // the seeded query and the last-level responses; together what the socket carried.
    let total = ch.counters();
    assert_eq!(
        out.setup.bytes_sent + out.online.bytes_sent + hello_bytes(&spec),
        total.bytes_sent
    );
    assert!(out.setup.bytes_sent > 200_000);
    assert!(out.online.bytes_received > 0 && out.online.bytes_sent > 0);
}

/// Bytes of the client's Hello frame for this layer (all it sends before setup).
fn hello_bytes(layer: &LayerSpec) -> u64 {
    let (mut a, _b) = net::MemChannel::pair(MAX, T, Link::NONE);
    let hello = Msg::Hello {
        version: PROTOCOL_VERSION,
        params: params().spec(),
        params_hash: params().hash(),
        layers: vec![layer.clone()],
    };
    send(&mut a, &hello).unwrap();
    a.counters().bytes_sent
}

fn rand_chacha_like(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

fn spec() -> (LayerSpec, Vec<i64>) {
    (
        LayerSpec::Matvec {
            method: Method::Heliks,
            rows: 2,
            cols: 8,
        },
        vec![1; 16],
    )
}

#[test]
fn mismatches_and_garbage_are_typed_errors_and_the_server_keeps_serving() {
    // Session 1: wrong version; 2: other parameters; 3: other plan; 4: random bytes;
    // 5: a client that disconnects after Hello; 6: a good client.
    let (addr, h) = server(vec![spec()], 6);
    let hello = |version: u32, p: &Params, layers: Vec<LayerSpec>| Msg::Hello {
        version,
        params: p.spec(),
        params_hash: p.hash(),
        layers,
    };
    let mut ch = client(&addr);
    send(
        &mut ch,
        &hello(PROTOCOL_VERSION + 1, params(), vec![spec().0]),
    )
    .unwrap();
    assert_eq!(
        protocol::recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Version)
    );
    let other = Params::preset("n8192-q164").unwrap();
    let mut ch = client(&addr);
    send(&mut ch, &hello(PROTOCOL_VERSION, &other, vec![spec().0])).unwrap();
    assert_eq!(
        protocol::recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Params)
    );
    let mut ch = client(&addr);
    let wrong = LayerSpec::Matvec {
        method: Method::Gala,
        rows: 2,
        cols: 8,
    };
    send(&mut ch, &hello(PROTOCOL_VERSION, params(), vec![wrong])).unwrap();
    assert_eq!(
        protocol::recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Plan)
    );
    let mut ch = client(&addr);
    ch.send(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]).unwrap();
    assert_eq!(
        protocol::recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Malformed)
    );
    {
        let mut ch = client(&addr);
        send(&mut ch, &hello(PROTOCOL_VERSION, params(), vec![spec().0])).unwrap();
        protocol::recv(&mut ch).unwrap();
    } // dropped: disconnect before Setup
    let mut ch = client(&addr);
    let out = query(
        &mut ch,
        params(),
        &spec().0,
        &[1, 2, 3, 4, 5, 6, 7, 8],
        true,
    )
    .unwrap();
    assert_eq!(out.revealed.unwrap(), vec![36, 36]);
    let results = h.join().unwrap();
    assert!(matches!(results[0], Err(ProtocolError::Version { .. })));
    assert!(matches!(results[1], Err(ProtocolError::Params { .. })));
    assert!(matches!(results[2], Err(ProtocolError::Plan)));
    assert!(matches!(results[3], Err(ProtocolError::Malformed { .. })));
    assert!(matches!(
        results[4],
        Err(ProtocolError::Net(net::NetError::Disconnected))
    ));
    assert!(results[5].is_ok());
}

#[test]
fn a_stalled_server_is_a_timeout_for_the_client() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let _hold = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        thread::sleep(Duration::from_millis(800));
        drop(s);
    });
    let s = TcpStream::connect(&addr).unwrap();
    let mut ch = TcpChannel::new(s, MAX, Duration::from_millis(200), Link::NONE).unwrap();
    let e = query(&mut ch, params(), &spec().0, &[0; 8], false).unwrap_err();
    assert_eq!(
        e,
        ProtocolError::Net(net::NetError::Timeout { millis: 200 })
    );
}
