//! `Gemm` (`transA = 0`, any `transB`, `alpha`, `beta`) and `MatMul` with a constant right
//! operand → a float [`Op::Linear`] (`y = W·x + b`, `W` rows×cols); a following `Add` of
//! a constant becomes its bias (see [`super::arith`]).

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::ir::Op;

use super::{check_int_is, Finding, Graph, OnnxNode, OpDef};

pub(crate) const GEMM: OpDef = OpDef::new("Gemm")
    .attributes(&[
        ("transA", AttributeType::Int),
        ("transB", AttributeType::Int),
        ("alpha", AttributeType::Float),
        ("beta", AttributeType::Float),
    ])
    .check(check_gemm)
    .import(import);

pub(crate) const MATMUL: OpDef = OpDef::new("MatMul").import(import);

fn check_gemm(n: &OnnxNode, out: &mut Vec<Finding>) {
    check_int_is(n, "transA", 0, 0, out);
}

fn import(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let gemm = n.op() == "Gemm";
    let t = g.act(n, 0)?;
    let xs = g.net.shape(t).to_vec();
    if xs.len() != 1 {
        return Err(n.shape_error(
            "input A (flat [batch, N]; insert Flatten)".into(),
            vec![xs.iter().product()],
            xs,
        ));
    }
    let cols = xs[0];
    let (bd, bv) = g.weight(n, 1)?;
    let trans_b = gemm && n.int("transB", 0) != 0;
    let [d0, d1] = bd[..] else {
        return Err(n.graph_error(format!(
            "weight {} has dims {bd:?}, 2-D expected",
            n.input(1)?
        )));
    };
    let (rows, bc) = if trans_b { (d0, d1) } else { (d1, d0) };
    if bc != cols {
        return Err(n.shape_error(
            format!("weight {} (inner dimension)", n.input(1)?),
            if trans_b {
                vec![rows, cols]
            } else {
                vec![cols, rows]
            },
            bd,
        ));
    }
    let (alpha, beta) = if gemm {
        (
            n.float("alpha").unwrap_or(1.0),
            n.float("beta").unwrap_or(1.0),
        )
    } else {
        (1.0, 1.0)
    };
    let mut wt = vec![0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            wt[r * cols + c] = alpha
                * if trans_b {
                    bv[r * cols + c]
                } else {
                    bv[c * rows + r]
                };
        }
    }
    let bias = if gemm && n.has_input(2) {
        let (_, cv) = g.weight(n, 2)?;
        let b: Vec<f32> = match cv.len() {
            1 => vec![cv[0] * beta; rows],
            l if l == rows => cv.iter().map(|v| v * beta).collect(),
            l => {
                return Err(n.graph_error(format!(
                    "bias {} has {l} values, expected {rows} or 1",
                    n.input(2)?
                )))
            }
        };
        Some(b)
    } else {
        None
    };
    g.emit(
        n,
        Op::Linear {
            rows,
            cols,
            weight: wt,
            bias,
        },
        vec![t],
    )
}
