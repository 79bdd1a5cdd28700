//! helina's two-party protocol over any [`net::Channel`]: one session engine
//! ([`engine`]) runs any fixed-point program — a whole network, or a single linear layer
//! as a one-step program — between a server that holds the weights and a client that
//! holds the input; every tensor lives as additive shares mod p between them.
//!
//! Messages (bincode, one per frame, decoded with the frame's length as the limit):
//! 1. client → `Hello` (protocol version, inputs, for a server of single layers the
//!    layer asked for by shape with an optional method, whether it asks to learn a
//!    single layer's output); server → `LayerLayout` ([`SessionOffer`]: parameter set and hash —
//!    the hash includes the NTT backend —, the program without weights, a method per
//!    linear step, whether the output goes to the client) or `Abort`;
//! 2. the client checks its inputs against the plan's range, then → `Setup` (public key
//!    and only the Galois keys the plan needs, seeded);
//! 3. when the program has nonlinear steps and the plan names silent OT (the default,
//!    [`NonlinearProtocol`]): the session's COT pool (base OT, IKNP, first silent
//!    batches, crate `ot`), once;
//! 4. per input: the server's offline work (flooding zeros, OT precomputation or
//!    garbling with the client) → `Ready`; per step `Query` (seeded symmetric
//!    ciphertexts) → `Response` (masked, flooded, last-level ciphertexts), nonlinear
//!    (OT or garbled-circuit) and local steps; the server's share of the output
//!    (`Share`) when the offer reveals it;
//! 5. client → `Close`.
//!
//! Servers: [`NetworkServer`] (one program, weights encoded once), [`ServedLayers`] (single
//! layers; [`serve`], [`serve_tcp`]); every TCP server mode runs its sessions through
//! [`serve_sessions`]. Clients: [`client::run`], [`infer`] (a network), [`query`] (a
//! layer). Errors sent to the peer are coarse ([`AbortReason`]); the detail stays local.

pub mod client;
pub mod engine;
pub mod limits;
pub mod metrics;
mod msg;
mod plan;
mod server;
mod sessions;

pub use client::{
    infer, query, ClientOutcome, ClientOutput, ClientRequest, Inputs, LayerOutcome, Phase,
};
pub use engine::{
    architecture, gc_spec, layer_shape, local_step, nonlinear_spec, InferenceReport, PhaseCounters,
    StepReport,
};
pub use limits::{SessionLimits, DEFAULT_OFFLINE_WINDOW};
pub use metrics::Metrics;
pub use msg::{
    decode, encode, recv, recv_at_most, send, AbortReason, LayerMethod, LayerRequest, LayerShape,
    LayerSpec, Msg, NonlinearProtocol, PlanError, ProtocolError, Result, SessionOffer,
    PROTOCOL_VERSION,
};
pub use plan::{
    choose, default_weight_memory, layer_params, Candidate, Encoded, LayerLayout, LayerPick,
    MethodChoice, MethodEstimate, NetworkPlan, Objective, Planner, ServerBackend,
    DEFAULT_TIME_SLACK, DEFAULT_WEIGHT_MEMORY_CAP,
};
pub use server::{
    peak_rss_bytes, serve, serve_tcp, serve_with, serve_with_observed, Encodings, NetworkServer,
    PhaseTimes, ServedLayer, ServedLayers, ServerOutcome, ServerSessionReport,
    MAX_INPUTS_PER_SESSION,
};
pub use sessions::{default_session_memory, serve_sessions, ServeOptions, SessionReport, Shutdown};
