//! The fixed-point options every command that runs a network shares (`infer`,
//! `server --model m.onnx`, `inspect`): the parameter preset or `auto`, the tolerance
//! against the float model, the fractional-bit range, and where calibration comes from.

use clap::Args;
use he::Params;
use nn::{FixedPointOptions, Network, Program};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Seed of the calibration samples drawn from `--input-range` (public data).
const RANGE_SAMPLES_SEED: u64 = 0x5eed_ca1b;
/// Calibration samples drawn from `--input-range`.
const RANGE_SAMPLES: usize = 32;

#[derive(Args, Clone, Debug)]
pub struct FixedPointArgs {
    /// Parameter preset, or auto: the cheapest plaintext modulus whose fixed point agrees
    /// with the float model within --tolerance (n8192, n8192-p32, n8192-p40, n8192-p44).
    #[arg(long, default_value = "auto")]
    pub params: String,
    /// Largest |Δlogit| allowed between the private (fixed-point) outputs and the float
    /// model; the plan must meet half of it on the calibration inputs.
    #[arg(long, default_value_t = nn::DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// Smallest number of fractional bits tried.
    #[arg(long, default_value_t = nn::DEFAULT_MIN_FRAC_BITS)]
    pub min_frac_bits: u32,
    /// Largest number of fractional bits tried.
    #[arg(long, default_value_t = nn::DEFAULT_MAX_FRAC_BITS)]
    pub max_frac_bits: u32,
    /// Calibration inputs (.npy of float32/float64, batch first): they choose the
    /// scale and p and set the input range (their [min, max] widened 1.5x); keep them
    /// apart from the inputs you evaluate.
    #[arg(long)]
    pub calibration: Option<String>,
    /// The input range LO,HI the plan must be safe for (e.g. -2.5,2.7). Without
    /// --calibration, the plan is calibrated on uniform samples from it.
    #[arg(long, value_parser = parse_range, allow_hyphen_values = true)]
    pub input_range: Option<(f32, f32)>,
}

/// Parses `LO,HI`.
pub fn parse_range(s: &str) -> Result<(f32, f32), String> {
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}`: expected LO,HI"))?;
    let p = |t: &str| t.trim().parse::<f32>().map_err(|e| format!("`{t}`: {e}"));
    let (lo, hi) = (p(a)?, p(b)?);
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return Err(format!("`{s}`: need finite LO < HI"));
    }
    Ok((lo, hi))
}

/// Where the calibration inputs came from.
#[derive(Clone, Debug, PartialEq)]
pub enum CalibrationSource {
    /// `--calibration FILE`.
    File(String),
    /// Uniform samples from `--input-range`.
    Range,
    /// The command's own default (named).
    Default(&'static str),
}

impl std::fmt::Display for CalibrationSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CalibrationSource::File(p) => write!(f, "{p}"),
            CalibrationSource::Range => {
                write!(f, "{RANGE_SAMPLES} uniform samples from --input-range")
            }
            CalibrationSource::Default(what) => f.write_str(what),
        }
    }
}

impl FixedPointArgs {
    /// The calibration inputs: `--calibration`, else samples from `--input-range`, else
    /// `default` (with its description), else an error saying what to give.
    pub fn calibration(
        &self,
        network: &Network,
        default: Option<(Vec<Vec<f32>>, &'static str)>,
    ) -> Res<(Vec<Vec<f32>>, CalibrationSource)> {
        if let Some(path) = &self.calibration {
            let xs = crate::infer::read_batch(path, network.input_shape())?;
            return Ok((xs, CalibrationSource::File(path.clone())));
        }
        if let Some((lo, hi)) = self.input_range {
            use rand::{Rng, SeedableRng};
            let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(RANGE_SAMPLES_SEED);
            let len: usize = network.input_shape().iter().product();
            let xs = (0..RANGE_SAMPLES)
                .map(|_| (0..len).map(|_| r.random_range(lo..=hi)).collect())
                .collect();
            return Ok((xs, CalibrationSource::Range));
        }
        match default {
            Some((xs, what)) => Ok((xs, CalibrationSource::Default(what))),
            None => Err("a network needs calibration data to choose its fixed point: give --calibration cal.npy (inputs like the real ones, batch first) or --input-range LO,HI".into()),
        }
    }

    /// The options for [`nn::plan_fixed_point`].
    pub fn options(&self) -> Res<FixedPointOptions> {
        let candidates: Vec<(u64, String)> = match self.params.as_str() {
            "auto" => nn::CANDIDATE_MODULI
                .iter()
                .map(|&(p, n)| (p, n.to_string()))
                .collect(),
            preset => vec![(Params::preset(preset)?.p(), preset.to_string())],
        };
        Ok(FixedPointOptions {
            candidates,
            min_frac_bits: self.min_frac_bits,
            max_frac_bits: self.max_frac_bits,
            tolerance: self.tolerance,
            input_range: self.input_range,
        })
    }

    /// Plans the fixed point of `network` on its calibration inputs; returns the
    /// program, its parameter set, and where the calibration came from.
    pub fn plan(
        &self,
        network: &Network,
        default: Option<(Vec<Vec<f32>>, &'static str)>,
    ) -> Res<(Program, Params, CalibrationSource)> {
        let (calibration, source) = self.calibration(network, default)?;
        let prog = nn::plan_fixed_point(network, &calibration, &self.options()?)?;
        let params = Params::preset(if prog.preset.is_empty() {
            "n8192"
        } else {
            &prog.preset
        })?;
        Ok((prog, params, source))
    }
}

/// One line about the plan's float agreement and input range.
pub fn describe(prog: &Program) -> String {
    let acc = prog.accuracy.map_or("not measured".into(), |a| {
        format!(
            "max |Δ| {:.2e}, mean {:.2e} on {} calibration inputs (tolerance {})",
            a.max_abs_err, a.mean_abs_err, a.inputs, a.tolerance
        )
    });
    let range = prog.input_range.map_or("unchecked".into(), |r| {
        format!(
            "[{}, {}] ({})",
            r.lo,
            r.hi,
            match r.basis {
                nn::RangeBasis::WorstCase => "guaranteed by worst-case bounds".to_string(),
                nn::RangeBasis::Calibration { headroom_bits } =>
                    format!("calibration maxima with {headroom_bits} bits of headroom"),
            }
        )
    });
    format!("float agreement {acc}; input range {range}")
}
