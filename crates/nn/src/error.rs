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
    /// An average pool whose 1/area factor cannot be folded into a following linear layer and is not a power of two.
    #[error("node {node} ({op}): 1/{area} cannot be folded (next consumer is not Conv/Linear) and {area} is not a power of two")]
    PoolDivisor {
        /// The pooling node.
        node: String,
        /// Its op.
        op: String,
        /// Window area.
        area: usize,
    },
    /// An accumulator does not fit the plaintext modulus.
    #[error("layer {layer}: accumulator needs {needed_bits} bits (with a 2x margin) but the plaintext modulus has {p_bits} bits")]
    Overflow {
        /// Layer (node) name.
        layer: String,
        /// Bits needed for the centered range with margin: bit length of 4·max|acc|+1.
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
    /// Bad planning parameters (no candidates, no calibration data, empty range).
    #[error("plan: {0}")]
    Plan(String),
}
