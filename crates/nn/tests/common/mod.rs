//! Builds torch-export-like ONNX models with the prost types, and runs them with tract.
#![allow(clippy::unwrap_used, dead_code, unused_imports)]

pub use nn::export::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Runs the ONNX model with tract on one input (batch 1).
pub fn tract_run(bytes: &[u8], in_dims: &[usize], x: &[f32]) -> Vec<f32> {
    use tract_onnx::prelude::*;
    let mut shape = vec![1usize];
    shape.extend(in_dims);
    let model = tract_onnx::onnx()
        .model_for_read(&mut &bytes[..])
        .unwrap()
        .with_input_fact(0, f32::fact(&shape).into())
        .unwrap()
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let t = Tensor::from_shape(&shape, x).unwrap();
    let out = model.run(tvec!(t.into())).unwrap();
    out[0]
        .to_array_view::<f32>()
        .unwrap()
        .iter()
        .copied()
        .collect()
}

pub fn random_inputs(seed: u64, n: usize, len: usize) -> Vec<Vec<f32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..len).map(|_| rng.random_range(0.0f32..1.0)).collect())
        .collect()
}

pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}
