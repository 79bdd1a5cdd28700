//! Ops that relabel a shape. Private: `Flatten` (`axis = 1`) → [`Op::Flatten`];
//! `Reshape` to a shape that keeps the batch (`-1`, `0`, `1` or the batch size in front),
//! `Squeeze`, `Unsqueeze` of an activation and a `Transpose` that moves only size-1 axes
//! → the same tensor, [`Op::Flatten`] or [`Op::Reshape`] (see [`Graph::reshape_to`]);
//! `Unsqueeze` of a constant is shape arithmetic. In the output head: ONNX's own
//! semantics ([`HeadOp::Reshape`], [`HeadOp::Flatten`], …).

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::head::HeadOp;
use crate::ir::Op;
use crate::tensor_proto::Const;

use super::{check_int_is, Finding, Graph, OnnxNode, OpDef};

pub(crate) const FLATTEN: OpDef = OpDef::new("Flatten")
    .attributes(&[("axis", AttributeType::Int)])
    .check(check_flatten)
    .import(import_flatten)
    .head(head_flatten);

pub(crate) const RESHAPE: OpDef = OpDef::new("Reshape")
    .attributes(&[
        ("allowzero", AttributeType::Int),
        ("shape", AttributeType::Ints),
    ])
    .import(import_reshape)
    .head(head_reshape);

pub(crate) const SQUEEZE: OpDef = OpDef::new("Squeeze")
    .attributes(&[("axes", AttributeType::Ints)])
    .import(import_squeeze_or_transpose)
    .head(head_squeeze);

pub(crate) const UNSQUEEZE: OpDef = OpDef::new("Unsqueeze")
    .attributes(&[("axes", AttributeType::Ints)])
    .import(import_unsqueeze)
    .head(head_unsqueeze);

pub(crate) const TRANSPOSE: OpDef = OpDef::new("Transpose")
    .attributes(&[("perm", AttributeType::Ints)])
    .import(import_squeeze_or_transpose);

fn check_flatten(n: &OnnxNode, out: &mut Vec<Finding>) {
    check_int_is(n, "axis", 1, 1, out);
}

fn import_flatten(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    if g.net.shape(t).len() == 1 {
        g.bind(n.output()?, t);
        Ok(())
    } else {
        g.emit(n, Op::Flatten, vec![t])
    }
}

fn import_reshape(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    let target = g.ints(n, 1)?;
    let cur = g.net.shape(t).to_vec();
    let mut full = vec![1usize];
    full.extend(&cur);
    let numel: usize = full.iter().product();
    let allowzero = n.int("allowzero", 0) != 0;
    let mut dims: Vec<Option<usize>> = Vec::new();
    for (i, &d) in target.iter().enumerate() {
        dims.push(match d {
            -1 => None,
            0 if !allowzero => Some(*full.get(i).ok_or_else(|| {
                n.graph_error(format!("shape {target:?}: 0 at {i} has no input dim"))
            })?),
            d if d >= 0 => Some(d as usize),
            _ => {
                return Err(n.graph_error(format!("shape {target:?}: invalid value {d}")));
            }
        });
    }
    let known = dims
        .iter()
        .flatten()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| n.graph_error(format!("shape {target:?} overflows")))?;
    let unknown = dims.iter().filter(|d| d.is_none()).count();
    let resolved: Vec<usize> = match unknown {
        0 => dims.iter().flatten().copied().collect(),
        1 if known > 0 && numel.is_multiple_of(known) => {
            dims.iter().map(|d| d.unwrap_or(numel / known)).collect()
        }
        _ => {
            return Err(n.graph_error(format!(
                "shape {target:?} cannot be resolved for input {full:?}"
            )))
        }
    };
    let total = resolved.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if total != Some(numel) || resolved.first() != Some(&1) {
        return Err(n.graph_error(format!(
            "shape {target:?} does not keep the batch dimension of input {full:?}"
        )));
    }
    g.reshape_to(&n.name, n.op(), n.output()?, t, &resolved)
}

fn import_squeeze_or_transpose(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    let mut full = vec![1usize];
    full.extend(g.net.shape(t));
    let new: Vec<usize> = if n.op() == "Squeeze" {
        let axes = g.ints_input_or_attribute(n, 1, "axes")?;
        let r = full.len() as i64;
        match axes {
            None => std::iter::once(1)
                .chain(full[1..].iter().copied().filter(|&d| d != 1))
                .collect(),
            Some(axes) => {
                let norm: Vec<usize> = axes
                    .iter()
                    .map(|&a| if a < 0 { a + r } else { a })
                    .filter(|&a| (0..r).contains(&a))
                    .map(|a| a as usize)
                    .collect();
                if norm.len() != axes.len()
                    || norm.contains(&0)
                    || norm.iter().any(|&a| full[a] != 1)
                {
                    return Err(n.bad_attribute(
                        "axes",
                        format!("{axes:?}: only size-1 axes other than the batch can be squeezed from {full:?}"),
                    ));
                }
                full.iter()
                    .enumerate()
                    .filter(|(i, _)| !norm.contains(i))
                    .map(|(_, &d)| d)
                    .collect()
            }
        }
    } else {
        let perm = n
            .ints("perm")
            .unwrap_or_else(|| (0..full.len() as i64).rev().collect());
        let ok_perm =
            perm.len() == full.len() && perm.iter().all(|&p| (0..full.len() as i64).contains(&p));
        let moved: Vec<usize> = if ok_perm {
            perm.iter().map(|&p| p as usize).collect()
        } else {
            vec![]
        };
        // a transpose is a reshape when the axes of size > 1 keep their order
        let big = |order: &[usize]| -> Vec<usize> {
            order.iter().copied().filter(|&a| full[a] != 1).collect()
        };
        let identity_order: Vec<usize> = (0..full.len()).collect();
        if !ok_perm || big(&moved) != big(&identity_order) {
            return Err(n.bad_attribute(
                "perm",
                format!(
                    "{perm:?} on {full:?} moves data; only transposes that keep the data order (moving size-1 axes) are supported"
                ),
            ));
        }
        moved.iter().map(|&a| full[a]).collect()
    };
    g.reshape_to(&n.name, n.op(), n.output()?, t, &new)
}

fn import_unsqueeze(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    if !g.is_act(n, 0) {
        // shape arithmetic on a constant
        let v = g.ints(n, 0)?;
        return g.set_constant(n, Const::I64(v));
    }
    let t = g.act(n, 0)?;
    let axes = g.ints_input_or_attribute(n, 1, "axes")?.unwrap_or_default();
    let mut full = vec![1usize];
    full.extend(g.net.shape(t));
    let r = (full.len() + axes.len()) as i64;
    let mut at: Vec<usize> = axes
        .iter()
        .map(|&a| if a < 0 { a + r } else { a })
        .filter(|&a| (1..r).contains(&a))
        .map(|a| a as usize)
        .collect();
    at.sort_unstable();
    at.dedup();
    if at.len() != axes.len() {
        return Err(n.bad_attribute(
            "axes",
            format!("{axes:?} on {full:?}: distinct axes after the batch are needed"),
        ));
    }
    let mut src = full.iter();
    let new: Vec<usize> = (0..r as usize)
        .map(|i| {
            if at.contains(&i) {
                1
            } else {
                *src.next().unwrap_or(&1)
            }
        })
        .collect();
    g.reshape_to(&n.name, n.op(), n.output()?, t, &new)
}

/// Integer parameters of a head node given as input `i` or as attribute `attr_name`.
fn head_ints(
    g: &mut Graph,
    n: &OnnxNode,
    i: usize,
    attr_name: &str,
) -> Result<Option<Vec<i64>>, NnError> {
    if !n.has_input(i) {
        return Ok(n.ints(attr_name));
    }
    let nm = n.input(i)?;
    match g.constant(nm)? {
        Some(Const::I64(v)) => Ok(Some(v)),
        _ => Err(n.bad_attribute(
            attr_name,
            format!("input {nm} must be a constant integer tensor"),
        )),
    }
}

fn head_flatten(_: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    Ok((
        HeadOp::Flatten {
            axis: n.int("axis", 1),
        },
        1,
    ))
}

fn head_reshape(g: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    let shape = head_ints(g, n, 1, "shape")?
        .ok_or_else(|| n.graph_error("Reshape without a shape".into()))?;
    Ok((
        HeadOp::Reshape {
            shape,
            allowzero: n.int("allowzero", 0) != 0,
        },
        1,
    ))
}

fn head_squeeze(g: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    Ok((
        HeadOp::Squeeze {
            axes: head_ints(g, n, 1, "axes")?,
        },
        1,
    ))
}

fn head_unsqueeze(g: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    let axes = head_ints(g, n, 1, "axes")?
        .ok_or_else(|| n.graph_error("Unsqueeze without axes".into()))?;
    Ok((HeadOp::Unsqueeze { axes }, 1))
}
