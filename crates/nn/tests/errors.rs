//! Unsupported constructs, padding rules and error variants.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use kernels::Padding;
use nn::onnx::conv_padding;
use nn::{choose_fixed_point, import_bytes, lower, FixedPointOptions, NnError};

fn pool_attrs(k: i64, ceil: i64) -> Vec<tract_onnx::pb::AttributeProto> {
    vec![
        a_int("ceil_mode", ceil),
        a_ints("kernel_shape", &[k, k]),
        a_ints("pads", &[0, 0, 0, 0]),
        a_ints("strides", &[k, k]),
    ]
}

#[test]
fn all_unsupported_reported_together() {
    let mut m = Mb::new(1);
    m.conv("conv1", "input", "c1", 1, 4, 3, 1, 2, true);
    m.nodes[0].attribute[0] = a_ints("dilations", &[2, 2]);
    m.conv("conv2", "c1", "c2", 4, 4, 3, 1, 1, true);
    m.nodes[1].attribute[1] = a_int("group", 0);
    m.node(
        "MaxPool",
        "/pool/MaxPool",
        &["c2"],
        &["p"],
        pool_attrs(2, 1),
    );
    m.conv("conv3", "p", "c3", 4, 4, 3, 1, 0, true);
    m.nodes[3].attribute.push(a_str("auto_pad", "SAME_UPPER"));
    m.node(
        "Flatten",
        "/Flatten",
        &["c3"],
        &["f"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc", "f", "logits", 16, 10);
    m.node("Tanh", "/Tanh", &["logits"], &["probs"], vec![]);
    let bytes = m.finish("input", &[1, 12, 12], "probs", &[10], 17);
    let Err(NnError::Unsupported(list)) = import_bytes(&bytes) else {
        panic!("expected Unsupported");
    };
    let got: Vec<(&str, &str, Option<&str>)> = list
        .iter()
        .map(|u| (u.node.as_str(), u.op.as_str(), u.attribute.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("/conv1/Conv", "Conv", Some("dilations")),
            ("/conv2/Conv", "Conv", Some("group")),
            ("/pool/MaxPool", "MaxPool", Some("ceil_mode")),
            ("/conv3/Conv", "Conv", Some("auto_pad")),
            ("/Tanh", "Tanh", None),
        ]
    );
    let msg = NnError::Unsupported(list).to_string();
    assert!(
        msg.contains("Tanh") && msg.contains("dilations") && msg.contains("5 found"),
        "{msg}"
    );
}

/// An attribute of another type than the one the importer reads it as (a `group` written
/// as a float, `pads` as a string) is reported with its node and name, never read from
/// the wrong field (as 0).
#[test]
fn mistyped_attributes_are_reported() {
    let mut m = Mb::new(1);
    m.conv("conv1", "input", "c1", 1, 4, 3, 1, 1, true);
    let group = m.nodes[0]
        .attribute
        .iter()
        .position(|a| a.name == "group")
        .unwrap();
    m.nodes[0].attribute[group] = a_float("group", 1.0);
    m.conv("conv2", "c1", "c2", 4, 4, 3, 1, 1, true);
    let pads = m.nodes[1]
        .attribute
        .iter()
        .position(|a| a.name == "pads")
        .unwrap();
    m.nodes[1].attribute[pads] = a_str("pads", "1,1,1,1");
    m.node(
        "Flatten",
        "/Flatten",
        &["c2"],
        &["f"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc", "f", "logits", 4 * 12 * 12, 10);
    let bytes = m.finish("input", &[1, 12, 12], "logits", &[10], 17);
    let Err(NnError::Unsupported(list)) = import_bytes(&bytes) else {
        panic!("expected Unsupported");
    };
    let got: Vec<(&str, Option<&str>, &str)> = list
        .iter()
        .map(|u| (u.node.as_str(), u.attribute.as_deref(), u.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "/conv1/Conv",
                Some("group"),
                "is of type float, expected int"
            ),
            (
                "/conv2/Conv",
                Some("pads"),
                "is of type string, expected ints"
            ),
        ]
    );
}

#[test]
fn each_unsupported_case() {
    type Edit = Box<dyn Fn(&mut Mb)>;
    let cases: Vec<(&str, Edit, &str, Option<&str>)> = vec![
        (
            "dilations",
            Box::new(|m: &mut Mb| m.nodes[0].attribute[0] = a_ints("dilations", &[2, 2])),
            "Conv",
            Some("dilations"),
        ),
        (
            "group",
            Box::new(|m: &mut Mb| m.nodes[0].attribute[1] = a_int("group", -1)),
            "Conv",
            Some("group"),
        ),
        (
            "auto_pad",
            Box::new(|m: &mut Mb| m.nodes[0].attribute.push(a_str("auto_pad", "VALID"))),
            "Conv",
            Some("auto_pad"),
        ),
        (
            "strides",
            Box::new(|m: &mut Mb| m.nodes[0].attribute[4] = a_ints("strides", &[1, 2])),
            "Conv",
            Some("strides"),
        ),
        (
            "lrn",
            Box::new(|m: &mut Mb| m.node("LRN", "/LRN", &["c"], &["sm"], vec![])),
            "LRN",
            None,
        ),
        (
            "ceil",
            Box::new(|m: &mut Mb| m.node("MaxPool", "/MaxPool", &["c"], &["mp"], pool_attrs(2, 1))),
            "MaxPool",
            Some("ceil_mode"),
        ),
        (
            "avgpads",
            Box::new(|m: &mut Mb| {
                m.node(
                    "AveragePool",
                    "/AveragePool",
                    &["c"],
                    &["ap"],
                    vec![
                        a_ints("kernel_shape", &[2, 2]),
                        a_ints("pads", &[1, 1, 1, 1]),
                    ],
                )
            }),
            "AveragePool",
            Some("pads"),
        ),
        (
            "zipmap",
            Box::new(|m: &mut Mb| {
                m.node("ZipMap", "/ZipMap", &["c"], &["zm"], vec![]);
                m.nodes.last_mut().unwrap().domain = "ai.onnx.ml".into();
            }),
            "ZipMap",
            None,
        ),
        (
            "tanh",
            Box::new(|m: &mut Mb| m.node("Tanh", "/Tanh", &["c"], &["sg"], vec![])),
            "Tanh",
            None,
        ),
    ];
    for (what, edit, op, attr) in cases {
        let mut m = Mb::new(2);
        m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
        edit(&mut m);
        let bytes = m.finish("input", &[1, 8, 8], "c", &[2, 8, 8], 13);
        match import_bytes(&bytes) {
            Err(NnError::Unsupported(list)) => {
                assert_eq!(list.len(), 1, "{what}: {list:?}");
                assert_eq!(list[0].op, op, "{what}");
                assert_eq!(list[0].attribute.as_deref(), attr, "{what}");
                assert!(list[0].node.starts_with('/'), "{what}");
            }
            other => panic!("{what}: expected Unsupported, got {other:?}"),
        }
    }
}

#[test]
fn pads_mapping_rules() {
    // symmetric (k-1)/2, stride 1
    assert_eq!(conv_padding(8, 8, 3, 3, 1, [1, 1, 1, 1]), Ok(Padding::Same));
    assert_eq!(conv_padding(9, 7, 5, 5, 1, [2, 2, 2, 2]), Ok(Padding::Same));
    assert_eq!(conv_padding(28, 28, 5, 5, 2, [0; 4]), Ok(Padding::Valid));
    // stride 2, odd size: SAME's floor(total/2) = 1 = pad
    assert_eq!(conv_padding(7, 7, 3, 3, 2, [1, 1, 1, 1]), Ok(Padding::Same));
    // stride 2, even size: SAME pads 0 top, 1 bottom; ONNX 1/1 differs
    assert!(conv_padding(8, 8, 3, 3, 2, [1, 1, 1, 1]).is_err());
    // torch padding=2 stride 2 kernel 5 on 28: same size, different offset
    assert!(conv_padding(28, 28, 5, 5, 2, [2, 2, 2, 2]).is_err());
    // asymmetric pads equal to SAME's
    assert_eq!(conv_padding(8, 8, 3, 3, 2, [0, 0, 1, 1]), Ok(Padding::Same));
    // output size differs
    assert!(conv_padding(8, 8, 3, 3, 1, [2, 2, 2, 2]).is_err());
    // one axis padded, the other not, where SAME needs pads on both
    assert!(conv_padding(8, 8, 3, 3, 1, [1, 0, 1, 0]).is_err());
    // k = 1 with stride 1: SAME pads nothing — a zero axis is fine if the other matches
    assert_eq!(conv_padding(8, 8, 1, 3, 1, [0, 1, 0, 1]), Ok(Padding::Same));

    // pads that are not SAME: an explicit zero Pad, then a VALID conv (same function)
    let mut m = Mb::new(3);
    m.conv("conv1", "input", "c", 1, 4, 5, 2, 2, true);
    let bytes = m.finish("input", &[1, 28, 28], "c", &[4, 14, 14], 17);
    let net = import_bytes(&bytes).unwrap();
    assert_eq!(net.nodes.len(), 2);
    assert_eq!(net.nodes[0].name, "/conv1/Conv/pad");
    assert_eq!(
        net.nodes[0].op,
        nn::Op::Pad {
            pads: [2; 4],
            mode: nn::PadMode::Zero
        }
    );
    assert_eq!(net.shape(net.nodes[0].output), [1, 32, 32]);
    assert!(
        matches!(&net.nodes[1].op, nn::Op::Conv { shape, .. } if shape.padding == Padding::Valid && shape.h == 32)
    );
    assert_eq!(net.shape(net.output), [4, 14, 14]);
    let x = &random_inputs(3, 1, 784)[0];
    let (a, b) = (nn::run_float(&net, x), tract_run(&bytes, &[1, 28, 28], x));
    for (u, v) in a.iter().zip(&b) {
        assert!((u - v).abs() < 1e-4, "{u} vs {v}");
    }
}

#[test]
fn pad_rules() {
    // ONNX Pad: mode reflect/wrap and the axes input are reported in pass 1
    type Edit = Box<dyn Fn(&mut Mb)>;
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "reflect",
            Box::new(|m: &mut Mb| m.nodes[0].attribute = vec![a_str("mode", "reflect")]),
            "Pad",
            "mode",
        ),
        (
            "axes",
            Box::new(|m: &mut Mb| {
                m.nodes[0]
                    .input
                    .extend(["".to_string(), "axes".to_string()]);
                m.inits.push(i64_tensor("axes", &[2], &[2, 3]));
            }),
            "Pad",
            "axes",
        ),
        (
            "maxpool pad ≥ k",
            Box::new(|m: &mut Mb| m.max_pool("mp", "p", "out", 2, 2, 2)),
            "MaxPool",
            "pads",
        ),
    ];
    for (what, edit, op, attr) in cases {
        let mut m = Mb::new(5);
        m.zero_pad("pad", "input", "p", [1, 1, 1, 1]);
        edit(&mut m);
        let bytes = m.finish("input", &[1, 6, 6], "p", &[1, 8, 8], 17);
        match import_bytes(&bytes) {
            Err(NnError::Unsupported(list)) => {
                assert_eq!(list.len(), 1, "{what}: {list:?}");
                assert_eq!(
                    (list[0].op.as_str(), list[0].attribute.as_deref()),
                    (op, Some(attr)),
                    "{what}"
                );
            }
            other => panic!("{what}: expected Unsupported, got {other:?}"),
        }
    }
    // a non-zero constant, padding the channel axis, cropping: BadAttribute at import
    let cases: Vec<(&str, Vec<i64>, Option<f32>, &str)> = vec![
        (
            "value",
            vec![0, 0, 1, 1, 0, 0, 1, 1],
            Some(1.0),
            "constant_value",
        ),
        ("channel", vec![0, 1, 1, 1, 0, 0, 1, 1], None, "pads"),
        ("crop", vec![0, 0, -1, 0, 0, 0, 0, 0], None, "pads"),
        ("rank", vec![1, 1, 1, 1], None, "pads"),
    ];
    for (what, pads, value, attr) in cases {
        let mut m = Mb::new(6);
        let mut ins = vec!["input".to_string(), "pads".to_string()];
        m.inits.push(i64_tensor("pads", &[pads.len()], &pads));
        if let Some(v) = value {
            m.inits.push(f32_tensor("value", &[], &[v]));
            ins.push("value".into());
        }
        let ins: Vec<&str> = ins.iter().map(String::as_str).collect();
        m.node("Pad", "/pad/Pad", &ins, &["p"], vec![]);
        let bytes = m.finish("input", &[1, 6, 6], "p", &[1, 8, 8], 17);
        match import_bytes(&bytes) {
            Err(NnError::BadAttribute {
                node,
                op,
                attribute,
                ..
            }) => assert_eq!(
                (node.as_str(), op.as_str(), attribute.as_str()),
                ("/pad/Pad", "Pad", attr),
                "{what}"
            ),
            other => panic!("{what}: expected BadAttribute, got {other:?}"),
        }
    }
    // an explicit zero constant is fine
    let mut m = Mb::new(7);
    m.inits
        .push(i64_tensor("pads", &[8], &[0, 0, 1, 0, 0, 0, 0, 2]));
    m.inits.push(f32_tensor("value", &[], &[0.0]));
    m.node(
        "Pad",
        "/pad/Pad",
        &["input", "pads", "value"],
        &["p"],
        vec![],
    );
    let net = import_bytes(&m.finish("input", &[1, 6, 6], "p", &[1, 7, 8], 17)).unwrap();
    assert_eq!(net.shape(net.output), [1, 7, 8]);
}

#[test]
fn batchnorm_without_conv() {
    let mut m = Mb::new(4);
    m.bn("bn0", "input", "b", 1);
    m.conv("conv", "b", "c", 1, 2, 3, 1, 1, true);
    let bytes = m.finish("input", &[1, 8, 8], "c", &[2, 8, 8], 13);
    assert!(
        matches!(import_bytes(&bytes), Err(NnError::BatchNormNotFoldable { node, .. }) if node == "/bn0/BatchNormalization")
    );
    // a conv output with two consumers cannot absorb the BN either
    let mut m = Mb::new(4);
    m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
    m.bn("bn", "c", "b", 2);
    m.node("Add", "/Add", &["b", "c"], &["out"], vec![]);
    let bytes = m.finish("input", &[1, 8, 8], "out", &[2, 8, 8], 13);
    assert!(matches!(
        import_bytes(&bytes),
        Err(NnError::BatchNormNotFoldable { .. })
    ));
}

#[test]
fn average_pool_then_square_keeps_the_divisor() {
    // area 9 into Square: the divisor 9 becomes 81, taken out when dequantising
    let mut m = Mb::new(5);
    m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
    m.node(
        "AveragePool",
        "/pool/AveragePool",
        &["c"],
        &["ap"],
        vec![a_ints("kernel_shape", &[3, 3]), a_ints("strides", &[3, 3])],
    );
    m.node("Mul", "/Mul", &["ap", "ap"], &["sq"], vec![]);
    let bytes = m.finish("input", &[1, 9, 9], "sq", &[2, 3, 3], 13);
    let net = import_bytes(&bytes).unwrap();
    let prog = lower(&net, 10, 1_099_511_480_321).unwrap();
    assert_eq!(prog.tensors[prog.output].divisor, 81);
    for x in random_inputs(2, 3, 81) {
        let want = nn::run_float(&net, &x);
        let got = nn::dequantise(
            &prog,
            &nn::run_fixed(&prog, &nn::quantise_input(&prog, &x)).unwrap(),
        );
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 0.01, "{a} vs {b}");
        }
        assert!((tract_run(&bytes, &[1, 9, 9], &x)[0] - want[0]).abs() < 1e-4);
    }
}

#[test]
fn graph_errors() {
    assert!(matches!(
        import_bytes(b"\xff\xff\xff"),
        Err(NnError::Decode(_))
    ));
    // Gemm on an unflattened image
    let mut m = Mb::new(7);
    m.gemm("fc", "input", "out", 64, 10);
    let bytes = m.finish("input", &[1, 8, 8], "out", &[10], 13);
    assert!(matches!(import_bytes(&bytes), Err(NnError::Shape { op, .. }) if op == "Gemm"));
    // bad plan parameters
    let mut m = Mb::new(8);
    m.gemm("fc", "input", "out", 4, 2);
    let net = import_bytes(&m.finish("input", &[4], "out", &[2], 13)).unwrap();
    assert!(matches!(
        choose_fixed_point(&net, &[], &FixedPointOptions::default()),
        Err(NnError::FixedPointSearch(_))
    ));
    assert!(matches!(
        choose_fixed_point(&net, &[vec![0.5; 4]], &FixedPointOptions::with(&[], 6, 12)),
        Err(NnError::FixedPointSearch(_))
    ));
    assert!(matches!(
        nn::run_fixed(&lower(&net, 8, 1_032_193).unwrap(), &[1, 2]),
        Err(NnError::Length { .. })
    ));
}
