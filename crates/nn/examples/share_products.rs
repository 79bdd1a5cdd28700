//! Times the server's cleartext product on its share (W·x_S mod p) for the 53
//! convolutions of ResNet-50 (ImageNet shapes, the stem after its space-to-depth), by
//! `kernels::clear`'s integer loops and by `nn::gemm`'s f64 GEMM, on random shares mod
//! ResNet-50's 28-bit p, and checks that both give the same values.
//!
//! `RAYON_NUM_THREADS=2 cargo run --release -p nn --example share_products`

use kernels::{ConvShape, Padding};
use rand::{Rng, SeedableRng};
use std::time::Instant;

const P: u64 = 268_369_921;

fn main() {
    let mut shapes = vec![ConvShape::new(
        [12, 115, 115],
        [64, 4, 4],
        1,
        Padding::Valid,
    )];
    let (mut c_in, mut h) = (64, 56);
    for (mid, blocks, stride) in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)] {
        for b in 0..blocks {
            let s = if b == 0 { stride } else { 1 };
            shapes.push(ConvShape::new([c_in, h, h], [mid, 1, 1], 1, Padding::Same));
            shapes.push(ConvShape::new([mid, h, h], [mid, 3, 3], s, Padding::Same));
            let h2 = h / s;
            shapes.push(ConvShape::new(
                [mid, h2, h2],
                [4 * mid, 1, 1],
                1,
                Padding::Same,
            ));
            if b == 0 {
                shapes.push(ConvShape::new(
                    [c_in, h, h],
                    [4 * mid, 1, 1],
                    s,
                    Padding::Same,
                ));
            }
            (c_in, h) = (4 * mid, h2);
        }
    }
    let mut r = rand::rngs::StdRng::seed_from_u64(1);
    let (mut loops, mut gemm) = (0.0, 0.0);
    for sh in &shapes {
        let x: Vec<u64> = (0..sh.c_i * sh.h * sh.w)
            .map(|_| r.random_range(0..P))
            .collect();
        let f: Vec<i64> = (0..sh.c_o * sh.c_i * sh.k_h * sh.k_w)
            .map(|_| r.random_range(-128..128))
            .collect();
        let g = nn::quant::grouped_shape(sh, 1);
        let t = Instant::now();
        let a = kernels::clear::conv_mod_p(&g, &x, &f, &[], P).expect("integer loops");
        loops += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let b = nn::gemm::conv_mod_p(sh, 1, &x, &f, &[], P).expect("within f64's exact range");
        gemm += t.elapsed().as_secs_f64();
        assert_eq!(a, b, "{sh:?}");
    }
    println!(
        "{} convolutions on {} threads: integer loops {loops:.3} s, f64 GEMM {gemm:.3} s, equal",
        shapes.len(),
        rayon::current_num_threads()
    );
}
