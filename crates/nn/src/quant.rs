//! Fixed-point lowering: [`Network`] → [`Program`], a list of integer [`Step`]s over tensors
//! that each carry an explicit scale exponent.
//!
//! Semantics (scale `2^s`, `s` = [`Program::frac_bits`]):
//! * inputs and weights are quantised as `round(v·2^s)`, biases as `round(b·2^(2s))`;
//! * [`Step::Linear`] / [`Step::Conv`]: `acc = W_q·x + b_q`, exact; input at scale `s`, output
//!   at `2s`. Every value must lie in `(−p/2, p/2)` (centered representatives mod `p`);
//! * the private pipeline truncates in the garbled circuit right after a linear layer, fused
//!   with the following ReLU/MaxPool: [`Step::Nonlinear`] applies its op and **then**
//!   `floor(y / 2^trunc_bits)` (arithmetic shift of the centered value). For ReLU the order
//!   does not matter (`floor(relu(y)/2^f) == relu(floor(y/2^f))`); for MaxPool it is max
//!   then floor. Its output is at scale `s`. A tensor at scale `2s` read by a consumer that
//!   needs scale `s` (Linear/Conv/Square) first goes through a [`NonlinearOp::Identity`]
//!   step with `trunc_bits = s`; the network output is left at its own scale;
//! * [`Step::Square`]: input at `s`, output `x²` at `2s`;
//! * [`Step::SumPool`]: AvgPool/GlobalAvgPool as a window **sum**, local on shares (free).
//!   The `1/area` factor is folded into the float weights of the next Linear/Conv before
//!   quantisation (ReLU, MaxPool and Flatten in between commute with it). If the pooled value
//!   reaches anything else (Square, an Add with a different factor, the output), the factor
//!   is divided out in the GC by an Identity step with `log2(area)` extra truncation bits,
//!   which needs a power-of-two area, else [`NnError::PoolDivisor`];
//! * [`Step::Add`]: `a·2^shift_a + b·2^shift_b`, aligning both operands to the larger scale
//!   (local on shares);
//! * [`Step::Pad`]: spatial padding (zeros, or the nearest edge element) at the input's
//!   scale, local on shares (each party pads its own share; a zero border is a sharing of
//!   zero); element order [`crate::reference::pad_indices`]. It carries a pending pooling
//!   factor through unchanged. A ReLU directly before a Pad that feeds a MaxPool is moved
//!   behind the Pad and fused with the pool (both kinds of border commute with ReLU and
//!   truncation), see [`NonlinearOp::ReluMaxPool`];
//! * Flatten is no step: the Linear that reads a `C×H×W` tensor reads it in row-major (NCHW)
//!   order, which is exactly what Flatten produces (the tensor keeps its `C×H×W` shape);
//! * the output is [`Program::output`] at its `scale_bits`; dequantise by `2^−scale`.
//!
//! [`plan_fixed_point`] picks `s` and `p` from calibration inputs (see there).

use kernels::ConvShape;
use serde::{Deserialize, Serialize};

use crate::error::NnError;
use crate::ir::{Network, Op, PadMode, TensorId};

/// The plaintext moduli of this project: n = 8192 batching primes (≡ 1 mod 16384).
pub const CANDIDATE_MODULI: &[(u64, &str)] = &[
    (1_032_193, "n8192"),
    (4_293_918_721, "n8192-p32"),
    (1_099_511_480_321, "n8192-p40"),
];
/// Default smallest acceptable number of fractional bits.
pub const DEFAULT_MIN_FRAC_BITS: u32 = 6;
/// Default largest number of fractional bits tried.
pub const DEFAULT_MAX_FRAC_BITS: u32 = 12;

/// A tensor of the program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorInfo {
    /// Shape (no batch); a flattened tensor keeps the shape it had before Flatten.
    pub shape: Vec<usize>,
    /// Values are `round(v · 2^scale_bits)` (`s` or `2s`).
    pub scale_bits: u32,
    /// Name (the IR / ONNX value name it stands for).
    pub name: String,
}

impl TensorInfo {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The op a [`Step::Nonlinear`] garbled circuit computes before truncating.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NonlinearOp {
    /// `max(y, 0)`, elementwise.
    Relu,
    /// `k×k` max pooling, stride `stride`, no padding, on a `C×H×W` tensor. Output element
    /// `(c, oy, ox)` takes the window elements `(c, oy·stride+dy, ox·stride+dx)` in row-major
    /// `(dy, dx)` order (the private executor gathers shares in the same order).
    MaxPool {
        /// Window side.
        k: usize,
        /// Stride.
        stride: usize,
    },
    /// Truncation only.
    Identity,
    /// `relu(max(window))`: a ReLU and a MaxPool that follow each other, fused into one
    /// garbled circuit (max, ReLU and floor are monotone, so they commute: the result
    /// equals the two steps in either order). Window order as [`NonlinearOp::MaxPool`].
    ReluMaxPool {
        /// Window side.
        k: usize,
        /// Stride.
        stride: usize,
    },
}

/// One integer step. All values are centered representatives mod `p`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Step {
    /// `output = W·input + bias`, `W` rows×cols row-major; `input` is read in row-major
    /// order whatever its shape. Input at scale `s`, output at `2s`.
    Linear {
        /// Layer (ONNX node) name.
        name: String,
        /// Input tensor.
        input: TensorId,
        /// Output tensor.
        output: TensorId,
        /// Outputs.
        rows: usize,
        /// Inputs.
        cols: usize,
        /// `round(w·2^s)`.
        weight: Vec<i64>,
        /// `round(b·2^(2s))` (`rows` entries, zeros when the layer has no bias).
        bias: Vec<i64>,
    },
    /// Convolution ([`kernels::reference::conv`] semantics) plus per-channel bias.
    Conv {
        /// Layer name.
        name: String,
        /// Input tensor (`c_i×h×w`).
        input: TensorId,
        /// Output tensor (`c_o×h_out×w_out`).
        output: TensorId,
        /// Geometry.
        shape: ConvShape,
        /// `round(w·2^s)`, `c_o×c_i×k_h×k_w`.
        weight: Vec<i64>,
        /// `round(b·2^(2s))`, `c_o` entries.
        bias: Vec<i64>,
    },
    /// Garbled circuit: `floor(op(input) / 2^trunc_bits)`.
    Nonlinear {
        /// Layer name.
        name: String,
        /// Input tensor.
        input: TensorId,
        /// Output tensor.
        output: TensorId,
        /// The op.
        op: NonlinearOp,
        /// Arithmetic right shift applied after the op.
        trunc_bits: u32,
    },
    /// `output = input²` (scale doubles).
    Square {
        /// Layer name.
        name: String,
        /// Input tensor.
        input: TensorId,
        /// Output tensor.
        output: TensorId,
    },
    /// Window sum (local): output `(c, oy, ox) = Σ_{dy<k_h, dx<k_w} input(c, oy·stride+dy,
    /// ox·stride+dx)`; output `floor((h−k_h)/stride)+1` × `floor((w−k_w)/stride)+1`.
    SumPool {
        /// Layer name.
        name: String,
        /// Input tensor.
        input: TensorId,
        /// Output tensor.
        output: TensorId,
        /// Window height.
        k_h: usize,
        /// Window width.
        k_w: usize,
        /// Stride.
        stride: usize,
    },
    /// `output = a·2^shift_a + b·2^shift_b` (local).
    Add {
        /// Layer name.
        name: String,
        /// First operand.
        a: TensorId,
        /// Second operand.
        b: TensorId,
        /// Output.
        output: TensorId,
        /// Left shift of `a`.
        shift_a: u32,
        /// Left shift of `b`.
        shift_b: u32,
    },
    /// Spatial padding of a `C×H×W` tensor (local; scale unchanged): output
    /// `C×(top+H+bottom)×(left+W+right)`, element `j` is input element
    /// `pad_indices(..)[j]` or zero ([`crate::reference::pad_indices`]).
    Pad {
        /// Layer name.
        name: String,
        /// Input tensor (`C×H×W`).
        input: TensorId,
        /// Output tensor.
        output: TensorId,
        /// `[top, left, bottom, right]`.
        pads: [usize; 4],
        /// Border contents.
        mode: PadMode,
    },
    /// Space-to-depth (local; scale unchanged): a `C×H×W` input becomes
    /// `(C·ph·pw)×out_h×out_w` (`[ph, pw] = phases`, at most `stride` each), channel
    /// `(c·ph + ry)·pw + rx` holding `input(c, stride·a + ry, stride·b + rx)` at `(a, b)`,
    /// zero beyond the input ([`crate::reference::space_to_depth_indices`]). A VALID
    /// convolution with stride `s` equals a stride-1 convolution of this with
    /// `⌈k/s⌉`-sized filters (the lowering rearranges the weights; phases no filter tap
    /// reads, `r ≥ k`, are left out), so the HE kernel computes only the outputs that are
    /// kept instead of all `s²` times as many.
    SpaceToDepth {
        /// Layer name.
        name: String,
        /// Input tensor (`C×H×W`).
        input: TensorId,
        /// Output tensor.
        output: TensorId,
        /// The convolution's stride.
        stride: usize,
        /// Phases kept per direction: `[min(stride, k_h), min(stride, k_w)]`.
        phases: [usize; 2],
        /// Output height.
        out_h: usize,
        /// Output width.
        out_w: usize,
    },
}

impl Step {
    /// The layer name.
    pub fn name(&self) -> &str {
        match self {
            Step::Linear { name, .. }
            | Step::Conv { name, .. }
            | Step::Nonlinear { name, .. }
            | Step::Square { name, .. }
            | Step::SumPool { name, .. }
            | Step::Pad { name, .. }
            | Step::SpaceToDepth { name, .. }
            | Step::Add { name, .. } => name,
        }
    }
    /// The tensors the step reads (two for [`Step::Add`], one otherwise).
    pub fn inputs(&self) -> Vec<TensorId> {
        match self {
            Step::Linear { input, .. }
            | Step::Conv { input, .. }
            | Step::Nonlinear { input, .. }
            | Step::Square { input, .. }
            | Step::SumPool { input, .. }
            | Step::Pad { input, .. }
            | Step::SpaceToDepth { input, .. } => vec![*input],
            Step::Add { a, b, .. } => vec![*a, *b],
        }
    }
    /// The output tensor.
    pub fn output(&self) -> TensorId {
        match self {
            Step::Linear { output, .. }
            | Step::Conv { output, .. }
            | Step::Nonlinear { output, .. }
            | Step::Square { output, .. }
            | Step::SumPool { output, .. }
            | Step::Pad { output, .. }
            | Step::SpaceToDepth { output, .. }
            | Step::Add { output, .. } => *output,
        }
    }
}

/// Accumulator bounds of one Linear/Conv step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerBound {
    /// Step index.
    pub step: usize,
    /// Layer name.
    pub name: String,
    /// Worst case `max_row Σ|w_q|·max|x_q| + |b_q|` with `max|x_q|` the calibration maximum
    /// of the input tensor.
    pub worst_case: u128,
    /// Bit length of `worst_case`.
    pub worst_case_bits: u32,
    /// Largest `|acc|` seen over the calibration inputs.
    pub calibration_max: u128,
    /// Bit length of `calibration_max`.
    pub calibration_bits: u32,
}

/// A fixed-point program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Input shape (no batch).
    pub input_shape: Vec<usize>,
    /// `s`.
    pub frac_bits: u32,
    /// Plaintext modulus.
    pub p: u64,
    /// Name of the parameter preset `p` belongs to (empty when set by hand).
    pub preset: String,
    /// Steps in execution order.
    pub steps: Vec<Step>,
    /// Tensors; `tensors[0]` is the input (scale `s`).
    pub tensors: Vec<TensorInfo>,
    /// The input tensor (always 0).
    pub input: TensorId,
    /// The output tensor.
    pub output: TensorId,
    /// Per Linear/Conv step accumulator bounds (filled by [`plan_fixed_point`] / [`calibrate`]).
    pub bounds: Vec<LayerBound>,
}

fn q(v: f64, bits: u32) -> i64 {
    (v * (1u64 << bits) as f64).round() as i64
}

/// Where an IR tensor lives in the program: tensor id, and a pending positive factor
/// (product of sum-pool areas not yet divided out) with the pooling node that caused it.
#[derive(Clone, Debug)]
struct Val {
    id: TensorId,
    pending: usize,
    pool: Option<(String, &'static str)>,
}

struct Lower {
    s: u32,
    steps: Vec<Step>,
    tensors: Vec<TensorInfo>,
}

impl Lower {
    fn tensor(&mut self, shape: Vec<usize>, scale_bits: u32, name: String) -> TensorId {
        self.tensors.push(TensorInfo {
            shape,
            scale_bits,
            name,
        });
        self.tensors.len() - 1
    }

    /// Rewrites an unpadded strided convolution as [`Step::SpaceToDepth`] + a stride-1
    /// VALID convolution with `⌈k/s⌉`-sized filters over `C·s²` channels; returns its
    /// input tensor, shape and weights (`w'(o, (c·s+ry)·s+rx, qy, qx) = w(o, c, s·qy+ry,
    /// s·qx+rx)`, zero where that tap is beyond the filter).
    fn space_to_depth(
        &mut self,
        name: &str,
        input: TensorId,
        sh: kernels::ConvShape,
        w: &[i64],
    ) -> (TensorId, kernels::ConvShape, Vec<i64>) {
        let st = sh.stride;
        let (oh, ow, _, _) = kernels::reference::conv_output(&sh);
        let (kh, kw) = (sh.k_h.div_ceil(st), sh.k_w.div_ceil(st));
        let (ph, pw) = (st.min(sh.k_h), st.min(sh.k_w));
        let new = kernels::ConvShape {
            c_i: sh.c_i * ph * pw,
            h: oh + kh - 1,
            w: ow + kw - 1,
            c_o: sh.c_o,
            k_h: kh,
            k_w: kw,
            stride: 1,
            padding: kernels::Padding::Valid,
        };
        let mut w2 = vec![0i64; new.c_o * new.c_i * kh * kw];
        for o in 0..sh.c_o {
            for c in 0..sh.c_i {
                for dy in 0..sh.k_h {
                    for dx in 0..sh.k_w {
                        let c2 = (c * ph + dy % st) * pw + dx % st;
                        let (qy, qx) = (dy / st, dx / st);
                        w2[((o * new.c_i + c2) * kh + qy) * kw + qx] =
                            w[((o * sh.c_i + c) * sh.k_h + dy) * sh.k_w + dx];
                    }
                }
            }
        }
        let info = self.tensors[input].clone();
        let out = self.tensor(
            vec![new.c_i, new.h, new.w],
            info.scale_bits,
            format!("{}/space_to_depth", info.name),
        );
        self.steps.push(Step::SpaceToDepth {
            name: format!("{name}/space_to_depth"),
            input,
            output: out,
            stride: st,
            phases: [ph, pw],
            out_h: new.h,
            out_w: new.w,
        });
        (out, new, w2)
    }

    /// `v` at scale `s` with no pending factor unless `keep_pending` (then only truncate).
    fn at_s(&mut self, v: &Val, keep_pending: bool) -> Result<Val, NnError> {
        let scale = self.tensors[v.id].scale_bits;
        let mut extra = 0;
        if !keep_pending && v.pending != 1 {
            let (node, op) = v.pool.clone().unwrap_or_default();
            if !v.pending.is_power_of_two() {
                return Err(NnError::PoolDivisor {
                    node,
                    op: op.into(),
                    area: v.pending,
                });
            }
            extra = v.pending.trailing_zeros();
        }
        let trunc = scale - self.s + extra;
        if trunc == 0 {
            return Ok(Val {
                pending: if keep_pending { v.pending } else { 1 },
                ..v.clone()
            });
        }
        let info = self.tensors[v.id].clone();
        let out = self.tensor(info.shape, self.s, format!("{}/trunc", info.name));
        self.steps.push(Step::Nonlinear {
            name: format!("{}/trunc", info.name),
            input: v.id,
            output: out,
            op: NonlinearOp::Identity,
            trunc_bits: trunc,
        });
        Ok(Val {
            id: out,
            pending: if keep_pending { v.pending } else { 1 },
            pool: if keep_pending { v.pool.clone() } else { None },
        })
    }
}

/// Lowers `net` to a program with `frac_bits` fractional bits and modulus `p` (bounds
/// empty; see [`calibrate`]).
pub fn lower(net: &Network, frac_bits: u32, p: u64) -> Result<Program, NnError> {
    net.validate()?;
    if frac_bits == 0 || frac_bits > 30 {
        return Err(NnError::Plan(format!(
            "frac_bits {frac_bits} outside 1..=30"
        )));
    }
    let s = frac_bits;
    let mut l = Lower {
        s,
        steps: Vec::new(),
        tensors: Vec::new(),
    };
    let mut vals: Vec<Option<Val>> = vec![None; net.tensors.len()];
    let inp = l.tensor(net.tensors[0].shape.clone(), s, net.tensors[0].name.clone());
    vals[0] = Some(Val {
        id: inp,
        pending: 1,
        pool: None,
    });
    for node in &net.nodes {
        let get = |i: usize| -> Result<Val, NnError> {
            vals[node.inputs[i]].clone().ok_or_else(|| NnError::Graph {
                node: node.name.clone(),
                op: node.op.kind().into(),
                reason: "input not computed".into(),
            })
        };
        let out_desc = &net.tensors[node.output];
        let name = node.name.clone();
        let v = match &node.op {
            Op::Linear {
                rows,
                cols,
                weight,
                bias,
            } => {
                let x = l.at_s(&get(0)?, true)?;
                let div = x.pending as f64;
                let out = l.tensor(out_desc.shape.clone(), 2 * s, out_desc.name.clone());
                l.steps.push(Step::Linear {
                    name,
                    input: x.id,
                    output: out,
                    rows: *rows,
                    cols: *cols,
                    weight: weight.iter().map(|&w| q(w as f64 / div, s)).collect(),
                    bias: match bias {
                        Some(b) => b.iter().map(|&b| q(b as f64, 2 * s)).collect(),
                        None => vec![0; *rows],
                    },
                });
                Val {
                    id: out,
                    pending: 1,
                    pool: None,
                }
            }
            Op::Conv {
                shape,
                weight,
                bias,
            } => {
                let x = l.at_s(&get(0)?, true)?;
                let div = x.pending as f64;
                let mut weight: Vec<i64> = weight.iter().map(|&w| q(w as f64 / div, s)).collect();
                let mut shape = *shape;
                let mut input = x.id;
                if shape.stride > 1 {
                    // A strided SAME convolution pads explicitly (local, free) and becomes
                    // VALID; then space-to-depth makes it stride 1.
                    let (oh, ow, top, left) = kernels::reference::conv_output(&shape);
                    let th = ((oh - 1) * shape.stride + shape.k_h).saturating_sub(shape.h);
                    let tw = ((ow - 1) * shape.stride + shape.k_w).saturating_sub(shape.w);
                    if shape.padding == kernels::Padding::Same && th + tw > 0 {
                        let info = l.tensors[x.id].clone();
                        let (h, w) = (shape.h + th, shape.w + tw);
                        let padded = l.tensor(
                            vec![shape.c_i, h, w],
                            info.scale_bits,
                            format!("{}/pad", info.name),
                        );
                        l.steps.push(Step::Pad {
                            name: format!("{name}/pad"),
                            input,
                            output: padded,
                            pads: [top, left, th - top, tw - left],
                            mode: PadMode::Zero,
                        });
                        input = padded;
                        shape.h = h;
                        shape.w = w;
                    }
                    shape.padding = kernels::Padding::Valid;
                    (input, shape, weight) = l.space_to_depth(&name, input, shape, &weight);
                }
                let out = l.tensor(out_desc.shape.clone(), 2 * s, out_desc.name.clone());
                l.steps.push(Step::Conv {
                    name,
                    input,
                    output: out,
                    shape,
                    weight,
                    bias: match bias {
                        Some(b) => b.iter().map(|&b| q(b as f64, 2 * s)).collect(),
                        None => vec![0; shape.c_o],
                    },
                });
                Val {
                    id: out,
                    pending: 1,
                    pool: None,
                }
            }
            Op::Relu | Op::MaxPool { .. } => {
                let x = get(0)?;
                let trunc = l.tensors[x.id].scale_bits - s;
                let out = l.tensor(out_desc.shape.clone(), s, out_desc.name.clone());
                let op = match node.op {
                    Op::MaxPool { k, stride } => NonlinearOp::MaxPool { k, stride },
                    _ => NonlinearOp::Relu,
                };
                l.steps.push(Step::Nonlinear {
                    name,
                    input: x.id,
                    output: out,
                    op,
                    trunc_bits: trunc,
                });
                Val { id: out, ..x }
            }
            Op::AvgPool { .. } | Op::GlobalAvgPool => {
                let x = get(0)?;
                let (k_h, k_w, stride) = match node.op {
                    Op::AvgPool { k, stride } => (k, k, stride),
                    _ => {
                        let sh = net.shape(node.inputs[0]);
                        (sh[1], sh[2], 1)
                    }
                };
                let scale = l.tensors[x.id].scale_bits;
                let out = l.tensor(out_desc.shape.clone(), scale, out_desc.name.clone());
                l.steps.push(Step::SumPool {
                    name: name.clone(),
                    input: x.id,
                    output: out,
                    k_h,
                    k_w,
                    stride,
                });
                Val {
                    id: out,
                    pending: x.pending * k_h * k_w,
                    pool: Some((name, node.op.kind())),
                }
            }
            Op::Flatten => get(0)?,
            Op::Pad { pads, mode } => {
                let x = get(0)?;
                let scale = l.tensors[x.id].scale_bits;
                let out = l.tensor(out_desc.shape.clone(), scale, out_desc.name.clone());
                l.steps.push(Step::Pad {
                    name,
                    input: x.id,
                    output: out,
                    pads: *pads,
                    mode: *mode,
                });
                Val { id: out, ..x }
            }
            Op::Square => {
                let x = l.at_s(&get(0)?, false)?;
                let out = l.tensor(out_desc.shape.clone(), 2 * s, out_desc.name.clone());
                l.steps.push(Step::Square {
                    name,
                    input: x.id,
                    output: out,
                });
                Val {
                    id: out,
                    pending: 1,
                    pool: None,
                }
            }
            Op::Add => {
                let (mut a, mut b) = (get(0)?, get(1)?);
                if a.pending != b.pending {
                    a = l.at_s(&a, false)?;
                    b = l.at_s(&b, false)?;
                }
                let (sa, sb) = (l.tensors[a.id].scale_bits, l.tensors[b.id].scale_bits);
                let sc = sa.max(sb);
                let out = l.tensor(out_desc.shape.clone(), sc, out_desc.name.clone());
                l.steps.push(Step::Add {
                    name,
                    a: a.id,
                    b: b.id,
                    output: out,
                    shift_a: sc - sa,
                    shift_b: sc - sb,
                });
                Val { id: out, ..a }
            }
        };
        vals[node.output] = Some(v);
    }
    let out = vals[net.output].clone().ok_or_else(|| NnError::Graph {
        node: "<graph>".into(),
        op: "output".into(),
        reason: "output not computed".into(),
    })?;
    let out = if out.pending == 1 {
        out
    } else {
        // divide the pooling factor out; the result is at scale s
        l.at_s(&out, false)?
    };
    let mut tensors = l.tensors;
    let steps = fuse_relu_maxpool(l.steps, out.id, &mut tensors);
    Ok(Program {
        input_shape: net.input_shape().to_vec(),
        frac_bits: s,
        p,
        preset: String::new(),
        steps,
        tensors,
        input: 0,
        output: out.id,
        bounds: Vec::new(),
    })
}

/// Fuses a ReLU step and a MaxPool step that directly follow each other (in either
/// order) into one [`NonlinearOp::ReluMaxPool`] step, when the tensor between them has
/// no other reader and is not the output: one garbled circuit instead of two, and the
/// ReLU on the pooled (smaller) tensor. At most one of the two truncates (the first),
/// and floor commutes with max and ReLU, so the result is unchanged. A [`Step::Pad`]
/// between a ReLU and the MaxPool (a padded pool, torchvision's stem) is handled too: the
/// Pad moves in front and reads the ReLU's input (its border is zero or a copy, both
/// commute with ReLU and floor), and its output takes that input's scale.
fn fuse_relu_maxpool(steps: Vec<Step>, output: TensorId, tensors: &mut [TensorInfo]) -> Vec<Step> {
    let mut readers = vec![0usize; tensors.len()];
    for st in &steps {
        for t in st.inputs() {
            if let Some(r) = readers.get_mut(t) {
                *r += 1;
            }
        }
    }
    let single = |t: TensorId| t != output && readers.get(t) == Some(&1);
    let pool_of = |op: &NonlinearOp| match op {
        NonlinearOp::MaxPool { k, stride } => Some((*k, *stride)),
        _ => None,
    };
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    let mut i = 0;
    while i < steps.len() {
        // ReLU → MaxPool or MaxPool → ReLU
        if let (
            Step::Nonlinear {
                name,
                input,
                output: mid,
                op: op1,
                trunc_bits: t1,
            },
            Some(Step::Nonlinear {
                input: mid2,
                output: end,
                op: op2,
                trunc_bits: t2,
                ..
            }),
        ) = (&steps[i], steps.get(i + 1))
        {
            let pool = match (op1, op2) {
                (NonlinearOp::Relu, p) | (p, NonlinearOp::Relu) => pool_of(p),
                _ => None,
            };
            if let Some((k, stride)) = pool {
                if mid == mid2 && single(*mid) && (*t1 == 0 || *t2 == 0) {
                    out.push(Step::Nonlinear {
                        name: name.clone(),
                        input: *input,
                        output: *end,
                        op: NonlinearOp::ReluMaxPool { k, stride },
                        trunc_bits: t1 + t2,
                    });
                    i += 2;
                    continue;
                }
            }
        }
        // ReLU → Pad → MaxPool  ⇒  Pad → ReluMaxPool
        if let (
            Step::Nonlinear {
                name,
                input,
                output: mid,
                op: NonlinearOp::Relu,
                trunc_bits: t1,
            },
            Some(Step::Pad {
                name: pad_name,
                input: mid2,
                output: padded,
                pads,
                mode,
            }),
            Some(Step::Nonlinear {
                input: padded2,
                output: end,
                op: op3,
                trunc_bits: t3,
                ..
            }),
        ) = (&steps[i], steps.get(i + 1), steps.get(i + 2))
        {
            if let Some((k, stride)) = pool_of(op3) {
                if mid == mid2
                    && padded == padded2
                    && single(*mid)
                    && single(*padded)
                    && (*t1 == 0 || *t3 == 0)
                {
                    tensors[*padded].scale_bits = tensors[*input].scale_bits;
                    out.push(Step::Pad {
                        name: pad_name.clone(),
                        input: *input,
                        output: *padded,
                        pads: *pads,
                        mode: *mode,
                    });
                    out.push(Step::Nonlinear {
                        name: name.clone(),
                        input: *padded,
                        output: *end,
                        op: NonlinearOp::ReluMaxPool { k, stride },
                        trunc_bits: t1 + t3,
                    });
                    i += 3;
                    continue;
                }
            }
        }
        out.push(steps[i].clone());
        i += 1;
    }
    out
}

fn bits(v: u128) -> u32 {
    128 - v.leading_zeros()
}

/// Runs `prog` on every calibration input (no range check), fills [`Program::bounds`] and
/// returns the largest `|value|` of every step's output (index = step) and of the input
/// (last entry).
pub fn calibrate(prog: &mut Program, calibration: &[Vec<f32>]) -> Result<Vec<u128>, NnError> {
    let mut max = vec![0u128; prog.steps.len() + 1];
    let mut tmax = vec![0u128; prog.tensors.len()];
    for x in calibration {
        let xq = crate::reference::quantise_input(prog, x);
        let vals = crate::reference::execute(prog, &xq, false)?;
        for (t, v) in vals.iter().enumerate() {
            let m = v.iter().map(|a| a.unsigned_abs()).max().unwrap_or(0);
            tmax[t] = tmax[t].max(m);
        }
    }
    for (i, st) in prog.steps.iter().enumerate() {
        max[i] = tmax[st.output()];
    }
    max[prog.steps.len()] = tmax[prog.input];
    let mut bounds = Vec::new();
    for (i, st) in prog.steps.iter().enumerate() {
        let (input, weight, bias, per) = match st {
            Step::Linear {
                input,
                weight,
                bias,
                cols,
                ..
            } => (*input, weight, bias, *cols),
            Step::Conv {
                input,
                weight,
                bias,
                shape,
                ..
            } => (*input, weight, bias, shape.c_i * shape.k_h * shape.k_w),
            _ => continue,
        };
        let xm = tmax[input];
        let worst = weight
            .chunks(per.max(1))
            .zip(bias)
            .map(|(row, b)| {
                row.iter().map(|w| w.unsigned_abs() as u128).sum::<u128>() * xm
                    + b.unsigned_abs() as u128
            })
            .max()
            .unwrap_or(0);
        bounds.push(LayerBound {
            step: i,
            name: st.name().to_string(),
            worst_case: worst,
            worst_case_bits: bits(worst),
            calibration_max: max[i],
            calibration_bits: bits(max[i]),
        });
    }
    prog.bounds = bounds;
    Ok(max)
}

/// Picks `s` and `p`: for each candidate modulus from the smallest up, the largest
/// `s ∈ [min_frac_bits, max_frac_bits]` for which every value of every step (largest `|v|`
/// over the calibration inputs, with a 2× margin: `4·max|v| + 1 ≤ p`) fits in `(−p/2, p/2)`;
/// the first modulus that admits some `s ≥ min_frac_bits` wins. The decision uses the
/// calibration maxima; [`Program::bounds`] also reports the (much looser) worst-case bounds.
/// If no candidate fits, [`NnError::Overflow`] names the layer with the largest value at
/// `min_frac_bits` and the largest candidate — before any encryption happens.
pub fn plan_fixed_point(
    net: &Network,
    calibration: &[Vec<f32>],
    candidates: &[(u64, &str)],
    min_frac_bits: u32,
    max_frac_bits: u32,
) -> Result<Program, NnError> {
    if calibration.is_empty() {
        return Err(NnError::Plan("no calibration inputs".into()));
    }
    if candidates.is_empty() {
        return Err(NnError::Plan("no candidate plaintext moduli".into()));
    }
    if min_frac_bits == 0 || min_frac_bits > max_frac_bits {
        return Err(NnError::Plan(format!(
            "empty fractional-bit range {min_frac_bits}..={max_frac_bits}"
        )));
    }
    let mut cands = candidates.to_vec();
    cands.sort_by_key(|c| c.0);
    let mut cache: Vec<Option<(Program, Vec<u128>)>> =
        vec![None; (max_frac_bits - min_frac_bits + 1) as usize];
    for &(p, preset) in &cands {
        for s in (min_frac_bits..=max_frac_bits).rev() {
            let slot = &mut cache[(s - min_frac_bits) as usize];
            if slot.is_none() {
                let mut prog = lower(net, s, p)?;
                let max = match calibrate(&mut prog, calibration) {
                    Ok(m) => m,
                    // beyond 2^62: certainly too large for any candidate
                    Err(NnError::RangeExceeded { step, .. }) => {
                        let mut m = vec![0u128; prog.steps.len() + 1];
                        m[step] = 1 << 62;
                        m
                    }
                    Err(e) => return Err(e),
                };
                *slot = Some((prog, max));
            }
            if let Some((prog, max)) = slot {
                if max.iter().all(|&m| 4 * m < p as u128) {
                    let mut prog = prog.clone();
                    prog.p = p;
                    prog.preset = preset.to_string();
                    return Ok(prog);
                }
            }
        }
    }
    // Nothing fits: report the worst step at the smallest s against the largest p.
    let p_max = cands.last().map_or(0, |c| c.0);
    let (layer, needed) = match &cache[0] {
        Some((prog, max)) => {
            let (i, m) = max
                .iter()
                .enumerate()
                .max_by_key(|(_, m)| **m)
                .map_or((0, 0), |(i, m)| (i, *m));
            let name = prog
                .steps
                .get(i)
                .map_or_else(|| "input".to_string(), |s| s.name().to_string());
            (name, bits(4 * m + 1))
        }
        None => ("?".into(), 0),
    };
    Err(NnError::Overflow {
        layer,
        needed_bits: needed,
        p_bits: bits(p_max as u128),
    })
}
