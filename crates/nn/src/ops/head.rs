//! Ops only an output head has: what follows the last private tensor (`Softmax`,
//! `LogSoftmax`, `Sigmoid`, `ArgMax`/`ArgMin`, `TopK`, skl2onnx's `ArrayFeatureExtractor`
//! label lookup), computed by the client on its revealed output (see [`crate::head`]).

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::head::HeadOp;

use super::{Graph, OnnxNode, OpDef, ML_DOMAIN};

pub(crate) const SOFTMAX: OpDef = OpDef::new("Softmax")
    .attributes(&[("axis", AttributeType::Int)])
    .head(softmax);

pub(crate) const LOG_SOFTMAX: OpDef = OpDef::new("LogSoftmax")
    .attributes(&[("axis", AttributeType::Int)])
    .head(softmax);

pub(crate) const SIGMOID: OpDef = OpDef::new("Sigmoid").head(sigmoid);

const ARG_EXTREME_ATTRIBUTES: &[(&str, AttributeType)] = &[
    ("axis", AttributeType::Int),
    ("keepdims", AttributeType::Int),
    ("select_last_index", AttributeType::Int),
];

pub(crate) const ARG_MAX: OpDef = OpDef::new("ArgMax")
    .attributes(ARG_EXTREME_ATTRIBUTES)
    .head(arg_extreme);

pub(crate) const ARG_MIN: OpDef = OpDef::new("ArgMin")
    .attributes(ARG_EXTREME_ATTRIBUTES)
    .head(arg_extreme);

pub(crate) const TOP_K: OpDef = OpDef::new("TopK")
    .attributes(&[
        ("axis", AttributeType::Int),
        ("largest", AttributeType::Int),
    ])
    .head(top_k);

pub(crate) const ARRAY_FEATURE_EXTRACTOR: OpDef = OpDef::new("ArrayFeatureExtractor")
    .domain(ML_DOMAIN)
    .head(array_feature_extractor);

/// `Softmax` and `LogSoftmax`: the axis defaults to -1 from opset 13, to 1 (with the
/// 2-D coercion) before.
fn softmax(_: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    let axis = n.int("axis", if n.opset >= 13 { -1 } else { 1 });
    let coerce_2d = n.opset < 13;
    let op = if n.op() == "Softmax" {
        HeadOp::Softmax { axis, coerce_2d }
    } else {
        HeadOp::LogSoftmax { axis, coerce_2d }
    };
    Ok((op, 1))
}

fn sigmoid(_: &mut Graph, _: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    Ok((HeadOp::Sigmoid, 1))
}

fn arg_extreme(_: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    Ok((
        HeadOp::ArgExtreme {
            max: n.op() == "ArgMax",
            axis: n.int("axis", 0),
            keepdims: n.int("keepdims", 1) != 0,
            select_last_index: n.int("select_last_index", 0) != 0,
        },
        1,
    ))
}

fn top_k(_: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    Ok((
        HeadOp::TopK {
            axis: n.int("axis", -1),
            largest: n.int("largest", 1) != 0,
        },
        2,
    ))
}

fn array_feature_extractor(_: &mut Graph, _: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    Ok((HeadOp::ArrayFeatureExtractor, 2))
}
