//! Errors of the kernels crate.

use he::HeError;

/// Kernel errors. Fields hold expected and actual values.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum KernelError {
    /// An error of the HE layer.
    #[error(transparent)]
    He(#[from] HeError),
    /// A matrix, vector or image of the wrong size.
    #[error("{what}: expected {expected} values, got {actual}")]
    Shape {
        /// What was checked.
        what: &'static str,
        /// Expected count.
        expected: usize,
        /// Actual count.
        actual: usize,
    },
    /// A convolution that the requested channel packing cannot lay out.
    #[error("{why} (image {h}x{w}, {span} slots per row)")]
    Packing {
        /// Why not.
        why: &'static str,
        /// Image height.
        h: usize,
        /// Image width.
        w: usize,
        /// Slots per row.
        span: usize,
    },
    /// A zero dimension.
    #[error("{what} must be at least 1")]
    EmptyDimension {
        /// Which dimension.
        what: &'static str,
    },
    /// A weight that does not fit the centred range of Z_p.
    #[error("weight {value} at index {index} is outside (−p/2, p/2) for p = {p}")]
    WeightRange {
        /// Position (row-major).
        index: usize,
        /// The value.
        value: i64,
        /// Plaintext modulus.
        p: u64,
    },
    /// A weight beyond the public bound the noise model was sized by
    /// ([`he::Params::with_weight_bound`]).
    #[error("weight {value} at index {index} is beyond the public weight bound 2^{bits}")]
    WeightBound {
        /// Position (row-major).
        index: usize,
        /// The value.
        value: i64,
        /// The bound's bits.
        bits: u32,
    },
    /// The noise budget cannot absorb the flooding the response needs.
    #[error("{method} on {params}: response privacy needs {needed} bits of noise budget, the parameters give {available}; use {suggestion}")]
    NoiseBudget {
        /// Method name.
        method: String,
        /// Parameter preset.
        params: String,
        /// Bits needed (kernel noise + flooding + p + margin).
        needed: u32,
        /// Bits available (log2 q).
        available: u32,
        /// A preset that can, or advice.
        suggestion: String,
    },
    /// A response or query of the wrong number of ciphertexts.
    #[error("{what}: expected {expected} ciphertexts, got {actual}")]
    CiphertextCount {
        /// What was checked.
        what: &'static str,
        /// Expected.
        expected: usize,
        /// Actual.
        actual: usize,
    },
    /// The flooding pool ran out of precomputed encryptions of zero.
    #[error("the pool of precomputed encryptions of zero is empty: precompute {needed} per query")]
    PoolEmpty {
        /// How many one query needs.
        needed: usize,
    },
    /// The plaintext modulus has no roots of unity for a transform length.
    #[error("p = {p} has no number-theoretic transform of length {len} (needs p ≡ 1 mod {}): use e.g. p = {suggestion}", 2 * len)]
    NoTransform {
        /// Plaintext modulus.
        p: u64,
        /// Transform length.
        len: usize,
        /// A prime that works.
        suggestion: String,
    },
    /// Stored encoded weights that do not decode.
    #[error("stored encoded weights are malformed: {detail}")]
    Storage {
        /// What was wrong.
        detail: String,
    },
    /// The encoded matrix was made for another layout.
    #[error("the encoded matrix was made for {expected}, not {actual}")]
    PlanMismatch {
        /// The layout the encoding needs.
        expected: String,
        /// The layout it was used with.
        actual: String,
    },
    /// A group count that does not divide the channels of a grouped convolution.
    #[error("groups = {groups} must divide the channels: c_i = {c_i}, c_o = {c_o}")]
    Groups {
        /// Groups.
        groups: usize,
        /// Input channels.
        c_i: usize,
        /// Output channels.
        c_o: usize,
    },
    /// A grouped convolution that is not depthwise (groups = c_i, c_o a multiple of c_i).
    #[error("a depthwise convolution needs groups = input channels and output channels a multiple of them: groups = {groups}, c_i = {c_i}, c_o = {c_o}")]
    NotDepthwise {
        /// Groups.
        groups: usize,
        /// Input channels.
        c_i: usize,
        /// Output channels.
        c_o: usize,
    },
}

/// Result alias.
pub type Result<T> = std::result::Result<T, KernelError>;
