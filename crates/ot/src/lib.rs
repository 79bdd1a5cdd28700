//! Silent OT and the OT-based nonlinear layers of helina (two parties, semi-honest,
//! 128-bit security), over helina's own [`net::Channel`].
//!
//! * [`silent`] — silent correlated OT from dual LPN with the expand-convolute code
//!   (Boyle et al. CCS 2019 + Raghuraman–Rindal–Tanguy CRYPTO 2023, the code from
//!   `cryprot-codes`); [`pprf`] — the GGM puncturable PRF it needs.
//! * [`session`] — [`OtSession`]: base OT (`gc`'s Chou-Orlandi) + IKNP once, then a
//!   pool of COTs in each direction refilled by silent batches.
//! * [`rot`] — correlated, random, chosen-message 1-of-2 and 1-of-2^k OT (k ≤ 8) on
//!   the session.
//! * [`hash`], [`kot`] — the tweakable correlation-robust hash and random
//!   1-of-2^k OT from `k` COTs, the pads of every OT.
//! * [`mill`], [`circuit`], [`program`], [`layer`] — CrypTFlow2's millionaire
//!   protocol, AND gates with triples from COTs, OTs into Z_p and the flight
//!   scheduler, and the layers (DReLU, ReLU, Max/MaxPool, faithful and approximate
//!   truncation) for odd p.
//! * [`protocol`] — the API mirroring `gc::protocol`: [`OtSpec`] (a `gc::NonlinSpec`
//!   plus [`Truncation`]), `server_offline` / `client_offline` /
//!   `server_online` / `client_online`, session-level
//!   [`OtSession::server_offline`] etc., [`run_local`] / [`run_over`] with an
//!   [`OtReport`].
//! * [`error`] — [`OtError`]; [`bits`] — bit vectors and packing.
//!
//! **Security.** Semi-honest, static corruption, 128-bit computational security:
//! Chou-Orlandi OT over Ristretto (CDH, random oracle), IKNP (correlation-robust
//! hash), the TMMO fixed-key-AES hash of Guo–Katz–Wang–Yu (ideal permutation) for
//! every OT pad and GGM level key, the fixed-key-AES GGM PRG, and the dual-LPN
//! (regular syndrome decoding) assumption for the ExConv7x24 code of rate 1/2 with
//! regular noise of weight `t = 400` (libOTe's rule `t = ⌈−λ/log₂(1 − 2δ)⌉` with the
//! conservative minimum-distance ratio `δ = 0.1` instead of libOTe/CryProt's 0.15;
//! [`silent`] gives the details). Keys, seeds, `Δ`s and masks come from ChaCha20
//! seeded by the OS generator (`rand::rng()`); fixed seeds appear only in tests.
//! Every message from the peer is length- and range-checked into a typed
//! [`OtError`]; no peer-sent length sizes an allocation.
//!
//! **Cost** (`tests/bench.rs`, release, both parties on one 2-core host, 10⁴ ReLUs,
//! p = 1099511480321, ℓ = 40): online 46 B (no truncation), 52 B (approximate
//! truncation by 2^12) and 77 B (faithful) per ReLU in 8, 9 and 10 flights, 6–18 ms;
//! plus 66, 69 and 97 COTs per ReLU at 0.319 B each of amortised silent-OT traffic:
//! 67.1, 74.0 and 107.9 B per ReLU in all. Silent OT costs about 0.08 µs per COT (both
//! parties, wall; built with `-C target-feature=+sse4.1`, set for x86-64 in
//! `.cargo/config.toml`, which enables cryprot-codes' SIMD accumulator): 10⁴ ReLUs
//! end to end in 72, 76 and 112 ms.
//! The session setup sends about 267 kB once (`bench relu`'s `bytes_setup`).

pub mod bits;
pub mod circuit;
pub mod error;
pub mod hash;
pub mod kot;
pub mod layer;
pub mod mill;
pub mod pprf;
pub mod program;
pub mod protocol;
pub mod rot;
pub mod session;
pub mod silent;

pub use error::{OtError, Result};
pub use protocol::{
    approx_trunc, client_offline, client_online, run_local, run_over, run_over_with,
    server_offline, server_online, ClientPre, LayerStats, OtReport, OtSpec, PoolModel, Pooling,
    RunOptions, ServerPre, Truncation, MAX_COARSE_DRELU_BITS,
};
pub use session::{Dir, OtSession, Role, SessionStats};
pub use silent::SilentParams;
