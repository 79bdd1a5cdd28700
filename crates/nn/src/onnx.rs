//! ONNX import: `ModelProto` (as produced by `torch.onnx.export`, opsets 13–20, the
//! TorchScript and the dynamo exporters; skl2onnx's ONNX-ML `Scaler` and label lookup) →
//! [`Network`]. This module is the graph walk; what each op means is in its file under
//! [`crate::ops`], registered in one table.
//!
//! Import runs in two passes. The first only looks at op types and attributes and collects
//! **every** unsupported construct into one [`NnError::Unsupported`] before anything is
//! loaded: an op the table does not hold, an attribute of another type than its op reads
//! it as, an attribute value its op's check refuses, an op after the output head's start
//! that a head cannot hold. The second walks the (topologically sorted) nodes, loads
//! initializers, infers shapes (batch dimension dropped, symbolic or not) and builds the
//! IR: each node goes to its op's import, or — for the ops only a head has and every node
//! that reads a head value — to its op's head form.
//!
//! Initializers may lie in an external data file beside the model (ONNX `external_data`,
//! what torch >= 2.9 writes by default): [`import`] reads them from the model's directory.
//!
//! Everything else — including a `Softmax` before the last private layer, which is never
//! dropped silently — is rejected, naming the node, its op type and the attribute.

use std::collections::HashSet;
use std::path::Path;

use prost::Message;
use tract_onnx::pb::{self, ModelProto};

use crate::error::{NnError, Unsupported};
use crate::ir::Network;
use crate::ops::{self, Graph, OnnxNode};
use crate::tensor_proto::load_external_data;

pub use crate::ops::conv_padding;

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
    let opset = model
        .opset_import
        .iter()
        .find(|o| ops::is_default_domain(&o.domain))
        .map_or(13, |o| o.version);
    let issues = check_supported(graph, opset);
    if !issues.is_empty() {
        return Err(NnError::Unsupported(issues));
    }
    let mut g = Graph::new(graph)?;
    for (idx, proto) in graph.node.iter().enumerate() {
        let Some(def) = ops::find(&proto.domain, &proto.op_type) else {
            // the first pass has refused it
            return Err(NnError::Graph {
                node: ops::node_name(proto, idx),
                op: proto.op_type.clone(),
                reason: ops::refusal(&proto.domain, &proto.op_type),
            });
        };
        let n = OnnxNode::new(proto, idx, def, opset);
        if g.in_head(&n) {
            g.head_node(&n)?;
        } else if let Some(import) = def.import {
            import(&mut g, &n)?;
        }
    }
    g.finish()
}

/// The nodes of the output head: a head-only op and every node that reads (directly
/// or through others) a value one of them computes.
fn head_nodes(graph: &pb::GraphProto) -> HashSet<usize> {
    let mut values: HashSet<&str> = HashSet::new();
    let mut nodes = HashSet::new();
    for (i, n) in graph.node.iter().enumerate() {
        let head_only = ops::find(&n.domain, &n.op_type).is_some_and(|d| d.head_only());
        if head_only || n.input.iter().any(|x| values.contains(x.as_str())) {
            nodes.insert(i);
            values.extend(n.output.iter().map(String::as_str));
        }
    }
    nodes
}

/// Pass 1: every unsupported op / attribute of the graph.
fn check_supported(graph: &pb::GraphProto, opset: i64) -> Vec<Unsupported> {
    let mut out = Vec::new();
    let head = head_nodes(graph);
    for (idx, proto) in graph.node.iter().enumerate() {
        let name = ops::node_name(proto, idx);
        let op = proto.op_type.as_str();
        let mut bad = |attribute: Option<&str>, reason: String| {
            out.push(Unsupported {
                node: name.clone(),
                op: op.to_string(),
                attribute: attribute.map(str::to_string),
                reason,
            })
        };
        let Some(def) = ops::find(&proto.domain, op) else {
            bad(None, ops::refusal(&proto.domain, op));
            continue;
        };
        let n = OnnxNode::new(proto, idx, def, opset);
        // an attribute of the wrong type is reported alone: its value is not read
        let mistyped = n.mistyped_attributes();
        if !mistyped.is_empty() {
            for (attribute, reason) in mistyped {
                bad(Some(&attribute), reason);
            }
            continue;
        }
        if head.contains(&idx) {
            // the client computes it on the revealed output; attributes are checked
            // when the head is built
            if def.head.is_none() {
                bad(
                    None,
                    format!(
                        "{op} reads a value of the output head (after {}); only {} may follow them (a Softmax or ArgMax before the network's last layer is not supported)",
                        ops::head_only_ops("/"),
                        ops::head_also_ops(", ")
                    ),
                );
            }
            continue;
        }
        let mut findings = Vec::new();
        (def.check)(&n, &mut findings);
        for f in findings {
            bad(f.attribute, f.reason);
        }
    }
    out
}
