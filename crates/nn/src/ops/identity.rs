//! Ops that pass a value on: `Identity` and `Dropout` (inference) are removed; `Cast` of
//! an activation to a float type is removed, of a constant converts it. In the output
//! head they copy or convert ([`HeadOp::Identity`], [`HeadOp::Cast`]).

use tract_onnx::pb::{attribute_proto::AttributeType, tensor_proto::DataType};

use crate::error::NnError;
use crate::head::{CastTo, HeadOp};
use crate::tensor_proto::Const;

use super::{Graph, OnnxNode, OpDef};

pub(crate) const IDENTITY: OpDef = OpDef::new("Identity")
    .import(import_identity)
    .head(head_identity);

pub(crate) const DROPOUT: OpDef = OpDef::new("Dropout")
    .import(import_identity)
    .head(head_identity);

pub(crate) const CAST: OpDef = OpDef::new("Cast")
    .attributes(&[("to", AttributeType::Int)])
    .import(import_cast)
    .head(head_cast);

fn import_identity(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    if let Some(c) = g.constant(n.input(0)?)? {
        g.set_constant(n, c)
    } else {
        let t = g.act(n, 0)?;
        g.alias(n.output()?, t);
        Ok(())
    }
}

fn head_identity(_: &mut Graph, _: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    Ok((HeadOp::Identity, 1))
}

fn import_cast(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let to = n.int("to", 0);
    let float = matches!(
        DataType::from_i32(to as i32),
        Some(DataType::Float | DataType::Double | DataType::Float16)
    );
    if let Some(c) = g.constant(n.input(0)?)? {
        let c = match (c, float) {
            (Const::I64(v), true) => Const::F32 {
                dims: vec![v.len()],
                data: v.iter().map(|&x| x as f32).collect(),
            },
            (Const::F32 { data, .. }, false) => {
                Const::I64(data.iter().map(|&x| x.trunc() as i64).collect())
            }
            (c, _) => c,
        };
        g.set_constant(n, c)
    } else if float {
        let t = g.act(n, 0)?;
        g.alias(n.output()?, t);
        Ok(())
    } else {
        Err(n.bad_attribute(
            "to",
            format!(
                "{to}: a private activation can only be cast to a float type (integer casts belong in the output head)"
            ),
        ))
    }
}

fn head_cast(_: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    let to = n.int("to", 0);
    let to = match DataType::from_i32(to as i32) {
        Some(DataType::Float | DataType::Double | DataType::Float16) => CastTo::Float,
        Some(DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8) => CastTo::Int,
        _ => {
            return Err(n.bad_attribute(
                "to",
                format!("{to}: a head casts only to float or integer types"),
            ))
        }
    };
    Ok((HeadOp::Cast { to }, 1))
}
