//! The crate's one error type.

use std::fmt;

/// One unsupported construct found while validating an ONNX graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// The node's name (or `#index` when the node is unnamed).
    pub node: String,
    /// The node's op type (`Conv`, `Softmax`, ...).
    pub op: String,
    /// The offending attribute, when the problem is an attribute.
    pub attribute: Option<String>,
    /// What is wrong: the value found and what would be accepted.
    pub reason: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.attribute {
            Some(a) => write!(
                f,
                "node {} ({}): attribute {}: {}",
                self.node, self.op, a, self.reason
            ),
            None => write!(f, "node {} ({}): {}", self.node, self.op, self.reason),
        }
    }
}

fn list(items: &[Unsupported]) -> String {
    items
        .iter()
        .map(|u| format!("  - {u}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NnError {
    /// The model file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not an ONNX `ModelProto`.
    #[error("not an ONNX model: {0}")]
    Decode(String),
    /// Every unsupported op / attribute of the graph, all reported together.
    #[error("unsupported ONNX constructs ({} found):\n{}", .0.len(), list(.0))]
    Unsupported(Vec<Unsupported>),
    /// An attribute value that is well-formed but cannot be mapped (found after shape inference).
    #[error("node {node} ({op}): attribute {attribute}: {reason}")]
    BadAttribute {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// Attribute name.
        attribute: String,
        /// Why.
        reason: String,
    },
    /// A tensor has a shape other than the one an op requires.
    #[error("node {node} ({op}): {what}: expected shape {expected:?}, got {actual:?}")]
    Shape {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// Which tensor / input.
        what: String,
        /// Expected shape (`0` = any in that position).
        expected: Vec<usize>,
        /// Actual shape.
        actual: Vec<usize>,
    },
    /// A structural problem with the graph (missing initializer, dangling input, ...).
    #[error("node {node} ({op}): {reason}")]
    Graph {
        /// Node name (or graph-level item).
        node: String,
        /// Op type.
        op: String,
        /// Why.
        reason: String,
    },
    /// A BatchNormalization that does not directly follow a Conv/Gemm it alone consumes.
    #[error("node {node} (BatchNormalization): input {input} is produced by {producer}, not by a Conv/Gemm/MatMul whose only consumer is this node; it cannot be folded")]
    BatchNormNotFoldable {
        /// The BN node.
        node: String,
        /// Its input tensor.
        input: String,
        /// What produces it.
        producer: String,
    },
    /// An initializer has an element type / layout this crate does not read.
    #[error("initializer {name}: {reason}")]
    Initializer {
        /// Initializer name.
        name: String,
        /// Why.
        reason: String,
    },
    /// An accumulator does not fit the plaintext modulus.
    #[error("layer {layer}: values need {needed_bits} bits (with 2 bits of headroom) at the smallest fractional-bit count tried, but the largest plaintext modulus offered has {p_bits} bits")]
    Overflow {
        /// Layer (node) name.
        layer: String,
        /// Bits needed for the centred range with headroom.
        needed_bits: u32,
        /// Bit length of p.
        p_bits: u32,
    },
    /// A value left (−p/2, p/2) while running the fixed-point reference.
    #[error("step {step} ({layer}): value {value} outside (-p/2, p/2) for p = {p}")]
    RangeExceeded {
        /// Step index.
        step: usize,
        /// Layer name.
        layer: String,
        /// The value.
        value: i128,
        /// The modulus.
        p: u64,
    },
    /// An input vector of the wrong length.
    #[error("{what}: expected {expected} values, got {actual}")]
    Length {
        /// What was passed.
        what: String,
        /// Expected length.
        expected: usize,
        /// Actual length.
        actual: usize,
    },
    /// No offered plaintext modulus gives outputs within the tolerance of the float model.
    #[error("no plan meets the tolerance {tolerance} on the calibration inputs: the best fitting one ({frac_bits} fractional bits, {p_bits}-bit p) is off by {achieved:.4}; layer {layer} ({op}) loses the most precision (relative error {relative_error:.2e} at its output). Offer a larger modulus or raise --tolerance")]
    Precision {
        /// The tolerance asked for.
        tolerance: f64,
        /// The smallest max |Δ| found.
        achieved: f64,
        /// Its fractional bits.
        frac_bits: u32,
        /// Bits of the largest modulus offered.
        p_bits: u32,
        /// The layer (node) that loses the most relative precision.
        layer: String,
        /// Its op.
        op: String,
        /// Relative error of that layer's output.
        relative_error: f64,
    },
    /// A NaN or infinity in an input.
    #[error("{what}: element {index} is {value}, not a finite number")]
    NonFinite {
        /// Which input.
        what: String,
        /// Element index.
        index: usize,
        /// The value.
        value: f32,
    },
    /// An input value outside the range the program is safe for.
    #[error("input element {index} is {value}, outside the range [{lo}, {hi}] the model's fixed point is planned for ({count} element(s) outside); such an input could wrap modulo p and give a wrong answer")]
    InputOutOfRange {
        /// The element farthest outside.
        index: usize,
        /// Its value.
        value: f32,
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
        /// How many elements are outside.
        count: usize,
    },
    /// A step marked for approximate truncation whose op does not truncate its own
    /// input (only ReLU and Identity steps may be).
    #[error("step {step} ({layer}): approximate truncation applies to ReLU and Identity steps only, not {op}")]
    ApproximateTruncation {
        /// Step index.
        step: usize,
        /// Layer name.
        layer: String,
        /// The step's op.
        op: String,
    },
    /// Bad planning parameters (no candidates, no calibration data, empty range).
    #[error("fixed-point search: {0}")]
    FixedPointSearch(String),
}
