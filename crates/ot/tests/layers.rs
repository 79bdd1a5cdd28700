//! DReLU/ReLU, Max/MaxPool and both truncations on reconstructed shares against
//! `gc::reference` (faithful) or the approximate-truncation model, for several primes,
//! edge and random values, over in-memory channels and loopback TCP.
#![allow(clippy::unwrap_used)]

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use gc::{NonlinSpec, Nonlinear};
use net::{Link, MemChannel, TcpChannel};
use ot::{approx_trunc, run_over_with, OtSpec, Pooling, RunOptions, SilentParams, Truncation};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const P20: u64 = 1032193;
const P32: u64 = 4293918721;
const P40: u64 = 1099511480321;
/// 2^60 − 2^14·… : a 60-bit NTT-friendly prime, 1152921504606830593 = 2^60 − 2^14 + 1.
const P60: u64 = 1152921504606830593;

fn opts() -> RunOptions {
    RunOptions {
        params: SilentParams::with_depth(6),
        warmup: 0,
    }
}

fn centred(p: u64, v: i128) -> u64 {
    v.rem_euclid(p as i128) as u64
}

/// Edge values for truncation by `f` plus `extra` random ones.
fn values(p: u64, f: u32, extra: usize, rng: &mut ChaCha20Rng) -> Vec<u64> {
    let h = ((p - 1) / 2) as i128;
    let t = 1i128 << f;
    let mut v: Vec<i128> = vec![
        0,
        1,
        -1,
        h,
        -h,
        h - 1,
        -h + 1,
        t,
        -t,
        t + 1,
        t - 1,
        -t + 1,
        -t - 1,
        2 * t,
        -2 * t,
    ];
    for _ in 0..extra {
        v.push(rng.random_range(-h..=h));
    }
    // small magnitudes, where truncation errors show
    for _ in 0..extra / 2 {
        v.push(rng.random_range(-4 * t..4 * t));
    }
    v.into_iter().map(|x| centred(p, x)).collect()
}

fn split(y: &[u64], p: u64, rng: &mut ChaCha20Rng) -> (Vec<u64>, Vec<u64>) {
    let c: Vec<u64> = y.iter().map(|_| rng.random_range(0..p)).collect();
    let s: Vec<u64> = y.iter().zip(&c).map(|(y, c)| (y + p - c) % p).collect();
    (c, s)
}

fn loopback() -> (TcpChannel, TcpChannel) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let c = TcpStream::connect(addr).unwrap();
    let (s, _) = l.accept().unwrap();
    let t = Duration::from_secs(120);
    (
        TcpChannel::new(c, net::DEFAULT_MAX_FRAME, t, Link::NONE).unwrap(),
        TcpChannel::new(s, net::DEFAULT_MAX_FRAME, t, Link::NONE).unwrap(),
    )
}

/// Runs the layer on `y` (inputs) and checks every output.
fn check(spec: OtSpec, y: &[u64], tcp: bool, seed: u64) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let p = spec.spec.p;
    let (c, s) = split(y, p, &mut rng);
    let (zc, zs, rep) = if tcp {
        let (cch, sch) = loopback();
        run_over_with(&spec, opts(), &c, &s, cch, sch).unwrap()
    } else {
        let (cch, sch) =
            MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(120), Link::NONE);
        run_over_with(&spec, opts(), &c, &s, cch, sch).unwrap()
    };
    assert_eq!(zc.len(), spec.spec.count);
    let want = gc::reference(&spec.spec, y);
    let f = spec.spec.trunc_bits;
    let approx = spec.trunc == Truncation::Approximate && f > 0;
    for i in 0..spec.spec.count {
        assert!(zc[i] < p && zs[i] < p);
        let got = (zc[i] + zs[i]) % p;
        if !approx {
            assert_eq!(
                got,
                want[i],
                "{spec:?} element {i}, input {:?}",
                &y[i * spec.spec.window()..(i + 1) * spec.spec.window()]
            );
            continue;
        }
        match spec.spec.op {
            Nonlinear::Relu | Nonlinear::Identity => {
                let relu = spec.spec.op == Nonlinear::Relu;
                assert_eq!(
                    got,
                    approx_trunc(
                        p,
                        f,
                        relu,
                        spec.high_bits_drelu,
                        spec.coarse_drelu_bits,
                        y[i],
                        s[i]
                    ),
                    "{spec:?} element {i}, y = {}",
                    y[i]
                );
            }
            _ => {
                let ok = got == want[i] || got == (want[i] + p - 1) % p;
                assert!(ok, "{spec:?} element {i}: got {got}, exact {}", want[i]);
            }
        }
    }
    // the report is consistent with the schedule and the channel counters
    assert_eq!(rep.rounds_online as usize, spec.online_flights().unwrap());
    assert!(
        rep.flights_counted <= rep.rounds_online && rep.flights_counted + 1 >= rep.rounds_online
    );
    let (sc, cs) = spec.cots();
    assert_eq!(rep.cots as usize, sc + cs);
}

fn relu(p: u64, f: u32, count: usize) -> NonlinSpec {
    NonlinSpec {
        p,
        op: Nonlinear::Relu,
        trunc_bits: f,
        count,
    }
}

fn run_relu_family(p: u64, seed: u64) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    for f in [0u32, 1, 12] {
        let y = values(p, f, 60, &mut rng);
        let n = y.len();
        check(OtSpec::faithful(relu(p, f, n)), &y, false, seed + f as u64);
        if f > 0 {
            check(
                OtSpec::approximate(relu(p, f, n)),
                &y,
                false,
                seed + 100 + f as u64,
            );
            let id = NonlinSpec {
                op: Nonlinear::Identity,
                ..relu(p, f, n)
            };
            check(OtSpec::faithful(id), &y, false, seed + 200 + f as u64);
            check(OtSpec::approximate(id), &y, false, seed + 300 + f as u64);
        }
    }
}

#[test]
fn relu_identity_p20() {
    run_relu_family(P20, 1);
}

#[test]
fn relu_identity_p32() {
    run_relu_family(P32, 2);
}

#[test]
fn relu_identity_p40() {
    run_relu_family(P40, 3);
}

#[test]
fn relu_identity_p60() {
    run_relu_family(P60, 4);
}

#[test]
fn identity_without_truncation_reshares() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let y = values(P40, 0, 20, &mut rng);
    let spec = NonlinSpec {
        op: Nonlinear::Identity,
        ..relu(P40, 0, y.len())
    };
    check(OtSpec::faithful(spec), &y, false, 6);
}

fn windows(p: u64, f: u32, count: usize, window: usize, rng: &mut ChaCha20Rng) -> Vec<u64> {
    let base = values(p, f, count * window, rng);
    let mut y: Vec<u64> = base.into_iter().take(count * window).collect();
    // ties and windows of equal signs
    if count * window >= 2 * window {
        for j in 0..window {
            y[j] = centred(p, 7);
            y[window + j] = centred(p, -((j as i128) + 1));
        }
    }
    y
}

#[test]
fn max_and_maxpool_all_primes() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    for p in [P20, P32, P40, P60] {
        for window in [1usize, 2, 3, 4, 9] {
            for f in [0u32, 3] {
                let count = 12;
                let y = windows(p, f, count, window, &mut rng);
                for op in [Nonlinear::Max { window }, Nonlinear::MaxPool { window }] {
                    let spec = NonlinSpec {
                        p,
                        op,
                        trunc_bits: f,
                        count,
                    };
                    check(OtSpec::faithful(spec), &y, false, p ^ window as u64);
                    if f > 0 {
                        check(OtSpec::approximate(spec), &y, false, p ^ window as u64 ^ 99);
                    }
                }
            }
        }
    }
}

/// With every input within (−p/4, p/4) the max tree compares by DReLU(a − b) alone:
/// the same results as `gc::reference` (edges of the quarter, ties, windows of one
/// sign and of mixed signs), for fewer COTs than with the signs tracked.
#[test]
fn max_and_maxpool_within_a_quarter_of_p_need_no_signs() {
    let mut rng = ChaCha20Rng::seed_from_u64(17);
    for p in [P20, P32, P40] {
        let q = ((p - 1) / 4) as i128 - 1;
        for window in [2usize, 3, 4, 9] {
            for f in [0u32, 3] {
                let count = 12;
                let mut y: Vec<u64> = (0..count * window)
                    .map(|_| centred(p, rng.random_range(-q..=q)))
                    .collect();
                // the quarter's edges against each other, ties, one sign per window
                y[0] = centred(p, q);
                y[1] = centred(p, -q);
                for j in 0..window {
                    y[window + j] = centred(p, -q + j as i128);
                    y[2 * window + j] = centred(p, 7);
                }
                for op in [Nonlinear::Max { window }, Nonlinear::MaxPool { window }] {
                    let spec = NonlinSpec {
                        p,
                        op,
                        trunc_bits: f,
                        count,
                    };
                    let narrow = OtSpec::faithful(spec).within_quarter();
                    check(narrow, &y, false, p ^ window as u64 ^ 5);
                    let (a, b) = narrow.cots();
                    let (c, d) = OtSpec::faithful(spec).cots();
                    assert!(a + b < c + d, "{spec:?}: {} vs {}", a + b, c + d);
                    if f > 0 {
                        check(
                            OtSpec::approximate(spec).within_quarter(),
                            &y,
                            false,
                            p ^ window as u64 ^ 55,
                        );
                    }
                }
            }
        }
    }
}

/// The `k×k` windows (stride `s`) of `channels` random `h×w` planes of values within
/// `±b`, gathered row by row as `nn::reference::window_indices` lists them (each
/// input in every window that covers it), and the pooling's geometry.
fn pooled_windows(
    p: u64,
    (channels, h, w): (usize, usize, usize),
    (k, s): (usize, usize),
    b: i128,
    rng: &mut ChaCha20Rng,
) -> (Vec<u64>, Pooling, usize) {
    let plane: Vec<i128> = (0..channels * h * w)
        .map(|i| match i % 7 {
            // ties and the bound's edges among random values
            0 => 5,
            1 => -b,
            2 => b,
            _ => rng.random_range(-b..=b),
        })
        .collect();
    let (oh, ow) = ((h - k) / s + 1, (w - k) / s + 1);
    let mut y = Vec::new();
    for c in 0..channels {
        for oy in 0..oh {
            for ox in 0..ow {
                for dy in 0..k {
                    for dx in 0..k {
                        let v = plane[(c * h + oy * s + dy) * w + ox * s + dx];
                        y.push(centred(p, v));
                    }
                }
            }
        }
    }
    let g = Pooling {
        k,
        stride: s,
        out_h: oh,
        out_w: ow,
    };
    (y, g, channels * oh * ow)
}

/// Overlapping pooling windows (stride below the side) run separably: every output
/// equals `gc::reference`'s max of its own window (with and without the signs tracked,
/// ReLU or not, truncating or not, square and oblong planes), for fewer COTs than the
/// window-by-window tree; the count is the rows' pieces plus the columns' (3×3/2:
/// `rows·out_w·2 + out_h·out_w·2` comparisons per channel against `8·out_h·out_w`).
#[test]
fn overlapping_pooling_windows_run_separably() {
    let mut rng = ChaCha20Rng::seed_from_u64(23);
    for p in [P20, P32, P40] {
        for (dims, ks) in [
            ((2, 9, 9), (3, 2)),
            ((1, 7, 10), (3, 1)),
            ((3, 6, 5), (2, 1)),
            ((1, 12, 8), (4, 3)),
        ] {
            for f in [0u32, 3] {
                for within in [true, false] {
                    let h = (p as i128 - 1) / 2;
                    let b = if within { (p as i128 - 1) / 4 - 1 } else { h };
                    let (y, g, count) = pooled_windows(p, dims, ks, b, &mut rng);
                    for op in [
                        Nonlinear::Max { window: g.k * g.k },
                        Nonlinear::MaxPool { window: g.k * g.k },
                    ] {
                        let spec = NonlinSpec {
                            p,
                            op,
                            trunc_bits: f,
                            count,
                        };
                        let base = if within {
                            OtSpec::faithful(spec).within_quarter()
                        } else {
                            OtSpec::faithful(spec)
                        };
                        let pooled = base.pooled(g);
                        check(pooled, &y, false, p ^ count as u64 ^ f as u64);
                        if f > 0 {
                            let approx = OtSpec {
                                trunc: Truncation::Approximate,
                                ..pooled
                            };
                            check(approx, &y, false, p ^ count as u64 ^ 77);
                        }
                        let (a, b) = pooled.cots();
                        let (c, d) = base.cots();
                        assert!(a + b < c + d, "{pooled:?}: {} vs {}", a + b, c + d);
                    }
                }
            }
        }
    }
}

/// A pooling geometry that does not fit the layer is refused before any traffic.
#[test]
fn pooling_that_does_not_fit_is_refused() {
    let spec = NonlinSpec {
        p: P20,
        op: Nonlinear::MaxPool { window: 9 },
        trunc_bits: 0,
        count: 8,
    };
    let g = Pooling {
        k: 3,
        stride: 2,
        out_h: 2,
        out_w: 2,
    };
    assert!(OtSpec::faithful(spec).pooled(g).validate().is_ok());
    for bad in [
        Pooling { stride: 3, ..g },
        Pooling { stride: 0, ..g },
        Pooling { k: 2, ..g },
        Pooling { out_h: 3, ..g },
        Pooling { out_w: 0, ..g },
    ] {
        let bad = OtSpec::faithful(spec).pooled(bad);
        let e = bad.validate().unwrap_err();
        assert!(e.to_string().contains("pooling"), "{e}");
        // its COT count is defined (no panic) though the layer would be refused
        let _ = bad.cots();
    }
    let relu = NonlinSpec {
        op: Nonlinear::Relu,
        count: 4,
        ..spec
    };
    assert!(OtSpec::faithful(relu).pooled(g).validate().is_err());
}

#[test]
fn all_ops_over_tcp() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let p = P32;
    let y = values(p, 12, 40, &mut rng);
    check(OtSpec::faithful(relu(p, 12, y.len())), &y, true, 9);
    check(OtSpec::approximate(relu(p, 12, y.len())), &y, true, 10);
    let yw = windows(p, 2, 8, 4, &mut rng);
    let spec = NonlinSpec {
        p,
        op: Nonlinear::MaxPool { window: 4 },
        trunc_bits: 2,
        count: 8,
    };
    check(OtSpec::faithful(spec), &yw, true, 11);
}

#[test]
fn drelu_all_primes() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    for p in [P20, P32, P40, P60] {
        let y = values(p, 12, 80, &mut rng);
        let (c, s) = split(&y, p, &mut rng);
        let (cch, sch) =
            MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE);
        let (zc, zs) =
            ot::protocol::run_drelu_over(p, SilentParams::with_depth(6), &c, &s, cch, sch).unwrap();
        let h = (p - 1) / 2;
        for i in 0..y.len() {
            let want = u64::from(y[i] <= h);
            assert_eq!((zc[i] + zs[i]) % p, want, "p {p}, y = {}", y[i]);
        }
    }
}

/// Values within `b`: its edges, every value around 0 where the comparison of the high
/// bits can miss, random ones.
fn high_bits_values(p: u64, f: u32, b: i128, extra: usize, rng: &mut ChaCha20Rng) -> Vec<u64> {
    let t = 1i128 << (f + 1);
    let mut v: Vec<i128> = vec![b, -b, b - 1, -b + 1];
    v.extend(-t.min(2048)..t.min(2048));
    v.extend((0..extra).map(|_| rng.random_range(-b..=b)));
    v.into_iter().map(|x| centred(p, x)).collect()
}

#[test]
fn high_bits_drelu_within_its_bound() {
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    for p in [P20, P32, P40, P60] {
        for f in [1u32, 7, 12] {
            for op in [
                Nonlinear::Relu,
                Nonlinear::Identity,
                Nonlinear::MaxPool { window: 4 },
            ] {
                // the DReLU's bound |Y| ≤ (p − 1)/2 − 2^f; a max tree's (−p/4, p/4)
                let (w, b) = match op {
                    Nonlinear::MaxPool { window } => (window, (p as i128 - 1) / 4 - 1),
                    _ => (1, (p as i128 - 1) / 2 - (1i128 << f)),
                };
                let y = high_bits_values(p, f, b, 200, &mut rng);
                let spec = NonlinSpec {
                    p,
                    op,
                    trunc_bits: f,
                    count: y.len() / w,
                };
                let y = &y[..spec.count * w];
                for base in [OtSpec::faithful(spec), OtSpec::approximate(spec)] {
                    let high = base.high_bits();
                    let high = if w > 1 { high.within_quarter() } else { high };
                    check(high, y, false, p ^ f as u64 ^ 31);
                    // f + 1 fewer COTs per element in the DReLU's leaves, fewer AND groups
                    let (a, b) = high.cots();
                    let (c, d) = OtSpec {
                        high_bits_drelu: false,
                        ..high
                    }
                    .cots();
                    assert!(
                        a + b + (f as usize + 1) * spec.count <= c + d,
                        "{high:?}: {} vs {}",
                        a + b,
                        c + d
                    );
                }
            }
        }
    }
}

#[test]
fn high_bits_drelu_needs_its_bound() {
    // at −(p − 1)/2, outside the bound, the high bits miss the wrap for most shares: the
    // bound the programs keep is what makes the results exact
    let p = P20;
    let f = 7;
    let y = vec![centred(p, -((p as i128 - 1) / 2)); 64];
    let spec = OtSpec::faithful(relu(p, f, y.len())).high_bits();
    let mut rng = ChaCha20Rng::seed_from_u64(22);
    let (c, s) = split(&y, p, &mut rng);
    let (cch, sch) = MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(120), Link::NONE);
    let (zc, zs, _) = run_over_with(&spec, opts(), &c, &s, cch, sch).unwrap();
    let want = gc::reference(&spec.spec, &y);
    let wrong = (0..y.len())
        .filter(|&i| (zc[i] + zs[i]) % p != want[i])
        .count();
    assert!(wrong > 32, "{wrong} of 64 wrong");
}

#[test]
fn coarse_drelu_zeroes_only_small_relu_inputs_and_leaves_identity_exact() {
    // an approximate step's coarse DReLU of c bits: the shares' sum equals the model
    // bit for bit; a ReLU's result is ⌊Y/2^f⌋ or one less (the approximate truncation),
    // or 0 only where Y < 2^(f + c); an Identity's is what it is without the coarse
    // DReLU; and each bit left out is a COT fewer per element
    let mut rng = ChaCha20Rng::seed_from_u64(23);
    for p in [P20, P32, P40] {
        for (f, c) in [(1u32, 3u32), (7, 1), (7, 3), (4, 6)] {
            for op in [Nonlinear::Relu, Nonlinear::Identity] {
                let zone = 1i128 << (f + c);
                let b = (p as i128 - 1) / 2 - zone;
                let mut y: Vec<i128> = vec![b, -b, b - 1, -b + 1];
                // every value around the dead zone, then random ones
                y.extend(-2 * zone.min(1024)..2 * zone.min(1024));
                y.extend((0..300).map(|_| rng.random_range(-b..=b)));
                let yp: Vec<u64> = y.iter().map(|&v| centred(p, v)).collect();
                let spec = OtSpec::approximate(NonlinSpec {
                    p,
                    op,
                    trunc_bits: f,
                    count: yp.len(),
                })
                .high_bits();
                let coarse = spec.coarse(c);
                let (cs, ss) = split(&yp, p, &mut rng);
                let (cch, sch) =
                    MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(120), Link::NONE);
                let (zc, zs, _) = run_over_with(&coarse, opts(), &cs, &ss, cch, sch).unwrap();
                let relu = op == Nonlinear::Relu;
                let mut changed = 0;
                for i in 0..yp.len() {
                    let got = (zc[i] + zs[i]) % p;
                    let model = approx_trunc(p, f, relu, true, c, yp[i], ss[i]);
                    assert_eq!(got, model, "{coarse:?}: y = {}", y[i]);
                    let without = approx_trunc(p, f, relu, true, 0, yp[i], ss[i]);
                    if !relu {
                        assert_eq!(got, without, "Identity, f {f}, c {c}: y = {}", y[i]);
                        continue;
                    }
                    let floor = centred(p, if y[i] < 0 { 0 } else { y[i] >> f });
                    let approximate = got == floor || got == (floor + p - 1) % p;
                    let dead = got == 0 && (0..zone).contains(&y[i]);
                    assert!(
                        approximate || dead,
                        "ReLU f {f}, c {c}: y = {}, got {got}",
                        y[i]
                    );
                    changed += usize::from(got != without);
                }
                if relu && c >= 2 {
                    // the dead zone is exercised: some results differ from the
                    // high-bits DReLU's (all of them below 2^(f + c), by the above).
                    // With c = 1 a zeroed result may always be one the approximate
                    // truncation had already taken one below (p − 1 ≡ 0 mod 2^(f+2))
                    assert!(changed > 0, "p {p}, f {f}, c {c}: no result changed");
                }
                let (a, b) = coarse.cots();
                let (a0, b0) = spec.cots();
                assert!(
                    a + b + c as usize * yp.len() <= a0 + b0,
                    "{coarse:?}: {} COTs against {}",
                    a + b,
                    a0 + b0
                );
            }
        }
    }
    // the coarse DReLU needs approximate truncation of a ReLU or Identity step with the
    // high-bits DReLU
    let relu7 = relu(P20, 7, 4);
    for bad in [
        OtSpec::faithful(relu7).high_bits().coarse(2),
        OtSpec::approximate(relu7).coarse(2),
        OtSpec::approximate(relu7)
            .high_bits()
            .coarse(ot::MAX_COARSE_DRELU_BITS + 1),
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}

/// Layers of more elements than one parallel piece (4096): the millionaire's tables,
/// the OTs' rows and the 1-of-2^k pads run in pieces on the rayon pool, and every
/// element, across the pieces' boundaries, equals the reference (ReLU and Identity with
/// both truncations, the high-bits and coarse DReLUs, a max tree with signs).
#[test]
fn layers_of_several_pieces() {
    let mut rng = ChaCha20Rng::seed_from_u64(41);
    let f = 7;
    let y = values(P32, f, 2 * 4096 + 1000, &mut rng);
    let n = y.len();
    assert!(n > 3 * 4096);
    check(OtSpec::faithful(relu(P32, f, n)), &y, false, 1);
    check(OtSpec::approximate(relu(P32, f, n)), &y, false, 2);
    let id = NonlinSpec {
        op: Nonlinear::Identity,
        ..relu(P32, f, n)
    };
    check(OtSpec::faithful(id), &y, false, 3);
    // inputs within the high-bits and coarse DReLUs' bound
    let b = ((P32 - 1) / 2) as i128 - (1i128 << (f + 3));
    let y: Vec<u64> = (0..n)
        .map(|_| centred(P32, rng.random_range(-b..=b)))
        .collect();
    check(
        OtSpec::approximate(relu(P32, f, n)).high_bits().coarse(3),
        &y,
        false,
        4,
    );
    let window = 3;
    let count = 3 * 4096 / window + 5;
    let y = windows(P32, f, count * window, 1, &mut rng);
    let spec = NonlinSpec {
        p: P32,
        op: Nonlinear::MaxPool { window },
        trunc_bits: f,
        count,
    };
    check(OtSpec::faithful(spec), &y, false, 5);
}
