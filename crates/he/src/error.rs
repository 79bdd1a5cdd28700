//! The one error type of the `he` crate.
//!
//! fhe.rs 0.1.1 reports most failures as strings; they are converted at this border into
//! [`HeError::Engine`] so no other crate sees fhe.rs types.

/// Errors of the HE layer. Fields hold the expected and actual values.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum HeError {
    /// The ring degree is not a power of two in the supported range.
    #[error("ring degree {n} is not supported (powers of two from 1024 to 32768)")]
    UnsupportedDegree {
        /// The degree asked for.
        n: usize,
    },
    /// The ciphertext modulus exceeds the 128-bit security bound of the HomomorphicEncryption.org standard.
    #[error("insecure parameters: log2 q = {log_q} bits exceeds the 128-bit security bound of {max_log_q} bits for n = {n}")]
    InsecureModulus {
        /// Ring degree.
        n: usize,
        /// Total bit size of the ciphertext modulus.
        log_q: u32,
        /// The largest allowed bit size for this n.
        max_log_q: u32,
    },
    /// The plaintext modulus does not support SIMD batching (it must be a prime p ≡ 1 mod 2n).
    #[error("plaintext modulus {p} does not support batching for n = {n}: it must be a prime with p ≡ 1 (mod {two_n})")]
    NoBatching {
        /// Plaintext modulus.
        p: u64,
        /// Ring degree.
        n: usize,
        /// 2n.
        two_n: usize,
    },
    /// A ciphertext modulus is outside what fhe.rs accepts or not NTT-friendly.
    #[error("ciphertext modulus #{index} = {q} is invalid: it must be a prime of 10 to 62 bits with q ≡ 1 (mod {two_n})")]
    InvalidModulus {
        /// Position in the chain.
        index: usize,
        /// The modulus.
        q: u64,
        /// 2n.
        two_n: usize,
    },
    /// The plaintext modulus is not smaller than the ciphertext moduli.
    #[error("plaintext modulus of {p_bits} bits leaves no room under a ciphertext modulus of {q_bits} bits")]
    PlaintextTooLarge {
        /// Bits of p.
        p_bits: u32,
        /// Bits of the smallest ciphertext modulus.
        q_bits: u32,
    },
    /// The chain is empty or too short for the asked operation.
    #[error("the modulus chain needs at least {min} moduli, it has {actual}")]
    ChainTooShort {
        /// Needed.
        min: usize,
        /// Given.
        actual: usize,
    },
    /// No preset has this name.
    #[error("unknown parameter preset `{name}` (known: {known})")]
    UnknownPreset {
        /// The name given.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A vector of the wrong length was given.
    #[error("expected {expected} values, got {actual}")]
    WrongLength {
        /// Expected length.
        expected: usize,
        /// Actual length.
        actual: usize,
    },
    /// A value is not reduced modulo p.
    #[error("value {value} at index {index} is not reduced modulo p = {p}")]
    NotReduced {
        /// Position.
        index: usize,
        /// The value.
        value: u64,
        /// Plaintext modulus.
        p: u64,
    },
    /// A rotation step for which no Galois key was declared.
    #[error("no Galois key for rotation step {step}: declare it when generating keys (declared: {declared:?})")]
    UndeclaredRotation {
        /// The step asked for (row rotation), or 0 for the column swap.
        step: i64,
        /// Steps that have keys.
        declared: Vec<i64>,
    },
    /// A rotation step outside (-n/2, n/2).
    #[error("rotation step {step} is out of range: |step| must be below {half}")]
    RotationOutOfRange {
        /// The step.
        step: i64,
        /// n/2.
        half: usize,
    },
    /// The column (row-swap) key was not declared.
    #[error("no Galois key for the column rotation (row swap): declare it when generating keys")]
    UndeclaredColumnRotation,
    /// An operation needs a key this party does not hold.
    #[error("this operation needs the {key}, which this party does not hold")]
    MissingKey {
        /// Which key.
        key: &'static str,
    },
    /// Operands at different levels.
    #[error("operands are at different levels ({left} and {right})")]
    LevelMismatch {
        /// Level of the left operand.
        left: usize,
        /// Level of the right operand.
        right: usize,
    },
    /// An operation needs the top level and the ciphertext was switched down.
    #[error("ciphertext is at level {actual}; this operation needs level {expected}")]
    WrongLevel {
        /// Needed level.
        expected: usize,
        /// Actual level.
        actual: usize,
    },
    /// An empty list was given to a fused operation.
    #[error("{what} needs at least one operand")]
    Empty {
        /// The operation.
        what: &'static str,
    },
    /// Serialized bytes that do not decode to a valid object.
    #[error("malformed {what}: {detail}")]
    Malformed {
        /// What was being decoded.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// Bytes made for other parameters.
    #[error("{what} was made for other parameters: expected {expected}, got {actual}")]
    ParamsMismatch {
        /// What was decoded.
        what: &'static str,
        /// Expected value.
        expected: String,
        /// Actual value.
        actual: String,
    },
    /// Flooding noise too large for the modulus.
    #[error(
        "flooding noise of {bits} bits is too large: at most {max} bits fit under this modulus"
    )]
    FloodTooLarge {
        /// Asked bits.
        bits: u32,
        /// Largest possible.
        max: u32,
    },
    /// An operand or an operation in the other plaintext encoding (slots vs
    /// coefficients), detected by the simulator.
    #[error("{operation} needs {expected}-encoded operands, got a {actual}-encoded one")]
    EncodingMismatch {
        /// The operation.
        operation: &'static str,
        /// The encoding it needs.
        expected: crate::backend::Encoding,
        /// The encoding it got.
        actual: crate::backend::Encoding,
    },
    /// A selected ciphertext (only some coefficients decryptable, for the wire) was
    /// given to an operation other than coefficient decryption or serialisation.
    #[error("{operation} needs a whole ciphertext, not one reduced to selected coefficients")]
    Selected {
        /// The operation.
        operation: &'static str,
    },
    /// Coefficient runs that are not sorted, disjoint, non-empty and inside 0..n.
    #[error("coefficient run {index} ({start}..{end}) is empty, unsorted, overlapping or beyond n = {n}")]
    BadRuns {
        /// Position of the offending run.
        index: usize,
        /// Its start.
        start: usize,
        /// Its end.
        end: usize,
        /// Ring degree.
        n: usize,
    },
    /// A coefficient plaintext declared to lie at multiples of 2^stride_log2
    /// ([`crate::Backend::dot_encoded_groups`]) with a non-zero value elsewhere.
    #[error("plaintext coefficient {index} is non-zero, off the declared stride 2^{stride_log2}")]
    OffStride {
        /// The coefficient.
        index: usize,
        /// The declared stride's exponent.
        stride_log2: u32,
    },
    /// An error reported by the fhe.rs engine.
    #[error("fhe.rs: {0}")]
    Engine(String),
}

impl From<fhe::Error> for HeError {
    fn from(e: fhe::Error) -> Self {
        HeError::Engine(e.to_string())
    }
}

impl From<fhe_math::Error> for HeError {
    fn from(e: fhe_math::Error) -> Self {
        HeError::Engine(e.to_string())
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, HeError>;
