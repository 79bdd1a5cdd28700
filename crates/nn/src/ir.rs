//! The float IR: a topologically sorted DAG of nodes over tensors with explicit shapes.
//!
//! The batch dimension is dropped everywhere: the network input is `C×H×W` (images) or `N`
//! (vectors), all data is NCHW / row-major. Tensor `0` is the network input; node `i`'s output
//! is a fresh tensor created by [`Network::push`], which also infers and checks shapes, so
//! every node only reads tensors created before it.
//!
//! Ops ([`Op`]): `Conv` (TF-SAME or VALID padding, see [`kernels::Padding`]), `Linear`
//! (`y = W·x + b`, `W` rows×cols row-major), `Relu`, `MaxPool`/`AvgPool` (square `k×k`
//! windows, stride `s`, no padding: output `floor((h−k)/s)+1`), `GlobalAvgPool`
//! (`C×H×W → C×1×1`), `Add` (two activations of the same shape), `Flatten`
//! (`C×H×W → C·H·W`, identity on the row-major data), `Square` and `Pad` (explicit
//! spatial padding of a `C×H×W` tensor, [`PadMode`]: zeros, or the nearest edge value).
//! The importer turns a convolution whose ONNX pads are not TF-SAME into `Pad` (zeros) +
//! a VALID `Conv`, and a padded `MaxPool` into `Pad` (edge) + `MaxPool` (see
//! [`crate::onnx`]).
//! `Reshape` relabels a tensor's shape (row-major data unchanged); `Clip` clamps to
//! `[min, max]` (ReLU6 is `Clip(0, 6)`).
//! BatchNormalization is folded into the preceding Conv/Linear at import; Identity and
//! Dropout are removed. Elementwise arithmetic with constants directly on the network
//! input (normalisation) becomes the network's [`InputAffine`], applied by the client
//! before quantisation; what follows the last private tensor (Softmax, ArgMax, a label
//! lookup, …) becomes the [`crate::head::Head`], applied by the client to its revealed
//! output.

use kernels::{ConvShape, Padding};
use serde::{Deserialize, Serialize};

use crate::error::NnError;

/// Index of a tensor in [`Network::tensors`] (or `Program::tensors`).
pub type TensorId = usize;

/// A tensor: a name (the ONNX value name where there is one) and its shape without batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorDesc {
    /// Name.
    pub name: String,
    /// Shape (no batch dimension).
    pub shape: Vec<usize>,
}

/// What [`Op::Pad`] (and `quant::Step::Pad`) writes into the padded border.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PadMode {
    /// Zeros (ONNX `Pad` mode `constant` with value 0; the implicit padding of `Conv`).
    Zero,
    /// The nearest element of the same channel (ONNX `Pad` mode `edge`): output
    /// `(c, y, x)` = input `(c, clamp(y − top, 0, h−1), clamp(x − left, 0, w−1))`. A max
    /// pool whose every window holds at least one real element (each pad `< k`) gives on
    /// an edge-padded tensor exactly the max over the real elements only, as ONNX/PyTorch
    /// define a padded `MaxPool` (the replicated value lies in the same window).
    Edge,
}

/// A float operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// 2-D convolution; `weight` is `c_o×(c_i/groups)×k_h×k_w`, `bias` has `c_o`
    /// entries. With `groups` G > 1 output channel `o` reads only the input channels
    /// of its group `o / (c_o/G)` (depthwise: G = c_i).
    Conv {
        /// Geometry.
        shape: ConvShape,
        /// Filters.
        weight: Vec<f32>,
        /// Per-output-channel bias.
        bias: Option<Vec<f32>>,
        /// Groups (1: a dense convolution).
        #[serde(default = "one")]
        groups: usize,
    },
    /// `y = W·x + b`, `W` is `rows×cols` row-major; the input is read in row-major order.
    Linear {
        /// Outputs.
        rows: usize,
        /// Inputs.
        cols: usize,
        /// Weights.
        weight: Vec<f32>,
        /// Bias (`rows`).
        bias: Option<Vec<f32>>,
    },
    /// `max(x, 0)`.
    Relu,
    /// `k×k` max pooling with stride `stride`, no padding.
    MaxPool {
        /// Window side.
        k: usize,
        /// Stride.
        stride: usize,
    },
    /// `k×k` average pooling with stride `stride`, no padding.
    AvgPool {
        /// Window side.
        k: usize,
        /// Stride.
        stride: usize,
    },
    /// Mean over each channel: `C×H×W → C×1×1`.
    GlobalAvgPool,
    /// Elementwise sum of two activations.
    Add,
    /// `C×H×W → C·H·W`.
    Flatten,
    /// `x²`.
    Square,
    /// Spatial padding of a `C×H×W` tensor to `C×(top+H+bottom)×(left+W+right)`.
    Pad {
        /// `[top, left, bottom, right]` (ONNX's 2-D `pads` order).
        pads: [usize; 4],
        /// What the border holds.
        mode: PadMode,
    },
    /// The same row-major data with another shape (as many elements).
    Reshape {
        /// The new shape.
        shape: Vec<usize>,
    },
    /// `min(max(x, min), max)`; no upper bound when `max` is `None`.
    Clip {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: Option<f32>,
    },
}

fn one() -> usize {
    1
}

/// `x·mul + add` elementwise on the network input (its full length), before anything is
/// quantised: the input normalisation a graph does with constants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputAffine {
    /// Factors.
    pub mul: Vec<f32>,
    /// Offsets.
    pub add: Vec<f32>,
}

impl InputAffine {
    /// The identity on `n` elements.
    pub fn identity(n: usize) -> Self {
        InputAffine {
            mul: vec![1.0; n],
            add: vec![0.0; n],
        }
    }
    /// Applies the map (computed in f64).
    pub fn apply(&self, x: &[f32]) -> Vec<f32> {
        x.iter()
            .zip(self.mul.iter().zip(&self.add))
            .map(|(&v, (&m, &a))| (v as f64 * m as f64 + a as f64) as f32)
            .collect()
    }
    /// The smallest and largest value of element `i` for inputs in `[lo, hi]`, over all
    /// elements.
    pub fn range(&self, lo: f32, hi: f32) -> (f64, f64) {
        self.mul
            .iter()
            .zip(&self.add)
            .map(|(&m, &a)| {
                let (x, y) = (
                    lo as f64 * m as f64 + a as f64,
                    hi as f64 * m as f64 + a as f64,
                );
                (x.min(y), x.max(y))
            })
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), (x, y)| {
                (l.min(x), h.max(y))
            })
    }
}

impl Op {
    /// A short name for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Conv { .. } => "Conv",
            Op::Linear { .. } => "Linear",
            Op::Relu => "Relu",
            Op::MaxPool { .. } => "MaxPool",
            Op::AvgPool { .. } => "AvgPool",
            Op::GlobalAvgPool => "GlobalAvgPool",
            Op::Add => "Add",
            Op::Flatten => "Flatten",
            Op::Square => "Square",
            Op::Pad { .. } => "Pad",
            Op::Reshape { .. } => "Reshape",
            Op::Clip { .. } => "Clip",
        }
    }
}

/// A node: `output = op(inputs)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Name (the ONNX node name, or the name of the node a folded BN/bias went into).
    pub name: String,
    /// The operation.
    pub op: Op,
    /// Input tensors (two for `Add`, one otherwise).
    pub inputs: Vec<TensorId>,
    /// Output tensor.
    pub output: TensorId,
}

/// A float network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// All tensors; `tensors[0]` is the input.
    pub tensors: Vec<TensorDesc>,
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// The output tensor.
    pub output: TensorId,
    /// Normalisation of the raw input (applied before quantisation), if the graph does one.
    #[serde(default)]
    pub input_affine: Option<InputAffine>,
    /// What the graph computes after [`Network::output`] (evaluated by the client), and
    /// the graph's outputs by name.
    #[serde(default)]
    pub head: crate::head::Head,
}

fn pooled(h: usize, k: usize, s: usize) -> usize {
    (h - k) / s + 1
}

impl Network {
    /// A network with only its input (`shape` without batch); the output is the input until
    /// nodes are pushed.
    pub fn new(input_name: &str, input_shape: Vec<usize>) -> Self {
        Network {
            tensors: vec![TensorDesc {
                name: input_name.to_string(),
                shape: input_shape,
            }],
            nodes: Vec::new(),
            output: 0,
            input_affine: None,
            head: crate::head::Head::default(),
        }
    }

    /// The input shape.
    pub fn input_shape(&self) -> &[usize] {
        &self.tensors[0].shape
    }

    /// The shape of tensor `t`.
    pub fn shape(&self, t: TensorId) -> &[usize] {
        &self.tensors[t].shape
    }

    /// Appends `op(inputs)` as a new node named `name` producing a tensor named `out_name`;
    /// checks the inputs' shapes and the op's parameters, sets the network output to the new
    /// tensor and returns it.
    pub fn push(
        &mut self,
        name: &str,
        out_name: &str,
        op: Op,
        inputs: Vec<TensorId>,
    ) -> Result<TensorId, NnError> {
        let shape = self.infer(name, &op, &inputs)?;
        let output = self.tensors.len();
        self.tensors.push(TensorDesc {
            name: out_name.to_string(),
            shape,
        });
        self.nodes.push(Node {
            name: name.to_string(),
            op,
            inputs,
            output,
        });
        self.output = output;
        Ok(output)
    }

    /// Re-checks every node's shapes (for networks built or edited by hand).
    pub fn validate(&self) -> Result<(), NnError> {
        for (i, n) in self.nodes.iter().enumerate() {
            if n.inputs.iter().any(|&t| t >= n.output) || n.output >= self.tensors.len() {
                return Err(NnError::Graph {
                    node: n.name.clone(),
                    op: n.op.kind().into(),
                    reason: format!("node {i} is not in topological order"),
                });
            }
            let shape = self.infer(&n.name, &n.op, &n.inputs)?;
            if shape != self.tensors[n.output].shape {
                return Err(NnError::Shape {
                    node: n.name.clone(),
                    op: n.op.kind().into(),
                    what: "output".into(),
                    expected: shape,
                    actual: self.tensors[n.output].shape.clone(),
                });
            }
        }
        if self.output >= self.tensors.len() {
            return Err(NnError::Graph {
                node: "<graph>".into(),
                op: "output".into(),
                reason: format!("output tensor {} does not exist", self.output),
            });
        }
        Ok(())
    }

    fn infer(&self, name: &str, op: &Op, inputs: &[TensorId]) -> Result<Vec<usize>, NnError> {
        let kind = op.kind();
        let want = if matches!(op, Op::Add) { 2 } else { 1 };
        if inputs.len() != want || inputs.iter().any(|&t| t >= self.tensors.len()) {
            return Err(NnError::Graph {
                node: name.into(),
                op: kind.into(),
                reason: format!(
                    "expected {want} existing input tensor(s), got {:?} ({} tensors exist)",
                    inputs,
                    self.tensors.len()
                ),
            });
        }
        let x = &self.tensors[inputs[0]].shape;
        let shape_err = |what: &str, expected: Vec<usize>| NnError::Shape {
            node: name.into(),
            op: kind.into(),
            what: what.into(),
            expected,
            actual: x.clone(),
        };
        let param_err = |attribute: &str, reason: String| NnError::BadAttribute {
            node: name.into(),
            op: kind.into(),
            attribute: attribute.into(),
            reason,
        };
        let chw = |x: &Vec<usize>| -> Result<(usize, usize, usize), NnError> {
            match x.as_slice() {
                [c, h, w] => Ok((*c, *h, *w)),
                _ => Err(shape_err("input (C×H×W)", vec![0, 0, 0])),
            }
        };
        Ok(match op {
            Op::Conv {
                shape,
                weight,
                bias,
                groups,
            } => {
                let (c, h, w) = chw(x)?;
                if *groups == 0
                    || !shape.c_i.is_multiple_of(*groups)
                    || !shape.c_o.is_multiple_of(*groups)
                {
                    return Err(param_err(
                        "group",
                        format!(
                            "{groups} groups do not divide {} input and {} output channels",
                            shape.c_i, shape.c_o
                        ),
                    ));
                }
                if (c, h, w) != (shape.c_i, shape.h, shape.w) {
                    return Err(shape_err("input", vec![shape.c_i, shape.h, shape.w]));
                }
                if shape.stride == 0 || shape.k_h == 0 || shape.k_w == 0 || shape.c_o == 0 {
                    return Err(param_err(
                        "kernel_shape/strides",
                        format!("zero kernel, stride or channel count in {shape:?}"),
                    ));
                }
                if shape.padding == Padding::Valid && (shape.k_h > h || shape.k_w > w) {
                    return Err(param_err(
                        "kernel_shape",
                        format!(
                            "kernel {}×{} larger than the {h}×{w} input",
                            shape.k_h, shape.k_w
                        ),
                    ));
                }
                let nw = shape.c_o * (shape.c_i / groups) * shape.k_h * shape.k_w;
                if weight.len() != nw {
                    return Err(param_err(
                        "weight",
                        format!("{} values, expected {nw}", weight.len()),
                    ));
                }
                if let Some(b) = bias {
                    if b.len() != shape.c_o {
                        return Err(param_err(
                            "bias",
                            format!("{} values, expected {}", b.len(), shape.c_o),
                        ));
                    }
                }
                let (ho, wo, _, _) = kernels::reference::conv_output(shape);
                vec![shape.c_o, ho, wo]
            }
            Op::Linear {
                rows,
                cols,
                weight,
                bias,
            } => {
                if x.iter().product::<usize>() != *cols {
                    return Err(shape_err("input", vec![*cols]));
                }
                if weight.len() != rows * cols {
                    return Err(param_err(
                        "weight",
                        format!("{} values, expected {}", weight.len(), rows * cols),
                    ));
                }
                if let Some(b) = bias {
                    if b.len() != *rows {
                        return Err(param_err(
                            "bias",
                            format!("{} values, expected {rows}", b.len()),
                        ));
                    }
                }
                vec![*rows]
            }
            Op::Relu | Op::Square => x.clone(),
            Op::Clip { min, max } => {
                if !min.is_finite() || max.is_some_and(|m| !m.is_finite() || m <= *min) {
                    return Err(param_err(
                        "min/max",
                        format!("[{min}, {max:?}]: a finite min below a finite max (or none)"),
                    ));
                }
                x.clone()
            }
            Op::Reshape { shape } => {
                if shape.iter().product::<usize>() != x.iter().product::<usize>() {
                    return Err(param_err(
                        "shape",
                        format!("{shape:?} does not hold the {x:?} input's elements"),
                    ));
                }
                shape.clone()
            }
            Op::MaxPool { k, stride } | Op::AvgPool { k, stride } => {
                let (c, h, w) = chw(x)?;
                if *k == 0 || *stride == 0 || *k > h || *k > w {
                    return Err(param_err(
                        "kernel_shape",
                        format!("window {k} stride {stride} does not fit the {h}×{w} input"),
                    ));
                }
                vec![c, pooled(h, *k, *stride), pooled(w, *k, *stride)]
            }
            Op::GlobalAvgPool => {
                let (c, _, _) = chw(x)?;
                vec![c, 1, 1]
            }
            Op::Add => {
                let y = &self.tensors[inputs[1]].shape;
                if x != y {
                    return Err(NnError::Shape {
                        node: name.into(),
                        op: kind.into(),
                        what: "second input (must match the first)".into(),
                        expected: x.clone(),
                        actual: y.clone(),
                    });
                }
                x.clone()
            }
            Op::Flatten => vec![x.iter().product()],
            Op::Pad { pads, .. } => {
                let (c, h, w) = chw(x)?;
                if h == 0 || w == 0 {
                    return Err(shape_err("input (non-empty C×H×W)", vec![c, 1, 1]));
                }
                vec![c, pads[0] + h + pads[2], pads[1] + w + pads[3]]
            }
        })
    }
}
