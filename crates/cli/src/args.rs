//! The argument groups and value enums the commands share, each mapped onto the
//! library's options (`helina::FixedPoint`, `helina::Planning`, ...): parsing here, the
//! work in the library.

use clap::{Args, ValueEnum};
use helina::{CostSource, FixedPoint, MethodChoice, Objective, Planning};
use net::Link;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A kernel method for every linear layer it applies to, or the planner's pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MethodArg {
    /// The planner's pick per layer.
    Auto,
    /// Matrix-vector: naive.
    Naive,
    /// Matrix-vector: diagonal (Halevi-Shoup).
    Diagonal,
    /// Baby-step giant-step (matrix-vector; convolution: HELiKs with a baby-step
    /// giant-step block fold).
    Bsgs,
    /// Matrix-vector: GAZELLE hybrid.
    Hybrid,
    /// GALA (matrix-vector and convolution).
    Gala,
    /// HELiKs (matrix-vector and convolution).
    Heliks,
    /// Convolution: GAZELLE output rotation.
    GazelleOut,
    /// Convolution: GAZELLE input rotation.
    GazelleIn,
    /// Convolution: ENSEI (NTT, no rotation).
    Ensei,
}

impl MethodArg {
    /// The method's name as the kernels parse it.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
    /// The library's choice.
    pub fn choice(self) -> MethodChoice {
        match self {
            MethodArg::Auto => MethodChoice::Auto,
            m => MethodChoice::Named(m.name()),
        }
    }
}

/// Who garbles the nonlinear layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GarblerArg {
    /// The server garbles, the client evaluates.
    Server,
    /// The client garbles, the server evaluates.
    Client,
}

impl From<GarblerArg> for gc::Garbler {
    fn from(g: GarblerArg) -> Self {
        match g {
            GarblerArg::Server => gc::Garbler::Server,
            GarblerArg::Client => gc::Garbler::Client,
        }
    }
}

/// How the nonlinear layers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NonlinearArg {
    /// Millionaire comparisons on silent OT (CrypTFlow2/Cheetah style; the default).
    Ot,
    /// GAZELLE's garbled circuits (for comparison).
    Gc,
}

/// The nonlinear protocol of a server or a local run.
#[derive(Args, Clone, Debug)]
pub struct NonlinearArgs {
    /// How ReLU, MaxPool and the truncations run: silent OT, or garbled circuits.
    #[arg(long, value_enum, default_value_t = NonlinearArg::Ot)]
    pub nonlinear: NonlinearArg,
    /// With `--nonlinear gc`: who garbles (the other party evaluates).
    #[arg(long, value_enum, default_value_t = GarblerArg::Server)]
    pub garbler: GarblerArg,
}

impl NonlinearArgs {
    /// The protocol named.
    pub fn protocol(&self) -> protocol::NonlinearProtocol {
        match self.nonlinear {
            NonlinearArg::Ot => protocol::NonlinearProtocol::SilentOt,
            NonlinearArg::Gc => protocol::NonlinearProtocol::GarbledCircuits(self.garbler.into()),
        }
    }
}

/// Where the planner's per-op costs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CostsArg {
    /// This machine's (`bench ops --save`), else the reference figures.
    Cached,
    /// The reference figures of this machine kind.
    Reference,
    /// Measure now and update the cache.
    Measure,
}

impl From<CostsArg> for CostSource {
    fn from(c: CostsArg) -> Self {
        match c {
            CostsArg::Cached => CostSource::Cached,
            CostsArg::Reference => CostSource::Reference,
            CostsArg::Measure => CostSource::Measure,
        }
    }
}

/// What the planner minimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ObjectiveArg {
    /// Predicted time.
    Time,
    /// Bytes on the wire.
    Bytes,
    /// Time and bytes, each relative to the layer's best, summed.
    Balanced,
}

impl From<ObjectiveArg> for Objective {
    fn from(o: ObjectiveArg) -> Self {
        match o {
            ObjectiveArg::Time => Objective::Time,
            ObjectiveArg::Bytes => Objective::Bytes,
            ObjectiveArg::Balanced => Objective::Balanced,
        }
    }
}

#[derive(Args, Clone, Debug)]
pub struct LinkArgs {
    /// Link emulation preset: none, gala-lan (1 Gbit/s), gala-wan (200 Mbit/s, 13 ms), heliks (800 Mbit/s).
    #[arg(long, default_value = "none")]
    link: String,
    /// Custom bandwidth (e.g. 100mbit, 50MB); needs --rtt.
    #[arg(long)]
    bandwidth: Option<String>,
    /// Custom round-trip time (e.g. 13ms).
    #[arg(long)]
    rtt: Option<String>,
    /// Every frame must be sent or received within this many seconds of its start.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

impl LinkArgs {
    pub fn link(&self) -> Res<Link> {
        Ok(match (&self.bandwidth, &self.rtt) {
            (Some(b), Some(r)) => Link::custom(b, r)?,
            (None, None) => Link::preset(&self.link)?,
            _ => return Err("--bandwidth and --rtt go together".into()),
        })
    }
}

/// A server's TLS: its certificate and key, and optionally the CA of the clients it
/// admits.
#[derive(Args, Clone, Debug, Default)]
pub struct ServerTlsArgs {
    /// Serve over TLS with this certificate chain (PEM, leaf first); needs --tls-key.
    /// Without it: plain TCP (loopback, benchmarks, or behind a TLS terminator).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Admit only clients whose certificate chains to this CA (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<std::path::PathBuf>,
}

impl ServerTlsArgs {
    pub fn tls(&self) -> Res<Option<net::ServerTls>> {
        Ok(match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Some(net::ServerTls::from_pem_files(
                c,
                k,
                self.tls_client_ca.as_deref(),
            )?),
            _ => None,
        })
    }
}

/// A client's TLS: the CA it trusts, the name it expects, its own certificate.
#[derive(Args, Clone, Debug, Default)]
pub struct ClientTlsArgs {
    /// Connect over TLS, trusting server certificates that chain to this CA (PEM).
    #[arg(long)]
    pub tls_ca: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry (default: the host of --connect).
    #[arg(long, requires = "tls_ca")]
    pub tls_server_name: Option<String>,
    /// This client's certificate (PEM), for servers that admit only known clients;
    /// needs --tls-key.
    #[arg(long, requires_all = ["tls_ca", "tls_key"])]
    pub tls_cert: Option<std::path::PathBuf>,
    /// This client's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
}

impl ClientTlsArgs {
    pub fn tls(&self) -> Res<Option<net::ClientTls>> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
            _ => None,
        };
        let mut tls = net::ClientTls::from_pem_files(ca, identity)?;
        if let Some(n) = &self.tls_server_name {
            tls = tls.with_server_name(n);
        }
        Ok(Some(tls))
    }
}

/// Planner options shared by `plan`, `inspect`, `infer`, `server` and `bench network`.
#[derive(Args, Clone, Debug)]
pub struct PlannerArgs {
    /// What the automatic choice minimises.
    #[arg(long, value_enum, default_value_t = ObjectiveArg::Time)]
    pub objective: ObjectiveArg,
    /// Under `--objective time`, the fraction of the fastest plan's predicted linear
    /// time the planner may give up for fewer bytes per inference (cheapest trades
    /// first; 0, the default: the fastest plan, which prices bytes by the link given).
    #[arg(long, default_value_t = protocol::DEFAULT_TIME_SLACK)]
    pub time_slack: f64,
    /// Per-op costs.
    #[arg(long, value_enum, default_value_t = CostsArg::Cached)]
    pub costs: CostsArg,
    /// Memory budget for encoded weights, MB; layers beyond it are encoded on the fly
    /// (their encoding counted in the plan's time); the layers that save the most time
    /// per byte are held first. Default: a third of the memory available now
    /// (`MemAvailable`), at most 2 GiB; 0 encodes every layer on the fly.
    #[arg(long)]
    pub mem_limit: Option<f64>,
    /// The most inputs one session may send (1 to 4096; default 4096, and for `infer`
    /// the inputs it runs): with the plan's responses per input it sizes every
    /// response's flooding, so fewer inputs per session mean smaller queries. A server
    /// refuses a session that asks for more.
    #[arg(long)]
    pub session_inputs: Option<u32>,
}

impl PlannerArgs {
    /// The memory budget in bytes (without `--mem-limit`,
    /// [`protocol::default_weight_memory`]).
    pub fn mem_limit_bytes(&self) -> Res<Option<u64>> {
        match self.mem_limit {
            Some(mb) if !(mb.is_finite() && mb >= 0.0) => {
                Err(format!("--mem-limit {mb}: give a size in MB ≥ 0").into())
            }
            Some(mb) => Ok(Some((mb * 1e6) as u64)),
            None => Ok(protocol::default_weight_memory()),
        }
    }
    /// The library's planning options with this link and method.
    pub fn planning(&self, link: Link, method: MethodChoice) -> Res<Planning> {
        if !(self.time_slack.is_finite() && self.time_slack >= 0.0) {
            return Err(format!("--time-slack {}: give a fraction ≥ 0", self.time_slack).into());
        }
        Ok(Planning {
            method,
            objective: self.objective.into(),
            time_slack: self.time_slack,
            costs: self.costs.into(),
            threads: None,
            mem_limit: self.mem_limit_bytes()?,
            link,
            session_inputs: self.session_inputs,
        })
    }
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

/// The fixed-point options every command that runs a network shares.
#[derive(Args, Clone, Debug)]
pub struct FixedPointArgs {
    /// Parameter preset, or auto: the cheapest plaintext modulus whose fixed point agrees
    /// with the float model within --tolerance (n8192, n8192-p24, n8192-p28, n8192-p32,
    /// n8192-p36, n8192-p40, n8192-p44).
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
    /// Truncate faithfully everywhere. By default the planner uses Cheetah's
    /// approximate truncation (about a third fewer COTs and bytes per ReLU) on the
    /// layers where the calibration inputs' outputs stay within the tolerance.
    #[arg(long)]
    pub faithful_truncation: bool,
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

impl FixedPointArgs {
    /// The library's fixed-point options for a model with input shape `sample`: the
    /// calibration file, else `default` (with what to call it) if there is no input
    /// range; and a description of the calibration.
    pub fn fixed_point(
        &self,
        sample: &[usize],
        default: Option<(Vec<Vec<f32>>, &'static str)>,
    ) -> Res<(FixedPoint, String)> {
        let (calibration, what) = match (&self.calibration, self.input_range, default) {
            (Some(path), _, _) => (Some(helina::array::read_batch(path, sample)?), path.clone()),
            (None, Some(_), _) => (
                None,
                format!(
                    "{} uniform samples from --input-range",
                    helina::RANGE_SAMPLES
                ),
            ),
            (None, None, Some((xs, what))) => (Some(xs), what.to_string()),
            (None, None, None) => {
                return Err("a network needs calibration data to choose its fixed point: give --calibration cal.npy (inputs like the real ones, batch first) or --input-range LO,HI".into())
            }
        };
        Ok((
            FixedPoint {
                params: (self.params != "auto").then(|| self.params.clone()),
                tolerance: self.tolerance,
                min_frac_bits: self.min_frac_bits,
                max_frac_bits: self.max_frac_bits,
                calibration,
                input_range: self.input_range,
                approximate_truncation: !self.faithful_truncation,
            },
            what,
        ))
    }
}

/// One line about the plan's float agreement and input range.
pub fn describe(prog: &nn::Program) -> String {
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
    let approximate = prog.approximate_steps().len();
    let truncations = prog.truncating_steps();
    format!(
        "float agreement {acc}; input range {range}; approximate truncation on {approximate} of {truncations} truncating steps"
    )
}

/// A built-in network (`--net NAME`) or an ONNX file (imported from its path, so that
/// weights in an external data file beside it are found), with its name.
pub fn network(model: &Option<String>, net: &Option<String>) -> Res<(String, nn::Network)> {
    match (model, net) {
        (Some(path), None) => Ok((path.clone(), nn::import(std::path::Path::new(path))?)),
        (None, Some(n)) => {
            let bytes = nn::zoo::onnx(n, 1).ok_or_else(|| {
                format!(
                    "unknown network `{n}`: {}",
                    nn::zoo::NETS
                        .iter()
                        .map(|(n, _, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            Ok((n.clone(), nn::import_bytes(&bytes)?))
        }
        _ => Err("give a model file (--model m.onnx) or --net NAME".into()),
    }
}

/// Whether `path` names a compiled model (`helina compile` writes `.helina` files).
pub fn is_compiled(path: &str) -> bool {
    path.ends_with(".helina")
}

/// Loads the compiled model at `path`, planned for this machine by `planning`, and
/// says where its calibration came from; a fixed point given on the command line is
/// refused (the file carries its own).
pub fn load_compiled(
    path: &str,
    fixed: &FixedPointArgs,
    planning: &helina::Planning,
) -> Res<(helina::Model, String)> {
    if fixed.calibration.is_some() || fixed.input_range.is_some() {
        return Err(format!("{path} is compiled: its fixed point and input range are saved in it (drop --calibration / --input-range, or give the ONNX model)").into());
    }
    Ok((
        helina::Model::load(path, planning)?,
        "the compiled model's calibration".to_string(),
    ))
}

/// The calibration of a built-in network when none is given (`infer`, `inspect`,
/// `bench network --as-served` choose the same fixed point), and what to call it.
pub fn builtin_calibration(len: usize) -> (Vec<Vec<f32>>, &'static str) {
    (
        seeded_inputs(11, 32, len),
        "32 seeded random inputs in [0, 1)",
    )
}

/// `n` seeded random inputs in [0, 1) of `len` values (public demo data for built-in
/// networks).
pub fn seeded_inputs(seed: u64, n: usize, len: usize) -> Vec<Vec<f32>> {
    use rand::{Rng, SeedableRng};
    let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..len).map(|_| r.random_range(0.0f32..1.0)).collect())
        .collect()
}
