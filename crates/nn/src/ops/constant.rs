//! Shape arithmetic on constants, as torch emits it for `x.view(x.size(0), -1)`:
//! `Constant`, `Shape` (of an activation, batch taken as 1), `Gather` and `Concat` (axis 0
//! on shape vectors) are computed at import. `Concat` of head values is the head's
//! [`HeadOp::Concat`].

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::head::HeadOp;
use crate::tensor_proto::{load_tensor, Const};

use super::{Finding, Graph, OnnxNode, OpDef};

pub(crate) const CONSTANT: OpDef = OpDef::new("Constant")
    .attributes(&[
        ("value", AttributeType::Tensor),
        ("value_float", AttributeType::Float),
        ("value_floats", AttributeType::Floats),
        ("value_int", AttributeType::Int),
        ("value_ints", AttributeType::Ints),
    ])
    .import(import_constant);

pub(crate) const SHAPE: OpDef = OpDef::new("Shape")
    .attributes(&[("start", AttributeType::Int), ("end", AttributeType::Int)])
    .import(import_shape);

pub(crate) const GATHER: OpDef = OpDef::new("Gather")
    .attributes(&[("axis", AttributeType::Int)])
    .check(check_axis_0)
    .import(import_gather);

pub(crate) const CONCAT: OpDef = OpDef::new("Concat")
    .attributes(&[("axis", AttributeType::Int)])
    .check(check_axis_0)
    .import(import_concat)
    .head(head_concat);

fn check_axis_0(n: &OnnxNode, out: &mut Vec<Finding>) {
    let a = n.int("axis", 0);
    if a != 0 {
        out.push(Finding {
            attribute: Some("axis"),
            reason: format!("{a}: only 0 on shape vectors is supported"),
        });
    }
}

fn import_constant(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let a = n
        .proto
        .attribute
        .first()
        .ok_or_else(|| n.graph_error("Constant without a value attribute".into()))?;
    let c = match a.name.as_str() {
        "value" => load_tensor(
            a.t.as_ref()
                .ok_or_else(|| n.graph_error("value attribute holds no tensor".into()))?,
            n.output()?,
        )?,
        "value_float" => Const::F32 {
            dims: vec![],
            data: vec![a.f],
        },
        "value_floats" => Const::F32 {
            dims: vec![a.floats.len()],
            data: a.floats.clone(),
        },
        "value_int" => Const::I64(vec![a.i]),
        "value_ints" => Const::I64(a.ints.clone()),
        other => {
            return Err(n.bad_attribute(
                other,
                "only value, value_float(s), value_int(s) are supported".into(),
            ))
        }
    };
    g.set_constant(n, c)
}

fn import_shape(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    let mut full: Vec<i64> = vec![1];
    full.extend(g.net.shape(t).iter().map(|&d| d as i64));
    let r = full.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let s = clamp(n.int("start", 0));
    let e = clamp(n.int("end", r));
    let v = if s < e { full[s..e].to_vec() } else { vec![] };
    g.set_constant(n, Const::I64(v))
}

fn import_gather(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let data = g.ints(n, 0)?;
    let idx = g.ints(n, 1)?;
    let r = data.len() as i64;
    let v = idx
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + r } else { i };
            usize::try_from(j)
                .ok()
                .and_then(|j| data.get(j).copied())
                .ok_or_else(|| n.graph_error(format!("index {i} out of range for {data:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    g.set_constant(n, Const::I64(v))
}

fn import_concat(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let mut v = Vec::new();
    for i in 0..n.proto.input.len() {
        v.extend(g.ints(n, i)?);
    }
    g.set_constant(n, Const::I64(v))
}

fn head_concat(_: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    Ok((
        HeadOp::Concat {
            axis: n.int("axis", 0),
        },
        n.proto.input.len(),
    ))
}
