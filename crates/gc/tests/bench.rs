#![allow(clippy::unwrap_used)]
//! Release-mode measurements (ignored by default):
//! `cargo test -p gc --release --test bench -- --ignored --nocapture`.

use gc::{reference, run_local, Garbler, NonlinSpec, Nonlinear};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn measure(spec: NonlinSpec, g: Garbler) {
    let p = spec.p;
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let y: Vec<u64> = (0..spec.inputs()).map(|_| rng.random_range(0..p)).collect();
    let srv: Vec<u64> = y.iter().map(|_| rng.random_range(0..p)).collect();
    let cli: Vec<u64> = y.iter().zip(&srv).map(|(&y, &s)| (y + p - s) % p).collect();
    let (c, s, r) = run_local(&spec, g, &cli, &srv).unwrap();
    let got: Vec<u64> = c.iter().zip(&s).map(|(a, b)| (a + b) % p).collect();
    assert_eq!(got, reference(&spec, &y));
    println!(
        "{:?} f={} count={} p={} garbler={:?}: ANDs {} ({}/elem) | offline {:.1} ms {:.2} MB | online {:.1} ms {:.2} MB, {} flights",
        spec.op,
        spec.trunc_bits,
        spec.count,
        p,
        g,
        r.and_gates,
        spec.and_gates_per_element(),
        r.offline_ms,
        r.bytes_offline as f64 / 1e6,
        r.online_ms,
        r.bytes_online as f64 / 1e6,
        r.rounds_online
    );
}

#[test]
#[ignore]
fn bench_relu_10000() {
    let spec = NonlinSpec {
        p: 1032193,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: 10000,
    };
    for g in [
        Garbler::Server,
        Garbler::Client,
        Garbler::Server,
        Garbler::Client,
    ] {
        measure(spec, g);
    }
    let spec = NonlinSpec {
        p: 1032193,
        op: Nonlinear::Relu,
        trunc_bits: 12,
        count: 10000,
    };
    measure(spec, Garbler::Server);
    let spec = NonlinSpec {
        p: 4293918721,
        op: Nonlinear::Relu,
        trunc_bits: 12,
        count: 10000,
    };
    measure(spec, Garbler::Server);
    let spec = NonlinSpec {
        p: 1032193,
        op: Nonlinear::MaxPool { window: 4 },
        trunc_bits: 0,
        count: 2500,
    };
    measure(spec, Garbler::Server);
    let spec = NonlinSpec {
        p: 1032193,
        op: Nonlinear::Identity,
        trunc_bits: 12,
        count: 10000,
    };
    measure(spec, Garbler::Server);
}

#[test]
#[ignore]
fn and_gate_table() {
    for p in [1032193u64, 4293918721] {
        for (op, f) in [
            (Nonlinear::Relu, 0),
            (Nonlinear::Relu, 12),
            (Nonlinear::Identity, 0),
            (Nonlinear::Identity, 12),
            (Nonlinear::MaxPool { window: 4 }, 0),
            (Nonlinear::MaxPool { window: 9 }, 0),
        ] {
            let s = NonlinSpec {
                p,
                op,
                trunc_bits: f,
                count: 1,
            };
            println!(
                "p={p} l={} {op:?} f={f}: {} ANDs/elem (bound {})",
                s.bits(),
                s.and_gates_per_element(),
                s.and_gates_bound()
            );
        }
    }
}

#[test]
#[ignore]
fn bench_parts() {
    use gc::garble::{evaluate, garble};
    use gc::label::FixedKeyAes;
    use std::time::Instant;
    let spec = NonlinSpec {
        p: 1032193,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: 10000,
    };
    let c = spec.circuit().unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let n = spec.count;
    let ez: Vec<u128> = (0..n * c.evaluator_inputs).map(|_| rng.random()).collect();
    let gz: Vec<u128> = (0..n * c.garbler_inputs).map(|_| rng.random()).collect();
    let delta = rng.random::<u128>() | 1;
    let h = FixedKeyAes::new();
    let t = Instant::now();
    let (tables, decode) = garble(&c, n, delta, &ez, &gz, &h);
    println!(
        "garble: {:.1} ms ({} gates/elem, {} ANDs)",
        t.elapsed().as_secs_f64() * 1e3,
        c.gates.len(),
        c.and_gates()
    );
    let t = Instant::now();
    let out = evaluate(&c, n, &ez, &gz, &tables, &decode, &h).unwrap();
    println!("evaluate: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    assert_eq!(out.len(), n * 20);
    let mut xs: Vec<u128> = (0..4_000_000u128).collect();
    let tw = xs.clone();
    let mut s = Vec::new();
    let t = Instant::now();
    for (x, w) in xs.chunks_mut(256).zip(tw.chunks(256)) {
        h.hash_batch(x, w, &mut s);
    }
    println!("4M hashes: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
}

#[test]
#[ignore]
fn bench_raw_aes() {
    use aes::cipher::{BlockCipherEncrypt, KeyInit};
    use std::time::Instant;
    let c = aes::Aes128::new(&[7u8; 16].into());
    let mut v = vec![aes::Block::default(); 4_000_000];
    let t = Instant::now();
    for ch in v.chunks_mut(256) {
        c.encrypt_blocks(ch);
    }
    println!("raw 4M AES: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
}
