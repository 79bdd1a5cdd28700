//! Errors of the OT crate. Everything a peer can get wrong (short or long frames,
//! values out of range, a different layer description, a desynchronised session) is a
//! typed [`OtError`] with the expected and received values as fields; nothing
//! received from the peer can make this crate panic, and no buffer is sized by a
//! length the peer sent (every expected length is computed from our own layer
//! description and session state).

use thiserror::Error;

/// Errors of silent OT, the OT flavours built on it and the nonlinear layers.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtError {
    /// The transport failed (disconnect, timeout, oversized frame, ...).
    #[error("transport: {0}")]
    Net(#[from] net::NetError),
    /// The base OT or IKNP (crate `gc`) failed.
    #[error("base OT / IKNP: {0}")]
    Base(gc::GcError),
    /// A message has the wrong length (bytes unless `what` says otherwise).
    #[error("wrong length of {what}: expected {expected}, got {actual}")]
    Length {
        /// Which message or field.
        what: &'static str,
        /// Expected length.
        expected: u64,
        /// Received length.
        actual: u64,
    },
    /// A received value is outside its range (e.g. an OT message not below p).
    #[error("{what}: value {value} at position {index} is not below {bound}")]
    OutOfRange {
        /// Which message.
        what: &'static str,
        /// Position in the message.
        index: usize,
        /// The value.
        value: u64,
        /// The exclusive bound.
        bound: u64,
    },
    /// A received message carries a tag or magic number we do not know.
    #[error("malformed {what}: got tag {got}")]
    BadTag {
        /// Which message.
        what: &'static str,
        /// The tag received.
        got: u64,
    },
    /// The two parties describe the layer (or the session state) differently.
    #[error("the parties disagree on {field}: ours {ours}, theirs {theirs}")]
    SpecMismatch {
        /// Which field (`version`, `p`, `op`, `window`, `trunc_bits`, `count`,
        /// `truncation`, `layer`, `pool_sc`, `pool_cs`, `role`).
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
    /// The layer description or a parameter is unusable.
    #[error("invalid specification: {0}")]
    InvalidSpec(String),
    /// The precomputed state belongs to another layer or party (a local misuse).
    #[error("precomputation mismatch: {0}")]
    Misuse(&'static str),
    /// A party's thread died (only in the `run_*` helpers).
    #[error("internal: {0}")]
    Internal(&'static str),
}

impl From<gc::GcError> for OtError {
    fn from(e: gc::GcError) -> Self {
        match e {
            gc::GcError::Net(n) => OtError::Net(n),
            e => OtError::Base(e),
        }
    }
}

/// Result alias.
pub type Result<T> = std::result::Result<T, OtError>;

/// `Err(Length)` unless `actual == expected`.
pub(crate) fn expect_len(what: &'static str, expected: usize, actual: usize) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(OtError::Length {
            what,
            expected: expected as u64,
            actual: actual as u64,
        })
    }
}
