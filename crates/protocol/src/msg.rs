//! The wire: message types (serde, bincode with the frame's length as the decode
//! limit), the layer descriptions both parties agree on, and the protocol errors.

use bincode::Options;
use he::{ParamsSpec, PublicKeys};
use kernels::{ConvMethod, ConvShape, GroupedConvShape, Method};
use net::{Channel, NetError};
use serde::{Deserialize, Serialize};

/// Protocol version (4: the plan names the nonlinear protocol; grouped convolutions;
/// output heads in the program. 5: a slot convolution's layout, derived by both parties
/// from its shape and method, may be the compact packing or the scalar path. 6: the
/// plan states the session's response bound and offline segments; silent-OT batch
/// messages carry a header. 8: a nonlinear step of the program may truncate
/// approximately; a MaxPool's comparisons track no signs. 9: a MaxPool of overlapping
/// windows runs separably, rows then columns. 10: an approximate step's DReLU may be
/// coarse, `nn::Step::Nonlinear::coarse_drelu_bits`. 11: the silent-OT PPRF runs on
/// half-trees and sends no leaf correction. 12: a convolution's method may be Cheetah's
/// on padded tiles, `cheetah-padded`, whose layout both parties derive from it. 13:
/// silent-OT batches of 512 trees, 2^18 COTs).
pub const PROTOCOL_VERSION: u32 = 13;

/// The public architecture of one linear layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LayerShape {
    /// W·x with an n_o x n_i matrix.
    Matvec {
        /// Rows n_o.
        rows: usize,
        /// Columns n_i.
        cols: usize,
    },
    /// A convolution.
    Conv(ConvShape),
    /// A grouped (or depthwise) convolution.
    Grouped(GroupedConvShape),
}

/// How a grouped convolution runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GroupedMethod {
    /// The depthwise kernel (one input channel per group): the tap rotations only, no
    /// sum over channels.
    Depthwise,
    /// Every group a dense convolution with this method.
    PerGroup(ConvMethod),
}

impl GroupedMethod {
    /// `depthwise`, or the per-group method's name.
    pub fn name(&self) -> &'static str {
        match self {
            GroupedMethod::Depthwise => "depthwise",
            GroupedMethod::PerGroup(m) => m.name(),
        }
    }
}

impl LayerShape {
    /// Number of weights (rows·cols, or c_o·c_i·k_h·k_w).
    pub fn weight_len(&self) -> usize {
        match self {
            LayerShape::Matvec { rows, cols } => rows * cols,
            LayerShape::Conv(s) => s.c_o * s.c_i * s.k_h * s.k_w,
            LayerShape::Grouped(s) => s.weight_len(),
        }
    }
    /// Number of inputs (cols, or c_i·h·w).
    pub fn input_len(&self) -> usize {
        match self {
            LayerShape::Matvec { cols, .. } => *cols,
            LayerShape::Conv(s) => s.c_i * s.h * s.w,
            LayerShape::Grouped(s) => s.input_len(),
        }
    }
    /// The methods that apply to this layer (its kind, its filter width).
    pub fn methods(&self) -> Vec<LayerMethod> {
        match self {
            LayerShape::Matvec { .. } => Method::ALL
                .iter()
                .map(|&m| LayerMethod::Matvec(m))
                .collect(),
            LayerShape::Conv(s) => ConvMethod::ALL
                .iter()
                .filter(|m| m.takes_filter_width(s.k_w))
                .map(|&m| LayerMethod::Conv(m))
                .collect(),
            LayerShape::Grouped(s) => s
                .is_depthwise()
                .then_some(GroupedMethod::Depthwise)
                .into_iter()
                .chain(
                    ConvMethod::ALL
                        .iter()
                        .filter(|m| m.takes_filter_width(s.k_w))
                        .map(|&m| GroupedMethod::PerGroup(m)),
                )
                .map(LayerMethod::Grouped)
                .collect(),
        }
    }
    /// This shape with a method (an error if the method is for the other kind).
    pub fn with(&self, method: LayerMethod) -> Result<LayerSpec> {
        match (*self, method) {
            (LayerShape::Matvec { rows, cols }, LayerMethod::Matvec(method)) => {
                Ok(LayerSpec::Matvec { method, rows, cols })
            }
            (LayerShape::Conv(shape), LayerMethod::Conv(method)) => {
                Ok(LayerSpec::Conv { method, shape })
            }
            (LayerShape::Grouped(shape), LayerMethod::Grouped(method)) => {
                Ok(LayerSpec::Grouped { method, shape })
            }
            (shape, method) => Err(PlanError::MethodKind {
                method: format!("{method:?}"),
                shape: format!("{shape:?}"),
            }
            .into()),
        }
    }
}

/// A kernel method for either kind of layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayerMethod {
    /// A matvec method.
    Matvec(Method),
    /// A convolution method.
    Conv(ConvMethod),
    /// A grouped-convolution method.
    Grouped(GroupedMethod),
}

impl LayerMethod {
    /// The method's name.
    pub fn name(&self) -> &'static str {
        match self {
            LayerMethod::Matvec(m) => m.name(),
            LayerMethod::Conv(m) => m.name(),
            LayerMethod::Grouped(m) => m.name(),
        }
    }
    /// Parses a method name for a layer kind.
    pub fn parse(shape: &LayerShape, name: &str) -> Option<LayerMethod> {
        match shape {
            LayerShape::Matvec { .. } => Method::parse(name).map(LayerMethod::Matvec),
            LayerShape::Conv(_) => ConvMethod::parse(name).map(LayerMethod::Conv),
            LayerShape::Grouped(s) => match name {
                "depthwise" if s.is_depthwise() => Some(GroupedMethod::Depthwise),
                _ => ConvMethod::parse(name).map(GroupedMethod::PerGroup),
            }
            .map(LayerMethod::Grouped),
        }
    }
}

/// One linear layer with its method: the plan both parties run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LayerSpec {
    /// W·x with an n_o x n_i matrix.
    Matvec {
        /// Method.
        method: Method,
        /// Rows n_o.
        rows: usize,
        /// Columns n_i.
        cols: usize,
    },
    /// A convolution.
    Conv {
        /// Method.
        method: ConvMethod,
        /// Shape.
        shape: ConvShape,
    },
    /// A grouped convolution.
    Grouped {
        /// Method.
        method: GroupedMethod,
        /// Shape.
        shape: GroupedConvShape,
    },
}

impl LayerSpec {
    /// The layer's shape.
    pub fn shape(&self) -> LayerShape {
        match self {
            LayerSpec::Matvec { rows, cols, .. } => LayerShape::Matvec {
                rows: *rows,
                cols: *cols,
            },
            LayerSpec::Conv { shape, .. } => LayerShape::Conv(*shape),
            LayerSpec::Grouped { shape, .. } => LayerShape::Grouped(*shape),
        }
    }
    /// The layer's method.
    pub fn method(&self) -> LayerMethod {
        match self {
            LayerSpec::Matvec { method, .. } => LayerMethod::Matvec(*method),
            LayerSpec::Conv { method, .. } => LayerMethod::Conv(*method),
            LayerSpec::Grouped { method, .. } => LayerMethod::Grouped(*method),
        }
    }
}

/// What the client asks for: a layer's shape (the architecture is public) and,
/// optionally, the method it wants; without one the server picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerRequest {
    /// The shape.
    pub shape: LayerShape,
    /// The method, or `None` for the server's choice.
    pub method: Option<LayerMethod>,
}

/// Coarse reasons an endpoint gives its peer when it stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AbortReason {
    /// Protocol version mismatch.
    Version,
    /// Parameter set or NTT backend mismatch.
    Params,
    /// The server cannot serve what was asked: layers, methods or a program other than
    /// it offers, or a reveal of private weights' results.
    Unservable,
    /// A message that did not decode or did not fit.
    Malformed,
    /// The server has no free session slot.
    Busy,
    /// The client refused its own input (out of the plan's range, or not finite).
    Input,
    /// The server does not do what was asked (e.g. reveal the shares of private weights).
    Refused,
    /// Something else went wrong on the sender's side.
    Internal,
    /// The server is draining before it stops: it finishes the sessions it runs and
    /// takes no new one (try another replica, or again later).
    ShuttingDown,
}

impl std::fmt::Display for AbortReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AbortReason::Version => "the protocol versions differ",
            AbortReason::Params => "the parameter sets (or NTT backends) differ",
            AbortReason::Unservable => {
                "the server cannot serve the request (layers, methods or a program other \
                 than it offers, or more inputs than its sessions are planned for)"
            }
            AbortReason::Malformed => "a message did not decode or did not fit",
            AbortReason::Busy => "the server is busy (no free session slot or memory)",
            AbortReason::Input => "the client refused its own input",
            AbortReason::Refused => "the server refuses what was asked",
            AbortReason::Internal => "something went wrong on its side",
            AbortReason::ShuttingDown => "the server is shutting down",
        })
    }
}

/// What the server announces after the client's `Hello`: the parameter set, the
/// program it runs (the architecture: weights removed), the method of every linear
/// step, whether the client learns the output, and how many inputs the session runs.
/// Both parties drive the session engine with it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SessionOffer {
    /// The parameter set (its plaintext modulus is the program's).
    pub params: ParamsSpec,
    /// Its hash (includes the NTT backend).
    pub params_hash: String,
    /// The program without weights.
    pub program: nn::Program,
    /// Per step: the linear layer's method (`None` for other steps).
    pub methods: Vec<Option<LayerSpec>>,
    /// The server sends its share of the output at the end (a network's logits, or a
    /// public demo layer); otherwise each party keeps its share.
    pub reveal: bool,
    /// Inputs the session runs.
    pub inputs: u32,
    /// How the nonlinear steps run.
    pub nonlinear: NonlinearProtocol,
    /// log2 of the most flooded responses a session of this plan may receive: the
    /// flooding of each is sized so that all of them together are within 2^-40
    /// ([`he::Params::with_session_responses`]; both parties derive the layers' levels
    /// from it).
    pub session_responses_log2: u32,
    /// Where each offline segment after the first starts (step indices): the steps of
    /// a segment run their offline phase together, then online
    /// ([`crate::limits::offline_segments`]).
    pub segments: Vec<u32>,
}

/// How the nonlinear steps (ReLU, MaxPool, truncation) run: the server's choice, named
/// in its plan; the client follows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum NonlinearProtocol {
    /// Millionaire comparisons on silent OT (crate `ot`, CrypTFlow2/Cheetah style): a
    /// pool of correlated OTs set up once per session (base OT + IKNP + the first
    /// silent batches) and refilled by silent batches; faithful truncation, so the
    /// result is the fixed-point reference's bit for bit.
    #[default]
    SilentOt,
    /// GAZELLE's garbled circuits (crate `gc`), garbled by the party named.
    GarbledCircuits(gc::Garbler),
}

impl NonlinearProtocol {
    /// `ot` or `gc`.
    pub fn name(&self) -> &'static str {
        match self {
            NonlinearProtocol::SilentOt => "ot",
            NonlinearProtocol::GarbledCircuits(_) => "gc",
        }
    }
}

/// The wire messages.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Client hello.
    Hello {
        /// Protocol version.
        version: u32,
        /// Inferences asked for.
        inputs: u32,
        /// For a server of single layers: the layer asked for (one), with an optional
        /// method; empty for a network server.
        layers: Vec<LayerRequest>,
        /// The client asks to learn a single layer's output (only a server of public
        /// demonstration weights agrees; a network's output always goes to the client).
        reveal: bool,
    },
    /// The server's offer.
    Offer(Box<SessionOffer>),
    /// Client keys: the public key and only the Galois keys the plan needs.
    Setup(PublicKeys),
    /// Server finished its input-independent (offline) work for one input.
    Ready,
    /// A query for a step.
    Query {
        /// Step index.
        step: u32,
        /// Serialized ciphertexts.
        #[serde(with = "ct_bytes")]
        cts: Vec<Vec<u8>>,
    },
    /// The response to a query.
    Response {
        /// Step index.
        step: u32,
        /// Serialized ciphertexts.
        #[serde(with = "ct_bytes")]
        cts: Vec<Vec<u8>>,
    },
    /// The server's share of the output (when the offer reveals it).
    Share(Vec<u64>),
    /// Orderly close.
    Close,
    /// The sender stops.
    Abort(AbortReason),
}

impl Msg {
    /// The message's name (for errors and logs).
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "Hello",
            Msg::Offer(_) => "Offer",
            Msg::Setup(_) => "Setup",
            Msg::Ready => "Ready",
            Msg::Query { .. } => "Query",
            Msg::Response { .. } => "Response",
            Msg::Share(_) => "Share",
            Msg::Close => "Close",
            Msg::Abort(_) => "Abort",
        }
    }
}

/// What does not hold together in a network plan or an offer: [`ProtocolError::Plan`].
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum PlanError {
    /// A program planned for another plaintext modulus than the parameters'.
    #[error("the program's p = {program} is not the parameters' p = {params}")]
    Modulus {
        /// The program's p.
        program: u64,
        /// The parameters' p.
        params: u64,
    },
    /// Weights beyond the program's public bound.
    #[error("the program's weights exceed its public bound 2^{bits}")]
    WeightBound {
        /// The bound, bits.
        bits: u32,
    },
    /// A step, tensor or layer the plan refers to is not there.
    #[error("no {what} {index}")]
    Missing {
        /// What was looked for.
        what: &'static str,
        /// Its index.
        index: usize,
    },
    /// A linear method planned for a step that is not a linear layer.
    #[error("step {step} is not a linear layer")]
    NotLinear {
        /// The step's name.
        step: String,
    },
    /// A method planned for another layer shape than its step's.
    #[error("step {step}: the method is planned for another layer shape")]
    ShapeMismatch {
        /// The step.
        step: usize,
    },
    /// Methods that do not match the linear steps one for one.
    #[error("{methods} method slots for {steps} steps, or a method on a step without a layer")]
    MethodCount {
        /// Method slots.
        methods: usize,
        /// Steps.
        steps: usize,
    },
    /// A method of one kind of layer (matvec, convolution, grouped) for another.
    #[error("method {method} is not for a layer of shape {shape}")]
    MethodKind {
        /// The method.
        method: String,
        /// The layer's shape.
        shape: String,
    },
    /// The client asks for a method other than the one the server fixed.
    #[error("the client asks for method {client}, the server runs {server}")]
    MethodConflict {
        /// The server's method.
        server: String,
        /// The client's.
        client: String,
    },
    /// The server's offer contradicts itself or the request.
    #[error("the server's offer: {what}")]
    Offer {
        /// What is wrong.
        what: &'static str,
    },
    /// Two share vectors that must have one length.
    #[error("{what}: {left} values against {right}")]
    Length {
        /// Which operation.
        what: &'static str,
        /// One length.
        left: usize,
        /// The other.
        right: usize,
    },
    /// A step that does not run on local shares.
    #[error("step {step} does not run on local shares")]
    NotLocal {
        /// The step's name.
        step: String,
    },
    /// Grouped convolutions are served in networks only.
    #[error("a grouped convolution is not served as a single layer")]
    GroupedLayer,
    /// A nonlinear step in a session without a nonlinear protocol.
    #[error("a nonlinear step in a session without a nonlinear protocol")]
    NoNonlinearProtocol,
    /// A step with approximate truncation in a garbled-circuit session (the circuits
    /// truncate faithfully; `Program::faithful` makes a program for them).
    #[error("approximate truncation needs the silent-OT protocol, not garbled circuits")]
    ApproximateWithoutOt,
}

/// Protocol errors.
#[derive(Debug, thiserror::Error, PartialEq, Clone)]
#[non_exhaustive]
pub enum ProtocolError {
    /// Transport error.
    #[error(transparent)]
    Net(#[from] NetError),
    /// HE error.
    #[error(transparent)]
    He(#[from] he::HeError),
    /// Kernel error.
    #[error(transparent)]
    Kernel(#[from] kernels::KernelError),
    /// A frame that is not a message.
    #[error("malformed message: {detail}")]
    Malformed {
        /// Decoder's words.
        detail: String,
    },
    /// Version mismatch.
    #[error("protocol version {theirs} is not ours ({ours})")]
    Version {
        /// Ours.
        ours: u32,
        /// Theirs.
        theirs: u32,
    },
    /// Parameter or NTT-backend mismatch.
    #[error("parameter set mismatch: ours {ours}, theirs {theirs}")]
    Params {
        /// Our hash.
        ours: String,
        /// Their hash.
        theirs: String,
    },
    /// A session plan that does not hold together (the server's offer, a method for a
    /// layer, a program and its parameters).
    #[error("plan: {0}")]
    Plan(#[from] PlanError),
    /// Silent OT or an OT-based nonlinear layer failed (transport failures are `Net`).
    #[error("OT: {0}")]
    Ot(ot::OtError),
    /// A garbled-circuit nonlinear layer failed (transport failures are `Net`).
    #[error("garbled circuits: {0}")]
    Gc(gc::GcError),
    /// No method of the layer fits the parameters.
    #[error("no method can run layer {layer:?} on these parameters")]
    NoMethod {
        /// The layer.
        layer: LayerShape,
    },
    /// A served layer whose weight count does not fit its shape.
    #[error("layer {layer}: {actual} weights, its shape needs {expected}")]
    WeightLength {
        /// Layer index.
        layer: usize,
        /// Expected.
        expected: usize,
        /// Given.
        actual: usize,
    },
    /// An input of the wrong length.
    #[error("layer {layer}: input has {actual} values, the layer takes {expected}")]
    InputLength {
        /// Layer index.
        layer: usize,
        /// Expected.
        expected: usize,
        /// Given.
        actual: usize,
    },
    /// A message out of order.
    #[error("expected {expected}, got {got}")]
    Unexpected {
        /// What was expected.
        expected: &'static str,
        /// What came.
        got: &'static str,
    },
    /// The peer stopped.
    #[error("the peer aborted: {0}")]
    PeerAborted(AbortReason),
    /// A method name no kind of layer has.
    #[error("unknown method `{name}`")]
    UnknownMethod {
        /// The name given.
        name: String,
    },
    /// A Hello asking for more layers than a session serves.
    #[error("{requested} layers requested in one session, at most {allowed}")]
    TooManyLayers {
        /// Requests in the Hello.
        requested: usize,
        /// Layers a session may ask for (1 from a layer server, 0 from a network server).
        allowed: usize,
    },
    /// A request no held layer matches.
    #[error("the server holds no layer of shape {shape:?}")]
    NotServed {
        /// The shape asked for.
        shape: LayerShape,
    },
    /// An input value that is not reduced modulo p (integer inputs).
    #[error("input {input}: element {index} is {value}, not below p = {p}")]
    NotReduced {
        /// Which input of the batch.
        input: usize,
        /// Element index.
        index: usize,
        /// The value.
        value: u64,
        /// The modulus.
        p: u64,
    },
    /// A network session asking for more inferences than a session may run.
    #[error("{requested} inputs requested in one session, at most {max}")]
    TooManyInputs {
        /// Inputs asked for.
        requested: u64,
        /// The limit.
        max: u64,
    },
    /// A session whose memory would exceed its budget (checked before allocating).
    #[error("the session needs {needed} bytes of memory, its budget is {budget}")]
    SessionMemory {
        /// Bytes the session would allocate.
        needed: u64,
        /// The budget.
        budget: u64,
    },
    /// A client asked for the server's shares of private weights.
    #[error("the server's shares are revealed only for public demonstration weights")]
    RevealRefused,
    /// A failure inside the session that is not the peer's doing (a panic, contained).
    #[error("internal error: {detail}")]
    Internal {
        /// What happened.
        detail: String,
    },
    /// A `Query` or `Response` with another number of ciphertexts than its step
    /// takes (read from the frame's prefix, before anything is decoded).
    #[error("{message} for step {step} carries {actual} ciphertexts, the step takes {expected}")]
    CiphertextCount {
        /// `Query` or `Response`.
        message: &'static str,
        /// The step.
        step: usize,
        /// Ciphertexts the step takes.
        expected: usize,
        /// Ciphertexts announced.
        actual: u64,
    },
    /// Keys that are not exactly the Galois keys the plan needs.
    #[error(
        "the client's keys declare {offered} Galois key(s); the plan needs exactly its {needed}"
    )]
    GaloisKeys {
        /// Keys the plan needs.
        needed: usize,
        /// Keys declared.
        offered: usize,
    },
    /// A session would receive more flooded responses than its plan's bound.
    #[error("{inputs} inputs of {per_input} responses each exceed the session's bound of 2^{bound_log2} responses")]
    TooManyResponses {
        /// Inputs asked for.
        inputs: u64,
        /// Responses per input.
        per_input: u64,
        /// The plan's bound (log2).
        bound_log2: u32,
    },
    /// An input value outside the range the server's fixed-point plan is safe for
    /// (checked before anything is encrypted).
    #[error("input {input}: element {index} is {value}, outside the range [{lo}, {hi}] the server's fixed point is planned for ({count} element(s) outside); it could wrap modulo p and give a wrong answer")]
    InputOutOfRange {
        /// Which input of the batch.
        input: usize,
        /// The element farthest outside.
        index: usize,
        /// Its value.
        value: f32,
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
        /// Elements outside.
        count: usize,
    },
    /// A NaN or infinity in an input.
    #[error("input {input}: element {index} is {value}, not a finite number")]
    NonFiniteInput {
        /// Which input of the batch.
        input: usize,
        /// Element index.
        index: usize,
        /// The value.
        value: f32,
    },
}

/// Result alias.
pub type Result<T> = std::result::Result<T, ProtocolError>;

impl ProtocolError {
    /// Whether the error is about the client's input values: outside the plan's input
    /// range, not finite, or not reduced mod p.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            ProtocolError::InputOutOfRange { .. }
                | ProtocolError::NonFiniteInput { .. }
                | ProtocolError::NotReduced { .. }
        )
    }

    /// Whether the peer sent what the protocol does not allow: an undecodable or
    /// out-of-order message, a wrong ciphertext count, keys other than the plan's, an
    /// oversized frame, malformed HE, OT or garbled-circuit material.
    pub fn is_malformed(&self) -> bool {
        matches!(
            self,
            ProtocolError::Malformed { .. }
                | ProtocolError::Ot(_)
                | ProtocolError::Gc(_)
                | ProtocolError::Unexpected { .. }
                | ProtocolError::CiphertextCount { .. }
                | ProtocolError::GaloisKeys { .. }
                | ProtocolError::Net(NetError::Oversized { .. })
                | ProtocolError::He(he::HeError::Malformed { .. })
        )
    }

    /// Whether the request cannot be served: no plan, method or layer for it, or more
    /// inputs or responses than a session may have.
    pub fn is_unservable(&self) -> bool {
        matches!(
            self,
            ProtocolError::Plan(_)
                | ProtocolError::NoMethod { .. }
                | ProtocolError::TooManyLayers { .. }
                | ProtocolError::NotServed { .. }
                | ProtocolError::TooManyInputs { .. }
                | ProtocolError::TooManyResponses { .. }
        )
    }
}

/// The ciphertexts of a `Query` or `Response` as byte strings (`serde_bytes`): on the
/// wire exactly what `Vec<Vec<u8>>` is (a u64 count, then each length and its bytes),
/// but each ciphertext is written and read as one copy instead of byte by byte.
mod ct_bytes {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    pub(super) fn serialize<S: Serializer>(cts: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(cts.iter().map(|c| Bytes::new(c)))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        let cts = Vec::<ByteBuf>::deserialize(d)?;
        Ok(cts.into_iter().map(ByteBuf::into_vec).collect())
    }
}

fn codec(limit: usize) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(limit as u64)
}

/// Encodes a message.
pub fn encode(m: &Msg) -> Result<Vec<u8>> {
    codec(usize::MAX)
        .serialize(m)
        .map_err(|e| ProtocolError::Malformed {
            detail: e.to_string(),
        })
}

/// Decodes one frame (never reads past it, never allocates more than its length).
pub fn decode(frame: &[u8]) -> Result<Msg> {
    codec(frame.len())
        .deserialize(frame)
        .map_err(|e| ProtocolError::Malformed {
            detail: e.to_string(),
        })
}

/// Sends one message.
pub fn send<C: Channel>(ch: &mut C, m: &Msg) -> Result<()> {
    Ok(ch.send(&encode(m)?)?)
}

/// Receives one message (an `Abort` from the peer becomes [`ProtocolError::PeerAborted`]).
pub fn recv<C: Channel>(ch: &mut C) -> Result<Msg> {
    recv_at_most(ch, usize::MAX)
}

/// Receives one message of at most `max` bytes: a longer frame is refused from its
/// length prefix, before it is read ([`net::NetError::Oversized`]).
pub fn recv_at_most<C: Channel>(ch: &mut C, max: usize) -> Result<Msg> {
    match decode(&ch.recv_at_most(max)?)? {
        Msg::Abort(r) => Err(ProtocolError::PeerAborted(r)),
        m => Ok(m),
    }
}

/// Which ciphertext message [`recv_cts`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CtMessage {
    Query,
    Response,
}

/// Receives the `Query` or `Response` of step `step`: a frame of at most `max` bytes
/// whose ciphertext count, read from its prefix before anything is decoded or
/// allocated, must be `count`. Returns the serialised ciphertexts.
pub(crate) fn recv_cts<C: Channel>(
    ch: &mut C,
    kind: CtMessage,
    step: usize,
    count: usize,
    max: usize,
) -> Result<Vec<Vec<u8>>> {
    let frame = ch.recv_at_most(max)?;
    let (name, empty) = match kind {
        CtMessage::Query => (
            "Query",
            Msg::Query {
                step: step as u32,
                cts: Vec::new(),
            },
        ),
        CtMessage::Response => (
            "Response",
            Msg::Response {
                step: step as u32,
                cts: Vec::new(),
            },
        ),
    };
    // fixint bincode: the variant (u32), the step (u32), the ciphertext count (u64)
    let prefix = encode(&empty)?;
    if frame.len() >= 16 && frame[..8] == prefix[..8] {
        let mut len = [0u8; 8];
        len.copy_from_slice(&frame[8..16]);
        let actual = u64::from_le_bytes(len);
        if actual != count as u64 {
            return Err(ProtocolError::CiphertextCount {
                message: name,
                step,
                expected: count,
                actual,
            });
        }
    }
    match decode(&frame)? {
        Msg::Query { step: s, cts } if kind == CtMessage::Query && s as usize == step => Ok(cts),
        Msg::Response { step: s, cts } if kind == CtMessage::Response && s as usize == step => {
            Ok(cts)
        }
        Msg::Abort(r) => Err(ProtocolError::PeerAborted(r)),
        m => Err(unexpected(
            match kind {
                CtMessage::Query => "Query for the next step",
                CtMessage::Response => "Response for the step",
            },
            &m,
        )),
    }
}

/// The error for an out-of-order message.
pub(crate) fn unexpected(expected: &'static str, got: &Msg) -> ProtocolError {
    ProtocolError::Unexpected {
        expected,
        got: got.kind(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The ciphertexts go on the wire exactly as a plain `Vec<Vec<u8>>` would (the
    /// peer's format is unchanged), and come back equal.
    #[test]
    fn ciphertexts_keep_the_wire_format_of_byte_vectors() {
        let cts = vec![vec![1u8, 2, 3], vec![], (0..=255).collect::<Vec<u8>>()];
        for m in [
            Msg::Query {
                step: 7,
                cts: cts.clone(),
            },
            Msg::Response {
                step: 9,
                cts: cts.clone(),
            },
        ] {
            let frame = encode(&m).unwrap();
            let plain = codec(usize::MAX).serialize(&cts).unwrap();
            assert_eq!(&frame[8..], &plain[..]);
            match (decode(&frame).unwrap(), m) {
                (Msg::Query { step: a, cts: x }, Msg::Query { step: b, .. })
                | (Msg::Response { step: a, cts: x }, Msg::Response { step: b, .. }) => {
                    assert_eq!((a, &x), (b, &cts));
                }
                (got, _) => panic!("decoded {}", got.kind()),
            }
        }
    }

    /// A ciphertext whose announced length runs past the frame is refused before
    /// anything of that length is allocated.
    #[test]
    fn a_ciphertext_longer_than_its_frame_is_refused() {
        let mut frame = encode(&Msg::Query {
            step: 0,
            cts: vec![vec![5u8; 16]],
        })
        .unwrap();
        // the first ciphertext's length sits after the variant, the step and the count
        frame[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(matches!(
            decode(&frame),
            Err(ProtocolError::Malformed { .. })
        ));
    }
}
