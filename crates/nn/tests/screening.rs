//! The fixed-point search screens lowerings on the first calibration inputs: what it
//! chooses must not depend on where in the calibration set an outlier sits.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use nn::{
    choose_fixed_point, import_bytes, quantise_input, run_fixed, FixedPointOptions,
    CANDIDATE_MODULI,
};

#[test]
fn a_calibration_outlier_after_the_screening_inputs_still_decides_the_fixed_point() {
    let net = import_bytes(&nn::zoo::onnx("mnist-d", 3).unwrap()).unwrap();
    let len: usize = net.input_shape().iter().product();
    // one modulus, any error accepted: the choice is the largest s whose values fit it
    // on every calibration input (down to s = 1)
    let opts = FixedPointOptions::with(&CANDIDATE_MODULI[..1], 1, 16).tolerance(f64::INFINITY);
    let tame = random_inputs(11, 16, len);
    // input 13 (past the first eight, which the search screens on) 512 times larger:
    // its values need several fractional bits fewer
    let mut late = tame.clone();
    late[13].iter_mut().for_each(|v| *v *= 512.0);
    let mut early = late.clone();
    early.swap(0, 13);
    let (t, l, e) = (
        choose_fixed_point(&net, &tame, &opts).unwrap(),
        choose_fixed_point(&net, &late, &opts).unwrap(),
        choose_fixed_point(&net, &early, &opts).unwrap(),
    );
    assert!(
        l.frac_bits + 3 <= t.frac_bits,
        "{} vs {}",
        l.frac_bits,
        t.frac_bits
    );
    assert_eq!(l.frac_bits, e.frac_bits);
    let (al, ae) = (l.accuracy.unwrap(), e.accuracy.unwrap());
    assert_eq!((al.max_abs_err, al.inputs), (ae.max_abs_err, ae.inputs));
    // every calibration input, the outlier included, runs within p
    for x in &late {
        run_fixed(&l, &quantise_input(&l, x)).unwrap();
    }
}

/// With more calibration inputs than the screening takes, a network whose values fit but
/// whose error does not is still reported as a precision problem (the lowerings that
/// fit on the screening inputs are evaluated on all of them first), not as an overflow.
#[test]
fn too_strict_a_tolerance_is_a_precision_error_after_screening() {
    let net = import_bytes(&nn::zoo::onnx("mnist-d", 3).unwrap()).unwrap();
    let len: usize = net.input_shape().iter().product();
    let calibration = random_inputs(11, 16, len);
    let opts = FixedPointOptions::with(&CANDIDATE_MODULI[..1], 4, 16).tolerance(1e-9);
    match choose_fixed_point(&net, &calibration, &opts) {
        Err(nn::NnError::Precision {
            achieved, p_bits, ..
        }) => assert!(achieved > 1e-9 && p_bits == 20, "{achieved} {p_bits}"),
        other => panic!("expected a precision error, got {other:?}"),
    }
}
