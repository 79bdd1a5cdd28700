//! Transport errors.

/// Errors of the transport. Fields hold expected and actual values.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum NetError {
    /// A frame announced more bytes than the limit.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    Oversized {
        /// Announced length.
        len: u64,
        /// Limit.
        max: u64,
    },
    /// The stream ended inside a frame.
    #[error("truncated frame: expected {expected} bytes, the stream ended after {actual}")]
    Truncated {
        /// Bytes announced (or 4 for the header).
        expected: u64,
        /// Bytes received.
        actual: u64,
    },
    /// The peer closed the connection between frames.
    #[error("the peer disconnected")]
    Disconnected,
    /// A frame was not done within the timeout (the peer stalled, or sent too slowly).
    #[error("the peer stalled: a frame was not done within {millis} ms")]
    Timeout {
        /// The timeout.
        millis: u64,
    },
    /// The session's deadline passed.
    #[error("the session's time limit of {millis} ms is over")]
    Deadline {
        /// The time the session was given.
        millis: u64,
    },
    /// Another I/O failure.
    #[error("I/O error: {kind}")]
    Io {
        /// The error kind, as text.
        kind: String,
    },
    /// TLS failed: the handshake (an untrusted or misnamed certificate, no common
    /// version), or a record that did not authenticate (bytes changed on the path).
    #[error("TLS: {detail}")]
    Tls {
        /// rustls's description.
        detail: String,
    },
    /// A TLS configuration that cannot be used (a missing or malformed PEM file, a key
    /// that does not match its certificate).
    #[error("TLS configuration: {detail}")]
    TlsConfig {
        /// What is wrong.
        detail: String,
    },
    /// A link description that does not parse.
    #[error("link `{given}`: {why}")]
    BadLink {
        /// What was given.
        given: String,
        /// What is wrong.
        why: &'static str,
    },
}

/// Result alias.
pub type Result<T> = std::result::Result<T, NetError>;

impl From<std::io::Error> for NetError {
    fn from(e: std::io::Error) -> Self {
        if let Some(t) = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return NetError::Tls {
                detail: t.to_string(),
            };
        }
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                NetError::Timeout { millis: 0 }
            }
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe => NetError::Disconnected,
            k => NetError::Io {
                kind: format!("{k:?}"),
            },
        }
    }
}
