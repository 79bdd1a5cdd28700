//! A planned layer (either kernel family) and the server's automatic choice of method:
//! every applicable method is run on the counting backend and priced
//! ([`kernels::estimate`]); the cheapest predicted time (server compute + transfer
//! over the link + one round trip) wins. Methods that cannot run on the parameters
//! (noise budget, key budget, slot count) are skipped.

use he::{Backend, Bfv, Counting, GaloisSpec, Params};
use kernels::{
    ConvLayout, CostModel, DepthwiseLayout, Estimate, FloodPool, GroupedLayout, LinearLayer,
    MatvecLayout,
};
use net::Link;
use rayon::prelude::*;

use crate::limits::responses_log2;
use crate::msg::{
    GroupedMethod, LayerMethod, LayerShape, LayerSpec, PlanError, ProtocolError, Result,
};

/// A planned layer.
#[derive(Clone, Debug)]
pub enum LayerLayout {
    /// Matrix-vector.
    Matvec(MatvecLayout),
    /// Convolution.
    Conv(Box<ConvLayout>),
    /// Depthwise convolution.
    Depthwise(Box<DepthwiseLayout>),
    /// Grouped convolution (a dense method per group).
    Grouped(Box<GroupedLayout>),
}

/// `$body` with `$p` bound to the plan of whichever kind (`&impl LinearLayer`).
macro_rules! with_layout {
    ($plan:expr, $p:ident => $body:expr) => {
        match $plan {
            LayerLayout::Matvec($p) => $body,
            LayerLayout::Conv($p) => {
                let $p = $p.as_ref();
                $body
            }
            LayerLayout::Depthwise($p) => {
                let $p = $p.as_ref();
                $body
            }
            LayerLayout::Grouped($p) => {
                let $p = $p.as_ref();
                $body
            }
        }
    };
}
pub(crate) use with_layout;

impl LayerLayout {
    /// Plans a layer spec on these parameters.
    pub fn new(spec: &LayerSpec, params: &Params) -> Result<LayerLayout> {
        let slots = he::SlotInfo {
            n: params.n(),
            p: params.p(),
            layout: he::Layout::TwoRows,
        };
        Ok(match spec {
            LayerSpec::Matvec { method, rows, cols } => {
                LayerLayout::Matvec(MatvecLayout::new(*method, *rows, *cols, slots)?)
            }
            LayerSpec::Conv { method, shape } => {
                let mut layout = ConvLayout::new(*method, *shape, slots)?;
                if params.weight_bound_bits().is_some() {
                    layout = layout.with_weight_bound(params.weight_bound_log2())?;
                }
                LayerLayout::Conv(Box::new(layout))
            }
            LayerSpec::Grouped {
                method: GroupedMethod::Depthwise,
                shape,
            } => LayerLayout::Depthwise(Box::new(DepthwiseLayout::new(*shape, slots)?)),
            LayerSpec::Grouped {
                method: GroupedMethod::PerGroup(m),
                shape,
            } => LayerLayout::Grouped(Box::new(GroupedLayout::new(*m, *shape, slots)?)),
        })
    }
    /// Galois keys.
    pub fn galois(&self) -> GaloisSpec {
        with_layout!(self, p => LinearLayer::galois(p))
    }
    /// Input length.
    pub fn input_len(&self) -> usize {
        with_layout!(self, p => p.input_len())
    }
    /// Independent units of the server's work (threads it can use).
    pub fn parallel(&self) -> usize {
        with_layout!(self, p => p.output_cts().max(p.query_cts()))
    }
    /// Predicted cost (fails if the parameters cannot afford the flooding).
    pub fn estimate(&self, params: &Params, model: &CostModel) -> Result<Estimate> {
        Ok(with_layout!(self, p => kernels::estimate(p, params, model)?))
    }
    /// Response ciphertexts per query.
    pub fn output_cts(&self) -> usize {
        with_layout!(self, p => p.output_cts())
    }
    /// Query ciphertexts.
    pub fn query_cts(&self) -> usize {
        with_layout!(self, p => p.query_cts())
    }
    /// The method's name.
    pub fn method_name(&self) -> String {
        with_layout!(self, p => p.method_name())
    }
    /// The flooding encryptions of zero for one query (the server's offline work).
    pub fn flood_pool(
        &self,
        b: &ServerBackend,
        params: &Params,
    ) -> Result<FloodPool<ServerBackend>> {
        let mut pool: FloodPool<ServerBackend> = with_layout!(self, p => p.flood_pool(params)?);
        pool.fill(b, self.output_cts())?;
        Ok(pool)
    }
    /// Bytes the server holds per query while answering: the flooding zeros (fresh
    /// ciphertexts at level 0) and the query and response ciphertexts.
    pub fn session_bytes(&self, params: &Params) -> u64 {
        let ct = params.ct_wire_size(0, false) as u64;
        (2 * self.output_cts() + self.query_cts()) as u64 * ct
    }
    /// Encodes the weights (offline; the encodings do not depend on any client). With a
    /// public weight bound on the parameters ([`Params::with_weight_bound`]), a weight
    /// beyond it is an error: the responses' flooding was sized by it.
    pub fn encode(self, b: &ServerBackend, weights: &[i64]) -> Result<Encoded> {
        if let Some(bits) = b.params().and_then(|p| p.weight_bound_bits()) {
            kernels::check_weight_bound(weights, bits)?;
        }
        Ok(match self {
            LayerLayout::Matvec(p) => {
                let m = p.encode_weights(b, weights)?;
                Encoded::Matvec(p, m)
            }
            LayerLayout::Conv(p) => {
                let m = p.encode_weights(b, weights)?;
                Encoded::Conv(p, m)
            }
            LayerLayout::Depthwise(p) => {
                let m = p.encode_weights(b, weights)?;
                Encoded::Depthwise(p, m)
            }
            LayerLayout::Grouped(p) => {
                let m = p.encode_weights(b, weights)?;
                Encoded::Grouped(p, m)
            }
        })
    }
    /// One query answered with the weights encoded now (a layer beyond the memory
    /// budget): the weight bound checked as in [`LayerLayout::encode`], then as
    /// [`Encoded::answer`], with the method's on-the-fly kernel.
    pub fn answer_on_the_fly(
        &self,
        b: &ServerBackend,
        weights: &[i64],
        pool: &mut FloodPool<ServerBackend>,
        cts: &[Vec<u8>],
    ) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
        if let Some(bits) = b.params().and_then(|p| p.weight_bound_bits()) {
            kernels::check_weight_bound(weights, bits)?;
        }
        with_layout!(self, p => answer_on_the_fly(p, b, weights, pool, cts))
    }
}

/// The backend a server computes with: fhe.rs BFV with the client's public keys only,
/// counting its operations.
pub type ServerBackend = Counting<Bfv>;

/// A planned layer with its weights encoded (NTT-form prepared plaintexts).
/// Encodings depend on the weights and the parameters only, so a server makes them once
/// and shares them between sessions ([`Bfv::encoder`]).
pub enum Encoded {
    /// Matrix-vector.
    Matvec(MatvecLayout, kernels::EncodedMatrix<ServerBackend>),
    /// Convolution.
    Conv(Box<ConvLayout>, kernels::EncodedFilters<ServerBackend>),
    /// Depthwise convolution.
    Depthwise(Box<DepthwiseLayout>, kernels::EncodedFilters<ServerBackend>),
    /// Grouped convolution.
    Grouped(Box<GroupedLayout>, kernels::EncodedGroups<ServerBackend>),
}

impl Encoded {
    /// The layout.
    pub fn layout(&self) -> LayerLayout {
        match self {
            Encoded::Matvec(p, _) => LayerLayout::Matvec(p.clone()),
            Encoded::Conv(p, _) => LayerLayout::Conv(p.clone()),
            Encoded::Depthwise(p, _) => LayerLayout::Depthwise(p.clone()),
            Encoded::Grouped(p, _) => LayerLayout::Grouped(p.clone()),
        }
    }
    /// One query answered: validate and read the ciphertexts, run the kernel and
    /// `share_output`, serialise the response; returns it and the server's share.
    pub fn answer(
        &self,
        b: &ServerBackend,
        pool: &mut FloodPool<ServerBackend>,
        cts: &[Vec<u8>],
    ) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
        match self {
            Encoded::Matvec(p, m) => answer(p, b, m, pool, cts),
            Encoded::Conv(p, m) => answer(p.as_ref(), b, m, pool, cts),
            Encoded::Depthwise(p, m) => answer(p.as_ref(), b, m, pool, cts),
            Encoded::Grouped(p, m) => answer(p.as_ref(), b, m, pool, cts),
        }
    }
}

/// One query answered by a kernel: the ciphertext count checked, each ciphertext
/// validated while deserialised, the kernel and `share_output` run, the response
/// serialised.
pub(crate) fn answer<L: LinearLayer>(
    layout: &L,
    b: &ServerBackend,
    m: &L::Encoded<ServerBackend>,
    pool: &mut FloodPool<ServerBackend>,
    cts: &[Vec<u8>],
) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
    on_the_wire(layout, b, cts, |q| Ok(layout.respond(b, m, q, pool)?))
}

/// [`answer`] with the weights encoded on the fly (`LinearLayer::respond_on_the_fly`).
fn answer_on_the_fly<L: LinearLayer>(
    layout: &L,
    b: &ServerBackend,
    weights: &[i64],
    pool: &mut FloodPool<ServerBackend>,
    cts: &[Vec<u8>],
) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
    on_the_wire(layout, b, cts, |q| {
        Ok(layout.respond_on_the_fly(b, weights, q, pool)?)
    })
}

/// The query read from the wire (count checked, each ciphertext validated while
/// deserialised, in parallel), `respond` run on it, the response serialised.
fn on_the_wire<L: LinearLayer>(
    layout: &L,
    b: &ServerBackend,
    cts: &[Vec<u8>],
    respond: impl FnOnce(&[he::BfvCt]) -> Result<(Vec<he::BfvCt>, Vec<u64>)>,
) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
    if cts.len() != layout.query_cts() {
        return Err(ProtocolError::Malformed {
            detail: format!(
                "query of {} ciphertexts, the layer takes {}",
                cts.len(),
                layout.query_cts()
            ),
        });
    }
    let q = cts
        .par_iter()
        .map(|c| b.deserialize(c))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let (resp, share) = respond(&q)?;
    let out = resp
        .par_iter()
        .map(|c| b.serialize(c))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((out, share))
}

/// One candidate method of the automatic choice.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The method.
    pub method: LayerMethod,
    /// Its estimate, or why it cannot run.
    pub estimate: std::result::Result<Estimate, ProtocolError>,
    /// Predicted time over the link, ms.
    pub predicted_ms: f64,
}

/// One method's estimate for a layer ([`Planner::estimates`]).
#[derive(Clone, Debug)]
pub struct MethodEstimate {
    /// The method.
    pub method: LayerMethod,
    /// Its estimate, or why it cannot run.
    pub estimate: std::result::Result<Estimate, ProtocolError>,
    /// Threads its kernel runs on.
    pub parallel: usize,
}

/// What the planner minimises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Objective {
    /// Predicted time: server compute (+ encoding on the fly) + client + transfer + round
    /// trip + the layer's Galois-key upload; over a network, up to [`Planner::time_slack`] of
    /// the fastest plan's time is then traded for fewer bytes
    /// ([`NetworkPlan::new`]).
    #[default]
    Time,
    /// Bytes on the wire: query + response + Galois keys.
    Bytes,
    /// Time and bytes, each relative to the layer's best candidate, summed.
    Balanced,
}

impl std::str::FromStr for Objective {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "time" => Ok(Objective::Time),
            "bytes" => Ok(Objective::Bytes),
            "balanced" => Ok(Objective::Balanced),
            _ => Err(format!("unknown objective `{s}` (time, bytes, balanced)")),
        }
    }
}

/// Costs every applicable method of a layer and picks one.
///
/// Predicted time = server compute (op counts × per-op costs of `model`, divided by the
/// threads the layer can use: its response ciphertexts are independent, so up to
/// `max(output_cts, query_cts)` threads) + encoding the weights when they are encoded on
/// the fly + the client's encryption and decryption (per ciphertext, same threads) +
/// bytes / bandwidth + one round trip + the layer's Galois keys over the link.
#[derive(Clone, Debug)]
pub struct Planner {
    /// Per-op costs (reference or measured here).
    pub model: CostModel,
    /// The link the prediction assumes.
    pub link: Link,
    /// What to minimise.
    pub objective: Objective,
    /// Server threads.
    pub threads: usize,
    /// Under [`Objective::Time`], the fraction of the fastest plan's predicted linear
    /// time a network plan may give up for fewer bytes per inference, the trades that
    /// cost the least time per byte saved first ([`NetworkPlan::new`]; 0: the fastest
    /// plan). Default [`DEFAULT_TIME_SLACK`].
    pub time_slack: f64,
    /// The most inputs a session of this plan may send (1 ..= [`crate::MAX_INPUTS_PER_SESSION`],
    /// the default): with the plan's responses per input it bounds the responses of a
    /// session, which sizes every response's flooding (`kernels::noise`): fewer inputs,
    /// less flooding, so queries rounded further. A server refuses a session that would
    /// take more responses ([`crate::ProtocolError::TooManyResponses`]).
    pub session_inputs: u32,
}

/// The default [`Planner::time_slack`]: none, the fastest plan. With a link given
/// (`--link`, `--bandwidth`) the predicted time already prices every byte; without
/// one, trading time for bytes cost more than the bytes: on ResNet-50 (n = 8192, 2
/// threads, `bash bench/ab_time_slack.sh`, raw in `bench/results/ab-time-slack/`) a
/// slack of 0.15 moved 12 layers from Cheetah to `bsgs`, HELiKs and `gazelle-in` for
/// 73 MB fewer per inference (977 → 904 MB) and 3-4 s more measured linear time
/// (20.2-20.8 s → 23.5-24.6 s), more than a 1 Gbit/s link takes to carry those bytes
/// (0.6 s). `--time-slack` sets it for slow links whose speed the planner is not told.
pub const DEFAULT_TIME_SLACK: f64 = 0.0;

impl Planner {
    /// The reference cost model, time objective, one thread.
    pub fn new(params: &Params, link: &Link) -> Self {
        Self {
            model: CostModel::reference(params),
            link: *link,
            objective: Objective::Time,
            threads: 1,
            time_slack: DEFAULT_TIME_SLACK,
            session_inputs: crate::MAX_INPUTS_PER_SESSION,
        }
    }

    /// The one cost formula, part 1: the server's compute time (ms) of `server_ms` of
    /// single-threaded work (+ `encode_ms` when the weights are encoded on the fly),
    /// divided by the threads the layer can use (its `parallel` independent units).
    pub fn server_ms(
        &self,
        server_ms: f64,
        encode_ms: f64,
        held_ms: f64,
        parallel: usize,
        on_the_fly: bool,
    ) -> f64 {
        (server_ms + if on_the_fly { encode_ms } else { held_ms }) / self.speedup(parallel)
    }

    /// The threads a layer of `parallel` independent units can use.
    fn speedup(&self, parallel: usize) -> f64 {
        self.threads.clamp(1, parallel.max(1)) as f64
    }

    /// Part 2: `bytes` over the link (bandwidth) plus one round trip, ms.
    pub fn wire_ms(&self, bytes: u64) -> f64 {
        let bytes_per_s = self.link.bandwidth_bps.map(|b| b / 8.0).unwrap_or(0.0);
        let transfer = if bytes_per_s > 0.0 {
            bytes as f64 / bytes_per_s * 1e3
        } else {
            0.0
        };
        transfer + self.link.rtt.as_secs_f64() * 1e3
    }

    /// Part 3: the client's time (ms) of `client_ms` of single-threaded work (encrypting
    /// the query, decrypting the response), divided by the threads it can use: the
    /// client runs on as many threads as the server ([`Planner::threads`]), one
    /// ciphertext each.
    pub fn client_ms(&self, client_ms: f64, parallel: usize) -> f64 {
        client_ms / self.speedup(parallel)
    }

    /// Predicted time (ms) of one candidate: server compute + the client's encryption
    /// and decryption + query and response over the link + one round trip + the layer's
    /// Galois keys over the link; `on_the_fly` adds encoding the weights.
    pub fn predicted_ms(&self, e: &Estimate, parallel: usize, on_the_fly: bool) -> f64 {
        let keys = e.galois_keys as u64 * self.model.galois_key_bytes;
        let keys_ms = self.wire_ms(keys) - self.wire_ms(0);
        self.server_ms(
            e.server_ms,
            e.encode_on_the_fly_ms,
            e.held_products_ms,
            parallel,
            on_the_fly,
        ) + self.client_ms(e.client_ms, parallel)
            + self.wire_ms(e.bytes_up + e.bytes_down)
            + keys_ms
    }

    /// Every candidate of a layer, and the pick by the objective. With `on_the_fly`
    /// the weights are encoded online and their encoding is part of the time.
    pub fn choose(
        &self,
        shape: &LayerShape,
        params: &Params,
        on_the_fly: bool,
    ) -> Result<(LayerSpec, Vec<Candidate>)> {
        self.pick(shape, &self.estimates(shape, params), on_the_fly)
    }

    /// Every method's estimate for a layer, with the threads its kernel runs on: what
    /// [`Planner::pick`] chooses from, the same whether the weights are held or encoded
    /// per query.
    pub fn estimates(&self, shape: &LayerShape, params: &Params) -> Vec<MethodEstimate> {
        shape
            .methods()
            .into_iter()
            .map(|method| {
                let planned = shape
                    .with(method)
                    .and_then(|s| LayerLayout::new(&s, params));
                let (estimate, parallel) = match planned {
                    Ok(p) => (p.estimate(params, &self.model), p.parallel()),
                    Err(e) => (Err(e), 1),
                };
                MethodEstimate {
                    method,
                    estimate,
                    parallel,
                }
            })
            .collect()
    }

    /// [`Planner::choose`] from a layer's [`Planner::estimates`].
    pub fn pick(
        &self,
        shape: &LayerShape,
        estimates: &[MethodEstimate],
        on_the_fly: bool,
    ) -> Result<(LayerSpec, Vec<Candidate>)> {
        let candidates: Vec<Candidate> = estimates
            .iter()
            .map(|m| Candidate {
                method: m.method,
                predicted_ms: m
                    .estimate
                    .as_ref()
                    .map(|e| self.predicted_ms(e, m.parallel, on_the_fly))
                    .unwrap_or(f64::INFINITY),
                estimate: m.estimate.clone(),
            })
            .collect();
        let bytes = |c: &Candidate| {
            c.estimate
                .as_ref()
                .map(|e| {
                    (e.bytes_up + e.bytes_down + e.galois_keys as u64 * self.model.galois_key_bytes)
                        as f64
                })
                .unwrap_or(f64::INFINITY)
        };
        let ok: Vec<&Candidate> = candidates.iter().filter(|c| c.estimate.is_ok()).collect();
        let min_ms = ok
            .iter()
            .map(|c| c.predicted_ms)
            .fold(f64::INFINITY, f64::min);
        let min_bytes = ok.iter().map(|c| bytes(c)).fold(f64::INFINITY, f64::min);
        let score = |c: &Candidate| match self.objective {
            Objective::Time => c.predicted_ms,
            Objective::Bytes => bytes(c),
            Objective::Balanced => {
                c.predicted_ms / min_ms.max(1e-9) + bytes(c) / min_bytes.max(1.0)
            }
        };
        let best = ok
            .iter()
            .min_by(|a, b| score(a).total_cmp(&score(b)))
            .ok_or(ProtocolError::NoMethod { layer: *shape })?;
        Ok((shape.with(best.method)?, candidates))
    }
}

/// Picks the method with the lowest predicted time for a layer (reference per-op costs,
/// one thread, weights held in memory); returns the pick and every candidate.
pub fn choose(
    shape: &LayerShape,
    params: &Params,
    link: &Link,
) -> Result<(LayerSpec, Vec<Candidate>)> {
    Planner::new(params, link).choose(shape, params, false)
}

/// Which method the linear layers of a network use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MethodChoice {
    /// The planner's pick per layer.
    #[default]
    Auto,
    /// This method (by name) for every layer it applies to; the planner's pick for the
    /// others.
    Named(String),
    /// The method of each linear step, by step index (a saved model's plan); the
    /// planner's pick for steps not listed.
    PerStep(Vec<(usize, LayerMethod)>),
}

impl MethodChoice {
    /// `auto`, or a method name that some kind of layer has (else an error naming it).
    pub fn parse(s: &str) -> Result<Self> {
        if s == "auto" {
            return Ok(MethodChoice::Auto);
        }
        if kernels::Method::parse(s).is_none()
            && kernels::ConvMethod::parse(s).is_none()
            && s != "depthwise"
        {
            return Err(ProtocolError::UnknownMethod {
                name: s.to_string(),
            });
        }
        Ok(MethodChoice::Named(s.to_string()))
    }
    fn fixed(&self, step: usize, shape: &LayerShape) -> Option<LayerMethod> {
        match self {
            MethodChoice::Auto => None,
            MethodChoice::Named(n) => LayerMethod::parse(shape, n),
            MethodChoice::PerStep(m) => m.iter().find(|(s, _)| *s == step).map(|(_, m)| *m),
        }
    }
}

/// One linear step of a [`NetworkPlan`].
#[derive(Clone, Debug)]
pub struct LayerPick {
    /// Step index in the program.
    pub step: usize,
    /// Layer name.
    pub name: String,
    /// Shape.
    pub shape: LayerShape,
    /// The method it runs.
    pub pick: LayerSpec,
    /// Every candidate method with its estimate (or why it cannot run).
    pub candidates: Vec<Candidate>,
    /// Its weights are encoded per query (beyond the memory budget) instead of held.
    pub on_the_fly: bool,
}

impl LayerPick {
    /// The pick's candidate.
    pub fn picked(&self) -> Option<&Candidate> {
        self.candidates
            .iter()
            .find(|c| c.method == self.pick.method())
    }
    /// Bytes of the pick's encoded weights (what holding them takes).
    pub fn encoded_bytes(&self) -> u64 {
        self.picked()
            .and_then(|c| c.estimate.as_ref().ok())
            .map_or(0, |e| e.encoded_bytes)
    }
}

/// The most the default budget gives encoded weights, bytes (2 GiB). Holding a layer's
/// encoding saves its encoding per query, about 0.4-0.6 ms per MB held per inference on
/// ResNet-50's layers (`helina plan --mem-limit 0` against an unlimited budget), so
/// beyond a few GB a server's memory buys little time; a larger `mem_limit` is the
/// operator's choice.
pub const DEFAULT_WEIGHT_MEMORY_CAP: u64 = 2 << 30;

/// The default memory budget for a server's encoded weights: a third of the memory
/// available now (`MemAvailable` in /proc/meminfo), at most
/// [`DEFAULT_WEIGHT_MEMORY_CAP`]; the cap alone where the available memory cannot be
/// read. ResNet-50's coefficient-encoded filters alone take ~13 GB (the 1x1 filters held
/// as their small transforms, `he::Backend::prepare_coeffs_strided`), so a server that
/// held everything by default would not start on a common machine.
pub fn default_weight_memory() -> Option<u64> {
    let available = || -> Option<u64> {
        let s = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024 / 3)
    };
    Some(available().map_or(DEFAULT_WEIGHT_MEMORY_CAP, |a| {
        a.min(DEFAULT_WEIGHT_MEMORY_CAP)
    }))
}

/// A network's plan, computed once: the fixed-point program, its parameter set, and per
/// linear step the method, whether its weights are held or encoded per query, and the
/// predicted cost. A server runs it ([`crate::NetworkServer::new`]) and sends its
/// methods to the client; `helina plan`, `inspect` and `bench network` print or iterate
/// it.
#[derive(Clone, Debug)]
pub struct NetworkPlan {
    /// The parameter set.
    pub params: Params,
    /// The fixed-point program (with its weights).
    pub program: nn::Program,
    /// The linear steps, in order.
    pub layers: Vec<LayerPick>,
}

impl NetworkPlan {
    /// Plans every linear step of `program` with `planner`: the method (`method`, else
    /// the pick by the planner's objective), and which weights are held within
    /// `mem_limit` bytes: those whose encoding per query would cost the most time per
    /// byte held first; the others are encoded per query (and planned with that encoding
    /// in their time). `max_layers` stops after that many linear steps. The
    /// plan's parameters carry the program's weight bound and the session's response
    /// bound ([`Params::with_session_responses`]: [`Planner::session_inputs`] inputs of
    /// this plan's responses), both of which size the flooding.
    pub fn new(
        program: nn::Program,
        params: &Params,
        planner: &Planner,
        mem_limit: Option<u64>,
        method: &MethodChoice,
        max_layers: Option<usize>,
    ) -> Result<Self> {
        if program.p != params.p() {
            return Err(PlanError::Modulus {
                program: program.p,
                params: params.p(),
            }
            .into());
        }
        // The program's public weight bound sizes the noise of coefficient-encoded
        // kernels: it must hold for the weights served.
        if let Some(bits) = program
            .weight_bound_bits
            .filter(|&b| !program.weights_within(b))
        {
            return Err(PlanError::WeightBound { bits }.into());
        }
        let params = params.with_weight_bound(program.weight_bound_bits);
        // the flooding is sized for the session's responses, which the methods decide:
        // plan, count, and plan again until the bound covers them
        let he_steps = program
            .steps
            .iter()
            .filter(|s| {
                crate::engine::layer_shape(s).is_some() || matches!(s, nn::Step::Square { .. })
            })
            .count() as u64;
        let inputs = planner.session_inputs;
        if !(1..=crate::MAX_INPUTS_PER_SESSION).contains(&inputs) {
            return Err(ProtocolError::TooManyInputs {
                requested: inputs as u64,
                max: crate::MAX_INPUTS_PER_SESSION as u64,
            });
        }
        let (layers, params) = settle_responses(&params, inputs, he_steps, |params| {
            let layers =
                Self::plan_layers(&program, params, planner, mem_limit, method, max_layers)?;
            let per_input = responses_per_input(&program, &layers, params)?;
            Ok((layers, per_input))
        })?;
        Ok(Self {
            params,
            program,
            layers,
        })
    }

    /// The method of every linear step on `params` (see [`NetworkPlan::new`]).
    fn plan_layers(
        program: &nn::Program,
        params: &Params,
        planner: &Planner,
        mem_limit: Option<u64>,
        method: &MethodChoice,
        max_layers: Option<usize>,
    ) -> Result<Vec<LayerPick>> {
        let linear: Vec<(usize, &nn::Step, LayerShape)> = program
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, step)| crate::engine::layer_shape(step).map(|s| (i, step, s)))
            .take(max_layers.unwrap_or(usize::MAX))
            .collect();
        // Each distinct layer shape is estimated once, on all cores (a network repeats
        // its shapes: the blocks of a ResNet stage share theirs), and priced held or
        // encoded per query from the same estimates.
        let shapes: std::collections::HashSet<LayerShape> =
            linear.iter().map(|(_, _, shape)| *shape).collect();
        let estimates: std::collections::HashMap<LayerShape, Vec<MethodEstimate>> = shapes
            .into_par_iter()
            .map(|shape| (shape, planner.estimates(&shape, params)))
            .collect();
        let plan_one = |i: usize,
                        shape: &LayerShape,
                        on_the_fly: bool|
         -> Result<(LayerSpec, Vec<Candidate>)> {
            let e = estimates.get(shape).ok_or(PlanError::Missing {
                what: "estimates of the layer shape of step",
                index: i,
            })?;
            let (auto, candidates) = planner.pick(shape, e, on_the_fly)?;
            Ok(match method.fixed(i, shape) {
                Some(m) => (shape.with(m)?, candidates),
                None => (auto, candidates),
            })
        };
        let fixed: Vec<bool> = linear
            .iter()
            .map(|(i, _, shape)| method.fixed(*i, shape).is_some())
            .collect();
        let mut layers = linear
            .into_par_iter()
            .map(|(i, step, shape)| {
                let (pick, candidates) = plan_one(i, &shape, false)?;
                Ok(LayerPick {
                    step: i,
                    name: step.name().to_string(),
                    shape,
                    pick,
                    candidates,
                    on_the_fly: false,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Which weights are held: those whose encoding per query would add time, by
        // that time per byte held, the most first, while they fit the budget; the
        // others are planned as encoded per query (a layer whose held weights are
        // predicted no faster than encoding per query, such as a 1x1 layer held as
        // strided transforms on a CPU whose NTT-form products are faster, is encoded
        // per query whatever the budget).
        let limit = mem_limit.unwrap_or(u64::MAX);
        let mut held: u64 = 0;
        let mut gains = layers
            .par_iter()
            .enumerate()
            .filter(|(_, l)| l.encoded_bytes() > 0)
            .map(|(k, l)| {
                let bytes = l.encoded_bytes();
                let per_query = plan_one(l.step, &l.shape, true)?;
                let ms = |c: Option<&Candidate>| c.map_or(f64::INFINITY, |c| c.predicted_ms);
                let saved = ms(per_query
                    .1
                    .iter()
                    .find(|c| c.method == per_query.0.method()))
                    - ms(l.picked());
                let rate = saved / bytes as f64;
                Ok((if rate.is_nan() { 0.0 } else { rate }, k, bytes, per_query))
            })
            .collect::<Result<Vec<_>>>()?;
        gains.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (rate, k, bytes, (pick, candidates)) in gains {
            if rate > 0.0 && held + bytes <= limit {
                held += bytes;
            } else {
                let l = &mut layers[k];
                (l.pick, l.candidates, l.on_the_fly) = (pick, candidates, true);
            }
        }
        // A layer whose pick did not fit may still hold another method's smaller
        // encoding (a Cheetah 1x1 layer in padded tiles holds its filters 2^a times
        // smaller) if that beats encoding its pick per query: per layer the held
        // candidate that saves the most time per byte, layers in that order, while
        // they fit.
        let mut smaller = Vec::new();
        for (k, l) in layers.iter().enumerate() {
            if !l.on_the_fly || fixed[k] {
                continue;
            }
            let fly_ms = l.picked().map_or(f64::INFINITY, |c| c.predicted_ms);
            let (_, candidates) = plan_one(l.step, &l.shape, false)?;
            let best = candidates
                .iter()
                .filter_map(|c| {
                    let bytes = c.estimate.as_ref().ok()?.encoded_bytes;
                    let rate = (fly_ms - c.predicted_ms) / bytes.max(1) as f64;
                    (rate > 0.0 && held + bytes <= limit).then_some((rate, bytes, c.method))
                })
                .max_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((rate, bytes, m)) = best {
                smaller.push((rate, k, bytes, l.shape.with(m)?, candidates));
            }
        }
        smaller.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, k, bytes, pick, candidates) in smaller {
            if held + bytes <= limit {
                held += bytes;
                let l = &mut layers[k];
                (l.pick, l.candidates, l.on_the_fly) = (pick, candidates, false);
            }
        }
        if planner.objective == Objective::Time && planner.time_slack > 0.0 {
            trade_time_for_bytes(&mut layers, &fixed, planner.time_slack, mem_limit, held);
        }
        Ok(layers)
    }

    /// Every linear step with the planner's pick on the reference costs, all weights
    /// held (tests, single sessions).
    pub fn auto(program: nn::Program, params: &Params) -> Result<Self> {
        let planner = Planner::new(params, &Link::NONE);
        Self::new(program, params, &planner, None, &MethodChoice::Auto, None)
    }

    /// The method of every step of the program (`None` for steps that are not linear).
    pub fn methods(&self) -> Vec<Option<LayerSpec>> {
        let mut m = vec![None; self.program.steps.len()];
        for l in &self.layers {
            m[l.step] = Some(l.pick.clone());
        }
        m
    }
    /// The plan of step `step`, if it is a linear step.
    pub fn step(&self, step: usize) -> Option<&LayerPick> {
        self.layers.iter().find(|l| l.step == step)
    }
    /// Predicted time of the linear steps, ms.
    pub fn predicted_ms(&self) -> f64 {
        self.layers
            .iter()
            .filter_map(|l| l.picked())
            .map(|c| c.predicted_ms)
            .sum()
    }
    /// Bytes of the encoded weights held (the layers not encoded per query).
    pub fn held_bytes(&self) -> u64 {
        self.layers
            .iter()
            .filter(|l| !l.on_the_fly)
            .map(LayerPick::encoded_bytes)
            .sum()
    }
}

/// Flooded responses one input of `program` receives with these layer plans: every
/// linear step's and every Square's response ciphertexts.
fn responses_per_input(
    program: &nn::Program,
    layers: &[LayerPick],
    params: &Params,
) -> Result<u64> {
    let mut n = 0u64;
    for l in layers {
        n += LayerLayout::new(&l.pick, params)?.output_cts() as u64;
    }
    for s in &program.steps {
        if let nn::Step::Square { input, .. } = s {
            let len = program
                .tensors
                .get(*input)
                .ok_or(PlanError::Missing {
                    what: "tensor",
                    index: *input,
                })?
                .len();
            n += kernels::SquareLayout::new(len, crate::engine::slots(params))?.output_cts() as u64;
        }
    }
    Ok(n)
}

/// Plans with the session's response bound settled: `plan(params)` plans on parameters
/// with a bound and says how many responses one input then takes; the bound starts at
/// `inputs` inputs of `at_least` responses and grows until it covers the plan made
/// with it (a larger bound only raises the flooding, so this ends after a few rounds).
/// Returns the plan and its parameters.
pub(crate) fn settle_responses<T>(
    params: &Params,
    inputs: u32,
    at_least: u64,
    mut plan: impl FnMut(&Params) -> Result<(T, u64)>,
) -> Result<(T, Params)> {
    let mut log2 = responses_log2(inputs, at_least);
    for _ in 0..8 {
        let p = params.with_session_responses(log2);
        let (t, per_input) = plan(&p)?;
        let need = responses_log2(inputs, per_input);
        if need <= log2 {
            return Ok((t, p));
        }
        log2 = need;
    }
    Err(ProtocolError::Internal {
        detail: "the session's response bound did not settle".into(),
    })
}

/// The parameters a single layer `spec` is served with on its own: `params` with the
/// response bound of [`crate::MAX_INPUTS_PER_SESSION`] queries of it.
pub fn layer_params(params: &Params, spec: &LayerSpec) -> Result<Params> {
    settle_responses(params, crate::MAX_INPUTS_PER_SESSION, 1, |p| {
        Ok(((), LayerLayout::new(spec, p)?.output_cts() as u64))
    })
    .map(|(_, p)| p)
}

/// Bytes on the wire per inference of a candidate (query + response; the Galois keys
/// go once per session), or `None` when it cannot run.
fn online_bytes(c: &Candidate) -> Option<u64> {
    c.estimate.as_ref().ok().map(|e| e.bytes_up + e.bytes_down)
}

/// Gives up to `slack` of the plan's predicted time for fewer bytes per inference: of
/// every switch of a layer (not fixed by the user) to another of its candidates that
/// saves bytes and still fits the time allowance, the one costing the least time per
/// byte saved, until none fits. A layer whose weights are held switches only while the
/// held encodings stay within `mem_limit` (`held` bytes are held now); a layer encoded
/// on the fly was costed that way already.
fn trade_time_for_bytes(
    layers: &mut [LayerPick],
    fixed: &[bool],
    slack: f64,
    mem_limit: Option<u64>,
    mut held: u64,
) {
    let total: f64 = layers
        .iter()
        .filter_map(|l| l.picked())
        .map(|c| c.predicted_ms)
        .sum();
    let allowance = total * (1.0 + slack);
    let mut total = total;
    loop {
        // (ms per byte saved, layer, candidate, Δms, Δheld)
        let mut best: Option<(f64, usize, usize, f64, i128)> = None;
        for (i, l) in layers.iter().enumerate() {
            if fixed.get(i).copied().unwrap_or(true) {
                continue;
            }
            let Some(cur) = l.picked() else { continue };
            let (Some(cur_bytes), Ok(cur_est)) = (online_bytes(cur), cur.estimate.as_ref()) else {
                continue;
            };
            for (j, c) in l.candidates.iter().enumerate() {
                let (Some(bytes), Ok(est)) = (online_bytes(c), c.estimate.as_ref()) else {
                    continue;
                };
                if bytes >= cur_bytes || !c.predicted_ms.is_finite() {
                    continue;
                }
                let dt = c.predicted_ms - cur.predicted_ms;
                if total + dt > allowance {
                    continue;
                }
                let dheld = if l.on_the_fly {
                    0
                } else {
                    est.encoded_bytes as i128 - cur_est.encoded_bytes as i128
                };
                if mem_limit.is_some_and(|m| held as i128 + dheld > m as i128) {
                    continue;
                }
                let rate = dt.max(0.0) / (cur_bytes - bytes) as f64;
                if best.as_ref().is_none_or(|b| rate < b.0) {
                    best = Some((rate, i, j, dt, dheld));
                }
            }
        }
        let Some((_, i, j, dt, dheld)) = best else {
            break;
        };
        let l = &mut layers[i];
        let Ok(pick) = l.shape.with(l.candidates[j].method) else {
            break;
        };
        l.pick = pick;
        total += dt;
        held = (held as i128 + dheld).max(0) as u64;
    }
}
