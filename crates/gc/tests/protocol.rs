#![allow(clippy::unwrap_used)]
//! The GC step against the cleartext reference.

use gc::{reference, run_local, Garbler, NonlinSpec, Nonlinear};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const P20: u64 = 1032193;
const P32: u64 = 4293918721;

/// Splits y into random shares and checks the reconstructed output.
fn check(spec: NonlinSpec, y: &[u64], garbler: Garbler, seed: u64) {
    let p = spec.p;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let server: Vec<u64> = y.iter().map(|_| rng.random_range(0..p)).collect();
    let client: Vec<u64> = y
        .iter()
        .zip(&server)
        .map(|(&y, &s)| (y + p - s) % p)
        .collect();
    let (c, s, rep) = run_local(&spec, garbler, &client, &server).unwrap();
    assert_eq!(c.len(), spec.count);
    assert_eq!(s.len(), spec.count);
    let want = reference(&spec, y);
    let got: Vec<u64> = c.iter().zip(&s).map(|(&a, &b)| (a + b) % p).collect();
    assert_eq!(got, want, "{spec:?} {garbler:?} y={y:?}");
    assert!(c.iter().chain(&s).all(|&v| v < p));
    assert_eq!(rep.and_gates, spec.and_gates());
    assert_eq!(rep.rounds_online, 2);
}

fn enc(v: i64, p: u64) -> u64 {
    v.rem_euclid(p as i64) as u64
}

#[test]
fn reference_by_hand() {
    let p = 101u64;
    let relu = NonlinSpec {
        p,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: 4,
    };
    assert_eq!(reference(&relu, &[0, 5, 50, 51]), vec![0, 5, 50, 0]);
    assert_eq!(reference(&relu, &[100, 1, 99, 52]), vec![0, 1, 0, 0]);
    let t = NonlinSpec {
        p,
        op: Nonlinear::Relu,
        trunc_bits: 2,
        count: 3,
    };
    assert_eq!(reference(&t, &[7, 8, 50]), vec![1, 2, 12]);
    let id = NonlinSpec {
        p,
        op: Nonlinear::Identity,
        trunc_bits: 2,
        count: 5,
    };
    // -1 -> floor(-1/4) = -1 = 100; -4 -> -1; -5 -> -2 = 99; 7 -> 1; -50 -> -13 = 88
    assert_eq!(
        reference(&id, &[100, 97, 96, 7, 51]),
        vec![100, 100, 99, 1, 88]
    );
    let mp = NonlinSpec {
        p,
        op: Nonlinear::MaxPool { window: 3 },
        trunc_bits: 0,
        count: 3,
    };
    assert_eq!(
        reference(&mp, &[100, 99, 98, 3, 100, 2, 50, 51, 0]),
        vec![0, 3, 50]
    );
    let mp1 = NonlinSpec {
        p,
        op: Nonlinear::MaxPool { window: 2 },
        trunc_bits: 1,
        count: 1,
    };
    assert_eq!(reference(&mp1, &[9, 60]), vec![4]);
    let id0 = NonlinSpec {
        p,
        op: Nonlinear::Identity,
        trunc_bits: 0,
        count: 2,
    };
    assert_eq!(reference(&id0, &[100, 3]), vec![100, 3]);
}

fn edges(p: u64, f: u32) -> Vec<u64> {
    let h = (p - 1) / 2;
    let big = (h >> f) << f; // largest fixed-point value representable
    let mut v = vec![0, 1, p - 1, h, h + 1, h - 1, h + 2, big, p - big, 2, p - 2];
    v.extend([
        enc(1 << f, p),
        enc(-(1 << f), p),
        enc(-(1 << f) - 1, p),
        enc((1 << f) - 1, p),
    ]);
    v
}

#[test]
fn relu_edges_all_configs() {
    for p in [P20, P32] {
        for f in [0u32, 8, 12] {
            for g in [Garbler::Server, Garbler::Client] {
                let y = edges(p, f);
                let spec = NonlinSpec {
                    p,
                    op: Nonlinear::Relu,
                    trunc_bits: f,
                    count: y.len(),
                };
                check(spec, &y, g, p ^ f as u64);
            }
        }
    }
}

#[test]
fn identity_trunc_edges() {
    for p in [P20, P32] {
        for f in [0u32, 8, 12] {
            for g in [Garbler::Server, Garbler::Client] {
                let y = edges(p, f);
                let spec = NonlinSpec {
                    p,
                    op: Nonlinear::Identity,
                    trunc_bits: f,
                    count: y.len(),
                };
                check(spec, &y, g, 7 + f as u64);
            }
        }
    }
}

#[test]
fn maxpool_edges() {
    for p in [P20, P32] {
        let h = (p - 1) / 2;
        for f in [0u32, 8, 12] {
            for g in [Garbler::Server, Garbler::Client] {
                let y = vec![
                    // all negative windows
                    p - 1,
                    p - 5,
                    h + 1,
                    h + 2,
                    h + 1,
                    h + 1,
                    h + 1,
                    h + 1,
                    // mixed
                    h,
                    h + 1,
                    0,
                    p - 1,
                    0,
                    0,
                    0,
                    0,
                    3,
                    2 << f,
                    p - (9 << f),
                    1,
                    enc(-(1 << f), p),
                    enc(-3, p),
                    1 << 13,
                    5,
                ];
                let spec = NonlinSpec {
                    p,
                    op: Nonlinear::MaxPool { window: 4 },
                    trunc_bits: f,
                    count: 6,
                };
                check(spec, &y, g, 3);
            }
        }
    }
    // window 1 and 2
    let spec = NonlinSpec {
        p: P20,
        op: Nonlinear::MaxPool { window: 1 },
        trunc_bits: 0,
        count: 3,
    };
    check(spec, &[1, P20 - 1, 7], Garbler::Server, 1);
    let spec = NonlinSpec {
        p: P20,
        op: Nonlinear::MaxPool { window: 2 },
        trunc_bits: 3,
        count: 2,
    };
    check(
        spec,
        &[P20 - 1, P20 - 2, 100, P20 - 100],
        Garbler::Client,
        1,
    );
}

#[test]
fn both_roles_same_result() {
    let p = P20;
    let mut rng = ChaCha20Rng::seed_from_u64(42);
    let y: Vec<u64> = (0..200).map(|_| rng.random_range(0..p)).collect();
    let spec = NonlinSpec {
        p,
        op: Nonlinear::Relu,
        trunc_bits: 8,
        count: 200,
    };
    let mut outs = Vec::new();
    for g in [Garbler::Server, Garbler::Client] {
        let srv: Vec<u64> = y.iter().map(|_| rng.random_range(0..p)).collect();
        let cli: Vec<u64> = y.iter().zip(&srv).map(|(&y, &s)| (y + p - s) % p).collect();
        let (c, s, _) = run_local(&spec, g, &cli, &srv).unwrap();
        outs.push(
            c.iter()
                .zip(&s)
                .map(|(a, b)| (a + b) % p)
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], reference(&spec, &y));
}

#[test]
fn outputs_are_fresh_shares() {
    let spec = NonlinSpec {
        p: P20,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: 8,
    };
    let y = vec![5u64; 8];
    let z = vec![0u64; 8];
    let (c1, s1, _) = run_local(&spec, Garbler::Server, &y, &z).unwrap();
    let (c2, s2, _) = run_local(&spec, Garbler::Server, &y, &z).unwrap();
    assert_ne!(c1, c2);
    assert_ne!(s1, s2);
}

#[test]
fn and_gate_counts() {
    for p in [P20, P32, 101, 65537] {
        for op in [
            Nonlinear::Relu,
            Nonlinear::Identity,
            Nonlinear::MaxPool { window: 4 },
            Nonlinear::MaxPool { window: 9 },
        ] {
            for f in [0u32, 3] {
                let spec = NonlinSpec {
                    p,
                    op,
                    trunc_bits: f,
                    count: 5,
                };
                let c = spec.circuit().unwrap();
                let per = spec.and_gates_per_element();
                assert_eq!(per, c.and_gates());
                assert_eq!(spec.and_gates(), 5 * c.and_gates());
                let bound = spec.and_gates_bound();
                assert!(per <= bound, "{spec:?}: {per} > {bound}");
                assert!(
                    bound - per <= 3 * spec.window() as u64 + 3,
                    "{spec:?}: bound {bound} loose vs {per}"
                );
            }
        }
        let l = (64 - p.leading_zeros()) as u64;
        let relu = NonlinSpec {
            p,
            op: Nonlinear::Relu,
            trunc_bits: 0,
            count: 1,
        };
        assert!(relu.and_gates_per_element() <= 7 * l, "ReLU ≤ 7ℓ");
    }
    assert_eq!(
        NonlinSpec {
            p: P20,
            op: Nonlinear::Relu,
            trunc_bits: 0,
            count: 1
        }
        .and_gates_per_element(),
        136
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]
    #[test]
    fn random_inputs_match_reference(
        big in any::<bool>(),
        opi in 0usize..4,
        f in prop::sample::select(vec![0u32, 8, 12]),
        client_garbles in any::<bool>(),
        count in 1usize..20,
        seed in any::<u64>(),
    ) {
        let p = if big { P32 } else { P20 };
        let op = [
            Nonlinear::Relu,
            Nonlinear::Identity,
            Nonlinear::MaxPool { window: 3 },
            Nonlinear::Max { window: 2 },
        ][opi];
        let spec = NonlinSpec { p, op, trunc_bits: f, count };
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let y: Vec<u64> = (0..spec.inputs()).map(|_| rng.random_range(0..p)).collect();
        let g = if client_garbles { Garbler::Client } else { Garbler::Server };
        check(spec, &y, g, seed);
    }
}

fn bits(v: u64, l: usize) -> Vec<bool> {
    (0..l).map(|i| (v >> i) & 1 == 1).collect()
}

/// Every input of small moduli through the plain circuit, against `reference`.
#[test]
fn circuits_exhaustive_small_p() {
    for p in [13u64, 101, 257] {
        for (op, f) in [
            (Nonlinear::Relu, 0u32),
            (Nonlinear::Relu, 2),
            (Nonlinear::Identity, 0),
            (Nonlinear::Identity, 1),
            (Nonlinear::Identity, 3),
            (Nonlinear::MaxPool { window: 2 }, 0),
            (Nonlinear::MaxPool { window: 2 }, 1),
            (Nonlinear::MaxPool { window: 3 }, 2),
            (Nonlinear::Max { window: 2 }, 0),
            (Nonlinear::Max { window: 2 }, 1),
            (Nonlinear::Max { window: 3 }, 2),
        ] {
            let spec = NonlinSpec {
                p,
                op,
                trunc_bits: f,
                count: 1,
            };
            let l = spec.bits();
            let k = spec.window();
            let c = spec.circuit().unwrap();
            let total = p.pow(k as u32).min(20_000);
            for idx in 0..total {
                let y: Vec<u64> = (0..k).map(|i| (idx / p.pow(i as u32)) % p).collect();
                let s: Vec<u64> = y.iter().map(|&v| (v * 7 + idx + 3) % p).collect();
                let cl: Vec<u64> = y.iter().zip(&s).map(|(&v, &s)| (v + p - s) % p).collect();
                let r = (idx * 13 + 5) % p;
                let eb: Vec<bool> = cl.iter().flat_map(|&v| bits(v, l)).collect();
                let mut gb: Vec<bool> = s.iter().flat_map(|&v| bits(v, l)).collect();
                gb.extend(bits(r, l));
                let out = c.eval_plain(&eb, &gb);
                let v = out
                    .iter()
                    .enumerate()
                    .fold(0u64, |a, (i, &b)| a | ((b as u64) << i));
                assert!(v < p);
                assert_eq!((v + r) % p, reference(&spec, &y)[0], "{spec:?} y={y:?}");
            }
        }
    }
}

#[test]
fn empty_layer() {
    let spec = NonlinSpec {
        p: P20,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: 0,
    };
    for g in [Garbler::Server, Garbler::Client] {
        let (c, s, rep) = run_local(&spec, g, &[], &[]).unwrap();
        assert!(c.is_empty() && s.is_empty());
        assert_eq!(rep.and_gates, 0);
    }
}
