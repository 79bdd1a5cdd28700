//! The ops other exporters and CNN families bring: input normalisation with constants,
//! ReLU6 / Clip, float casts, Squeeze / Unsqueeze / Transpose that only reshape, a
//! Softmax head — against tract running the same ONNX bytes (float), and the
//! fixed-point reference against float; malformed variants are typed errors naming
//! the node.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use nn::{
    choose_fixed_point, dequantise, import_bytes, quantise_input, run_fixed, run_float,
    FixedPointOptions, NnError,
};

/// `(x − mean) / std` per channel inside the graph (torchvision-style normalisation),
/// conv 3x3 + ReLU6 (Clip with min/max inputs), global average pooling, Squeeze of the
/// spatial axes, Gemm, Softmax.
fn normalised_relu6_net(seed: u64) -> Vec<u8> {
    let mut m = Mb::new(seed);
    m.inits
        .push(f32_tensor("mean", &[1, 3, 1, 1], &[0.5, 0.4, 0.3]));
    m.inits
        .push(f32_tensor("std", &[1, 3, 1, 1], &[0.25, 0.2, 0.3]));
    m.inits.push(f32_tensor("zero", &[], &[0.0]));
    m.inits.push(f32_tensor("six", &[], &[6.0]));
    m.node("Sub", "/norm/Sub", &["input", "mean"], &["xc"], vec![]);
    m.node("Div", "/norm/Div", &["xc", "std"], &["xn"], vec![]);
    m.conv("conv", "xn", "c", 3, 8, 3, 1, 1, true);
    m.node("Clip", "/relu6/Clip", &["c", "zero", "six"], &["r"], vec![]);
    m.node("GlobalAveragePool", "/gap", &["r"], &["g"], vec![]);
    m.inits.push(i64_tensor("axes", &[2], &[2, 3]));
    m.node("Squeeze", "/squeeze", &["g", "axes"], &["s"], vec![]);
    m.gemm("fc", "s", "logits", 8, 4);
    m.node(
        "Softmax",
        "/softmax",
        &["logits"],
        &["probs"],
        vec![a_int("axis", 1)],
    );
    m.finish("input", &[3, 6, 6], "probs", &[4], 13)
}

#[test]
fn normalisation_relu6_squeeze_and_softmax_head_agree_with_tract() {
    let bytes = normalised_relu6_net(3);
    let net = import_bytes(&bytes).unwrap();
    // normalisation on the client, Softmax on the client, the rest private
    assert!(net.input_affine.is_some());
    assert!(net
        .nodes
        .iter()
        .any(|n| matches!(n.op, nn::Op::Clip { min, max: Some(max) } if min == 0.0 && max == 6.0)));
    assert_eq!(net.head.nodes.len(), 1);
    let xs = random_inputs(5, 8, 3 * 6 * 6);
    let cal = random_inputs(6, 8, 3 * 6 * 6);
    let prog = choose_fixed_point(&net, &cal, &FixedPointOptions::default()).unwrap();
    for x in &xs {
        let want = tract_run(&bytes, &[3, 6, 6], x);
        let logits = run_float(&net, x);
        let got = net.head.eval(&logits, &[4]).unwrap();
        let nn::HeadData::F32(p) = &got[0].value.data else {
            panic!()
        };
        for (a, b) in p.iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "{p:?} vs {want:?}");
        }
        // the fixed point within the tolerance of float, through the same head
        let y = dequantise(&prog, &run_fixed(&prog, &quantise_input(&prog, x)).unwrap());
        for (a, b) in y.iter().zip(&logits) {
            assert!((a - b).abs() <= 0.05, "{y:?} vs {logits:?}");
        }
    }
}

/// ReLU6 saturates: inputs pushed beyond 6 clip to exactly 6 in the fixed point.
#[test]
fn relu6_clips_exactly_at_both_ends() {
    let mut m = Mb::new(9);
    m.inits.push(f32_tensor("lo", &[], &[0.0]));
    m.inits.push(f32_tensor("hi", &[], &[6.0]));
    m.node("Clip", "/clip", &["input", "lo", "hi"], &["y"], vec![]);
    m.gemm("fc", "y", "out", 4, 2);
    let net = import_bytes(&m.finish("input", &[4], "out", &[2], 13)).unwrap();
    let prog = nn::lower(&net, 8, 1_032_193).unwrap();
    let clip = prog
        .steps
        .iter()
        .find(|s| {
            matches!(
                s,
                nn::Step::Nonlinear {
                    op: nn::NonlinearOp::Clip { .. },
                    ..
                }
            )
        })
        .unwrap();
    let nn::Step::Nonlinear {
        output,
        op: nn::NonlinearOp::Clip { lo, hi },
        ..
    } = clip
    else {
        panic!()
    };
    assert_eq!((*lo, *hi), (0, Some(6 << 8)));
    let vals = nn::reference::run_fixed_all(&prog, &quantise_input(&prog, &[-3.0, 2.5, 6.0, 9.75]))
        .unwrap();
    assert_eq!(vals[*output], vec![0, 640, 6 << 8, 6 << 8]);
}

/// Unsqueeze of an activation to C×1×1 feeding a 1x1 convolution, a Transpose that only
/// moves size-1 axes, Flatten: the shapes are relabelled, the data untouched.
#[test]
fn reshapes_that_keep_the_data_order() {
    let mut m = Mb::new(11);
    m.gemm("fc0", "input", "h", 6, 5);
    m.inits.push(i64_tensor("axes", &[2], &[2, 3]));
    m.node("Unsqueeze", "/unsq", &["h", "axes"], &["h4"], vec![]);
    m.conv("conv", "h4", "c", 5, 4, 1, 1, 0, true);
    m.node(
        "Transpose",
        "/t",
        &["c"],
        &["ct"],
        vec![a_ints("perm", &[0, 2, 1, 3])],
    );
    m.node("Flatten", "/flat", &["ct"], &["f"], vec![a_int("axis", 1)]);
    m.gemm("fc1", "f", "out", 4, 3);
    let bytes = m.finish("input", &[6], "out", &[3], 13);
    let net = import_bytes(&bytes).unwrap();
    for x in random_inputs(2, 4, 6) {
        let want = tract_run(&bytes, &[6], &x);
        let got = run_float(&net, &x);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-5);
        }
    }
    let prog = nn::lower(&net, 10, 1_032_193).unwrap();
    assert!(prog
        .steps
        .iter()
        .any(|s| matches!(s, nn::Step::Reshape { .. })));
}

#[test]
fn malformed_variants_name_the_node() {
    // a Clip whose bound is computed
    let mut m = Mb::new(1);
    m.gemm("fc", "input", "h", 4, 4);
    m.node("Clip", "/bad_clip", &["h", "h", "h"], &["y"], vec![]);
    m.gemm("fc2", "y", "out", 4, 2);
    let e = import_bytes(&m.finish("input", &[4], "out", &[2], 13)).unwrap_err();
    assert!(
        matches!(&e, NnError::BadAttribute { node, attribute, .. } if node == "/bad_clip" && attribute == "min"),
        "{e}"
    );
    // ReduceMean over the channel axis
    let mut m = Mb::new(2);
    m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
    m.node(
        "ReduceMean",
        "/mean_c",
        &["c"],
        &["r"],
        vec![a_ints("axes", &[1]), a_int("keepdims", 1)],
    );
    let e = import_bytes(&m.finish("input", &[1, 4, 4], "r", &[1, 4, 4], 13)).unwrap_err();
    assert!(
        matches!(&e, NnError::BadAttribute { node, attribute, .. } if node == "/mean_c" && attribute == "axes"),
        "{e}"
    );
    // a Cast to int of a private activation
    let mut m = Mb::new(3);
    m.gemm("fc", "input", "h", 4, 4);
    m.node("Cast", "/to_int", &["h"], &["hi"], vec![a_int("to", 7)]);
    m.gemm("fc2", "hi", "out", 4, 2);
    let e = import_bytes(&m.finish("input", &[4], "out", &[2], 13)).unwrap_err();
    assert!(
        matches!(&e, NnError::BadAttribute { node, attribute, .. } if node == "/to_int" && attribute == "to"),
        "{e}"
    );
    // Mul of two different activations
    let mut m = Mb::new(5);
    m.gemm("fc", "input", "h", 4, 4);
    m.gemm("fc1", "input", "h1", 4, 4);
    m.node("Mul", "/mul", &["h", "h1"], &["y"], vec![]);
    let e = import_bytes(&m.finish("input", &[4], "y", &[4], 13)).unwrap_err();
    assert!(
        matches!(&e, NnError::Graph { node, .. } if node == "/mul"),
        "{e}"
    );
    // a Softmax in the middle of the network
    let mut m = Mb::new(4);
    m.gemm("fc", "input", "h", 4, 4);
    m.node(
        "Softmax",
        "/mid_softmax",
        &["h"],
        &["p"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc2", "p", "out", 4, 2);
    let e = import_bytes(&m.finish("input", &[4], "out", &[2], 13)).unwrap_err();
    let NnError::Unsupported(list) = &e else {
        panic!("{e}")
    };
    assert!(
        list.iter()
            .any(|u| u.node == "/fc2/Gemm" && u.reason.contains("output head")),
        "{e}"
    );
}

/// `GlobalMaxPool` (an op added as one table entry): a 7×7 max window per channel,
/// against tract on the same bytes, and the fixed point within the tolerance of float;
/// a non-square input is a typed error naming the node.
#[test]
fn global_max_pool_agrees_with_tract() {
    let net_bytes = |h: usize, w: usize| {
        let mut m = Mb::new(12);
        m.conv("conv", "input", "c", 2, 6, 3, 1, 1, true);
        m.node("GlobalMaxPool", "/gmp", &["c"], &["g"], vec![]);
        m.node(
            "Flatten",
            "/flatten",
            &["g"],
            &["f"],
            vec![a_int("axis", 1)],
        );
        m.gemm("fc", "f", "out", 6, 3);
        m.finish("input", &[2, h, w], "out", &[3], 13)
    };
    let bytes = net_bytes(7, 7);
    let net = import_bytes(&bytes).unwrap();
    assert!(net
        .nodes
        .iter()
        .any(|n| matches!(n.op, nn::Op::MaxPool { k: 7, stride: 7 })));
    let cal = random_inputs(21, 8, 2 * 7 * 7);
    let prog = choose_fixed_point(&net, &cal, &FixedPointOptions::default()).unwrap();
    for x in &random_inputs(22, 6, 2 * 7 * 7) {
        let want = tract_run(&bytes, &[2, 7, 7], x);
        let got = run_float(&net, x);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "{got:?} vs {want:?}");
        }
        let y = dequantise(&prog, &run_fixed(&prog, &quantise_input(&prog, x)).unwrap());
        for (a, b) in y.iter().zip(&got) {
            assert!((a - b).abs() <= 0.05, "{y:?} vs {got:?}");
        }
    }
    match import_bytes(&net_bytes(6, 8)) {
        Err(NnError::Graph { node, op, reason }) => {
            assert_eq!((node.as_str(), op.as_str()), ("/gmp", "GlobalMaxPool"));
            assert!(reason.contains("6×8"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// The design notes' list of ops is the op table's, op for op and placement for
/// placement.
#[test]
fn the_documented_op_list_is_the_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/design-notes.md");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("The op table, exactly").unwrap();
    let para = &text[start..start + text[start..].find("\n\n").unwrap()];
    let names = |after: &str, before: Option<&str>| -> Vec<String> {
        let from = para.find(after).unwrap() + after.len();
        let to = before.map_or(para.len(), |b| para.find(b).unwrap());
        para[from..to]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    let private = names(": private", Some("; private or in the head"));
    let both = names("; private or in the head", Some("; only in the head"));
    let head = names("; only in the head", None);
    use nn::ops::Placement;
    let of = |p: Placement| -> Vec<String> {
        let mut v: Vec<String> = nn::ops::supported()
            .into_iter()
            .filter(|(_, _, q)| *q == p)
            .map(|(op, _, _)| op.to_string())
            .collect();
        v.sort();
        v
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(private), of(Placement::Private));
    assert_eq!(sorted(both), of(Placement::Both));
    assert_eq!(sorted(head), of(Placement::Head));
}
