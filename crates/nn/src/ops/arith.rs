//! Elementwise arithmetic. Private: `Add` of two activations → [`Op::Add`]; `Mul(x, x)`
//! and `Pow(x, 2)` → [`Op::Square`]; `Add`, `Sub`, `Mul`, `Div` with one constant operand
//! and skl2onnx's `Scaler` → the network's input normalisation (on the raw input) or a
//! fold into the weights and bias of the Conv/Linear that produces the activation (see
//! [`Graph::affine`], [`Graph::fold_bias`]). In the output head: ONNX's broadcasting
//! arithmetic on any head values ([`HeadOp::Arith`]).

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::head::{Arith, HeadOp};
use crate::ir::Op;
use crate::tensor_proto::Const;

use super::{Graph, OnnxNode, OpDef, ML_DOMAIN};

pub(crate) const ADD: OpDef = OpDef::new("Add").import(import_add).head(head);

pub(crate) const SUB: OpDef = OpDef::new("Sub").import(import_affine).head(head);

pub(crate) const MUL: OpDef = OpDef::new("Mul").import(import_mul).head(head);

pub(crate) const DIV: OpDef = OpDef::new("Div").import(import_affine).head(head);

pub(crate) const POW: OpDef = OpDef::new("Pow").import(import_square);

/// skl2onnx's `Scaler`: `(x − offset)·scale`.
pub(crate) const SCALER: OpDef = OpDef::new("Scaler")
    .domain(ML_DOMAIN)
    .attributes(&[
        ("offset", AttributeType::Floats),
        ("scale", AttributeType::Floats),
    ])
    .import(import_affine);

fn head(_: &mut Graph, n: &OnnxNode) -> Result<(HeadOp, usize), NnError> {
    let op = match n.op() {
        "Add" => Arith::Add,
        "Sub" => Arith::Sub,
        "Mul" => Arith::Mul,
        _ => Arith::Div,
    };
    Ok((HeadOp::Arith { op }, 2))
}

fn import_add(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let (c0, c1) = (g.is_const(n, 0), g.is_const(n, 1));
    match (c0, c1) {
        (false, false) => {
            let a = g.act(n, 0)?;
            let b = g.act(n, 1)?;
            g.emit(n, Op::Add, vec![a, b])
        }
        (true, true) => Err(n.graph_error("Add of two constants is not supported".into())),
        _ => {
            let ai = if c0 { 1 } else { 0 };
            let t = g.act(n, ai)?;
            if g.input_stage(t) {
                let (dims, c) = g.float_const(n, 1 - ai)?;
                let ones = vec![1.0; c.len()];
                g.affine(&n.name, n.op(), n.output()?, t, &dims, &ones, &c)
            } else {
                let (_, bv) = g.weight(n, 1 - ai)?;
                g.fold_bias(&n.name, n.op(), t, &bv)?;
                g.alias(n.output()?, t);
                Ok(())
            }
        }
    }
}

/// `Sub`, `Div` and `Scaler`: a constant offset or divisor, the input's normalisation or
/// folded into the Conv/Linear that produces the activation.
fn import_affine(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let op = n.op();
    let (ai, c_dims, c) = if op == "Scaler" {
        let offset = n.floats("offset").unwrap_or_default();
        let scale = n.floats("scale").unwrap_or_default();
        (0, vec![offset.len()], [offset, scale].concat())
    } else if g.is_const(n, 1) && !g.is_const(n, 0) {
        let (d, c) = g.float_const(n, 1)?;
        (0, d, c)
    } else if g.is_const(n, 0) && !g.is_const(n, 1) && op == "Sub" {
        let (d, c) = g.float_const(n, 0)?;
        (1, d, c)
    } else {
        return Err(n.graph_error(format!(
            "{op} is supported with one constant operand (x − c, c − x on the input, x / c)"
        )));
    };
    let t = g.act(n, ai)?;
    let (mul, add): (Vec<f32>, Vec<f32>) = match (op, ai) {
        ("Scaler", _) => {
            let k = c.len() / 2;
            let (off, sc) = c.split_at(k);
            let sc: Vec<f32> = if sc.len() == 1 {
                vec![sc[0]; k.max(1)]
            } else {
                sc.to_vec()
            };
            let off: Vec<f32> = if off.is_empty() {
                vec![0.0; sc.len()]
            } else {
                off.to_vec()
            };
            (
                sc.clone(),
                off.iter().zip(&sc).map(|(o, s)| -o * s).collect(),
            )
        }
        ("Sub", 0) => (vec![1.0; c.len()], c.iter().map(|v| -v).collect()),
        ("Sub", _) => (vec![-1.0; c.len()], c.clone()),
        _ => (c.iter().map(|v| 1.0 / v).collect(), vec![0.0; c.len()]),
    };
    let dims = if op == "Scaler" {
        vec![mul.len()]
    } else {
        c_dims
    };
    g.affine(&n.name, op, n.output()?, t, &dims, &mul, &add)
}

/// `Mul`: `x·x` is a square; a constant factor is normalisation or a fold.
fn import_mul(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let inputs = &n.proto.input;
    if inputs.len() != 2 || inputs[0] == inputs[1] {
        return import_square(g, n);
    }
    let ci = match (g.is_const(n, 0), g.is_const(n, 1)) {
        (false, true) => 1,
        (true, false) => 0,
        _ => {
            return Err(n.graph_error(
                "Mul of two activations is supported only as x·x (square); Mul by a constant as normalisation or a scale folded into a Conv/Linear".into(),
            ))
        }
    };
    let t = g.act(n, 1 - ci)?;
    let (dims, c) = g.float_const(n, ci)?;
    let zeros = vec![0.0; c.len()];
    g.affine(&n.name, n.op(), n.output()?, t, &dims, &c, &zeros)
}

/// `Mul(x, x)` or `Pow(x, 2)` → [`Op::Square`].
fn import_square(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    if n.op() == "Pow" {
        let nm = n.input(1)?;
        let two = match g.constant(nm)? {
            Some(Const::F32 { data, .. }) => data.len() == 1 && data[0] == 2.0,
            Some(Const::I64(v)) => v == [2],
            None => false,
        };
        if !two {
            return Err(n.bad_attribute(
                &format!("input 1 ({nm})"),
                "only a constant exponent 2 (square) is supported".into(),
            ));
        }
    }
    g.emit(n, Op::Square, vec![t])
}
