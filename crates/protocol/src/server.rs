//! The server: what it serves — a network ([`NetworkServer`]: one program, its weights
//! encoded once) or single linear layers ([`ServedLayers`]: each a one-step program, its
//! encodings made once per method and shared, [`Encodings`]) — and the session around
//! the engine ([`crate::engine`]), the same for both:
//!
//! - setup: `Hello` (version, inputs, for a layer server the layer asked for) → `LayerLayout`
//!   (parameter set, the program's architecture, a method per linear step, whether the
//!   client learns the output) → `Setup` (public key and Galois keys, validated at the
//!   border);
//! - when the program has nonlinear steps and the plan names silent OT: the session's
//!   COT pool (base OT, IKNP, the first silent batches), once;
//! - per input: the engine's offline phase (flooding zeros, OT precomputation or
//!   garbling) → `Ready`
//!   → the steps online; then the server's share of the output (`Share`) when the plan
//!   reveals it;
//! - `Close`.
//!
//! What one client can make a server do is bounded before anything is allocated: one
//! layer per session from a layer server (a network server takes no layer requests),
//! at most [`MAX_INPUTS_PER_SESSION`] inputs, and the session's memory (flooding zeros,
//! ciphertexts, COT pools and precomputed OTs or garbled tables) within [`crate::ServeOptions::session_memory`]. A
//! single layer's output goes to the client only from a server of public
//! demonstration weights ([`ServedLayers::public_demo`]): revealing `W·x` for chosen `x`
//! gives away `W`.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use he::{Bfv, Counting, OpCounts, Params};
use kernels::noise::NoiseModel;
use net::{Channel, Link};
use nn::{Program, Step, TensorInfo};
use tracing::{debug, warn};

use crate::engine::{
    architecture, has_nonlinear, layer_shape, run_inference, InferenceReport, LayerState,
    NonlinearSession, PhaseCounters, ServerSide,
};
use crate::limits::{
    offline_segments, SessionLimits, DEFAULT_OFFLINE_WINDOW, HELLO_MAX_BYTES, SMALL_MAX_BYTES,
};
use crate::msg::{
    recv_at_most, send, unexpected, AbortReason, LayerMethod, LayerRequest, LayerShape, LayerSpec,
    Msg, NonlinearProtocol, PlanError, ProtocolError, Result, SessionOffer, PROTOCOL_VERSION,
};
use crate::plan::{choose, layer_params, Encoded, LayerLayout, NetworkPlan, ServerBackend};
use crate::sessions::{serve_sessions, ServeOptions, SessionReport};

/// One layer a server can serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedLayer {
    /// Its shape (public).
    pub shape: LayerShape,
    /// The method, or `None` to pick per session (the client's wish, else the cheapest).
    pub method: Option<LayerMethod>,
    /// Signed weights (private), `shape.weight_len()` of them.
    pub weights: Vec<i64>,
}

/// The layers a server holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedLayers {
    layers: Vec<ServedLayer>,
    public_weights: bool,
}

impl ServedLayers {
    /// A model of private weights: every layer's weight count and method kind checked;
    /// a client's `Reveal` is refused.
    pub fn new(layers: Vec<ServedLayer>) -> Result<ServedLayers> {
        for (i, l) in layers.iter().enumerate() {
            if l.weights.len() != l.shape.weight_len() {
                return Err(ProtocolError::WeightLength {
                    layer: i,
                    expected: l.shape.weight_len(),
                    actual: l.weights.len(),
                });
            }
            if let Some(m) = l.method {
                l.shape.with(m)?;
            }
        }
        Ok(ServedLayers {
            layers,
            public_weights: false,
        })
    }
    /// A model of public demonstration weights (seeded, published): a client may ask
    /// for the server's shares (`Reveal`) to check its result.
    pub fn public_demo(layers: Vec<ServedLayer>) -> Result<ServedLayers> {
        Ok(ServedLayers {
            public_weights: true,
            ..ServedLayers::new(layers)?
        })
    }
    /// The layers.
    pub fn layers(&self) -> &[ServedLayer] {
        &self.layers
    }
    /// Whether the weights are public (the server answers `Reveal`).
    pub fn public_weights(&self) -> bool {
        self.public_weights
    }
    /// The layer a client asks for: one request, matched by shape to a held layer; the
    /// method is the server's if it fixed one (a different wish from the client is a
    /// plan mismatch), else the client's wish, else the cheapest predicted on `link`.
    /// Returns the held layer's index and the spec.
    pub fn choose_layer(
        &self,
        requests: &[LayerRequest],
        params: &Params,
        link: &Link,
    ) -> Result<(usize, LayerSpec)> {
        let [r] = requests else {
            return Err(ProtocolError::TooManyLayers {
                requested: requests.len(),
                allowed: 1,
            });
        };
        let i = self
            .layers
            .iter()
            .position(|l| l.shape == r.shape)
            .ok_or(ProtocolError::NotServed { shape: r.shape })?;
        let spec = match (self.layers[i].method, r.method) {
            (Some(m), Some(w)) if m != w => {
                return Err(PlanError::MethodConflict {
                    server: format!("{m:?}"),
                    client: format!("{w:?}"),
                }
                .into())
            }
            (Some(m), _) | (None, Some(m)) => r.shape.with(m)?,
            (None, None) => choose(&r.shape, params, link)?.0,
        };
        Ok((i, spec))
    }
}

/// Encoded weights a server shares between its sessions: per (held layer, plan),
/// made the first time a session needs them (with a keyless [`Bfv::encoder`]: the
/// encoding depends on the weights and the parameters only).
pub struct Encodings {
    params: Params,
    encoder: ServerBackend,
    made: Mutex<HashMap<(usize, LayerSpec), Arc<Encoded>>>,
}

impl Encodings {
    /// No encodings yet, for these parameters.
    pub fn new(params: &Params) -> Result<Self> {
        Ok(Self {
            params: params.clone(),
            encoder: Counting::new(Bfv::encoder(params)?),
            made: Mutex::new(HashMap::new()),
        })
    }
    /// Layer `layer` of `model` encoded for `spec` (made now if no session made it yet).
    pub fn get(
        &self,
        model: &ServedLayers,
        layer: usize,
        spec: &LayerSpec,
    ) -> Result<Arc<Encoded>> {
        let key = (layer, spec.clone());
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = made.get(&key) {
            return Ok(e.clone());
        }
        let weights = &model
            .layers
            .get(layer)
            .ok_or(PlanError::Missing {
                what: "served layer",
                index: layer,
            })?
            .weights;
        let params = layer_params(&self.params, spec)?;
        let e = Arc::new(LayerLayout::new(spec, &params)?.encode(&self.encoder, weights)?);
        made.insert(key, e.clone());
        Ok(e)
    }
    /// How many encodings are held.
    pub fn len(&self) -> usize {
        self.made.lock().map_or(0, |m| m.len())
    }
    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Wall-clock time per phase, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PhaseTimes {
    /// Handshake and keys (including the client's key generation, as the server sees it).
    pub setup_ms: f64,
    /// Input-independent work.
    pub offline_ms: f64,
    /// Queries, responses and the output's share.
    pub online_ms: f64,
}

/// Inferences one session may ask for.
pub const MAX_INPUTS_PER_SESSION: u32 = 4096;

/// A program with what a server needs for its sessions: the parameters (with the
/// plan's response bound), the weights, the method of every linear step and its encoded
/// weights (or that they are encoded per query), whether the client learns the output,
/// and what a session of it may cost ([`SessionLimits`], the offline segments).
#[derive(Clone)]
pub(crate) struct Served {
    params: Params,
    prog: Program,
    methods: Vec<Option<LayerSpec>>,
    layers: Vec<Option<LayerState>>,
    reveal: bool,
    nonlinear: NonlinearProtocol,
    limits: SessionLimits,
    segments: Vec<u32>,
}

impl Served {
    /// What the server serves, with its limits and its offline segments for `window`
    /// bytes of offline material at a time.
    fn new(
        params: Params,
        prog: Program,
        methods: Vec<Option<LayerSpec>>,
        layers: Vec<Option<LayerState>>,
        reveal: bool,
        nonlinear: NonlinearProtocol,
        window: u64,
    ) -> Result<Self> {
        let layouts: Vec<Option<LayerLayout>> = layers
            .iter()
            .map(|l| l.as_ref().map(LayerState::layout))
            .collect();
        let limits = SessionLimits::new(&params, &prog, &layouts, nonlinear, true)?;
        let segments = offline_segments(&limits.offline_bytes, window);
        Ok(Self {
            params,
            prog,
            methods,
            layers,
            reveal,
            nonlinear,
            limits,
            segments,
        })
    }

    /// Memory a session of `inputs` inputs allocates, bytes (an upper estimate): every
    /// tensor's two share vectors, the offline material of the largest segment
    /// (flooding zeros, query and response ciphertexts of its HE steps, precomputed OTs
    /// or garbled tables of its nonlinear steps), the largest weights encoded on the
    /// fly, the session's silent-OT pools, the largest frame it reads (twice: the
    /// frame and the message decoded from it), and the server's output shares when the
    /// client does not learn the output. Nothing of it grows with the inputs when the
    /// output is revealed.
    fn session_bytes(&self, inputs: u32) -> Result<u64> {
        let (prog, params) = (&self.prog, &self.params);
        let silent_ot = self.nonlinear == NonlinearProtocol::SilentOt && has_nonlinear(prog);
        let mut total: u64 = prog.tensors.iter().map(|t| t.len() as u64 * 16).sum();
        if silent_ot {
            total += ot::SilentParams::DEFAULT.session_memory_bytes();
        }
        let model = kernels::CostModel::reference(params);
        let mut fly = 0u64;
        for state in self.layers.iter().flatten() {
            if let LayerState::OnTheFly(layout) = state {
                fly = fly.max(layout.estimate(params, &model)?.encoded_bytes);
            }
        }
        total += self.limits.window_bytes(&self.segments);
        total += 2 * self.limits.largest_frame as u64;
        if !self.reveal {
            let out = prog.tensors.get(prog.output).map_or(0, |t| t.len() as u64);
            total += inputs as u64 * out * 8;
        }
        Ok(total + fly)
    }
}

/// A network server: the program with its weights, the method of every linear step and
/// the weights encoded once (those beyond the memory budget are encoded per query),
/// shared by all its sessions ([`NetworkServer::serve`]). The client learns the
/// program's output.
pub struct NetworkServer {
    served: Served,
    encoded_bytes: u64,
    on_the_fly_layers: usize,
    encode_ms: f64,
    session_memory: Option<u64>,
}

impl NetworkServer {
    /// Runs `plan`: the weights of every linear step it holds are encoded now, once for
    /// every session; the others are encoded when their query arrives (their encoding
    /// then counts in that step's online time). Its nonlinear steps run by `nonlinear`.
    pub fn new(plan: &NetworkPlan, nonlinear: NonlinearProtocol) -> Result<Self> {
        let t = Instant::now();
        let (params, prog) = (&plan.params, &plan.program);
        if !prog.approximate_steps().is_empty()
            && matches!(nonlinear, NonlinearProtocol::GarbledCircuits(_))
        {
            return Err(PlanError::ApproximateWithoutOt.into());
        }
        if prog.p != params.p() {
            return Err(PlanError::Modulus {
                program: prog.p,
                params: params.p(),
            }
            .into());
        }
        let encoder: ServerBackend = Counting::new(Bfv::encoder(params)?);
        let mut layers: Vec<Option<LayerState>> = vec![None; prog.steps.len()];
        for l in &plan.layers {
            let step = prog.steps.get(l.step).ok_or(PlanError::Missing {
                what: "step",
                index: l.step,
            })?;
            let weight = match step {
                Step::Linear { weight, .. } | Step::Conv { weight, .. } => weight,
                _ => {
                    return Err(PlanError::NotLinear {
                        step: step.name().to_string(),
                    }
                    .into())
                }
            };
            if layer_shape(step) != Some(l.pick.shape()) {
                return Err(PlanError::ShapeMismatch { step: l.step }.into());
            }
            let p = LayerLayout::new(&l.pick, params)?;
            layers[l.step] = Some(if l.on_the_fly {
                LayerState::OnTheFly(p)
            } else {
                LayerState::Held(Arc::new(p.encode(&encoder, weight)?))
            });
        }
        let methods = plan.methods();
        if prog
            .steps
            .iter()
            .zip(&methods)
            .any(|(s, m)| layer_shape(s).is_some() != m.is_some())
        {
            return Err(PlanError::MethodCount {
                methods: methods.iter().flatten().count(),
                steps: prog.steps.len(),
            }
            .into());
        }
        Ok(Self {
            served: Served::new(
                params.clone(),
                prog.clone(),
                methods,
                layers,
                true,
                nonlinear,
                DEFAULT_OFFLINE_WINDOW,
            )?,
            encoded_bytes: plan.held_bytes(),
            on_the_fly_layers: plan.layers.iter().filter(|l| l.on_the_fly).count(),
            encode_ms: t.elapsed().as_secs_f64() * 1e3,
            session_memory: None,
        })
    }

    /// With a memory budget per session (checked before a session allocates).
    pub fn with_session_memory(self, session_memory: Option<u64>) -> Self {
        Self {
            session_memory,
            ..self
        }
    }
    /// With another offline window: the bytes of offline material one input's segment
    /// may hold ([`crate::limits::offline_segments`]; default
    /// [`DEFAULT_OFFLINE_WINDOW`]). A smaller window holds less, in more segments.
    pub fn with_offline_window(self, window: u64) -> Result<Self> {
        let s = self.served;
        Ok(Self {
            served: Served::new(
                s.params,
                s.prog,
                s.methods,
                s.layers,
                s.reveal,
                s.nonlinear,
                window,
            )?,
            ..self
        })
    }
    /// What a session may cost: frame caps, responses per input, the prediction behind
    /// the default deadline.
    pub fn limits(&self) -> &SessionLimits {
        &self.served.limits
    }
    /// Where each offline segment after the first starts.
    pub fn segments(&self) -> &[u32] {
        &self.served.segments
    }
    /// Encoded weights held, bytes (as the plan estimated them).
    pub fn encoded_bytes(&self) -> u64 {
        self.encoded_bytes
    }
    /// Linear steps whose weights are encoded per query.
    pub fn on_the_fly_layers(&self) -> usize {
        self.on_the_fly_layers
    }
    /// Time the weights' encoding took, ms.
    pub fn encode_ms(&self) -> f64 {
        self.encode_ms
    }
    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.served.params
    }
    /// The program (with its weights).
    pub fn program(&self) -> &Program {
        &self.served.prog
    }
    /// The method of every step.
    pub fn methods(&self) -> &[Option<LayerSpec>] {
        &self.served.methods
    }
    /// Memory a session of `inputs` inputs allocates, bytes (an upper estimate; it
    /// does not grow with `inputs`: the client learns the output).
    pub fn session_bytes(&self, inputs: u32) -> Result<u64> {
        self.served.session_bytes(inputs)
    }

    /// Serves one session. A failure is answered with a coarse `Abort` and returned.
    pub fn serve<C: Channel>(&self, ch: &mut C) -> Result<ServerOutcome> {
        self.serve_observed(ch, &mut |_| {})
    }

    /// [`NetworkServer::serve`], telling `on_inference` of each inference as it ends
    /// (its report's per-step rows only for the session's first input).
    pub fn serve_observed<C: Channel>(
        &self,
        ch: &mut C,
        on_inference: &mut dyn FnMut(&InferenceReport),
    ) -> Result<ServerOutcome> {
        let r = session(ch, self.session_memory, on_inference, |layers, _reveal| {
            if !layers.is_empty() {
                return Err(ProtocolError::TooManyLayers {
                    requested: layers.len(),
                    allowed: 0,
                });
            }
            Ok(std::borrow::Cow::Borrowed(&self.served))
        })
        .map(|mut o| {
            o.encoded_bytes = self.encoded_bytes;
            o.on_the_fly_layers = self.on_the_fly_layers;
            o
        });
        if let Err(e) = &r {
            abort(ch, e);
        }
        r
    }
}

/// What the server keeps of a session.
#[derive(Clone, Debug, Default)]
pub struct ServerOutcome {
    /// The layer and method of every linear step.
    pub specs: Vec<LayerSpec>,
    /// Per inference, when the output is not revealed: the server's share of the
    /// output (the client holds the other share). Empty when the client learned the
    /// outputs.
    pub shares: Vec<Vec<u64>>,
    /// Whether the client learned the outputs (the server sent its shares).
    pub revealed: bool,
    /// Inferences served.
    pub inferences: usize,
    /// The first inference's report (per step).
    pub first: Option<InferenceReport>,
    /// Traffic per phase (offline and online summed over the inferences).
    pub traffic: PhaseCounters,
    /// Time per phase (likewise).
    pub times: PhaseTimes,
    /// HE operations of each step of the last inference (online work).
    pub counts: Vec<OpCounts>,
    /// Encoded weights the server holds for all its sessions, bytes.
    pub encoded_bytes: u64,
    /// Layers whose weights are encoded on the fly per query (beyond the budget).
    pub on_the_fly_layers: usize,
    /// Peak resident memory of the server process after the session, bytes (Linux).
    pub peak_rss_bytes: Option<u64>,
    /// Response ciphertexts sent.
    pub responses: usize,
    /// log2 of the most responses the plan allows a session
    /// ([`SessionOffer::session_responses_log2`]): each response's flooding is sized
    /// for 2^-40 over that many.
    pub responses_log2: u32,
    /// log2 of the statistical distance between this session's responses and ones that
    /// depend on the layers' results alone (union bound over its responses; at most
    /// −40).
    pub distance_log2: f64,
}

/// Peak resident memory of this process so far (Linux `VmHWM`), bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A single held layer as a one-step program: input `c_i×h×w` (or `cols`) at scale 0,
/// output the product without bias, its weights encoded for `spec` (shared).
fn one_step(
    model: &ServedLayers,
    encodings: &Encodings,
    i: usize,
    spec: &LayerSpec,
    params: &Params,
    reveal: bool,
) -> Result<Served> {
    let served = model.layers.get(i).ok_or(PlanError::Missing {
        what: "served layer",
        index: i,
    })?;
    let t = |shape: Vec<usize>, name: &str| TensorInfo {
        shape,
        scale_bits: 0,
        divisor: 1,
        name: name.into(),
    };
    let (shape, groups) = match served.shape {
        LayerShape::Grouped(g) => (LayerShape::Conv(g.dense_shape()), g.groups),
        s => (s, 1),
    };
    let (input, output, step) = match shape {
        LayerShape::Matvec { rows, cols } => (
            t(vec![cols], "x"),
            t(vec![rows], "y"),
            Step::Linear {
                name: "layer".into(),
                input: 0,
                output: 1,
                rows,
                cols,
                weight: served.weights.clone(),
                weight_scale_bits: 0,
                bias: vec![0; rows],
            },
        ),
        LayerShape::Conv(shape) => {
            let (oh, ow, _, _) = kernels::reference::conv_output(&shape);
            (
                t(vec![shape.c_i, shape.h, shape.w], "x"),
                t(vec![shape.c_o, oh, ow], "y"),
                Step::Conv {
                    name: "layer".into(),
                    input: 0,
                    output: 1,
                    shape,
                    weight: served.weights.clone(),
                    weight_scale_bits: 0,
                    bias: vec![0; shape.c_o],
                    groups,
                },
            )
        }
        LayerShape::Grouped(_) => return Err(PlanError::GroupedLayer.into()),
    };
    let prog = Program {
        input_shape: input.shape.clone(),
        frac_bits: 0,
        p: params.p(),
        preset: params.name().to_string(),
        steps: vec![step],
        tensors: vec![input, output],
        input: 0,
        output: 1,
        bounds: Vec::new(),
        input_range: None,
        accuracy: None,
        input_affine: None,
        head: nn::Head::default(),
        weight_bound_bits: None,
    };
    Served::new(
        layer_params(params, spec)?,
        prog,
        vec![Some(spec.clone())],
        vec![Some(LayerState::Held(encodings.get(model, i, spec)?))],
        reveal,
        NonlinearProtocol::default(),
        DEFAULT_OFFLINE_WINDOW,
    )
}

/// Serves one client of single layers on `ch` with encodings of its own and no memory
/// limit (tests, single sessions). Any failure aborts the session with a coarse reason
/// to the peer (the detail stays local) and is returned.
pub fn serve<C: Channel>(
    ch: &mut C,
    params: &Params,
    model: &ServedLayers,
    link: &Link,
) -> Result<ServerOutcome> {
    serve_with(ch, params, model, &Encodings::new(params)?, link, None)
}

/// [`serve`] with encodings shared between sessions and a memory limit for the session.
pub fn serve_with<C: Channel>(
    ch: &mut C,
    params: &Params,
    model: &ServedLayers,
    encodings: &Encodings,
    link: &Link,
    memory: Option<u64>,
) -> Result<ServerOutcome> {
    serve_with_observed(ch, params, model, encodings, link, memory, &mut |_| {})
}

/// [`serve_with`], telling `on_inference` of each inference as it ends.
pub fn serve_with_observed<C: Channel>(
    ch: &mut C,
    params: &Params,
    model: &ServedLayers,
    encodings: &Encodings,
    link: &Link,
    memory: Option<u64>,
    on_inference: &mut dyn FnMut(&InferenceReport),
) -> Result<ServerOutcome> {
    let r = session(ch, memory, on_inference, |layers, reveal| {
        let (i, spec) = model.choose_layer(layers, params, link)?;
        if reveal && !model.public_weights {
            warn!("a client asked to learn a layer's output on private weights: refused");
            return Err(ProtocolError::RevealRefused);
        }
        Ok(std::borrow::Cow::Owned(one_step(
            model, encodings, i, &spec, params, reveal,
        )?))
    });
    if let Err(e) = &r {
        abort(ch, e);
    }
    r
}

/// The session around the engine: `Hello` (a few KB at most, refused from its length
/// prefix) → what the client asked for, resolved by `resolve(layers, reveal)` → the
/// response bound and the memory checked → the session's deadline (the channel's, if
/// one was set; else the plan's default, [`SessionLimits::deadline`]) and frame limit
/// → `LayerLayout` → keys (exactly the plan's Galois keys, in a frame that fits no more) →
/// per input the engine and the output's share → `Close`. What the server keeps of the
/// session does not grow with its inputs (the first input's per-step report, totals,
/// and the output shares only when the client does not learn them).
fn session<'s, C: Channel>(
    ch: &mut C,
    memory: Option<u64>,
    on_inference: &mut dyn FnMut(&InferenceReport),
    resolve: impl FnOnce(&[LayerRequest], bool) -> Result<std::borrow::Cow<'s, Served>>,
) -> Result<ServerOutcome> {
    let t0 = Instant::now();
    let c0 = ch.counters();
    let (inputs, served) = match recv_at_most(ch, HELLO_MAX_BYTES)? {
        Msg::Hello {
            version,
            inputs,
            layers,
            reveal,
        } => {
            if version != PROTOCOL_VERSION {
                return Err(ProtocolError::Version {
                    ours: PROTOCOL_VERSION,
                    theirs: version,
                });
            }
            if inputs > MAX_INPUTS_PER_SESSION {
                return Err(ProtocolError::TooManyInputs {
                    requested: inputs as u64,
                    max: MAX_INPUTS_PER_SESSION as u64,
                });
            }
            (inputs, resolve(&layers, reveal)?)
        }
        m => return Err(unexpected("Hello", &m)),
    };
    let (params, prog, limits) = (&served.params, &served.prog, &served.limits);
    let bound = params.session_responses_log2();
    let per_input = limits.responses_per_input;
    if (inputs as u64).saturating_mul(per_input) > 1u64.checked_shl(bound).unwrap_or(u64::MAX) {
        return Err(ProtocolError::TooManyResponses {
            inputs: inputs as u64,
            per_input,
            bound_log2: bound,
        });
    }
    check_memory(served.session_bytes(inputs)?, memory)?;
    if ch.deadline().is_none() {
        ch.set_deadline(Some(Instant::now() + limits.deadline(inputs)));
    }
    ch.set_recv_limit(limits.largest_frame);
    let offer = SessionOffer {
        params: params.spec(),
        params_hash: params.hash(),
        program: architecture(prog),
        methods: served.methods.clone(),
        reveal: served.reveal,
        inputs,
        nonlinear: served.nonlinear,
        session_responses_log2: bound,
        segments: served.segments.clone(),
    };
    debug!(methods = ?offer.methods, "offer sent");
    send(ch, &Msg::Offer(Box::new(offer)))?;
    let keys = match recv_at_most(ch, limits.setup_max)? {
        Msg::Setup(k) => k,
        m => return Err(unexpected("Setup", &m)),
    };
    if keys.galois != limits.galois {
        let span = params.n() / 2;
        return Err(ProtocolError::GaloisKeys {
            needed: limits.galois.key_count(span),
            offered: keys.galois.key_count(span),
        });
    }
    let b: ServerBackend = Counting::new(Bfv::server(params, &keys)?);
    debug!(
        galois_bytes = keys.galois_bytes(),
        public_key_bytes = keys.public_key_bytes(),
        "keys received"
    );
    drop(keys);
    let mut nonlinear = NonlinearSession::setup(ch, served.nonlinear, true, prog)?;
    let mut out = ServerOutcome {
        specs: served.methods.iter().flatten().cloned().collect(),
        revealed: served.reveal,
        responses_log2: bound,
        ..Default::default()
    };
    out.traffic.setup = ch.counters() - c0;
    out.times.setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    for k in 0..inputs {
        let mut side = ServerSide::new(&b, params, prog, &served.layers, &mut nonlinear, limits);
        let input = vec![0u64; prog.tensors[prog.input].len()];
        let (share, mut rep) =
            run_inference(&mut side, ch, prog, &served.segments, input, &mut |_, _| {})?;
        out.responses += side.responses;
        let c = ch.counters();
        if served.reveal {
            send(ch, &Msg::Share(share))?;
        } else {
            out.shares.push(share);
        }
        rep.traffic.online = rep.traffic.online + (ch.counters() - c);
        out.traffic.offline = out.traffic.offline + rep.traffic.offline;
        out.traffic.online = out.traffic.online + rep.traffic.online;
        out.times.offline_ms += rep.offline_ms;
        out.times.online_ms += rep.online_ms;
        out.counts = rep.steps.iter().map(|s| s.counts).collect();
        out.inferences += 1;
        on_inference(&rep);
        if k == 0 {
            out.first = Some(rep);
        }
    }
    out.peak_rss_bytes = peak_rss_bytes();
    out.distance_log2 = NoiseModel::session_distance_log2(out.responses, bound);
    let c = ch.counters();
    match recv_at_most(ch, SMALL_MAX_BYTES)? {
        Msg::Close => {
            out.traffic.online = out.traffic.online + (ch.counters() - c);
            Ok(out)
        }
        m => Err(unexpected("Close", &m)),
    }
}

/// Tells the peer, coarsely, why this side stops (nothing when the transport failed
/// or the peer itself aborted).
pub(crate) fn abort<C: Channel>(ch: &mut C, e: &ProtocolError) {
    let reason = match e {
        ProtocolError::Version { .. } => AbortReason::Version,
        ProtocolError::Params { .. } => AbortReason::Params,
        e if e.is_unservable() => AbortReason::Unservable,
        ProtocolError::SessionMemory { .. } => AbortReason::Busy,
        ProtocolError::RevealRefused => AbortReason::Refused,
        e if e.is_malformed() => AbortReason::Malformed,
        e if e.is_input() => AbortReason::Input,
        ProtocolError::Net(_) | ProtocolError::PeerAborted(_) => return,
        _ => AbortReason::Internal,
    };
    let _ = send(ch, &Msg::Abort(reason));
}

/// Checks a session's memory need against its budget, before it allocates.
pub(crate) fn check_memory(needed: u64, memory: Option<u64>) -> Result<()> {
    match memory {
        Some(budget) if needed > budget => Err(ProtocolError::SessionMemory { needed, budget }),
        _ => Ok(()),
    }
}

/// One finished session of a server.
pub type ServerSessionReport = SessionReport<ServerOutcome>;

/// Serves single layers over TCP: sessions run by [`serve_sessions`] (concurrent up to
/// `opts.max_concurrent`, frame and session deadlines, failures contained), sharing one
/// set of encoded weights, each within `opts.session_memory` (default: the available
/// memory divided among the concurrent sessions). Returns after `opts.stop_after`
/// connections, or never.
pub fn serve_tcp<F>(
    listener: TcpListener,
    params: &Params,
    model: Arc<ServedLayers>,
    opts: &ServeOptions,
    on_session: F,
) -> Result<()>
where
    F: Fn(ServerSessionReport) + Send + Sync + 'static,
{
    let encodings = Arc::new(Encodings::new(params)?);
    let params = params.clone();
    let link = opts.link;
    let memory = Some(
        opts.session_memory
            .unwrap_or_else(|| crate::sessions::default_session_memory(opts.max_concurrent)),
    );
    let metrics = opts.metrics.clone();
    serve_sessions(
        listener,
        opts,
        move |ch| {
            serve_with_observed(ch, &params, &model, &encodings, &link, memory, &mut |r| {
                if let Some(m) = &metrics {
                    m.inference(r.offline_ms, r.online_ms);
                }
            })
        },
        on_session,
    )
}
