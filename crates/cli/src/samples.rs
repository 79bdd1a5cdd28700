//! The demo's sample layers: a 10 x 128 matrix (the last layer of the MNIST MLP
//! 784-128-128-10) and a 4 x 16 x 16 → 4, 3x3 "same" convolution. Their weights and
//! inputs come from a public seed so that a `--reveal` client can check the result
//! against the plaintext reference: demo only, never for private weights.

use kernels::{ConvShape, Padding};
use protocol::LayerShape;
use rand::{Rng, SeedableRng};

/// The public seed of the sample weights and inputs.
const SAMPLE_SEED: u64 = 0x6865_6c69_6e61;

/// The sample matvec layer.
pub const MATVEC: LayerShape = LayerShape::Matvec {
    rows: 10,
    cols: 128,
};

/// The sample convolution layer.
pub const CONV: LayerShape = LayerShape::Conv(ConvShape {
    c_i: 4,
    h: 16,
    w: 16,
    c_o: 4,
    k_h: 3,
    k_w: 3,
    stride: 1,
    padding: Padding::Same,
});

/// The sample layer named `matvec` or `conv`.
pub fn by_name(s: &str) -> Option<LayerShape> {
    match s {
        "matvec" => Some(MATVEC),
        "conv" => Some(CONV),
        _ => None,
    }
}

fn values(n: usize, salt: u64) -> Vec<i64> {
    let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(SAMPLE_SEED ^ salt);
    (0..n).map(|_| r.random_range(-64..=64)).collect()
}

fn salt(shape: &LayerShape) -> u64 {
    match shape {
        LayerShape::Matvec { .. } => 0,
        LayerShape::Conv(_) => 16,
        LayerShape::Grouped(_) => 32,
    }
}

/// The sample weights of a layer (public seed: demo only).
pub fn weights(shape: &LayerShape) -> Vec<i64> {
    values(shape.weight_len(), 1 + salt(shape))
}

/// The sample input of a layer.
pub fn input(shape: &LayerShape) -> Vec<i64> {
    values(shape.input_len(), 2 + salt(shape))
}

/// The exact plaintext output of a layer (integers, no reduction).
pub fn reference(shape: &LayerShape, w: &[i64], x: &[i64]) -> Vec<i128> {
    match shape {
        LayerShape::Matvec { rows, cols } => kernels::reference::matvec(w, x, *rows, *cols),
        LayerShape::Conv(s) => kernels::reference::conv(s, x, w),
        LayerShape::Grouped(s) => kernels::reference::grouped_conv(s, x, w).unwrap_or_default(),
    }
}
