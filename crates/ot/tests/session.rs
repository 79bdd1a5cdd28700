//! One session serving many layers: base OTs and IKNP once, pools refilled by silent
//! batches, outputs re-shared, mismatches detected.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use gc::{NonlinSpec, Nonlinear};
use net::{Channel, Link, MemChannel};
use ot::{client_online, server_online, OtError, OtSession, OtSpec, Role, SilentParams};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const P: u64 = 1099511480321;

fn split(y: &[u64], p: u64, rng: &mut ChaCha20Rng) -> (Vec<u64>, Vec<u64>) {
    let c: Vec<u64> = y.iter().map(|_| rng.random_range(0..p)).collect();
    let s: Vec<u64> = y.iter().zip(&c).map(|(y, c)| (y + p - c) % p).collect();
    (c, s)
}

fn layers() -> Vec<OtSpec> {
    let n = 700;
    vec![
        OtSpec::faithful(NonlinSpec {
            p: P,
            op: Nonlinear::Relu,
            trunc_bits: 12,
            count: n,
        }),
        OtSpec::approximate(NonlinSpec {
            p: P,
            op: Nonlinear::Relu,
            trunc_bits: 12,
            count: n,
        }),
        OtSpec::faithful(NonlinSpec {
            p: P,
            op: Nonlinear::MaxPool { window: 4 },
            trunc_bits: 0,
            count: n / 4,
        }),
        OtSpec::faithful(NonlinSpec {
            p: P,
            op: Nonlinear::Identity,
            trunc_bits: 5,
            count: n,
        }),
        OtSpec::faithful(NonlinSpec {
            p: P,
            op: Nonlinear::Identity,
            trunc_bits: 0,
            count: n,
        }),
        OtSpec::faithful(NonlinSpec {
            p: P,
            op: Nonlinear::Relu,
            trunc_bits: 0,
            count: n,
        }),
    ]
}

#[test]
fn one_session_many_layers_with_refills() {
    // depth 7: 25 200 usable COTs per batch, so these layers need refills
    let params = SilentParams::with_depth(7);
    let (mut sch, mut cch) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(120), Link::NONE);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let specs = layers();
    let inputs: Vec<(Vec<u64>, Vec<u64>, Vec<u64>)> = specs
        .iter()
        .map(|s| {
            let y: Vec<u64> = (0..s.spec.inputs())
                .map(|_| rng.random_range(0..P))
                .collect();
            let (c, sh) = split(&y, P, &mut rng);
            (y, c, sh)
        })
        .collect();
    let sp = specs.clone();
    let server_in: Vec<Vec<u64>> = inputs.iter().map(|i| i.2.clone()).collect();
    let h = std::thread::spawn(move || {
        let mut s = OtSession::new(&mut sch, Role::Server, params).unwrap();
        let setup = sch.counters();
        let mut outs = Vec::new();
        let mut offline_bytes = Vec::new();
        for (spec, x) in sp.iter().zip(&server_in) {
            let c0 = sch.counters();
            let pre = s.server_offline(&mut sch, spec).unwrap();
            let c1 = sch.counters();
            offline_bytes.push((
                c1.bytes_sent + c1.bytes_received - c0.bytes_sent - c0.bytes_received,
                pre.stats().refill_bytes,
            ));
            outs.push(server_online(&mut sch, pre, x).unwrap());
        }
        (outs, offline_bytes, setup, s.stats())
    });
    let mut c = OtSession::new(&mut cch, Role::Client, params).unwrap();
    let mut couts = Vec::new();
    for (spec, x) in specs.iter().zip(&inputs) {
        let pre = c.client_offline(&mut cch, spec).unwrap();
        couts.push(client_online(&mut cch, pre, &x.1).unwrap());
    }
    let (souts, offline_bytes, _, stats) = h.join().unwrap();
    for (k, spec) in specs.iter().enumerate() {
        let want = gc::reference(&spec.spec, &inputs[k].0);
        for i in 0..spec.spec.count {
            let got = (couts[k][i] + souts[k][i]) % P;
            if spec.trunc == ot::Truncation::Approximate {
                assert!(
                    got == want[i] || (got + 1) % P == want[i],
                    "layer {k} element {i}"
                );
            } else {
                assert_eq!(got, want[i], "layer {k} element {i}");
            }
        }
    }
    // no base OT / IKNP per layer: a layer's offline traffic is the hello plus refills
    for (b, refill) in &offline_bytes {
        assert!(
            *b <= refill + 200,
            "offline {b} B with {refill} B of refills"
        );
    }
    assert!(
        offline_bytes.iter().any(|(_, r)| *r > 0),
        "these layers need refills"
    );
    assert!(stats.batches_sc > 1 && stats.batches_cs > 1);
    assert_eq!(c.layers(), specs.len() as u64);
}

#[test]
fn outputs_are_fresh_shares() {
    // a wrong share convention (e.g. the client returning the value itself, or
    // shares that repeat) fails here
    let params = SilentParams::with_depth(6);
    let spec = OtSpec::faithful(NonlinSpec {
        p: P,
        op: Nonlinear::Relu,
        trunc_bits: 3,
        count: 200,
    });
    let y: Vec<u64> = (0..200u64).map(|i| i * 1000).collect();
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let (c, s) = split(&y, P, &mut rng);
    let run = || {
        let (cch, sch) =
            MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE);
        ot::run_over_with(
            &spec,
            ot::RunOptions { params, warmup: 0 },
            &c,
            &s,
            cch,
            sch,
        )
        .unwrap()
    };
    let (c1, s1, _) = run();
    let (c2, _, _) = run();
    let want = gc::reference(&spec.spec, &y);
    assert!(c1
        .iter()
        .zip(&s1)
        .zip(&want)
        .all(|((a, b), w)| (a + b) % P == *w));
    assert!(
        c1.iter().zip(&want).filter(|(a, w)| a == w).count() < 3,
        "client share equals the output"
    );
    assert!(
        c1.iter().zip(&c2).filter(|(a, b)| a == b).count() < 3,
        "shares repeat across runs"
    );
    assert!(
        c1.iter().zip(&c).filter(|(a, b)| a == b).count() < 3,
        "output share equals the input share"
    );
}

#[test]
fn mismatched_layers_are_typed_errors() {
    let params = SilentParams::with_depth(5);
    let (mut sch, mut cch) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE);
    let base = NonlinSpec {
        p: P,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: 10,
    };
    let h = std::thread::spawn(move || {
        let mut s = OtSession::new(&mut sch, Role::Server, params).unwrap();
        let e = s
            .server_offline(&mut sch, &OtSpec::faithful(base))
            .unwrap_err();
        // and a client-side call on a server session is refused
        let e2 = s
            .client_offline(&mut sch, &OtSpec::faithful(base))
            .unwrap_err();
        (e, e2)
    });
    let mut c = OtSession::new(&mut cch, Role::Client, params).unwrap();
    let other = NonlinSpec { p: 1032193, ..base };
    let e = c
        .client_offline(&mut cch, &OtSpec::faithful(other))
        .unwrap_err();
    let (es, e2) = h.join().unwrap();
    assert!(matches!(e, OtError::SpecMismatch { field: "p", .. }), "{e}");
    assert!(
        matches!(es, OtError::SpecMismatch { field: "p", .. }),
        "{es}"
    );
    assert!(matches!(e2, OtError::Misuse(_)));
}

#[test]
fn bad_local_inputs_are_typed_errors() {
    let params = SilentParams::with_depth(5);
    let spec = OtSpec::faithful(NonlinSpec {
        p: P,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: 4,
    });
    let (mut sch, mut cch) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE);
    let h = std::thread::spawn(move || {
        let mut s = OtSession::new(&mut sch, Role::Server, params).unwrap();
        let pre = s.server_offline(&mut sch, &spec).unwrap();
        server_online(&mut sch, pre, &[1, 2, 3]).unwrap_err()
    });
    let mut c = OtSession::new(&mut cch, Role::Client, params).unwrap();
    let pre = c.client_offline(&mut cch, &spec).unwrap();
    let e = client_online(&mut cch, pre, &[1, 2, 3, P]).unwrap_err();
    assert!(matches!(e, OtError::ShareOutOfRange { index: 3, .. }));
    assert!(matches!(
        h.join().unwrap(),
        OtError::ShareCount {
            expected: 4,
            actual: 3
        }
    ));
    let bad = OtSpec::faithful(NonlinSpec {
        p: 1 << 20,
        ..spec.spec
    });
    assert!(matches!(bad.validate(), Err(OtError::InvalidSpec(_))));
}

/// A layer's offline statistics say how long each side waited for the other's hello:
/// the client, whose server is still busy with earlier work, waits about that long;
/// the server, whose client is already waiting, hardly at all (the engine leaves the
/// wait out of the step's offline time).
#[test]
fn the_wait_for_a_busy_peer_is_reported_apart() {
    let params = SilentParams::with_depth(5);
    let (mut sch, mut cch) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE);
    let spec = OtSpec::faithful(NonlinSpec {
        p: P,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: 10,
    });
    let busy = Duration::from_millis(300);
    let h = std::thread::spawn(move || {
        let mut s = OtSession::new(&mut sch, Role::Server, params).unwrap();
        std::thread::sleep(busy);
        s.server_offline(&mut sch, &spec).unwrap().stats()
    });
    let mut c = OtSession::new(&mut cch, Role::Client, params).unwrap();
    let client = c.client_offline(&mut cch, &spec).unwrap().stats();
    let server = h.join().unwrap();
    assert!(client.hello_wait_ms >= 250.0, "{}", client.hello_wait_ms);
    assert!(server.hello_wait_ms < 100.0, "{}", server.hello_wait_ms);
}
