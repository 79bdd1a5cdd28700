#![allow(clippy::unwrap_used)]
//! The server's clear products on its share through the f64 GEMM
//! (`nn::gemm::conv_mod_p`, `linear_mod_p`) equal the integer loops of
//! `kernels::clear` bit for bit, on uniform shares mod a 28-bit p, for 1×1, 3×3 and 7×7
//! filters, strides 1-2, same and valid padding, one group, two and depthwise; and
//! where the values could leave the exact range of f64, or the lengths do not fit the
//! shape, they decline (the caller then takes the loops).

use kernels::{ConvShape, Padding};
use rand::{Rng, SeedableRng};

const P: u64 = 268_369_921;

fn share(len: usize, r: &mut impl Rng) -> Vec<u64> {
    (0..len).map(|_| r.random_range(0..P)).collect()
}

fn weights(len: usize, r: &mut impl Rng) -> Vec<i64> {
    (0..len).map(|_| r.random_range(-128..128)).collect()
}

#[test]
fn share_convolutions_through_the_gemm_equal_the_integer_loops() {
    let mut r = rand::rngs::StdRng::seed_from_u64(11);
    let cases = [
        // c_i, h, w, c_o, k, stride, padding, groups
        (64, 14, 14, 32, 1, 1, Padding::Same, 1),
        (16, 15, 13, 24, 3, 1, Padding::Same, 1),
        (16, 15, 13, 24, 3, 2, Padding::Same, 1),
        (8, 16, 16, 12, 3, 2, Padding::Valid, 1),
        (3, 23, 23, 16, 7, 2, Padding::Same, 1),
        (12, 9, 9, 18, 3, 1, Padding::Same, 2),
        (12, 9, 9, 18, 1, 1, Padding::Same, 3),
        (10, 11, 11, 10, 3, 2, Padding::Same, 10),
    ];
    for (c_i, h, w, c_o, k, stride, padding, groups) in cases {
        let sh = ConvShape::new([c_i, h, w], [c_o, k, k], stride, padding);
        let x = share(c_i * h * w, &mut r);
        let f = weights(c_o * c_i / groups * k * k, &mut r);
        let bias: Vec<i64> = weights(c_o, &mut r).iter().map(|b| b * 1000).collect();
        let g = nn::quant::grouped_shape(&sh, groups);
        for b in [&bias[..], &[]] {
            let want = kernels::clear::conv_mod_p(&g, &x, &f, b, P).unwrap();
            let got = nn::gemm::conv_mod_p(&sh, groups, &x, &f, b, P).unwrap();
            assert_eq!(
                got, want,
                "{c_i}x{h}x{w} -> {c_o} {k}x{k}/{stride} groups {groups}"
            );
        }
    }
    // Beyond the exact range (|x|·Σ|w| ≥ 2^53 for a 44-bit p and large weights), or a
    // share of the wrong length: declined.
    let sh = ConvShape::new([64, 8, 8], [4, 3, 3], 1, Padding::Same);
    let big_p = (1u64 << 44) - 21;
    let x: Vec<u64> = (0..64 * 64).map(|_| r.random_range(0..big_p)).collect();
    let f = vec![1 << 20; 4 * 64 * 9];
    assert!(nn::gemm::conv_mod_p(&sh, 1, &x, &f, &[], big_p).is_none());
    assert!(nn::gemm::conv_mod_p(&sh, 1, &x[1..], &f, &[], P).is_none());
}

#[test]
fn share_matrix_products_through_the_gemm_equal_the_integer_loops() {
    let mut r = rand::rngs::StdRng::seed_from_u64(12);
    for (rows, cols) in [(1000, 2048), (10, 7), (1, 300)] {
        let x = share(cols, &mut r);
        let w = weights(rows * cols, &mut r);
        let bias = weights(rows, &mut r);
        for b in [&bias[..], &[]] {
            let want = kernels::clear::matvec_mod_p(&w, &x, b, rows, cols, P).unwrap();
            assert_eq!(
                nn::gemm::linear_mod_p(&w, &x, b, rows, cols, P).unwrap(),
                want
            );
        }
        assert!(nn::gemm::linear_mod_p(&w, &x[1..], &bias, rows, cols, P).is_none());
    }
}
