//! Garbled circuits and oblivious transfer for the nonlinear layers of helina
//! (GAZELLE §7.3, Table 10), semi-honest, 128-bit computational security.
//!
//! * [`label`] — 128-bit labels and the fixed-key-AES correlation-robust hash.
//! * [`circuit`] — circuits and gadgets (mod-p add/sub, sign, mux, max, ReLU,
//!   truncation), AND gates counted per gadget.
//! * [`garble`] — half-gates (Zahur-Rosulek-Evans) garbling/evaluation with free-XOR
//!   and point-and-permute, batched over elements.
//! * [`ot`] — Chou-Orlandi base OT over Ristretto and IKNP OT extension.
//! * [`protocol`] — the two-party offline/online step over additive shares mod p.
//! * [`wire`] — message types and framing.
//! * [`error`] — [`GcError`].
//!
//! Cost (release, `cargo test -p gc --release --test bench -- --ignored --nocapture`,
//! both parties on one loaded 2-core host over an in-memory channel), 10 000 ReLUs,
//! p = 1032193 (ℓ = 20), 136 AND gates per ReLU: offline ≈ 200–575 ms / 49.95 MB,
//! online ≈ 50–200 ms / 6.43 MB in one round trip (times vary with the host load); GAZELLE Table 10 reports
//! 551 ms / 54.3 MB offline and 136 ms / 16.8 MB online. The online phase is small
//! because the random OTs are correlated with the free-XOR offset, so derandomising
//! costs one 16-byte block per evaluator bit.

pub mod circuit;
pub mod error;
pub mod garble;
pub mod label;
pub mod ot;
pub mod protocol;
pub mod wire;

pub use error::{GcError, Result};
pub use protocol::{
    client_offline, client_online, reference, run_local, run_local_link, run_over, server_offline,
    server_online, ClientPre, Garbler, NonlinSpec, Nonlinear, PhaseReport, ServerPre,
};
