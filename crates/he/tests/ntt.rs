#![allow(clippy::unwrap_used)]
//! The he crate's own transforms (tfhe-ntt 0.7 where it agrees with fhe-math) against
//! an independent reference: a plaintext prepared by helina multiplies like fhe.rs's
//! own encoding (the schoolbook product in `coeffs.rs` checks the ring product), and
//! `PlainNtt` agrees with the definition of the negacyclic transform: evaluation at the
//! odd powers of a primitive 2n-th root of unity.

use he::{Params, PlainNtt};

fn pow_mod(mut b: u64, mut e: u64, m: u64) -> u64 {
    let mut r = 1u64;
    b %= m;
    while e > 0 {
        if e & 1 == 1 {
            r = (r as u128 * b as u128 % m as u128) as u64;
        }
        b = (b as u128 * b as u128 % m as u128) as u64;
        e >>= 1;
    }
    r
}

/// The transform of a polynomial is a permutation of its values at the 2n-th roots of
/// unity of odd order: checked as multisets, for every modulus of n8192-p28 (43- and
/// 46-bit, IFMA lanes) and n8192-p40 (53- to 58-bit, 64-bit lanes) and their p, at
/// n = 8192, with a round trip.
#[test]
fn transforms_evaluate_at_the_odd_roots_of_unity() {
    let n = 16usize;
    let mut moduli = Vec::new();
    for name in ["n8192-p28", "n8192-p40"] {
        let params = Params::preset(name).unwrap();
        moduli.extend_from_slice(params.moduli());
        moduli.push(params.p());
    }
    for q in moduli {
        // n = 16 for the exhaustive evaluation; the NTT-friendly moduli are ≡ 1 mod 2·8192.
        let ntt = PlainNtt::new(q, n).unwrap();
        let a: Vec<u64> = (0..n as u64).map(|i| (i * i * 977 + 3) % q).collect();
        let mut t = a.clone();
        ntt.forward(&mut t);
        // A generator's power of order 2n: find ψ with ψ^n = −1.
        let psi = (2..)
            .map(|g| pow_mod(g, (q - 1) / (2 * n as u64), q))
            .find(|&psi| pow_mod(psi, n as u64, q) == q - 1)
            .unwrap();
        let mut want: Vec<u64> = (0..n as u64)
            .map(|k| {
                let x = pow_mod(psi, 2 * k + 1, q);
                a.iter().rev().fold(0u64, |acc, &c| {
                    ((acc as u128 * x as u128 + c as u128) % q as u128) as u64
                })
            })
            .collect();
        let mut got = t.clone();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "q = {q}");
        ntt.backward(&mut t);
        assert_eq!(t, a, "round trip, q = {q}");
        // n = 8192: the round trip.
        let big = PlainNtt::new(q, 8192).unwrap();
        let a: Vec<u64> = (0..8192u64).map(|i| (i * 7919 + 11) % q).collect();
        let mut t = a.clone();
        big.forward(&mut t);
        assert_ne!(t, a);
        big.backward(&mut t);
        assert_eq!(t, a, "round trip n = 8192, q = {q}");
    }
}
