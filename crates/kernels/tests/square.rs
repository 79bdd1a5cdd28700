//! GAZELLE's interactive Square over real BFV: the reconstructed output equals y² mod p
//! (computed here in u128), for random and edge values across two ciphertexts.
#![allow(clippy::unwrap_used)]

use he::{Bfv, Count, Layout, Params, SlotInfo};
use kernels::{FloodPool, KernelError, LinearLayer, SquareLayout};
use rand::{Rng, SeedableRng};

fn slots(params: &Params) -> SlotInfo {
    SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: Layout::TwoRows,
    }
}

#[test]
fn square_of_shares_equals_y_squared() {
    let params = Params::preset("n8192").unwrap();
    let p = params.p();
    let count = params.n() + 7;
    let layout = SquareLayout::new(count, slots(&params)).unwrap();
    let mut r = rand::rngs::StdRng::seed_from_u64(5);
    let mut y: Vec<u64> = (0..count).map(|_| r.random_range(0..p)).collect();
    y[..6].copy_from_slice(&[0, 1, p - 1, (p - 1) / 2, p.div_ceil(2), 2]);
    let a: Vec<u64> = (0..count).map(|_| r.random_range(0..p)).collect();
    let b: Vec<u64> = y.iter().zip(&a).map(|(y, a)| (y + p - a) % p).collect();

    let client = Bfv::keygen(&params, layout.galois()).unwrap();
    let server = Bfv::server(&params, client.public_keys()).unwrap();
    let q = layout.query(&client, &a).unwrap();
    assert_eq!(q.len(), 2);
    let w: Vec<i64> = b.iter().map(|&v| v as i64).collect();
    let m = layout.encode_weights(&server, &w).unwrap();
    let mut pool = FloodPool::new(layout.flood_bits(&params).unwrap());
    pool.fill(&server, layout.output_cts()).unwrap();
    let (resp, s_cross) = layout.respond(&server, &m, &q, &mut pool).unwrap();
    let c_cross = layout.decrypt(&client, &resp).unwrap();
    let zc = layout.client_output(&a, &c_cross).unwrap();
    let zs = layout.server_output(&b, &s_cross).unwrap();
    for i in 0..count {
        let want = (y[i] as u128 * y[i] as u128 % p as u128) as u64;
        assert_eq!((zc[i] + zs[i]) % p, want, "value {i}: y = {}", y[i]);
    }
    // The client's share alone is not y²: it is masked.
    assert_ne!(&zc[6..40], &zs[6..40]);

    // Op counts: one ScMult per ciphertext, no rotation.
    let cnt = Count::real(&params, layout.galois());
    let m = layout.encode_weights(&cnt, &w).unwrap();
    let q = layout.query(&cnt, &a).unwrap();
    cnt.take();
    layout.compute(&cnt, &m, &q).unwrap();
    let c = cnt.counts();
    assert_eq!((c.sc_mult, c.rotations()), (2, 0));
}

#[test]
fn square_rejects_bad_shares() {
    let params = Params::preset("n8192").unwrap();
    let layout = SquareLayout::new(4, slots(&params)).unwrap();
    let cnt = Count::real(&params, layout.galois());
    assert!(matches!(
        layout.query(&cnt, &[1, 2, 3]),
        Err(KernelError::Shape {
            expected: 4,
            actual: 3,
            ..
        })
    ));
    assert!(matches!(
        layout.query(&cnt, &[1, 2, 3, params.p()]),
        Err(KernelError::He(he::HeError::NotReduced { index: 3, .. }))
    ));
    assert!(matches!(
        layout.encode_weights(&cnt, &[1, -2, 3, 4]),
        Err(KernelError::WeightRange {
            index: 1,
            value: -2,
            ..
        })
    ));
    assert!(matches!(
        SquareLayout::new(0, slots(&params)),
        Err(KernelError::EmptyDimension { .. })
    ));
    // n = 4096 with 72 bits cannot flood a full-size product.
    let small = he::ParamsBuilder::new()
        .degree(4096)
        .plaintext(he::batching_prime(20, 4096).unwrap())
        .moduli(he::Moduli::Bits(vec![36, 36]))
        .build()
        .unwrap();
    let layout = SquareLayout::new(4, slots(&small)).unwrap();
    assert!(matches!(
        layout.flood_bits(&small),
        Err(KernelError::NoiseBudget { .. })
    ));
}
