//! What one session may cost, fixed by its plan before the server reads anything the
//! client sends, and the same on both sides:
//!
//! - **frame caps**, one per protocol state: the `Hello` a few KB
//!   ([`HELLO_MAX_BYTES`]), the `Setup` exactly the keys the plan names (no more keys
//!   fit: [`he::Params::public_keys_wire_bound`]), each `Query` its step's ciphertexts
//!   (count checked from the frame's prefix before anything is decoded), each
//!   `Response` and the output's `Share` likewise for the client; the frames of the
//!   nonlinear protocols are read at their exact lengths by `ot` and `gc`. The
//!   channel's own limit is lowered to the largest of them once the plan is known, so
//!   nothing larger is ever read, and the largest is counted in the session's memory;
//! - **the response bound** ([`responses_log2`]): at most the plan's session inputs
//!   (`Planner::session_inputs`, by default [`crate::MAX_INPUTS_PER_SESSION`]) of the
//!   plan's responses each, which sizes the flooding of every response
//!   (`kernels::noise`);
//! - **the offline window** ([`offline_segments`]): consecutive steps whose offline
//!   material (flooding zeros, precomputed OTs or garbled tables) fits the window run
//!   their offline phase together, then online; so one input of a large network holds
//!   the material of one segment, not of the whole network;
//! - **the default deadline** ([`SessionLimits::deadline`]): a generous multiple of the
//!   predicted time of the session, for a client on a slow machine and a slow link.

use std::time::Duration;

use he::{GaloisSpec, Params};
use kernels::{CostModel, LinearLayer, SquareLayout};
use nn::{Program, Step};

use crate::engine::{nonlinear_spec, slots};
use crate::msg::{NonlinearProtocol, PlanError, Result};
use crate::plan::LayerLayout;

/// The largest `Hello` a server reads (a network session's is about 20 bytes, a layer
/// request's about 100).
pub const HELLO_MAX_BYTES: usize = 4096;
/// The largest offer a client reads (the program without weights: ResNet-50's is about
/// 100 KB).
pub const OFFER_MAX_BYTES: usize = 64 << 20;
/// Messages without a body (`Ready`, `Close`, `Abort`).
pub(crate) const SMALL_MAX_BYTES: usize = 64;
/// The largest frame of the nonlinear protocols: `ot` cuts its flights at 4 MiB, `gc`
/// sends at most 2^19 blocks per frame.
const NONLINEAR_FRAME_MAX: usize = (8 << 20) + 64;
/// The offline window when none is given: the material of the steps whose offline work
/// runs together before they run online.
pub const DEFAULT_OFFLINE_WINDOW: u64 = 256 << 20;

/// The slowest link a legitimate client is assumed to have for the default deadline.
const SLOW_LINK_BYTES_PER_S: f64 = 1e6;
/// How much slower than the prediction a legitimate client may compute.
const SLOW_MACHINE: f64 = 10.0;
/// Time every session may take on top (connection, key generation's fixed part).
const DEADLINE_BASE_S: f64 = 10.0;
/// Round trips a step may take, at a slow link's latency.
const PER_STEP_S: f64 = 0.5;
/// Silent OT, both parties, per COT (generation, hashing, the messages' work): a
/// generous reading of `ot`'s measured ~0.3 µs.
const OT_US_PER_COT: f64 = 1.0;
/// Bytes per COT of the nonlinear layers' messages (millionaire tables, openings, OT
/// tables; the silent batches themselves are 0.36 B).
const OT_BYTES_PER_COT: f64 = 2.0;
/// Garbled circuits: per AND gate, time (garbling + evaluation) and bytes (two labels).
const GC_US_PER_AND: f64 = 0.2;
const GC_BYTES_PER_AND: f64 = 32.0;
/// The silent-OT session's setup (base OT, IKNP, first batches): time and bytes.
const OT_SETUP_MS: f64 = 1000.0;
const OT_SETUP_BYTES: f64 = 500e3;
/// Key generation per Galois key, ms.
const KEYGEN_MS_PER_KEY: f64 = 10.0;

/// The wire of one HE step (a linear layer or a Square).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepWire {
    /// Query ciphertexts.
    pub query_cts: usize,
    /// The largest `Query` frame: that many seeded ciphertexts at the top level.
    pub query_max: usize,
    /// Response ciphertexts.
    pub response_cts: usize,
    /// The largest `Response` frame.
    pub response_max: usize,
}

/// The predicted cost of a session, for its default deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Predicted {
    /// Setup (keys, the OT session), ms of computation.
    pub setup_ms: f64,
    /// Setup bytes.
    pub setup_bytes: f64,
    /// One input, ms of computation (both parties, reference costs).
    pub input_ms: f64,
    /// One input's bytes.
    pub input_bytes: f64,
    /// Steps of one input that talk to the peer.
    pub interactive_steps: usize,
}

/// A session's limits (see the module doc).
#[derive(Clone, Debug)]
pub struct SessionLimits {
    /// Per step of the program: its HE wire, if it is an HE step.
    pub steps: Vec<Option<StepWire>>,
    /// The Galois keys the plan needs, exactly.
    pub galois: GaloisSpec,
    /// The largest `Setup` frame.
    pub setup_max: usize,
    /// The largest `Share` frame.
    pub share_max: usize,
    /// The largest frame of the session, in either direction.
    pub largest_frame: usize,
    /// Response ciphertexts per input.
    pub responses_per_input: u64,
    /// Per step: the offline material it holds until it runs online, bytes.
    pub offline_bytes: Vec<u64>,
    /// The prediction behind the default deadline.
    pub predicted: Predicted,
}

impl SessionLimits {
    /// The limits of `prog` with the linear steps' `layouts` (one per step, `None` for the
    /// others) on `params`, its nonlinear steps run by `nonlinear`. With `predict`, the
    /// prediction behind the default deadline too (the server's; it prices every
    /// linear step on the counting backend).
    pub fn new(
        params: &Params,
        prog: &Program,
        layouts: &[Option<LayerLayout>],
        nonlinear: NonlinearProtocol,
        predict: bool,
    ) -> Result<Self> {
        if layouts.len() != prog.steps.len() {
            return Err(PlanError::MethodCount {
                methods: layouts.len(),
                steps: prog.steps.len(),
            }
            .into());
        }
        let seeded = params.ct_wire_size(0, true);
        let full = params.ct_wire_size(0, false);
        let frame = |cts: usize, size: usize| 16 + cts * (8 + size);
        let model = CostModel::reference(params);
        let mut galois = GaloisSpec::none();
        let mut predicted = Predicted::default();
        let mut steps = Vec::with_capacity(layouts.len());
        let mut offline_bytes = Vec::with_capacity(layouts.len());
        let mut responses = 0u64;
        for (step, layout) in prog.steps.iter().zip(layouts) {
            let (wire, offline) = match (step, layout) {
                (_, Some(layout)) => {
                    galois = galois.union(&layout.galois());
                    if predict {
                        let e = layout.estimate(params, &model)?;
                        predicted.input_ms +=
                            e.server_ms + e.client_ms + e.encode_ms + e.held_products_ms;
                        predicted.input_bytes += (e.bytes_up + e.bytes_down) as f64;
                    }
                    let (q, r) = (layout.query_cts(), layout.output_cts());
                    let wire = StepWire {
                        query_cts: q,
                        query_max: frame(q, seeded),
                        response_cts: r,
                        response_max: frame(r, full),
                    };
                    (Some(wire), layout.session_bytes(params))
                }
                (Step::Square { input, .. }, None) => {
                    let sq = SquareLayout::new(prog.tensors[*input].len(), slots(params))?;
                    let (q, r) = (sq.query_cts(), sq.output_cts());
                    predicted.input_bytes += (q * seeded + r * full) as f64;
                    let wire = StepWire {
                        query_cts: q,
                        query_max: frame(q, seeded),
                        response_cts: r,
                        response_max: frame(r, full),
                    };
                    (Some(wire), ((3 * r + q) * full) as u64)
                }
                (step @ Step::Nonlinear { .. }, None) => {
                    let ot = nonlinear_spec(prog, step)?.ok_or(PlanError::Missing {
                        what: "nonlinear step",
                        index: steps.len(),
                    })?;
                    let spec = ot.spec;
                    let bytes = match nonlinear {
                        NonlinearProtocol::SilentOt => {
                            let (sc, cs) = ot.cots();
                            let cots = (sc + cs) as f64;
                            predicted.input_ms += cots * OT_US_PER_COT / 1e3;
                            predicted.input_bytes += cots * OT_BYTES_PER_COT;
                            ot.precompute_bytes()
                        }
                        NonlinearProtocol::GarbledCircuits(_) => {
                            let and = spec.and_gates() as f64;
                            predicted.input_ms += and * GC_US_PER_AND / 1e3;
                            predicted.input_bytes += and * GC_BYTES_PER_AND;
                            spec.and_gates() * 32 + spec.inputs() as u64 * spec.bits() as u64 * 48
                        }
                    };
                    predicted.interactive_steps += 1;
                    (None, bytes)
                }
                _ => (None, 0),
            };
            if let Some(w) = &wire {
                responses += w.response_cts as u64;
                predicted.interactive_steps += 1;
            }
            steps.push(wire);
            offline_bytes.push(offline);
        }
        let keys = params.public_keys_wire_bound(&galois);
        // the message's framing around the keys: its tag, the spec's steps and flag,
        // two byte strings' lengths
        let setup_max = keys + 64 + 8 * galois.steps().count();
        let share_max = 16 + 8 * prog.tensors.get(prog.output).map_or(0, |t| t.len());
        let nonlinear_frames = if crate::engine::has_nonlinear(prog) {
            NONLINEAR_FRAME_MAX
        } else {
            0
        };
        let largest_frame = steps
            .iter()
            .flatten()
            .map(|w| w.query_max.max(w.response_max))
            .chain([setup_max, share_max, nonlinear_frames, HELLO_MAX_BYTES])
            .max()
            .unwrap_or(HELLO_MAX_BYTES);
        predicted.setup_bytes = keys as f64;
        predicted.setup_ms = KEYGEN_MS_PER_KEY * galois.key_count(params.n() / 2) as f64;
        if nonlinear == NonlinearProtocol::SilentOt && crate::engine::has_nonlinear(prog) {
            predicted.setup_ms += OT_SETUP_MS;
            predicted.setup_bytes += OT_SETUP_BYTES;
        }
        Ok(Self {
            steps,
            galois,
            setup_max,
            share_max,
            largest_frame,
            responses_per_input: responses,
            offline_bytes,
            predicted,
        })
    }

    /// The default deadline of a session of `inputs` inputs: the predicted work
    /// `SLOW_MACHINE` times slower, every byte over a 1 MB/s link, and half a second
    /// of round trips per interactive step, plus 10 s.
    pub fn deadline(&self, inputs: u32) -> Duration {
        let p = &self.predicted;
        let link = |bytes: f64| bytes / SLOW_LINK_BYTES_PER_S;
        let setup = SLOW_MACHINE * p.setup_ms / 1e3 + link(p.setup_bytes);
        let input = SLOW_MACHINE * p.input_ms / 1e3
            + link(p.input_bytes)
            + PER_STEP_S * p.interactive_steps as f64;
        Duration::from_secs_f64(DEADLINE_BASE_S + setup + inputs as f64 * input)
    }

    /// The most offline material one segment holds ([`offline_segments`]), bytes.
    pub fn window_bytes(&self, segments: &[u32]) -> u64 {
        segment_ranges(segments, self.offline_bytes.len())
            .map(|r| self.offline_bytes[r].iter().sum::<u64>())
            .max()
            .unwrap_or(0)
    }
}

/// log2 of the most responses a session of at most `inputs` inputs may receive when each
/// takes `per_input`, rounded up to a power of two.
pub fn responses_log2(inputs: u32, per_input: u64) -> u32 {
    let total = (inputs.max(1) as u64).saturating_mul(per_input.max(1));
    64 - (total - 1).leading_zeros()
}

/// The offline segments of a program whose steps hold `offline_bytes` each until they
/// run: consecutive steps whose material fits `window` bytes together (a step larger
/// than the window alone). Returns where each segment after the first starts.
pub fn offline_segments(offline_bytes: &[u64], window: u64) -> Vec<u32> {
    let mut starts = Vec::new();
    let mut held = 0u64;
    for (i, &b) in offline_bytes.iter().enumerate() {
        if i > 0 && held > 0 && held.saturating_add(b) > window {
            starts.push(i as u32);
            held = 0;
        }
        held = held.saturating_add(b);
    }
    starts
}

/// The step ranges of the segments that start at `starts` (after the first, which
/// starts at 0), over `steps` steps.
pub(crate) fn segment_ranges(
    starts: &[u32],
    steps: usize,
) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let bounds = std::iter::once(0)
        .chain(starts.iter().map(|&s| s as usize))
        .chain(std::iter::once(steps));
    bounds.clone().zip(bounds.skip(1)).map(|(a, b)| a..b)
}

/// Whether `starts` are segment starts of a program of `steps` steps: strictly
/// increasing, inside `1..steps`.
pub(crate) fn valid_segments(starts: &[u32], steps: usize) -> bool {
    starts.windows(2).all(|w| w[0] < w[1]) && starts.iter().all(|&s| s >= 1 && (s as usize) < steps)
}
