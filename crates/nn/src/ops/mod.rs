//! The ONNX ops the importer reads, one file per op or family, registered by `op_type`
//! in `TABLE`.
//!
//! An op's `OpDef` holds everything the importer knows about it: the attributes it
//! reads with their types (checked on every node before any value is read, so the typed
//! readers of `OnnxNode` never take the wrong field), the first pass's check of
//! attribute values (every unsupported construct of a model is reported together, before
//! anything is loaded), the import of a private node into the float IR (`import`: new IR
//! nodes, a fold into the producing Conv/Linear, the input's normalisation, or constant
//! shape arithmetic) and its form in the client's output head (`head`). Where an op may
//! stand follows from which of the two it has: `import` only — private; `head` only —
//! after the last private tensor (Softmax, ArgMax, …); both — either.
//!
//! Adding an op is one new file here with its `OpDef` and one line in `TABLE`; the
//! support lists in error messages come from the table.

use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, NodeProto};

use crate::error::NnError;
use crate::head::HeadOp;

mod activation;
mod arith;
mod batch_norm;
mod constant;
mod conv;
mod gemm;
pub(crate) mod graph;
mod head;
mod identity;
mod pad;
mod pool;
mod shape;

pub use conv::conv_padding;
pub(crate) use graph::Graph;

/// The ONNX-ML domain (skl2onnx's `Scaler`, `ArrayFeatureExtractor`).
pub(crate) const ML_DOMAIN: &str = "ai.onnx.ml";

/// Every op the importer reads.
pub(crate) const TABLE: &[&OpDef] = &[
    &conv::CONV,
    &gemm::GEMM,
    &gemm::MATMUL,
    &batch_norm::BATCH_NORMALIZATION,
    &activation::RELU,
    &activation::CLIP,
    &pool::MAX_POOL,
    &pool::AVERAGE_POOL,
    &pool::GLOBAL_AVERAGE_POOL,
    &pool::GLOBAL_MAX_POOL,
    &pool::REDUCE_MEAN,
    &pad::PAD,
    &arith::ADD,
    &arith::SUB,
    &arith::MUL,
    &arith::DIV,
    &arith::POW,
    &arith::SCALER,
    &shape::FLATTEN,
    &shape::RESHAPE,
    &shape::SQUEEZE,
    &shape::UNSQUEEZE,
    &shape::TRANSPOSE,
    &identity::IDENTITY,
    &identity::DROPOUT,
    &identity::CAST,
    &constant::CONSTANT,
    &constant::SHAPE,
    &constant::GATHER,
    &constant::CONCAT,
    &head::SOFTMAX,
    &head::LOG_SOFTMAX,
    &head::SIGMOID,
    &head::ARG_MAX,
    &head::ARG_MIN,
    &head::TOP_K,
    &head::ARRAY_FEATURE_EXTRACTOR,
];

/// Ops known not to be supported, with what to do instead.
const REFUSED: &[(&str, &str)] = &[(
    "ZipMap",
    "ZipMap (skl2onnx's default output, a list of dicts) is not supported; export with options={'zipmap': False}",
)];

/// Imports a private node into the float IR.
pub(crate) type ImportFn = fn(&mut Graph, &OnnxNode) -> Result<(), NnError>;

/// A node of the output head: its [`HeadOp`] and how many of its inputs are data.
pub(crate) type HeadFn = fn(&mut Graph, &OnnxNode) -> Result<(HeadOp, usize), NnError>;

/// Everything the importer knows about one ONNX op.
pub(crate) struct OpDef {
    /// The ONNX `op_type`.
    pub op_type: &'static str,
    /// Its domain: `""` (the default, `ai.onnx`) or [`ML_DOMAIN`].
    pub domain: &'static str,
    /// Every attribute the op reads, with its type.
    pub attributes: &'static [(&'static str, AttributeType)],
    /// The first pass: unsupported attribute values of a private node (nothing is
    /// loaded yet; a head node's attributes are checked when the head is built).
    pub check: fn(&OnnxNode, &mut Vec<Finding>),
    /// A private node: adds to the float IR (or folds, or computes a constant).
    pub import: Option<ImportFn>,
    /// A node of the output head: its [`HeadOp`] and how many inputs are data.
    pub head: Option<HeadFn>,
}

impl OpDef {
    /// `op_type` of the default domain, without attributes, checks, import or head: the
    /// methods below add them (`OpDef::new("Relu").import(import_relu)`).
    pub(crate) const fn new(op_type: &'static str) -> OpDef {
        OpDef {
            op_type,
            domain: "",
            attributes: &[],
            check: no_check,
            import: None,
            head: None,
        }
    }

    /// In `domain` ([`ML_DOMAIN`]).
    pub(crate) const fn domain(mut self, domain: &'static str) -> OpDef {
        self.domain = domain;
        self
    }

    /// Reads these attributes, of these types.
    pub(crate) const fn attributes(
        mut self,
        attributes: &'static [(&'static str, AttributeType)],
    ) -> OpDef {
        self.attributes = attributes;
        self
    }

    /// Refuses attribute values with `check` (pass 1).
    pub(crate) const fn check(mut self, check: fn(&OnnxNode, &mut Vec<Finding>)) -> OpDef {
        self.check = check;
        self
    }

    /// May be a private node, imported by `import`.
    pub(crate) const fn import(mut self, import: ImportFn) -> OpDef {
        self.import = Some(import);
        self
    }

    /// May be a node of the output head, as `head` says.
    pub(crate) const fn head(mut self, head: HeadFn) -> OpDef {
        self.head = Some(head);
        self
    }

    /// Where the op may stand: from which of `import` and `head` it has.
    pub(crate) fn placement(&self) -> Placement {
        match (self.import.is_some(), self.head.is_some()) {
            (true, true) => Placement::Both,
            (true, false) => Placement::Private,
            (false, _) => Placement::Head,
        }
    }

    /// Whether the op is only ever part of an output head (Softmax, ArgMax, …).
    pub(crate) fn head_only(&self) -> bool {
        self.placement() == Placement::Head
    }
}

fn no_check(_: &OnnxNode, _: &mut Vec<Finding>) {}

/// Whether `domain` names ONNX's default domain (`""` or `"ai.onnx"`).
pub(crate) fn is_default_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "ai.onnx"
}

/// The definition of `op_type` in `domain` (`""` and `"ai.onnx"` are the same).
pub(crate) fn find(domain: &str, op_type: &str) -> Option<&'static OpDef> {
    let domain = if is_default_domain(domain) {
        ""
    } else {
        domain
    };
    TABLE
        .iter()
        .copied()
        .find(|d| d.op_type == op_type && d.domain == domain)
}

/// Why `op_type` of `domain` is not read at all.
pub(crate) fn refusal(domain: &str, op_type: &str) -> String {
    if let Some((_, why)) = REFUSED.iter().find(|(op, _)| *op == op_type) {
        return (*why).to_string();
    }
    if is_default_domain(domain) {
        format!("op type {op_type} is not supported")
    } else {
        format!("op {op_type} of domain {domain:?} is not supported")
    }
}

/// Where an op may stand in a graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Only before the output head (a private layer, a fold, shape arithmetic).
    Private,
    /// Only in the output head (Softmax, ArgMax, …).
    Head,
    /// Either.
    Both,
}

/// Every op the importer reads: its `op_type`, its domain (`""` is `ai.onnx`) and where
/// it may stand, in the table's order.
pub fn supported() -> Vec<(&'static str, &'static str, Placement)> {
    TABLE
        .iter()
        .map(|d| (d.op_type, d.domain, d.placement()))
        .collect()
}

/// The ops only an output head has, joined by `sep`.
pub(crate) fn head_only_ops(sep: &str) -> String {
    names(Placement::Head, sep)
}

/// The ops a head may have besides the [`head_only_ops`], joined by `sep`.
pub(crate) fn head_also_ops(sep: &str) -> String {
    names(Placement::Both, sep)
}

fn names(placement: Placement, sep: &str) -> String {
    TABLE
        .iter()
        .filter(|d| d.placement() == placement)
        .map(|d| d.op_type)
        .collect::<Vec<_>>()
        .join(sep)
}

/// An unsupported construct found by an op's check: the attribute (if one) and why.
pub(crate) struct Finding {
    /// The attribute.
    pub attribute: Option<&'static str>,
    /// Why.
    pub reason: String,
}

/// A node as an op reads it: its proto, its name for messages, its definition, and the
/// model's default opset.
pub(crate) struct OnnxNode<'g> {
    /// The node.
    pub proto: &'g NodeProto,
    /// Its name, or `#index` where it has none.
    pub name: String,
    /// Its op's definition.
    pub def: &'static OpDef,
    /// The default domain's opset of the model.
    pub opset: i64,
}

impl<'g> OnnxNode<'g> {
    /// `node` (index `idx` in the graph) with its definition.
    pub(crate) fn new(proto: &'g NodeProto, idx: usize, def: &'static OpDef, opset: i64) -> Self {
        OnnxNode {
            proto,
            name: node_name(proto, idx),
            def,
            opset,
        }
    }

    /// The op type.
    pub(crate) fn op(&self) -> &'g str {
        self.proto.op_type.as_str()
    }

    /// Every attribute of the node whose type is not the one its op reads it as: (name,
    /// what it is).
    pub(crate) fn mistyped_attributes(&self) -> Vec<(String, String)> {
        self.proto
            .attribute
            .iter()
            .filter_map(|a| {
                let want = self.def.attributes.iter().find(|(n, _)| *n == a.name)?.1;
                let got = AttributeType::from_i32(a.r#type);
                (got != Some(want)).then(|| {
                    let got = got.map_or(format!("type {}", a.r#type), |t| {
                        t.as_str_name().to_lowercase()
                    });
                    (
                        a.name.clone(),
                        format!(
                            "is of type {got}, expected {}",
                            want.as_str_name().to_lowercase()
                        ),
                    )
                })
            })
            .collect()
    }

    /// The attribute `name`, which the op declares as of type `want` (its type was
    /// checked against that before any op reads it).
    pub(crate) fn attribute(&self, name: &str, want: AttributeType) -> Option<&'g AttributeProto> {
        debug_assert!(
            self.def.attributes.contains(&(name, want)),
            "{} reads attribute {name} as {want:?} without declaring it",
            self.def.op_type
        );
        self.proto.attribute.iter().find(|a| a.name == name)
    }

    /// An integer attribute.
    pub(crate) fn int(&self, name: &str, default: i64) -> i64 {
        self.attribute(name, AttributeType::Int)
            .map_or(default, |a| a.i)
    }

    /// A float attribute.
    pub(crate) fn float(&self, name: &str) -> Option<f32> {
        self.attribute(name, AttributeType::Float).map(|a| a.f)
    }

    /// An integer list attribute.
    pub(crate) fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attribute(name, AttributeType::Ints)
            .map(|a| a.ints.clone())
    }

    /// The first value of an integer list attribute (`strides`, `kernel_shape`; equal
    /// positive values, as pass 1 checked), or `default`.
    pub(crate) fn first_int(&self, name: &str, default: usize) -> usize {
        self.ints(name)
            .and_then(|v| v.first().copied())
            .map_or(default, |v| v as usize)
    }

    /// A float list attribute.
    pub(crate) fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attribute(name, AttributeType::Floats)
            .map(|a| a.floats.clone())
    }

    /// A string attribute.
    pub(crate) fn string(&self, name: &str) -> Option<String> {
        self.attribute(name, AttributeType::String)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
    }

    /// Whether input `i` is given (present and not the empty name).
    pub(crate) fn has_input(&self, i: usize) -> bool {
        self.proto.input.get(i).is_some_and(|s| !s.is_empty())
    }

    /// The name of input `i`.
    pub(crate) fn input(&self, i: usize) -> Result<&'g str, NnError> {
        self.proto
            .input
            .get(i)
            .filter(|s| !s.is_empty())
            .map(String::as_str)
            .ok_or_else(|| self.graph_error(format!("missing input {i}")))
    }

    /// The name of the first output.
    pub(crate) fn output(&self) -> Result<&'g str, NnError> {
        self.proto
            .output
            .first()
            .map(String::as_str)
            .ok_or_else(|| self.graph_error("no output".into()))
    }

    /// [`NnError::Graph`] at this node.
    pub(crate) fn graph_error(&self, reason: String) -> NnError {
        NnError::Graph {
            node: self.name.clone(),
            op: self.op().to_string(),
            reason,
        }
    }

    /// [`NnError::BadAttribute`] at this node.
    pub(crate) fn bad_attribute(&self, attribute: &str, reason: String) -> NnError {
        NnError::BadAttribute {
            node: self.name.clone(),
            op: self.op().to_string(),
            attribute: attribute.into(),
            reason,
        }
    }

    /// [`NnError::Shape`] at this node.
    pub(crate) fn shape_error(
        &self,
        what: String,
        expected: Vec<usize>,
        actual: Vec<usize>,
    ) -> NnError {
        NnError::Shape {
            node: self.name.clone(),
            op: self.op().to_string(),
            what,
            expected,
            actual,
        }
    }
}

/// A node's name, or `#index` where it has none.
pub(crate) fn node_name(n: &NodeProto, idx: usize) -> String {
    if n.name.is_empty() {
        format!("#{idx}")
    } else {
        n.name.clone()
    }
}

// ---------------------------------------------------------------------------------------
// checks shared by several ops

/// `auto_pad` other than NOTSET.
fn check_auto_pad(n: &OnnxNode, out: &mut Vec<Finding>) {
    if let Some(p) = n.string("auto_pad") {
        if p != "NOTSET" {
            out.push(Finding {
                attribute: Some("auto_pad"),
                reason: format!("{p:?} is not supported (only NOTSET with explicit pads)"),
            });
        }
    }
}

/// `dilations` other than all ones.
fn check_no_dilation(n: &OnnxNode, out: &mut Vec<Finding>) {
    let d = n.ints("dilations");
    if !d.as_ref().is_none_or(|v| v.iter().all(|&d| d == 1)) {
        out.push(Finding {
            attribute: Some("dilations"),
            reason: format!("{:?}: only 1 is supported", d.unwrap_or_default()),
        });
    }
}

/// A 2-D attribute (`strides`) that is not two equal positive values.
fn check_equal_2d(n: &OnnxNode, name: &'static str, out: &mut Vec<Finding>) {
    if let Some(v) = n.ints(name) {
        if v.len() != 2 || v[0] != v[1] || v[0] < 1 {
            out.push(Finding {
                attribute: Some(name),
                reason: format!("{v:?}: only 2-D with equal positive values is supported"),
            });
        }
    }
}

/// An integer attribute that must keep one value.
fn check_int_is(n: &OnnxNode, name: &'static str, default: i64, want: i64, out: &mut Vec<Finding>) {
    let v = n.int(name, default);
    if v != want {
        out.push(Finding {
            attribute: Some(name),
            reason: format!("{v}: only {want} is supported"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each op is registered once, is read somewhere (privately or in a head), and
    /// declares each attribute once.
    #[test]
    fn the_table_is_consistent() {
        for (i, d) in TABLE.iter().enumerate() {
            assert!(!d.op_type.is_empty());
            assert!(
                TABLE[..i]
                    .iter()
                    .all(|e| (e.op_type, e.domain) != (d.op_type, d.domain)),
                "{} twice",
                d.op_type
            );
            assert!(d.import.is_some() || d.head.is_some(), "{}", d.op_type);
            for (j, (a, _)) in d.attributes.iter().enumerate() {
                assert!(
                    d.attributes[..j].iter().all(|(b, _)| b != a),
                    "{}.{a}",
                    d.op_type
                );
            }
        }
        assert_eq!(find("ai.onnx", "Conv").map(|d| d.op_type), Some("Conv"));
        assert!(find("", "Scaler").is_none() && find(ML_DOMAIN, "Scaler").is_some());
        assert_eq!(
            head_only_ops(", "),
            "Softmax, LogSoftmax, Sigmoid, ArgMax, ArgMin, TopK, ArrayFeatureExtractor"
        );
        assert!(refusal(ML_DOMAIN, "ZipMap").contains("zipmap"));
        assert_eq!(refusal("", "Tanh"), "op type Tanh is not supported");
    }
}
