//! helina's benchmark drivers, on the public crates: each takes plain options and
//! returns a serde report; the `helina bench …` commands parse their arguments into
//! these options and print the reports (tables or JSON).
//!
//! - [`ops`]: every HE operation's median time, and the planner's per-op cost model.
//! - [`matvec`], [`conv`] (both measured by [`linear`]): one linear layer, every
//!   method side by side, checked against the plaintext result.
//! - [`nonlinear`]: Square, ReLU and MaxPool between two parties over loopback TCP.
//! - [`network`]: every layer of a network (real BFV or op counts), beside the planner's
//!   prediction.
//! - [`serve`]: a server process under several clients at once, round after round.

pub mod conv;
pub mod linear;
pub mod matvec;
pub mod network;
pub mod nonlinear;
pub mod ops;
pub mod serve;

use indicatif::{ProgressBar, ProgressStyle};

pub use kernels::estimate::median_us;

/// A benchmark's result: its report, or why it could not run.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}
