//! `Pad` (torch's `ZeroPad2d`/`F.pad`) of a `[batch, C, H, W]` activation → [`Op::Pad`]:
//! mode `constant` with value 0 (or none) or `edge`; `pads` (an input from opset 11, an
//! attribute before) a constant with zeros on the batch and channel axes and
//! non-negative spatial pads; no `axes` input.

use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::ir::{Op, PadMode};
use crate::tensor_proto::Const;

use super::{Finding, Graph, OnnxNode, OpDef};

pub(crate) const PAD: OpDef = OpDef::new("Pad")
    .attributes(&[
        ("mode", AttributeType::String),
        ("pads", AttributeType::Ints),
        ("value", AttributeType::Float),
    ])
    .check(check)
    .import(import);

fn check(n: &OnnxNode, out: &mut Vec<Finding>) {
    let mode = n.string("mode").unwrap_or_else(|| "constant".into());
    if mode != "constant" && mode != "edge" {
        out.push(Finding {
            attribute: Some("mode"),
            reason: format!("{mode:?}: only \"constant\" (zero) and \"edge\" are supported"),
        });
    }
    if n.has_input(3) {
        out.push(Finding {
            attribute: Some("axes"),
            reason: "the axes input is not supported (pad all four axes)".into(),
        });
    }
}

fn import(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    let pads = if n.has_input(1) {
        g.ints(n, 1)?
    } else {
        n.ints("pads")
            .ok_or_else(|| n.graph_error("no pads".into()))?
    };
    let zero_value = if n.has_input(2) {
        match g.constant(n.input(2)?)? {
            Some(Const::F32 { data, .. }) => data.iter().all(|&v| v == 0.0),
            Some(Const::I64(v)) => v.iter().all(|&v| v == 0),
            None => false,
        }
    } else {
        n.float("value").unwrap_or(0.0) == 0.0
    };
    let mode = match n.string("mode").as_deref() {
        None | Some("constant") => PadMode::Zero,
        Some("edge") => PadMode::Edge,
        Some(m) => return Err(n.bad_attribute("mode", format!("{m:?} is not supported"))),
    };
    if mode == PadMode::Zero && !zero_value {
        return Err(n.bad_attribute("constant_value", "only zero padding is supported".into()));
    }
    let [0, 0, pt, pl, 0, 0, pb, pr] = pads[..] else {
        return Err(n.bad_attribute(
            "pads",
            format!(
                "{pads:?}: expected [0, 0, top, left, 0, 0, bottom, right] on a [batch, C, H, W] input"
            ),
        ));
    };
    if [pt, pl, pb, pr].iter().any(|&p| p < 0) {
        return Err(n.bad_attribute(
            "pads",
            format!("{pads:?}: negative pads (cropping) are not supported"),
        ));
    }
    g.emit(
        n,
        Op::Pad {
            pads: [pt as usize, pl as usize, pb as usize, pr as usize],
            mode,
        },
        vec![t],
    )
}
