//! The library's one error type.

/// Everything that can go wrong in a private inference, from reading a model to the
/// session with the peer. Each variant carries the detail of the crate it comes from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Importing, planning or checking a model or an input (`nn`).
    #[error(transparent)]
    Model(Box<nn::NnError>),
    /// The two-party session (`protocol`).
    #[error(transparent)]
    Protocol(Box<protocol::ProtocolError>),
    /// A kernel (`kernels`).
    #[error(transparent)]
    Kernel(#[from] kernels::KernelError),
    /// Parameters or keys (`he`).
    #[error(transparent)]
    He(#[from] he::HeError),
    /// The transport (`net`).
    #[error(transparent)]
    Net(#[from] net::NetError),
    /// A file that could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A saved model (`.helina`) that cannot be read.
    #[error("{path}: {error}")]
    SavedModel {
        /// The file.
        path: String,
        /// What is wrong.
        #[source]
        error: crate::saved::SavedModelError,
    },
    /// An array file that is not what it should be.
    #[error("{path}: {detail}")]
    Array {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// Inputs whose shape is not the model's.
    #[error("inputs of shape {actual:?}: the model takes [batch, {}]", .expected.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))]
    InputShape {
        /// The model's input shape (without batch).
        expected: Vec<usize>,
        /// The shape given.
        actual: Vec<usize>,
    },
    /// An option with a value that cannot be used.
    #[error("{option}: {detail}")]
    Option {
        /// The option.
        option: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A party's thread failed without an error of its own (it panicked).
    #[error("the {party} thread stopped unexpectedly")]
    Thread {
        /// Which party.
        party: &'static str,
    },
}

// boxed: an error is rare and a `Result` is returned everywhere (keeps it small)
impl From<nn::NnError> for Error {
    fn from(e: nn::NnError) -> Self {
        Error::Model(Box::new(e))
    }
}

impl From<protocol::ProtocolError> for Error {
    fn from(e: protocol::ProtocolError) -> Self {
        Error::Protocol(Box::new(e))
    }
}

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;
