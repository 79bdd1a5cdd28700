//! The approximate truncation: its error bound checked exhaustively on small fields,
//! and the protocol against the model for every (value, server share) pair.
#![allow(clippy::unwrap_used)]

use gc::{NonlinSpec, Nonlinear};
use ot::{approx_trunc, run_over_with, OtSpec, RunOptions, SilentParams};

fn centre(p: u64, y: u64) -> i128 {
    let v = y as i128;
    if v > (p as i128 - 1) / 2 {
        v - p as i128
    } else {
        v
    }
}

#[test]
fn error_is_zero_or_minus_one_exhaustively() {
    for p in [3u64, 5, 61, 101, 257, 1009] {
        let l = 64 - p.leading_zeros();
        for f in 1..l {
            for relu in [false, true] {
                for y in 0..p {
                    let yc = centre(p, y);
                    let exact = if relu && yc < 0 {
                        0
                    } else {
                        yc.div_euclid(1 << f)
                    };
                    for ys in 0..p {
                        let got = approx_trunc(p, f, relu, false, 0, y, ys);
                        let gotc = centre(p, got);
                        let err = exact - gotc;
                        assert!(
                            err == 0 || err == 1,
                            "p {p} f {f} relu {relu} y {yc} ys {ys}: {gotc} vs {exact}"
                        );
                        if relu && yc < 0 {
                            assert_eq!(err, 0, "negative inputs of ReLU are exact");
                        }
                        // the documented condition
                        if !(relu && yc < 0) {
                            let a = ((2 * ys) % p) % (1 << (f + 1));
                            let cond = a as i128 > 2 * yc.rem_euclid(1 << f);
                            assert_eq!(err == 1, cond);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn error_rate_follows_the_low_bits() {
    // with a uniform server share, P[off by one] ≈ 1 − (Y mod 2^f + ½)/2^f
    let p = 1009u64;
    let f = 3;
    for rho in 0..8i128 {
        let ys: Vec<u64> = (0..p).collect();
        let y = (16 + rho) as u64; // a positive value with Y mod 8 = rho
        let errs = ys
            .iter()
            .filter(|&&s| approx_trunc(p, f, false, false, 0, y, s) != (16 + rho as u64) / 8)
            .count();
        let rate = errs as f64 / p as f64;
        let want = 1.0 - (rho as f64 + 0.5) / 8.0;
        assert!((rate - want).abs() < 0.03, "rho {rho}: {rate} vs {want}");
    }
}

#[test]
fn high_bits_model_is_exact_or_one_below_and_closer_than_the_full_one() {
    // within the bound |Y| ≤ (p − 1)/2 − 2^f the high-bits DReLU only turns some of
    // the full model's −1s on a ReLU's exact 0 into 0s
    let mut changed = 0;
    for p in [61u64, 101, 257, 1009] {
        let l = 64 - p.leading_zeros();
        for f in 1..l - 2 {
            let bound = (p as i128 - 1) / 2 - (1 << f);
            for relu in [false, true] {
                for y in (-bound..=bound).map(|v| v.rem_euclid(p as i128) as u64) {
                    for ys in 0..p {
                        let full = approx_trunc(p, f, relu, false, 0, y, ys);
                        let high = approx_trunc(p, f, relu, true, 0, y, ys);
                        if high != full {
                            let yc = centre(p, y);
                            assert!(relu && (0..1 << f).contains(&yc), "p {p} f {f} y {yc}");
                            assert_eq!((high, centre(p, full)), (0, -1), "p {p} f {f} y {yc}");
                            changed += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(
        changed > 0,
        "the high-bits DReLU never differed: the model is untested"
    );
}

#[test]
fn protocol_matches_model_for_every_share() {
    let p = 61u64;
    let opts = RunOptions {
        params: SilentParams::with_depth(8),
        warmup: 0,
    };
    for high in [false, true] {
        for f in 1..5u32 {
            // the high-bits DReLU's inputs keep |Y| ≤ (p − 1)/2 − 2^f
            let bound = if high {
                (p as i128 - 1) / 2 - (1 << f)
            } else {
                (p as i128 - 1) / 2
            };
            for op in [Nonlinear::Relu, Nonlinear::Identity] {
                let mut y = Vec::new();
                let mut s = Vec::new();
                for v in (-bound..=bound).map(|v| v.rem_euclid(p as i128) as u64) {
                    for sh in 0..p {
                        y.push(v);
                        s.push(sh);
                    }
                }
                let c: Vec<u64> = y.iter().zip(&s).map(|(y, s)| (y + p - s) % p).collect();
                let mut spec = OtSpec::approximate(NonlinSpec {
                    p,
                    op,
                    trunc_bits: f,
                    count: y.len(),
                });
                spec.high_bits_drelu = high;
                let (cch, sch) = net::MemChannel::pair(
                    net::DEFAULT_MAX_FRAME,
                    std::time::Duration::from_secs(60),
                    net::Link::NONE,
                );
                let (zc, zs, _) = run_over_with(&spec, opts, &c, &s, cch, sch).unwrap();
                for i in 0..y.len() {
                    let want = approx_trunc(p, f, op == Nonlinear::Relu, high, 0, y[i], s[i]);
                    assert_eq!(
                        (zc[i] + zs[i]) % p,
                        want,
                        "{op:?} f {f} high {high} y {} s {}",
                        y[i],
                        s[i]
                    );
                }
                // and faithful is exact on the same inputs
                let spec = OtSpec {
                    trunc: ot::Truncation::Faithful,
                    ..spec
                };
                let (cch, sch) = net::MemChannel::pair(
                    net::DEFAULT_MAX_FRAME,
                    std::time::Duration::from_secs(60),
                    net::Link::NONE,
                );
                let (zc, zs, _) = run_over_with(&spec, opts, &c, &s, cch, sch).unwrap();
                let want = gc::reference(&spec.spec, &y);
                for i in 0..y.len() {
                    assert_eq!((zc[i] + zs[i]) % p, want[i], "{op:?} f {f} high {high}");
                }
            }
        }
    }
}
