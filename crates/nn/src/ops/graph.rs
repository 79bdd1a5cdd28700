//! The importer's state while it walks a graph: the float IR being built, which ONNX
//! value is which IR tensor or constant, the output head, and the folds (BatchNorm, a
//! bias, per-channel constants into the producing Conv/Linear; constants on the raw input
//! into the network's [`InputAffine`]) that the ops share.

use std::collections::HashMap;

use tract_onnx::pb::{self, tensor_proto::DataType};

use crate::error::NnError;
use crate::head::{Head, HeadData, HeadNode, HeadOp, HeadSrc, HeadValue};
use crate::ir::{InputAffine, Network, Op, PadMode, TensorId};
use crate::tensor_proto::{broadcast_const, load_tensor, string_tensor, Const};

use super::OnnxNode;

/// The importer's state (see the module docs).
pub(crate) struct Graph<'g> {
    graph: &'g pb::GraphProto,
    pub(crate) net: Network,
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
    /// The private tensor the head reads.
    head_source: Option<TensorId>,
}

impl<'g> Graph<'g> {
    /// The state before the first node: the graph's one input bound to tensor 0.
    pub(crate) fn new(graph: &'g pb::GraphProto) -> Result<Self, NnError> {
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
        let mut b = Graph {
            graph,
            net,
            acts: HashMap::new(),
            consts: HashMap::new(),
            inits,
            uses,
            tensor_uses: HashMap::new(),
            head: Head::default(),
            head_values: HashMap::new(),
            head_source: None,
        };
        b.bind(&input.name, 0);
        Ok(b)
    }

    /// ONNX value `name` is IR tensor `t`.
    pub(crate) fn bind(&mut self, name: &str, t: TensorId) {
        self.acts.insert(name.to_string(), t);
        let u = self.uses.get(name).copied().unwrap_or(0);
        *self.tensor_uses.entry(t).or_default() += u;
    }

    /// The network, once every node is imported: every graph output is a head value or
    /// the one private tensor the head reads.
    pub(crate) fn finish(mut self) -> Result<Network, NnError> {
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
    pub(crate) fn head_src(
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
        if v.shape.iter().product::<usize>() != v.data.len() {
            return Err(gerr(format!(
                "constant {name} has dims {:?} that do not match its values",
                v.shape
            )));
        }
        Ok(HeadSrc::Const(v))
    }

    /// Node `n`'s output is `op` of `inputs`: a new IR node, named after `n`.
    pub(crate) fn emit(
        &mut self,
        n: &OnnxNode,
        op: Op,
        inputs: Vec<TensorId>,
    ) -> Result<(), NnError> {
        let output = n.output()?;
        let t = self.net.push(&n.name, output, op, inputs)?;
        self.bind(output, t);
        Ok(())
    }

    /// ONNX value `output` is the same tensor as `t` (Identity, a fold, a reshape that
    /// changes nothing): `t`'s reader that produced it is not counted as a use.
    pub(crate) fn alias(&mut self, output: &str, t: TensorId) {
        if let Some(u) = self.tensor_uses.get_mut(&t) {
            *u = u.saturating_sub(1);
        }
        self.bind(output, t);
    }

    /// Whether node `n` belongs to the output head: a head-only op, or it reads a head
    /// value.
    pub(crate) fn in_head(&self, n: &OnnxNode) -> bool {
        n.def.head_only()
            || n.proto
                .input
                .iter()
                .any(|i| self.head_values.contains_key(i))
    }

    /// Input `i` of `n`: an activation computed from the network input.
    pub(crate) fn act(&self, n: &OnnxNode, i: usize) -> Result<TensorId, NnError> {
        let nm = n.input(i)?;
        self.acts.get(nm).copied().ok_or_else(|| {
            n.graph_error(format!(
                "input {i} ({nm}) is not an activation computed from the network input"
            ))
        })
    }

    /// Whether input `i` of `n` is an activation (not a constant).
    pub(crate) fn is_act(&self, n: &OnnxNode, i: usize) -> bool {
        n.proto
            .input
            .get(i)
            .is_some_and(|s| self.acts.contains_key(s))
    }

    /// Input `i` of `n`: a float constant (weights), with its dims.
    pub(crate) fn weight(
        &mut self,
        n: &OnnxNode,
        i: usize,
    ) -> Result<(Vec<usize>, Vec<f32>), NnError> {
        let nm = n.input(i)?;
        match self.constant(nm)? {
            Some(Const::F32 { dims, data }) => Ok((dims, data)),
            Some(Const::I64(_)) => Err(n.graph_error(format!(
                "input {i} ({nm}) is an integer constant, float expected"
            ))),
            None => Err(n.graph_error(format!(
                "input {i} ({nm}) must be an initializer/Constant (weights)"
            ))),
        }
    }

    /// Input `i` of `n`: a constant integer tensor.
    pub(crate) fn ints(&mut self, n: &OnnxNode, i: usize) -> Result<Vec<i64>, NnError> {
        let nm = n.input(i)?;
        match self.constant(nm)? {
            Some(Const::I64(v)) => Ok(v),
            _ => Err(n.graph_error(format!("input {i} ({nm}) must be a constant int tensor"))),
        }
    }

    /// Input `i` of `n`: a constant, integers taken as floats (normalisation constants
    /// and folds into a Conv/Linear).
    pub(crate) fn float_const(
        &mut self,
        n: &OnnxNode,
        i: usize,
    ) -> Result<(Vec<usize>, Vec<f32>), NnError> {
        match self.constant(n.input(i)?)? {
            Some(Const::F32 { dims, data }) => Ok((dims, data)),
            Some(Const::I64(v)) => Ok((vec![v.len()], v.iter().map(|&x| x as f32).collect())),
            None => Err(n.graph_error(format!("input {i} must be a constant"))),
        }
    }

    /// Whether input `i` of `n` is a constant.
    pub(crate) fn is_const(&self, n: &OnnxNode, i: usize) -> bool {
        n.proto
            .input
            .get(i)
            .is_some_and(|s| self.consts.contains_key(s) || self.inits.contains_key(s.as_str()))
    }

    /// Integer parameters given as input `i` (newer opsets) or as the attribute
    /// `attr_name` (older ones).
    pub(crate) fn ints_input_or_attribute(
        &mut self,
        n: &OnnxNode,
        i: usize,
        attr_name: &str,
    ) -> Result<Option<Vec<i64>>, NnError> {
        if n.has_input(i) {
            self.ints(n, i).map(Some)
        } else {
            Ok(n.ints(attr_name))
        }
    }

    /// Node `n`'s output is the constant `c`.
    pub(crate) fn set_constant(&mut self, n: &OnnxNode, c: Const) -> Result<(), NnError> {
        self.consts.insert(n.output()?.to_string(), c);
        Ok(())
    }

    /// Node `n` of the output head: its op (from the op's `head`) with its data inputs,
    /// its outputs new head values.
    pub(crate) fn head_node(&mut self, n: &OnnxNode) -> Result<(), NnError> {
        let Some(head) = n.def.head else {
            return Err(n.graph_error(format!(
                "{} reads a value of the output head; only {} and {} may form a head",
                n.op(),
                super::head_only_ops(", "),
                super::head_also_ops(", ")
            )));
        };
        let (op, data_inputs): (HeadOp, usize) = head(self, n)?;
        let gerr = |reason: String| n.graph_error(reason);
        let mut inputs = Vec::new();
        for i in 0..data_inputs {
            let x = n.input(i)?;
            inputs.push(self.head_src(x, &gerr)?);
        }
        let mut outputs = Vec::new();
        for o in n.proto.output.iter().filter(|o| !o.is_empty()) {
            let id = self.head.values;
            self.head.values += 1;
            self.head_values.insert(o.clone(), id);
            outputs.push(id);
        }
        self.head.nodes.push(HeadNode {
            name: n.name.clone(),
            op,
            inputs,
            outputs,
        });
        Ok(())
    }

    /// The constant `name` (an initializer, a `Constant`'s output or folded shape
    /// arithmetic), loaded on first use.
    pub(crate) fn constant(&mut self, name: &str) -> Result<Option<Const>, NnError> {
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

    /// An explicit [`Op::Pad`] (node `{name}/pad`) in front of the node `name`.
    pub(crate) fn pad(
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
    pub(crate) fn input_stage(&self, t: TensorId) -> bool {
        t == 0 && self.net.nodes.is_empty() && self.tensor_uses.get(&0).copied() == Some(1)
    }

    /// `output = t·mul + add` elementwise (`mul`, `add` of dims `dims`, broadcast): on
    /// the raw input it becomes the network's [`InputAffine`]; after a Conv/Linear whose
    /// only reader is this node, with per-channel constants, it is folded into its
    /// weights and bias.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn affine(
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
        self.alias(output, t);
        Ok(())
    }

    /// `output` is `t` with the full ONNX shape `full` (batch first): the same tensor, a
    /// Flatten, or a [`Op::Reshape`].
    pub(crate) fn reshape_to(
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
            self.alias(output, t);
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
    pub(crate) fn foldable(&self, t: TensorId) -> Option<usize> {
        let i = self.net.nodes.iter().position(|n| n.output == t)?;
        let only = self.tensor_uses.get(&t).copied().unwrap_or(0) == 1;
        (only && matches!(self.net.nodes[i].op, Op::Conv { .. } | Op::Linear { .. })).then_some(i)
    }

    pub(crate) fn producer_desc(&self, t: TensorId) -> String {
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

    pub(crate) fn fold_bias(
        &mut self,
        name: &str,
        op: &str,
        t: TensorId,
        b: &[f32],
    ) -> Result<(), NnError> {
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
    pub(crate) fn fold_bn(
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
