//! Networks: ONNX import, the float IR, fixed-point lowering and the plaintext references.
//!
//! * [`onnx::import`] reads a `torch.onnx.export`-style model into a [`ir::Network`]
//!   (BatchNormalization folded, Identity/Dropout removed, all unsupported constructs
//!   reported together);
//! * [`quant::lower`] lowers the network to a [`quant::Program`] of integer steps
//!   (Linear/Conv on shares, two-party Nonlinear steps that fuse a rounding truncation,
//!   local SumPool/Add/Pad, Square) at a given number of fractional bits;
//! * [`precision::choose_fixed_point`] picks the fractional bits `s` and plaintext modulus
//!   `p` by agreement with the float model on calibration inputs, and the input range
//!   the program is safe for ([`precision::check_input`]);
//! * [`reference::run_fixed`] executes a program exactly as the private protocol must;
//!   [`reference::run_float`] is the float reference.

pub mod error;
pub mod export;
pub mod gemm;
pub mod head;
pub mod ir;
pub mod onnx;
pub mod ops;
pub mod precision;
pub mod quant;
pub mod reference;
mod tensor_proto;
pub mod zoo;

pub use error::{NnError, Unsupported};
pub use head::{GraphOutput, Head, HeadData, HeadValue};
pub use ir::{InputAffine, Network, Node, Op, PadMode, TensorDesc, TensorId};
pub use onnx::{import, import_bytes, import_model};
pub use precision::{
    check_input, choose_fixed_point, float_agreement, precision_loss, worst_case_bounds, Accuracy,
    FixedPointOptions, InputRange, RangeBasis, DEFAULT_MAX_COARSE_DRELU_BITS, DEFAULT_TOLERANCE,
    SCREEN_INPUTS, TOLERANCE_SAFETY,
};
pub use quant::{
    calibrate, grouped_shape, lower, weight_scale_bits, LayerBound, NonlinearOp, Program, Step,
    TensorInfo, CANDIDATE_MODULI, DEFAULT_MAX_FRAC_BITS, DEFAULT_MIN_FRAC_BITS,
};
pub use reference::{
    approximate_truncation, dequantise, dequantise_tensor, pad_indices, quantise_input, run_fixed,
    run_fixed_all, run_fixed_replay, run_float, run_float_all, space_to_depth_indices,
    trunc_offset, window_indices, ServerShares,
};
