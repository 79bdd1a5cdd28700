//! helina's two-party protocol for linear layers over any [`net::Channel`]: the
//! server ([`serve`], or [`serve_tcp`] for concurrent TCP sessions) holds a [`Model`]
//! (weights); the client ([`query`]) holds the input.
//!
//! Messages (bincode, one per frame, decoded with the frame's length as the limit):
//! 1. client → `Hello` (protocol version; parameter spec and hash — the hash includes
//!    the NTT backend, since builds with different backends cannot read each other's
//!    keys; the layers asked for, by shape, each with an optional method);
//!    server → `HelloOk` (the plan: one method per layer) or `Abort`;
//! 2. client → `Setup` (public key and only the Galois keys the plan needs, seeded);
//! 3. server: offline work (weights encoded, flooding zeros precomputed) → `Ready`;
//! 4. per layer: client → `Query` (seeded symmetric ciphertexts), server → `Response`
//!    (masked, flooded, last-level ciphertexts); each side keeps its share;
//! 5. client → `Close`, or `Reveal`: a server of public demonstration weights sends its
//!    shares (insecure, for checking the demo); any other server refuses it.
//!
//! Errors sent to the peer are coarse ([`AbortReason`]); the detail stays local.

mod client;
mod msg;
pub mod network;
mod plan;
mod server;
mod sessions;

pub use client::{query, ClientOutcome, Phase};
pub use msg::{
    decode, encode, recv, send, AbortReason, LayerMethod, LayerRequest, LayerShape, LayerSpec, Msg,
    ProtocolError, Result, PROTOCOL_VERSION,
};
pub use plan::{choose, Candidate, Encoded, Objective, Plan, Planner, ServerBackend};
pub use server::{
    serve, serve_tcp, serve_with, Encodings, LayerSessionReport, Model, PhaseCounters, PhaseTimes,
    ServedLayer, ServerOutcome,
};
pub use sessions::{default_session_memory, serve_sessions, ServeOptions, SessionReport};
