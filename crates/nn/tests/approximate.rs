//! The planner's choice of approximate truncation: only while the calibration error
//! stays within its bound, a prefix of the truncating steps when not all fit (the
//! reference's semantics of approximate steps: `fixed.rs`).
#![allow(clippy::unwrap_used)]

use nn::{FixedPointOptions, Step};

fn fixture(name: &str) -> String {
    format!("{}/../../fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn read(name: &str) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(fixture(name)).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    let data: Vec<f32> = npy.into_vec().unwrap();
    let per: usize = shape[1..].iter().map(|&d| d as usize).product();
    data.chunks(per).map(|c| c.to_vec()).collect()
}

#[test]
fn the_planner_approximates_only_within_the_calibration_bound() {
    let net = nn::import(std::path::Path::new(&fixture("residual-pools.onnx"))).unwrap();
    let cal = read("residual-pools-calibration.npy");
    let opts = |approximate_truncation, tolerance| FixedPointOptions {
        approximate_truncation,
        tolerance,
        ..FixedPointOptions::default()
    };
    let tol = nn::DEFAULT_TOLERANCE;
    let faithful = nn::choose_fixed_point(&net, &cal, &opts(false, tol)).unwrap();
    assert!(faithful.approximate_steps().is_empty());
    let all = nn::choose_fixed_point(&net, &cal, &opts(true, tol)).unwrap();
    let truncating = all.truncating_steps();
    let relu_like = all
        .steps
        .iter()
        .filter(
            |s| matches!(s, Step::Nonlinear { op, trunc_bits: 1.., .. } if op.truncates_input()),
        )
        .count();
    assert!(relu_like > 0 && relu_like <= truncating);
    assert_eq!(all.approximate_steps().len(), relu_like);
    let (e0, e1) = (
        faithful.accuracy.unwrap().max_abs_err,
        all.accuracy.unwrap().max_abs_err,
    );
    assert_eq!((all.frac_bits, all.p), (faithful.frac_bits, faithful.p));
    assert!(e1 > e0, "approximate {e1} vs faithful {e0}");
    // a tolerance whose bound lies between the two: the same fixed point, fewer
    // approximate steps, a prefix of them, and the error within the bound
    let tight = (e0 + e1) / 2.0 * nn::TOLERANCE_SAFETY;
    let some = nn::choose_fixed_point(&net, &cal, &opts(true, tight)).unwrap();
    assert_eq!((some.frac_bits, some.p), (faithful.frac_bits, faithful.p));
    let chosen = some.approximate_steps();
    assert!(chosen.len() < relu_like, "{chosen:?}");
    assert_eq!(chosen[..], all.approximate_steps()[..chosen.len()]);
    assert!(some.accuracy.unwrap().max_abs_err <= tight / nn::TOLERANCE_SAFETY);
}
