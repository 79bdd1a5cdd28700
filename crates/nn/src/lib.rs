//! Networks: ONNX import, the float IR, fixed-point lowering and the plaintext references.
//!
//! * [`onnx::import`] reads a `torch.onnx.export`-style model into a [`ir::Network`]
//!   (BatchNormalization folded, Identity/Dropout removed, all unsupported constructs
//!   reported together);
//! * [`quant::plan_fixed_point`] picks the fractional bits `s` and plaintext modulus `p` from
//!   calibration inputs and lowers the network to a [`quant::Program`] of integer steps
//!   (Linear/Conv on shares, garbled-circuit Nonlinear steps that fuse truncation, local
//!   SumPool/Add/Pad, Square);
//! * [`reference::run_fixed`] executes a program exactly as the private protocol must;
//!   [`reference::run_float`] is the float reference.

pub mod error;
pub mod export;
pub mod ir;
pub mod onnx;
pub mod quant;
pub mod reference;
pub mod zoo;

pub use error::{NnError, Unsupported};
pub use ir::{Network, Node, Op, PadMode, TensorDesc, TensorId};
pub use onnx::{import, import_bytes, import_model};
pub use quant::{
    calibrate, lower, plan_fixed_point, LayerBound, NonlinearOp, Program, Step, TensorInfo,
    CANDIDATE_MODULI, DEFAULT_MAX_FRAC_BITS, DEFAULT_MIN_FRAC_BITS,
};
pub use reference::{
    dequantise, pad_indices, quantise_input, run_fixed, run_float, space_to_depth_indices,
    window_indices,
};
