//! The two parties' COT accounting across many refills: random layer sequences (ops,
//! sizes, truncations) run for several inputs in one session with small silent batches,
//! so the pools of both directions refill many times, at points that fall inside
//! millionaires, triples and OTs alike. Every output is checked against the plaintext
//! reference, both parties must end with the same pool positions and batch counts, and
//! each layer must run the batches `PoolModel` (the projection's count) says.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use gc::{NonlinSpec, Nonlinear};
use net::{Link, MemChannel};
use ot::{client_online, server_online, Dir, OtSession, OtSpec, PoolModel, Role, SilentParams};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const PRIMES: [u64; 3] = [1032193, 4295049217, 1099511480321];

#[derive(Clone, Debug)]
struct Layer {
    op: u8,
    count: usize,
    trunc_bits: u32,
    approximate: bool,
}

fn spec(p: u64, l: &Layer) -> OtSpec {
    let (op, trunc_bits) = match l.op {
        0 => (Nonlinear::Relu, l.trunc_bits),
        1 => (Nonlinear::MaxPool { window: 4 }, 0),
        2 => (Nonlinear::Identity, l.trunc_bits.max(1)),
        _ => (Nonlinear::Max { window: 2 }, 0),
    };
    let s = NonlinSpec {
        p,
        op,
        trunc_bits,
        count: l.count,
    };
    if l.approximate && trunc_bits > 0 && matches!(op, Nonlinear::Relu | Nonlinear::Identity) {
        OtSpec::approximate(s)
    } else {
        OtSpec::faithful(s)
    }
}

fn layer() -> impl Strategy<Value = Layer> {
    (0u8..4, 1usize..300, 0u32..9, any::<bool>()).prop_map(
        |(op, count, trunc_bits, approximate)| Layer {
            op,
            count,
            trunc_bits,
            approximate,
        },
    )
}

/// Runs `inputs` passes over `layers` in one session; returns the number of batches
/// each side ran per direction.
fn run(p: u64, layers: &[Layer], inputs: usize, seed: u64) -> (u64, u64) {
    // depth 5: 5 632 usable COTs per batch, a few elements of a 40-bit ReLU
    let params = SilentParams::with_depth(5);
    let specs: Vec<OtSpec> = (0..inputs)
        .flat_map(|_| layers.iter().map(|l| spec(p, l)))
        .collect();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let data: Vec<(Vec<u64>, Vec<u64>, Vec<u64>)> = specs
        .iter()
        .map(|s| {
            let y: Vec<u64> = (0..s.spec.inputs())
                .map(|_| rng.random_range(0..p))
                .collect();
            let c: Vec<u64> = y.iter().map(|_| rng.random_range(0..p)).collect();
            let sh: Vec<u64> = y.iter().zip(&c).map(|(y, c)| (y + p - c) % p).collect();
            (y, c, sh)
        })
        .collect();
    let (mut sch, mut cch) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE);
    let sp = specs.clone();
    let server_in: Vec<Vec<u64>> = data.iter().map(|d| d.2.clone()).collect();
    let h = std::thread::spawn(move || {
        let mut s = OtSession::new(&mut sch, Role::Server, params).unwrap();
        let mut outs = Vec::new();
        for (spec, x) in sp.iter().zip(&server_in) {
            let pre = s.server_offline(&mut sch, spec).unwrap();
            outs.push(server_online(&mut sch, pre, x).unwrap());
        }
        (outs, s.stats(), s.position(Dir::Sc), s.position(Dir::Cs))
    });
    let mut c = OtSession::new(&mut cch, Role::Client, params).unwrap();
    let mut couts = Vec::new();
    // the refills of every layer as the projection counts them, without running them
    let mut model = PoolModel::new(params);
    for (k, (spec, d)) in specs.iter().zip(&data).enumerate() {
        let before = (c.stats().batches_sc, c.stats().batches_cs);
        let pre = c.client_offline(&mut cch, spec).unwrap();
        let ran = (
            c.stats().batches_sc - before.0,
            c.stats().batches_cs - before.1,
        );
        let r = model.layer(spec);
        assert_eq!((r[0], r[1]), ran, "batches of layer {k} ({spec:?})");
        couts.push(client_online(&mut cch, pre, &d.1).unwrap());
    }
    let (souts, sstats, ssc, scs) = h.join().unwrap();
    for (k, spec) in specs.iter().enumerate() {
        let want = gc::reference(&spec.spec, &data[k].0);
        for i in 0..spec.spec.count {
            let got = (couts[k][i] + souts[k][i]) % p;
            if spec.trunc == ot::Truncation::Approximate {
                assert!(
                    got == want[i] || (got + 1) % p == want[i],
                    "layer {k} element {i}"
                );
            } else {
                assert_eq!(got, want[i], "layer {k} ({spec:?}) element {i}");
            }
        }
    }
    let cstats = c.stats();
    assert_eq!((c.position(Dir::Sc), c.position(Dir::Cs)), (ssc, scs));
    assert_eq!(
        (cstats.batches_sc, cstats.batches_cs),
        (sstats.batches_sc, sstats.batches_cs)
    );
    (cstats.batches_sc, cstats.batches_cs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn cot_accounting_holds_across_refills(
        prime in 0usize..3,
        layers in prop::collection::vec(layer(), 1..5),
        inputs in 1usize..5,
        seed in any::<u64>(),
    ) {
        run(PRIMES[prime], &layers, inputs, seed);
    }
}

/// A fixed case that refills several times in both directions (the property test's
/// cases may be small).
#[test]
fn many_refills_in_both_directions() {
    let layers = [
        Layer {
            op: 0,
            count: 257,
            trunc_bits: 7,
            approximate: false,
        },
        Layer {
            op: 1,
            count: 61,
            trunc_bits: 0,
            approximate: false,
        },
        Layer {
            op: 2,
            count: 190,
            trunc_bits: 5,
            approximate: true,
        },
    ];
    let (sc, cs) = run(PRIMES[2], &layers, 6, 7);
    assert!(sc > 5 && cs > 5, "batches SC {sc}, CS {cs}");
}
