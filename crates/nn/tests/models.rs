//! End-to-end: torch-like ONNX models → IR (vs tract) → fixed point (vs float).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use nn::{
    choose_fixed_point, dequantise, import_bytes, quantise_input, run_fixed, run_float,
    FixedPointOptions, NnError, Op, Program, Step, CANDIDATE_MODULI,
};

fn mlp(opset: i64) -> Vec<u8> {
    let mut m = Mb::new(1);
    m.node(
        "Flatten",
        "/Flatten",
        &["input"],
        &["/Flatten_output_0"],
        vec![common::a_int("axis", 1)],
    );
    m.gemm("fc1", "/Flatten_output_0", "/fc1/Gemm_output_0", 784, 128);
    m.relu("relu1", "/fc1/Gemm_output_0", "/relu1/Relu_output_0");
    m.gemm(
        "fc2",
        "/relu1/Relu_output_0",
        "/fc2/Gemm_output_0",
        128,
        128,
    );
    m.relu("relu2", "/fc2/Gemm_output_0", "/relu2/Relu_output_0");
    m.gemm("fc3", "/relu2/Relu_output_0", "logits", 128, 10);
    m.finish("input", &[1, 28, 28], "logits", &[10], opset)
}

fn cnn(opset: i64) -> Vec<u8> {
    let mut m = Mb::new(2);
    m.conv(
        "conv1",
        "input",
        "/conv1/Conv_output_0",
        1,
        4,
        5,
        2,
        0,
        true,
    );
    m.bn(
        "bn1",
        "/conv1/Conv_output_0",
        "/bn1/BatchNormalization_output_0",
        4,
    );
    m.relu(
        "relu",
        "/bn1/BatchNormalization_output_0",
        "/relu/Relu_output_0",
    );
    m.node(
        "MaxPool",
        "/pool/MaxPool",
        &["/relu/Relu_output_0"],
        &["/pool/MaxPool_output_0"],
        vec![
            a_int("ceil_mode", 0),
            a_ints("dilations", &[1, 1]),
            a_ints("kernel_shape", &[2, 2]),
            a_ints("pads", &[0, 0, 0, 0]),
            a_ints("strides", &[2, 2]),
        ],
    );
    m.node(
        "Flatten",
        "/Flatten",
        &["/pool/MaxPool_output_0"],
        &["/Flatten_output_0"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc", "/Flatten_output_0", "output", 144, 10);
    m.finish("input", &[1, 28, 28], "output", &[10], opset)
}

fn residual(opset: i64) -> Vec<u8> {
    nn::zoo::tiny_resnet(3, opset)
}

fn square_net(opset: i64, pow: bool) -> Vec<u8> {
    let mut m = Mb::new(4);
    m.gemm("fc1", "input", "h", 64, 32);
    if pow {
        let two = "/Constant_output_0";
        m.node(
            "Constant",
            "/Constant",
            &[],
            &[two],
            vec![a_tensor("value", f32_tensor("", &[], &[2.0]))],
        );
        m.node("Pow", "/Pow", &["h", two], &["sq"], vec![]);
    } else {
        m.node("Mul", "/Mul", &["h", "h"], &["sq"], vec![]);
    }
    m.gemm("fc2", "sq", "output", 32, 10);
    m.finish("input", &[64], "output", &[10], opset)
}

/// A CNN with AvgPool, Dropout/Identity, `x.view(x.size(0), -1)` shape arithmetic and a
/// MatMul + Add bias instead of Gemm.
fn cnn_matmul(opset: i64) -> Vec<u8> {
    let mut m = Mb::new(5);
    m.conv("features.0", "input", "c1", 2, 3, 3, 1, 1, true);
    m.relu("features.1", "c1", "r1");
    m.node(
        "AveragePool",
        "/features.2/AveragePool",
        &["r1"],
        &["ap"],
        vec![
            a_ints("kernel_shape", &[3, 3]),
            a_ints("pads", &[0, 0, 0, 0]),
            a_ints("strides", &[3, 3]),
        ],
    );
    m.node("Dropout", "/Dropout", &["ap"], &["dr"], vec![]);
    m.node("Identity", "/Identity", &["dr"], &["id"], vec![]);
    m.node("Shape", "/Shape", &["id"], &["shp"], vec![]);
    m.node(
        "Constant",
        "/Constant",
        &[],
        &["zero"],
        vec![a_tensor("value", i64_tensor("", &[], &[0]))],
    );
    m.node(
        "Gather",
        "/Gather",
        &["shp", "zero"],
        &["bs"],
        vec![a_int("axis", 0)],
    );
    m.node(
        "Constant",
        "/Constant_1",
        &[],
        &["ax"],
        vec![a_tensor("value", i64_tensor("", &[1], &[0]))],
    );
    m.node("Unsqueeze", "/Unsqueeze", &["bs", "ax"], &["bs1"], vec![]);
    m.node(
        "Constant",
        "/Constant_2",
        &[],
        &["m1"],
        vec![a_tensor("value", i64_tensor("", &[1], &[-1]))],
    );
    m.node(
        "Concat",
        "/Concat",
        &["bs1", "m1"],
        &["newshape"],
        vec![a_int("axis", 0)],
    );
    m.node(
        "Reshape",
        "/Reshape",
        &["id", "newshape"],
        &["flat"],
        vec![],
    );
    let w = m.param("onnx::MatMul_30", &[27, 10], 27);
    m.node("MatMul", "/fc/MatMul", &["flat", &w], &["mm"], vec![]);
    let b = m.param("fc.bias", &[10], 27);
    m.node("Add", "/fc/Add", &[&b, "mm"], &["output"], vec![]);
    m.finish("input", &[2, 9, 9], "output", &[10], opset)
}

fn close(a: &[f32], b: &[f32], rel: f32) {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= rel * scale,
            "{x} vs {y} (scale {scale}): {a:?} vs {b:?}"
        );
    }
}

/// Float IR vs tract, then fixed point vs float: every logit within `tol·2^(12−s)` of the
/// float one (relative to the largest float logit), and the same argmax unless the float top
/// two are closer than that. Checked at s = 12 (p32/p40, any error accepted) and for the
/// automatic plan (whose own check is the default tolerance on the calibration inputs).
fn check_model(bytes: &[u8], in_dims: &[usize], tol: f32) -> Program {
    let net = import_bytes(bytes).unwrap();
    assert_eq!(net.input_shape(), in_dims);
    let len: usize = in_dims.iter().product();
    let xs = random_inputs(99, 6, len);
    for x in &xs[..3] {
        close(&run_float(&net, x), &tract_run(bytes, in_dims, x), 1e-4);
    }
    let calib = random_inputs(7, 8, len);
    let s12 = choose_fixed_point(
        &net,
        &calib,
        &FixedPointOptions::with(&CANDIDATE_MODULI[1..], 12, 12).tolerance(f64::INFINITY),
    )
    .unwrap();
    let auto = choose_fixed_point(&net, &calib, &FixedPointOptions::default()).unwrap();
    eprintln!(
        "s = {} p = {} bounds (calibration bits, worst-case bits) {:?}",
        auto.frac_bits,
        auto.p,
        auto.bounds
            .iter()
            .map(|b| (b.calibration_bits, b.worst_case_bits))
            .collect::<Vec<_>>()
    );
    for prog in [&s12, &auto] {
        let tol = tol * 2f32.powi(12 - prog.frac_bits as i32);
        for x in &xs {
            let f = run_float(&net, x);
            let y = dequantise(prog, &run_fixed(prog, &quantise_input(prog, x)).unwrap());
            let scale = f.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            for (a, b) in y.iter().zip(&f) {
                assert!(
                    (a - b).abs() <= tol * scale,
                    "s = {}: fixed {y:?} vs float {f:?}",
                    prog.frac_bits
                );
            }
            let mut sorted = f.clone();
            sorted.sort_by(|a, b| b.partial_cmp(a).unwrap());
            if sorted[0] - sorted[1] > 2.0 * tol * scale {
                assert_eq!(argmax(&y), argmax(&f));
            }
        }
    }
    auto
}

#[test]
fn mlp_784_128_128_10() {
    for opset in [13, 17] {
        let bytes = mlp(opset);
        let prog = check_model(&bytes, &[1, 28, 28], 0.01);
        let kinds: Vec<&str> = prog
            .steps
            .iter()
            .map(|s| match s {
                Step::Linear { .. } => "L",
                Step::Nonlinear { .. } => "N",
                _ => "?",
            })
            .collect();
        assert_eq!(kinds, ["L", "N", "L", "N", "L"]);
        // each ReLU truncates its linear layer's weight scale away: back to s
        let mut ws = 0;
        for s in &prog.steps {
            match s {
                Step::Linear {
                    weight_scale_bits, ..
                } => ws = *weight_scale_bits,
                Step::Nonlinear {
                    trunc_bits, output, ..
                } => {
                    assert_eq!(*trunc_bits, ws);
                    assert_eq!(prog.tensors[*output].scale_bits, prog.frac_bits);
                }
                _ => {}
            }
        }
        assert_eq!(prog.tensors[prog.output].scale_bits, prog.frac_bits + ws);
        assert_eq!(prog.bounds.len(), 3);
        assert!(prog
            .bounds
            .iter()
            .all(|b| b.calibration_max <= b.worst_case));
        let acc = prog.accuracy.unwrap();
        assert!(acc.max_abs_err <= nn::DEFAULT_TOLERANCE / 2.0, "{acc:?}");
        eprintln!(
            "mlp: s = {} p = {} ({}) bounds {:?}",
            prog.frac_bits,
            prog.p,
            prog.preset,
            prog.bounds
                .iter()
                .map(|b| (b.calibration_bits, b.worst_case_bits))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn small_cnn_with_bn() {
    let bytes = cnn(17);
    let net = import_bytes(&bytes).unwrap();
    let ops: Vec<&str> = net.nodes.iter().map(|n| n.op.kind()).collect();
    assert_eq!(ops, ["Conv", "Relu", "MaxPool", "Flatten", "Linear"]);
    let prog = check_model(&bytes, &[1, 28, 28], 0.01);
    let nl: Vec<(nn::NonlinearOp, u32)> = prog
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Nonlinear { op, trunc_bits, .. } => Some((*op, *trunc_bits)),
            _ => None,
        })
        .collect();
    // ReLU then MaxPool: fused into one garbled circuit that truncates the conv's
    // weight scale away.
    let ws = prog
        .steps
        .iter()
        .find_map(|s| match s {
            Step::Conv {
                weight_scale_bits, ..
            } => Some(*weight_scale_bits),
            _ => None,
        })
        .unwrap();
    assert_eq!(nl, [(nn::NonlinearOp::ReluMaxPool { k: 2, stride: 2 }, ws)]);
    check_model(&cnn(13), &[1, 28, 28], 0.01);
}

#[test]
fn residual_block() {
    let bytes = residual(17);
    let prog = check_model(&bytes, &[3, 8, 8], 0.01);
    // the residual Add aligns the relu output (s) to the conv output (s + w)
    let (a, b, mul_a, mul_b) = prog
        .steps
        .iter()
        .find_map(|s| match s {
            Step::Add {
                a, b, mul_a, mul_b, ..
            } => Some((*a, *b, *mul_a, *mul_b)),
            _ => None,
        })
        .unwrap();
    let (sa, sb) = (prog.tensors[a].scale_bits, prog.tensors[b].scale_bits);
    assert!(sa > sb);
    assert_eq!((mul_a, mul_b), (1, 1 << (sa - sb)));
    assert!(prog.steps.iter().any(|s| matches!(
        s,
        Step::SumPool {
            k_h: 8,
            k_w: 8,
            stride: 1,
            ..
        }
    )));
    check_model(&residual(13), &[3, 8, 8], 0.01);
}

#[test]
fn square_activation() {
    for (opset, pow) in [(13, false), (17, true)] {
        let bytes = square_net(opset, pow);
        let prog = check_model(&bytes, &[64], 0.01);
        let kinds: Vec<String> = prog
            .steps
            .iter()
            .map(|s| match s {
                Step::Linear { .. } => "L".into(),
                Step::Square { .. } => "S".into(),
                Step::Nonlinear { trunc_bits, .. } => format!("T{trunc_bits}"),
                _ => "?".into(),
            })
            .collect();
        let s = prog.frac_bits;
        let ws = match prog.steps[0] {
            Step::Linear {
                weight_scale_bits, ..
            } => weight_scale_bits,
            _ => unreachable!(),
        };
        assert_eq!(
            kinds,
            [
                "L".to_string(),
                format!("T{ws}"),
                "S".into(),
                format!("T{s}"),
                "L".into()
            ]
        );
    }
}

#[test]
fn matmul_bias_avgpool_reshape() {
    let bytes = cnn_matmul(17);
    let net = import_bytes(&bytes).unwrap();
    let ops: Vec<&str> = net.nodes.iter().map(|n| n.op.kind()).collect();
    assert_eq!(ops, ["Conv", "Relu", "AvgPool", "Flatten", "Linear"]);
    let prog = check_model(&bytes, &[2, 9, 9], 0.01);
    // the 1/9 of the average pool is folded into the Linear: no extra truncation
    assert!(prog.steps.iter().all(|s| !matches!(
        s,
        Step::Nonlinear {
            op: nn::NonlinearOp::Identity,
            ..
        }
    )));
}

#[test]
fn bn_folding_matches_unfused() {
    // same conv with and without the BN node; apply BN by hand to the latter
    let mut with = Mb::new(11);
    with.conv("conv", "input", "c", 2, 3, 3, 1, 1, true);
    with.bn("bn", "c", "out", 3);
    let inits = with.inits.clone();
    let bytes_bn = with.finish("input", &[2, 6, 6], "out", &[3, 6, 6], 17);
    let mut without = Mb::new(11);
    without.conv("conv", "input", "c", 2, 3, 3, 1, 1, true);
    let bytes = without.finish("input", &[2, 6, 6], "c", &[3, 6, 6], 17);
    let get = |name: &str| -> Vec<f32> {
        let t = inits.iter().find(|t| t.name == name).unwrap();
        t.raw_data
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let (g, b, mu, var) = (
        get("bn.weight"),
        get("bn.bias"),
        get("bn.running_mean"),
        get("bn.running_var"),
    );
    let folded = import_bytes(&bytes_bn).unwrap();
    assert_eq!(folded.nodes.len(), 1);
    let plain = import_bytes(&bytes).unwrap();
    for x in random_inputs(5, 4, 72) {
        let y = run_float(&plain, &x);
        let want: Vec<f32> = y
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let c = i / 36;
                (v - mu[c]) / (var[c] + 1e-5).sqrt() * g[c] + b[c]
            })
            .collect();
        close(&run_float(&folded, &x), &want, 1e-5);
        close(
            &run_float(&folded, &x),
            &tract_run(&bytes_bn, &[2, 6, 6], &x),
            1e-5,
        );
    }
}

#[test]
fn bn_after_gemm_folds() {
    let mut m = Mb::new(12);
    m.gemm("fc", "input", "h", 16, 8);
    m.bn("bn", "h", "out", 8);
    let bytes = m.finish("input", &[16], "out", &[8], 13);
    let net = import_bytes(&bytes).unwrap();
    assert_eq!(net.nodes.len(), 1);
    let x = &random_inputs(1, 1, 16)[0];
    close(&run_float(&net, x), &tract_run(&bytes, &[16], x), 1e-4);
}

#[test]
fn overflow_when_p_too_small() {
    let net = import_bytes(&mlp(13)).unwrap();
    let calib = random_inputs(7, 4, 784);
    match choose_fixed_point(
        &net,
        &calib,
        &FixedPointOptions::with(&[(12289, "tiny")], 6, 12),
    ) {
        Err(NnError::Overflow {
            layer,
            needed_bits,
            p_bits,
        }) => {
            assert_eq!(p_bits, 14);
            assert!(needed_bits > 14);
            assert!(!layer.is_empty());
        }
        other => panic!("expected Overflow, got {other:?}"),
    }
    // running a program whose p is too small is caught at run time too
    let mut prog = choose_fixed_point(&net, &calib, &FixedPointOptions::default()).unwrap();
    prog.p = 12289;
    let x = quantise_input(&prog, &calib[0]);
    assert!(matches!(
        run_fixed(&prog, &x),
        Err(NnError::RangeExceeded { .. })
    ));
}

#[test]
fn cheapest_modulus_that_meets_the_tolerance() {
    let net = import_bytes(&mlp(13)).unwrap();
    let calib = random_inputs(7, 4, 784);
    let tests = random_inputs(70, 8, 784);
    // a loose tolerance: the 20-bit modulus is enough
    let loose =
        choose_fixed_point(&net, &calib, &FixedPointOptions::default().tolerance(10.0)).unwrap();
    assert_eq!((loose.p, loose.preset.as_str()), (1_032_193, "n8192"));
    // the default: the float agreement decides, and a tighter tolerance never picks a
    // smaller modulus
    let mut last = 0;
    for tol in [0.2, 0.05, 0.01] {
        let prog =
            choose_fixed_point(&net, &calib, &FixedPointOptions::default().tolerance(tol)).unwrap();
        assert!(prog.p >= last);
        last = prog.p;
        let acc = prog.accuracy.unwrap();
        assert!(
            acc.max_abs_err <= tol / 2.0 && acc.tolerance == tol,
            "{acc:?}"
        );
        // unseen inputs keep within the tolerance
        let on_tests = nn::float_agreement(&net, &prog, &tests, tol).unwrap();
        assert!(on_tests.max_abs_err <= tol, "{tol}: {on_tests:?}");
    }
    // only a 20-bit modulus offered and a tolerance it cannot meet: the error names a layer
    match choose_fixed_point(
        &net,
        &calib,
        &FixedPointOptions::with(&CANDIDATE_MODULI[..1], 4, 16).tolerance(1e-4),
    ) {
        Err(NnError::Precision {
            layer, achieved, ..
        }) => {
            assert!(net.nodes.iter().any(|n| n.name == layer), "{layer}");
            assert!(achieved > 1e-4 / 2.0);
        }
        other => panic!("expected Precision, got {other:?}"),
    }
}

#[test]
fn ir_network_structure() {
    let net = import_bytes(&residual(17)).unwrap();
    let ops: Vec<&str> = net.nodes.iter().map(|n| n.op.kind()).collect();
    assert_eq!(
        ops,
        [
            "Conv",
            "Relu",
            "Conv",
            "Relu",
            "Conv",
            "Add",
            "Relu",
            "GlobalAvgPool",
            "Flatten",
            "Linear"
        ]
    );
    assert!(
        matches!(net.nodes[0].op, Op::Conv { shape, .. } if shape.padding == kernels::Padding::Same)
    );
    assert_eq!(net.nodes[0].name, "/conv1/Conv");
    assert_eq!(net.shape(net.output), [10]);
}

/// torch padding the kernels cannot express as TF-SAME, checked against tract: a 7×7
/// stride-2 pad-3 stem with BN, ReLU and a 3×3 stride-2 pad-1 max pool (torchvision), a
/// 3×3 stride-2 pad-1 conv on an even size, a padded max pool on signed values (padding
/// must take no part in the max), an asymmetric `ZeroPad2d`, an edge `Pad` and a
/// 1×1 stride-2 conv.
fn torch_padding_net(opset: i64) -> Vec<u8> {
    let mut m = Mb::new(31);
    m.conv("conv1", "input", "c1", 3, 4, 7, 2, 3, false); // 18 (even) → 9: explicit pad
    m.bn("bn1", "c1", "b1", 4);
    m.relu("relu", "b1", "r1");
    m.max_pool("maxpool", "r1", "p1", 3, 2, 1); // 9 → 5
    m.conv("conv2", "p1", "c2", 4, 6, 3, 2, 1, true); // 5 → 3 (odd: SAME-equivalent)
    m.conv("conv3", "c2", "c3", 6, 6, 3, 1, 1, true); // signed values
    m.max_pool("pool_signed", "c3", "p2", 2, 1, 1); // 3 → 4, pads 1 < k = 2
    m.conv("conv4", "p2", "c4", 6, 5, 3, 2, 1, true); // 4 (even) → 2: explicit pad
    m.zero_pad("zpad", "c4", "z", [1, 0, 2, 1]); // 5×5×3
    m.node(
        "Pad",
        "/epad/Pad",
        &["z", "edge_pads"],
        &["e"],
        vec![a_str("mode", "edge")],
    );
    m.inits
        .push(i64_tensor("edge_pads", &[8], &[0, 0, 0, 2, 0, 0, 1, 0])); // 5×6×5
    m.conv("conv5", "e", "c5", 5, 4, 1, 2, 0, true); // 1×1 stride 2: 6×5 → 3×3
    m.node(
        "Flatten",
        "/Flatten",
        &["c5"],
        &["f"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc", "f", "output", 36, 10);
    m.finish("input", &[3, 18, 18], "output", &[10], opset)
}

#[test]
fn torch_padding_matches_tract() {
    let bytes = torch_padding_net(17);
    let net = import_bytes(&bytes).unwrap();
    let desc: Vec<String> = net
        .nodes
        .iter()
        .map(|n| match &n.op {
            Op::Pad { pads, mode } => format!("Pad{pads:?}{mode:?}"),
            Op::Conv { shape, .. } => format!("Conv{}/{:?}", shape.k_h, shape.padding),
            Op::MaxPool { k, stride } => format!("MaxPool{k}/{stride}"),
            o => o.kind().to_string(),
        })
        .collect();
    assert_eq!(
        desc,
        [
            "Pad[3, 3, 3, 3]Zero",
            "Conv7/Valid",
            "Relu",
            "Pad[1, 1, 1, 1]Edge",
            "MaxPool3/2",
            "Conv3/Same",
            "Conv3/Same",
            "Pad[1, 1, 1, 1]Edge",
            "MaxPool2/1",
            "Pad[1, 1, 1, 1]Zero",
            "Conv3/Valid",
            "Pad[1, 0, 2, 1]Zero",
            "Pad[0, 2, 1, 0]Edge",
            "Conv1/Valid",
            "Flatten",
            "Linear"
        ]
    );
    assert_eq!(net.nodes[0].name, "/conv1/Conv/pad");
    assert_eq!(net.nodes[3].name, "/maxpool/MaxPool/pad");
    // float IR vs tract, fixed point vs float (check_model)
    let prog = check_model(&bytes, &[3, 18, 18], 0.01);
    // ReLU → edge Pad → MaxPool became edge Pad → ReluMaxPool; the signed pool stays a
    // plain MaxPool
    let nl: Vec<nn::NonlinearOp> = prog
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Nonlinear { op, .. } => Some(*op),
            _ => None,
        })
        .collect();
    assert!(nl.contains(&nn::NonlinearOp::ReluMaxPool { k: 3, stride: 2 }));
    assert!(nl.contains(&nn::NonlinearOp::MaxPool { k: 2, stride: 1 }));
    assert!(!nl.contains(&nn::NonlinearOp::Relu));
    check_model(&torch_padding_net(13), &[3, 18, 18], 0.01);
}

/// The fused `Pad → ReluMaxPool` of a torchvision-like stem computes exactly what the
/// unfused `ReLU (truncating) → Pad → MaxPool` does, bit for bit.
#[test]
fn relu_pad_maxpool_fusion_is_exact() {
    let mut m = Mb::new(32);
    m.conv("conv1", "input", "c1", 2, 3, 3, 1, 1, true);
    m.relu("relu", "c1", "r1");
    m.max_pool("maxpool", "r1", "output", 3, 2, 1);
    let bytes = m.finish("input", &[2, 10, 10], "output", &[3, 5, 5], 17);
    let net = import_bytes(&bytes).unwrap();
    // a 32-bit p: the pool compares differences of its unscaled inputs
    let fused = nn::lower(&net, 8, 4_293_918_721).unwrap();
    let [Step::Conv {
        weight_scale_bits: ws,
        ..
    }, Step::Pad {
        name: pad_name,
        input: conv_out,
        output: padded,
        pads,
        mode,
    }, Step::Nonlinear {
        name,
        input: pool_in,
        output: end,
        op: nn::NonlinearOp::ReluMaxPool { k: 3, stride: 2 },
        trunc_bits,
        ..
    }] = &fused.steps[..]
    else {
        panic!("{:#?}", fused.steps);
    };
    assert_eq!((pool_in, pads, *mode), (padded, &[1; 4], nn::PadMode::Edge));
    assert_eq!(trunc_bits, ws);
    // undo the fusion by hand
    let mut unfused = fused.clone();
    let mut relu_out = fused.tensors[*conv_out].clone();
    relu_out.scale_bits = 8;
    unfused.tensors.push(relu_out);
    let r = unfused.tensors.len() - 1;
    unfused.tensors[*padded].scale_bits = 8;
    unfused.steps.truncate(1);
    unfused.steps.extend([
        Step::Nonlinear {
            name: name.clone(),
            input: *conv_out,
            output: r,
            op: nn::NonlinearOp::Relu,
            trunc_bits: *trunc_bits,
            approximate: false,
            coarse_drelu_bits: 0,
        },
        Step::Pad {
            name: pad_name.clone(),
            input: r,
            output: *padded,
            pads: *pads,
            mode: *mode,
        },
        Step::Nonlinear {
            name: "pool".into(),
            input: *padded,
            output: *end,
            op: nn::NonlinearOp::MaxPool { k: 3, stride: 2 },
            trunc_bits: 0,
            approximate: false,
            coarse_drelu_bits: 0,
        },
    ]);
    for x in random_inputs(3, 8, 200) {
        // signed inputs: the conv output has negative values for the ReLU to clear
        let x: Vec<f32> = x.iter().map(|v| 2.0 * v - 1.0).collect();
        let xq = quantise_input(&fused, &x);
        let a = run_fixed(&fused, &xq).unwrap();
        assert_eq!(a, run_fixed(&unfused, &xq).unwrap());
        assert!(a.iter().all(|&v| v >= 0));
    }
}

/// A padded max pool over negative values: zero padding would give 0 at the border; the
/// ONNX/PyTorch result (padding takes no part) is the max of the real elements.
#[test]
fn padded_maxpool_ignores_padding() {
    let mut m = Mb::new(33);
    m.max_pool("pool", "input", "output", 3, 2, 1);
    let bytes = m.finish("input", &[1, 4, 4], "output", &[1, 2, 2], 17);
    let net = import_bytes(&bytes).unwrap();
    // x[y][x] = −(1 + 4y + x): the largest element of a window is its top-left real one
    let x: Vec<f32> = (0..16).map(|i| -1.0 - i as f32).collect();
    // windows (rows/cols −1..1 and 1..3): top-left real elements (0,0), (0,1), (1,0), (1,1)
    let want = [-1.0, -2.0, -5.0, -6.0];
    assert_eq!(run_float(&net, &x), want);
    assert_eq!(tract_run(&bytes, &[1, 4, 4], &x), want);
    let prog = nn::lower(&net, 4, 1_032_193).unwrap();
    let y = dequantise(
        &prog,
        &run_fixed(&prog, &quantise_input(&prog, &x)).unwrap(),
    );
    assert_eq!(y, want);
}

/// Every committed fixture (exported by torch.onnx.export, TorchScript and dynamo, and
/// by skl2onnx) imports: its ops and attributes, of the types the importer reads, are
/// all supported.
#[test]
fn every_fixture_imports() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "onnx") {
            let network = nn::import(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!network.nodes.is_empty(), "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 9, "{seen} fixtures");
}
