//! Private inference of a whole network ([`nn::Program`]): the server holds the
//! weights, the client the input; every tensor lives as additive shares mod p between
//! them, and the steps run in order:
//! - Linear / Conv: the client encrypts its share x_C in the packing the layer's method
//!   wants; the server runs the kernel and `share_output` on it and adds, in cleartext,
//!   W·x_S + b to its own share. By linearity W·(x_C + x_S) = W·x_C + W·x_S, so this is
//!   the server adding its share to the query (GAZELLE's HomRec) without an HE
//!   operation or any extra noise; for ENSEI layers likewise (the transform is linear).
//! - Nonlinear (ReLU, MaxPool, truncation): the garbled-circuit step of `gc`; garbling and
//!   the random OTs run in the offline phase, before the input is known. The truncation
//!   rounds to nearest: the server adds `2^(f−1)` to its share first (see
//!   [`nn::Step::Nonlinear`]). MaxPool windows are gathered from the share vectors in the
//!   order `nn` documents (row-major within a window), by both parties alike.
//! - Square: GAZELLE's interactive Square ([`kernels::SquarePlan`]).
//! - SumPool, Add (multiplying shares by public constants), Pad, SpaceToDepth: local on
//!   each party's shares.
//! - At the end the server sends its share of the output; only the client learns it and
//!   divides out the pooling divisor ([`nn::dequantise`]).
//!
//! Session: `NetHello` (version, number of inputs) → `NetPlan` (the parameter set the
//! server's fixed point needs, the architecture without weights, with the input range it
//! is safe for, and one method per linear step) → the client checks every input against
//! that range (a NaN, an infinity or an out-of-range value stops the session with a
//! typed error before anything is encrypted) → `Setup` (keys for every step) → the
//! server encodes every layer's weights (setup) → per input: offline (flooding zeros,
//! garbling + OTs for every nonlinear step) → `Ready` → online steps → `Share` → after
//! the last input `Close`.

use std::time::Instant;

use gc::{ClientPre, Garbler, NonlinSpec, Nonlinear, ServerPre};
use he::{Backend, Bfv, Counting, OpCounts, Params};
use kernels::{FloodPool, LinearLayer, SquarePlan};
use net::{Channel, Counters, Link};
use nn::{NonlinearOp, Program, Step};
use serde::{Deserialize, Serialize};

use crate::msg::{
    recv, send, unexpected, LayerShape, LayerSpec, Msg, ProtocolError, Result, PROTOCOL_VERSION,
};
use crate::plan::{answer, choose, Encoded, Plan, ServerBackend};
use crate::server::PhaseCounters;

/// Cost of one step of one inference, from one party's point of view.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepReport {
    /// Step name (the ONNX node).
    pub layer: String,
    /// What kind of step.
    pub kind: String,
    /// Output shape.
    pub shape: Vec<usize>,
    /// Method (linear steps), `gc` or `local`.
    pub method: String,
    /// This party's wall-clock time in the step, ms (online part).
    pub ms: f64,
    /// This party's offline time for the step (flooding zeros, garbling, OTs), ms.
    pub offline_ms: f64,
    /// Bytes this party sent in the step (offline + online).
    pub bytes_sent: u64,
    /// Bytes this party received in the step (offline + online).
    pub bytes_received: u64,
    /// Online bytes (both directions).
    pub online_bytes: u64,
    /// Flights this party sent (online).
    pub rounds: u64,
    /// HE operations (server side).
    pub counts: OpCounts,
    /// AND gates of the garbled circuit.
    pub and_gates: u64,
    /// Smallest noise budget left in a response (client side).
    pub noise_budget: Option<u32>,
    /// The weights were encoded during the step (beyond the server's memory budget);
    /// the encoding is part of `ms`.
    pub on_the_fly: bool,
}

/// One inference as one party saw it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InferenceReport {
    /// Per step.
    pub steps: Vec<StepReport>,
    /// Traffic of the offline and online phases (`setup` is the session's).
    pub traffic: PhaseCounters,
    /// Offline time, ms.
    pub offline_ms: f64,
    /// Online time, ms.
    pub online_ms: f64,
}

/// The client's result.
#[derive(Clone, Debug, Default)]
pub struct ClientNetOutcome {
    /// The parameter set the server's plan uses.
    pub params: Option<Params>,
    /// The architecture the server announced (no weights): scales, shapes, steps.
    pub program: Option<Program>,
    /// Per input: the output in fixed point (centred), and the report.
    pub outputs: Vec<(Vec<i64>, InferenceReport)>,
    /// The session's setup traffic (handshake, plan, keys).
    pub setup: Counters,
    /// Setup time (including the server's weight encoding), ms.
    pub setup_ms: f64,
    /// The plan the server chose (per step, `Some` for HE steps).
    pub methods: Vec<Option<LayerSpec>>,
}

/// The server's result.
#[derive(Clone, Debug, Default)]
pub struct ServerNetOutcome {
    /// Per input.
    pub inferences: Vec<InferenceReport>,
    /// Setup traffic.
    pub setup: Counters,
    /// Setup time (handshake and keys), ms.
    pub setup_ms: f64,
    /// Encoded weights the server holds for all its sessions, bytes.
    pub encoded_bytes: u64,
    /// Layers whose weights are encoded on the fly per query (beyond the budget).
    pub on_the_fly_layers: usize,
    /// Peak resident memory of the server process after the session, bytes (Linux).
    pub peak_rss_bytes: Option<u64>,
    /// Response ciphertexts sent.
    pub responses: usize,
    /// log2 of the statistical distance between this session's responses and ones that
    /// depend on the layers' results alone (each within 2^-39, union bound).
    pub distance_log2: f64,
}

/// Peak resident memory of this process so far (Linux `VmHWM`), bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// What the session messages carry.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum NetMsg {
    /// Client: start a network session for `inputs` inputs.
    Hello {
        /// Protocol version.
        version: u32,
        /// Number of inputs.
        inputs: u32,
    },
    /// Server: the parameter set, the architecture (weights removed) and a method per
    /// HE step.
    Plan {
        /// The parameter set (its plaintext modulus is the program's).
        params: he::ParamsSpec,
        /// Its hash (includes the NTT backend).
        params_hash: String,
        /// The program without weights.
        program: Box<Program>,
        /// Per step: the linear layer's plan.
        methods: Vec<Option<LayerSpec>>,
    },
}

fn send_net<C: Channel>(ch: &mut C, m: &NetMsg) -> Result<()> {
    let bytes = bincode_encode(m)?;
    Ok(ch.send(&bytes)?)
}

fn recv_net<C: Channel>(ch: &mut C) -> Result<NetMsg> {
    let frame = ch.recv()?;
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(frame.len() as u64)
        .deserialize(&frame)
        .map_err(|e| match crate::msg::decode(&frame) {
            Ok(Msg::Abort(r)) => ProtocolError::PeerAborted(r),
            _ => ProtocolError::Malformed {
                detail: e.to_string(),
            },
        })
}

fn bincode_encode<T: Serialize>(m: &T) -> Result<Vec<u8>> {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .serialize(m)
        .map_err(|e| ProtocolError::Malformed {
            detail: e.to_string(),
        })
}

/// The program without its weights (what the client may see: the architecture).
pub fn architecture(prog: &Program) -> Program {
    let mut a = prog.clone();
    for s in &mut a.steps {
        match s {
            Step::Linear { weight, bias, .. } | Step::Conv { weight, bias, .. } => {
                weight.clear();
                bias.clear();
            }
            _ => {}
        }
    }
    a.bounds.clear();
    a
}

/// The garbled-circuit spec of a nonlinear step reading tensor `input`.
pub fn gc_spec(
    prog: &Program,
    input: usize,
    op: NonlinearOp,
    trunc_bits: u32,
) -> Result<NonlinSpec> {
    let t = &prog.tensors[input];
    let (op, count) = match op {
        NonlinearOp::Relu => (Nonlinear::Relu, t.len()),
        NonlinearOp::Identity => (Nonlinear::Identity, t.len()),
        NonlinearOp::MaxPool { k, stride } | NonlinearOp::ReluMaxPool { k, stride } => {
            check_pool(&t.shape, k, k, stride, t.len())?;
            let (c, h, w) = chw(&t.shape)?;
            let (oh, ow) = ((h - k) / stride + 1, (w - k) / stride + 1);
            let window = k * k;
            let op = if matches!(op, NonlinearOp::ReluMaxPool { .. }) {
                Nonlinear::MaxPool { window }
            } else {
                Nonlinear::Max { window }
            };
            (op, c * oh * ow)
        }
    };
    Ok(NonlinSpec {
        p: prog.p,
        op,
        trunc_bits,
        count,
    })
}

fn chw(shape: &[usize]) -> Result<(usize, usize, usize)> {
    match shape {
        [c, h, w] => Ok((*c, *h, *w)),
        _ => Err(ProtocolError::Malformed {
            detail: format!("pooling needs a C×H×W tensor, got shape {shape:?}"),
        }),
    }
}

/// Gathers the k×k windows of a C×H×W share vector, in `nn::window_indices` order.
fn gather_windows(shape: &[usize], k: usize, stride: usize, v: &[u64]) -> Result<Vec<u64>> {
    check_pool(shape, k, k, stride, v.len())?;
    Ok(nn::window_indices(shape, k, k, stride)
        .into_iter()
        .map(|i| v[i])
        .collect())
}

/// Window sums (k_h×k_w, stride) of a C×H×W share vector mod p.
fn sum_pool(
    shape: &[usize],
    k_h: usize,
    k_w: usize,
    stride: usize,
    v: &[u64],
    p: u64,
) -> Result<Vec<u64>> {
    check_pool(shape, k_h, k_w, stride, v.len())?;
    Ok(nn::window_indices(shape, k_h, k_w, stride)
        .chunks(k_h * k_w)
        .map(|win| (win.iter().map(|&i| v[i] as u128).sum::<u128>() % p as u128) as u64)
        .collect())
}

/// Pads a share like [`nn::pad_indices`] (zero shares for a zero border, copied shares
/// otherwise), after checking the shape the peer's plan gave against the share.
fn pad_share(shape: &[usize], pads: [usize; 4], mode: nn::PadMode, v: &[u64]) -> Result<Vec<u64>> {
    let (c, h, w) = chw(shape)?;
    if h == 0 || w == 0 || c * h * w != v.len() || pads.iter().any(|&p| p > 1 << 16) {
        return Err(ProtocolError::Malformed {
            detail: format!(
                "padding {pads:?} on shape {shape:?} with {} values",
                v.len()
            ),
        });
    }
    Ok(nn::pad_indices(shape, pads, mode)
        .into_iter()
        .map(|i| i.map_or(0, |i| v[i]))
        .collect())
}

/// Space-to-depth of a share like [`nn::space_to_depth_indices`], after checking the
/// shape the peer's plan gave against the share and bounding the output.
fn space_to_depth_share(
    shape: &[usize],
    stride: usize,
    phases: [usize; 2],
    out_h: usize,
    out_w: usize,
    v: &[u64],
) -> Result<Vec<u64>> {
    let (c, h, w) = chw(shape)?;
    let bad = stride == 0
        || phases.iter().any(|&q| q == 0 || q > stride)
        || c * h * w != v.len()
        || out_h > h.div_ceil(stride.max(1)) + 64
        || out_w > w.div_ceil(stride.max(1)) + 64
        || stride > 64;
    if bad {
        return Err(ProtocolError::Malformed {
            detail: format!(
                "space-to-depth {stride} ({phases:?} phases) to {out_h}x{out_w} on shape {shape:?} with {} values",
                v.len()
            ),
        });
    }
    Ok(
        nn::space_to_depth_indices(shape, stride, phases, out_h, out_w)
            .into_iter()
            .map(|i| i.map_or(0, |i| v[i]))
            .collect(),
    )
}

fn check_pool(shape: &[usize], k_h: usize, k_w: usize, stride: usize, len: usize) -> Result<()> {
    let (c, h, w) = chw(shape)?;
    if k_h == 0 || k_w == 0 || k_h > h || k_w > w || stride == 0 || c * h * w != len {
        return Err(ProtocolError::Malformed {
            detail: format!("pooling {k_h}x{k_w}/{stride} on shape {shape:?} with {len} values"),
        });
    }
    Ok(())
}

/// `a·ma + b·mb mod p` elementwise (shares times public constants).
fn mul_add(a: &[u64], ma: u64, b: &[u64], mb: u64, p: u64) -> Vec<u64> {
    let (fa, fb) = (ma as u128 % p as u128, mb as u128 % p as u128);
    a.iter()
        .zip(b)
        .map(|(&x, &y)| ((x as u128 * fa + y as u128 * fb) % p as u128) as u64)
        .collect()
}

/// The HE layer shape of a Linear or Conv step (`None` for other steps).
pub fn layer_shape(step: &Step) -> Option<LayerShape> {
    match step {
        Step::Linear { rows, cols, .. } => Some(LayerShape::Matvec {
            rows: *rows,
            cols: *cols,
        }),
        Step::Conv { shape, .. } => Some(LayerShape::Conv(*shape)),
        _ => None,
    }
}

fn kind(step: &Step) -> &'static str {
    match step {
        Step::Linear { .. } => "linear",
        Step::Conv { .. } => "conv",
        Step::Nonlinear {
            op: NonlinearOp::Relu,
            ..
        } => "relu",
        Step::Nonlinear {
            op: NonlinearOp::MaxPool { .. },
            ..
        } => "maxpool",
        Step::Nonlinear {
            op: NonlinearOp::Identity,
            ..
        } => "truncate",
        Step::Nonlinear {
            op: NonlinearOp::ReluMaxPool { .. },
            ..
        } => "relu+maxpool",
        Step::Square { .. } => "square",
        Step::SumPool { .. } => "sumpool",
        Step::Pad { .. } => "pad",
        Step::SpaceToDepth { .. } => "space-to-depth",
        Step::Add { .. } => "add",
    }
}

/// Whether every tensor a step (or the program) names exists: the client checks the
/// server's plan before indexing with it.
fn ids_in_range(prog: &Program) -> bool {
    let n = prog.tensors.len();
    prog.input < n
        && prog.output < n
        && prog.steps.iter().all(|s| {
            let inputs: Vec<usize> = match s {
                Step::Linear { input, .. }
                | Step::Conv { input, .. }
                | Step::Nonlinear { input, .. }
                | Step::Square { input, .. }
                | Step::SumPool { input, .. }
                | Step::Pad { input, .. }
                | Step::SpaceToDepth { input, .. } => vec![*input],
                Step::Add { a, b, .. } => vec![*a, *b],
            };
            s.output() < n && inputs.iter().all(|&t| t < n)
        })
}

/// W·x + b in cleartext mod p for the server's own share (x in [0, p)). A zero share
/// (the network input, which the client holds whole) costs no product: W·0 = 0.
fn clear_linear(step: &Step, x: &[u64], p: u64) -> Vec<u64> {
    let zero = x.iter().all(|&v| v == 0);
    let xi: Vec<i64> = x.iter().map(|&v| v as i64).collect();
    let (acc, bias, per) = match step {
        Step::Linear {
            rows,
            cols,
            weight,
            bias,
            ..
        } => (
            if zero {
                vec![0; *rows]
            } else {
                kernels::reference::matvec(weight, &xi, *rows, *cols)
            },
            bias,
            1,
        ),
        Step::Conv {
            shape,
            weight,
            bias,
            ..
        } => {
            let (oh, ow, _, _) = kernels::reference::conv_output(shape);
            let acc = if zero {
                vec![0; shape.c_o * oh * ow]
            } else {
                kernels::reference::conv(shape, &xi, weight)
            };
            (acc, bias, oh * ow)
        }
        _ => return Vec::new(),
    };
    acc.iter()
        .enumerate()
        .map(|(i, &a)| {
            let b = bias.get(i / per).copied().unwrap_or(0) as i128;
            (a + b).rem_euclid(p as i128) as u64
        })
        .collect()
}

fn add_mod(a: &[u64], b: &[u64], p: u64) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| (x + y) % p).collect()
}

/// One linear step's weights on the server: encoded once for every session, or (beyond
/// the memory budget) encoded when its query arrives and dropped after.
enum LayerState {
    Held(Encoded),
    OnTheFly(Plan),
}

/// Inferences one network session may ask for.
pub const MAX_INPUTS_PER_SESSION: u32 = 4096;

/// A network server: the program with its weights, the method of every linear step and
/// the weights encoded once (those beyond the memory budget are encoded per query),
/// shared by all its sessions ([`NetworkServer::serve`]).
pub struct NetworkServer {
    params: Params,
    prog: Program,
    methods: Vec<Option<LayerSpec>>,
    layers: Vec<Option<LayerState>>,
    garbler: Garbler,
    encoded_bytes: u64,
    on_the_fly_layers: usize,
    encode_ms: f64,
    session_memory: Option<u64>,
}

impl NetworkServer {
    /// Plans every linear step (`fixed` may fix a method, else the cheapest predicted on
    /// `link`) and encodes the weights in order while they fit `mem_limit` bytes; the
    /// rest are encoded on the fly when their query arrives (the encoding then counts in
    /// that step's online time).
    pub fn new(
        params: &Params,
        prog: &Program,
        fixed: &dyn Fn(&LayerShape) -> Option<crate::msg::LayerMethod>,
        link: &Link,
        garbler: Garbler,
        mem_limit: Option<u64>,
    ) -> Result<Self> {
        let t = Instant::now();
        if prog.p != params.p() {
            return Err(ProtocolError::Plan);
        }
        let methods = prog
            .steps
            .iter()
            .map(|s| {
                layer_shape(s)
                    .map(|shape| match fixed(&shape) {
                        Some(m) => shape.with(m),
                        None => choose(&shape, params, link).map(|(spec, _)| spec),
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        let encoder: ServerBackend = Counting::new(Bfv::encoder(params)?);
        let model = kernels::CostModel::reference(params);
        let (mut held, mut on_the_fly_layers) = (0u64, 0);
        let mut layers = Vec::with_capacity(prog.steps.len());
        for (step, spec) in prog.steps.iter().zip(&methods) {
            layers.push(match (step, spec) {
                (Step::Linear { weight, .. } | Step::Conv { weight, .. }, Some(spec)) => {
                    let plan = Plan::new(spec, params)?;
                    let size = match mem_limit {
                        Some(_) => plan.estimate(params, &model)?.encoded_bytes,
                        None => 0,
                    };
                    if mem_limit.is_some_and(|limit| held + size > limit) {
                        on_the_fly_layers += 1;
                        Some(LayerState::OnTheFly(plan))
                    } else {
                        held += size;
                        Some(LayerState::Held(plan.encode(&encoder, weight)?))
                    }
                }
                _ => None,
            });
        }
        Ok(Self {
            params: params.clone(),
            prog: prog.clone(),
            methods,
            layers,
            garbler,
            encoded_bytes: held,
            on_the_fly_layers,
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

    /// Encoded weights held, bytes (0 when no memory budget was given: not estimated).
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
        &self.params
    }
    /// The program (with its weights).
    pub fn program(&self) -> &Program {
        &self.prog
    }

    /// Memory one inference of a session allocates, bytes (an upper estimate): flooding
    /// zeros, query and response ciphertexts of every HE step, the garbled tables and
    /// labels of every nonlinear step (all made in the offline phase, before `Ready`),
    /// every tensor's two share vectors, and the largest weights encoded on the fly.
    pub fn session_bytes(&self) -> Result<u64> {
        let prog = &self.prog;
        let params = &self.params;
        let ct = params.ct_wire_size(0, false) as u64;
        let mut total: u64 = prog.tensors.iter().map(|t| t.len() as u64 * 16).sum();
        let mut fly = 0u64;
        let model = kernels::CostModel::reference(params);
        for (step, state) in prog.steps.iter().zip(&self.layers) {
            total += match (step, state) {
                (_, Some(LayerState::Held(e))) => e.plan().session_bytes(params),
                (_, Some(LayerState::OnTheFly(plan))) => {
                    fly = fly.max(plan.estimate(params, &model)?.encoded_bytes);
                    plan.session_bytes(params)
                }
                (Step::Square { input, .. }, _) => {
                    let sq = SquarePlan::new(prog.tensors[*input].len(), slots(params))?;
                    (3 * sq.output_cts() + sq.query_cts()) as u64 * ct
                }
                (
                    Step::Nonlinear {
                        input,
                        op,
                        trunc_bits,
                        ..
                    },
                    _,
                ) => {
                    let spec = gc_spec(prog, *input, *op, *trunc_bits)?;
                    spec.and_gates() * 32 + spec.inputs() as u64 * spec.bits() as u64 * 48
                }
                _ => 0,
            };
        }
        Ok(total + fly)
    }

    /// Serves one network session. A failure is answered with a coarse `Abort` and
    /// returned.
    pub fn serve<C: Channel>(&self, ch: &mut C) -> Result<ServerNetOutcome> {
        let r = self.serve_inner(ch);
        if let Err(e) = &r {
            crate::server::abort(ch, e);
        }
        r
    }

    fn serve_inner<C: Channel>(&self, ch: &mut C) -> Result<ServerNetOutcome> {
        let (params, prog, garbler) = (&self.params, &self.prog, self.garbler);
        let t0 = Instant::now();
        let c0 = ch.counters();
        let inputs = match recv_net(ch)? {
            NetMsg::Hello { version, inputs } => {
                if version != PROTOCOL_VERSION {
                    return Err(ProtocolError::Version {
                        ours: PROTOCOL_VERSION,
                        theirs: version,
                    });
                }
                inputs
            }
            NetMsg::Plan { .. } => {
                return Err(ProtocolError::Unexpected {
                    expected: "network Hello",
                    got: "Plan",
                })
            }
        };
        if inputs > MAX_INPUTS_PER_SESSION {
            return Err(ProtocolError::TooManyInputs {
                requested: inputs as u64,
                max: MAX_INPUTS_PER_SESSION as u64,
            });
        }
        crate::server::check_memory(self.session_bytes()?, self.session_memory)?;
        send_net(
            ch,
            &NetMsg::Plan {
                params: params.spec(),
                params_hash: params.hash(),
                program: Box::new(architecture(prog)),
                methods: self.methods.clone(),
            },
        )?;
        let keys = match recv(ch)? {
            Msg::Setup(k) => k,
            m => return Err(unexpected("Setup", &m)),
        };
        let b: ServerBackend = Counting::new(Bfv::server(params, &keys)?);
        let mut out = ServerNetOutcome {
            setup: ch.counters() - c0,
            setup_ms: t0.elapsed().as_secs_f64() * 1e3,
            encoded_bytes: self.encoded_bytes,
            on_the_fly_layers: self.on_the_fly_layers,
            ..Default::default()
        };
        let p = prog.p;
        for _ in 0..inputs {
            let mut rep = InferenceReport::default();
            let c_off = ch.counters();
            let t_off = Instant::now();
            // Offline: flooding zeros per HE step, garbling + OTs per nonlinear step.
            let mut pools: Vec<Option<FloodPool<ServerBackend>>> = Vec::new();
            let mut pres: Vec<Option<ServerPre>> = Vec::new();
            for (i, step) in prog.steps.iter().enumerate() {
                let t = Instant::now();
                let c = ch.counters();
                let mut r = StepReport {
                    layer: step.name().to_string(),
                    kind: kind(step).into(),
                    shape: prog.tensors[step.output()].shape.clone(),
                    ..Default::default()
                };
                let (pool, pre) = match (step, &self.layers[i]) {
                    (_, Some(state)) => {
                        let plan = match state {
                            LayerState::Held(e) => e.plan(),
                            LayerState::OnTheFly(plan) => {
                                r.on_the_fly = true;
                                plan.clone()
                            }
                        };
                        r.method = plan.method_name();
                        (Some(plan.flood_pool(&b, params)?), None)
                    }
                    (Step::Square { input, .. }, _) => {
                        r.method = "square".into();
                        let sq = SquarePlan::new(prog.tensors[*input].len(), slots(params))?;
                        (Some(fill(&sq, &b, params)?), None)
                    }
                    (
                        Step::Nonlinear {
                            input,
                            op,
                            trunc_bits,
                            ..
                        },
                        _,
                    ) => {
                        let spec = gc_spec(prog, *input, *op, *trunc_bits)?;
                        r.method = "gc".into();
                        r.and_gates = spec.and_gates();
                        (
                            None,
                            Some(gc::server_offline(ch, &spec, garbler).map_err(gc_err)?),
                        )
                    }
                    _ => {
                        r.method = "local".into();
                        (None, None)
                    }
                };
                b.take();
                pools.push(pool);
                pres.push(pre);
                let d = ch.counters() - c;
                r.offline_ms = t.elapsed().as_secs_f64() * 1e3;
                r.bytes_sent = d.bytes_sent;
                r.bytes_received = d.bytes_received;
                rep.steps.push(r);
            }
            send(ch, &Msg::Ready)?;
            rep.offline_ms = t_off.elapsed().as_secs_f64() * 1e3;
            let c_on = ch.counters();
            rep.traffic.offline = c_on - c_off;
            let t_on = Instant::now();
            // Online.
            let mut shares: Vec<Option<Vec<u64>>> = vec![None; prog.tensors.len()];
            shares[prog.input] = Some(vec![0; prog.tensors[prog.input].len()]);
            let get = |shares: &[Option<Vec<u64>>], id: usize| -> Result<Vec<u64>> {
                shares[id].clone().ok_or(ProtocolError::Plan)
            };
            for (i, step) in prog.steps.iter().enumerate() {
                let t = Instant::now();
                let c = ch.counters();
                let y = match step {
                    Step::Linear { input, .. } | Step::Conv { input, .. } => {
                        let x = get(&shares, *input)?;
                        let cts = query_cts(ch, i)?;
                        let pool = pools[i].as_mut().ok_or(ProtocolError::Plan)?;
                        let (resp, mine) = match &self.layers[i] {
                            Some(LayerState::Held(e)) => e.answer(&b, pool, &cts)?,
                            Some(LayerState::OnTheFly(plan)) => {
                                let w = match step {
                                    Step::Linear { weight, .. } | Step::Conv { weight, .. } => {
                                        weight
                                    }
                                    _ => return Err(ProtocolError::Plan),
                                };
                                plan.clone().encode(&b, w)?.answer(&b, pool, &cts)?
                            }
                            None => return Err(ProtocolError::Plan),
                        };
                        out.responses += resp.len();
                        send(
                            ch,
                            &Msg::Response {
                                layer: i as u32,
                                cts: resp,
                            },
                        )?;
                        add_mod(&mine, &clear_linear(step, &x, p), p)
                    }
                    Step::Square { input, .. } => {
                        let x = get(&shares, *input)?;
                        let sq = SquarePlan::new(x.len(), slots(params))?;
                        let cts = query_cts(ch, i)?;
                        let w: Vec<i64> = x.iter().map(|&v| v as i64).collect();
                        let m = sq.encode_weights(&b, &w)?;
                        let pool = pools[i].as_mut().ok_or(ProtocolError::Plan)?;
                        let (resp, cross) = answer(&sq, &b, &m, pool, &cts)?;
                        out.responses += resp.len();
                        send(
                            ch,
                            &Msg::Response {
                                layer: i as u32,
                                cts: resp,
                            },
                        )?;
                        sq.server_output(&x, &cross)?
                    }
                    Step::Nonlinear {
                        input,
                        op,
                        trunc_bits,
                        ..
                    } => {
                        // rounding to nearest: the server's share carries the offset
                        let h = nn::round_offset(*trunc_bits) as u64 % p;
                        let x: Vec<u64> = get(&shares, *input)?
                            .into_iter()
                            .map(|v| (v + h) % p)
                            .collect();
                        let x = match op {
                            NonlinearOp::MaxPool { k, stride }
                            | NonlinearOp::ReluMaxPool { k, stride } => {
                                gather_windows(&prog.tensors[*input].shape, *k, *stride, &x)?
                            }
                            _ => x,
                        };
                        let pre = pres[i].take().ok_or(ProtocolError::Plan)?;
                        gc::server_online(ch, pre, &x).map_err(gc_err)?
                    }
                    Step::SumPool {
                        input,
                        k_h,
                        k_w,
                        stride,
                        ..
                    } => {
                        let x = get(&shares, *input)?;
                        sum_pool(&prog.tensors[*input].shape, *k_h, *k_w, *stride, &x, p)?
                    }
                    Step::Pad {
                        input, pads, mode, ..
                    } => {
                        let x = get(&shares, *input)?;
                        pad_share(&prog.tensors[*input].shape, *pads, *mode, &x)?
                    }
                    Step::SpaceToDepth {
                        input,
                        stride,
                        phases,
                        out_h,
                        out_w,
                        ..
                    } => {
                        let x = get(&shares, *input)?;
                        space_to_depth_share(
                            &prog.tensors[*input].shape,
                            *stride,
                            *phases,
                            *out_h,
                            *out_w,
                            &x,
                        )?
                    }
                    Step::Add {
                        a,
                        b: bb,
                        mul_a,
                        mul_b,
                        ..
                    } => mul_add(&get(&shares, *a)?, *mul_a, &get(&shares, *bb)?, *mul_b, p),
                };
                shares[step.output()] = Some(y);
                let d = ch.counters() - c;
                let r = &mut rep.steps[i];
                r.ms = t.elapsed().as_secs_f64() * 1e3;
                r.bytes_sent += d.bytes_sent;
                r.bytes_received += d.bytes_received;
                r.online_bytes = d.bytes_sent + d.bytes_received;
                r.rounds = d.flights;
                r.counts = b.take();
            }
            send(ch, &Msg::Share(vec![get(&shares, prog.output)?]))?;
            rep.online_ms = t_on.elapsed().as_secs_f64() * 1e3;
            rep.traffic.online = ch.counters() - c_on;
            out.inferences.push(rep);
        }
        out.peak_rss_bytes = peak_rss_bytes();
        out.distance_log2 = kernels::noise::NoiseModel::session_distance_log2(out.responses);
        match recv(ch)? {
            Msg::Close => Ok(out),
            m => Err(unexpected("Close", &m)),
        }
    }
}

/// Serves one network session: `prog` holds the weights; `fixed` may fix the method of
/// a linear layer (else the cheapest predicted on `link`). The weights are encoded for
/// this session alone; a server of many sessions makes one [`NetworkServer`].
pub fn serve_network<C: Channel>(
    ch: &mut C,
    params: &Params,
    prog: &Program,
    fixed: &dyn Fn(&LayerShape) -> Option<crate::msg::LayerMethod>,
    link: &Link,
    garbler: Garbler,
) -> Result<ServerNetOutcome> {
    serve_network_with(ch, params, prog, fixed, link, garbler, None)
}

/// [`serve_network`] with a memory budget for the encoded weights (bytes): layers are
/// encoded in order while they fit; the rest are encoded on the fly when their query
/// arrives (the encoding then counts in that step's online time) and dropped after.
pub fn serve_network_with<C: Channel>(
    ch: &mut C,
    params: &Params,
    prog: &Program,
    fixed: &dyn Fn(&LayerShape) -> Option<crate::msg::LayerMethod>,
    link: &Link,
    garbler: Garbler,
    mem_limit: Option<u64>,
) -> Result<ServerNetOutcome> {
    match NetworkServer::new(params, prog, fixed, link, garbler, mem_limit) {
        Ok(server) => server.serve(ch),
        Err(e) => {
            crate::server::abort(ch, &e);
            Err(e)
        }
    }
}

fn gc_err(e: gc::GcError) -> ProtocolError {
    match e {
        gc::GcError::Net(n) => ProtocolError::Net(n),
        e => ProtocolError::Malformed {
            detail: e.to_string(),
        },
    }
}

fn slots(params: &Params) -> he::SlotInfo {
    he::SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: he::Layout::TwoRows,
    }
}

fn fill<L: LinearLayer>(
    plan: &L,
    b: &ServerBackend,
    params: &Params,
) -> Result<FloodPool<ServerBackend>> {
    let mut pool = FloodPool::new(plan.flood_bits(params)?);
    pool.fill(b, plan.output_cts())?;
    Ok(pool)
}

fn query_cts<C: Channel>(ch: &mut C, i: usize) -> Result<Vec<Vec<u8>>> {
    match recv(ch)? {
        Msg::Query { layer, cts } if layer as usize == i => Ok(cts),
        m => Err(unexpected("Query for the next step", &m)),
    }
}

fn ask<L: LinearLayer, C: Channel>(
    ch: &mut C,
    plan: &L,
    b: &Bfv,
    i: usize,
    x: &[u64],
    budget: &mut Option<u32>,
) -> Result<Vec<u64>> {
    let q = plan.query(b, x)?;
    let cts = q
        .iter()
        .map(|c| b.serialize(c))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    send(
        ch,
        &Msg::Query {
            layer: i as u32,
            cts,
        },
    )?;
    let cts = match recv(ch)? {
        Msg::Response { layer, cts } if layer as usize == i => cts,
        m => return Err(unexpected("Response for the step", &m)),
    };
    let resp = cts
        .iter()
        .map(|c| b.deserialize(c))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    for c in &resp {
        if let Some(bits) = b.noise_budget(c)? {
            *budget = Some(budget.map_or(bits, |v| v.min(bits)));
        }
    }
    Ok(plan.decrypt(b, &resp)?)
}

/// Runs a network session as the client: one inference per input (floats, checked
/// against the plan's input range and quantised at the scale it announces). The
/// parameter set is the one the server's plan names; `expect` (if given) must equal it.
/// `progress(step, steps)` is told as each step starts.
pub fn infer_client<C: Channel>(
    ch: &mut C,
    expect: Option<&Params>,
    inputs: &[Vec<f32>],
    garbler: Garbler,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ClientNetOutcome> {
    let r = infer_client_inner(ch, expect, inputs, garbler, progress);
    if let Err(e) = &r {
        crate::server::abort(ch, e);
    }
    r
}

fn infer_client_inner<C: Channel>(
    ch: &mut C,
    expect: Option<&Params>,
    inputs: &[Vec<f32>],
    garbler: Garbler,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ClientNetOutcome> {
    let t0 = Instant::now();
    let c0 = ch.counters();
    send_net(
        ch,
        &NetMsg::Hello {
            version: PROTOCOL_VERSION,
            inputs: u32::try_from(inputs.len()).map_err(|_| ProtocolError::InputLength {
                layer: 0,
                expected: u32::MAX as usize,
                actual: inputs.len(),
            })?,
        },
    )?;
    let (spec, hash, prog, methods) = match recv_net(ch)? {
        NetMsg::Plan {
            params,
            params_hash,
            program,
            methods,
        } => (params, params_hash, *program, methods),
        NetMsg::Hello { .. } => {
            return Err(ProtocolError::Unexpected {
                expected: "Plan",
                got: "Hello",
            })
        }
    };
    let params = Params::from_spec(&spec)?;
    if params.hash() != hash {
        return Err(ProtocolError::Params {
            ours: params.hash(),
            theirs: hash,
        });
    }
    if let Some(want) = expect {
        if want != &params {
            return Err(ProtocolError::Params {
                ours: want.hash(),
                theirs: hash,
            });
        }
    }
    let params = &params;
    if methods.len() != prog.steps.len() || prog.p != params.p() || !ids_in_range(&prog) {
        return Err(ProtocolError::Plan);
    }
    // every input is checked before anything is encrypted
    for (k, x) in inputs.iter().enumerate() {
        match nn::check_input(&prog, x) {
            Ok(()) => {}
            Err(nn::NnError::InputOutOfRange {
                index,
                value,
                lo,
                hi,
                count,
            }) => {
                return Err(ProtocolError::InputOutOfRange {
                    input: k,
                    index,
                    value,
                    lo,
                    hi,
                    count,
                })
            }
            Err(nn::NnError::NonFinite { index, value, .. }) => {
                return Err(ProtocolError::NonFiniteInput {
                    input: k,
                    index,
                    value,
                })
            }
            Err(_) => {
                return Err(ProtocolError::InputLength {
                    layer: 0,
                    expected: prog.input_shape.iter().product(),
                    actual: x.len(),
                })
            }
        }
    }
    let plans = prog
        .steps
        .iter()
        .zip(&methods)
        .map(|(s, m)| match (layer_shape(s), m) {
            (Some(shape), Some(spec)) if spec.shape() == shape => Plan::new(spec, params).map(Some),
            (None, None) => Ok(None),
            _ => Err(ProtocolError::Plan),
        })
        .collect::<Result<Vec<_>>>()?;
    let galois = plans
        .iter()
        .flatten()
        .fold(he::GaloisSpec::none(), |g, p| g.union(&p.galois()));
    let inputs: Vec<Vec<i64>> = inputs
        .iter()
        .map(|x| nn::quantise_input(&prog, x))
        .collect();
    let b = Bfv::keygen(params, galois)?;
    send(ch, &Msg::Setup(b.public_keys().clone()))?;
    let p = prog.p;
    let mut out = ClientNetOutcome {
        methods,
        ..Default::default()
    };
    for x in &inputs {
        if x.len() != prog.tensors[prog.input].len() {
            return Err(ProtocolError::InputLength {
                layer: 0,
                expected: prog.tensors[prog.input].len(),
                actual: x.len(),
            });
        }
        let mut rep = InferenceReport::default();
        let c_off = ch.counters();
        let t_off = Instant::now();
        let mut pres: Vec<Option<ClientPre>> = Vec::new();
        for step in &prog.steps {
            let t = Instant::now();
            let c = ch.counters();
            let mut r = StepReport {
                layer: step.name().to_string(),
                kind: kind(step).into(),
                shape: prog.tensors[step.output()].shape.clone(),
                ..Default::default()
            };
            pres.push(match step {
                Step::Nonlinear {
                    input,
                    op,
                    trunc_bits,
                    ..
                } => {
                    let spec = gc_spec(&prog, *input, *op, *trunc_bits)?;
                    r.and_gates = spec.and_gates();
                    r.method = "gc".into();
                    Some(gc::client_offline(ch, &spec, garbler).map_err(gc_err)?)
                }
                _ => None,
            });
            let d = ch.counters() - c;
            r.offline_ms = t.elapsed().as_secs_f64() * 1e3;
            r.bytes_sent = d.bytes_sent;
            r.bytes_received = d.bytes_received;
            rep.steps.push(r);
        }
        match recv(ch)? {
            Msg::Ready => {}
            m => return Err(unexpected("Ready", &m)),
        }
        if out.setup_ms == 0.0 {
            // The first offline phase starts after the server's weight encoding.
            out.setup = c_off - c0;
            out.setup_ms = (t_off - t0).as_secs_f64() * 1e3;
        }
        rep.offline_ms = t_off.elapsed().as_secs_f64() * 1e3;
        let c_on = ch.counters();
        rep.traffic.offline = c_on - c_off;
        let t_on = Instant::now();
        let mut shares: Vec<Option<Vec<u64>>> = vec![None; prog.tensors.len()];
        shares[prog.input] = Some(x.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect());
        let get = |shares: &[Option<Vec<u64>>], id: usize| -> Result<Vec<u64>> {
            shares[id].clone().ok_or(ProtocolError::Plan)
        };
        for (i, step) in prog.steps.iter().enumerate() {
            progress(i, prog.steps.len());
            let t = Instant::now();
            let c = ch.counters();
            let mut budget = None;
            let y = match step {
                Step::Linear { input, .. } | Step::Conv { input, .. } => {
                    let x = get(&shares, *input)?;
                    match &plans[i] {
                        Some(Plan::Matvec(pl)) => {
                            rep.steps[i].method = pl.method().name().into();
                            ask(ch, pl, &b, i, &x, &mut budget)?
                        }
                        Some(Plan::Conv(pl)) => {
                            rep.steps[i].method = pl.method().name().into();
                            ask(ch, pl.as_ref(), &b, i, &x, &mut budget)?
                        }
                        None => return Err(ProtocolError::Plan),
                    }
                }
                Step::Square { input, .. } => {
                    let x = get(&shares, *input)?;
                    let sq = SquarePlan::new(x.len(), slots(params))?;
                    rep.steps[i].method = "square".into();
                    let c = ask(ch, &sq, &b, i, &x, &mut budget)?;
                    sq.client_output(&x, &c)?
                }
                Step::Nonlinear { input, op, .. } => {
                    let x = get(&shares, *input)?;
                    let x = match op {
                        NonlinearOp::MaxPool { k, stride }
                        | NonlinearOp::ReluMaxPool { k, stride } => {
                            gather_windows(&prog.tensors[*input].shape, *k, *stride, &x)?
                        }
                        _ => x,
                    };
                    let pre = pres[i].take().ok_or(ProtocolError::Plan)?;
                    gc::client_online(ch, pre, &x).map_err(gc_err)?
                }
                Step::SumPool {
                    input,
                    k_h,
                    k_w,
                    stride,
                    ..
                } => {
                    rep.steps[i].method = "local".into();
                    let x = get(&shares, *input)?;
                    sum_pool(&prog.tensors[*input].shape, *k_h, *k_w, *stride, &x, p)?
                }
                Step::Pad {
                    input, pads, mode, ..
                } => {
                    rep.steps[i].method = "local".into();
                    let x = get(&shares, *input)?;
                    pad_share(&prog.tensors[*input].shape, *pads, *mode, &x)?
                }
                Step::SpaceToDepth {
                    input,
                    stride,
                    phases,
                    out_h,
                    out_w,
                    ..
                } => {
                    rep.steps[i].method = "local".into();
                    let x = get(&shares, *input)?;
                    space_to_depth_share(
                        &prog.tensors[*input].shape,
                        *stride,
                        *phases,
                        *out_h,
                        *out_w,
                        &x,
                    )?
                }
                Step::Add {
                    a,
                    b: bb,
                    mul_a,
                    mul_b,
                    ..
                } => {
                    rep.steps[i].method = "local".into();
                    mul_add(&get(&shares, *a)?, *mul_a, &get(&shares, *bb)?, *mul_b, p)
                }
            };
            shares[step.output()] = Some(y);
            let d = ch.counters() - c;
            let r = &mut rep.steps[i];
            r.ms = t.elapsed().as_secs_f64() * 1e3;
            r.bytes_sent += d.bytes_sent;
            r.bytes_received += d.bytes_received;
            r.online_bytes = d.bytes_sent + d.bytes_received;
            r.rounds = d.flights;
            r.noise_budget = budget;
        }
        let mine = get(&shares, prog.output)?;
        let theirs = match recv(ch)? {
            Msg::Share(mut s) if s.len() == 1 && s[0].len() == mine.len() => s.remove(0),
            m => return Err(unexpected("the server's share of the output", &m)),
        };
        let y: Vec<i64> = mine
            .iter()
            .zip(&theirs)
            .map(|(a, b)| {
                let v = (a + b % p) % p;
                if v > p / 2 {
                    v as i64 - p as i64
                } else {
                    v as i64
                }
            })
            .collect();
        rep.online_ms = t_on.elapsed().as_secs_f64() * 1e3;
        rep.traffic.online = ch.counters() - c_on;
        out.outputs.push((y, rep));
    }
    send(ch, &Msg::Close)?;
    out.program = Some(prog);
    out.params = Some(params.clone());
    Ok(out)
}
