//! ONNX import: `ModelProto` (as produced by `torch.onnx.export`, opsets 13–20, the TorchScript and the dynamo exporters) → [`Network`].
//!
//! Import runs in two passes. The first only looks at op types and attributes and collects
//! **every** unsupported construct into one [`NnError::Unsupported`] before anything is
//! loaded. The second walks the (topologically sorted) nodes, loads initializers, infers
//! shapes (batch dimension dropped, symbolic or not) and builds the IR.
//!
//! Accepted ops and their mapping:
//! * `Conv` (2-D, `group = 1`, `dilations = 1`, `auto_pad` NOTSET, equal strides): explicit
//!   `pads = [top, left, bottom, right]` map to [`Padding::Valid`] when all zero, and to
//!   [`Padding::Same`] (TensorFlow SAME: output `ceil(h/s)`, total pad `(h_out−1)·s + k − h`,
//!   `floor(total/2)` top/left) when that gives exactly the same output size and offsets
//!   as ONNX's explicit pads (`(h + pt + pb − k)/s + 1 == ceil(h/s)` and
//!   `pt == floor(total/2)`, per axis; e.g. symmetric `(k−1)/2` with stride 1 and odd `k`),
//!   see [`conv_padding`]. Any other pads (torch's `padding=1` with stride 2 on an even
//!   size, `padding=3` of a 7×7 stride-2 stem, asymmetric pads) become an explicit
//!   [`Op::Pad`] with zeros (node `{conv}/pad`) followed by a VALID `Conv`: the same
//!   function, the convolution then runs on the padded tensor.
//! * `Gemm` (`transA = 0`, any `transB`, `alpha`, `beta`), `MatMul` with a constant right
//!   operand (+ a following `Add` of a constant = bias) → `Linear`.
//! * `BatchNormalization` (inference mode) folded into the preceding Conv/Linear:
//!   `w' = w·γ/√(var+ε)`, `b' = (b−mean)·γ/√(var+ε) + β`; a BN whose input is not a Conv/Linear
//!   output consumed only by it → [`NnError::BatchNormNotFoldable`].
//! * `Relu`; `MaxPool`/`AveragePool` (square kernel, equal strides, `ceil_mode = 0`, no
//!   `Indices` output; `AveragePool` with zero pads only). A `MaxPool` with pads (each
//!   `< k`, so that every window holds a real element) becomes [`Op::Pad`] with
//!   [`PadMode::Edge`] (node `{pool}/pad`) + an unpadded `MaxPool`: padded positions take
//!   no part in the max, as in ONNX and PyTorch. `GlobalAveragePool`; `ReduceMean` over the spatial axes `[2, 3]`
//!   (`x.mean([2, 3])`, the dynamo exporter's adaptive average pooling; `keepdims` 0 or 1)
//!   → `GlobalAvgPool` (+ `Flatten`); `Flatten` (`axis = 1`); `Reshape` to
//!   `[batch, N]` (`-1`, `0`, `1` or the batch size in front) → `Flatten`; `Add` of two
//!   activations; `Mul(x, x)` and `Pow(x, 2)` → `Square`; `Identity`/`Dropout` removed.
//! * `Pad` (torch's `ZeroPad2d`/`F.pad`) of a `[batch, C, H, W]` activation: mode `constant`
//!   with value 0 (or no value) or `edge`; `pads` (input from opset 11, attribute before)
//!   a constant with zeros on the batch and channel axes and non-negative spatial pads;
//!   no `axes` input → [`Op::Pad`].
//! * Shape arithmetic on constants as torch emits it for `x.view(x.size(0), -1)`: `Constant`,
//!   `Shape`, `Gather`, `Unsqueeze`, `Concat` (the batch is taken as 1).
//!
//! Initializers may lie in an external data file beside the model (ONNX `external_data`,
//! what torch >= 2.9 writes by default): [`import`] reads them from the model's directory.
//!
//! Everything else — including a trailing `Softmax`, which is never dropped silently — is
//! rejected, naming the node, its op type and the attribute.

use std::collections::HashMap;
use std::path::Path;

use kernels::{ConvShape, Padding};
use prost::Message;
use tract_onnx::pb::{
    self, attribute_proto::AttributeType, tensor_proto::DataType, AttributeProto, ModelProto,
    NodeProto,
};

use crate::error::{NnError, Unsupported};
use crate::head::{Arith, CastTo, Head, HeadData, HeadNode, HeadOp, HeadSrc, HeadValue};
use crate::ir::{InputAffine, Network, Op, PadMode, TensorId};

/// Reads and imports an ONNX file, with the tensors it keeps in external data files
/// (what `torch.onnx.export` writes by default: `model.onnx.data` beside the model).
pub fn import(path: &Path) -> Result<Network, NnError> {
    let bytes = std::fs::read(path).map_err(|source| NnError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let mut model = ModelProto::decode(&bytes[..]).map_err(|e| NnError::Decode(e.to_string()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    if let Some(graph) = model.graph.as_mut() {
        for t in graph.initializer.iter_mut() {
            load_external_data(t, dir)?;
        }
        for n in graph.node.iter_mut() {
            for a in n.attribute.iter_mut() {
                if let Some(t) = a.t.as_mut() {
                    load_external_data(t, dir)?;
                }
            }
        }
    }
    import_model(&model)
}

/// Bytes per element of the tensor types the importer reads.
fn element_bytes(data_type: i32) -> Option<u64> {
    match DataType::from_i32(data_type)? {
        DataType::Float | DataType::Int32 => Some(4),
        DataType::Double | DataType::Int64 => Some(8),
        _ => None,
    }
}

/// Moves a tensor's external data (ONNX `external_data`: `location` relative to the
/// model's directory, optional `offset` and `length`) into `raw_data`. The location
/// must stay inside the directory (no absolute path, no `..`), and exactly the bytes
/// the tensor's dimensions call for are read, checked against the file's size first.
fn load_external_data(t: &mut pb::TensorProto, dir: &Path) -> Result<(), NnError> {
    if t.data_location != Some(pb::tensor_proto::DataLocation::External as i32) {
        return Ok(());
    }
    let err = |reason: String| NnError::Initializer {
        name: t.name.clone(),
        reason,
    };
    let key = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.as_str())
    };
    let location = key("location").ok_or_else(|| err("external data without a location".into()))?;
    let rel = Path::new(location);
    if location.is_empty()
        || rel.is_absolute()
        || rel.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return Err(err(format!(
            "external data location {location:?}: a path inside the model's directory is needed"
        )));
    }
    let number = |k: &str| -> Result<Option<u64>, NnError> {
        key(k)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| err(format!("external data {k} {v:?} is not a byte count")))
            })
            .transpose()
    };
    let offset = number("offset")?.unwrap_or(0);
    let numel = t.dims.iter().try_fold(1u64, |acc, &d| {
        u64::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    });
    let expected = element_bytes(t.data_type)
        .zip(numel)
        .and_then(|(b, n)| b.checked_mul(n))
        .ok_or_else(|| {
            err(format!(
                "external data of element type {} and dims {:?} cannot be read (FLOAT, DOUBLE, INT64, INT32 can)",
                t.data_type, t.dims
            ))
        })?;
    let length = number("length")?.unwrap_or(expected);
    if length != expected {
        return Err(err(format!(
            "external data length {length} bytes; dims {:?} call for {expected}",
            t.dims
        )));
    }
    let file = dir.join(rel);
    let io = |source: std::io::Error| NnError::Io {
        path: file.display().to_string(),
        source,
    };
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&file).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(err(format!(
            "external data bytes {offset}..{offset}+{length} lie beyond the end of {} ({size} bytes)",
            file.display()
        )));
    }
    let len =
        usize::try_from(length).map_err(|_| err(format!("{length} bytes do not fit in memory")))?;
    let mut raw = vec![0u8; len];
    f.seek(SeekFrom::Start(offset)).map_err(io)?;
    f.read_exact(&mut raw).map_err(io)?;
    t.raw_data = raw;
    t.external_data.clear();
    t.data_location = Some(pb::tensor_proto::DataLocation::Default as i32);
    Ok(())
}

/// Imports a serialized ONNX `ModelProto`.
pub fn import_bytes(bytes: &[u8]) -> Result<Network, NnError> {
    let model = ModelProto::decode(bytes).map_err(|e| NnError::Decode(e.to_string()))?;
    import_model(&model)
}

/// Imports a decoded ONNX model.
pub fn import_model(model: &ModelProto) -> Result<Network, NnError> {
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| NnError::Decode("model has no graph".into()))?;
    let issues = check_supported(graph);
    if !issues.is_empty() {
        return Err(NnError::Unsupported(issues));
    }
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(13, |o| o.version);
    Builder::new(graph, opset)?.run()
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

// ---------------------------------------------------------------------------------------
// attributes

fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}
fn attr_i(n: &NodeProto, name: &str, default: i64) -> i64 {
    attr(n, name).map_or(default, |a| a.i)
}
fn attr_f(n: &NodeProto, name: &str, default: f32) -> f32 {
    attr(n, name).map_or(default, |a| a.f)
}
fn attr_ints(n: &NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(n, name).map(|a| a.ints.clone())
}
fn attr_s(n: &NodeProto, name: &str) -> Option<String> {
    attr(n, name).map(|a| String::from_utf8_lossy(&a.s).into_owned())
}

/// The type of every attribute the importer reads (by op where one name has different
/// types in different ops), checked on every node before any is read, so a reader never
/// takes the wrong field of an attribute of another type.
const ATTRIBUTE_TYPES: &[(Option<&str>, &str, AttributeType)] = &[
    (None, "group", AttributeType::Int),
    (None, "ceil_mode", AttributeType::Int),
    (None, "transA", AttributeType::Int),
    (None, "transB", AttributeType::Int),
    (None, "training_mode", AttributeType::Int),
    (None, "axis", AttributeType::Int),
    (None, "keepdims", AttributeType::Int),
    (None, "select_last_index", AttributeType::Int),
    (None, "largest", AttributeType::Int),
    (None, "to", AttributeType::Int),
    (None, "allowzero", AttributeType::Int),
    (None, "start", AttributeType::Int),
    (None, "end", AttributeType::Int),
    (None, "dilations", AttributeType::Ints),
    (None, "kernel_shape", AttributeType::Ints),
    (None, "pads", AttributeType::Ints),
    (None, "strides", AttributeType::Ints),
    (None, "axes", AttributeType::Ints),
    (None, "perm", AttributeType::Ints),
    (None, "auto_pad", AttributeType::String),
    (None, "mode", AttributeType::String),
    (None, "alpha", AttributeType::Float),
    (None, "beta", AttributeType::Float),
    (None, "epsilon", AttributeType::Float),
    (Some("Clip"), "min", AttributeType::Float),
    (Some("Clip"), "max", AttributeType::Float),
    (Some("Pad"), "value", AttributeType::Float),
    (Some("Scaler"), "offset", AttributeType::Floats),
    (Some("Scaler"), "scale", AttributeType::Floats),
];

/// Every attribute of `n` whose type is not the one the importer reads it as: (name,
/// what it is).
fn mistyped_attributes(n: &NodeProto) -> Vec<(String, String)> {
    n.attribute
        .iter()
        .filter_map(|a| {
            let want = ATTRIBUTE_TYPES
                .iter()
                .find(|(op, name, _)| *name == a.name && op.is_none_or(|o| o == n.op_type))?
                .2;
            let got = AttributeType::from_i32(a.r#type);
            (got != Some(want)).then(|| {
                let got = got.map_or(format!("type {}", a.r#type), |t| {
                    t.as_str_name().to_lowercase()
                });
                (
                    a.name.clone(),
                    format!(
                        "is of type {got}, expected {}",
                        want.as_str_name().to_lowercase()
                    ),
                )
            })
        })
        .collect()
}

fn node_name(n: &NodeProto, idx: usize) -> String {
    if n.name.is_empty() {
        format!("#{idx}")
    } else {
        n.name.clone()
    }
}

const SUPPORTED: &[&str] = &[
    "Conv",
    "Gemm",
    "MatMul",
    "Add",
    "BatchNormalization",
    "Relu",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "ReduceMean",
    "Flatten",
    "Reshape",
    "Identity",
    "Dropout",
    "Mul",
    "Pow",
    "Constant",
    "Shape",
    "Gather",
    "Unsqueeze",
    "Concat",
    "Pad",
    "Clip",
    "Cast",
    "Squeeze",
    "Transpose",
    "Sub",
    "Div",
];

/// Ops that only an output head has (computed by the client on its revealed output).
const HEAD_ONLY: &[&str] = &[
    "Softmax",
    "LogSoftmax",
    "Sigmoid",
    "ArgMax",
    "ArgMin",
    "TopK",
    "ArrayFeatureExtractor",
];

/// Ops a head may have besides [`HEAD_ONLY`].
const HEAD_ALSO: &[&str] = &[
    "Identity",
    "Dropout",
    "Cast",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Concat",
];

/// The ONNX-ML ops (domain `ai.onnx.ml`) the importer reads.
const ML_OPS: &[&str] = &["ArrayFeatureExtractor", "Scaler"];

/// The nodes of the output head: a [`HEAD_ONLY`] op and every node that reads (directly
/// or through others) a value one of them computes.
fn head_nodes(graph: &pb::GraphProto) -> std::collections::HashSet<usize> {
    let mut values: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut nodes = std::collections::HashSet::new();
    for (i, n) in graph.node.iter().enumerate() {
        if HEAD_ONLY.contains(&n.op_type.as_str())
            || n.input.iter().any(|x| values.contains(x.as_str()))
        {
            nodes.insert(i);
            values.extend(n.output.iter().map(String::as_str));
        }
    }
    nodes
}

/// Pass 1: every unsupported op / attribute of the graph.
fn check_supported(graph: &pb::GraphProto) -> Vec<Unsupported> {
    let mut out = Vec::new();
    let head = head_nodes(graph);
    for (idx, n) in graph.node.iter().enumerate() {
        let name = node_name(n, idx);
        let op = n.op_type.as_str();
        let mut bad = |attribute: Option<&str>, reason: String| {
            out.push(Unsupported {
                node: name.clone(),
                op: op.to_string(),
                attribute: attribute.map(str::to_string),
                reason,
            })
        };
        // an attribute of the wrong type is reported alone: its value is not read
        let mistyped = mistyped_attributes(n);
        if !mistyped.is_empty() {
            for (attribute, reason) in mistyped {
                bad(Some(&attribute), reason);
            }
            continue;
        }
        if op == "ZipMap" {
            bad(
                None,
                "ZipMap (skl2onnx's default output, a list of dicts) is not supported; export with options={'zipmap': False}".into(),
            );
            continue;
        }
        let ml = n.domain == "ai.onnx.ml";
        if !(n.domain.is_empty() || n.domain == "ai.onnx" || (ml && ML_OPS.contains(&op))) {
            bad(
                None,
                format!("op {op} of domain {:?} is not supported", n.domain),
            );
            continue;
        }
        if head.contains(&idx) {
            // the client computes it on the revealed output; attributes are checked
            // when the head is built
            if !HEAD_ONLY.contains(&op) && !HEAD_ALSO.contains(&op) {
                bad(
                    None,
                    format!(
                        "{op} reads a value of the output head (after {}); only {} may follow them (a Softmax or ArgMax before the network's last layer is not supported)",
                        HEAD_ONLY.join("/"),
                        HEAD_ALSO.join(", ")
                    ),
                );
            }
            continue;
        }
        if !(SUPPORTED.contains(&op) || ml && op == "Scaler") {
            bad(None, format!("op type {op} is not supported"));
            continue;
        }
        let auto_pad = |bad: &mut dyn FnMut(Option<&str>, String)| {
            if let Some(p) = attr_s(n, "auto_pad") {
                if p != "NOTSET" {
                    bad(
                        Some("auto_pad"),
                        format!("{p:?} is not supported (only NOTSET with explicit pads)"),
                    );
                }
            }
        };
        let ones = |v: &Option<Vec<i64>>| v.as_ref().is_none_or(|v| v.iter().all(|&d| d == 1));
        let equal_2d = |attr_name: &str, bad: &mut dyn FnMut(Option<&str>, String)| {
            if let Some(v) = attr_ints(n, attr_name) {
                if v.len() != 2 || v[0] != v[1] || v[0] < 1 {
                    bad(
                        Some(attr_name),
                        format!("{v:?}: only 2-D with equal positive values is supported"),
                    );
                }
            }
        };
        match op {
            "Conv" => {
                let d = attr_ints(n, "dilations");
                if !ones(&d) {
                    bad(
                        Some("dilations"),
                        format!("{:?}: only 1 is supported", d.unwrap_or_default()),
                    );
                }
                let g = attr_i(n, "group", 1);
                if g < 1 {
                    bad(
                        Some("group"),
                        format!("{g}: a positive group count is needed"),
                    );
                }
                auto_pad(&mut bad);
                equal_2d("strides", &mut bad);
                if let Some(k) = attr_ints(n, "kernel_shape") {
                    if k.len() != 2 || k.iter().any(|&v| v < 1) {
                        bad(
                            Some("kernel_shape"),
                            format!("{k:?}: only 2-D kernels are supported"),
                        );
                    }
                }
                if let Some(p) = attr_ints(n, "pads") {
                    if p.len() != 4 || p.iter().any(|&v| v < 0) {
                        bad(
                            Some("pads"),
                            format!("{p:?}: expected 4 non-negative values"),
                        );
                    }
                }
            }
            "MaxPool" | "AveragePool" => {
                let k = match attr_ints(n, "kernel_shape") {
                    Some(k) if k.len() == 2 && k[0] == k[1] && k[0] >= 1 => k[0],
                    k => {
                        bad(
                            Some("kernel_shape"),
                            format!("{k:?}: only square 2-D windows are supported"),
                        );
                        1
                    }
                };
                equal_2d("strides", &mut bad);
                if let Some(p) = attr_ints(n, "pads") {
                    if op == "AveragePool" {
                        if p.iter().any(|&v| v != 0) {
                            bad(
                                Some("pads"),
                                format!("{p:?}: only zero padding is supported"),
                            );
                        }
                    } else if p.len() != 4 || p.iter().any(|&v| v < 0 || v >= k) {
                        bad(
                            Some("pads"),
                            format!(
                                "{p:?}: expected 4 values in 0..{k} (a window must hold a real element)"
                            ),
                        );
                    }
                }
                let d = attr_ints(n, "dilations");
                if !ones(&d) {
                    bad(
                        Some("dilations"),
                        format!("{:?}: only 1 is supported", d.unwrap_or_default()),
                    );
                }
                let c = attr_i(n, "ceil_mode", 0);
                if c != 0 {
                    bad(Some("ceil_mode"), format!("{c}: only 0 is supported"));
                }
                auto_pad(&mut bad);
                if op == "MaxPool" && n.output.len() > 1 && !n.output[1].is_empty() {
                    bad(None, "the Indices output is not supported".into());
                }
            }
            "Pad" => {
                let mode = attr_s(n, "mode").unwrap_or_else(|| "constant".into());
                if mode != "constant" && mode != "edge" {
                    bad(
                        Some("mode"),
                        format!("{mode:?}: only \"constant\" (zero) and \"edge\" are supported"),
                    );
                }
                if n.input.get(3).is_some_and(|s| !s.is_empty()) {
                    bad(
                        Some("axes"),
                        "the axes input is not supported (pad all four axes)".into(),
                    );
                }
            }
            "Gemm" => {
                let t = attr_i(n, "transA", 0);
                if t != 0 {
                    bad(Some("transA"), format!("{t}: only 0 is supported"));
                }
            }
            "BatchNormalization" => {
                let t = attr_i(n, "training_mode", 0);
                if t != 0 {
                    bad(Some("training_mode"), format!("{t}: only 0 is supported"));
                }
                if n.output.iter().skip(1).any(|o| !o.is_empty()) {
                    bad(
                        None,
                        "running mean/var outputs (training mode) are not supported".into(),
                    );
                }
            }
            "Flatten" => {
                let a = attr_i(n, "axis", 1);
                if a != 1 {
                    bad(Some("axis"), format!("{a}: only 1 is supported"));
                }
            }
            "Gather" | "Concat" => {
                let a = attr_i(n, "axis", 0);
                if a != 0 {
                    bad(
                        Some("axis"),
                        format!("{a}: only 0 on shape vectors is supported"),
                    );
                }
            }
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// tensors

#[derive(Clone, Debug)]
enum Const {
    F32 { dims: Vec<usize>, data: Vec<f32> },
    I64(Vec<i64>),
}

/// A STRING tensor (class labels) as a head constant.
fn string_tensor(t: &pb::TensorProto) -> Result<HeadValue, String> {
    let shape: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<_, _>>()?;
    let data: Vec<String> = t
        .string_data
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    if shape.iter().product::<usize>() != data.len() {
        return Err(format!(
            "string tensor {}: {} values for dims {:?}",
            t.name,
            data.len(),
            t.dims
        ));
    }
    Ok(HeadValue {
        shape,
        data: HeadData::Str(data),
    })
}

/// `c` (dims `dims`) broadcast to `shape` (numpy rules, right-aligned); `None` when it
/// does not broadcast.
fn broadcast_const(dims: &[usize], c: &[f32], shape: &[usize]) -> Option<Vec<f32>> {
    if dims.len() > shape.len() || dims.iter().product::<usize>() != c.len() {
        return None;
    }
    let off = shape.len() - dims.len();
    if dims
        .iter()
        .zip(&shape[off..])
        .any(|(&d, &s)| d != 1 && d != s)
    {
        return None;
    }
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    for flat in 0..n {
        let (mut rem, mut idx, mut stride) = (flat, 0usize, 1usize);
        let mut coords = vec![0usize; shape.len()];
        for a in (0..shape.len()).rev() {
            coords[a] = rem % shape[a];
            rem /= shape[a];
        }
        for a in (0..dims.len()).rev() {
            let cdx = if dims[a] == 1 { 0 } else { coords[off + a] };
            idx += cdx * stride;
            stride *= dims[a];
        }
        out.push(c[idx]);
    }
    Some(out)
}

fn le_chunks<const N: usize>(raw: &[u8], name: &str) -> Result<Vec<[u8; N]>, NnError> {
    if !raw.len().is_multiple_of(N) {
        return Err(NnError::Initializer {
            name: name.into(),
            reason: format!("raw_data length {} is not a multiple of {N}", raw.len()),
        });
    }
    Ok(raw
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        })
        .collect())
}

fn load_tensor(t: &pb::TensorProto, fallback_name: &str) -> Result<Const, NnError> {
    let name = if t.name.is_empty() {
        fallback_name
    } else {
        &t.name
    };
    let err = |reason: String| NnError::Initializer {
        name: name.into(),
        reason,
    };
    if t.data_location == Some(pb::tensor_proto::DataLocation::External as i32) {
        return Err(err(
            "the tensor's data lies in an external file: import the model from its path (nn::import), beside that file".into(),
        ));
    }
    let dims = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| err(format!("negative dimension {d}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let numel: usize = dims.iter().product();
    let raw = !t.raw_data.is_empty();
    let c = match DataType::from_i32(t.data_type).ok_or(()) {
        Ok(DataType::Float) => Const::F32 {
            data: if raw {
                le_chunks::<4>(&t.raw_data, name)?
                    .into_iter()
                    .map(f32::from_le_bytes)
                    .collect()
            } else {
                t.float_data.clone()
            },
            dims,
        },
        Ok(DataType::Double) => Const::F32 {
            data: if raw {
                le_chunks::<8>(&t.raw_data, name)?
                    .into_iter()
                    .map(|b| f64::from_le_bytes(b) as f32)
                    .collect()
            } else {
                t.double_data.iter().map(|&v| v as f32).collect()
            },
            dims,
        },
        Ok(DataType::Int64) => Const::I64(if raw {
            le_chunks::<8>(&t.raw_data, name)?
                .into_iter()
                .map(i64::from_le_bytes)
                .collect()
        } else {
            t.int64_data.clone()
        }),
        Ok(DataType::Int32) => Const::I64(if raw {
            le_chunks::<4>(&t.raw_data, name)?
                .into_iter()
                .map(|b| i32::from_le_bytes(b) as i64)
                .collect()
        } else {
            t.int32_data.iter().map(|&v| v as i64).collect()
        }),
        _ => {
            return Err(err(format!(
                "element type {} is not supported (FLOAT, DOUBLE, INT64, INT32 are)",
                t.data_type
            )))
        }
    };
    let len = match &c {
        Const::F32 { data, .. } => data.len(),
        Const::I64(v) => v.len(),
    };
    if len != numel {
        return Err(err(format!(
            "{len} values for dims {:?} ({numel} expected)",
            t.dims
        )));
    }
    Ok(c)
}

// ---------------------------------------------------------------------------------------
// pass 2

struct Builder<'g> {
    graph: &'g pb::GraphProto,
    net: Network,
    /// ONNX activation name → IR tensor.
    acts: HashMap<String, TensorId>,
    /// ONNX constant name → value (initializers, Constant outputs, folded shape arithmetic).
    consts: HashMap<String, Const>,
    /// Raw initializers, loaded on first use.
    inits: HashMap<&'g str, &'g pb::TensorProto>,
    /// How many ONNX consumers (nodes or graph outputs) read each value name.
    uses: HashMap<&'g str, usize>,
    /// How many real consumers each IR tensor has (Identity/Dropout hops not counted).
    tensor_uses: HashMap<TensorId, usize>,
    /// The output head being built (the client's part of the graph).
    head: Head,
    /// ONNX value name → head value id.
    head_values: HashMap<String, usize>,
    /// Constants only a head can use (strings), with their shapes.
    head_consts: HashMap<String, HeadValue>,
    /// The private tensor the head reads.
    head_source: Option<TensorId>,
    /// The default domain's opset.
    opset: i64,
}

impl<'g> Builder<'g> {
    fn new(graph: &'g pb::GraphProto, opset: i64) -> Result<Self, NnError> {
        let inits: HashMap<&str, &pb::TensorProto> = graph
            .initializer
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let mut uses: HashMap<&str, usize> = HashMap::new();
        for n in &graph.node {
            for i in n.input.iter().filter(|i| !i.is_empty()) {
                *uses.entry(i.as_str()).or_default() += 1;
            }
        }
        for o in &graph.output {
            *uses.entry(o.name.as_str()).or_default() += 1;
        }
        let inputs: Vec<&pb::ValueInfoProto> = graph
            .input
            .iter()
            .filter(|i| !inits.contains_key(i.name.as_str()))
            .collect();
        let gerr = |reason: String| NnError::Graph {
            node: "<graph>".into(),
            op: "input".into(),
            reason,
        };
        let [input] = inputs.as_slice() else {
            return Err(gerr(format!(
                "expected exactly one non-initializer graph input, found {:?}",
                inputs.iter().map(|i| &i.name).collect::<Vec<_>>()
            )));
        };
        let dims = match input.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(pb::type_proto::Value::TensorType(tt)) => {
                if tt.elem_type != DataType::Float as i32 {
                    return Err(gerr(format!(
                        "input {} has element type {} (FLOAT expected)",
                        input.name, tt.elem_type
                    )));
                }
                tt.shape
                    .as_ref()
                    .map(|s| s.dim.clone())
                    .ok_or_else(|| gerr(format!("input {} has no shape", input.name)))?
            }
            _ => return Err(gerr(format!("input {} is not a tensor", input.name))),
        };
        if dims.len() < 2 {
            return Err(gerr(format!(
                "input {} has rank {}; expected [batch, ...] with rank ≥ 2",
                input.name,
                dims.len()
            )));
        }
        let mut shape = Vec::new();
        for d in &dims[1..] {
            match d.value {
                Some(pb::tensor_shape_proto::dimension::Value::DimValue(v)) if v > 0 => {
                    shape.push(v as usize)
                }
                _ => {
                    return Err(gerr(format!(
                        "input {}: only the batch (first) dimension may be symbolic, got {:?}",
                        input.name, d.value
                    )))
                }
            }
        }
        let net = Network::new(&input.name, shape);
        let mut b = Builder {
            graph,
            net,
            acts: HashMap::new(),
            consts: HashMap::new(),
            inits,
            uses,
            tensor_uses: HashMap::new(),
            head: Head::default(),
            head_values: HashMap::new(),
            head_consts: HashMap::new(),
            head_source: None,
            opset,
        };
        b.bind(&input.name, 0);
        Ok(b)
    }

    fn bind(&mut self, name: &str, t: TensorId) {
        self.acts.insert(name.to_string(), t);
        let u = self.uses.get(name).copied().unwrap_or(0);
        *self.tensor_uses.entry(t).or_default() += u;
    }

    fn run(mut self) -> Result<Network, NnError> {
        for (idx, n) in self.graph.node.iter().enumerate() {
            self.node(idx, n)?;
        }
        let oerr = |reason: String| NnError::Graph {
            node: "<graph>".into(),
            op: "output".into(),
            reason,
        };
        if self.graph.output.is_empty() {
            return Err(oerr("the graph has no output".into()));
        }
        // every graph output is a head value or the one private tensor the head reads
        let mut outputs = Vec::new();
        for out in &self.graph.output {
            let src = if let Some(&v) = self.head_values.get(&out.name) {
                HeadSrc::Value(v)
            } else if let Some(&t) = self.acts.get(&out.name) {
                match self.head_source {
                    Some(s) if s != t => {
                        return Err(oerr(format!(
                            "output {} is a private tensor other than the one the output head reads ({}); only one private tensor can be revealed",
                            out.name, self.net.tensors[s].name
                        )))
                    }
                    _ => self.head_source = Some(t),
                }
                HeadSrc::Output
            } else {
                return Err(oerr(format!(
                    "output {} is not computed from the input",
                    out.name
                )));
            };
            outputs.push((out.name.clone(), src));
        }
        self.head.outputs = outputs;
        self.net.output = self
            .head_source
            .ok_or_else(|| oerr("no private tensor reaches the outputs".into()))?;
        self.net.head = self.head;
        self.net.validate()?;
        Ok(self.net)
    }

    /// A head value, the private output or a constant, as a head node's input.
    fn head_src(
        &mut self,
        name: &str,
        gerr: &dyn Fn(String) -> NnError,
    ) -> Result<HeadSrc, NnError> {
        if let Some(&v) = self.head_values.get(name) {
            return Ok(HeadSrc::Value(v));
        }
        if let Some(&t) = self.acts.get(name) {
            match self.head_source {
                Some(s) if s != t => {
                    return Err(gerr(format!(
                        "reads the private tensor {name} while the head already reads {}: the head must start from one tensor",
                        self.net.tensors[s].name
                    )))
                }
                _ => self.head_source = Some(t),
            }
            return Ok(HeadSrc::Output);
        }
        if let Some(c) = self.head_consts.get(name) {
            return Ok(HeadSrc::Const(c.clone()));
        }
        if let Some(t) = self.inits.get(name) {
            if t.data_type == DataType::String as i32 {
                let v = string_tensor(t).map_err(gerr)?;
                return Ok(HeadSrc::Const(v));
            }
        }
        let dims = |b: &Self, n: usize| -> Vec<usize> {
            b.inits
                .get(name)
                .map(|t| t.dims.iter().map(|&d| d.max(0) as usize).collect())
                .unwrap_or_else(|| vec![n])
        };
        let v = match self.constant(name)? {
            Some(Const::F32 { dims, data }) => HeadValue {
                shape: dims,
                data: HeadData::F32(data),
            },
            Some(Const::I64(v)) => HeadValue {
                shape: dims(self, v.len()),
                data: HeadData::I64(v),
            },
            None => {
                return Err(gerr(format!(
                    "input {name} is neither computed nor a constant"
                )))
            }
        };
        if v.shape.iter().product::<usize>()
            != match &v.data {
                HeadData::F32(x) => x.len(),
                HeadData::I64(x) => x.len(),
                HeadData::Str(x) => x.len(),
            }
        {
            return Err(gerr(format!(
                "constant {name} has dims {:?} that do not match its values",
                v.shape
            )));
        }
        Ok(HeadSrc::Const(v))
    }

    /// A node of the output head (see [`crate::head`]).
    fn head_node(&mut self, idx: usize, n: &'g NodeProto) -> Result<(), NnError> {
        let name = node_name(n, idx);
        let op = n.op_type.as_str();
        let gerr = |reason: String| NnError::Graph {
            node: name.clone(),
            op: op.to_string(),
            reason,
        };
        let bad_attr = |attribute: &str, reason: String| NnError::BadAttribute {
            node: name.clone(),
            op: op.to_string(),
            attribute: attribute.into(),
            reason,
        };
        let has = |i: usize| n.input.get(i).is_some_and(|s| !s.is_empty());
        // integer parameters given as an input (newer opsets) or an attribute
        let ints_in =
            |b: &mut Self, i: usize, attr_name: &str| -> Result<Option<Vec<i64>>, NnError> {
                if has(i) {
                    match b.constant(&n.input[i])? {
                        Some(Const::I64(v)) => Ok(Some(v)),
                        _ => Err(bad_attr(
                            attr_name,
                            format!("input {} must be a constant integer tensor", n.input[i]),
                        )),
                    }
                } else {
                    Ok(attr_ints(n, attr_name))
                }
            };
        let softmax_axis = attr_i(n, "axis", if self.opset >= 13 { -1 } else { 1 });
        let (hop, data_inputs): (HeadOp, usize) = match op {
            "Identity" | "Dropout" => (HeadOp::Identity, 1),
            "Softmax" => (
                HeadOp::Softmax {
                    axis: softmax_axis,
                    coerce_2d: self.opset < 13,
                },
                1,
            ),
            "LogSoftmax" => (
                HeadOp::LogSoftmax {
                    axis: softmax_axis,
                    coerce_2d: self.opset < 13,
                },
                1,
            ),
            "Sigmoid" => (HeadOp::Sigmoid, 1),
            "ArgMax" | "ArgMin" => (
                HeadOp::ArgExtreme {
                    max: op == "ArgMax",
                    axis: attr_i(n, "axis", 0),
                    keepdims: attr_i(n, "keepdims", 1) != 0,
                    select_last_index: attr_i(n, "select_last_index", 0) != 0,
                },
                1,
            ),
            "TopK" => (
                HeadOp::TopK {
                    axis: attr_i(n, "axis", -1),
                    largest: attr_i(n, "largest", 1) != 0,
                },
                2,
            ),
            "ArrayFeatureExtractor" => (HeadOp::ArrayFeatureExtractor, 2),
            "Cast" => {
                let to = attr_i(n, "to", 0);
                let to = match DataType::from_i32(to as i32) {
                    Some(DataType::Float | DataType::Double | DataType::Float16) => CastTo::Float,
                    Some(DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8) => {
                        CastTo::Int
                    }
                    _ => {
                        return Err(bad_attr(
                            "to",
                            format!("{to}: a head casts only to float or integer types"),
                        ))
                    }
                };
                (HeadOp::Cast { to }, 1)
            }
            "Reshape" => {
                let shape = ints_in(self, 1, "shape")?
                    .ok_or_else(|| gerr("Reshape without a shape".into()))?;
                (
                    HeadOp::Reshape {
                        shape,
                        allowzero: attr_i(n, "allowzero", 0) != 0,
                    },
                    1,
                )
            }
            "Flatten" => (
                HeadOp::Flatten {
                    axis: attr_i(n, "axis", 1),
                },
                1,
            ),
            "Squeeze" => (
                HeadOp::Squeeze {
                    axes: ints_in(self, 1, "axes")?,
                },
                1,
            ),
            "Unsqueeze" => (
                HeadOp::Unsqueeze {
                    axes: ints_in(self, 1, "axes")?
                        .ok_or_else(|| gerr("Unsqueeze without axes".into()))?,
                },
                1,
            ),
            "Add" | "Sub" | "Mul" | "Div" => (
                HeadOp::Arith {
                    op: match op {
                        "Add" => Arith::Add,
                        "Sub" => Arith::Sub,
                        "Mul" => Arith::Mul,
                        _ => Arith::Div,
                    },
                },
                2,
            ),
            "Concat" => (
                HeadOp::Concat {
                    axis: attr_i(n, "axis", 0),
                },
                n.input.len(),
            ),
            _ => {
                return Err(gerr(format!(
                    "{op} reads a value of the output head; only {} and {} may form a head",
                    HEAD_ONLY.join(", "),
                    HEAD_ALSO.join(", ")
                )))
            }
        };
        let mut inputs = Vec::new();
        for i in 0..data_inputs {
            let x = n
                .input
                .get(i)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| gerr(format!("missing input {i}")))?;
            inputs.push(self.head_src(x, &gerr)?);
        }
        let mut outputs = Vec::new();
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            let id = self.head.values;
            self.head.values += 1;
            self.head_values.insert(o.clone(), id);
            outputs.push(id);
        }
        self.head.nodes.push(HeadNode {
            name,
            op: hop,
            inputs,
            outputs,
        });
        Ok(())
    }

    fn constant(&mut self, name: &str) -> Result<Option<Const>, NnError> {
        if let Some(c) = self.consts.get(name) {
            return Ok(Some(c.clone()));
        }
        if let Some(t) = self.inits.get(name) {
            let c = load_tensor(t, name)?;
            self.consts.insert(name.to_string(), c.clone());
            return Ok(Some(c));
        }
        Ok(None)
    }

    fn node(&mut self, idx: usize, n: &'g NodeProto) -> Result<(), NnError> {
        let name = node_name(n, idx);
        let op = n.op_type.as_str();
        let gerr = |reason: String| NnError::Graph {
            node: name.clone(),
            op: op.to_string(),
            reason,
        };
        let input = |i: usize| -> Result<&str, NnError> {
            n.input
                .get(i)
                .filter(|s| !s.is_empty())
                .map(String::as_str)
                .ok_or_else(|| gerr(format!("missing input {i}")))
        };
        let output = n
            .output
            .first()
            .map(String::as_str)
            .ok_or_else(|| gerr("no output".into()))?;
        let act = |b: &Self, i: usize| -> Result<TensorId, NnError> {
            let nm = input(i)?;
            b.acts.get(nm).copied().ok_or_else(|| {
                gerr(format!(
                    "input {i} ({nm}) is not an activation computed from the network input"
                ))
            })
        };
        let weight = |b: &mut Self, i: usize| -> Result<(Vec<usize>, Vec<f32>), NnError> {
            let nm = input(i)?;
            match b.constant(nm)? {
                Some(Const::F32 { dims, data }) => Ok((dims, data)),
                Some(Const::I64(_)) => Err(gerr(format!(
                    "input {i} ({nm}) is an integer constant, float expected"
                ))),
                None => Err(gerr(format!(
                    "input {i} ({nm}) must be an initializer/Constant (weights)"
                ))),
            }
        };
        let ints = |b: &mut Self, i: usize| -> Result<Vec<i64>, NnError> {
            let nm = input(i)?;
            match b.constant(nm)? {
                Some(Const::I64(v)) => Ok(v),
                _ => Err(gerr(format!(
                    "input {i} ({nm}) must be a constant int tensor"
                ))),
            }
        };
        let is_const = |b: &Self, i: usize| {
            n.input
                .get(i)
                .is_some_and(|s| b.consts.contains_key(s) || b.inits.contains_key(s.as_str()))
        };

        if HEAD_ONLY.contains(&op) || n.input.iter().any(|i| self.head_values.contains_key(i)) {
            return self.head_node(idx, n);
        }
        // constants of the input normalisation and of folds into a Conv/Linear
        let scalar_or = |b: &mut Self, i: usize| -> Result<(Vec<usize>, Vec<f32>), NnError> {
            match b.constant(input(i)?)? {
                Some(Const::F32 { dims, data }) => Ok((dims, data)),
                Some(Const::I64(v)) => Ok((vec![v.len()], v.iter().map(|&x| x as f32).collect())),
                None => Err(gerr(format!("input {i} must be a constant"))),
            }
        };
        match op {
            "Clip" => {
                let t = act(self, 0)?;
                let bound = |b: &mut Self,
                             i: usize,
                             attr_name: &str|
                 -> Result<Option<f32>, NnError> {
                    if n.input.get(i).is_some_and(|s| !s.is_empty()) {
                        match b.constant(&n.input[i])? {
                            Some(Const::F32 { data, .. }) if data.len() == 1 => Ok(Some(data[0])),
                            _ => Err(NnError::BadAttribute {
                                node: name.clone(),
                                op: op.into(),
                                attribute: attr_name.into(),
                                reason: format!(
                                    "input {} must be a constant scalar (a Clip with computed bounds is not supported)",
                                    n.input[i]
                                ),
                            }),
                        }
                    } else {
                        Ok(attr(n, attr_name).map(|a| a.f))
                    }
                };
                let lo = bound(self, 1, "min")?;
                let hi = bound(self, 2, "max")?.filter(|h| h.is_finite());
                let lo = lo
                    .filter(|l| l.is_finite())
                    .ok_or_else(|| NnError::BadAttribute {
                        node: name.clone(),
                        op: op.into(),
                        attribute: "min".into(),
                        reason: "a Clip without a finite lower bound is not supported".into(),
                    })?;
                let o = if lo == 0.0 && hi.is_none() {
                    Op::Relu
                } else {
                    Op::Clip { min: lo, max: hi }
                };
                let o = self.net.push(&name, output, o, vec![t])?;
                self.bind(output, o);
            }
            "Cast" => {
                let to = attr_i(n, "to", 0);
                let float = matches!(
                    DataType::from_i32(to as i32),
                    Some(DataType::Float | DataType::Double | DataType::Float16)
                );
                let src = input(0)?;
                if let Some(c) = self.constant(src)? {
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
                    self.consts.insert(output.to_string(), c);
                } else if float {
                    let t = act(self, 0)?;
                    if let Some(u) = self.tensor_uses.get_mut(&t) {
                        *u = u.saturating_sub(1);
                    }
                    self.bind(output, t);
                } else {
                    return Err(NnError::BadAttribute {
                        node: name.clone(),
                        op: op.into(),
                        attribute: "to".into(),
                        reason: format!(
                            "{to}: a private activation can only be cast to a float type (integer casts belong in the output head)"
                        ),
                    });
                }
            }
            "Squeeze" | "Transpose" => {
                let t = act(self, 0)?;
                let mut full = vec![1usize];
                full.extend(self.net.shape(t));
                let new: Vec<usize> = if op == "Squeeze" {
                    let axes = if n.input.get(1).is_some_and(|s| !s.is_empty()) {
                        Some(ints(self, 1)?)
                    } else {
                        attr_ints(n, "axes")
                    };
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
                                return Err(NnError::BadAttribute {
                                    node: name.clone(),
                                    op: op.into(),
                                    attribute: "axes".into(),
                                    reason: format!("{axes:?}: only size-1 axes other than the batch can be squeezed from {full:?}"),
                                });
                            }
                            full.iter()
                                .enumerate()
                                .filter(|(i, _)| !norm.contains(i))
                                .map(|(_, &d)| d)
                                .collect()
                        }
                    }
                } else {
                    let perm = attr_ints(n, "perm")
                        .unwrap_or_else(|| (0..full.len() as i64).rev().collect());
                    let ok_perm = perm.len() == full.len()
                        && perm.iter().all(|&p| (0..full.len() as i64).contains(&p));
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
                        return Err(NnError::BadAttribute {
                            node: name.clone(),
                            op: op.into(),
                            attribute: "perm".into(),
                            reason: format!(
                                "{perm:?} on {full:?} moves data; only transposes that keep the data order (moving size-1 axes) are supported"
                            ),
                        });
                    }
                    moved.iter().map(|&a| full[a]).collect()
                };
                self.reshape_to(&name, op, output, t, &new)?;
            }
            "Sub" | "Div" | "Scaler" => {
                // a constant offset or divisor: the input's normalisation, or folded into
                // the Conv/Linear that produces the activation
                let (ai, c_dims, c) = if op == "Scaler" {
                    let offset = attr(n, "offset")
                        .map(|a| a.floats.clone())
                        .unwrap_or_default();
                    let scale = attr(n, "scale")
                        .map(|a| a.floats.clone())
                        .unwrap_or_default();
                    (0, vec![offset.len()], [offset, scale].concat())
                } else if is_const(self, 1) && !is_const(self, 0) {
                    let (d, c) = scalar_or(self, 1)?;
                    (0, d, c)
                } else if is_const(self, 0) && !is_const(self, 1) && op == "Sub" {
                    let (d, c) = scalar_or(self, 0)?;
                    (1, d, c)
                } else {
                    return Err(gerr(format!(
                        "{op} is supported with one constant operand (x − c, c − x on the input, x / c)"
                    )));
                };
                let t = act(self, ai)?;
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
                self.affine(&name, op, output, t, &dims, &mul, &add)?;
            }
            "Identity" | "Dropout" => {
                let src = input(0)?;
                if let Some(c) = self.constant(src)? {
                    self.consts.insert(output.to_string(), c);
                } else {
                    let t = act(self, 0)?;
                    if let Some(u) = self.tensor_uses.get_mut(&t) {
                        *u = u.saturating_sub(1);
                    }
                    self.bind(output, t);
                }
            }
            "Constant" => {
                let a = n
                    .attribute
                    .first()
                    .ok_or_else(|| gerr("Constant without a value attribute".into()))?;
                let c = match a.name.as_str() {
                    "value" => load_tensor(
                        a.t.as_ref()
                            .ok_or_else(|| gerr("value attribute holds no tensor".into()))?,
                        output,
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
                        return Err(NnError::BadAttribute {
                            node: name.clone(),
                            op: op.into(),
                            attribute: other.into(),
                            reason: "only value, value_float(s), value_int(s) are supported".into(),
                        })
                    }
                };
                self.consts.insert(output.to_string(), c);
            }
            "Shape" => {
                let t = act(self, 0)?;
                let mut full: Vec<i64> = vec![1];
                full.extend(self.net.shape(t).iter().map(|&d| d as i64));
                let r = full.len() as i64;
                let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
                let s = clamp(attr_i(n, "start", 0));
                let e = clamp(attr_i(n, "end", r));
                let v = if s < e { full[s..e].to_vec() } else { vec![] };
                self.consts.insert(output.to_string(), Const::I64(v));
            }
            "Gather" => {
                let data = ints(self, 0)?;
                let idx = ints(self, 1)?;
                let r = data.len() as i64;
                let v = idx
                    .iter()
                    .map(|&i| {
                        let j = if i < 0 { i + r } else { i };
                        usize::try_from(j)
                            .ok()
                            .and_then(|j| data.get(j).copied())
                            .ok_or_else(|| gerr(format!("index {i} out of range for {data:?}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                self.consts.insert(output.to_string(), Const::I64(v));
            }
            "Unsqueeze" if self.acts.contains_key(input(0)?) => {
                let t = act(self, 0)?;
                let axes = if n.input.get(1).is_some_and(|s| !s.is_empty()) {
                    ints(self, 1)?
                } else {
                    attr_ints(n, "axes").unwrap_or_default()
                };
                let mut full = vec![1usize];
                full.extend(self.net.shape(t));
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
                    return Err(NnError::BadAttribute {
                        node: name.clone(),
                        op: op.into(),
                        attribute: "axes".into(),
                        reason: format!(
                            "{axes:?} on {full:?}: distinct axes after the batch are needed"
                        ),
                    });
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
                self.reshape_to(&name, op, output, t, &new)?;
            }
            "Unsqueeze" => {
                let v = ints(self, 0)?;
                self.consts.insert(output.to_string(), Const::I64(v));
            }
            "Concat" => {
                let mut v = Vec::new();
                for i in 0..n.input.len() {
                    v.extend(ints(self, i)?);
                }
                self.consts.insert(output.to_string(), Const::I64(v));
            }
            "Reshape" => {
                let t = act(self, 0)?;
                let target = ints(self, 1)?;
                let cur = self.net.shape(t).to_vec();
                let mut full = vec![1usize];
                full.extend(&cur);
                let numel: usize = full.iter().product();
                let allowzero = attr_i(n, "allowzero", 0) != 0;
                let mut dims: Vec<Option<usize>> = Vec::new();
                for (i, &d) in target.iter().enumerate() {
                    dims.push(match d {
                        -1 => None,
                        0 if !allowzero => Some(*full.get(i).ok_or_else(|| {
                            gerr(format!("shape {target:?}: 0 at {i} has no input dim"))
                        })?),
                        d if d >= 0 => Some(d as usize),
                        _ => return Err(gerr(format!("shape {target:?}: invalid value {d}"))),
                    });
                }
                let known = dims
                    .iter()
                    .flatten()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .ok_or_else(|| gerr(format!("shape {target:?} overflows")))?;
                let unknown = dims.iter().filter(|d| d.is_none()).count();
                let resolved: Vec<usize> = match unknown {
                    0 => dims.iter().flatten().copied().collect(),
                    1 if known > 0 && numel.is_multiple_of(known) => {
                        dims.iter().map(|d| d.unwrap_or(numel / known)).collect()
                    }
                    _ => {
                        return Err(gerr(format!(
                            "shape {target:?} cannot be resolved for input {full:?}"
                        )))
                    }
                };
                let total = resolved.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
                if total != Some(numel) || resolved.first() != Some(&1) {
                    return Err(gerr(format!(
                        "shape {target:?} does not keep the batch dimension of input {full:?}"
                    )));
                }
                self.reshape_to(&name, op, output, t, &resolved)?;
            }
            "Flatten" => {
                let t = act(self, 0)?;
                if self.net.shape(t).len() == 1 {
                    self.bind(output, t);
                } else {
                    let o = self.net.push(&name, output, Op::Flatten, vec![t])?;
                    self.bind(output, o);
                }
            }
            "ReduceMean" => {
                // x.mean([2, 3]) / AdaptiveAvgPool2d(1) as the dynamo exporter writes it:
                // the mean over the spatial axes of a [batch, C, H, W] tensor
                let t = act(self, 0)?;
                let rank = 1 + self.net.shape(t).len() as i64;
                let axes = if n.input.get(1).is_some_and(|s| !s.is_empty()) {
                    ints(self, 1)?
                } else {
                    attr_ints(n, "axes").unwrap_or_default()
                };
                let mut norm: Vec<i64> = axes
                    .iter()
                    .map(|&a| if a < 0 { a + rank } else { a })
                    .collect();
                norm.sort_unstable();
                if rank != 4 || norm != [2, 3] {
                    return Err(NnError::BadAttribute {
                        node: name.clone(),
                        op: op.into(),
                        attribute: "axes".into(),
                        reason: format!(
                            "{axes:?} on a rank-{rank} tensor: only the mean over the spatial axes [2, 3] of a [batch, C, H, W] tensor (global average pooling) is supported"
                        ),
                    });
                }
                let g = if attr_i(n, "keepdims", 1) != 0 {
                    self.net.push(&name, output, Op::GlobalAvgPool, vec![t])?
                } else {
                    let g = self.net.push(
                        &name,
                        &format!("{output}/keepdims"),
                        Op::GlobalAvgPool,
                        vec![t],
                    )?;
                    self.net
                        .push(&format!("{name}/squeeze"), output, Op::Flatten, vec![g])?
                };
                self.bind(output, g);
            }
            "Relu" | "GlobalAveragePool" => {
                let t = act(self, 0)?;
                let o = if op == "Relu" {
                    Op::Relu
                } else {
                    Op::GlobalAvgPool
                };
                let o = self.net.push(&name, output, o, vec![t])?;
                self.bind(output, o);
            }
            "MaxPool" | "AveragePool" => {
                let mut t = act(self, 0)?;
                let pads = attr_ints(n, "pads").unwrap_or_default();
                if op == "MaxPool" && pads.iter().any(|&p| p != 0) {
                    let [pt, pl, pb, pr] = pads[..] else {
                        return Err(gerr(format!("pads {pads:?}: 4 values expected")));
                    };
                    let pads = [pt as usize, pl as usize, pb as usize, pr as usize];
                    t = self.pad(&name, t, pads, PadMode::Edge)?;
                }
                let k = attr_ints(n, "kernel_shape")
                    .and_then(|k| k.first().copied())
                    .unwrap_or(1) as usize;
                let s = attr_ints(n, "strides")
                    .and_then(|k| k.first().copied())
                    .unwrap_or(1) as usize;
                let o = if op == "MaxPool" {
                    Op::MaxPool { k, stride: s }
                } else {
                    Op::AvgPool { k, stride: s }
                };
                let o = self.net.push(&name, output, o, vec![t])?;
                self.bind(output, o);
            }
            "Pad" => {
                let t = act(self, 0)?;
                let pads = if n.input.get(1).is_some_and(|s| !s.is_empty()) {
                    ints(self, 1)?
                } else {
                    attr_ints(n, "pads").ok_or_else(|| gerr("no pads".into()))?
                };
                let bad_attr = |attribute: &str, reason: String| NnError::BadAttribute {
                    node: name.clone(),
                    op: op.into(),
                    attribute: attribute.into(),
                    reason,
                };
                let zero_value = match n.input.get(2).filter(|s| !s.is_empty()) {
                    None => attr_f(n, "value", 0.0) == 0.0,
                    Some(nm) => match self.constant(nm)? {
                        Some(Const::F32 { data, .. }) => data.iter().all(|&v| v == 0.0),
                        Some(Const::I64(v)) => v.iter().all(|&v| v == 0),
                        None => false,
                    },
                };
                let mode = match attr_s(n, "mode").as_deref() {
                    None | Some("constant") => PadMode::Zero,
                    Some("edge") => PadMode::Edge,
                    Some(m) => return Err(bad_attr("mode", format!("{m:?} is not supported"))),
                };
                if mode == PadMode::Zero && !zero_value {
                    return Err(bad_attr(
                        "constant_value",
                        "only zero padding is supported".into(),
                    ));
                }
                let [0, 0, pt, pl, 0, 0, pb, pr] = pads[..] else {
                    return Err(bad_attr(
                        "pads",
                        format!(
                            "{pads:?}: expected [0, 0, top, left, 0, 0, bottom, right] on a [batch, C, H, W] input"
                        ),
                    ));
                };
                if [pt, pl, pb, pr].iter().any(|&p| p < 0) {
                    return Err(bad_attr(
                        "pads",
                        format!("{pads:?}: negative pads (cropping) are not supported"),
                    ));
                }
                let o = self.net.push(
                    &name,
                    output,
                    Op::Pad {
                        pads: [pt as usize, pl as usize, pb as usize, pr as usize],
                        mode,
                    },
                    vec![t],
                )?;
                self.bind(output, o);
            }
            "Mul" if n.input.len() == 2 && n.input[0] != n.input[1] => {
                let ci = match (is_const(self, 0), is_const(self, 1)) {
                    (false, true) => 1,
                    (true, false) => 0,
                    _ => {
                        return Err(gerr(
                            "Mul of two activations is supported only as x·x (square); Mul by a constant as normalisation or a scale folded into a Conv/Linear".into(),
                        ))
                    }
                };
                let t = act(self, 1 - ci)?;
                let (dims, c) = scalar_or(self, ci)?;
                let zeros = vec![0.0; c.len()];
                self.affine(&name, op, output, t, &dims, &c, &zeros)?;
            }
            "Mul" | "Pow" => {
                let t = act(self, 0)?;
                if op == "Pow" {
                    let nm = input(1)?;
                    let two = match self.constant(nm)? {
                        Some(Const::F32 { data, .. }) => data.len() == 1 && data[0] == 2.0,
                        Some(Const::I64(v)) => v == [2],
                        None => false,
                    };
                    if !two {
                        return Err(NnError::BadAttribute {
                            node: name.clone(),
                            op: op.into(),
                            attribute: format!("input 1 ({nm})"),
                            reason: "only a constant exponent 2 (square) is supported".into(),
                        });
                    }
                }
                let o = self.net.push(&name, output, Op::Square, vec![t])?;
                self.bind(output, o);
            }
            "Conv" => {
                let t = act(self, 0)?;
                let (wd, wv) = weight(self, 1)?;
                let bias = if n.input.get(2).is_some_and(|s| !s.is_empty()) {
                    Some(weight(self, 2)?.1)
                } else {
                    None
                };
                let xs = self.net.shape(t).to_vec();
                let [c_i, h, w] = xs[..] else {
                    return Err(NnError::Shape {
                        node: name.clone(),
                        op: op.into(),
                        what: "input X (C×H×W without batch)".into(),
                        expected: vec![0, 0, 0],
                        actual: xs,
                    });
                };
                let [c_o, wc, k_h, k_w] = wd[..] else {
                    return Err(NnError::Shape {
                        node: name.clone(),
                        op: op.into(),
                        what: format!("weight {}", input(1)?),
                        expected: vec![0, c_i, 0, 0],
                        actual: wd,
                    });
                };
                let groups = attr_i(n, "group", 1).max(1) as usize;
                if !c_i.is_multiple_of(groups) || !c_o.is_multiple_of(groups) {
                    return Err(NnError::BadAttribute {
                        node: name.clone(),
                        op: op.into(),
                        attribute: "group".into(),
                        reason: format!(
                            "{groups} does not divide {c_i} input and {c_o} output channels"
                        ),
                    });
                }
                if wc != c_i / groups {
                    return Err(NnError::Shape {
                        node: name.clone(),
                        op: op.into(),
                        what: format!("weight {}", input(1)?),
                        expected: vec![c_o, c_i / groups, k_h, k_w],
                        actual: wd,
                    });
                }
                if let Some(ks) = attr_ints(n, "kernel_shape") {
                    if ks != [k_h as i64, k_w as i64] {
                        return Err(NnError::BadAttribute {
                            node: name.clone(),
                            op: op.into(),
                            attribute: "kernel_shape".into(),
                            reason: format!("{ks:?} but the weight is {k_h}×{k_w}"),
                        });
                    }
                }
                let stride = attr_ints(n, "strides")
                    .and_then(|s| s.first().copied())
                    .unwrap_or(1) as usize;
                let pads: Vec<usize> = attr_ints(n, "pads")
                    .unwrap_or_else(|| vec![0; 4])
                    .iter()
                    .map(|&p| p as usize)
                    .collect();
                let [pt, pl, pb, pr] = pads[..] else {
                    return Err(NnError::BadAttribute {
                        node: name.clone(),
                        op: op.into(),
                        attribute: "pads".into(),
                        reason: format!("{pads:?}: 4 values expected"),
                    });
                };
                let pads = [pt, pl, pb, pr];
                // TF-SAME where it is the same function, else explicit zeros + VALID
                let (t, h, w, padding) = match conv_padding(h, w, k_h, k_w, stride, pads) {
                    Ok(padding) => (t, h, w, padding),
                    Err(_) => {
                        let p = self.pad(&name, t, pads, PadMode::Zero)?;
                        (p, pt + h + pb, pl + w + pr, Padding::Valid)
                    }
                };
                let shape = ConvShape {
                    c_i,
                    h,
                    w,
                    c_o,
                    k_h,
                    k_w,
                    stride,
                    padding,
                };
                let o = self.net.push(
                    &name,
                    output,
                    Op::Conv {
                        shape,
                        weight: wv,
                        bias,
                        groups,
                    },
                    vec![t],
                )?;
                self.bind(output, o);
            }
            "Gemm" | "MatMul" => {
                let t = act(self, 0)?;
                let xs = self.net.shape(t).to_vec();
                if xs.len() != 1 {
                    return Err(NnError::Shape {
                        node: name.clone(),
                        op: op.into(),
                        what: "input A (flat [batch, N]; insert Flatten)".into(),
                        expected: vec![xs.iter().product()],
                        actual: xs,
                    });
                }
                let cols = xs[0];
                let (bd, bv) = weight(self, 1)?;
                let trans_b = op == "Gemm" && attr_i(n, "transB", 0) != 0;
                let [d0, d1] = bd[..] else {
                    return Err(gerr(format!(
                        "weight {} has dims {bd:?}, 2-D expected",
                        input(1)?
                    )));
                };
                let (rows, bc) = if trans_b { (d0, d1) } else { (d1, d0) };
                if bc != cols {
                    return Err(NnError::Shape {
                        node: name.clone(),
                        op: op.into(),
                        what: format!("weight {} (inner dimension)", input(1)?),
                        expected: if trans_b {
                            vec![rows, cols]
                        } else {
                            vec![cols, rows]
                        },
                        actual: bd,
                    });
                }
                let alpha = if op == "Gemm" {
                    attr_f(n, "alpha", 1.0)
                } else {
                    1.0
                };
                let beta = if op == "Gemm" {
                    attr_f(n, "beta", 1.0)
                } else {
                    1.0
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
                let bias = if op == "Gemm" && n.input.get(2).is_some_and(|s| !s.is_empty()) {
                    let (_, cv) = weight(self, 2)?;
                    let b: Vec<f32> = match cv.len() {
                        1 => vec![cv[0] * beta; rows],
                        l if l == rows => cv.iter().map(|v| v * beta).collect(),
                        l => {
                            return Err(gerr(format!(
                                "bias {} has {l} values, expected {rows} or 1",
                                input(2)?
                            )))
                        }
                    };
                    Some(b)
                } else {
                    None
                };
                let o = self.net.push(
                    &name,
                    output,
                    Op::Linear {
                        rows,
                        cols,
                        weight: wt,
                        bias,
                    },
                    vec![t],
                )?;
                self.bind(output, o);
            }
            "Add" => {
                let (c0, c1) = (is_const(self, 0), is_const(self, 1));
                match (c0, c1) {
                    (false, false) => {
                        let a = act(self, 0)?;
                        let b = act(self, 1)?;
                        let o = self.net.push(&name, output, Op::Add, vec![a, b])?;
                        self.bind(output, o);
                    }
                    (true, true) => {
                        return Err(gerr("Add of two constants is not supported".into()))
                    }
                    _ => {
                        let ai = if c0 { 1 } else { 0 };
                        let t = act(self, ai)?;
                        if self.input_stage(t) {
                            let (dims, c) = scalar_or(self, 1 - ai)?;
                            let ones = vec![1.0; c.len()];
                            self.affine(&name, op, output, t, &dims, &ones, &c)?;
                        } else {
                            let (_, bv) = weight(self, 1 - ai)?;
                            self.fold_bias(&name, op, t, &bv)?;
                            if let Some(u) = self.tensor_uses.get_mut(&t) {
                                *u = u.saturating_sub(1);
                            }
                            self.bind(output, t);
                        }
                    }
                }
            }
            "BatchNormalization" => {
                let t = act(self, 0)?;
                let mut p = Vec::new();
                for i in 1..5 {
                    p.push(weight(self, i)?.1);
                }
                let eps = attr_f(n, "epsilon", 1e-5) as f64;
                self.fold_bn(&name, input(0)?, t, &p[0], &p[1], &p[2], &p[3], eps)?;
                if let Some(u) = self.tensor_uses.get_mut(&t) {
                    *u = u.saturating_sub(1);
                }
                self.bind(output, t);
            }
            _ => return Err(gerr("unsupported op".into())),
        }
        Ok(())
    }

    /// An explicit [`Op::Pad`] (node `{name}/pad`) in front of the node `name`.
    fn pad(
        &mut self,
        name: &str,
        t: TensorId,
        pads: [usize; 4],
        mode: PadMode,
    ) -> Result<TensorId, NnError> {
        let out = format!("{}/padded", self.net.tensors[t].name);
        self.net.push(
            &format!("{name}/pad"),
            &out,
            Op::Pad { pads, mode },
            vec![t],
        )
    }

    /// Whether `t` is the raw network input and this node its only reader: arithmetic
    /// with constants on it is the input's normalisation.
    fn input_stage(&self, t: TensorId) -> bool {
        t == 0 && self.net.nodes.is_empty() && self.tensor_uses.get(&0).copied() == Some(1)
    }

    /// `output = t·mul + add` elementwise (`mul`, `add` of dims `dims`, broadcast): on
    /// the raw input it becomes the network's [`InputAffine`]; after a Conv/Linear whose
    /// only reader is this node, with per-channel constants, it is folded into its
    /// weights and bias.
    #[allow(clippy::too_many_arguments)]
    fn affine(
        &mut self,
        name: &str,
        op: &str,
        output: &str,
        t: TensorId,
        dims: &[usize],
        mul: &[f32],
        add: &[f32],
    ) -> Result<(), NnError> {
        let mut full = vec![1usize];
        full.extend(self.net.shape(t));
        let (Some(m), Some(a)) = (
            broadcast_const(dims, mul, &full),
            broadcast_const(dims, add, &full),
        ) else {
            return Err(NnError::Graph {
                node: name.into(),
                op: op.into(),
                reason: format!("a constant of dims {dims:?} does not broadcast to {full:?}"),
            });
        };
        if self.input_stage(t) {
            let cur = self
                .net
                .input_affine
                .take()
                .unwrap_or_else(|| InputAffine::identity(m.len()));
            self.net.input_affine = Some(InputAffine {
                mul: cur.mul.iter().zip(&m).map(|(x, y)| x * y).collect(),
                add: cur
                    .add
                    .iter()
                    .zip(m.iter().zip(&a))
                    .map(|(x, (y, z))| x * y + z)
                    .collect(),
            });
        } else {
            let Some(i) = self.foldable(t) else {
                return Err(NnError::Graph {
                    node: name.into(),
                    op: op.into(),
                    reason: format!(
                        "arithmetic with a constant is supported on the network input (normalisation) or folded into a Conv/MatMul/Gemm whose only consumer is this node; the activation comes from {}",
                        self.producer_desc(t)
                    ),
                });
            };
            // one factor and offset per output channel (constant over its positions)
            let channels = full[1];
            let per = m.len() / channels.max(1);
            let per_channel = |v: &[f32]| -> Option<Vec<f32>> {
                v.chunks(per.max(1))
                    .map(|c| c.iter().all(|&x| x == c[0]).then_some(c[0]))
                    .collect()
            };
            let (Some(mc), Some(ac)) = (per_channel(&m), per_channel(&a)) else {
                return Err(NnError::Graph {
                    node: name.into(),
                    op: op.into(),
                    reason: "only per-channel constants fold into a Conv/Linear".into(),
                });
            };
            let Some((weight, bias, n)) = weight_and_bias(&mut self.net.nodes[i].op) else {
                return Err(NnError::Graph {
                    node: name.into(),
                    op: op.into(),
                    reason: "internal: the fold target is not a Conv/Linear".into(),
                });
            };
            if mc.len() != n {
                return Err(NnError::Graph {
                    node: name.into(),
                    op: op.into(),
                    reason: format!("{} channel constants for {n} channels", mc.len()),
                });
            }
            let wper = weight.len() / n;
            let b = bias.get_or_insert_with(|| vec![0.0; n]);
            for c in 0..n {
                for w in &mut weight[c * wper..(c + 1) * wper] {
                    *w *= mc[c];
                }
                b[c] = b[c] * mc[c] + ac[c];
            }
        }
        if let Some(u) = self.tensor_uses.get_mut(&t) {
            *u = u.saturating_sub(1);
        }
        self.bind(output, t);
        Ok(())
    }

    /// `output` is `t` with the full ONNX shape `full` (batch first): the same tensor, a
    /// Flatten, or a [`Op::Reshape`].
    fn reshape_to(
        &mut self,
        name: &str,
        op: &str,
        output: &str,
        t: TensorId,
        full: &[usize],
    ) -> Result<(), NnError> {
        let cur = self.net.shape(t).to_vec();
        if full.first() != Some(&1)
            || full.iter().product::<usize>() != cur.iter().product::<usize>()
        {
            return Err(NnError::Graph {
                node: name.into(),
                op: op.into(),
                reason: format!(
                    "shape {full:?} does not keep the batch dimension and the elements of [1, {}]",
                    cur.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let rest = full[1..].to_vec();
        if rest == cur {
            if let Some(u) = self.tensor_uses.get_mut(&t) {
                *u = u.saturating_sub(1);
            }
            self.bind(output, t);
        } else {
            let o = if rest.len() == 1 {
                Op::Flatten
            } else {
                Op::Reshape { shape: rest }
            };
            let o = self.net.push(name, output, o, vec![t])?;
            self.bind(output, o);
        }
        Ok(())
    }

    /// The index of the Conv/Linear node producing `t`, when `t` has exactly one consumer.
    fn foldable(&self, t: TensorId) -> Option<usize> {
        let i = self.net.nodes.iter().position(|n| n.output == t)?;
        let only = self.tensor_uses.get(&t).copied().unwrap_or(0) == 1;
        (only && matches!(self.net.nodes[i].op, Op::Conv { .. } | Op::Linear { .. })).then_some(i)
    }

    fn producer_desc(&self, t: TensorId) -> String {
        match self.net.nodes.iter().find(|n| n.output == t) {
            Some(n) => format!(
                "{} ({}, {} consumer(s))",
                n.name,
                n.op.kind(),
                self.tensor_uses.get(&t).copied().unwrap_or(0)
            ),
            None => "the network input".into(),
        }
    }

    fn fold_bias(&mut self, name: &str, op: &str, t: TensorId, b: &[f32]) -> Result<(), NnError> {
        let Some(i) = self.foldable(t) else {
            return Err(NnError::Graph {
                node: name.into(),
                op: op.into(),
                reason: format!(
                    "Add of a constant is only supported as the bias of a Conv/MatMul/Gemm whose only consumer is this Add; the activation comes from {}",
                    self.producer_desc(t)
                ),
            });
        };
        let Some((_, bias, n)) = weight_and_bias(&mut self.net.nodes[i].op) else {
            return Ok(());
        };
        if b.len() != n && b.len() != 1 {
            return Err(NnError::Graph {
                node: name.into(),
                op: op.into(),
                reason: format!(
                    "bias has {} values, expected {n} (one per output channel) or 1",
                    b.len()
                ),
            });
        }
        let cur = bias.get_or_insert_with(|| vec![0.0; n]);
        for (j, v) in cur.iter_mut().enumerate() {
            *v += if b.len() == 1 { b[0] } else { b[j] };
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn fold_bn(
        &mut self,
        name: &str,
        input: &str,
        t: TensorId,
        gamma: &[f32],
        beta: &[f32],
        mean: &[f32],
        var: &[f32],
        eps: f64,
    ) -> Result<(), NnError> {
        let Some(i) = self.foldable(t) else {
            return Err(NnError::BatchNormNotFoldable {
                node: name.into(),
                input: input.into(),
                producer: self.producer_desc(t),
            });
        };
        let Some((weight, bias, n)) = weight_and_bias(&mut self.net.nodes[i].op) else {
            return Ok(());
        };
        for (what, v) in [("scale", gamma), ("B", beta), ("mean", mean), ("var", var)] {
            if v.len() != n {
                return Err(NnError::Graph {
                    node: name.into(),
                    op: "BatchNormalization".into(),
                    reason: format!("{what} has {} values, expected {n} channels", v.len()),
                });
            }
        }
        let per = weight.len() / n;
        let b = bias.get_or_insert_with(|| vec![0.0; n]);
        for c in 0..n {
            let f = gamma[c] as f64 / (var[c] as f64 + eps).sqrt();
            for w in &mut weight[c * per..(c + 1) * per] {
                *w = (*w as f64 * f) as f32;
            }
            b[c] = ((b[c] as f64 - mean[c] as f64) * f + beta[c] as f64) as f32;
        }
        Ok(())
    }
}

/// A Conv's or Linear's weights, bias and output channels (rows).
type WeightAndBias<'a> = (&'a mut Vec<f32>, &'a mut Option<Vec<f32>>, usize);

/// The weights, bias and output channels (rows) of a Conv or Linear op; `None` for
/// any other op.
fn weight_and_bias(op: &mut Op) -> Option<WeightAndBias<'_>> {
    match op {
        Op::Conv {
            shape,
            weight,
            bias,
            ..
        } => Some((weight, bias, shape.c_o)),
        Op::Linear {
            rows, weight, bias, ..
        } => Some((weight, bias, *rows)),
        _ => None,
    }
}
