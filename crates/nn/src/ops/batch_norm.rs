//! `BatchNormalization` (inference mode) folded into the preceding Conv/Linear:
//! `w' = w·γ/√(var+ε)`, `b' = (b−mean)·γ/√(var+ε) + β`; a BN whose input is not a
//! Conv/Linear output read only by it is [`NnError::BatchNormNotFoldable`].

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;

use super::{check_int_is, Finding, Graph, OnnxNode, OpDef};

pub(crate) const BATCH_NORMALIZATION: OpDef = OpDef::new("BatchNormalization")
    .attributes(&[
        ("training_mode", AttributeType::Int),
        ("epsilon", AttributeType::Float),
    ])
    .check(check)
    .import(import);

fn check(n: &OnnxNode, out: &mut Vec<Finding>) {
    check_int_is(n, "training_mode", 0, 0, out);
    if n.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
        out.push(Finding {
            attribute: None,
            reason: "running mean/var outputs (training mode) are not supported".into(),
        });
    }
}

fn import(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    let mut p = Vec::new();
    for i in 1..5 {
        p.push(g.weight(n, i)?.1);
    }
    let eps = n.float("epsilon").unwrap_or(1e-5) as f64;
    g.fold_bn(&n.name, n.input(0)?, t, &p[0], &p[1], &p[2], &p[3], eps)?;
    g.alias(n.output()?, t);
    Ok(())
}
