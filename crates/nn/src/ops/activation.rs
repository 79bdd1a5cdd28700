//! `Relu` → [`Op::Relu`]; `Clip` with constant bounds (inputs from opset 11, attributes
//! before) → [`Op::Clip`] (ReLU6 is `Clip(0, 6)`), or `Relu` for `Clip(0, ∞)`.

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::ir::Op;
use crate::tensor_proto::Const;

use super::{Graph, OnnxNode, OpDef};

pub(crate) const RELU: OpDef = OpDef::new("Relu").import(import_relu);

pub(crate) const CLIP: OpDef = OpDef::new("Clip")
    .attributes(&[("min", AttributeType::Float), ("max", AttributeType::Float)])
    .import(import_clip);

fn import_relu(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    g.emit(n, Op::Relu, vec![t])
}

fn import_clip(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    let bound = |g: &mut Graph, i: usize, attr_name: &str| -> Result<Option<f32>, NnError> {
        if n.has_input(i) {
            let nm = n.input(i)?;
            match g.constant(nm)? {
                Some(Const::F32 { data, .. }) if data.len() == 1 => Ok(Some(data[0])),
                _ => Err(n.bad_attribute(
                    attr_name,
                    format!(
                        "input {nm} must be a constant scalar (a Clip with computed bounds is not supported)"
                    ),
                )),
            }
        } else {
            Ok(n.float(attr_name))
        }
    };
    let lo = bound(g, 1, "min")?;
    let hi = bound(g, 2, "max")?.filter(|h| h.is_finite());
    let lo = lo.filter(|l| l.is_finite()).ok_or_else(|| {
        n.bad_attribute(
            "min",
            "a Clip without a finite lower bound is not supported".into(),
        )
    })?;
    let op = if lo == 0.0 && hi.is_none() {
        Op::Relu
    } else {
        Op::Clip { min: lo, max: hi }
    };
    g.emit(n, op, vec![t])
}
