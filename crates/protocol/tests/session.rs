//! End to end over real loopback sockets: a concurrent TCP server and clients, for one
//! matvec and one conv layer; the failure cases, each a typed error on both sides while
//! the server keeps serving; and the client's byte and round counts against what a
//! relay between the two sockets saw.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use he::Params;
use kernels::{ConvMethod, ConvShape, Method, Padding};
use net::{Channel, Link, TcpChannel};
use protocol::{
    query, send, serve_tcp, AbortReason, LayerMethod, LayerRequest, LayerShape, Msg, ProtocolError,
    ServeOptions, ServedLayer, ServedLayers, SessionReport, PROTOCOL_VERSION,
};
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

type Reports = Arc<Mutex<Vec<SessionReport<protocol::ServerOutcome>>>>;

/// A concurrent TCP server for `sessions` connections; returns its address, the
/// reports and the accept loop's handle.
fn server(
    model: ServedLayers,
    sessions: usize,
    max_concurrent: usize,
) -> (String, Reports, thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let reports: Reports = Arc::default();
    let r = reports.clone();
    let h = thread::spawn(move || {
        let opts = ServeOptions {
            timeout: T,
            max_concurrent,
            stop_after: Some(sessions),
            ..ServeOptions::new(MAX)
        };
        serve_tcp(l, params(), Arc::new(model), &opts, move |rep| {
            r.lock().unwrap().push(rep)
        })
        .unwrap();
    });
    (addr, reports, h)
}

fn client(addr: &str) -> TcpChannel {
    TcpChannel::connect(addr, MAX, T, Link::NONE).unwrap()
}

fn request(shape: LayerShape, method: Option<LayerMethod>) -> Vec<LayerRequest> {
    vec![LayerRequest { shape, method }]
}

fn reduce(v: &[i64]) -> Vec<u64> {
    v.iter().map(|&x| params().reduce(x)).collect()
}

fn conv_reference(img: &[i64], f: &[i64]) -> Vec<u64> {
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
    want
}

#[test]
fn matvec_and_conv_layers_end_to_end_concurrently() {
    let mut r = rand::rngs::StdRng::seed_from_u64(1);
    let p = params().p();
    let (rows, cols) = (10, 128);
    let w: Vec<i64> = (0..rows * cols).map(|_| r.random_range(-50..=50)).collect();
    let x: Vec<i64> = (0..cols).map(|_| r.random_range(-50..=50)).collect();
    let f: Vec<i64> = (0..4 * 3 * 9).map(|_| r.random_range(-20..=20)).collect();
    let img: Vec<i64> = (0..3 * 64).map(|_| r.random_range(-20..=20)).collect();
    let mv = LayerShape::Matvec { rows, cols };
    let cv = LayerShape::Conv(conv_shape());
    let model = ServedLayers::public_demo(vec![
        ServedLayer {
            shape: mv,
            method: None,
            weights: w.clone(),
        },
        ServedLayer {
            shape: cv,
            method: Some(LayerMethod::Conv(ConvMethod::Gala)),
            weights: f.clone(),
        },
    ])
    .unwrap();
    let (addr, reports, h) = server(model, 2, 4);
    let want_mv: Vec<u64> = (0..rows)
        .map(|i| params().reduce((0..cols).map(|c| w[i * cols + c] * x[c]).sum()))
        .collect();
    // Two clients at once: the matvec one with reveal and the server's choice of
    // method, the conv one without reveal.
    let a = {
        let addr = addr.clone();
        let x = reduce(&x);
        thread::spawn(move || {
            let mut ch = client(&addr);
            query(
                &mut ch,
                params(),
                request(mv, None)[0],
                &[x],
                true,
                &mut |_| {},
            )
            .unwrap()
        })
    };
    let mut ch = client(&addr);
    let mut phases = Vec::new();
    let out = query(
        &mut ch,
        params(),
        request(cv, None)[0],
        &[reduce(&img)],
        false,
        &mut |ph| phases.push(ph),
    )
    .unwrap();
    let mv_out = a.join().unwrap();
    h.join().unwrap();
    assert_eq!(mv_out.revealed.unwrap()[0], want_mv);
    assert_eq!(phases.first(), Some(&protocol::Phase::Handshake));
    assert!(phases.contains(&protocol::Phase::Offline { input: 0 }));
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), 2);
    let conv_server = reports
        .iter()
        .map(|r| r.result.as_ref().unwrap())
        .find(|o| !o.revealed)
        .unwrap();
    assert_eq!(out.specs, conv_server.specs);
    assert_eq!(out.specs[0].method(), LayerMethod::Conv(ConvMethod::Gala));
    let rec: Vec<u64> = out.shares[0]
        .iter()
        .zip(&conv_server.shares[0])
        .map(|(a, b)| (a + b) % p)
        .collect();
    assert_eq!(rec, conv_reference(&img, &f));
    // Phases: setup carries the keys, offline only `Ready`, online the query and
    // response; together all the socket carried; the server counts the mirror image.
    let total = ch.counters();
    let t = out.traffic;
    assert_eq!(
        t.setup.bytes_sent + t.offline.bytes_sent + t.online.bytes_sent,
        total.bytes_sent
    );
    assert_eq!(
        t.setup.bytes_received + t.offline.bytes_received + t.online.bytes_received,
        total.bytes_received
    );
    assert!(t.setup.bytes_sent > 200_000);
    assert_eq!(t.offline.bytes_sent, 0);
    assert!(t.online.bytes_received > 0 && t.online.bytes_sent > 0);
    let s = conv_server.traffic;
    assert_eq!(s.setup.bytes_received, t.setup.bytes_sent);
    assert_eq!(s.online.bytes_sent, t.online.bytes_received);
    assert_eq!(s.online.bytes_received, t.online.bytes_sent);
    assert!(conv_server.counts[0].sc_mult > 0);
    // A response is rounded for the wire down to what decryption can lose
    // (`Params::response_rounding` uses up to 3/4 of the bound), so the measured budget
    // left is 0 or 1 bits by design; decryption itself is checked bit for bit above.
    assert!(out.noise_budget.is_some());
}

fn small() -> ServedLayers {
    ServedLayers::public_demo(vec![ServedLayer {
        shape: LayerShape::Matvec { rows: 2, cols: 8 },
        method: Some(LayerMethod::Matvec(Method::Heliks)),
        weights: vec![1; 16],
    }])
    .unwrap()
}

fn small_req() -> Vec<LayerRequest> {
    request(LayerShape::Matvec { rows: 2, cols: 8 }, None)
}

#[test]
fn mismatches_and_garbage_are_typed_errors_and_the_server_keeps_serving() {
    // Sessions: wrong version; a client expecting other parameters; a shape the
    // server lacks; a method the server does not run; random bytes; a client that
    // disconnects after Hello; then a good client.
    let (addr, reports, h) = server(small(), 7, 8);
    let hello = |version: u32, _p: &Params, layers: Vec<LayerRequest>| Msg::Hello {
        version,
        inputs: 1,
        layers,
        reveal: false,
    };
    let aborted = |m: Msg, want: AbortReason| {
        let mut ch = client(&addr);
        send(&mut ch, &m).unwrap();
        assert_eq!(
            protocol::recv(&mut ch).unwrap_err(),
            ProtocolError::PeerAborted(want)
        );
    };
    aborted(
        hello(PROTOCOL_VERSION + 1, params(), small_req()),
        AbortReason::Version,
    );
    // the client checks the server's parameter set against the one it expects
    let other = Params::preset("n8192-q164").unwrap();
    let mut ch = client(&addr);
    let e = query(
        &mut ch,
        &other,
        small_req()[0],
        &[vec![0; 8]],
        false,
        &mut |_| {},
    );
    assert!(matches!(e, Err(ProtocolError::Params { .. })), "{e:?}");
    aborted(
        hello(
            PROTOCOL_VERSION,
            params(),
            request(LayerShape::Matvec { rows: 3, cols: 8 }, None),
        ),
        AbortReason::Unservable,
    );
    aborted(
        hello(
            PROTOCOL_VERSION,
            params(),
            request(
                LayerShape::Matvec { rows: 2, cols: 8 },
                Some(LayerMethod::Matvec(Method::Gala)),
            ),
        ),
        AbortReason::Unservable,
    );
    let mut ch = client(&addr);
    ch.send(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]).unwrap();
    assert_eq!(
        protocol::recv(&mut ch).unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Malformed)
    );
    {
        let mut ch = client(&addr);
        send(&mut ch, &hello(PROTOCOL_VERSION, params(), small_req())).unwrap();
        protocol::recv(&mut ch).unwrap();
    } // dropped: disconnect before Setup
    let mut ch = client(&addr);
    let out = query(
        &mut ch,
        params(),
        small_req()[0],
        &[vec![1, 2, 3, 4, 5, 6, 7, 8]],
        true,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(out.revealed.unwrap(), vec![vec![36, 36]]);
    h.join().unwrap();
    let reports = reports.lock().unwrap();
    let count = |f: &dyn Fn(&Result<protocol::ServerOutcome, ProtocolError>) -> bool| {
        reports.iter().filter(|r| f(&r.result)).count()
    };
    assert_eq!(
        count(&|r| matches!(r, Err(ProtocolError::Version { .. }))),
        1
    );
    assert_eq!(
        count(&|r| { matches!(r, Err(ProtocolError::PeerAborted(AbortReason::Params))) }),
        1
    );
    // a shape the server lacks, a method it does not run
    assert_eq!(
        count(&|r| matches!(r, Err(ProtocolError::NotServed { .. }))),
        1
    );
    assert_eq!(
        count(&|r| matches!(
            r,
            Err(ProtocolError::Plan(
                protocol::PlanError::MethodConflict { .. }
            ))
        )),
        1
    );
    assert_eq!(
        count(&|r| matches!(r, Err(ProtocolError::Malformed { .. }))),
        1
    );
    assert_eq!(
        count(&|r| matches!(r, Err(ProtocolError::Net(net::NetError::Disconnected)))),
        1
    );
    assert_eq!(count(&|r| r.is_ok()), 1);
}

#[test]
fn a_full_server_says_busy() {
    let (addr, reports, h) = server(small(), 2, 1);
    // The first client holds its session open (Hello only) while a second arrives.
    let mut first = client(&addr);
    send(
        &mut first,
        &Msg::Hello {
            version: PROTOCOL_VERSION,
            inputs: 1,
            layers: small_req(),
            reveal: false,
        },
    )
    .unwrap();
    protocol::recv(&mut first).unwrap();
    let mut second = client(&addr);
    let e = query(
        &mut second,
        params(),
        small_req()[0],
        &[vec![0; 8]],
        false,
        &mut |_| {},
    );
    assert_eq!(
        e.unwrap_err(),
        ProtocolError::PeerAborted(AbortReason::Busy)
    );
    drop(first);
    h.join().unwrap();
    assert_eq!(reports.lock().unwrap().len(), 2);
}

#[test]
fn wrong_input_length_is_refused_before_anything_is_sent() {
    let (mut a, _b) = net::MemChannel::pair(MAX, T, Link::NONE);
    let e = query(
        &mut a,
        params(),
        small_req()[0],
        &[vec![0; 7]],
        false,
        &mut |_| {},
    );
    assert_eq!(
        e.unwrap_err(),
        ProtocolError::InputLength {
            layer: 0,
            expected: 8,
            actual: 7
        }
    );
    assert_eq!(a.counters().bytes_sent, 0);
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
    let e = query(
        &mut ch,
        params(),
        small_req()[0],
        &[vec![0; 8]],
        false,
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(
        e,
        ProtocolError::Net(net::NetError::Timeout { millis: 200 })
    );
}

/// What a relay between client and server saw: bytes each way and flights (maximal
/// runs of traffic in one direction) each way.
#[derive(Default, Debug)]
struct Seen {
    up: u64,
    down: u64,
    up_flights: u64,
    down_flights: u64,
    last: Option<bool>,
}

/// A relay on a fresh port in front of `target`, for one connection.
fn relay(target: String) -> (String, Arc<Mutex<Seen>>, thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s2 = seen.clone();
    let h = thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        let s = TcpStream::connect(target).unwrap();
        let pump = |mut from: TcpStream, mut to: TcpStream, up: bool, seen: Arc<Mutex<Seen>>| {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let k = match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => k,
                };
                {
                    let mut g = seen.lock().unwrap();
                    if up {
                        g.up += k as u64;
                    } else {
                        g.down += k as u64;
                    }
                    if g.last != Some(up) {
                        if up {
                            g.up_flights += 1;
                        } else {
                            g.down_flights += 1;
                        }
                        g.last = Some(up);
                    }
                }
                if to.write_all(&buf[..k]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        };
        let (c2, s2b) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        let seen_b = s2.clone();
        let t = thread::spawn(move || pump(s2b, c2, false, seen_b));
        pump(c, s, true, s2);
        t.join().unwrap();
    });
    (addr, seen, h)
}

#[test]
fn client_counters_match_what_the_sockets_carried() {
    let (addr, _reports, h) = server(small(), 1, 1);
    let (via, seen, rh) = relay(addr);
    let mut ch = client(&via);
    let out = query(
        &mut ch,
        params(),
        small_req()[0],
        &[vec![1; 8]],
        true,
        &mut |_| {},
    )
    .unwrap();
    drop(ch);
    h.join().unwrap();
    rh.join().unwrap();
    let s = seen.lock().unwrap();
    let t = out.traffic;
    let sum = |f: fn(&net::Counters) -> u64| f(&t.setup) + f(&t.offline) + f(&t.online);
    assert_eq!(sum(|c| c.bytes_sent), s.up);
    assert_eq!(sum(|c| c.bytes_received), s.down);
    assert_eq!(sum(|c| c.flights), s.up_flights);
    // Hello, Setup, Query, Close: four client flights; Plan, Ready, and the Response
    // with the server's Share right behind it: three server flights.
    assert_eq!(s.up_flights, 4);
    assert_eq!(s.down_flights, 3);
}
