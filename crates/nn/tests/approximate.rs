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
    // the approximate steps alone (the coarse DReLU on them: the next test)
    let opts = |approximate_truncation, tolerance| FixedPointOptions {
        approximate_truncation,
        tolerance,
        max_coarse_drelu_bits: 0,
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

#[test]
fn the_planner_coarsens_the_drelu_only_within_the_calibration_bound() {
    // digits-cnn-bn: its calibration error with a 3-bit coarse DReLU is above the
    // default bound, so the default search must stop below 3 bits
    let net = nn::import(std::path::Path::new(&fixture("digits-cnn-bn.onnx"))).unwrap();
    let cal = read("digits-cnn-bn-calibration.npy");
    let opts = |max_coarse_drelu_bits, tolerance| FixedPointOptions {
        approximate_truncation: true,
        tolerance,
        max_coarse_drelu_bits,
        ..FixedPointOptions::default()
    };
    let tol = nn::DEFAULT_TOLERANCE;
    let bound = tol / nn::TOLERANCE_SAFETY;
    let fine = nn::choose_fixed_point(&net, &cal, &opts(0, tol)).unwrap();
    assert_eq!(fine.coarse_drelu_bits(), 0);
    assert!(!fine.approximate_steps().is_empty());
    // with a loose tolerance all 3 bits are taken, and their error passes the bound
    let loose = nn::choose_fixed_point(&net, &cal, &opts(3, 1.0)).unwrap();
    assert_eq!(loose.coarse_drelu_bits(), 3);
    let e3 = loose.accuracy.unwrap().max_abs_err;
    assert!(e3 > bound, "3 bits: {e3} within {bound}");
    let coarse = nn::choose_fixed_point(&net, &cal, &opts(3, tol)).unwrap();
    let c = coarse.coarse_drelu_bits();
    assert!((1..3).contains(&c), "{c}");
    assert!(coarse.accuracy.unwrap().max_abs_err <= bound);
    // the same fixed point and approximate steps; the coarse DReLU on exactly those
    assert_eq!((coarse.frac_bits, coarse.p), (fine.frac_bits, fine.p));
    assert_eq!(coarse.approximate_steps(), fine.approximate_steps());
    for st in &coarse.steps {
        if let Step::Nonlinear {
            approximate,
            coarse_drelu_bits,
            trunc_bits,
            ..
        } = st
        {
            let want = if *approximate && *trunc_bits > 0 {
                c
            } else {
                0
            };
            assert_eq!(*coarse_drelu_bits, want, "{}", st.name());
        }
    }
}
