//! `Conv` (2-D, any `group`, `dilations = 1`, `auto_pad` NOTSET, equal strides) → a
//! float [`Op::Conv`]. Explicit `pads = [top, left, bottom, right]` map to
//! [`Padding::Valid`] when all zero and to [`Padding::Same`] where TF-SAME is the same
//! function ([`conv_padding`]); any other pads (torch's `padding=1` with stride 2 on an
//! even size, the `padding=3` of a 7×7 stride-2 stem, asymmetric pads) become an explicit
//! zero [`Op::Pad`] (node `{conv}/pad`) and a VALID convolution of the padded tensor.

use kernels::{ConvShape, Padding};
use tract_onnx::pb::attribute_proto::AttributeType;

use crate::error::NnError;
use crate::ir::{Op, PadMode};

use super::{check_auto_pad, check_equal_2d, check_no_dilation, Finding, Graph, OnnxNode, OpDef};

pub(crate) const CONV: OpDef = OpDef::new("Conv")
    .attributes(&[
        ("group", AttributeType::Int),
        ("dilations", AttributeType::Ints),
        ("auto_pad", AttributeType::String),
        ("strides", AttributeType::Ints),
        ("kernel_shape", AttributeType::Ints),
        ("pads", AttributeType::Ints),
    ])
    .check(check)
    .import(import);

fn check(n: &OnnxNode, out: &mut Vec<Finding>) {
    check_no_dilation(n, out);
    let g = n.int("group", 1);
    if g < 1 {
        out.push(Finding {
            attribute: Some("group"),
            reason: format!("{g}: a positive group count is needed"),
        });
    }
    check_auto_pad(n, out);
    check_equal_2d(n, "strides", out);
    if let Some(k) = n.ints("kernel_shape") {
        if k.len() != 2 || k.iter().any(|&v| v < 1) {
            out.push(Finding {
                attribute: Some("kernel_shape"),
                reason: format!("{k:?}: only 2-D kernels are supported"),
            });
        }
    }
    if let Some(p) = n.ints("pads") {
        if p.len() != 4 || p.iter().any(|&v| v < 0) {
            out.push(Finding {
                attribute: Some("pads"),
                reason: format!("{p:?}: expected 4 non-negative values"),
            });
        }
    }
}

fn import(g: &mut Graph, n: &OnnxNode) -> Result<(), NnError> {
    let t = g.act(n, 0)?;
    let (wd, wv) = g.weight(n, 1)?;
    let bias = if n.has_input(2) {
        Some(g.weight(n, 2)?.1)
    } else {
        None
    };
    let xs = g.net.shape(t).to_vec();
    let [c_i, h, w] = xs[..] else {
        return Err(n.shape_error("input X (C×H×W without batch)".into(), vec![0, 0, 0], xs));
    };
    let [c_o, wc, k_h, k_w] = wd[..] else {
        return Err(n.shape_error(format!("weight {}", n.input(1)?), vec![0, c_i, 0, 0], wd));
    };
    let groups = n.int("group", 1).max(1) as usize;
    if !c_i.is_multiple_of(groups) || !c_o.is_multiple_of(groups) {
        return Err(n.bad_attribute(
            "group",
            format!("{groups} does not divide {c_i} input and {c_o} output channels"),
        ));
    }
    if wc != c_i / groups {
        return Err(n.shape_error(
            format!("weight {}", n.input(1)?),
            vec![c_o, c_i / groups, k_h, k_w],
            wd,
        ));
    }
    if let Some(ks) = n.ints("kernel_shape") {
        if ks != [k_h as i64, k_w as i64] {
            return Err(n.bad_attribute(
                "kernel_shape",
                format!("{ks:?} but the weight is {k_h}×{k_w}"),
            ));
        }
    }
    let stride = n.first_int("strides", 1);
    let pads: Vec<usize> = n
        .ints("pads")
        .unwrap_or_else(|| vec![0; 4])
        .iter()
        .map(|&p| p as usize)
        .collect();
    let [pt, pl, pb, pr] = pads[..] else {
        return Err(n.bad_attribute("pads", format!("{pads:?}: 4 values expected")));
    };
    let pads = [pt, pl, pb, pr];
    // TF-SAME where it is the same function, else explicit zeros + VALID
    let (t, h, w, padding) = match conv_padding(h, w, k_h, k_w, stride, pads) {
        Ok(padding) => (t, h, w, padding),
        Err(_) => {
            let p = g.pad(&n.name, t, pads, PadMode::Zero)?;
            (p, pt + h + pb, pl + w + pr, Padding::Valid)
        }
    };
    let shape = ConvShape::new([c_i, h, w], [c_o, k_h, k_w], stride, padding);
    g.emit(
        n,
        Op::Conv {
            shape,
            weight: wv,
            bias,
            groups,
        },
        vec![t],
    )
}

/// Maps a 2-D convolution's explicit ONNX `pads = [top, left, bottom, right]` to a
/// [`Padding`] (see the module docs); `Err` says why it is neither VALID nor TF-SAME (the
/// importer then pads explicitly with [`Op::Pad`] and convolves VALID).
pub fn conv_padding(
    h: usize,
    w: usize,
    k_h: usize,
    k_w: usize,
    stride: usize,
    pads: [usize; 4],
) -> Result<Padding, String> {
    if pads == [0; 4] {
        return Ok(Padding::Valid);
    }
    let axis = |name: &str, n: usize, k: usize, p0: usize, p1: usize| -> Result<(), String> {
        let onnx_out = (n + p0 + p1)
            .checked_sub(k)
            .map(|d| d / stride + 1)
            .ok_or_else(|| format!("{name}: kernel {k} larger than padded input {n}+{p0}+{p1}"))?;
        let same_out = n.div_ceil(stride);
        let total = ((same_out - 1) * stride + k).saturating_sub(n);
        if onnx_out != same_out || p0 != total / 2 {
            return Err(format!(
                "{name}: pads ({p0}, {p1}) with kernel {k}, stride {stride} on size {n} give output {onnx_out} starting at offset -{p0}; \
                 TF-SAME padding gives output {same_out} starting at offset -{}; only all-zero pads (VALID) or pads equivalent to SAME are supported",
                total / 2
            ));
        }
        Ok(())
    };
    axis("height", h, k_h, pads[0], pads[2])?;
    axis("width", w, k_w, pads[1], pads[3])?;
    Ok(Padding::Same)
}
