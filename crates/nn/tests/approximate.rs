//! Approximate truncation in the fixed-point reference and in the planner's choice:
//! the reference's result against plain integer arithmetic (the floor or one above it,
//! never anything else, and about unbiased over the server's uniform shares), replayed
//! from client shares exactly as the model draws it, refused on ops that do not
//! truncate their own input; the planner approximates only while the calibration
//! error stays within its bound, a prefix of the truncating steps when not all fit.
#![allow(clippy::unwrap_used)]

use nn::{
    run_fixed, run_fixed_replay, FixedPointOptions, NnError, NonlinearOp, Program, Step, TensorInfo,
};

const P: u64 = 1_032_193;

fn t(shape: &[usize], scale_bits: u32) -> TensorInfo {
    TensorInfo {
        shape: shape.to_vec(),
        scale_bits,
        divisor: 1,
        name: String::new(),
    }
}

/// One nonlinear step on `n` values, truncating by `f` bits.
fn one_step(n: usize, op: NonlinearOp, f: u32, approximate: bool) -> Program {
    Program {
        input_shape: vec![n],
        frac_bits: 2,
        p: P,
        preset: String::new(),
        output: 1,
        steps: vec![Step::Nonlinear {
            name: "t".into(),
            input: 0,
            output: 1,
            op,
            trunc_bits: f,
            approximate,
        }],
        tensors: vec![t(&[n], 2 + f), t(&[n], 2)],
        input: 0,
        bounds: vec![],
        input_range: None,
        accuracy: None,
        input_affine: None,
        head: nn::Head::default(),
        weight_bound_bits: None,
    }
}

#[test]
fn approximate_truncation_is_the_floor_or_one_above_and_unbiased() {
    let f = 6;
    // every residue mod 2^f, positive and negative, many times
    let x: Vec<i64> = (0..20_000).map(|i| (i % 4001) - 2000).collect();
    for op in [NonlinearOp::Identity, NonlinearOp::Relu] {
        let prog = one_step(x.len(), op, f, true);
        let got = run_fixed(&prog, &x).unwrap();
        let mut bias = 0f64;
        for (&v, &y) in x.iter().zip(&got) {
            let v = if op == NonlinearOp::Relu { v.max(0) } else { v };
            let floor = v.div_euclid(1 << f);
            if op == NonlinearOp::Relu && v == 0 {
                // a ReLU input in [−2^f, 0) sees y + 2^f ≥ 0: 0 or −1, never above
                assert!(y == 0 || y == -1, "{op}: {v} → {y}");
            } else {
                assert!(
                    y == floor || y == floor + 1,
                    "{op}: {v} → {y}, floor {floor}"
                );
            }
            bias += y as f64 - v as f64 / (1 << f) as f64;
        }
        let bias = bias / x.len() as f64;
        // the mean of a uniform rounding is +2^-(f+1) above the value; the ReLU's
        // clipped negatives pull it down a little
        assert!(bias.abs() < 0.05, "{op}: mean error {bias} of one unit");
    }
}

#[test]
fn a_replay_from_client_shares_gives_the_protocol_result() {
    let f = 5;
    let x: Vec<i64> = (-300..300).collect();
    let prog = one_step(x.len(), NonlinearOp::Identity, f, true);
    let h = 1i128 << f;
    // a client share per value; the server's is y + h − y_C mod p
    let client: Vec<u64> = (0..x.len() as u64).map(|i| (i * 7919 + 13) % P).collect();
    let got = run_fixed_replay(&prog, &x, std::slice::from_ref(&client)).unwrap();
    for ((&v, &c), &y) in x.iter().zip(&client).zip(&got) {
        let yp = v as i128 + h;
        let server = (yp - c as i128).rem_euclid(P as i128) as u64;
        let want = ot::approx_trunc(P, f, false, yp.rem_euclid(P as i128) as u64, server);
        let want = if want > P / 2 {
            want as i64 - P as i64
        } else {
            want as i64
        };
        assert_eq!(y, want, "{v}");
    }
    // a missing or short vector of shares is an error, not a panic
    assert!(matches!(
        run_fixed_replay(&prog, &x, &[]),
        Err(NnError::Length { .. })
    ));
    assert!(matches!(
        run_fixed_replay(&prog, &x, &[client[1..].to_vec()]),
        Err(NnError::Length { .. })
    ));
}

#[test]
fn only_relu_and_identity_steps_may_truncate_approximately() {
    let prog = one_step(4, NonlinearOp::Clip { lo: 0, hi: Some(6) }, 2, true);
    assert!(matches!(
        run_fixed(&prog, &[1, 2, 3, 4]),
        Err(NnError::ApproximateTruncation { step: 0, .. })
    ));
}

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
