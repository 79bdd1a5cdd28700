//! Pooling: `MaxPool`/`AveragePool` (square window, equal strides, `ceil_mode = 0`, no
//! `Indices` output; `AveragePool` with zero pads only) → [`Op::MaxPool`]/[`Op::AvgPool`].
//! A `MaxPool` with pads (each `< k`, so every window holds a real element) becomes an
//! edge [`Op::Pad`] (node `{pool}/pad`) and an unpadded `MaxPool`: padded positions take
//! no part in the max, as in ONNX and PyTorch. `GlobalAveragePool` and `ReduceMean` over
//! the spatial axes `[2, 3]` (`x.mean([2, 3])`, the dynamo exporter's adaptive average
//! pooling; `keepdims` 0 or 1) → [`Op::GlobalAvgPool`] (+ `Flatten`). `GlobalMaxPool`
//! of a square `C×H×H` tensor → one `H×H` [`Op::MaxPool`] window.

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::ir::{Op, PadMode};

use super::{
    check_auto_pad, check_equal_2d, check_int_is, check_no_dilation, Finding, Graph, OnnxNode,
    OpDef,
};

const WINDOW_ATTRIBUTES: &[(&str, AttributeType)] = &[
    ("kernel_shape", AttributeType::Ints),
    ("strides", AttributeType::Ints),
    ("pads", AttributeType::Ints),
    ("dilations", AttributeType::Ints),
    ("ceil_mode", AttributeType::Int),
    ("auto_pad", AttributeType::String),
];

pub(crate) const MAX_POOL: OpDef = OpDef::new("MaxPool")
    .attributes(WINDOW_ATTRIBUTES)
    .check(check_window)
    .import(import_window);

pub(crate) const AVERAGE_POOL: OpDef = OpDef::new("AveragePool")
    .attributes(WINDOW_ATTRIBUTES)
    .check(check_window)
    .import(import_window);

pub(crate) const GLOBAL_AVERAGE_POOL: OpDef = OpDef::new("GlobalAveragePool").import(import_global);

pub(crate) const GLOBAL_MAX_POOL: OpDef = OpDef::new("GlobalMaxPool").import(import_global_max);

pub(crate) const REDUCE_MEAN: OpDef = OpDef::new("ReduceMean")
    .attributes(&[
        ("axes", AttributeType::Ints),
        ("keepdims", AttributeType::Int),
    ])
    .import(import_reduce_mean);

fn check_window(n: &OnnxNode, out: &mut Vec<Finding>) {
    let max = n.op() == "MaxPool";
    let k = match n.ints("kernel_shape") {
        Some(k) if k.len() == 2 && k[0] == k[1] && k[0] >= 1 => k[0],
        k => {
            out.push(Finding {
                attribute: Some("kernel_shape"),
                reason: format!("{k:?}: only square 2-D windows are supported"),
            });
            1
        }
    };
    check_equal_2d(n, "strides", out);
    if let Some(p) = n.ints("pads") {
        if !max {
            if p.iter().any(|&v| v != 0) {
                out.push(Finding {
                    attribute: Some("pads"),
                    reason: format!("{p:?}: only zero padding is supported"),
                });
            }
        } else if p.len() != 4 || p.iter().any(|&v| v < 0 || v >= k) {
            out.push(Finding {
                attribute: Some("pads"),
                reason: format!(
                    "{p:?}: expected 4 values in 0..{k} (a window must hold a real element)"
                ),
            });
        }
    }
    check_no_dilation(n, out);
    check_int_is(n, "ceil_mode", 0, 0, out);
    check_auto_pad(n, out);
    if max && n.proto.output.len() > 1 && !n.proto.output[1].is_empty() {
        out.push(Finding {
            attribute: None,
            reason: "the Indices output is not supported".into(),
        });
    }
}

fn import_window(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let max = n.op() == "MaxPool";
    let mut t = g.act(n, 0)?;
    let pads = n.ints("pads").unwrap_or_default();
    if max && pads.iter().any(|&p| p != 0) {
        let [pt, pl, pb, pr] = pads[..] else {
            return Err(n.graph_error(format!("pads {pads:?}: 4 values expected")));
        };
        let pads = [pt as usize, pl as usize, pb as usize, pr as usize];
        t = g.pad(&n.name, t, pads, PadMode::Edge)?;
    }
    let k = n.first_int("kernel_shape", 1);
    let stride = n.first_int("strides", 1);
    let op = if max {
        Op::MaxPool { k, stride }
    } else {
        Op::AvgPool { k, stride }
    };
    g.emit(n, op, vec![t])
}

fn import_global(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    g.emit(n, Op::GlobalAvgPool, vec![t])
}

/// The max over each channel of a square `C×H×H` tensor: one `H×H` window.
fn import_global_max(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    let shape = g.net.shape(t).to_vec();
    let [_, h, w] = shape[..] else {
        return Err(n.shape_error("input X (C×H×W without batch)".into(), vec![0, 0, 0], shape));
    };
    if h != w {
        return Err(n.graph_error(format!("a {h}×{w} input: only square inputs are supported")));
    }
    g.emit(n, Op::MaxPool { k: h, stride: h }, vec![t])
}

fn import_reduce_mean(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    // x.mean([2, 3]) / AdaptiveAvgPool2d(1) as the dynamo exporter writes it: the mean
    // over the spatial axes of a [batch, C, H, W] tensor
    let t = g.act(n, 0)?;
    let rank = 1 + g.net.shape(t).len() as i64;
    let axes = g.ints_input_or_attribute(n, 1, "axes")?.unwrap_or_default();
    let mut norm: Vec<i64> = axes
        .iter()
        .map(|&a| if a < 0 { a + rank } else { a })
        .collect();
    norm.sort_unstable();
    if rank != 4 || norm != [2, 3] {
        return Err(n.bad_attribute(
            "axes",
            format!(
                "{axes:?} on a rank-{rank} tensor: only the mean over the spatial axes [2, 3] of a [batch, C, H, W] tensor (global average pooling) is supported"
            ),
        ));
    }
    if n.int("keepdims", 1) != 0 {
        g.emit(n, Op::GlobalAvgPool, vec![t])
    } else {
        let output = n.output()?;
        let pooled = g.net.push(
            &n.name,
            &format!("{output}/keepdims"),
            Op::GlobalAvgPool,
            vec![t],
        )?;
        let o = g.net.push(
            &format!("{}/squeeze", n.name),
            output,
            Op::Flatten,
            vec![pooled],
        )?;
        g.bind(output, o);
        Ok(())
    }
}
