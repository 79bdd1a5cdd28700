//! # helina: private neural-network inference
//!
//! A client holds a private input, a server holds a private model; the client learns
//! the model's output (logits) and nothing else about the weights, the server learns
//! nothing about the input. Linear layers run as packed-BFV kernels whose results are
//! additive shares mod p, nonlinear layers as garbled circuits over the shares
//! (semi-honest, 128-bit security; the architecture is public).
//!
//! Three ways in:
//!
//! - [`infer`]: both parties in this process (over loopback TCP), on an ONNX file —
//!   the quickest way to see what a model gives privately, checked against the
//!   plaintext fixed-point reference and the float model;
//! - [`Server`] (from a [`Model`]: an ONNX file planned once) serving TCP clients, and
//!   [`Client`], which connects and returns logits for an array;
//! - the parts: [`Model::from_onnx`] (import → calibrate → fixed point → a method per
//!   layer), [`infer_local`], the reports ([`Inference`], [`LocalInference`]).
//!
//! The fixed point is chosen by agreement with the float model on calibration inputs
//! ([`FixedPoint`]); the plan carries the input range it is safe for, and the client
//! refuses an input outside it before anything is encrypted.
//!
//! ```
//! # fn main() -> helina::Result<()> {
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
//! let calibration = helina::array::read_batch(&format!("{dir}/digits-mlp-calibration.npy"), &[1, 8, 8])?;
//! let images = helina::array::read_batch(&format!("{dir}/digits-mlp-test.npy"), &[1, 8, 8])?;
//! let run = helina::infer(
//!     &format!("{dir}/digits-mlp.onnx"),
//!     &images[..1],
//!     &helina::FixedPoint::calibrated(calibration),
//! )?;
//! assert!(run.all_match_fixed_reference());
//! assert!(run.checks[0].float_max_abs_err <= 0.05);
//! println!("logits {:?}", run.inference.outputs[0].logits);
//! # Ok(())
//! # }
//! ```
//!
//! Two processes:
//!
//! ```no_run
//! # fn main() -> helina::Result<()> {
//! use std::net::TcpListener;
//! // the server's machine
//! let model = helina::Model::from_onnx(
//!     "model.onnx",
//!     &helina::FixedPoint::in_range(-2.5, 2.7),
//!     &helina::Planning::default(),
//! )?;
//! let server = helina::Server::new(model, helina::ServerOptions::default())?;
//! std::thread::spawn(move || server.serve(TcpListener::bind("127.0.0.1:7000").unwrap(), |_| {}));
//! // the client's machine
//! let client = helina::Client::new("127.0.0.1:7000", helina::ClientOptions::default());
//! let result = client.infer(&[vec![0.0; 3 * 32 * 32]], &mut |_| {})?;
//! println!("{:?}", result.outputs[0].logits);
//! # Ok(())
//! # }
//! ```

pub mod array;
mod client;
pub mod costs;
mod error;
mod local;
mod model;
mod report;
mod saved;
mod server;

pub use client::{Client, ClientOptions, Progress};
pub use costs::CostSource;
pub use error::{Error, Result};
pub use local::{infer_local, infer_local_each, Check, Layer, LocalInference, LocalOptions};
pub use model::{
    CalibrationSource, FixedPoint, Model, PlanTimings, Planning, RANGE_SAMPLES, RANGE_SAMPLES_SEED,
};
pub use report::{argmax, Inference, Output};
pub use saved::{SavedModelError, FORMAT_VERSION as SAVED_MODEL_FORMAT};
pub use server::{Server, ServerOptions};

pub use gc::Garbler;
pub use he::Params;
pub use net::{ClientTls, Link, ServerTls};
pub use nn::{Accuracy, InputRange, RangeBasis, DEFAULT_TOLERANCE};
pub use protocol::{
    LayerPick, MethodChoice, Metrics, NetworkPlan, NonlinearProtocol, Objective, ServeOptions,
    ServerOutcome, SessionReport, Shutdown, StepReport, MAX_INPUTS_PER_SESSION,
};

/// Private inference of the ONNX model at `path` on `inputs` with both parties in this
/// process: the model planned with `fixed` (calibration inputs or an input range are
/// needed) and default planning, then [`infer_local`].
pub fn infer(path: &str, inputs: &[Vec<f32>], fixed: &FixedPoint) -> Result<LocalInference> {
    let model = Model::from_onnx(path, fixed, &Planning::default())?;
    infer_local(&model, inputs, &LocalOptions::default(), &mut |_| {})
}
