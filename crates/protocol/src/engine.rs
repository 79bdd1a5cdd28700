//! The session engine: one inference of an [`nn::Program`] between the two parties,
//! every tensor held as additive shares mod p. The same loop runs on both sides; only
//! the steps that talk to the peer differ between them (`Side`):
//!
//! - Linear / Conv: the client encrypts its share x_C in the packing the layer's method
//!   wants (`ClientSide`); the server runs the kernel and `share_output` on it and adds,
//!   in cleartext, W·x_S + b to its own share (`ServerSide`). By linearity
//!   W·(x_C + x_S) = W·x_C + W·x_S: this is GAZELLE's HomRec without an HE operation or
//!   any extra noise (for ENSEI layers likewise, the transform is linear).
//! - Nonlinear (ReLU, MaxPool, rounding truncation), by the layout's
//!   [`NonlinearProtocol`]: millionaire comparisons on silent OT (`ot`, the default:
//!   the session's COT pool is set up once, each step's correlated randomness is
//!   precomputed offline), or GAZELLE's garbled circuits (`gc`: garbling and random OTs
//!   offline). Either way the work that does not depend on the input runs before
//!   `Ready`. The server adds the rounding offset `2^(f−1)` to its share first
//!   ([`nn::Step::Nonlinear`]); pooling windows are gathered from both shares in the
//!   order `nn` documents.
//! - Square: GAZELLE's interactive Square ([`kernels::SquareLayout`]).
//! - SumPool, Add (shares times public constants), Pad, SpaceToDepth: local, the same
//!   function on each party's share ([`local_step`]).
//!
//! A single linear layer is a one-step program; a network is a program of many steps.
//! Per inference, segment by segment (the layout's offline window,
//! [`crate::limits::offline_segments`]: one segment for every network whose offline
//! material fits it): offline (flooding zeros, OT precomputation or garbling for the
//! segment's steps) → `Ready` → the segment's steps online; a tensor is dropped as soon
//! as no later step reads it. The session around it (handshake, keys, the output's
//! share) is in `server.rs` and [`crate::client`].

use std::sync::Arc;
use std::time::Instant;

use gc::{Garbler, NonlinSpec, Nonlinear};
use he::{Bfv, OpCounts, Params};
use kernels::{FloodPool, LinearLayer, SquareLayout};
use net::{Channel, Counters};
use nn::{NonlinearOp, Program, Step};
use serde::Serialize;

use crate::limits::{SessionLimits, SMALL_MAX_BYTES};
use crate::msg::{
    recv_at_most, recv_cts, send, unexpected, CtMessage, Msg, NonlinearProtocol, PlanError,
    ProtocolError, Result,
};
use crate::plan::{answer, Encoded, LayerLayout, ServerBackend};

/// Byte counters per phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhaseCounters {
    /// Handshake and keys.
    pub setup: Counters,
    /// Input-independent work (ends with `Ready`).
    pub offline: Counters,
    /// Queries, responses and the output's share.
    pub online: Counters,
}

/// Cost of one step of one inference, from one party's point of view.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepReport {
    /// Step name (the ONNX node).
    pub layer: String,
    /// What kind of step.
    pub kind: String,
    /// Output shape.
    pub shape: Vec<usize>,
    /// Method (linear steps), `ot` or `gc` (nonlinear steps), `square` or `local`.
    pub method: String,
    /// This party's wall-clock time in the step, ms (online part).
    pub ms: f64,
    /// This party's offline time for the step (flooding zeros, garbling, OTs), ms,
    /// without `offline_wait_ms`.
    pub offline_ms: f64,
    /// Time this party's offline phase of the step waited for the peer to finish its
    /// earlier steps (the OT hello), ms: counted in the phase's time
    /// ([`InferenceReport::offline_ms`]), not in the step's.
    pub offline_wait_ms: f64,
    /// Time this party's online part of a linear or Square step waited for the peer's
    /// ciphertexts (the server for the query, the client for the response), ms: counted
    /// in `ms`. `ms − wait_ms` is this party's own work in the step.
    pub wait_ms: f64,
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
    /// AND gates of the garbled circuit (`gc`).
    pub and_gates: u64,
    /// Correlated OTs the step consumed, both directions (`ot`).
    pub cots: u64,
    /// Noise budget left in the step's first response, bits (client side; the
    /// responses of a step are flooded alike).
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

/// One linear step's weights on the server: encoded once (shared by every session), or
/// (beyond the memory budget) encoded when its query arrives and dropped after.
#[derive(Clone)]
pub(crate) enum LayerState {
    Held(Arc<Encoded>),
    OnTheFly(LayerLayout),
}

impl LayerState {
    pub(crate) fn layout(&self) -> LayerLayout {
        match self {
            LayerState::Held(e) => e.layout(),
            LayerState::OnTheFly(p) => p.clone(),
        }
    }
}

/// A session's machinery for its nonlinear steps: the garbler, or the silent-OT
/// session whose COT pools every step and input of the session draws from.
pub(crate) enum NonlinearSession {
    /// No nonlinear step in the program.
    None,
    /// Garbled circuits.
    Gc(Garbler),
    /// Silent OT.
    Ot(Box<ot::OtSession>),
}

impl NonlinearSession {
    /// Sets up what `protocol` needs for `prog`, after the keys: for silent OT the base
    /// OTs, IKNP and the first silent batches (one-time setup traffic); nothing when
    /// the program has no nonlinear step.
    pub(crate) fn setup<C: Channel>(
        ch: &mut C,
        protocol: NonlinearProtocol,
        server: bool,
        prog: &Program,
    ) -> Result<Self> {
        if !has_nonlinear(prog) {
            return Ok(NonlinearSession::None);
        }
        Ok(match protocol {
            NonlinearProtocol::GarbledCircuits(g) => NonlinearSession::Gc(g),
            NonlinearProtocol::SilentOt => NonlinearSession::Ot(Box::new(
                if server {
                    ot::OtSession::server(ch)
                } else {
                    ot::OtSession::client(ch)
                }
                .map_err(ot_err)?,
            )),
        })
    }
}

impl NonlinearSession {
    /// The offline material of one nonlinear step for this party (`gc_offline` /
    /// `ot_offline`: the party's offline call of either protocol, `ot_stats` its
    /// statistics); the protocol, its AND gates or COTs and the OT's wait for the peer go
    /// into the step's report.
    fn offline<C: Channel, G, O>(
        &mut self,
        ch: &mut C,
        spec: ot::OtSpec,
        r: &mut StepReport,
        gc_offline: impl FnOnce(&mut C, &gc::NonlinSpec, Garbler) -> gc::Result<G>,
        ot_offline: impl FnOnce(&mut ot::OtSession, &mut C, &ot::OtSpec) -> ot::Result<O>,
        ot_stats: impl FnOnce(&O) -> ot::LayerStats,
    ) -> Result<Pre<G, O>> {
        Ok(match self {
            NonlinearSession::Gc(g) => {
                if spec.trunc == ot::Truncation::Approximate {
                    return Err(PlanError::ApproximateWithoutOt.into());
                }
                let spec = spec.spec;
                r.method = "gc".into();
                r.and_gates = spec.and_gates();
                Pre::Gc(gc_offline(ch, &spec, *g).map_err(gc_err)?)
            }
            NonlinearSession::Ot(session) => {
                r.method = "ot".into();
                r.cots = cots(&spec);
                let pre = ot_offline(session, ch, &spec).map_err(ot_err)?;
                r.offline_wait_ms = ot_stats(&pre).hello_wait_ms;
                Pre::Ot(pre)
            }
            NonlinearSession::None => return Err(PlanError::NoNonlinearProtocol.into()),
        })
    }
}

/// Whether a program has a step that runs a nonlinear protocol.
pub(crate) fn has_nonlinear(prog: &Program) -> bool {
    prog.steps
        .iter()
        .any(|s| matches!(s, Step::Nonlinear { .. }))
}

/// A nonlinear step's offline material.
pub(crate) enum Pre<G, O> {
    Gc(G),
    Ot(O),
}

/// What differs between the parties; the loop ([`run_inference`]) is the same.
pub(crate) trait Side {
    /// Whether this is the server (it adds the rounding offsets).
    const SERVER: bool;
    /// The input-independent work of step `i` (before `Ready`).
    fn offline<C: Channel>(&mut self, ch: &mut C, i: usize, r: &mut StepReport) -> Result<()>;
    /// A Linear/Conv step on this party's share of its input.
    fn linear<C: Channel>(
        &mut self,
        ch: &mut C,
        i: usize,
        x: Vec<u64>,
        r: &mut StepReport,
    ) -> Result<Vec<u64>>;
    /// A Square step.
    fn square<C: Channel>(
        &mut self,
        ch: &mut C,
        i: usize,
        x: Vec<u64>,
        r: &mut StepReport,
    ) -> Result<Vec<u64>>;
    /// A nonlinear step on the gathered share.
    fn nonlinear<C: Channel>(&mut self, ch: &mut C, i: usize, x: Vec<u64>) -> Result<Vec<u64>>;
    /// HE operations since the last call (server).
    fn take_counts(&mut self) -> OpCounts {
        OpCounts::default()
    }
}

/// The tensor a step's kind names in reports.
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
        Step::Nonlinear {
            op: NonlinearOp::Clip { .. },
            ..
        } => "clip",
        Step::Square { .. } => "square",
        Step::SumPool { .. } => "sumpool",
        Step::Pad { .. } => "pad",
        Step::SpaceToDepth { .. } => "space-to-depth",
        Step::Reshape { .. } => "reshape",
        Step::Add { .. } => "add",
    }
}

/// Runs one inference on `ch`, segment by segment ([`crate::limits::offline_segments`]:
/// `starts` are where each segment after the first begins): the offline phase of the
/// segment's steps, `Ready` (the server sends it, the client waits for it), then the
/// segment's steps online. A program in one segment (every small network) does all its
/// offline work first; a large one holds the offline material of one segment at a
/// time. `input` is this party's share of the program's input (the client holds it
/// whole, the server zeros). `progress(step, steps)` is told as each online step starts.
/// Returns this party's share of the output and the report.
pub(crate) fn run_inference<S: Side, C: Channel>(
    side: &mut S,
    ch: &mut C,
    prog: &Program,
    starts: &[u32],
    input: Vec<u64>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<u64>, InferenceReport)> {
    let mut rep = InferenceReport {
        steps: vec![StepReport::default(); prog.steps.len()],
        ..Default::default()
    };
    if input.len() != prog.tensors[prog.input].len() {
        return Err(ProtocolError::InputLength {
            layer: 0,
            expected: prog.tensors[prog.input].len(),
            actual: input.len(),
        });
    }
    let mut shares: Vec<Option<Vec<u64>>> = vec![None; prog.tensors.len()];
    shares[prog.input] = Some(input);
    let get = |shares: &[Option<Vec<u64>>], id: usize| -> Result<Vec<u64>> {
        shares
            .get(id)
            .and_then(|s| s.clone())
            .ok_or(ProtocolError::Plan(PlanError::Missing {
                what: "share of tensor",
                index: id,
            }))
    };
    for segment in crate::limits::segment_ranges(starts, prog.steps.len()) {
        let c_off = ch.counters();
        let t_off = Instant::now();
        for i in segment.clone() {
            let step = &prog.steps[i];
            let t = Instant::now();
            let c = ch.counters();
            let mut r = StepReport {
                layer: step.name().to_string(),
                kind: kind(step).into(),
                shape: prog.tensors[step.output()].shape.clone(),
                method: "local".into(),
                ..Default::default()
            };
            side.offline(ch, i, &mut r)?;
            side.take_counts();
            let d = ch.counters() - c;
            r.offline_ms = (t.elapsed().as_secs_f64() * 1e3 - r.offline_wait_ms).max(0.0);
            r.bytes_sent = d.bytes_sent;
            r.bytes_received = d.bytes_received;
            rep.steps[i] = r;
        }
        if S::SERVER {
            send(ch, &Msg::Ready)?;
        } else {
            match recv_at_most(ch, SMALL_MAX_BYTES)? {
                Msg::Ready => {}
                m => return Err(unexpected("Ready", &m)),
            }
        }
        rep.offline_ms += t_off.elapsed().as_secs_f64() * 1e3;
        let c_on = ch.counters();
        rep.traffic.offline = rep.traffic.offline + (c_on - c_off);
        let t_on = Instant::now();
        for i in segment {
            let step = &prog.steps[i];
            progress(i, prog.steps.len());
            let t = Instant::now();
            let c = ch.counters();
            let mut r = std::mem::take(&mut rep.steps[i]);
            let y = run_step(side, ch, prog, i, step, &shares, &mut r, get)?;
            shares[step.output()] = Some(y);
            let d = ch.counters() - c;
            r.ms = t.elapsed().as_secs_f64() * 1e3;
            r.bytes_sent += d.bytes_sent;
            r.bytes_received += d.bytes_received;
            r.online_bytes = d.bytes_sent + d.bytes_received;
            r.rounds = d.flights;
            r.counts = side.take_counts();
            rep.steps[i] = r;
            // a tensor no later step reads is dropped now
            for t in step.inputs() {
                if !prog.steps[i + 1..].iter().any(|s| s.inputs().contains(&t)) && t != prog.output
                {
                    shares[t] = None;
                }
            }
        }
        rep.online_ms += t_on.elapsed().as_secs_f64() * 1e3;
        rep.traffic.online = rep.traffic.online + (ch.counters() - c_on);
    }
    let out = get(&shares, prog.output)?;
    Ok((out, rep))
}

/// One step online on this party's shares.
#[allow(clippy::too_many_arguments)]
fn run_step<S: Side, C: Channel>(
    side: &mut S,
    ch: &mut C,
    prog: &Program,
    i: usize,
    step: &Step,
    shares: &[Option<Vec<u64>>],
    r: &mut StepReport,
    get: impl Fn(&[Option<Vec<u64>>], usize) -> Result<Vec<u64>>,
) -> Result<Vec<u64>> {
    let p = prog.p;
    Ok(match step {
        Step::Linear { input, .. } | Step::Conv { input, .. } => {
            side.linear(ch, i, get(shares, *input)?, r)?
        }
        Step::Square { input, .. } => side.square(ch, i, get(shares, *input)?, r)?,
        Step::Nonlinear {
            input,
            op,
            trunc_bits,
            approximate,
            ..
        } => {
            let mut x = get(shares, *input)?;
            if S::SERVER {
                // rounding: the server's share carries the offset
                let h = nn::trunc_offset(*trunc_bits, *approximate) as u64 % p;
                x.iter_mut().for_each(|v| *v = (*v + h) % p);
            }
            match op {
                NonlinearOp::MaxPool { k, stride } | NonlinearOp::ReluMaxPool { k, stride } => {
                    let x = gather_windows(&prog.tensors[*input].shape, *k, *stride, &x)?;
                    side.nonlinear(ch, i, x)?
                }
                NonlinearOp::Clip { lo, hi } => {
                    // clamp(y, lo, hi) = relu(y − lo·2^f) − relu(y − hi·2^f) + lo,
                    // both ReLUs in one batch; the server shifts its shares
                    let n = x.len();
                    let shift = |b: i64| -> u64 {
                        let v = ((b as i128) << trunc_bits).rem_euclid(p as i128);
                        v as u64
                    };
                    let mut both = Vec::with_capacity(2 * n);
                    for b in std::iter::once(*lo).chain(*hi) {
                        let s = if S::SERVER { shift(b) } else { 0 };
                        both.extend(x.iter().map(|&v| (v + p - s) % p));
                    }
                    let y = side.nonlinear(ch, i, both)?;
                    let lo_out = if S::SERVER {
                        (*lo as i128).rem_euclid(p as i128) as u64
                    } else {
                        0
                    };
                    let (a, b) = y.split_at(n.min(y.len()));
                    (0..n)
                        .map(|j| {
                            let minus = b.get(j).copied().unwrap_or(0);
                            (a.get(j).copied().unwrap_or(0) + p - minus + lo_out) % p
                        })
                        .collect()
                }
                _ => side.nonlinear(ch, i, x)?,
            }
        }
        _ => {
            let inputs = step
                .inputs()
                .iter()
                .map(|&t| get(shares, t))
                .collect::<Result<Vec<_>>>()?;
            local_step(prog, step, &inputs)?
        }
    })
}

/// A step that needs no peer (SumPool, Add, Pad, SpaceToDepth) on one party's shares of
/// its inputs: the same linear map mod p on each share, so the results are shares of
/// the step's output. Shapes come from the program (the client checks the server's
/// program against the shares before it indexes with it).
pub fn local_step(prog: &Program, step: &Step, inputs: &[Vec<u64>]) -> Result<Vec<u64>> {
    let p = prog.p;
    let shape = |t: usize| &prog.tensors[t].shape;
    let missing = |index| PlanError::Missing {
        what: "input of a local step, number",
        index,
    };
    let x = inputs.first().ok_or(missing(0))?;
    match step {
        Step::SumPool {
            input,
            k_h,
            k_w,
            stride,
            ..
        } => sum_pool(shape(*input), *k_h, *k_w, *stride, x, p),
        Step::Pad {
            input, pads, mode, ..
        } => pad_share(shape(*input), *pads, *mode, x),
        Step::SpaceToDepth {
            input,
            stride,
            phases,
            out_h,
            out_w,
            ..
        } => space_to_depth_share(shape(*input), *stride, *phases, *out_h, *out_w, x),
        Step::Reshape { output, .. } => {
            if x.len() != prog.tensors[*output].len() {
                return Err(ProtocolError::Malformed {
                    detail: format!(
                        "reshaping a share of {} values to {:?}",
                        x.len(),
                        prog.tensors[*output].shape
                    ),
                });
            }
            Ok(x.clone())
        }
        Step::Add { mul_a, mul_b, .. } => {
            let y = inputs.get(1).ok_or(missing(1))?;
            if x.len() != y.len() {
                return Err(PlanError::Length {
                    what: "adding shares",
                    left: x.len(),
                    right: y.len(),
                }
                .into());
            }
            Ok(mul_add(x, *mul_a, y, *mul_b, p))
        }
        _ => Err(PlanError::NotLocal {
            step: step.name().to_string(),
        }
        .into()),
    }
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
    let t = prog.tensors.get(input).ok_or(PlanError::Missing {
        what: "tensor",
        index: input,
    })?;
    let (op, count) = match op {
        NonlinearOp::Relu => (Nonlinear::Relu, t.len()),
        NonlinearOp::Clip { hi, .. } => (Nonlinear::Relu, t.len() * (1 + hi.is_some() as usize)),
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

/// COTs a silent-OT step consumes, both directions.
fn cots(spec: &ot::OtSpec) -> u64 {
    let (sc, cs) = spec.cots();
    (sc + cs) as u64
}

/// The nonlinear protocol's description of a step (`None` for other steps): the
/// layer and its truncation, approximate only on a ReLU or Identity step
/// ([`nn::NonlinearOp::truncates_input`]).
pub fn nonlinear_spec(prog: &Program, step: &Step) -> Result<Option<ot::OtSpec>> {
    match step {
        Step::Nonlinear {
            input,
            op,
            trunc_bits,
            approximate,
            coarse_drelu_bits,
            ..
        } => {
            let spec = gc_spec(prog, *input, *op, *trunc_bits)?;
            // overlapping windows (stride below the side) share rows: their max runs
            // separably, each used row's pieces once
            let pooling = match op {
                NonlinearOp::MaxPool { k, stride } | NonlinearOp::ReluMaxPool { k, stride }
                    if *k >= 2 && *stride < *k =>
                {
                    let t = prog.tensors.get(*input).ok_or(PlanError::Missing {
                        what: "tensor",
                        index: *input,
                    })?;
                    let (_, h, w) = chw(&t.shape)?;
                    Some(ot::Pooling {
                        k: *k,
                        stride: *stride,
                        out_h: (h - k) / stride + 1,
                        out_w: (w - k) / stride + 1,
                    })
                }
                _ => None,
            };
            // a program's values, twice a MaxPool's input and a truncation's input plus
            // its offset and 2^f included, are within (−p/2, p/2) (`nn::step_max`): its
            // max tree needs no signs, and its truncating steps' DReLU compares the
            // high bits only
            let bounded = |s: ot::OtSpec| {
                let s = if op.is_max_pool() {
                    s.high_bits().within_quarter()
                } else {
                    s.high_bits()
                };
                match pooling {
                    Some(g) => s.pooled(g),
                    None => s,
                }
            };
            if !approximate {
                if *coarse_drelu_bits > 0 {
                    return Err(ProtocolError::Malformed {
                        detail: format!(
                            "step {} ({op}): a coarse DReLU only with approximate truncation",
                            step.name()
                        ),
                    });
                }
                return Ok(Some(bounded(ot::OtSpec::faithful(spec))));
            }
            if !op.truncates_input() {
                return Err(ProtocolError::Malformed {
                    detail: format!(
                        "step {} ({op}): approximate truncation only on ReLU and Identity steps",
                        step.name()
                    ),
                });
            }
            let spec = bounded(ot::OtSpec::approximate(spec)).coarse(*coarse_drelu_bits);
            // the peer's program reaches here: its coarse DReLU is checked like the rest
            spec.validate().map_err(|e| ProtocolError::Malformed {
                detail: format!("step {}: {e}", step.name()),
            })?;
            Ok(Some(spec))
        }
        _ => Ok(None),
    }
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
/// otherwise), after checking the shape the peer's layout gave against the share.
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
/// shape the peer's layout gave against the share and bounding the output.
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
pub fn layer_shape(step: &Step) -> Option<crate::msg::LayerShape> {
    match step {
        Step::Linear { rows, cols, .. } => Some(crate::msg::LayerShape::Matvec {
            rows: *rows,
            cols: *cols,
        }),
        Step::Conv {
            shape, groups: 1, ..
        } => Some(crate::msg::LayerShape::Conv(*shape)),
        Step::Conv { shape, groups, .. } => Some(crate::msg::LayerShape::Grouped(
            nn::quant::grouped_shape(shape, *groups),
        )),
        _ => None,
    }
}

/// Whether every tensor a step (or the program) names exists: the client checks the
/// server's layout before indexing with it.
pub(crate) fn ids_in_range(prog: &Program) -> bool {
    let n = prog.tensors.len();
    prog.input < n
        && prog.output < n
        && prog
            .steps
            .iter()
            .all(|s| s.output() < n && s.inputs().iter().all(|&t| t < n))
}

/// W·x + b in cleartext mod p for the server's own share (x in [0, p)), by
/// [`kernels::clear`]. A zero share (the network input, which the client holds whole)
/// costs no product: W·0 + b = b.
fn clear_linear(step: &Step, x: &[u64], p: u64) -> Result<Vec<u64>> {
    let zero = x.iter().all(|&v| v == 0);
    let bias_only = |bias: &[i64], outputs: usize, per: usize| -> Vec<u64> {
        (0..outputs * per)
            .map(|i| bias.get(i / per).copied().unwrap_or(0).rem_euclid(p as i64) as u64)
            .collect()
    };
    match step {
        Step::Linear {
            rows,
            cols,
            weight,
            bias,
            ..
        } => Ok(if zero {
            bias_only(bias, *rows, 1)
        } else if let Some(y) = nn::gemm::linear_mod_p(weight, x, bias, *rows, *cols, p) {
            y
        } else {
            kernels::clear::matvec_mod_p(weight, x, bias, *rows, *cols, p)?
        }),
        Step::Conv {
            shape,
            weight,
            bias,
            groups,
            ..
        } => {
            let (oh, ow, _, _) = kernels::reference::conv_output(shape);
            Ok(if zero {
                bias_only(bias, shape.c_o, oh * ow)
            } else if let Some(y) = nn::gemm::conv_mod_p(shape, *groups, x, weight, bias, p) {
                // exactly the integer loops' values, through the f64 GEMM on all threads
                y
            } else {
                let g = nn::quant::grouped_shape(shape, *groups);
                kernels::clear::conv_mod_p(&g, x, weight, bias, p)?
            })
        }
        _ => Err(PlanError::NotLinear {
            step: step.name().to_string(),
        }
        .into()),
    }
}

fn add_mod(a: &[u64], b: &[u64], p: u64) -> Result<Vec<u64>> {
    if a.len() != b.len() {
        return Err(PlanError::Length {
            what: "adding shares",
            left: a.len(),
            right: b.len(),
        }
        .into());
    }
    Ok(a.iter().zip(b).map(|(x, y)| (x + y) % p).collect())
}

pub(crate) fn ot_err(e: ot::OtError) -> ProtocolError {
    match e {
        ot::OtError::Net(n) => ProtocolError::Net(n),
        e => ProtocolError::Ot(e),
    }
}

pub(crate) fn gc_err(e: gc::GcError) -> ProtocolError {
    match e {
        gc::GcError::Net(n) => ProtocolError::Net(n),
        e => ProtocolError::Gc(e),
    }
}

pub(crate) fn slots(params: &Params) -> he::SlotInfo {
    he::SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: he::Layout::TwoRows,
    }
}

fn fill<L: LinearLayer>(
    layout: &L,
    b: &ServerBackend,
    params: &Params,
) -> Result<FloodPool<ServerBackend>> {
    let mut pool = layout.flood_pool(params)?;
    pool.fill(b, layout.output_cts())?;
    Ok(pool)
}

// ---------------------------------------------------------------------------------------
// the server's side

/// The server in one inference: its backend (the client's public keys only), the
/// program with its weights and each linear step's encoding, and the offline material.
pub(crate) struct ServerSide<'a> {
    pub(crate) b: &'a ServerBackend,
    pub(crate) params: &'a Params,
    pub(crate) prog: &'a Program,
    pub(crate) layers: &'a [Option<LayerState>],
    pub(crate) nonlinear: &'a mut NonlinearSession,
    pub(crate) pools: Vec<Option<FloodPool<ServerBackend>>>,
    pub(crate) pres: Vec<Option<Pre<gc::ServerPre, ot::ServerPre>>>,
    pub(crate) limits: &'a SessionLimits,
    pub(crate) responses: usize,
}

impl<'a> ServerSide<'a> {
    pub(crate) fn new(
        b: &'a ServerBackend,
        params: &'a Params,
        prog: &'a Program,
        layers: &'a [Option<LayerState>],
        nonlinear: &'a mut NonlinearSession,
        limits: &'a SessionLimits,
    ) -> Self {
        let n = prog.steps.len();
        Self {
            b,
            params,
            prog,
            layers,
            nonlinear,
            pools: (0..n).map(|_| None).collect(),
            pres: (0..n).map(|_| None).collect(),
            limits,
            responses: 0,
        }
    }

    /// The query of step `i`: its ciphertext count and frame size checked against the
    /// layout before anything is decoded, the server's wait for it recorded in
    /// `r.wait_ms`.
    fn query_cts<C: Channel>(
        &self,
        ch: &mut C,
        i: usize,
        r: &mut StepReport,
    ) -> Result<Vec<Vec<u8>>> {
        let t = Instant::now();
        let wire = self
            .limits
            .steps
            .get(i)
            .copied()
            .flatten()
            .ok_or(PlanError::Missing {
                what: "wire sizes of step",
                index: i,
            })?;
        let cts = recv_cts(ch, CtMessage::Query, i, wire.query_cts, wire.query_max)?;
        r.wait_ms = t.elapsed().as_secs_f64() * 1e3;
        Ok(cts)
    }

    fn respond<C: Channel>(&mut self, ch: &mut C, i: usize, cts: Vec<Vec<u8>>) -> Result<()> {
        self.responses += cts.len();
        send(
            ch,
            &Msg::Response {
                step: i as u32,
                cts,
            },
        )
    }
}

impl Side for ServerSide<'_> {
    const SERVER: bool = true;

    fn offline<C: Channel>(&mut self, ch: &mut C, i: usize, r: &mut StepReport) -> Result<()> {
        let step = &self.prog.steps[i];
        match (step, self.layers.get(i).and_then(|l| l.as_ref())) {
            (_, Some(state)) => {
                let layout = state.layout();
                r.method = layout.method_name();
                r.on_the_fly = matches!(state, LayerState::OnTheFly(_));
                self.pools[i] = Some(layout.flood_pool(self.b, self.params)?);
            }
            (Step::Square { input, .. }, _) => {
                r.method = "square".into();
                let sq = SquareLayout::new(self.prog.tensors[*input].len(), slots(self.params))?;
                self.pools[i] = Some(fill(&sq, self.b, self.params)?);
            }
            _ => {
                if let Some(spec) = nonlinear_spec(self.prog, step)? {
                    self.pres[i] = Some(self.nonlinear.offline(
                        ch,
                        spec,
                        r,
                        gc::server_offline,
                        ot::OtSession::server_offline,
                        ot::ServerPre::stats,
                    )?);
                }
            }
        }
        Ok(())
    }

    fn linear<C: Channel>(
        &mut self,
        ch: &mut C,
        i: usize,
        x: Vec<u64>,
        r: &mut StepReport,
    ) -> Result<Vec<u64>> {
        let step = &self.prog.steps[i];
        // The server's own part W·x_S + b first: it needs no query, so it runs while the
        // client encrypts and sends (in two processes it is then off the critical path).
        let p = self.prog.p;
        let clear = clear_linear(step, &x, p)?;
        drop(x);
        let cts = self.query_cts(ch, i, r)?;
        let pool = self.pools[i].as_mut().ok_or(PlanError::Missing {
            what: "offline pool of step",
            index: i,
        })?;
        let (resp, mine) = match self.layers.get(i).and_then(|l| l.as_ref()) {
            Some(LayerState::Held(e)) => e.answer(self.b, pool, &cts)?,
            Some(LayerState::OnTheFly(layout)) => {
                let w = match step {
                    Step::Linear { weight, .. } | Step::Conv { weight, .. } => weight,
                    _ => {
                        return Err(PlanError::NotLinear {
                            step: step.name().to_string(),
                        }
                        .into())
                    }
                };
                layout.answer_on_the_fly(self.b, w, pool, &cts)?
            }
            None => {
                return Err(PlanError::Missing {
                    what: "encoded layer of step",
                    index: i,
                }
                .into())
            }
        };
        self.respond(ch, i, resp)?;
        add_mod(&mine, &clear, p)
    }

    fn square<C: Channel>(
        &mut self,
        ch: &mut C,
        i: usize,
        x: Vec<u64>,
        r: &mut StepReport,
    ) -> Result<Vec<u64>> {
        let sq = SquareLayout::new(x.len(), slots(self.params))?;
        let cts = self.query_cts(ch, i, r)?;
        let w: Vec<i64> = x.iter().map(|&v| v as i64).collect();
        let m = sq.encode_weights(self.b, &w)?;
        let pool = self.pools[i].as_mut().ok_or(PlanError::Missing {
            what: "offline pool of step",
            index: i,
        })?;
        let (resp, cross) = answer(&sq, self.b, &m, pool, &cts)?;
        self.respond(ch, i, resp)?;
        Ok(sq.server_output(&x, &cross)?)
    }

    fn nonlinear<C: Channel>(&mut self, ch: &mut C, i: usize, x: Vec<u64>) -> Result<Vec<u64>> {
        match self.pres[i].take().ok_or(PlanError::Missing {
            what: "offline material of step",
            index: i,
        })? {
            Pre::Gc(pre) => gc::server_online(ch, pre, &x).map_err(gc_err),
            Pre::Ot(pre) => ot::server_online(ch, pre, &x).map_err(ot_err),
        }
    }

    fn take_counts(&mut self) -> OpCounts {
        self.b.take()
    }
}

// ---------------------------------------------------------------------------------------
// the client's side

/// The client in one inference: its keys, each linear step's layout, the offline
/// material, and the smallest noise budget seen in a step's first response.
pub(crate) struct ClientSide<'a> {
    pub(crate) b: &'a Bfv,
    pub(crate) params: &'a Params,
    pub(crate) prog: &'a Program,
    pub(crate) layouts: &'a [Option<LayerLayout>],
    pub(crate) nonlinear: &'a mut NonlinearSession,
    pub(crate) pres: Vec<Option<Pre<gc::ClientPre, ot::ClientPre>>>,
    pub(crate) limits: &'a SessionLimits,
    pub(crate) noise_budget: Option<u32>,
    /// This party's shares of the approximately truncated steps' inputs, in order.
    pub(crate) truncation_shares: Vec<Vec<u64>>,
}

impl<'a> ClientSide<'a> {
    pub(crate) fn new(
        b: &'a Bfv,
        params: &'a Params,
        prog: &'a Program,
        layouts: &'a [Option<LayerLayout>],
        nonlinear: &'a mut NonlinearSession,
        limits: &'a SessionLimits,
    ) -> Self {
        Self {
            b,
            params,
            prog,
            layouts,
            nonlinear,
            pres: (0..prog.steps.len()).map(|_| None).collect(),
            limits,
            noise_budget: None,
            truncation_shares: Vec::new(),
        }
    }

    /// The query → response round of a linear kernel: encrypt the share in the
    /// kernel's packing, send it, receive the response, decrypt (and finish).
    fn ask<L: LinearLayer, C: Channel>(
        &mut self,
        ch: &mut C,
        layout: &L,
        i: usize,
        x: &[u64],
        r: &mut StepReport,
    ) -> Result<Vec<u64>> {
        let b = self.b;
        let cts = layout.query_wire(b, x)?;
        send(
            ch,
            &Msg::Query {
                step: i as u32,
                cts,
            },
        )?;
        let max = self
            .limits
            .steps
            .get(i)
            .copied()
            .flatten()
            .ok_or(PlanError::Missing {
                what: "wire sizes of step",
                index: i,
            })?
            .response_max;
        let t = Instant::now();
        let cts = recv_cts(ch, CtMessage::Response, i, layout.output_cts(), max)?;
        r.wait_ms = t.elapsed().as_secs_f64() * 1e3;
        // Each response ciphertext deserialised and decrypted in one pass. The noise
        // budget left, a diagnostic, is measured on the first response only: the
        // measurement costs ten times a decryption (1.3 against 0.13 ms at n = 8192 and
        // the last level), and on every response it held up a slot-packed ResNet-50
        // layer's client by 0.1-0.2 s.
        let (out, budget) = layout.decrypt_wire(b, &cts)?;
        if let Some(bits) = budget {
            r.noise_budget = Some(r.noise_budget.map_or(bits, |v| v.min(bits)));
            self.noise_budget = Some(self.noise_budget.map_or(bits, |v| v.min(bits)));
        }
        Ok(out)
    }
}

impl Side for ClientSide<'_> {
    const SERVER: bool = false;

    fn offline<C: Channel>(&mut self, ch: &mut C, i: usize, r: &mut StepReport) -> Result<()> {
        let step = &self.prog.steps[i];
        if let Some(layout) = self.layouts.get(i).and_then(|p| p.as_ref()) {
            r.method = layout.method_name();
        } else if matches!(step, Step::Square { .. }) {
            r.method = "square".into();
        } else if let Some(spec) = nonlinear_spec(self.prog, step)? {
            self.pres[i] = Some(self.nonlinear.offline(
                ch,
                spec,
                r,
                gc::client_offline,
                ot::OtSession::client_offline,
                ot::ClientPre::stats,
            )?);
        }
        Ok(())
    }

    fn linear<C: Channel>(
        &mut self,
        ch: &mut C,
        i: usize,
        x: Vec<u64>,
        r: &mut StepReport,
    ) -> Result<Vec<u64>> {
        let layouts = self.layouts;
        match layouts.get(i).and_then(|p| p.as_ref()) {
            Some(layout) => crate::plan::with_layout!(layout, pl => self.ask(ch, pl, i, &x, r)),
            None => Err(PlanError::Missing {
                what: "layer layout of step",
                index: i,
            }
            .into()),
        }
    }

    fn square<C: Channel>(
        &mut self,
        ch: &mut C,
        i: usize,
        x: Vec<u64>,
        r: &mut StepReport,
    ) -> Result<Vec<u64>> {
        let sq = SquareLayout::new(x.len(), slots(self.params))?;
        let c = self.ask(ch, &sq, i, &x, r)?;
        Ok(sq.client_output(&x, &c)?)
    }

    fn nonlinear<C: Channel>(&mut self, ch: &mut C, i: usize, x: Vec<u64>) -> Result<Vec<u64>> {
        if let Some(Step::Nonlinear {
            approximate: true,
            trunc_bits: 1..,
            ..
        }) = self.prog.steps.get(i)
        {
            self.truncation_shares.push(x.clone());
        }
        match self.pres[i].take().ok_or(PlanError::Missing {
            what: "offline material of step",
            index: i,
        })? {
            Pre::Gc(pre) => gc::client_online(ch, pre, &x).map_err(gc_err),
            Pre::Ot(pre) => ot::client_online(ch, pre, &x).map_err(ot_err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OT and garbled-circuit failures stay typed through the engine (a transport
    /// failure inside them is the session's `Net` error), and count as malformed traffic
    /// in the metrics.
    #[test]
    fn nonlinear_errors_keep_their_type() {
        let length = ot::OtError::Length {
            what: "millionaire leaf OT",
            expected: 64,
            actual: 3,
        };
        assert_eq!(ot_err(length.clone()), ProtocolError::Ot(length));
        assert_eq!(
            ot_err(ot::OtError::Net(net::NetError::Disconnected)),
            ProtocolError::Net(net::NetError::Disconnected)
        );
        let tag = gc::GcError::Internal("label");
        assert_eq!(gc_err(tag.clone()), ProtocolError::Gc(tag.clone()));
        assert_eq!(
            crate::metrics::outcome_label(Some(&ProtocolError::Gc(tag))),
            "malformed"
        );
    }
}
