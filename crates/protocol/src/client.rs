//! The client: says what it wants (`Hello`), takes the parameter set and the program
//! from the server's offer, checks every input against the offer's input range before
//! anything is encrypted, generates only the keys the plan needs, then runs the engine
//! ([`crate::engine`]) once per input and, when the offer reveals it, reconstructs the
//! output from the server's share.
//!
//! [`run`] is the one client session; [`infer`] (a network's float inputs) and [`query`]
//! (one linear layer on integers mod p) are the two ways into it.

use std::time::Instant;

use he::{Bfv, Params};
use net::Channel;
use tracing::debug;

use crate::engine::PhaseCounters;
use crate::engine::{
    ids_in_range, layer_shape, run_inference, ClientSide, InferenceReport, NonlinearSession,
};
use crate::limits::{valid_segments, SessionLimits, OFFER_MAX_BYTES};
use crate::msg::{
    recv_at_most, send, unexpected, LayerRequest, LayerSpec, Msg, PlanError, ProtocolError, Result,
    SessionOffer, PROTOCOL_VERSION,
};
use crate::plan::LayerLayout;
use crate::server::{PhaseTimes, MAX_INPUTS_PER_SESSION};

/// A stage of the client's session, reported to a progress callback when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Handshake.
    Handshake,
    /// Generating the secret, public and Galois keys.
    KeyGen,
    /// Uploading the keys.
    Setup,
    /// Waiting for the server's input-independent work (input `input`).
    Offline {
        /// Which input.
        input: usize,
    },
    /// Running step `step` of `steps` of input `input`.
    Step {
        /// Which input.
        input: usize,
        /// The step.
        step: usize,
        /// Steps in the program.
        steps: usize,
    },
    /// Closing.
    Close,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Phase::Handshake => write!(f, "handshake"),
            Phase::KeyGen => write!(f, "generating keys"),
            Phase::Setup => write!(f, "uploading keys"),
            Phase::Offline { input } => write!(f, "input {input}: server precomputing (offline)"),
            Phase::Step { input, step, steps } => {
                write!(f, "input {input}: step {}/{steps}", step + 1)
            }
            Phase::Close => write!(f, "closing"),
        }
    }
}

/// The client's inputs.
#[derive(Clone, Copy, Debug)]
pub enum Inputs<'a> {
    /// Floats, checked against the offer's input range and quantised at its scale.
    Float(&'a [Vec<f32>]),
    /// Integers mod p (a single layer's input), checked to be reduced.
    Residues(&'a [Vec<u64>]),
}

/// One of the client's inputs.
#[derive(Clone, Copy, Debug)]
enum Input<'a> {
    Float(&'a [f32]),
    Residues(&'a [u64]),
}

impl<'a> Inputs<'a> {
    fn len(&self) -> usize {
        match self {
            Inputs::Float(v) => v.len(),
            Inputs::Residues(v) => v.len(),
        }
    }
    fn get(&self, k: usize) -> Input<'a> {
        match *self {
            Inputs::Float(v) => Input::Float(&v[k]),
            Inputs::Residues(v) => Input::Residues(&v[k]),
        }
    }
}

/// What the client asks for.
#[derive(Clone, Debug, Default)]
pub struct ClientRequest {
    /// From a server of single layers: the layer (one); empty for a network server.
    pub layers: Vec<LayerRequest>,
    /// Ask to learn a single layer's output (public demo weights only; a network's
    /// output is always revealed to the client).
    pub reveal: bool,
    /// The parameter set the client expects (an assertion; `None` takes the server's).
    pub expect: Option<Params>,
}

/// One input's result on the client.
#[derive(Clone, Debug)]
pub struct ClientOutput {
    /// The client's share of the output.
    pub share: Vec<u64>,
    /// The output (centred), when the offer reveals it.
    pub value: Option<Vec<i64>>,
    /// The report.
    pub report: InferenceReport,
    /// The client's shares of each approximately truncated step's input, in program
    /// order (empty when the program has none): what `nn::run_fixed_replay` needs to
    /// check this output against the fixed-point reference bit for bit.
    pub truncation_shares: Vec<Vec<u64>>,
}

/// What the client gets from a session.
#[derive(Clone, Debug)]
pub struct ClientOutcome {
    /// The parameter set of the server's offer.
    pub params: Params,
    /// The server's offer (the program without weights, the methods, …).
    pub offer: SessionOffer,
    /// Per input ([`run`]; empty from [`run_each`], which hands each to its callback).
    pub outputs: Vec<ClientOutput>,
    /// The first input's report.
    pub first: Option<InferenceReport>,
    /// Inputs run.
    pub inputs: usize,
    /// Traffic per phase (offline and online summed over the inputs).
    pub traffic: PhaseCounters,
    /// Time per phase (likewise).
    pub times: PhaseTimes,
    /// The smallest noise budget (bits) left in a step's first response (the
    /// responses of a step are flooded alike; each step measures its first).
    pub noise_budget: Option<u32>,
}

impl ClientOutcome {
    /// The architecture the server announced (no weights).
    pub fn program(&self) -> &nn::Program {
        &self.offer.program
    }
}

/// Checks input `k` against the plan: its length, and for floats that every value is
/// finite and inside the offer's input range; for integers that every value is reduced.
fn check_input(prog: &nn::Program, p: u64, k: usize, x: Input<'_>) -> Result<()> {
    let n: usize = prog.input_shape.iter().product();
    let length = |actual: usize| ProtocolError::InputLength {
        layer: k,
        expected: n,
        actual,
    };
    match x {
        Input::Float(x) => match nn::check_input(prog, x) {
            Ok(()) => Ok(()),
            Err(nn::NnError::InputOutOfRange {
                index,
                value,
                lo,
                hi,
                count,
            }) => Err(ProtocolError::InputOutOfRange {
                input: k,
                index,
                value,
                lo,
                hi,
                count,
            }),
            Err(nn::NnError::NonFinite { index, value, .. }) => {
                Err(ProtocolError::NonFiniteInput {
                    input: k,
                    index,
                    value,
                })
            }
            Err(_) => Err(length(x.len())),
        },
        Input::Residues(x) => {
            if x.len() != n {
                return Err(length(x.len()));
            }
            match x.iter().enumerate().find(|(_, &v)| v >= p) {
                Some((index, &value)) => Err(ProtocolError::NotReduced {
                    input: k,
                    index,
                    value,
                    p,
                }),
                None => Ok(()),
            }
        }
    }
}

/// One input (checked): the client's share of the program's input, mod p.
fn share_of(prog: &nn::Program, p: u64, x: Input<'_>) -> Vec<u64> {
    match x {
        Input::Float(x) => nn::quantise_input(prog, x)
            .iter()
            .map(|&v| v.rem_euclid(p as i64) as u64)
            .collect(),
        Input::Residues(x) => x.to_vec(),
    }
}

/// Runs a session as the client (see the module doc) and keeps every output. Any
/// failure after the handshake began is told to the server with a coarse `Abort`.
pub fn run<C: Channel>(
    ch: &mut C,
    request: &ClientRequest,
    inputs: Inputs<'_>,
    progress: &mut dyn FnMut(Phase),
) -> Result<ClientOutcome> {
    let mut outputs = Vec::with_capacity(inputs.len());
    let mut out = run_each(ch, request, inputs, progress, &mut |_, _, o| {
        outputs.push(o)
    })?;
    out.outputs = outputs;
    Ok(out)
}

/// Runs a session as the client, handing each input's output to `on_output(plan, k,
/// output)` as soon as it is ready instead of keeping it (`ClientOutcome::outputs` is
/// left empty; `first` keeps the first input's report): a session of thousands of
/// inputs holds one input's data at a time. Every input is checked before anything is
/// encrypted. Any failure after the handshake began is told to the server with a
/// coarse `Abort`.
pub fn run_each<C: Channel>(
    ch: &mut C,
    request: &ClientRequest,
    inputs: Inputs<'_>,
    progress: &mut dyn FnMut(Phase),
    on_output: &mut dyn FnMut(&SessionOffer, usize, ClientOutput),
) -> Result<ClientOutcome> {
    let r = run_inner(ch, request, inputs, progress, on_output);
    if let Err(e) = &r {
        crate::server::abort(ch, e);
    }
    r
}

fn run_inner<C: Channel>(
    ch: &mut C,
    request: &ClientRequest,
    inputs: Inputs<'_>,
    progress: &mut dyn FnMut(Phase),
    on_output: &mut dyn FnMut(&SessionOffer, usize, ClientOutput),
) -> Result<ClientOutcome> {
    let t0 = Instant::now();
    let c0 = ch.counters();
    let count = u32::try_from(inputs.len())
        .ok()
        .filter(|&n| n <= MAX_INPUTS_PER_SESSION)
        .ok_or(ProtocolError::TooManyInputs {
            requested: inputs.len() as u64,
            max: MAX_INPUTS_PER_SESSION as u64,
        })?;
    progress(Phase::Handshake);
    send(
        ch,
        &Msg::Hello {
            version: PROTOCOL_VERSION,
            inputs: count,
            layers: request.layers.clone(),
            reveal: request.reveal,
        },
    )?;
    let offer = match recv_at_most(ch, OFFER_MAX_BYTES)? {
        Msg::Offer(offer) => *offer,
        m => return Err(unexpected("Offer", &m)),
    };
    let params = Params::from_spec(&offer.params)?;
    if params.hash() != offer.params_hash {
        return Err(ProtocolError::Params {
            ours: params.hash(),
            theirs: offer.params_hash.clone(),
        });
    }
    if let Some(want) = &request.expect {
        if want != &params {
            return Err(ProtocolError::Params {
                ours: want.hash(),
                theirs: offer.params_hash.clone(),
            });
        }
    }
    let prog = &offer.program;
    let inconsistent = if offer.methods.len() != prog.steps.len() {
        Some("a method slot per step")
    } else if prog.p != params.p() {
        Some("the program's p is the parameters'")
    } else if offer.inputs != count {
        Some("the inputs asked for")
    } else if !ids_in_range(prog) {
        Some("tensor ids within the program")
    } else if !valid_segments(&offer.segments, prog.steps.len()) {
        Some("offline segments within the steps, in order")
    } else {
        None
    };
    if let Some(what) = inconsistent {
        return Err(PlanError::Offer { what }.into());
    }
    // a layer server must serve the layer asked for, with the method asked for
    if let [r] = request.layers.as_slice() {
        let agrees = matches!(offer.methods.as_slice(), [Some(s)]
            if s.shape() == r.shape && r.method.is_none_or(|m| m == s.method()));
        if !agrees {
            return Err(PlanError::Offer {
                what: "the layer and method asked for",
            }
            .into());
        }
    }
    // the program's public weight bound and the plan's response bound size the
    // flooding, hence the layers' levels (both parties derive them from the plan)
    let params = params
        .with_weight_bound(prog.weight_bound_bits)
        .with_session_responses(offer.session_responses_log2);
    // every input is checked before anything is encrypted
    for k in 0..inputs.len() {
        check_input(prog, params.p(), k, inputs.get(k))?;
    }
    let layouts = prog
        .steps
        .iter()
        .zip(&offer.methods)
        .map(|(s, m)| match (layer_shape(s), m) {
            (Some(shape), Some(spec)) if spec.shape() == shape => {
                LayerLayout::new(spec, &params).map(Some)
            }
            (None, None) => Ok(None),
            _ => Err(PlanError::MethodCount {
                methods: offer.methods.iter().flatten().count(),
                steps: prog.steps.len(),
            }
            .into()),
        })
        .collect::<Result<Vec<_>>>()?;
    let limits = SessionLimits::new(&params, prog, &layouts, offer.nonlinear, false)?;
    ch.set_recv_limit(limits.largest_frame);
    debug!(methods = ?offer.methods, "offer accepted");
    progress(Phase::KeyGen);
    let b = Bfv::keygen(&params, limits.galois.clone())?;
    progress(Phase::Setup);
    send(ch, &Msg::Setup(b.public_keys().clone()))?;
    let mut nonlinear = NonlinearSession::setup(ch, offer.nonlinear, false, prog)?;
    let mut out = ClientOutcome {
        params: params.clone(),
        offer: offer.clone(),
        outputs: Vec::new(),
        first: None,
        inputs: 0,
        traffic: PhaseCounters {
            setup: ch.counters() - c0,
            ..Default::default()
        },
        times: PhaseTimes {
            setup_ms: t0.elapsed().as_secs_f64() * 1e3,
            ..Default::default()
        },
        noise_budget: None,
    };
    let p = params.p();
    for k in 0..inputs.len() {
        progress(Phase::Offline { input: k });
        let x = share_of(prog, p, inputs.get(k));
        let mut side = ClientSide::new(&b, &params, prog, &layouts, &mut nonlinear, &limits);
        let (share, mut report) = run_inference(
            &mut side,
            ch,
            prog,
            &offer.segments,
            x,
            &mut |step, steps| {
                progress(Phase::Step {
                    input: k,
                    step,
                    steps,
                })
            },
        )?;
        if let Some(n) = side.noise_budget {
            out.noise_budget = Some(out.noise_budget.map_or(n, |v| v.min(n)));
        }
        let truncation_shares = std::mem::take(&mut side.truncation_shares);
        let c = ch.counters();
        let t = Instant::now();
        let value = if offer.reveal {
            let theirs = match recv_at_most(ch, limits.share_max)? {
                Msg::Share(s) if s.len() == share.len() => s,
                m => return Err(unexpected("the server's share of the output", &m)),
            };
            Some(
                share
                    .iter()
                    .zip(&theirs)
                    .map(|(a, b)| {
                        let v = ((*a as u128 + *b as u128) % p as u128) as u64;
                        if v > p / 2 {
                            v as i64 - p as i64
                        } else {
                            v as i64
                        }
                    })
                    .collect(),
            )
        } else {
            None
        };
        report.online_ms += t.elapsed().as_secs_f64() * 1e3;
        report.traffic.online = report.traffic.online + (ch.counters() - c);
        out.traffic.offline = out.traffic.offline + report.traffic.offline;
        out.traffic.online = out.traffic.online + report.traffic.online;
        out.times.offline_ms += report.offline_ms;
        out.times.online_ms += report.online_ms;
        out.inputs += 1;
        if k == 0 {
            out.first = Some(report.clone());
        }
        on_output(
            &offer,
            k,
            ClientOutput {
                share,
                value,
                report,
                truncation_shares,
            },
        );
    }
    progress(Phase::Close);
    let c = ch.counters();
    send(ch, &Msg::Close)?;
    out.traffic.online = out.traffic.online + (ch.counters() - c);
    Ok(out)
}

/// A network session: float inputs, the parameter set from the server's offer (`expect`
/// asserts it), the output revealed to the client. `progress(step, steps)` is told as
/// each step starts.
pub fn infer<C: Channel>(
    ch: &mut C,
    expect: Option<&Params>,
    inputs: &[Vec<f32>],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ClientOutcome> {
    let request = ClientRequest {
        layers: Vec::new(),
        reveal: false,
        expect: expect.cloned(),
    };
    run(ch, &request, Inputs::Float(inputs), &mut |ph| {
        if let Phase::Step { step, steps, .. } = ph {
            progress(step, steps)
        }
    })
}

/// What a single layer's session gives the client.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerOutcome {
    /// The layer and the method the server ran.
    pub specs: Vec<LayerSpec>,
    /// The client's share of each input's output.
    pub shares: Vec<Vec<u64>>,
    /// With `reveal` (public demo weights only): the outputs (client + server share mod
    /// p).
    pub revealed: Option<Vec<Vec<u64>>>,
    /// Traffic per phase, as this side's socket counted it.
    pub traffic: PhaseCounters,
    /// Time per phase.
    pub times: PhaseTimes,
    /// The smallest noise budget (bits) left in a step's first response (the
    /// responses of a step are flooded alike; each step measures its first).
    pub noise_budget: Option<u32>,
}

/// One linear layer of a layer server, one or more inputs (integers mod p), as a
/// one-step program; `params` is asserted against the server's. With `reveal` (public
/// demo weights only) the outputs are reconstructed.
pub fn query<C: Channel>(
    ch: &mut C,
    params: &Params,
    layer: LayerRequest,
    inputs: &[Vec<u64>],
    reveal: bool,
    progress: &mut dyn FnMut(Phase),
) -> Result<LayerOutcome> {
    if let Some((k, x)) = inputs
        .iter()
        .enumerate()
        .find(|(_, x)| x.len() != layer.shape.input_len())
    {
        return Err(ProtocolError::InputLength {
            layer: k,
            expected: layer.shape.input_len(),
            actual: x.len(),
        });
    }
    let request = ClientRequest {
        layers: vec![layer],
        reveal,
        expect: Some(params.clone()),
    };
    let out = run(ch, &request, Inputs::Residues(inputs), progress)?;
    let p = params.p();
    Ok(LayerOutcome {
        specs: out.offer.methods.iter().flatten().cloned().collect(),
        revealed: if out.offer.reveal {
            Some(
                out.outputs
                    .iter()
                    .map(|o| {
                        o.value
                            .iter()
                            .flatten()
                            .map(|&v| v.rem_euclid(p as i64) as u64)
                            .collect()
                    })
                    .collect(),
            )
        } else {
            None
        },
        shares: out.outputs.into_iter().map(|o| o.share).collect(),
        traffic: out.traffic,
        times: out.times,
        noise_budget: out.noise_budget,
    })
}
