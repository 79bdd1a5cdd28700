//! Choosing the fixed point by agreement with the float model, and the input range a
//! program is safe for.
//!
//! [`choose_fixed_point`] lowers the network at every candidate number of fractional
//! bits `s` it needs to look at, runs the fixed-point reference and the float model
//! ([`crate::run_float`]) on the calibration inputs and measures how far the
//! dequantised outputs are from the float ones (max and mean `|Δ|` over every output
//! of every calibration input). It then takes the **cheapest** plaintext modulus `p`
//! (the smallest: garbled circuits and OT grow with `log p`, the HE ciphertexts do not)
//! for which some `s` both
//! * fits: every value the two parties reconstruct stays below `(p−1)/2 / 2^`
//!   [`HEADROOM_BITS`] on the calibration inputs, and
//! * agrees: the calibration error is at most `tolerance / `[`TOLERANCE_SAFETY`] (so
//!   that unseen inputs keep within the tolerance),
//!
//! and with that `p` the `s` with the smallest error (the largest that fits; with
//! approximate truncation, the program checked first is the approximate one, below). Each
//! lowering is screened on the first [`SCREEN_INPUTS`] calibration inputs and run on
//! all of them only when the screening cannot rule it out: each input's run is
//! independent of the others, so values and errors on the screening inputs are at most
//! those on the whole set, and a lowering that does not fit or agree on them cannot on
//! the whole set (a quarter of the work for the lowerings the search passes by). A network
//! that no candidate serves is an error before any encryption: [`NnError::Overflow`]
//! when nothing fits, else [`NnError::Precision`] naming the layer whose output loses
//! the most relative precision.
//!
//! **Approximate truncation** ([`FixedPointOptions::approximate_truncation`]): with
//! the fixed point chosen, the ReLU and Identity steps that truncate are switched to
//! Cheetah's approximate truncation (one below the floor or not, by the server's
//! share; about a third fewer COTs and bytes per element) — all of them if the
//! calibration error, with the server's shares modelled, stays within the same
//! `tolerance / TOLERANCE_SAFETY` and every value still fits `p`, else the longest
//! prefix in program order that does. The program's accuracy is then that of the
//! approximate program.
//!
//! **Coarse DReLU** ([`FixedPointOptions::max_coarse_drelu_bits`]): then the approximate
//! steps' DReLU leaves out `c` more bits (`ot::OtSpec::coarse_drelu_bits`: `c` fewer COTs
//! per element and an AND group fewer per 3 bits; a ReLU's result may become 0 for
//! inputs below `2^(f + c)`), the same `c` on every approximate step: the largest `c`
//! up to the maximum whose calibration error, the server's shares modelled, stays
//! within the same bound and whose values (with the margin of `2^(f + c)` the coarse
//! DReLU needs) still fit `p`. The common outcome of the two, every step approximate
//! with the largest `c`, is tried first, in one evaluation, and before the exact
//! lowering is run on every input: at the first `s` whose screening fits and agrees
//! (the first the search would evaluate on every input), the program with every step
//! approximate and the largest `c` is evaluated on every calibration input, and where
//! it fits and agrees it is the plan, without the exact lowering's evaluation
//! (ResNet-50: `inspect` planned in 31 s instead of 46 s on 2 cores; one evaluation of
//! the 32 inputs takes 12-15 s). The program that runs is the one the criterion is
//! checked on, so the plan meets it either way; only where it fails does the search go
//! on as above (the exact lowering on every input, then the steps, then the bits, one
//! by one).
//!
//! **Input range.** The program carries the range of input values it is safe for
//! ([`InputRange`]): the calibration inputs' `[min, max]` widened by
//! [`RANGE_WIDENING`] around its centre (or the range the caller gives). Worst-case
//! interval arithmetic through every step ([`worst_case_bounds`]) decides its basis:
//! if no input in the range can push any value out of `(−p/2, p/2)`, the range is
//! [`RangeBasis::WorstCase`] (a guarantee); otherwise [`RangeBasis::Calibration`]
//! (values on the calibration inputs keep [`HEADROOM_BITS`] bits of headroom; inputs in
//! the range are assumed to behave like them). The client refuses an input outside the
//! range, or with a NaN or infinity, before anything is encrypted ([`check_input`]).

use serde::{Deserialize, Serialize};

use crate::error::NnError;
use crate::ir::{Network, PadMode};
use crate::quant::{bits, calibrate_outputs, lower, step_max, NonlinearOp, Program, Step};
use crate::reference::{
    dequantise_tensor, execute, pad_indices, quantise_input, run_float_all, space_to_depth_indices,
    trunc_offset, window_indices, ServerShares,
};

/// Default tolerance: max `|Δ|` between fixed-point and float outputs (logits).
pub const DEFAULT_TOLERANCE: f64 = 0.05;
/// The calibration error must be at most the tolerance divided by this.
pub const TOLERANCE_SAFETY: f64 = 2.0;
/// Values on the calibration inputs stay this many bits below `(p−1)/2`.
pub const HEADROOM_BITS: u32 = 2;
/// The input range is the calibration range widened by this factor around its centre.
pub const RANGE_WIDENING: f32 = 1.5;

/// What an [`InputRange`] rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RangeBasis {
    /// Worst-case interval bounds: no input in the range can make a value leave
    /// `(−p/2, p/2)`.
    WorstCase,
    /// Calibration maxima: on the calibration inputs every value keeps `headroom_bits`
    /// bits below `(p−1)/2`; inputs in the range are assumed to behave alike.
    Calibration {
        /// Headroom kept, bits.
        headroom_bits: u32,
    },
}

/// The input values a program is safe for (every element in `[lo, hi]`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputRange {
    /// Smallest allowed value.
    pub lo: f32,
    /// Largest allowed value.
    pub hi: f32,
    /// Guarantee or calibration.
    pub basis: RangeBasis,
}

/// Agreement of the fixed-point program with the float model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    /// Largest `|fixed − float|` over all outputs of all inputs.
    pub max_abs_err: f64,
    /// Mean `|fixed − float|`.
    pub mean_abs_err: f64,
    /// The tolerance the plan was chosen for.
    pub tolerance: f64,
    /// Number of (calibration) inputs measured.
    pub inputs: usize,
}

/// How [`choose_fixed_point`] chooses.
#[derive(Clone, Debug, PartialEq)]
pub struct FixedPointOptions {
    /// Candidate plaintext moduli with their parameter preset names.
    pub candidates: Vec<(u64, String)>,
    /// Smallest number of fractional bits tried.
    pub min_frac_bits: u32,
    /// Largest number of fractional bits tried.
    pub max_frac_bits: u32,
    /// Max `|Δ|` between fixed-point and float outputs.
    pub tolerance: f64,
    /// The input range, instead of the calibration range widened.
    pub input_range: Option<(f32, f32)>,
    /// Use approximate truncation (Cheetah's, about a third fewer COTs and bytes per
    /// ReLU) on the ReLU and Identity steps where the calibration error stays within
    /// the same bound (see the module doc).
    pub approximate_truncation: bool,
    /// With `approximate_truncation`: the most bits the approximate steps' DReLU may
    /// leave out beyond the truncated ones (the coarse DReLU, see the module doc; 0:
    /// none).
    pub max_coarse_drelu_bits: u32,
}

/// Default [`FixedPointOptions::max_coarse_drelu_bits`]. ResNet-50 (seeded weights, 32
/// calibration inputs): calibration error 0.0082 without, 0.011 with 3 bits (32 COTs
/// per ReLU instead of 37) and 0.023 with 4, a held-out input's 0.0075, 0.0092 and
/// 0.031 against the tolerance 0.05: 3 keeps a margin.
pub const DEFAULT_MAX_COARSE_DRELU_BITS: u32 = 3;

impl Default for FixedPointOptions {
    fn default() -> Self {
        Self {
            candidates: crate::CANDIDATE_MODULI
                .iter()
                .map(|&(p, n)| (p, n.to_string()))
                .collect(),
            min_frac_bits: crate::DEFAULT_MIN_FRAC_BITS,
            max_frac_bits: crate::DEFAULT_MAX_FRAC_BITS,
            tolerance: DEFAULT_TOLERANCE,
            input_range: None,
            approximate_truncation: false,
            max_coarse_drelu_bits: DEFAULT_MAX_COARSE_DRELU_BITS,
        }
    }
}

impl FixedPointOptions {
    /// The defaults with these candidates and fractional-bit range.
    pub fn with(candidates: &[(u64, &str)], min_frac_bits: u32, max_frac_bits: u32) -> Self {
        Self {
            candidates: candidates
                .iter()
                .map(|&(p, n)| (p, n.to_string()))
                .collect(),
            min_frac_bits,
            max_frac_bits,
            ..Self::default()
        }
    }
    /// With this tolerance.
    pub fn tolerance(self, tolerance: f64) -> Self {
        Self { tolerance, ..self }
    }
}

/// One lowering, measured on the calibration inputs.
struct Eval {
    prog: Program,
    /// Largest value any step must reconstruct (`None`: beyond 2^62).
    needed: Option<u128>,
    /// Step (or input) with the largest value.
    worst: String,
    max_err: f64,
    mean_err: f64,
}

fn fits(needed: Option<u128>, p: u64) -> bool {
    needed.is_some_and(|m| m << HEADROOM_BITS <= (p as u128 - 1) / 2)
}

fn evaluate(
    net: &Network,
    s: u32,
    p: u64,
    calibration: &[Vec<f32>],
    floats: &[Vec<f32>],
) -> Result<Eval, NnError> {
    let mut prog = lower(net, s, p)?;
    let (max, outputs) = match calibrate_outputs(&mut prog, calibration) {
        Ok(m) => m,
        Err(NnError::RangeExceeded { step, layer, .. }) => {
            return Ok(Eval {
                prog,
                needed: None,
                worst: if step == 0 { "input".into() } else { layer },
                max_err: f64::INFINITY,
                mean_err: f64::INFINITY,
            })
        }
        Err(e) => return Err(e),
    };
    let (i, &needed) = max
        .iter()
        .enumerate()
        .max_by_key(|(_, m)| **m)
        .unwrap_or((0, &0));
    let worst = prog
        .steps
        .get(i)
        .map_or_else(|| "input".to_string(), |st| st.name().to_string());
    let (max_err, mean_err) = output_error(&outputs, floats);
    Ok(Eval {
        prog,
        needed: Some(needed),
        worst,
        max_err,
        mean_err,
    })
}

/// Max and mean `|fixed − float|` of the calibration inputs' outputs.
fn output_error(outputs: &[Vec<f32>], floats: &[Vec<f32>]) -> (f64, f64) {
    let (mut max, mut sum, mut n) = (0f64, 0f64, 0usize);
    for (y, f) in outputs.iter().zip(floats) {
        for (a, b) in y.iter().zip(f) {
            let d = (*a as f64 - *b as f64).abs();
            max = max.max(d);
            sum += d;
            n += 1;
        }
    }
    (max, if n == 0 { 0.0 } else { sum / n as f64 })
}

/// Calibration inputs [`choose_fixed_point`] screens a lowering on (the first ones)
/// before it runs it on all of them: what does not fit or agree on them cannot on the
/// whole set.
pub const SCREEN_INPUTS: usize = 8;

/// A lowering's largest value and max error on the first [`SCREEN_INPUTS`]
/// calibration inputs.
#[derive(Clone, Copy)]
struct Screen {
    needed: Option<u128>,
    max_err: f64,
}

/// The lowerings looked at, by `s`.
struct Search<'a> {
    net: &'a Network,
    calibration: &'a [Vec<f32>],
    floats: Vec<Vec<f32>>,
    p_max: u64,
    lo_s: u32,
    cache: Vec<Option<Eval>>,
    screens: Vec<Option<Screen>>,
}

impl Search<'_> {
    fn at(&mut self, s: u32) -> Result<&Eval, NnError> {
        let k = (s - self.lo_s) as usize;
        if self.cache[k].is_none() {
            self.cache[k] = Some(evaluate(
                self.net,
                s,
                self.p_max,
                self.calibration,
                &self.floats,
            )?);
        }
        self.cache[k]
            .as_ref()
            .ok_or_else(|| NnError::FixedPointSearch("internal: evaluation missing".into()))
    }
    /// The lowering at `s` on the first [`SCREEN_INPUTS`] calibration inputs (the
    /// whole evaluation where it was made). Their values and errors are a subset of
    /// the whole set's (each input's run, modelled server shares included, does not
    /// depend on the others), so a lowering that does not fit or agree on them does not
    /// on all inputs either: the search rules candidates out on a quarter of the work
    /// and evaluates on every input only what it may choose.
    fn screen(&mut self, s: u32) -> Result<Screen, NnError> {
        let k = (s - self.lo_s) as usize;
        if let Some(e) = &self.cache[k] {
            return Ok(Screen {
                needed: e.needed,
                max_err: e.max_err,
            });
        }
        if self.calibration.len() <= SCREEN_INPUTS {
            let e = self.at(s)?;
            return Ok(Screen {
                needed: e.needed,
                max_err: e.max_err,
            });
        }
        if self.screens[k].is_none() {
            let e = evaluate(
                self.net,
                s,
                self.p_max,
                &self.calibration[..SCREEN_INPUTS],
                &self.floats[..SCREEN_INPUTS],
            )?;
            self.screens[k] = Some(Screen {
                needed: e.needed,
                max_err: e.max_err,
            });
        }
        self.screens[k]
            .ok_or_else(|| NnError::FixedPointSearch("internal: screening missing".into()))
    }
    fn fits(&mut self, s: u32, p: u64) -> Result<bool, NnError> {
        Ok(fits(self.screen(s)?.needed, p))
    }
    /// The largest `s` in `lo..=hi` whose calibration values fit `p`, given that `lo`
    /// fits. Values grow by 2x (tensors at scale s) to 4x (accumulators at scale 2s)
    /// per fractional bit, so from the largest fitting `s` measured so far the next
    /// probe is where 4x growth would reach the limit (a binary search would take
    /// log2 of the range), and `s + 1` is ruled out without an evaluation when even
    /// [`MIN_GROWTH`] would take it past the limit.
    fn largest_fitting(&mut self, lo: u32, hi: u32, p: u64) -> Result<u32, NnError> {
        let limit = ((p as u128 - 1) / 2) >> HEADROOM_BITS;
        let (mut a, mut b) = (lo, hi + 1); // a fits; b does not (or is past the range)
        loop {
            if b == a + 1 {
                return Ok(a);
            }
            let needed = self.screen(a)?.needed.unwrap_or(u128::MAX).max(1);
            if needed as f64 * MIN_GROWTH > limit as f64 {
                return Ok(a);
            }
            let room = (limit as f64 / needed as f64).log2();
            let probe = (a + (room / 2.0).floor().max(1.0) as u32).clamp(a + 1, b - 1);
            if self.fits(probe, p)? {
                a = probe;
            } else {
                b = probe;
            }
        }
    }
}

/// The least growth of the largest calibration value from one fractional bit to the
/// next (every quantised value about doubles).
const MIN_GROWTH: f64 = 1.9;

/// Picks `s` and `p` by agreement with the float model (see the module doc) and fills
/// the program's bounds, input range and accuracy.
pub fn choose_fixed_point(
    net: &Network,
    calibration: &[Vec<f32>],
    opts: &FixedPointOptions,
) -> Result<Program, NnError> {
    if calibration.is_empty() {
        return Err(NnError::FixedPointSearch("no calibration inputs".into()));
    }
    if opts.candidates.is_empty() {
        return Err(NnError::FixedPointSearch(
            "no candidate plaintext moduli".into(),
        ));
    }
    let (lo_s, hi_s) = (opts.min_frac_bits, opts.max_frac_bits);
    if lo_s == 0 || lo_s > hi_s || hi_s > 30 {
        return Err(NnError::FixedPointSearch(format!(
            "fractional-bit range {lo_s}..={hi_s} (must be within 1..=30)"
        )));
    }
    if opts.tolerance.is_nan() || opts.tolerance <= 0.0 {
        return Err(NnError::FixedPointSearch(format!(
            "tolerance {} must be positive",
            opts.tolerance
        )));
    }
    net.validate()?;
    let n_in: usize = net.input_shape().iter().product();
    for (k, x) in calibration.iter().enumerate() {
        if x.len() != n_in {
            return Err(NnError::Length {
                what: format!("calibration input {k}"),
                expected: n_in,
                actual: x.len(),
            });
        }
        if let Some((i, v)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(NnError::NonFinite {
                what: format!("calibration input {k}"),
                index: i,
                value: *v,
            });
        }
    }
    let mut cands = opts.candidates.clone();
    cands.sort_by_key(|c| c.0);
    let p_max = cands.last().map_or(0, |c| c.0);
    let mut search = Search {
        net,
        calibration,
        floats: {
            use rayon::prelude::*;
            calibration
                .par_iter()
                .map(|x| crate::run_float(net, x))
                .collect()
        },
        p_max,
        lo_s,
        cache: (lo_s..=hi_s).map(|_| None).collect(),
        screens: (lo_s..=hi_s).map(|_| None).collect(),
    };
    let target = opts.tolerance / TOLERANCE_SAFETY;
    let coarse_bits = opts.max_coarse_drelu_bits.min(ot::MAX_COARSE_DRELU_BITS);
    let mut chosen = None;
    // With approximate truncation, the first lowering whose screening passes is tried
    // at once as the program that would run (every approximable step approximate,
    // the largest coarse DReLU) on every input: where that fits and agrees it is the
    // plan, and the exact lowering's evaluation on every input is not needed.
    let mut approximate_first = opts.approximate_truncation;
    let mut failed_approximate = None;
    'moduli: for (p, preset) in &cands {
        if !search.fits(lo_s, *p)? {
            continue;
        }
        // Down from the largest s that fits on the screening inputs, to two below the
        // largest that fits on all of them (the error normally falls with s; look two
        // below in case it does not). An s whose screening fits and agrees is evaluated
        // on every input; one that does not fit there moves the end of the window down.
        let mut s = search.largest_fitting(lo_s, hi_s, *p)?;
        let mut top = s;
        loop {
            let screen = search.screen(s)?;
            if fits(screen.needed, *p) && screen.max_err <= target {
                if std::mem::take(&mut approximate_first) {
                    let mut exact = lower(net, s, p_max)?;
                    exact.p = *p;
                    exact.preset = preset.clone();
                    let all = all_approximate_and_coarse(
                        &exact,
                        calibration,
                        &search.floats,
                        target,
                        coarse_bits,
                    )?;
                    if let Some(approximate) = all {
                        chosen = Some((s, *p, preset.clone(), Some(approximate)));
                        break 'moduli;
                    }
                    failed_approximate = Some((s, *p));
                }
                let e = search.at(s)?;
                if !fits(e.needed, *p) {
                    top = s.saturating_sub(1);
                } else if e.max_err <= target {
                    chosen = Some((s, *p, preset.clone(), None));
                    break 'moduli;
                }
            }
            if s <= top.saturating_sub(2).max(lo_s) {
                break;
            }
            s -= 1;
        }
    }
    let Some((s, p, preset, approximate)) = chosen else {
        return Err(no_plan(&mut search, opts));
    };
    let (mut prog, max_err, mean_err) = match approximate {
        Some(chosen) => chosen,
        None => {
            let Some(e) = search.cache[(s - lo_s) as usize].take() else {
                return Err(NnError::FixedPointSearch(
                    "internal: evaluation missing".into(),
                ));
            };
            // the lowering and its calibration do not depend on p (values are checked
            // against p by the caller): the bounds measured at p_max hold
            let mut prog = e.prog;
            prog.p = p;
            prog.preset = preset;
            let exact = (prog, e.max_err, e.mean_err);
            if opts.approximate_truncation {
                let all_tried = failed_approximate == Some((s, p));
                approximate_where_it_agrees(
                    exact,
                    calibration,
                    &search.floats,
                    target,
                    coarse_bits,
                    all_tried,
                )?
            } else {
                exact
            }
        }
    };
    prog.accuracy = Some(Accuracy {
        max_abs_err: max_err,
        mean_abs_err: mean_err,
        tolerance: opts.tolerance,
        inputs: calibration.len(),
    });
    let (lo, hi) = match opts.input_range {
        Some((lo, hi)) => (lo, hi),
        None => calibration_range(calibration),
    };
    if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
        return Err(NnError::FixedPointSearch(format!(
            "input range [{lo}, {hi}] is empty"
        )));
    }
    let basis = if worst_case_fits(&prog, lo, hi) {
        RangeBasis::WorstCase
    } else {
        RangeBasis::Calibration {
            headroom_bits: HEADROOM_BITS,
        }
    };
    prog.input_range = Some(InputRange { lo, hi, basis });
    Ok(prog)
}

/// The exact program `exact` (with its errors) made approximate where the calibration
/// still agrees: the common case first, in one evaluation (skipped when `all_tried`: it
/// failed at this lowering already), every approximable step approximate with the
/// largest coarse DReLU (`coarse_bits`); else the steps, then the bits, one by one.
fn approximate_where_it_agrees(
    exact: (Program, f64, f64),
    calibration: &[Vec<f32>],
    floats: &[Vec<f32>],
    target: f64,
    coarse_bits: u32,
    all_tried: bool,
) -> Result<(Program, f64, f64), NnError> {
    let prog = &exact.0;
    if !all_tried {
        if let Some(all) =
            all_approximate_and_coarse(prog, calibration, floats, target, coarse_bits)?
        {
            return Ok(all);
        }
    }
    let Some(steps) = approximate_where_accurate(prog, calibration, floats, target)? else {
        return Ok(exact);
    };
    // with every approximable step approximate, `coarse_bits` is the program that just
    // failed
    let all = steps.0.approximate_steps().len() == approximable(prog).len();
    let most_bits = coarse_bits.saturating_sub(all as u32);
    Ok(coarse_where_accurate(&steps.0, calibration, floats, target, most_bits)?.unwrap_or(steps))
}

/// The steps approximate truncation may take, in program order: ReLU and Identity
/// steps that truncate.
fn approximable(prog: &Program) -> Vec<usize> {
    prog.steps
        .iter()
        .enumerate()
        .filter(|(_, st)| {
            matches!(st, Step::Nonlinear { op, trunc_bits, .. }
                if *trunc_bits > 0 && op.truncates_input())
        })
        .map(|(i, _)| i)
        .collect()
}

/// `prog` with every approximable step approximate and its DReLU coarse by `bits`, with
/// its error, when the calibration error (server shares modelled) stays within `target`
/// and every value fits `p`: what [`approximate_where_accurate`] and then
/// [`coarse_where_accurate`] give when their first attempts pass, found in one
/// evaluation instead of two. `None` otherwise (or where no step is approximable).
fn all_approximate_and_coarse(
    prog: &Program,
    calibration: &[Vec<f32>],
    floats: &[Vec<f32>],
    target: f64,
    bits: u32,
) -> Result<Option<(Program, f64, f64)>, NnError> {
    let steps = approximable(prog);
    if steps.is_empty() {
        return Ok(None);
    }
    let mut q = prog.clone();
    for &i in &steps {
        if let Step::Nonlinear { approximate, .. } = &mut q.steps[i] {
            *approximate = true;
        }
    }
    within_target(with_coarse_drelu(q, bits), calibration, floats, target)
}

/// `prog` with approximate truncation on the approximable steps whose calibration
/// error (server shares modelled, a fixed seed per input) stays within `target` and
/// whose values still fit `p`: all of them if that holds, else the longest prefix in
/// program order that does (by bisection: errors made early pass through more layers).
/// Returns the program with its error, or `None` when not even the first step can be.
fn approximate_where_accurate(
    prog: &Program,
    calibration: &[Vec<f32>],
    floats: &[Vec<f32>],
    target: f64,
) -> Result<Option<(Program, f64, f64)>, NnError> {
    let steps = approximable(prog);
    largest_passing(steps.len(), |k| {
        let mut q = prog.clone();
        for &i in &steps[..k] {
            if let Step::Nonlinear { approximate, .. } = &mut q.steps[i] {
                *approximate = true;
            }
        }
        within_target(q, calibration, floats, target)
    })
}

/// `prog` (with its approximate steps chosen) with the coarse DReLU of `c` bits on every
/// approximate step, for the largest `c ≤ max_bits` whose calibration error (server
/// shares modelled) stays within `target` and whose values fit `p` (errors grow with
/// `c`). `None` when not even 1 bit does.
fn coarse_where_accurate(
    prog: &Program,
    calibration: &[Vec<f32>],
    floats: &[Vec<f32>],
    target: f64,
    max_bits: u32,
) -> Result<Option<(Program, f64, f64)>, NnError> {
    if prog.approximate_steps().is_empty() {
        return Ok(None);
    }
    largest_passing(max_bits as usize, |c| {
        within_target(
            with_coarse_drelu(prog.clone(), c as u32),
            calibration,
            floats,
            target,
        )
    })
}

/// `q` with the coarse DReLU of `bits` on every approximate step that truncates.
fn with_coarse_drelu(mut q: Program, bits: u32) -> Program {
    for st in &mut q.steps {
        if let Step::Nonlinear {
            approximate: true,
            trunc_bits: 1..,
            coarse_drelu_bits,
            ..
        } = st
        {
            *coarse_drelu_bits = bits;
        }
    }
    q
}

/// `q` with its calibration error when that stays within `target` and its values fit
/// `p`; `None` otherwise.
fn within_target(
    mut q: Program,
    calibration: &[Vec<f32>],
    floats: &[Vec<f32>],
    target: f64,
) -> Result<Option<(Program, f64, f64)>, NnError> {
    match calibrate_outputs(&mut q, calibration) {
        Ok((max, outputs)) => {
            let (max_err, mean_err) = output_error(&outputs, floats);
            let ok = fits(max.iter().max().copied(), q.p) && max_err <= target;
            Ok(ok.then_some((q, max_err, mean_err)))
        }
        Err(NnError::RangeExceeded { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `attempt(k)` for the largest `k` in `1..=max` that passes (`Some`), where passing at
/// some `k` means passing at every smaller one: `max` first (the common case, one
/// evaluation), then by bisection. `None` when not even 1 passes.
fn largest_passing<T>(
    max: usize,
    mut attempt: impl FnMut(usize) -> Result<Option<T>, NnError>,
) -> Result<Option<T>, NnError> {
    if max == 0 {
        return Ok(None);
    }
    if let Some(all) = attempt(max)? {
        return Ok(Some(all));
    }
    // `lo` passes (or is 0), `hi` fails
    let (mut lo, mut hi, mut best) = (0, max, None);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        match attempt(mid)? {
            Some(r) => {
                lo = mid;
                best = Some(r);
            }
            None => hi = mid,
        }
    }
    Ok(best)
}

/// The error when no candidate serves the network.
fn no_plan(search: &mut Search<'_>, opts: &FixedPointOptions) -> NnError {
    let p_max = search.p_max;
    // the most accurate s that fits the largest modulus, on every input: the ones
    // that fit on the screening inputs evaluated in full
    let screened: Vec<u32> = (search.lo_s..search.lo_s + search.cache.len() as u32)
        .filter(|s| {
            search.screens[(s - search.lo_s) as usize].is_some_and(|e| fits(e.needed, p_max))
        })
        .collect();
    for s in screened {
        if let Err(e) = search.at(s) {
            return e;
        }
    }
    let best = search
        .cache
        .iter()
        .flatten()
        .filter(|e| fits(e.needed, p_max))
        .min_by(|a, b| a.max_err.total_cmp(&b.max_err));
    if let Some(e) = best {
        let (layer, op, rel) = precision_loss(search.net, &e.prog, search.calibration)
            .unwrap_or_else(|| ("?".into(), "?".into(), f64::NAN));
        return NnError::Precision {
            tolerance: opts.tolerance,
            achieved: e.max_err,
            frac_bits: e.prog.frac_bits,
            p_bits: bits(p_max as u128),
            layer,
            op,
            relative_error: rel,
        };
    }
    match search.at(search.lo_s) {
        Ok(e) => NnError::Overflow {
            layer: e.worst.clone(),
            needed_bits: e.needed.map_or(63, |m| bits((m << HEADROOM_BITS) * 2 + 1)),
            p_bits: bits(p_max as u128),
        },
        Err(e) => e,
    }
}

/// The calibration inputs' `[min, max]`, widened by [`RANGE_WIDENING`] around its
/// centre.
pub fn calibration_range(calibration: &[Vec<f32>]) -> (f32, f32) {
    let (lo, hi) = calibration
        .iter()
        .flatten()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        return (0.0, 0.0);
    }
    let (c, r) = ((lo + hi) / 2.0, (hi - lo) / 2.0 * RANGE_WIDENING);
    (c - r, c + r)
}

/// The agreement of `prog` with the float network on `inputs` (values that leave the
/// range are not checked here; [`crate::run_fixed`] does that).
pub fn float_agreement(
    net: &Network,
    prog: &Program,
    inputs: &[Vec<f32>],
    tolerance: f64,
) -> Result<Accuracy, NnError> {
    use rayon::prelude::*;
    let floats: Vec<Vec<f32>> = inputs
        .par_iter()
        .map(|x| crate::run_float(net, x))
        .collect();
    let outputs = inputs
        .par_iter()
        .enumerate()
        .map(|(k, x)| {
            let xq = quantise_input(prog, x);
            let vals = execute(prog, &xq, false, ServerShares::Modelled(k as u64))?;
            Ok(dequantise_tensor(prog, prog.output, &vals[prog.output]))
        })
        .collect::<Result<Vec<_>, NnError>>()?;
    let (max_abs_err, mean_abs_err) = output_error(&outputs, &floats);
    Ok(Accuracy {
        max_abs_err,
        mean_abs_err,
        tolerance,
        inputs: inputs.len(),
    })
}

/// Checks an input before it is quantised and encrypted: its length, every value finite
/// and inside the program's [`InputRange`]. For an out-of-range input the error names
/// the element farthest outside and how many are outside.
pub fn check_input(prog: &Program, x: &[f32]) -> Result<(), NnError> {
    let n: usize = prog.input_shape.iter().product();
    if x.len() != n {
        return Err(NnError::Length {
            what: "input".into(),
            expected: n,
            actual: x.len(),
        });
    }
    if let Some((i, v)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(NnError::NonFinite {
            what: "input".into(),
            index: i,
            value: *v,
        });
    }
    let Some(r) = prog.input_range else {
        return Ok(());
    };
    let outside = |v: f32| (r.lo - v).max(v - r.hi);
    let bad: Vec<(usize, f32)> = x
        .iter()
        .enumerate()
        .filter(|(_, &v)| outside(v) > 0.0)
        .map(|(i, &v)| (i, v))
        .collect();
    match bad
        .iter()
        .max_by(|a, b| outside(a.1).total_cmp(&outside(b.1)))
    {
        Some(&(index, value)) => Err(NnError::InputOutOfRange {
            index,
            value,
            lo: r.lo,
            hi: r.hi,
            count: bad.len(),
        }),
        None => Ok(()),
    }
}

/// Worst-case interval bounds: for inputs with every element in `[lo, hi]`, the largest
/// `|value|` of every tensor (index = tensor id), computed by interval arithmetic through
/// every step; `None` once a bound passes 2^62.
pub fn worst_case_bounds(prog: &Program, lo: f32, hi: f32) -> Option<Vec<u128>> {
    worst_case(prog, lo, hi, None)
}

/// [`worst_case_bounds`], stopping (`None`) at the first step that must reconstruct a
/// value above `stop` ([`step_max`]) when given.
fn worst_case(prog: &Program, lo: f32, hi: f32, stop: Option<u128>) -> Option<Vec<u128>> {
    let f = 2f64.powi(prog.frac_bits as i32);
    // raw inputs in [lo, hi] are normalised first (an interval over all elements)
    let (lo, hi) = match &prog.input_affine {
        Some(a) => a.range(lo, hi),
        None => (lo as f64, hi as f64),
    };
    let (ql, qh) = ((lo * f).round(), (hi * f).round());
    let cap = (1i128 << 62) as f64;
    if ql.abs() >= cap || qh.abs() >= cap {
        return None;
    }
    type Iv = (Vec<i128>, Vec<i128>);
    let n_in = prog.tensors.get(prog.input)?.len();
    let mut iv: Vec<Option<Iv>> = vec![None; prog.tensors.len()];
    iv[prog.input] = Some((vec![ql as i128; n_in], vec![qh as i128; n_in]));
    // the largest |value| of each tensor computed so far
    let mut t = vec![0u128; prog.tensors.len()];
    t[prog.input] = (ql.abs().max(qh.abs())) as u128;
    let limit = 1i128 << 62;
    let ok = |v: &[i128]| v.iter().all(|x| x.abs() < limit);
    let split = |w: &[i64]| -> (Vec<i64>, Vec<i64>) {
        (
            w.iter().map(|&v| v.max(0)).collect(),
            w.iter().map(|&v| v.min(0)).collect(),
        )
    };
    for st in &prog.steps {
        let get = |t: usize| iv.get(t).and_then(|v| v.as_ref());
        let out: Iv = match st {
            Step::Linear {
                input,
                rows,
                cols,
                weight,
                bias,
                ..
            } => {
                let (l, h) = get(*input)?;
                let (wp, wn) = split(weight);
                let m = |w: &[i64], x: &[i128]| crate::gemm::linear(w, x, *rows, *cols);
                let add = |a: Vec<i128>, b: Vec<i128>| -> Vec<i128> {
                    a.iter()
                        .zip(&b)
                        .zip(bias)
                        .map(|((x, y), c)| x + y + *c as i128)
                        .collect()
                };
                (add(m(&wp, l), m(&wn, h)), add(m(&wp, h), m(&wn, l)))
            }
            Step::Conv {
                input,
                shape,
                weight,
                bias,
                groups,
                ..
            } => {
                let (l, h) = get(*input)?;
                let (wp, wn) = split(weight);
                let c = |w: &[i64], x: &[i128]| -> Vec<i128> {
                    crate::gemm::conv(shape, *groups, x, w).unwrap_or_default()
                };
                let (oh, ow, _, _) = kernels::reference::conv_output(shape);
                let per = (oh * ow).max(1);
                let add = |a: Vec<i128>, b: Vec<i128>| -> Vec<i128> {
                    a.iter()
                        .zip(&b)
                        .enumerate()
                        .map(|(i, (x, y))| x + y + bias.get(i / per).copied().unwrap_or(0) as i128)
                        .collect()
                };
                // padded positions of a SAME convolution read zeros: inside [l, h] only
                // if 0 is; include it.
                let (l0, h0): (Vec<i128>, Vec<i128>) = if shape.padding == kernels::Padding::Same {
                    (
                        l.iter().map(|&v| v.min(0)).collect(),
                        h.iter().map(|&v| v.max(0)).collect(),
                    )
                } else {
                    (l.clone(), h.clone())
                };
                (add(c(&wp, &l0), c(&wn, &h0)), add(c(&wp, &h0), c(&wn, &l0)))
            }
            Step::Nonlinear {
                input,
                op,
                trunc_bits,
                approximate,
                ..
            } => {
                let (l, h) = get(*input)?;
                let sh = &prog.tensors[*input].shape;
                let r = trunc_offset(*trunc_bits, *approximate);
                // approximate truncation may come out one below the floor
                let below = i128::from(*approximate && *trunc_bits > 0);
                if !ok(&l.iter().map(|v| v + r).collect::<Vec<_>>())
                    || !ok(&h.iter().map(|v| v + r).collect::<Vec<_>>())
                {
                    return None;
                }
                let pool = |v: &[i128], k: usize, s: usize, relu: bool| -> Option<Vec<i128>> {
                    if sh.len() != 3 || sh[1] < k || sh[2] < k || s == 0 {
                        return None;
                    }
                    Some(
                        window_indices(sh, k, k, s)
                            .chunks(k * k)
                            .map(|w| {
                                let m = w.iter().map(|&i| v[i]).max().unwrap_or(0);
                                if relu {
                                    m.max(0)
                                } else {
                                    m
                                }
                            })
                            .collect(),
                    )
                };
                if let NonlinearOp::Clip { lo, hi } = op {
                    let (lo, hi) = (*lo as i128, hi.map_or(i128::MAX, |v| v as i128));
                    let c = |v: &[i128]| -> Vec<i128> {
                        v.iter()
                            .map(|&x| ((x + r) >> trunc_bits).clamp(lo, hi))
                            .collect()
                    };
                    iv[st.output()] = Some((c(l), c(h)));
                    continue;
                }
                let (l2, h2) = match op {
                    NonlinearOp::Clip { .. } => (l.clone(), h.clone()),
                    NonlinearOp::Relu => (
                        l.iter().map(|v| (*v).max(0)).collect(),
                        h.iter().map(|v| (*v).max(0)).collect(),
                    ),
                    NonlinearOp::Identity => (l.clone(), h.clone()),
                    NonlinearOp::MaxPool { k, stride } => {
                        (pool(l, *k, *stride, false)?, pool(h, *k, *stride, false)?)
                    }
                    NonlinearOp::ReluMaxPool { k, stride } => {
                        (pool(l, *k, *stride, true)?, pool(h, *k, *stride, true)?)
                    }
                };
                let t = |v: Vec<i128>, d: i128| -> Vec<i128> {
                    v.into_iter().map(|x| ((x + r) >> trunc_bits) - d).collect()
                };
                (t(l2, below), t(h2, 0))
            }
            Step::Reshape { input, .. } => get(*input)?.clone(),
            Step::Square { input, .. } => {
                let (l, h) = get(*input)?;
                l.iter()
                    .zip(h)
                    .map(|(&a, &b)| {
                        let (a2, b2) = (a * a, b * b);
                        let top = a2.max(b2);
                        let bottom = if a <= 0 && b >= 0 { 0 } else { a2.min(b2) };
                        (bottom, top)
                    })
                    .unzip()
            }
            Step::SumPool {
                input,
                k_h,
                k_w,
                stride,
                ..
            } => {
                let (l, h) = get(*input)?;
                let sh = &prog.tensors[*input].shape;
                if sh.len() != 3 || sh[1] < *k_h || sh[2] < *k_w || *stride == 0 {
                    return None;
                }
                let idx = window_indices(sh, *k_h, *k_w, *stride);
                let sum = |v: &[i128]| -> Vec<i128> {
                    idx.chunks(k_h * k_w)
                        .map(|w| w.iter().map(|&i| v[i]).sum())
                        .collect()
                };
                (sum(l), sum(h))
            }
            Step::Pad {
                input, pads, mode, ..
            } => {
                let (l, h) = get(*input)?;
                let sh = &prog.tensors[*input].shape;
                if sh.len() != 3 || sh[1] == 0 || sh[2] == 0 {
                    return None;
                }
                let idx = pad_indices(sh, *pads, *mode);
                let g = |v: &[i128]| -> Vec<i128> {
                    idx.iter().map(|i| i.map_or(0, |i| v[i])).collect()
                };
                debug_assert!(matches!(mode, PadMode::Zero | PadMode::Edge));
                (g(l), g(h))
            }
            Step::SpaceToDepth {
                input,
                stride,
                phases,
                out_h,
                out_w,
                ..
            } => {
                let (l, h) = get(*input)?;
                let sh = &prog.tensors[*input].shape;
                if sh.len() != 3 || *stride == 0 {
                    return None;
                }
                let idx = space_to_depth_indices(sh, *stride, *phases, *out_h, *out_w);
                let g = |v: &[i128]| -> Vec<i128> {
                    idx.iter().map(|i| i.map_or(0, |i| v[i])).collect()
                };
                (g(l), g(h))
            }
            Step::Add {
                a, b, mul_a, mul_b, ..
            } => {
                let ((la, ha), (lb, hb)) = (get(*a)?, get(*b)?);
                let (ma, mb) = (*mul_a as i128, *mul_b as i128);
                (
                    la.iter().zip(lb).map(|(x, y)| x * ma + y * mb).collect(),
                    ha.iter().zip(hb).map(|(x, y)| x * ma + y * mb).collect(),
                )
            }
        };
        if !ok(&out.0) || !ok(&out.1) {
            return None;
        }
        t[st.output()] = out
            .0
            .iter()
            .chain(&out.1)
            .map(|x| x.unsigned_abs())
            .max()
            .unwrap_or(0);
        iv[st.output()] = Some(out);
        if stop.is_some_and(|m| step_max(st, &t) > m) {
            return None;
        }
    }
    Some(t)
}

/// Whether no input with every element in `[lo, hi]` can push a value of `prog` out of
/// `(−p/2, p/2)` (including the rounding offsets the nonlinear steps add).
pub fn worst_case_fits(prog: &Program, lo: f32, hi: f32) -> bool {
    let half = (prog.p as u128).saturating_sub(1) / 2;
    // the first step past p/2 settles it: no need to carry the intervals further
    let Some(t) = worst_case(prog, lo, hi, Some(half)) else {
        return false;
    };
    t[prog.input] <= half && prog.steps.iter().all(|st| step_max(st, &t) <= half)
}

/// The layer that loses the most relative precision: per step, the relative error of
/// its output (max `|fixed − float|` over max `|float|`, on up to 4 calibration inputs)
/// minus the largest relative error among its inputs. Returns the layer's name, op
/// kind and the relative error of its output. Program tensors are matched to the
/// network's by name; steps the lowering adds inherit their input's error.
pub fn precision_loss(
    net: &Network,
    prog: &Program,
    calibration: &[Vec<f32>],
) -> Option<(String, String, f64)> {
    let inputs = &calibration[..calibration.len().min(4)];
    let by_name: std::collections::HashMap<&str, usize> = net
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let mut err = vec![None::<f64>; prog.tensors.len()];
    let mut scale = vec![0f64; prog.tensors.len()];
    for (k, x) in inputs.iter().enumerate() {
        let floats = run_float_all(net, x);
        let xq = quantise_input(prog, x);
        let fixed = execute(prog, &xq, false, ServerShares::Modelled(k as u64)).ok()?;
        for (t, info) in prog.tensors.iter().enumerate() {
            let Some(&i) = by_name.get(info.name.as_str()) else {
                continue;
            };
            let f = &floats[i];
            if f.len() != fixed[t].len() {
                continue;
            }
            let y = dequantise_tensor(prog, t, &fixed[t]);
            let d = y
                .iter()
                .zip(f)
                .map(|(a, b)| (*a as f64 - *b as f64).abs())
                .fold(0f64, f64::max);
            let m = f.iter().map(|v| v.abs() as f64).fold(0f64, f64::max);
            err[t] = Some(err[t].unwrap_or(0.0).max(d));
            scale[t] = scale[t].max(m);
        }
    }
    let mut rel: Vec<f64> = err
        .iter()
        .zip(&scale)
        .map(|(e, s)| e.map_or(f64::NAN, |e| e / s.max(1e-6)))
        .collect();
    if rel[prog.input].is_nan() {
        rel[prog.input] = 0.0;
    }
    let mut best: Option<(usize, f64)> = None;
    for (i, st) in prog.steps.iter().enumerate() {
        let before = st
            .inputs()
            .iter()
            .map(|&t| rel[t])
            .filter(|v| !v.is_nan())
            .fold(0f64, f64::max);
        let o = st.output();
        if rel[o].is_nan() {
            rel[o] = before;
            continue;
        }
        let loss = rel[o] - before;
        if best.is_none_or(|(_, b)| loss > b) {
            best = Some((i, loss));
        }
    }
    let (i, _) = best?;
    let st = &prog.steps[i];
    let kind = net
        .nodes
        .iter()
        .find(|n| n.name == st.name())
        .map_or("step", |n| n.op.kind());
    Some((st.name().to_string(), kind.to_string(), rel[st.output()]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Stopping at the first step past p/2 decides exactly what the whole propagation
    /// decides, on ranges that fit and ranges that do not.
    #[test]
    fn the_early_stop_agrees_with_the_whole_worst_case_propagation() {
        let net = crate::import_bytes(&crate::zoo::onnx("mnist-d", 3).unwrap()).unwrap();
        let mut seen = (false, false);
        for (s, p) in [(6, 1_032_193u64), (8, 4_293_918_721)] {
            let prog = crate::lower(&net, s, p).unwrap();
            let half = (p as u128 - 1) / 2;
            for (lo, hi) in [
                (0.0, 1e-3),
                (0.0, 0.1),
                (-1.0, 1.0),
                (0.0, 30.0),
                (-1e4, 1e4),
            ] {
                let whole = worst_case_bounds(&prog, lo, hi).is_some_and(|t| {
                    t[prog.input] <= half && prog.steps.iter().all(|st| step_max(st, &t) <= half)
                });
                assert_eq!(worst_case_fits(&prog, lo, hi), whole, "s {s}, [{lo}, {hi}]");
                if whole {
                    seen.0 = true;
                } else {
                    seen.1 = true;
                }
            }
        }
        assert_eq!(seen, (true, true), "both outcomes checked");
    }
}
