//! Exact fixed-point semantics on hand-built programs, approximate truncation's included:
//! the floor or one above it (about unbiased over the server's uniform shares), replayed
//! from client shares exactly as the protocol's model gives it, refused on ops that do
//! not truncate their own input.
#![allow(clippy::unwrap_used)]

use nn::{run_fixed, run_fixed_replay, NnError, NonlinearOp, Program, Step, TensorInfo};

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
            coarse_drelu_bits: 0,
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
            coarse_drelu_bits: 0,
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
                coarse_drelu_bits: 0,
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
            coarse_drelu_bits: 0,
        }],
        vec![t(&[1, 2, 2], 2), t(&[1, 1, 1], 2)],
    );
    let q = ((1_032_193 - 1) / 2 / 2) as i64; // 2q = (p − 1)/2
    assert_eq!(run_fixed(&p, &[-q, q, 0, 1]).unwrap(), [q]);
    assert!(matches!(
        run_fixed(&p, &[-q - 1, q, 0, 1]),
        Err(NnError::RangeExceeded { step: 0, .. })
    ));
}

const P: u64 = 1_032_193;

/// One nonlinear step on `n` values, truncating by `f` bits.
fn one_step(n: usize, op: NonlinearOp, f: u32, approximate: bool) -> Program {
    prog(
        &[n],
        vec![Step::Nonlinear {
            name: "t".into(),
            input: 0,
            output: 1,
            op,
            trunc_bits: f,
            approximate,
            coarse_drelu_bits: 0,
        }],
        vec![t(&[n], 2 + f), t(&[n], 2)],
    )
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
        let want = ot::approx_trunc(
            P,
            f,
            false,
            true,
            0,
            yp.rem_euclid(P as i128) as u64,
            server,
        );
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
