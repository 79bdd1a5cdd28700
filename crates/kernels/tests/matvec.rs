//! Matrix-vector kernels: shares reconstruct an independent W·x mod p; op counts equal
//! the papers' formulas and table cells; errors are the expected variants.
#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;

use he::{Backend, Bfv, Count, Counting, Layout, Params, Sim, SlotInfo};
use kernels::{FloodPool, KernelError, LinearLayer, MatvecLayout, Method};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn n4096() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Params::preset("n4096").unwrap())
}
fn n8192() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Params::preset("n8192").unwrap())
}

fn real(p: &Params) -> SlotInfo {
    SlotInfo {
        n: p.n(),
        p: p.p(),
        layout: Layout::TwoRows,
    }
}

/// Independent reference: W·x with signed integers, reduced mod p at the end.
fn reference(w: &[i64], x: &[i64], n_o: usize, n_i: usize, p: u64) -> Vec<u64> {
    (0..n_o)
        .map(|r| {
            let s: i128 = (0..n_i)
                .map(|c| w[r * n_i + c] as i128 * x[c] as i128)
                .sum();
            s.rem_euclid(p as i128) as u64
        })
        .collect()
}

fn random_problem(n_o: usize, n_i: usize, seed: u64) -> (Vec<i64>, Vec<i64>) {
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let w = (0..n_o * n_i).map(|_| r.random_range(-64..=64)).collect();
    let x = (0..n_i).map(|_| r.random_range(-64..=64)).collect();
    (w, x)
}

/// Runs the whole protocol on one backend (client and server the same object) and
/// returns (client share, server share).
fn run<B: Backend>(
    b: &B,
    layout: &MatvecLayout,
    w: &[i64],
    x: &[i64],
    flood_bits: u32,
) -> (Vec<u64>, Vec<u64>) {
    let p = b.slots().p;
    let xr: Vec<u64> = x.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect();
    let m = layout.encode(b, w).unwrap();
    let q = layout.query(b, &xr).unwrap();
    let mut pool = FloodPool::at_level(flood_bits, b.level(&q[0]));
    pool.fill(b, layout.output_cts()).unwrap();
    let (resp, server) = layout.respond(b, &m, &q, &mut pool).unwrap();
    let client = layout.decrypt(b, &resp).unwrap();
    (client, server)
}

fn reconstruct(a: &[u64], b: &[u64], p: u64) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| (x + y) % p).collect()
}

const SHAPES: [(usize, usize); 8] = [
    (1, 1),
    (1, 2048),
    (2, 1024),
    (16, 128),
    (10, 128),
    (128, 784),
    (100, 300),
    (5000, 3000),
];

#[test]
fn every_method_reconstructs_on_sim() {
    let params = n4096();
    for (i, &(n_o, n_i)) in SHAPES.iter().enumerate() {
        let (w, x) = random_problem(n_o, n_i, i as u64);
        let want = reference(&w, &x, n_o, n_i, params.p());
        for method in Method::ALL {
            if n_o * n_i > 1_000_000 && method == Method::Naive {
                continue; // 5000 rotate-and-sums: covered by the other shapes
            }
            let layout = MatvecLayout::new(method, n_o, n_i, real(params)).unwrap();
            let sim = Sim::new(params, layout.galois());
            let (c, s) = run(&sim, &layout, &w, &x, 0);
            assert_eq!(
                reconstruct(&c, &s, params.p()),
                want,
                "{method} {n_o}x{n_i}"
            );
            assert_eq!(c.len(), n_o);
        }
    }
}

#[test]
fn every_method_reconstructs_in_the_ideal_cyclic_model() {
    let p = he::batching_prime(20, 2048).unwrap();
    let slots = SlotInfo {
        n: 2048,
        p,
        layout: Layout::Cyclic,
    };
    for (i, &(n_o, n_i)) in [(16, 128), (2, 1024), (1, 2048), (64, 64), (7, 3000)]
        .iter()
        .enumerate()
    {
        let (w, x) = random_problem(n_o, n_i, 100 + i as u64);
        let want = reference(&w, &x, n_o, n_i, p);
        for method in Method::ALL {
            let layout = MatvecLayout::with_key_budget(method, n_o, n_i, slots, None).unwrap();
            let sim = Sim::ideal(2048, p, layout.galois());
            let (c, s) = run(&sim, &layout, &w, &x, 0);
            assert_eq!(reconstruct(&c, &s, p), want, "{method} {n_o}x{n_i}");
        }
    }
}

fn bfv_case(method: Method, n_o: usize, n_i: usize, seed: u64) {
    let params = n8192();
    let layout = MatvecLayout::new(method, n_o, n_i, real(params)).unwrap();
    let bits = layout.flood_bits(params).unwrap();
    let client = Bfv::keygen(params, layout.galois()).unwrap();
    let server = Counting::new(Bfv::server(params, client.public_keys()).unwrap());
    let (w, x) = random_problem(n_o, n_i, seed);
    let p = params.p();
    let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
    let m = layout.encode(&server, &w).unwrap();
    let q: Vec<_> = layout
        .query(&client, &xr)
        .unwrap()
        .iter()
        .map(|c| server.deserialize(&client.serialize(c).unwrap()).unwrap())
        .collect();
    let mut pool = FloodPool::at_level(bits, server.level(&q[0]));
    pool.fill(&server, layout.output_cts()).unwrap();
    let (resp, s) = layout.respond(&server, &m, &q, &mut pool).unwrap();
    let resp: Vec<_> = resp
        .iter()
        .map(|c| client.deserialize(&server.serialize(c).unwrap()).unwrap())
        .collect();
    // Rounded for the wire, a response keeps only the precision decryption needs, so
    // its measured budget may be 0 bits: correct decryption is the reconstruction below.
    for r in &resp {
        assert_eq!(client.level(r), params.last_level());
        assert!(client.noise_budget(r).unwrap().is_some(), "{method}");
    }
    let c = layout.decrypt(&client, &resp).unwrap();
    assert_eq!(
        reconstruct(&c, &s, p),
        reference(&w, &x, n_o, n_i, p),
        "{method} {n_o}x{n_i} on Bfv"
    );
    // The same run on Sim and Count gives the same counts as on Bfv (server side).
    let sim = Counting::new(Sim::new(params, layout.galois()));
    let cnt = Count::real(params, layout.galois());
    for (name, counts) in [
        ("sim", server_counts(&sim, &layout, &w, &xr, bits)),
        ("count", server_counts(&cnt, &layout, &w, &xr, bits)),
    ] {
        let mut bfv = server.counts();
        bfv.encrypt = counts.encrypt; // the pool filled above
        assert_eq!(counts.perm, bfv.perm, "{method} perm on {name}");
        assert_eq!(counts.hst_perm, bfv.hst_perm, "{method} hst on {name}");
        assert_eq!(counts.sc_mult, bfv.sc_mult, "{method} scmult on {name}");
        assert_eq!(counts.add, bfv.add, "{method} add on {name}");
        assert_eq!(counts.dec_perm, bfv.dec_perm, "{method} decperm on {name}");
        assert_eq!(
            counts.mod_switch, bfv.mod_switch,
            "{method} modswitch on {name}"
        );
    }
}

fn server_counts<B: Backend>(
    b: &Counting<B>,
    layout: &MatvecLayout,
    w: &[i64],
    xr: &[u64],
    bits: u32,
) -> he::OpCounts {
    // Queries and the pool add encryptions and encodings only; the compared fields
    // (rotations, products, additions, switches) come from `respond` alone.
    let x: Vec<i64> = xr.iter().map(|&v| v as i64).collect();
    run(b, layout, w, &x, bits);
    b.take()
}

#[test]
fn bfv_gala_heliks_hybrid_16x128() {
    for (i, m) in [Method::Gala, Method::Heliks, Method::Hybrid]
        .into_iter()
        .enumerate()
    {
        bfv_case(m, 16, 128, 40 + i as u64);
    }
}

#[test]
fn bfv_rectangular_and_tiled() {
    bfv_case(Method::Heliks, 100, 300, 50);
    bfv_case(Method::Gala, 10, 128, 51);
    bfv_case(Method::Heliks, 3, 5000, 52); // two input tiles, fused before rotating
    bfv_case(Method::Bsgs, 64, 64, 53);
    bfv_case(Method::Naive, 2, 64, 54);
}

#[test]
fn bfv_diagonal_composes_keys_beyond_the_budget() {
    // d = 128 > 64 keys: power-of-two keys, composed rotations.
    let layout = MatvecLayout::new(Method::Diagonal, 16, 128, real(n8192())).unwrap();
    assert!(layout.rotations().composed());
    assert_eq!(layout.galois().key_count(4096), 7);
    bfv_case(Method::Diagonal, 16, 128, 55);
}

#[test]
fn responses_are_rerandomised() {
    // GALA 16x128 is one ScMult: without re-randomisation the response's c1 would be a
    // deterministic function (c1_query · w, switched down) of the query.
    let params = n8192();
    let layout = MatvecLayout::new(Method::Gala, 16, 128, real(params)).unwrap();
    let b = Bfv::keygen(params, layout.galois()).unwrap();
    let (w, x) = random_problem(16, 128, 60);
    let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
    let m = layout.encode(&b, &w).unwrap();
    let q = layout.query(&b, &xr).unwrap();
    let bits = layout.flood_bits(params).unwrap();
    let c1 = |ct: &he::BfvCt| -> Vec<u8> { b.component_bytes(ct, 1).unwrap() };
    let mut pool = FloodPool::at_level(bits, b.level(&q[0]));
    pool.fill(&b, 2).unwrap();
    let (r1, _) = layout.respond(&b, &m, &q, &mut pool).unwrap();
    let (r2, _) = layout.respond(&b, &m, &q, &mut pool).unwrap();
    let plain = b
        .switch_to_last(&layout.compute(&b, &m, &q).unwrap()[0])
        .unwrap();
    assert_ne!(c1(&r1[0]), c1(&r2[0]));
    assert_ne!(c1(&r1[0]), c1(&plain));
    // Without step 2 the c1 half is reproducible from the query alone.
    let plain2 = b
        .switch_to_last(&layout.compute(&b, &m, &q).unwrap()[0])
        .unwrap();
    assert_eq!(c1(&plain), c1(&plain2));
    assert!(matches!(
        layout.respond(&b, &m, &q, &mut pool),
        Err(KernelError::PoolEmpty { .. })
    ));
}

#[test]
fn n4096_cannot_afford_flooding_and_names_a_preset_that_can() {
    let layout = MatvecLayout::new(Method::Hybrid, 16, 128, real(n4096())).unwrap();
    match layout.flood_bits(n4096()) {
        Err(KernelError::NoiseBudget { suggestion, .. }) => {
            assert!(suggestion.contains("n8192"), "{suggestion}")
        }
        other => panic!("expected a noise-budget error, got {other:?}"),
    }
    assert!(layout.flood_bits(n8192()).is_ok());
}

#[test]
fn bad_inputs_are_typed_errors() {
    let s = real(n4096());
    assert!(matches!(
        MatvecLayout::new(Method::Gala, 0, 4, s),
        Err(KernelError::EmptyDimension { .. })
    ));
    let layout = MatvecLayout::new(Method::Gala, 2, 3, s).unwrap();
    let sim = Sim::new(n4096(), layout.galois());
    assert!(matches!(
        layout.encode(&sim, &[1, 2, 3]),
        Err(KernelError::Shape {
            expected: 6,
            actual: 3,
            ..
        })
    ));
    let big = n4096().p() as i64;
    assert!(matches!(
        layout.encode(&sim, &[1, 2, 3, 4, 5, big]),
        Err(KernelError::WeightRange { index: 5, .. })
    ));
    assert!(matches!(
        layout.query(&sim, &[1, 2]),
        Err(KernelError::Shape {
            expected: 3,
            actual: 2,
            ..
        })
    ));
    assert!(matches!(
        layout.query(&sim, &[1, 2, n4096().p()]),
        Err(KernelError::He(he::HeError::NotReduced { .. }))
    ));
    let other = MatvecLayout::new(Method::Heliks, 2, 3, s).unwrap();
    let m = other.encode(&sim, &[1; 6]).unwrap();
    let q = layout.query(&sim, &[1, 2, 3]).unwrap();
    assert!(matches!(
        layout.compute(&sim, &m, &q),
        Err(KernelError::PlanMismatch { .. })
    ));
    let m = layout.encode(&sim, &[1; 6]).unwrap();
    assert!(matches!(
        layout.compute(&sim, &m, &[]),
        Err(KernelError::CiphertextCount { .. })
    ));
}

#[test]
fn encoded_matrices_save_and_load() {
    let params = n8192();
    let layout = MatvecLayout::new(Method::Heliks, 10, 300, real(params)).unwrap();
    let b = Bfv::keygen(params, layout.galois()).unwrap();
    let (w, x) = random_problem(10, 300, 70);
    let m = layout.encode(&b, &w).unwrap();
    let bytes = m.save(&b).unwrap();
    let loaded = kernels::EncodedMatrix::load(&b, &layout, &bytes).unwrap();
    let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
    let q = layout.query(&b, &xr).unwrap();
    let mut pool = FloodPool::at_level(layout.flood_bits(params).unwrap(), b.level(&q[0]));
    pool.fill(&b, layout.output_cts()).unwrap();
    let (resp, s) = layout.respond(&b, &loaded, &q, &mut pool).unwrap();
    let c = layout.decrypt(&b, &resp).unwrap();
    assert_eq!(
        reconstruct(&c, &s, params.p()),
        reference(&w, &x, 10, 300, params.p())
    );
    // Truncated, corrupted, or for another layout: typed errors.
    assert!(kernels::EncodedMatrix::<Bfv>::load(&b, &layout, &bytes[..bytes.len() / 2]).is_err());
    let mut bad = bytes.clone();
    let at = bad.len() - 100;
    bad[at..].iter_mut().for_each(|v| *v = 0xff);
    assert!(kernels::EncodedMatrix::<Bfv>::load(&b, &layout, &bad).is_err());
    let other = MatvecLayout::new(Method::Gala, 10, 300, real(params)).unwrap();
    assert!(matches!(
        kernels::EncodedMatrix::<Bfv>::load(&b, &other, &bytes),
        Err(KernelError::PlanMismatch { .. })
    ));
}

/// The flooding is real. Every encryption of zero the server adds (the pool, drawn
/// before the query) decrypts with the client's key to noise of the flooding size:
/// its budget is log2 q − log2 p − flood_bits − 1 within a few bits, where a plain
/// public-key encryption has ~100 bits more. After the switch to the last level the
/// response is rounded for the wire, which spends most of the budget the unflooded
/// result has there, and still decrypts to the right shares. (The rounding may take the
/// noise to 3/4 of the decryption bound, `he::Params::response_rounding`, so the budget
/// left, floored to whole bits, may be 0: about one run in 50 asked for 1 bit and
/// failed.)
#[test]
fn flooding_is_real_and_responses_decrypt() {
    let params = n8192();
    for method in [Method::Gala, Method::Hybrid] {
        let layout = MatvecLayout::new(method, 16, 128, real(params)).unwrap();
        let bits = layout.flood_bits(params).unwrap();
        let client = Bfv::keygen(params, layout.galois()).unwrap();
        let server = Bfv::server(params, client.public_keys()).unwrap();
        let expected = params.log_q_at(0) - (params.p() as f64).log2() - bits as f64 - 1.0;
        let budget = |c: &he::BfvCt| {
            let c = client.deserialize(&server.serialize(c).unwrap()).unwrap();
            client.noise_budget(&c).unwrap().unwrap() as f64
        };
        let flooded = budget(&server.encrypt_zero_flood(bits).unwrap());
        let plain = budget(&server.encrypt_zero_flood(0).unwrap());
        assert!(
            (flooded - expected).abs() <= 3.0,
            "{method}: a pool zero leaves {flooded} bits, {bits}-bit flooding predicts {expected:.1}"
        );
        assert!(plain > flooded + 80.0, "{method}: {plain} vs {flooded}");
        let (w, x) = random_problem(16, 128, 70);
        let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
        let m = layout.encode(&server, &w).unwrap();
        let q: Vec<_> = layout
            .query(&client, &xr)
            .unwrap()
            .iter()
            .map(|c| server.deserialize(&client.serialize(c).unwrap()).unwrap())
            .collect();
        let mut pool = FloodPool::at_level(bits, server.level(&q[0]));
        pool.fill(&server, layout.output_cts()).unwrap();
        let (resp, s) = layout.respond(&server, &m, &q, &mut pool).unwrap();
        let raw = server
            .switch_to_last(&layout.compute(&server, &m, &q).unwrap()[0])
            .unwrap();
        for r in &resp {
            let (left, unrounded) = (budget(r), budget(&raw));
            // at least half of it
            assert!(2.0 * left <= unrounded, "{method}: {left} of {unrounded}");
        }
        let resp: Vec<_> = resp
            .iter()
            .map(|c| client.deserialize(&server.serialize(c).unwrap()).unwrap())
            .collect();
        let c = layout.decrypt(&client, &resp).unwrap();
        assert_eq!(
            reconstruct(&c, &s, params.p()),
            reference(&w, &x, 16, 128, params.p())
        );
    }
}

/// A rotation composed of several key switches (beyond the Galois-key budget) counts
/// each of them in the noise bound that sizes the flooding.
#[test]
fn composed_rotations_count_every_key_switch_in_the_noise() {
    let params = n8192();
    let slots = real(params);
    let composed =
        MatvecLayout::with_key_budget(Method::Diagonal, 16, 128, slots, Some(64)).unwrap();
    let keyed = MatvecLayout::with_key_budget(Method::Diagonal, 16, 128, slots, None).unwrap();
    assert!(composed.rotations().composed() && !keyed.rotations().composed());
    let hops = composed.rotations().max_hops();
    assert_eq!(hops, 7, "steps up to 127 take up to 7 power-of-two hops");
    let m = kernels::noise::NoiseModel::new(params);
    assert!(composed.kernel_noise(&m) > keyed.kernel_noise(&m) + 1.0);
    // at the same queries the composed layout floods more; each layout then rounds its
    // queries within what its noise leaves, the composed one no more
    assert!(m.flood_bits(composed.kernel_noise(&m)) > m.flood_bits(keyed.kernel_noise(&m)));
    let q = params.moduli_at(0);
    assert!(
        he::rounding_bound_log2(q, composed.query_rounding(params))
            <= he::rounding_bound_log2(q, keyed.query_rounding(params))
    );
    // one-hop model: unchanged
    assert_eq!(m.with_hops(1).key_switch, m.key_switch);
    assert!((m.with_hops(7).key_switch - m.key_switch - 7f64.log2()).abs() < 1e-9);
}
