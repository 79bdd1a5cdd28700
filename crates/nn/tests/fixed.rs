//! Exact fixed-point semantics on hand-built programs.
#![allow(clippy::unwrap_used)]

use nn::{run_fixed, NonlinearOp, Program, Step, TensorInfo};

fn t(shape: &[usize], scale_bits: u32) -> TensorInfo {
    TensorInfo {
        shape: shape.to_vec(),
        scale_bits,
        divisor: 1,
        name: String::new(),
    }
}

fn prog(input_shape: &[usize], steps: Vec<Step>, tensors: Vec<TensorInfo>) -> Program {
    Program {
        input_shape: input_shape.to_vec(),
        frac_bits: 2,
        p: 1_032_193,
        preset: String::new(),
        output: tensors.len() - 1,
        steps,
        tensors,
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
fn truncation_rounds_to_nearest_after_op() {
    let p = prog(
        &[4],
        vec![Step::Nonlinear {
            name: "t".into(),
            input: 0,
            output: 1,
            op: NonlinearOp::Identity,
            trunc_bits: 1,
            approximate: false,
        }],
        vec![t(&[4], 4), t(&[4], 2)],
    );
    // (v + 1) >> 1: −1.5 → −1, −2 → −2, 1.5 → 2, 2.5 → 3 (ties up)
    assert_eq!(run_fixed(&p, &[-3, -4, 3, 5]).unwrap(), [-1, -2, 2, 3]);
    let mut r = p.clone();
    if let Step::Nonlinear { op, .. } = &mut r.steps[0] {
        *op = NonlinearOp::Relu;
    }
    assert_eq!(run_fixed(&r, &[-3, -4, 3, 5]).unwrap(), [0, 0, 2, 3]);
}

#[test]
fn maxpool_then_floor_window_order() {
    // 1×3×4 input, k = 2, stride 2 → 1×1×2
    let p = prog(
        &[1, 3, 4],
        vec![Step::Nonlinear {
            name: "mp".into(),
            input: 0,
            output: 1,
            op: NonlinearOp::MaxPool { k: 2, stride: 2 },
            trunc_bits: 2,
            approximate: false,
        }],
        vec![t(&[1, 3, 4], 4), t(&[1, 1, 2], 2)],
    );
    let x = [-9, -7, 1, 2, -8, -6, 3, 11, 100, 100, 100, 100];
    // windows: {-9,-7,-8,-6} → -6 → round(-6/4) = ⌊(−6+2)/4⌋ = -1; {1,2,3,11} → 11 → 3
    assert_eq!(run_fixed(&p, &x).unwrap(), [-1, 3]);
}

#[test]
fn add_multipliers_and_sumpool() {
    let p = prog(
        &[1, 2, 2],
        vec![
            Step::SumPool {
                name: "sp".into(),
                input: 0,
                output: 1,
                k_h: 2,
                k_w: 2,
                stride: 1,
            },
            Step::Add {
                name: "add".into(),
                a: 1,
                b: 1,
                output: 2,
                mul_a: 1,
                mul_b: 24,
            },
        ],
        vec![t(&[1, 2, 2], 2), t(&[1, 1, 1], 2), t(&[1, 1, 1], 5)],
    );
    assert_eq!(run_fixed(&p, &[1, 2, 3, -10]).unwrap(), [-4 + -4 * 24]);
}

#[test]
fn pad_zero_and_edge() {
    use nn::{pad_indices, PadMode};
    // 1×2×2 → pads top 1, left 0, bottom 0, right 1 → 1×3×3
    assert_eq!(
        pad_indices(&[1, 2, 2], [1, 0, 0, 1], PadMode::Zero),
        [
            None,
            None,
            None,
            Some(0),
            Some(1),
            None,
            Some(2),
            Some(3),
            None
        ]
    );
    assert_eq!(
        pad_indices(&[1, 2, 2], [1, 0, 0, 1], PadMode::Edge),
        [
            Some(0),
            Some(1),
            Some(1),
            Some(0),
            Some(1),
            Some(1),
            Some(2),
            Some(3),
            Some(3)
        ]
    );
    // second channel offsets by h·w
    assert_eq!(
        pad_indices(&[2, 1, 1], [0, 1, 0, 0], PadMode::Edge),
        [Some(0), Some(0), Some(1), Some(1)]
    );
    let p = prog(
        &[1, 2, 2],
        vec![
            Step::Pad {
                name: "pad".into(),
                input: 0,
                output: 1,
                pads: [1, 1, 1, 1],
                mode: PadMode::Zero,
            },
            Step::Pad {
                name: "edge".into(),
                input: 0,
                output: 2,
                pads: [1, 1, 1, 1],
                mode: PadMode::Edge,
            },
            Step::Nonlinear {
                name: "mp".into(),
                input: 2,
                output: 3,
                op: NonlinearOp::MaxPool { k: 3, stride: 1 },
                trunc_bits: 0,
                approximate: false,
            },
        ],
        vec![
            t(&[1, 2, 2], 2),
            t(&[1, 4, 4], 2),
            t(&[1, 4, 4], 2),
            t(&[1, 2, 2], 2),
        ],
    );
    let x = [-5, -3, -8, -9];
    // every 3×3 window of the edge-padded 4×4 covers all four real elements: max −3
    assert_eq!(run_fixed(&p, &x).unwrap(), [-3, -3, -3, -3]);
    let mut zero = p.clone();
    zero.output = 1;
    assert_eq!(
        run_fixed(&zero, &x).unwrap(),
        [0, 0, 0, 0, 0, -5, -3, 0, 0, -8, -9, 0, 0, 0, 0, 0]
    );
}

/// A MaxPool's comparisons reconstruct the difference of two inputs, so twice every
/// input must lie within (−p/2, p/2): just inside passes, just outside is a typed error.
#[test]
fn maxpool_inputs_stay_within_a_quarter_of_p() {
    let p = prog(
        &[1, 2, 2],
        vec![Step::Nonlinear {
            name: "mp".into(),
            input: 0,
            output: 1,
            op: NonlinearOp::MaxPool { k: 2, stride: 2 },
            trunc_bits: 0,
            approximate: false,
        }],
        vec![t(&[1, 2, 2], 2), t(&[1, 1, 1], 2)],
    );
    let q = ((1_032_193 - 1) / 2 / 2) as i64; // 2q = (p − 1)/2
    assert_eq!(run_fixed(&p, &[-q, q, 0, 1]).unwrap(), [q]);
    assert!(matches!(
        run_fixed(&p, &[-q - 1, q, 0, 1]),
        Err(nn::NnError::RangeExceeded { step: 0, .. })
    ));
}
