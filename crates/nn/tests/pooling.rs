//! Exact average pooling: the window sum on the shares, the 1/area divided out exactly
//! — by the client on the revealed output, or folded into the next layer's weights at
//! that layer's own scale — checked against exact rational arithmetic for the areas 4
//! (AvgPool 2x2), 49 (GlobalAveragePool over 7x7, not a power of two) and 64 (8x8).
#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use nn::{dequantise, import_bytes, lower, quantise_input, run_fixed, Step};

const P40: u64 = 1_099_511_480_321;

/// (pool node, input C×H×W, output C×H'×W', area)
fn pool_net(kind: &str, gemm: bool) -> (Vec<u8>, [usize; 3], usize) {
    let mut m = Mb::new(41);
    let (dims, out, area): ([usize; 3], Vec<usize>, usize) = match kind {
        "avg2" => {
            m.node(
                "AveragePool",
                "/pool/AveragePool",
                &["input"],
                &["p"],
                vec![a_ints("kernel_shape", &[2, 2]), a_ints("strides", &[2, 2])],
            );
            ([3, 6, 6], vec![3, 3, 3], 4)
        }
        "gap7" => {
            m.node("GlobalAveragePool", "/pool/GAP", &["input"], &["p"], vec![]);
            ([5, 7, 7], vec![5, 1, 1], 49)
        }
        _ => {
            m.node("GlobalAveragePool", "/pool/GAP", &["input"], &["p"], vec![]);
            ([4, 8, 8], vec![4, 1, 1], 64)
        }
    };
    let bytes = if gemm {
        m.node(
            "Flatten",
            "/Flatten",
            &["p"],
            &["f"],
            vec![a_int("axis", 1)],
        );
        let cols: usize = out.iter().product();
        m.gemm("fc", "f", "output", cols, 6);
        m.finish("input", &dims, "output", &[6], 17)
    } else {
        m.node("Identity", "/out", &["p"], &["output"], vec![]);
        m.finish("input", &dims, "output", &out, 17)
    };
    (bytes, dims, area)
}

fn inputs(seed: u64, len: usize) -> Vec<Vec<f32>> {
    random_inputs(seed, 4, len)
        .into_iter()
        .map(|x| x.iter().map(|v| 5.0 * v - 2.5).collect())
        .collect()
}

/// The pooled tensor as the output: the integers are the exact window sums of the
/// quantised inputs, and the client's division gives exactly sum / (area · 2^s).
#[test]
fn pooled_output_is_the_exact_rational_mean() {
    for kind in ["avg2", "gap7", "gap8"] {
        let (bytes, dims, area) = pool_net(kind, false);
        let net = import_bytes(&bytes).unwrap();
        let s = 10;
        let prog = lower(&net, s, P40).unwrap();
        assert_eq!(prog.tensors[prog.output].divisor, area as u64, "{kind}");
        let [c, h, w] = dims;
        let k = (area as f64).sqrt() as usize;
        for x in inputs(3, c * h * w) {
            let xq = quantise_input(&prog, &x);
            let y = run_fixed(&prog, &xq).unwrap();
            let got = dequantise(&prog, &y);
            let (oh, ow) = (h / k, w / k);
            for ch in 0..c {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut sum: i64 = 0;
                        for dy in 0..k {
                            for dx in 0..k {
                                sum += xq[(ch * h + oy * k + dy) * w + ox * k + dx];
                            }
                        }
                        let i = (ch * oh + oy) * ow + ox;
                        assert_eq!(y[i], sum, "{kind}");
                        // exact rational sum / (area·2^s), rounded once to f32
                        let exact = sum as f64 / (area as f64 * 2f64.powi(s as i32));
                        assert_eq!(got[i], exact as f32, "{kind}");
                    }
                }
            }
        }
    }
}

/// The pooled tensor read by a Linear: 1/area is folded into that layer's weights at
/// its own scale (which grows by about log2(area) bits), so the result stays within the
/// weight-rounding bound of the exact rational W·mean(x_q) + b — far below one
/// activation step — where folding at the activation scale would not.
#[test]
fn pooled_linear_is_within_the_weight_rounding_bound() {
    for kind in ["avg2", "gap7", "gap8"] {
        let (bytes, dims, area) = pool_net(kind, true);
        let net = import_bytes(&bytes).unwrap();
        let s = 10u32;
        let prog = lower(&net, s, P40).unwrap();
        let (wf, bf, cols) = match &net.nodes.last().unwrap().op {
            nn::Op::Linear {
                weight, bias, cols, ..
            } => (weight.clone(), bias.clone().unwrap(), *cols),
            other => panic!("{other:?}"),
        };
        let ws = prog
            .steps
            .iter()
            .find_map(|st| match st {
                Step::Linear {
                    weight_scale_bits, ..
                } => Some(*weight_scale_bits),
                _ => None,
            })
            .unwrap();
        // the divided weights keep s significant bits: the scale grew by ~log2(area)
        let max_w = wf.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
        assert_eq!(
            ws,
            (s as i64 - (max_w / area as f64).log2().ceil() as i64) as u32,
            "{kind}"
        );
        assert!(ws as f64 >= s as f64 + (area as f64).log2() - 1.0, "{kind}");
        let [c, h, w] = dims;
        let k = (area as f64).sqrt() as usize;
        for x in inputs(5, c * h * w) {
            let xq = quantise_input(&prog, &x);
            let got = dequantise(&prog, &run_fixed(&prog, &xq).unwrap());
            // window sums of the quantised input, in the Flatten order
            let (oh, ow) = (h / k, w / k);
            let mut sums = Vec::new();
            for ch in 0..c {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut sum: i64 = 0;
                        for dy in 0..k {
                            for dx in 0..k {
                                sum += xq[(ch * h + oy * k + dy) * w + ox * k + dx];
                            }
                        }
                        sums.push(sum);
                    }
                }
            }
            assert_eq!(sums.len(), cols);
            let scale = 2f64.powi(s as i32);
            let out_scale = 2f64.powi((s + ws) as i32);
            let l1: f64 = sums.iter().map(|v| v.unsigned_abs() as f64).sum();
            // |W_q − W·2^ws/area| ≤ 1/2 per weight, |b_q − b·2^(s+ws)| ≤ 1/2
            let bound = (0.5 * l1 + 0.5) / out_scale + 1e-6;
            for (r, g) in got.iter().enumerate() {
                let exact: f64 = (0..cols)
                    .map(|j| wf[r * cols + j] as f64 * sums[j] as f64 / (area as f64 * scale))
                    .sum::<f64>()
                    + bf[r] as f64;
                let err = (*g as f64 - exact).abs();
                assert!(
                    err <= bound,
                    "{kind} row {r}: {g} vs {exact} (bound {bound})"
                );
                assert!(err < 0.5 / scale, "{kind}: {err} ≥ half an activation step");
            }
        }
    }
}
