//! A model ready to serve: an ONNX network imported, its fixed point chosen by
//! agreement with the float model on calibration inputs, and every linear layer
//! planned (method, weights held or encoded per query, predicted cost) — the
//! orchestration a server runs before its first client ([`Model::from_onnx`]).

use he::Params;
use net::Link;
use nn::{FixedPointOptions, Network};
use protocol::{MethodChoice, NetworkPlan, Objective, Planner};

use crate::costs::{self, CostSource};
use crate::error::{Error, Result};

/// Seed of the calibration samples drawn from an input range (public data).
pub const RANGE_SAMPLES_SEED: u64 = 0x5eed_ca1b;
/// Calibration samples drawn from an input range.
pub const RANGE_SAMPLES: usize = 32;

/// How the fixed point is chosen.
#[derive(Clone, Debug)]
pub struct FixedPoint {
    /// A parameter preset, or `None`: the cheapest plaintext modulus whose fixed point
    /// agrees with the float model within the tolerance.
    pub params: Option<String>,
    /// Largest |Δ| between the private (fixed-point) outputs and the float model; the
    /// plan must meet half of it on the calibration inputs.
    pub tolerance: f64,
    /// Smallest number of fractional bits tried.
    pub min_frac_bits: u32,
    /// Largest number of fractional bits tried.
    pub max_frac_bits: u32,
    /// Calibration inputs (like the real ones, apart from those evaluated).
    pub calibration: Option<Vec<Vec<f32>>>,
    /// The input range the plan must be safe for; without calibration inputs the plan
    /// is calibrated on uniform samples from it.
    pub input_range: Option<(f32, f32)>,
    /// Approximate truncation (Cheetah's: about a third fewer COTs and bytes per ReLU)
    /// on the ReLU and Identity steps where the calibration error stays within the
    /// same bound ([`nn::FixedPointOptions::approximate_truncation`]), and on those
    /// steps the coarse DReLU of up to [`nn::DEFAULT_MAX_COARSE_DRELU_BITS`] bits where it
    /// stays within it too ([`nn::FixedPointOptions::max_coarse_drelu_bits`]); `false`:
    /// every truncation faithful. Servers on garbled circuits truncate faithfully anyway.
    pub approximate_truncation: bool,
}

impl Default for FixedPoint {
    fn default() -> Self {
        Self {
            params: None,
            tolerance: nn::DEFAULT_TOLERANCE,
            min_frac_bits: nn::DEFAULT_MIN_FRAC_BITS,
            max_frac_bits: nn::DEFAULT_MAX_FRAC_BITS,
            calibration: None,
            input_range: None,
            approximate_truncation: true,
        }
    }
}

impl FixedPoint {
    /// These options for a server whose nonlinear layers run by `nonlinear`: garbled
    /// circuits truncate faithfully only, so they plan without approximate truncation.
    pub fn for_nonlinear(self, nonlinear: protocol::NonlinearProtocol) -> Self {
        Self {
            approximate_truncation: self.approximate_truncation
                && nonlinear == protocol::NonlinearProtocol::SilentOt,
            ..self
        }
    }
    /// The defaults with these calibration inputs.
    pub fn calibrated(calibration: Vec<Vec<f32>>) -> Self {
        Self {
            calibration: Some(calibration),
            ..Self::default()
        }
    }
    /// The defaults with an input range (calibrated on samples from it).
    pub fn in_range(lo: f32, hi: f32) -> Self {
        Self {
            input_range: Some((lo, hi)),
            ..Self::default()
        }
    }
}

/// Where the calibration inputs came from.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum CalibrationSource {
    /// Given.
    Inputs,
    /// Uniform samples from the input range.
    Range,
}

impl std::fmt::Display for CalibrationSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CalibrationSource::Inputs => f.write_str("the calibration inputs"),
            CalibrationSource::Range => {
                write!(f, "{RANGE_SAMPLES} uniform samples from the input range")
            }
        }
    }
}

/// How the linear layers are planned.
#[derive(Clone, Debug)]
pub struct Planning {
    /// Method per layer: the planner's pick, or one method for every layer it applies to.
    pub method: MethodChoice,
    /// What the pick minimises.
    pub objective: Objective,
    /// Under [`Objective::Time`], the fraction of the fastest plan's predicted time
    /// traded for fewer bytes ([`protocol::Planner::time_slack`]).
    pub time_slack: f64,
    /// Where the per-op costs come from.
    pub costs: CostSource,
    /// Server threads the prediction assumes (default: this process's pool).
    pub threads: Option<usize>,
    /// Memory for encoded weights, bytes; layers beyond it are encoded per query.
    /// `None`: a third of the memory available when the model is planned, at most 2 GiB
    /// ([`protocol::default_weight_memory`]).
    pub mem_limit: Option<u64>,
    /// The link the prediction assumes.
    pub link: Link,
    /// The most inputs one session may send, which sizes the flooding of every response
    /// ([`protocol::Planner::session_inputs`]); `None`: [`protocol::MAX_INPUTS_PER_SESSION`].
    pub session_inputs: Option<u32>,
}

impl Default for Planning {
    fn default() -> Self {
        Self {
            method: MethodChoice::Auto,
            objective: Objective::Time,
            time_slack: protocol::DEFAULT_TIME_SLACK,
            costs: CostSource::Cached,
            threads: None,
            mem_limit: None,
            link: Link::NONE,
            session_inputs: None,
        }
    }
}

impl Planning {
    /// The planner for `params`, and where its costs came from.
    pub fn planner(&self, params: &Params) -> Result<(Planner, String)> {
        let (model, source) = costs::model(params, self.costs)?;
        let mut p = Planner::new(params, &self.link);
        p.model = model;
        p.objective = self.objective;
        p.time_slack = self.time_slack;
        p.threads = self.threads.unwrap_or_else(threads);
        if let Some(n) = self.session_inputs {
            p.session_inputs = n;
        }
        Ok((p, source))
    }

    /// The network plan of `prog` on `params` by `planner` (from [`Planning::planner`])
    /// — the one place a plan is made: a method per linear step, the weights held within
    /// [`Planning::mem_limit`] and the rest encoded per query; `layers`: only the first
    /// that many linear steps.
    pub fn plan(
        &self,
        planner: &Planner,
        prog: nn::Program,
        params: &Params,
        layers: Option<usize>,
    ) -> Result<NetworkPlan> {
        Ok(NetworkPlan::new(
            prog,
            params,
            planner,
            self.mem_limit.or_else(protocol::default_weight_memory),
            &self.method,
            layers,
        )?)
    }
}

/// Worker threads of the HE kernels (the global rayon pool).
fn threads() -> usize {
    rayon::current_num_threads()
}

/// A model ready to serve (see the module doc).
#[derive(Clone, Debug)]
pub struct Model {
    /// The float network as imported.
    pub network: Network,
    /// The fixed-point program, its parameter set and every linear layer's plan.
    pub plan: NetworkPlan,
    /// Where the calibration inputs came from.
    pub calibration: CalibrationSource,
    /// Where the planner's per-op costs came from.
    pub costs: String,
    /// How long planning took.
    pub timings: PlanTimings,
}

/// How long a model's planning took, ms (wall clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PlanTimings {
    /// The fixed-point search and calibration (`nn::choose_fixed_point`).
    pub fixed_point_ms: f64,
    /// The method of every linear layer (`protocol::NetworkPlan::new`).
    pub methods_ms: f64,
}

impl std::fmt::Display for PlanTimings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "fixed-point search and calibration {:.1} s, methods {:.1} s",
            self.fixed_point_ms / 1e3,
            self.methods_ms / 1e3
        )
    }
}

impl Model {
    /// Reads an ONNX file (as `torch.onnx.export` writes it) and plans it.
    pub fn from_onnx(path: &str, fixed: &FixedPoint, planning: &Planning) -> Result<Self> {
        let network = nn::import(std::path::Path::new(path))?;
        Self::new(network, fixed, planning)
    }

    /// Plans an ONNX model given as bytes.
    pub fn from_onnx_bytes(bytes: &[u8], fixed: &FixedPoint, planning: &Planning) -> Result<Self> {
        Self::new(nn::import_bytes(bytes)?, fixed, planning)
    }

    /// Plans an imported network: the fixed point by agreement with the float model on
    /// the calibration inputs (or samples from the input range; one of them is
    /// needed), then every linear layer.
    pub fn new(network: Network, fixed: &FixedPoint, planning: &Planning) -> Result<Self> {
        let (calibration, source) = match (&fixed.calibration, fixed.input_range) {
            (Some(xs), _) => (xs.clone(), CalibrationSource::Inputs),
            (None, Some((lo, hi))) => {
                use rand::{Rng, SeedableRng};
                if !(lo.is_finite() && hi.is_finite() && lo < hi) {
                    return Err(Error::Option {
                        option: "input range",
                        detail: format!("[{lo}, {hi}]: need finite LO < HI"),
                    });
                }
                let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(RANGE_SAMPLES_SEED);
                let len: usize = network.input_shape().iter().product();
                let xs = (0..RANGE_SAMPLES)
                    .map(|_| (0..len).map(|_| r.random_range(lo..=hi)).collect())
                    .collect();
                (xs, CalibrationSource::Range)
            }
            (None, None) => {
                return Err(Error::Option {
                    option: "calibration",
                    detail: "a model needs calibration data to choose its fixed point: calibration inputs like the real ones, or an input range".into(),
                })
            }
        };
        let candidates: Vec<(u64, String)> = match &fixed.params {
            None => nn::CANDIDATE_MODULI
                .iter()
                .map(|&(p, n)| (p, n.to_string()))
                .collect(),
            Some(preset) => vec![(Params::preset(preset)?.p(), preset.clone())],
        };
        let opts = FixedPointOptions {
            candidates,
            min_frac_bits: fixed.min_frac_bits,
            max_frac_bits: fixed.max_frac_bits,
            tolerance: fixed.tolerance,
            input_range: fixed.input_range,
            approximate_truncation: fixed.approximate_truncation,
            max_coarse_drelu_bits: nn::DEFAULT_MAX_COARSE_DRELU_BITS,
        };
        let t = std::time::Instant::now();
        let prog = nn::choose_fixed_point(&network, &calibration, &opts)?;
        let fixed_point_ms = t.elapsed().as_secs_f64() * 1e3;
        Self::from_program(
            network,
            prog,
            planning,
            source,
            PlanTimings {
                fixed_point_ms,
                methods_ms: 0.0,
            },
        )
    }

    /// Plans every linear step of a fixed-point program already chosen for `network`
    /// (its parameter set named by the program; `timings.methods_ms` is set here).
    pub(crate) fn from_program(
        network: Network,
        prog: nn::Program,
        planning: &Planning,
        calibration: CalibrationSource,
        timings: PlanTimings,
    ) -> Result<Self> {
        let t = std::time::Instant::now();
        let params = Params::preset(&prog.preset)?;
        let (planner, costs) = planning.planner(&params)?;
        let plan = planning.plan(&planner, prog, &params, None)?;
        Ok(Self {
            network,
            plan,
            calibration,
            costs,
            timings: PlanTimings {
                methods_ms: t.elapsed().as_secs_f64() * 1e3,
                ..timings
            },
        })
    }

    /// The fixed-point program.
    pub fn program(&self) -> &nn::Program {
        &self.plan.program
    }
    /// The plaintext fixed-point reference's output for input `x`, as the private run
    /// that gave `output` must have computed it: approximate truncations replayed from
    /// the client's shares in `output` ([`nn::run_fixed_replay`]). The private
    /// `output.fixed` equals it bit for bit.
    pub fn fixed_reference(&self, x: &[f32], output: &crate::report::Output) -> Result<Vec<i64>> {
        let prog = self.program();
        let xq = nn::quantise_input(prog, x);
        Ok(nn::run_fixed_replay(prog, &xq, &output.truncation_shares)?)
    }
    /// The parameter set.
    pub fn params(&self) -> &Params {
        &self.plan.params
    }
    /// The input shape (without batch).
    pub fn input_shape(&self) -> &[usize] {
        self.network.input_shape()
    }
}
