//! Fixed-point lowering: [`Network`] → [`Program`], a list of integer [`Step`]s over tensors
//! that each carry an explicit scale exponent.
//!
//! Semantics. Every tensor carries a scale exponent and an integer divisor
//! ([`TensorInfo::scale_bits`], [`TensorInfo::divisor`]): an integer `v` stands for
//! `v / (2^scale_bits · divisor)`. The activation scale is `s` = [`Program::frac_bits`].
//! * inputs are quantised as `round(x·2^s)`;
//! * [`Step::Linear`] / [`Step::Conv`]: `acc = W_q·x + b_q`, exact. The weights have a
//!   scale of their own per layer, `w` = `weight_scale_bits` (the largest with
//!   `max|W/d|·2^w ≤ 2^s`, at most `s + 16`, where `d` is the input's divisor, so every
//!   layer keeps `s` significant bits whatever the magnitude of its weights):
//!   `W_q = round(W·2^w / d)`, `b_q = round(b·2^(scale_in + w))`; the output has scale
//!   `scale_in + w` and divisor 1. Every value must lie in `(−p/2, p/2)` (centred
//!   representatives mod `p`);
//! * [`Step::Nonlinear`]: `⌊(op(y) + h) / 2^t⌋` with `t = trunc_bits` and
//!   `h = 2^(t−1)` (0 when `t = 0`): the op, then a truncation that **rounds to nearest**
//!   (ties up), fused into one step. The private executor adds `h` to one party's share
//!   before the op, which is the same function (`⌊(relu(y)+h)/2^t⌋ = ⌊relu(y+h)/2^t⌋`
//!   for `0 ≤ h < 2^t`, and `max(y_i + h) = max(y_i) + h`). A ReLU/MaxPool after a linear
//!   layer truncates to scale `s`; a tensor read by a Linear/Conv/Square at a scale above
//!   `s` first goes through an [`NonlinearOp::Identity`] step; the network output is
//!   left at its own scale;
//! * [`Step::Square`]: input at `s`, output `x²` at `2s`, divisor squared;
//! * [`Step::SumPool`]: AvgPool/GlobalAvgPool as an exact window **sum**, local on the
//!   shares (free); the output's divisor is the input's times the window area. The
//!   division by the area is exact: it is folded into the weights of the Linear/Conv that
//!   reads the pooled tensor, at that layer's own weight scale (which grows by
//!   `log2(area)` bits, so no precision is lost), or, when the pooled value reaches the
//!   output, done by the client on the revealed integers. ReLU, MaxPool, padding and
//!   truncation commute with a positive factor and keep it;
//! * [`Step::Add`]: `a·mul_a + b·mul_b` (local on shares): the multipliers align both
//!   scales (a power of two) and both divisors (to their least common multiple), exactly;
//! * [`Step::Pad`]: spatial padding (zeros, or the nearest edge element) at the input's
//!   scale, local on shares (each party pads its own share; a zero border is a sharing of
//!   zero); element order [`crate::reference::pad_indices`]. A ReLU directly before a Pad
//!   that feeds a MaxPool is moved behind the Pad and fused with the pool (both kinds of
//!   border commute with ReLU and truncation), see [`NonlinearOp::ReluMaxPool`];
//! * Flatten is no step: the Linear that reads a `C×H×W` tensor reads it in row-major (NCHW)
//!   order, which is exactly what Flatten produces (the tensor keeps its `C×H×W` shape);
//! * the output is [`Program::output`]; dequantise by `2^−scale / divisor`
//!   ([`crate::dequantise`]).
//!
//! [`crate::choose_fixed_point`] picks `s` and `p` by agreement with the float model on
//! calibration inputs ([`crate::precision`]).

use kernels::ConvShape;
use serde::{Deserialize, Serialize};

use crate::error::NnError;
use crate::ir::{Network, Op, PadMode, TensorDesc, TensorId};

/// The plaintext moduli of this project: n = 8192 batching primes (≡ 1 mod 16384), with
/// their parameter presets, up to the widest the n = 8192 noise budget allows.
pub const CANDIDATE_MODULI: &[(u64, &str)] = &[
    (1_032_193, "n8192"),
    (16_760_833, "n8192-p24"),
    (268_369_921, "n8192-p28"),
    (4_293_918_721, "n8192-p32"),
    (68_719_230_977, "n8192-p36"),
    (1_099_511_480_321, "n8192-p40"),
    (17_592_186_028_033, "n8192-p44"),
];
/// Default smallest acceptable number of fractional bits.
pub const DEFAULT_MIN_FRAC_BITS: u32 = 4;
/// Default largest number of fractional bits tried.
pub const DEFAULT_MAX_FRAC_BITS: u32 = 16;
/// A layer's weight scale is at most `s` plus this many bits (weights smaller than
/// `2^-16` relative to `1` keep fewer significant bits; their accumulator stays bounded).
pub const MAX_EXTRA_WEIGHT_BITS: u32 = 16;

/// A tensor of the program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorInfo {
    /// Shape (no batch); a flattened tensor keeps the shape it had before Flatten.
    pub shape: Vec<usize>,
    /// Values are `round(v · 2^scale_bits · divisor)`.
    pub scale_bits: u32,
    /// A positive integer factor not divided out yet (the product of the window areas of
    /// the sum pools the value went through): the integer `v` stands for
    /// `v / (2^scale_bits · divisor)`.
    pub divisor: u64,
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
    /// Truncation (rounding) only.
    Identity,
    /// `clamp(y, lo, hi)` at the output scale, computed as
    /// `relu(y − lo·2^f) − relu(y − hi·2^f)` (each truncated) `+ lo`: two ReLUs of one
    /// batch, so it costs a ReLU step of twice the elements (`hi = None`: one ReLU).
    /// The bounds at the input scale are multiples of `2^f`, so the result is exactly
    /// `clamp(floor((y + 2^(f−1)) / 2^f), lo, hi)`.
    Clip {
        /// Lower bound (output scale).
        lo: i64,
        /// Upper bound (output scale).
        hi: Option<i64>,
    },
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

impl NonlinearOp {
    /// Whether the step truncates its input itself (ReLU, Identity), so that Cheetah's
    /// approximate truncation can apply: MaxPool truncates the window's maximum, which
    /// the protocol shares afresh, and Clip two shifted copies.
    pub fn truncates_input(&self) -> bool {
        matches!(self, NonlinearOp::Relu | NonlinearOp::Identity)
    }
    /// Whether the step is a max tree (MaxPool, ReLU+MaxPool): its comparisons
    /// reconstruct the difference of two inputs, so twice every input must fit p/2
    /// ([`crate::Program`]'s bound), and then they need no signs.
    pub fn is_max_pool(&self) -> bool {
        matches!(
            self,
            NonlinearOp::MaxPool { .. } | NonlinearOp::ReluMaxPool { .. }
        )
    }
}

impl std::fmt::Display for NonlinearOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NonlinearOp::Relu => f.write_str("relu"),
            NonlinearOp::MaxPool { k, stride } => write!(f, "maxpool {k}x{k}/{stride}"),
            NonlinearOp::Identity => f.write_str("truncate"),
            NonlinearOp::Clip { lo, hi: Some(hi) } => write!(f, "clip [{lo}, {hi}]"),
            NonlinearOp::Clip { lo, hi: None } => write!(f, "clip [{lo}, ∞)"),
            NonlinearOp::ReluMaxPool { k, stride } => write!(f, "relu+maxpool {k}x{k}/{stride}"),
        }
    }
}

/// One integer step. All values are centered representatives mod `p`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Step {
    /// `output = W·input + bias`, `W` rows×cols row-major; `input` is read in row-major
    /// order whatever its shape. Output scale = input scale + `weight_scale_bits`.
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
        /// `round(w·2^weight_scale_bits / d)` (`d`: the input's divisor).
        weight: Vec<i64>,
        /// The layer's weight scale exponent.
        weight_scale_bits: u32,
        /// `round(b·2^(output scale))` (`rows` entries, zeros when the layer has no bias).
        bias: Vec<i64>,
    },
    /// Convolution ([`kernels::reference::conv`] semantics; with `groups` > 1
    /// [`kernels::reference::grouped_conv`]) plus per-channel bias. A grouped
    /// convolution keeps its stride (the depthwise kernel computes strided outputs
    /// itself); a dense strided one arrives as space-to-depth + stride 1.
    Conv {
        /// Layer name.
        name: String,
        /// Input tensor (`c_i×h×w`).
        input: TensorId,
        /// Output tensor (`c_o×h_out×w_out`).
        output: TensorId,
        /// Geometry.
        shape: ConvShape,
        /// `round(w·2^weight_scale_bits / d)`, `c_o×(c_i/groups)×k_h×k_w`.
        weight: Vec<i64>,
        /// The layer's weight scale exponent.
        weight_scale_bits: u32,
        /// `round(b·2^(output scale))`, `c_o` entries.
        bias: Vec<i64>,
        /// Groups (1: dense).
        #[serde(default = "one")]
        groups: usize,
    },
    /// The two-party nonlinear step: `⌊(op(input) + h) / 2^trunc_bits⌋` with
    /// `h = 2^(trunc_bits−1)` (0 for no truncation): the op, then rounding to nearest.
    /// With `approximate` (Cheetah's truncation, the carry dropped; only where
    /// [`NonlinearOp::truncates_input`]): `h = 2^trunc_bits` and the result is that
    /// floor or one less, depending on the server's share of `input + h`
    /// ([`crate::reference::approximate_truncation`]): the floor of the value plus a
    /// random 0 or 1 whose mean is the fractional part (unbiased rounding).
    Nonlinear {
        /// Layer name.
        name: String,
        /// Input tensor.
        input: TensorId,
        /// Output tensor.
        output: TensorId,
        /// The op.
        op: NonlinearOp,
        /// Fractional bits dropped (rounding to nearest) after the op.
        trunc_bits: u32,
        /// Approximate truncation (chosen by [`crate::choose_fixed_point`] where the
        /// calibration inputs' outputs stay within the tolerance).
        #[serde(default)]
        approximate: bool,
        /// With `approximate`: the bits the step's DReLU leaves out beyond the truncated
        /// ones (`ot::OtSpec::coarse_drelu_bits`, chosen by
        /// [`crate::choose_fixed_point`] where the calibration still agrees). A ReLU's
        /// result may then be 0 for inputs (offset included) below
        /// `2^(trunc_bits + coarse_drelu_bits)`; an Identity's is unchanged.
        #[serde(default)]
        coarse_drelu_bits: u32,
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
    /// `output = a·mul_a + b·mul_b` (local): the multipliers align the operands' scales
    /// and divisors.
    Add {
        /// Layer name.
        name: String,
        /// First operand.
        a: TensorId,
        /// Second operand.
        b: TensorId,
        /// Output.
        output: TensorId,
        /// Multiplier of `a`.
        mul_a: u64,
        /// Multiplier of `b`.
        mul_b: u64,
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
    /// The same shares with another shape (local; scale and divisor unchanged).
    Reshape {
        /// Layer name.
        name: String,
        /// Input tensor.
        input: TensorId,
        /// Output tensor (as many elements).
        output: TensorId,
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
            | Step::Reshape { name, .. }
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
            | Step::SpaceToDepth { input, .. }
            | Step::Reshape { input, .. } => vec![*input],
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
            | Step::Reshape { output, .. }
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
    /// Per Linear/Conv step accumulator bounds (filled by [`crate::choose_fixed_point`] /
    /// [`calibrate`]).
    pub bounds: Vec<LayerBound>,
    /// The inputs the program is safe for (checked by the client before anything is
    /// encrypted); `None` for a program lowered by hand without calibration.
    pub input_range: Option<crate::precision::InputRange>,
    /// Agreement of the fixed-point outputs with the float model on the calibration
    /// inputs (filled by [`crate::choose_fixed_point`]).
    pub accuracy: Option<crate::precision::Accuracy>,
    /// The network's input normalisation (the client applies it to the raw input before
    /// quantising; `input_range` is about raw inputs).
    #[serde(default)]
    pub input_affine: Option<crate::ir::InputAffine>,
    /// What the client computes from the revealed output (the graph's outputs).
    #[serde(default)]
    pub head: crate::head::Head,
    /// A public bound on the integer weights of every Linear/Conv step:
    /// `|W_q| ≤ 2^bits`. [`lower`] sets it to `s`, which its weight scales guarantee
    /// (`max|W/d|·2^w ≤ 2^s`), so it says nothing about the weights beyond the fixed
    /// point; coefficient-encoded kernels size their noise by it instead of p/2.
    /// `None`: only the modulus bounds them.
    #[serde(default)]
    pub weight_bound_bits: Option<u32>,
}

impl Program {
    /// The names of the steps with approximate truncation, in program order.
    pub fn approximate_steps(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter(|s| {
                matches!(
                    s,
                    Step::Nonlinear {
                        approximate: true,
                        ..
                    }
                )
            })
            .map(|s| s.name())
            .collect()
    }
    /// The most bits an approximate step's coarse DReLU leaves out (0: none).
    pub fn coarse_drelu_bits(&self) -> u32 {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Nonlinear {
                    coarse_drelu_bits, ..
                } => Some(*coarse_drelu_bits),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
    /// How many steps truncate (a nonlinear step with `trunc_bits > 0`).
    pub fn truncating_steps(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| {
                matches!(
                    s,
                    Step::Nonlinear {
                        trunc_bits: 1..,
                        ..
                    }
                )
            })
            .count()
    }
    /// The program with [`Program::weight_bound_bits`] = `bits` if every Linear/Conv
    /// weight obeys it (else without a bound).
    pub fn with_weight_bound(mut self, bits: u32) -> Self {
        self.weight_bound_bits = self.weights_within(bits).then_some(bits);
        self
    }
    /// Whether every Linear/Conv weight has `|w| ≤ 2^bits`.
    pub fn weights_within(&self, bits: u32) -> bool {
        self.steps.iter().all(|s| match s {
            Step::Linear { weight, .. } | Step::Conv { weight, .. } => {
                kernels::check_weight_bound(weight, bits).is_ok()
            }
            _ => true,
        })
    }
    /// The output tensor's description.
    pub fn output_info(&self) -> Option<&TensorInfo> {
        self.tensors.get(self.output)
    }
}

fn one() -> usize {
    1
}

/// The grouped geometry of a convolution with `groups` groups.
pub fn grouped_shape(shape: &ConvShape, groups: usize) -> kernels::GroupedConvShape {
    kernels::GroupedConvShape {
        c_i: shape.c_i,
        h: shape.h,
        w: shape.w,
        c_o: shape.c_o,
        k_h: shape.k_h,
        k_w: shape.k_w,
        stride: shape.stride,
        padding: shape.padding,
        groups,
    }
}

fn q(v: f64, bits: u32) -> i64 {
    (v * 2f64.powi(bits as i32)).round() as i64
}

/// The weight scale of a layer whose (divided) weights are `w`: the largest `e ≤ s +`
/// [`MAX_EXTRA_WEIGHT_BITS`] with `max|w|·2^e ≤ 2^s`, i.e. `s` significant bits for the
/// largest weight whatever its magnitude; `s` for an all-zero layer.
pub fn weight_scale_bits(w: impl Iterator<Item = f64>, s: u32) -> u32 {
    let m = w.fold(0f64, |m, v| m.max(v.abs()));
    if m.is_nan() || m <= 0.0 || m.is_infinite() {
        return s;
    }
    let e = m.log2().ceil() as i64;
    (s as i64 - e).clamp(0, (s + MAX_EXTRA_WEIGHT_BITS) as i64) as u32
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

struct Lower {
    s: u32,
    steps: Vec<Step>,
    tensors: Vec<TensorInfo>,
}

impl Lower {
    /// A tensor with `desc`'s shape and name at `x`'s scale and divisor (an op that
    /// moves or reshapes values).
    fn like(&mut self, x: TensorId, desc: &TensorDesc) -> TensorId {
        let info = self.tensors[x].clone();
        self.tensor(
            desc.shape.clone(),
            info.scale_bits,
            info.divisor,
            desc.name.clone(),
        )
    }

    fn tensor(
        &mut self,
        shape: Vec<usize>,
        scale_bits: u32,
        divisor: u64,
        name: String,
    ) -> TensorId {
        self.tensors.push(TensorInfo {
            shape,
            scale_bits,
            divisor,
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
            info.divisor,
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

    /// Tensor `t` at scale `s` (a rounding [`NonlinearOp::Identity`] step when it is
    /// above); its divisor is kept.
    fn at_s(&mut self, t: TensorId) -> TensorId {
        let info = self.tensors[t].clone();
        if info.scale_bits <= self.s {
            return t;
        }
        let out = self.tensor(
            info.shape,
            self.s,
            info.divisor,
            format!("{}/trunc", info.name),
        );
        self.steps.push(Step::Nonlinear {
            name: format!("{}/trunc", info.name),
            input: t,
            output: out,
            op: NonlinearOp::Identity,
            trunc_bits: info.scale_bits - self.s,
            approximate: false,
            coarse_drelu_bits: 0,
        });
        out
    }

    /// The weights of a layer reading tensor `x`: the divisor of `x` folded in, quantised
    /// at the layer's own scale. Returns them, the scale and the output scale.
    fn weights(&self, x: TensorId, w: &[f32]) -> (Vec<i64>, u32, u32) {
        let d = self.tensors[x].divisor as f64;
        let ws = weight_scale_bits(w.iter().map(|&v| v as f64 / d), self.s);
        let wq = w.iter().map(|&v| q(v as f64 / d, ws)).collect();
        (wq, ws, self.tensors[x].scale_bits + ws)
    }
}

/// Lowers `net` to a program with `frac_bits` fractional bits and modulus `p` (bounds,
/// input range and accuracy empty; see [`calibrate`] and [`crate::choose_fixed_point`]).
pub fn lower(net: &Network, frac_bits: u32, p: u64) -> Result<Program, NnError> {
    net.validate()?;
    if frac_bits == 0 || frac_bits > 30 {
        return Err(NnError::FixedPointSearch(format!(
            "frac_bits {frac_bits} outside 1..=30"
        )));
    }
    let s = frac_bits;
    let mut l = Lower {
        s,
        steps: Vec::new(),
        tensors: Vec::new(),
    };
    let mut vals: Vec<Option<TensorId>> = vec![None; net.tensors.len()];
    vals[0] = Some(l.tensor(
        net.tensors[0].shape.clone(),
        s,
        1,
        net.tensors[0].name.clone(),
    ));
    for node in &net.nodes {
        let get = |i: usize| -> Result<TensorId, NnError> {
            node.inputs
                .get(i)
                .and_then(|&t| vals[t])
                .ok_or_else(|| NnError::Graph {
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
                let x = l.at_s(get(0)?);
                let (weight, weight_scale_bits, scale) = l.weights(x, weight);
                let out = l.tensor(out_desc.shape.clone(), scale, 1, out_desc.name.clone());
                l.steps.push(Step::Linear {
                    name,
                    input: x,
                    output: out,
                    rows: *rows,
                    cols: *cols,
                    weight,
                    weight_scale_bits,
                    bias: match bias {
                        Some(b) => b.iter().map(|&b| q(b as f64, scale)).collect(),
                        None => vec![0; *rows],
                    },
                });
                out
            }
            Op::Conv {
                shape,
                weight,
                bias,
                groups,
            } => {
                let x = l.at_s(get(0)?);
                let (mut weight, weight_scale_bits, scale) = l.weights(x, weight);
                let mut shape = *shape;
                let mut input = x;
                if shape.stride > 1 && *groups == 1 {
                    // A strided SAME convolution pads explicitly (local, free) and becomes
                    // VALID; then space-to-depth makes it stride 1.
                    let (oh, ow, top, left) = kernels::reference::conv_output(&shape);
                    let th = ((oh - 1) * shape.stride + shape.k_h).saturating_sub(shape.h);
                    let tw = ((ow - 1) * shape.stride + shape.k_w).saturating_sub(shape.w);
                    if shape.padding == kernels::Padding::Same && th + tw > 0 {
                        let info = l.tensors[x].clone();
                        let (h, w) = (shape.h + th, shape.w + tw);
                        let padded = l.tensor(
                            vec![shape.c_i, h, w],
                            info.scale_bits,
                            info.divisor,
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
                let out = l.tensor(out_desc.shape.clone(), scale, 1, out_desc.name.clone());
                l.steps.push(Step::Conv {
                    name,
                    input,
                    output: out,
                    shape,
                    weight,
                    weight_scale_bits,
                    bias: match bias {
                        Some(b) => b.iter().map(|&b| q(b as f64, scale)).collect(),
                        None => vec![0; shape.c_o],
                    },
                    groups: *groups,
                });
                out
            }
            Op::Relu | Op::MaxPool { .. } => {
                let x = get(0)?;
                let info = l.tensors[x].clone();
                let out = l.tensor(
                    out_desc.shape.clone(),
                    s.min(info.scale_bits),
                    info.divisor,
                    out_desc.name.clone(),
                );
                let op = match node.op {
                    Op::MaxPool { k, stride } => NonlinearOp::MaxPool { k, stride },
                    _ => NonlinearOp::Relu,
                };
                l.steps.push(Step::Nonlinear {
                    name,
                    input: x,
                    output: out,
                    op,
                    trunc_bits: info.scale_bits.saturating_sub(s),
                    approximate: false,
                    coarse_drelu_bits: 0,
                });
                out
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
                let info = l.tensors[x].clone();
                let divisor = info
                    .divisor
                    .checked_mul((k_h * k_w) as u64)
                    .filter(|&d| d < 1 << 40)
                    .ok_or_else(|| NnError::Graph {
                        node: name.clone(),
                        op: node.op.kind().into(),
                        reason: format!(
                            "pooling divisor {} × {} exceeds 2^40",
                            info.divisor,
                            k_h * k_w
                        ),
                    })?;
                let out = l.tensor(
                    out_desc.shape.clone(),
                    info.scale_bits,
                    divisor,
                    out_desc.name.clone(),
                );
                l.steps.push(Step::SumPool {
                    name,
                    input: x,
                    output: out,
                    k_h,
                    k_w,
                    stride,
                });
                out
            }
            Op::Flatten => get(0)?,
            Op::Reshape { .. } => {
                let x = get(0)?;
                let out = l.like(x, out_desc);
                l.steps.push(Step::Reshape {
                    name,
                    input: x,
                    output: out,
                });
                out
            }
            Op::Clip { min, max } => {
                let x = get(0)?;
                let info = l.tensors[x].clone();
                let out_scale = s.min(info.scale_bits);
                let f = info.scale_bits - out_scale;
                // bounds at the output scale (and its divisor); at the input scale they
                // are these times 2^f, which must stay far inside p
                let bound = |v: f32| -> Result<i64, NnError> {
                    let b = v as f64 * 2f64.powi(out_scale as i32) * info.divisor as f64;
                    if b.abs() >= 2f64.powi(60 - f as i32) {
                        return Err(NnError::Graph {
                            node: name.clone(),
                            op: node.op.kind().into(),
                            reason: format!("bound {v} is too large for the fixed point"),
                        });
                    }
                    Ok(b.round() as i64)
                };
                let op = NonlinearOp::Clip {
                    lo: bound(*min)?,
                    hi: max.map(bound).transpose()?,
                };
                let out = l.tensor(
                    out_desc.shape.clone(),
                    out_scale,
                    info.divisor,
                    out_desc.name.clone(),
                );
                l.steps.push(Step::Nonlinear {
                    name,
                    input: x,
                    output: out,
                    op,
                    trunc_bits: f,
                    approximate: false,
                    coarse_drelu_bits: 0,
                });
                out
            }
            Op::Pad { pads, mode } => {
                let x = get(0)?;
                let out = l.like(x, out_desc);
                l.steps.push(Step::Pad {
                    name,
                    input: x,
                    output: out,
                    pads: *pads,
                    mode: *mode,
                });
                out
            }
            Op::Square => {
                let x = l.at_s(get(0)?);
                let info = l.tensors[x].clone();
                let divisor = info
                    .divisor
                    .checked_mul(info.divisor)
                    .filter(|&d| d < 1 << 40)
                    .ok_or_else(|| NnError::Graph {
                        node: name.clone(),
                        op: node.op.kind().into(),
                        reason: format!("pooling divisor {}² exceeds 2^40", info.divisor),
                    })?;
                let out = l.tensor(
                    out_desc.shape.clone(),
                    2 * info.scale_bits,
                    divisor,
                    out_desc.name.clone(),
                );
                l.steps.push(Step::Square {
                    name,
                    input: x,
                    output: out,
                });
                out
            }
            Op::Add => {
                let (a, b) = (get(0)?, get(1)?);
                let (ia, ib) = (l.tensors[a].clone(), l.tensors[b].clone());
                let sc = ia.scale_bits.max(ib.scale_bits);
                let g = gcd(ia.divisor, ib.divisor);
                let lcm = (ia.divisor / g)
                    .checked_mul(ib.divisor)
                    .filter(|&d| d < 1 << 40);
                let mul = |i: &TensorInfo, lcm: u64| {
                    (1u64 << (sc - i.scale_bits)).checked_mul(lcm / i.divisor)
                };
                let (Some(lcm), Some(mul_a), Some(mul_b)) = (
                    lcm,
                    lcm.and_then(|m| mul(&ia, m)),
                    lcm.and_then(|m| mul(&ib, m)),
                ) else {
                    return Err(NnError::Graph {
                        node: name,
                        op: node.op.kind().into(),
                        reason: format!(
                            "aligning scales 2^{} and 2^{} with divisors {} and {} needs a multiplier beyond 2^40",
                            ia.scale_bits, ib.scale_bits, ia.divisor, ib.divisor
                        ),
                    });
                };
                let out = l.tensor(out_desc.shape.clone(), sc, lcm, out_desc.name.clone());
                l.steps.push(Step::Add {
                    name,
                    a,
                    b,
                    output: out,
                    mul_a,
                    mul_b,
                });
                out
            }
        };
        vals[node.output] = Some(v);
    }
    let out = vals[net.output].ok_or_else(|| NnError::Graph {
        node: "<graph>".into(),
        op: "output".into(),
        reason: "output not computed".into(),
    })?;
    let mut tensors = l.tensors;
    let steps = fuse_relu_maxpool(l.steps, out, &mut tensors);
    Ok(Program {
        input_shape: net.input_shape().to_vec(),
        frac_bits: s,
        p,
        preset: String::new(),
        steps,
        tensors,
        input: 0,
        output: out,
        bounds: Vec::new(),
        input_range: None,
        accuracy: None,
        input_affine: net.input_affine.clone(),
        head: net.head.clone(),
        weight_bound_bits: None,
    }
    .with_weight_bound(s))
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
                ..
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
                        approximate: false,
                        coarse_drelu_bits: 0,
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
                ..
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
                    tensors[*padded].divisor = tensors[*input].divisor;
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
                        approximate: false,
                        coarse_drelu_bits: 0,
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

pub(crate) fn bits(v: u128) -> u32 {
    128 - v.leading_zeros()
}

/// Runs `prog` on every calibration input (no range check), fills [`Program::bounds`] and
/// returns the largest `|value|` of every step's output (index = step) and of the input
/// (last entry). The values of a rounding step include its offset `h`.
pub fn calibrate(prog: &mut Program, calibration: &[Vec<f32>]) -> Result<Vec<u128>, NnError> {
    calibrate_outputs(prog, calibration).map(|(max, _)| max)
}

/// [`calibrate`], also returning every calibration input's dequantised output. The
/// inputs run in parallel (rayon); the result does not depend on the thread count.
pub(crate) fn calibrate_outputs(
    prog: &mut Program,
    calibration: &[Vec<f32>],
) -> Result<(Vec<u128>, Vec<Vec<f32>>), NnError> {
    use rayon::prelude::*;
    let runs = calibration
        .par_iter()
        .enumerate()
        .map(|(k, x)| -> Result<(Vec<u128>, Vec<f32>), NnError> {
            let xq = crate::reference::quantise_input(prog, x);
            let shares = crate::reference::ServerShares::Modelled(k as u64);
            let vals = crate::reference::execute(prog, &xq, false, shares)?;
            let maxima = vals
                .iter()
                .map(|v| v.iter().map(|a| a.unsigned_abs()).max().unwrap_or(0))
                .collect();
            let y = crate::reference::dequantise_tensor(prog, prog.output, &vals[prog.output]);
            Ok((maxima, y))
        })
        .collect::<Vec<_>>();
    let mut tmax = vec![0u128; prog.tensors.len()];
    let mut outputs = Vec::with_capacity(runs.len());
    for r in runs {
        let (maxima, y) = r?;
        for (t, m) in tmax.iter_mut().zip(maxima) {
            *t = (*t).max(m);
        }
        outputs.push(y);
    }
    let mut max: Vec<u128> = prog.steps.iter().map(|st| step_max(st, &tmax)).collect();
    max.push(tmax[prog.input]);
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
                groups,
                ..
            } => (
                *input,
                weight,
                bias,
                shape.c_i / (*groups).max(1) * shape.k_h * shape.k_w,
            ),
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
    Ok((max, outputs))
}

/// The largest `|value|` a step must reconstruct correctly mod p: its output, and for a
/// rounding nonlinear step also its input plus the rounding offset (what the two-party
/// step reconstructs) plus `2^f`, the margin the high-bits DReLU needs
/// (`ot::OtSpec::high_bits_drelu`: `|y| ≤ (p − 1)/2 − 2^f`; `2^(f + c)` with a coarse
/// DReLU of `c` bits, `ot::OtSpec::coarse_drelu_bits`); for a MaxPool twice its
/// input (the comparisons reconstruct the difference of two inputs). Linear maps
/// (products, Add's multipliers) only need their result in range: they are exact mod p.
pub(crate) fn step_max(st: &Step, tmax: &[u128]) -> u128 {
    // what a truncation by f bits adds to its input: the offset and the DReLU's margin
    let reach = |f: u32, approximate: bool, coarse: u32| -> u128 {
        let coarse = if approximate { coarse } else { 0 };
        match f {
            0 => 0,
            f => {
                crate::reference::trunc_offset(f, approximate) as u128
                    + (1u128 << f.saturating_add(coarse).min(127))
            }
        }
    };
    let out = tmax[st.output()];
    match st {
        // the two ReLUs of a clip reconstruct the input shifted by a bound
        Step::Nonlinear {
            input,
            trunc_bits,
            op: NonlinearOp::Clip { lo, hi },
            approximate,
            coarse_drelu_bits,
            ..
        } => {
            let shift = std::iter::once(*lo)
                .chain(*hi)
                .map(|b| b.unsigned_abs() as u128)
                .max()
                .unwrap_or(0)
                << trunc_bits;
            out.max(tmax[*input] + reach(*trunc_bits, *approximate, *coarse_drelu_bits) + shift)
        }
        // the max tree compares by the difference of two inputs (no signs tracked:
        // the inputs must be within (−p/4, p/4)), then truncates the maximum
        Step::Nonlinear {
            input,
            trunc_bits,
            op,
            approximate,
            coarse_drelu_bits,
            ..
        } if op.is_max_pool() => out
            .max(2 * tmax[*input])
            .max(tmax[*input] + reach(*trunc_bits, *approximate, *coarse_drelu_bits)),
        Step::Nonlinear {
            input,
            trunc_bits,
            approximate,
            coarse_drelu_bits,
            ..
        } if *trunc_bits > 0 => {
            out.max(tmax[*input] + reach(*trunc_bits, *approximate, *coarse_drelu_bits))
        }
        _ => out,
    }
}
