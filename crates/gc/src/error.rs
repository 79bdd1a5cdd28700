//! Errors of the GC step. Everything a peer can get wrong (short frames, wrong
//! lengths, undecodable messages, a different layer description) is a typed
//! [`GcError`]; nothing received from the peer can make this crate panic.

use thiserror::Error;

/// Errors of garbling, oblivious transfer and the two-party protocol.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GcError {
    /// The transport failed (disconnect, timeout, oversized frame, ...).
    #[error("transport: {0}")]
    Net(#[from] net::NetError),
    /// A message could not be decoded.
    #[error("malformed {what}: {reason}")]
    Decode {
        /// Which message.
        what: &'static str,
        /// The decoder's complaint.
        reason: String,
    },
    /// A message or frame has the wrong length (in bytes or in elements, see `what`).
    #[error("wrong length of {what}: expected {expected}, got {actual}")]
    Length {
        /// Which message or field.
        what: &'static str,
        /// Expected length.
        expected: u64,
        /// Received length.
        actual: u64,
    },
    /// The two parties describe the layer differently.
    #[error("the parties disagree on {field}: ours {ours}, theirs {theirs}")]
    SpecMismatch {
        /// Which field (`p`, `op`, `window`, `trunc_bits`, `count`, `garbler`, `version`).
        field: &'static str,
        /// Our value.
        ours: u64,
        /// The peer's value.
        theirs: u64,
    },
    /// This party's share slice has the wrong number of elements.
    #[error("expected {expected} input shares, got {actual}")]
    ShareCount {
        /// `spec.inputs()`.
        expected: usize,
        /// Given.
        actual: usize,
    },
    /// An input share is not reduced mod p.
    #[error("input share {index} = {value} is not below p = {p}")]
    ShareOutOfRange {
        /// Position.
        index: usize,
        /// The value.
        value: u64,
        /// The modulus.
        p: u64,
    },
    /// A decoded output is not below p (only possible with a corrupted garbled circuit).
    #[error("decoded output {index} = {value} is not below p = {p} (corrupted garbled circuit?)")]
    OutputOutOfRange {
        /// Position.
        index: usize,
        /// The value.
        value: u64,
        /// The modulus.
        p: u64,
    },
    /// A received group element is not a valid Ristretto encoding.
    #[error("base OT: point {index} is not a valid Ristretto encoding")]
    InvalidPoint {
        /// Position in its message (0 for the sender's single point).
        index: usize,
    },
    /// The layer description is unusable.
    #[error("invalid layer specification: {0}")]
    InvalidSpec(String),
    /// A party's thread died (only in [`crate::run_local`]).
    #[error("internal: {0}")]
    Internal(&'static str),
}

/// Result alias.
pub type Result<T> = std::result::Result<T, GcError>;
