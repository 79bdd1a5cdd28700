//! The two-party nonlinear step over shares mod p with silent OT, mirroring
//! `gc::protocol`: `client_offline`/`server_offline` before the inputs are known,
//! `client_online`/`server_online` after, and `run_local`/`run_over` for both parties in
//! two threads.
//!
//! **Semantics** (identical to `gc::NonlinSpec` / `gc::reference`): inputs are additive
//! shares `x_C + x_S ≡ y (mod p)` of `spec.inputs()` values, `y` read centred in
//! `(−p/2, p/2)`; each output is the op (`Relu`, `Identity`, `Max`, `MaxPool` over
//! `window` consecutive inputs) of the centred values, floored by `2^trunc_bits`
//! (arithmetic shift), reduced mod p, and freshly re-shared: each party's output share
//! alone is uniform. With [`Truncation::Approximate`] the floor may be one too small
//! (see [`crate::layer`] for exactly when); `Faithful` is exact.
//!
//! **Roles**: the client holds the value in the big millionaire (it is the OT receiver
//! of the leaf OTs, COT direction SC) and the server the thresholds, so the server
//! builds the `2^m`-entry leaf tables; the faithful truncation's small millionaire
//! runs the other way (server = receiver, direction CS), the multiplexers run both
//! ways, the truncation corrections are sent by the client (it holds `z_C`) and chosen
//! by the server, and the AND triples use one COT of each direction. The protocol is
//! symmetric up to these choices: swapping the roles would move work, not bytes.
//!
//! **Offline** (inputs unknown): both sides send a hello (layer description, session
//! layer index and pool positions: any difference is an error), reserve the COTs of the
//! layer in both pools (refilling by silent batches if short: the only offline traffic
//! besides the hello), and derive all OT pads and AND triples locally. **Online**: the
//! steps of [`crate::layer`], each a [`crate::program`] scheduled into alternating
//! flights.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use gc::{NonlinSpec, Nonlinear};
use net::{Channel, Link, MemChannel};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::bits::BitVec;
use crate::error::{expect_len, OtError, Result};
use crate::layer::{self, Stage, Step, StepShape};
use crate::program;
use crate::session::{refill_rounds, Dir, OtSession, Role};
use crate::silent::SilentParams;

/// Wire-format version of the layer hello (4: the PPRF on half-trees without a leaf
/// correction; 5: silent batches of 512 trees by default).
pub const VERSION: u32 = 5;
/// Most input shares per layer (bounds every allocation of a layer).
pub const MAX_INPUTS: usize = 1 << 24;

/// The most bits [`OtSpec::coarse_drelu_bits`] may leave out.
pub const MAX_COARSE_DRELU_BITS: u32 = 16;

/// How truncation rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Truncation {
    /// `⌊y / 2^f⌋` exactly, as `gc::reference`.
    #[default]
    Faithful,
    /// Cheetah-style: `⌊y / 2^f⌋` or one less (never more); cheaper.
    Approximate,
}

impl std::str::FromStr for Truncation {
    type Err = OtError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "faithful" => Ok(Truncation::Faithful),
            "approximate" | "approx" => Ok(Truncation::Approximate),
            _ => Err(OtError::InvalidSpec(format!(
                "truncation must be `faithful` or `approximate`, not `{s}`"
            ))),
        }
    }
}

/// A nonlinear layer for the OT backend: `gc`'s description plus the truncation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtSpec {
    /// The layer (same meaning as for `gc`).
    pub spec: NonlinSpec,
    /// Faithful or approximate truncation (irrelevant when `trunc_bits = 0`).
    pub trunc: Truncation,
    /// Every input of a `Max`/`MaxPool` layer lies in `(−p/4, p/4)` (the caller's
    /// bound): `a − b` cannot wrap, so each comparison is `DReLU(a − b)` alone, without
    /// the inputs' signs (about half the COTs of a 3×3 window). Inputs outside give
    /// wrong maxima, not an error: the shares hide them.
    #[serde(default)]
    pub inputs_within_quarter: bool,
    /// Every input `Y` of a step that truncates (offset included) satisfies
    /// `|Y| ≤ (p − 1)/2 − 2^f` (the caller's bound; `nn` programs keep it): the DReLU of
    /// ReLU, Identity and a MaxPool's last step then compares only the `ℓ − f − 1` bits
    /// above the truncated ones (`crate::layer`, "high-bits DReLU"), `f + 1` fewer
    /// COTs and leaf bits per element. Faithful results are unchanged; approximate ReLU
    /// results change only where they were one below an exact 0
    /// ([`approx_trunc`]). Inputs outside the bound give wrong results, not an error.
    #[serde(default)]
    pub high_bits_drelu: bool,
    /// With [`OtSpec::high_bits_drelu`] and approximate truncation of a ReLU or Identity
    /// step: the DReLU leaves out this many more bits (`crate::layer`, "coarse DReLU"),
    /// one COT and leaf bit fewer per element each, and an AND group fewer per 3. The
    /// caller's bound becomes `|Y| ≤ (p − 1)/2 − 2^(f + coarse_drelu_bits)`. Identity
    /// results are unchanged; a ReLU's result may be 0 where `Y < 2^(f +
    /// coarse_drelu_bits)` ([`approx_trunc`] models when). At most
    /// [`MAX_COARSE_DRELU_BITS`].
    #[serde(default)]
    pub coarse_drelu_bits: u32,
    /// The windows of a `Max`/`MaxPool` layer are those of a `k×k` pooling with stride
    /// below `k` (gathered row by row, as `nn::reference::window_indices` lists them), so
    /// neighbouring windows share rows: the max runs separably, over each used input
    /// row's `k`-wide pieces once and then over `k` of those maxima per window
    /// (about 6 comparisons per 3×3/2 window instead of 8). The windows must be such a
    /// pooling's (the caller's layout): other inputs give wrong maxima, not an error.
    #[serde(default)]
    pub pooling: Option<Pooling>,
}

/// The geometry of a `k×k` pooling ([`OtSpec::pooling`]): `channels · out_h · out_w`
/// windows (the layer's count) of `k·k` inputs each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pooling {
    /// Window side.
    pub k: usize,
    /// Step between windows, `1 ≤ stride < k`.
    pub stride: usize,
    /// Output rows per channel.
    pub out_h: usize,
    /// Output columns per channel.
    pub out_w: usize,
}

impl Pooling {
    /// Input rows per channel the windows read: `(out_h − 1)·stride + k`.
    pub fn rows(&self) -> usize {
        self.out_h
            .saturating_sub(1)
            .saturating_mul(self.stride)
            .saturating_add(self.k)
    }
}

impl From<NonlinSpec> for OtSpec {
    fn from(spec: NonlinSpec) -> Self {
        OtSpec {
            spec,
            trunc: Truncation::Faithful,
            inputs_within_quarter: false,
            high_bits_drelu: false,
            coarse_drelu_bits: 0,
            pooling: None,
        }
    }
}

impl OtSpec {
    /// With faithful truncation.
    pub fn faithful(spec: NonlinSpec) -> Self {
        Self::from(spec)
    }

    /// With approximate truncation.
    pub fn approximate(spec: NonlinSpec) -> Self {
        OtSpec {
            spec,
            trunc: Truncation::Approximate,
            inputs_within_quarter: false,
            high_bits_drelu: false,
            coarse_drelu_bits: 0,
            pooling: None,
        }
    }

    /// With [`OtSpec::inputs_within_quarter`]: comparisons without signs.
    pub fn within_quarter(self) -> Self {
        OtSpec {
            inputs_within_quarter: true,
            ..self
        }
    }

    /// With [`OtSpec::high_bits_drelu`]: truncating steps compare the high bits only.
    pub fn high_bits(self) -> Self {
        OtSpec {
            high_bits_drelu: true,
            ..self
        }
    }

    /// With [`OtSpec::coarse_drelu_bits`]: the DReLU of an approximate step leaves out
    /// `bits` more bits.
    pub fn coarse(self, bits: u32) -> Self {
        OtSpec {
            coarse_drelu_bits: bits,
            ..self
        }
    }

    /// With [`OtSpec::pooling`]: the max of overlapping pooling windows runs separably.
    pub fn pooled(self, pooling: Pooling) -> Self {
        OtSpec {
            pooling: Some(pooling),
            ..self
        }
    }

    /// Checks the description (`gc`'s rules plus [`MAX_INPUTS`], and a pooling's
    /// geometry against the window and the count).
    pub fn validate(&self) -> Result<()> {
        self.spec.validate().map_err(|e| match e {
            gc::GcError::InvalidSpec(s) => OtError::InvalidSpec(s),
            e => OtError::InvalidSpec(e.to_string()),
        })?;
        if self.spec.inputs() > MAX_INPUTS {
            return Err(OtError::InvalidSpec(format!(
                "{} inputs exceed the limit of {MAX_INPUTS} per layer",
                self.spec.inputs()
            )));
        }
        let c = self.coarse_drelu_bits;
        if c > 0 {
            let s = &self.spec;
            if c > MAX_COARSE_DRELU_BITS
                || self.faithful_trunc()
                || !self.high_bits_drelu
                || s.trunc_bits == 0
                || !matches!(s.op, Nonlinear::Relu | Nonlinear::Identity)
            {
                return Err(OtError::InvalidSpec(format!(
                    "a coarse DReLU of {c} bits needs approximate truncation of a ReLU or \
                     Identity step with the high-bits DReLU, and at most \
                     {MAX_COARSE_DRELU_BITS} bits ({:?}, truncation by {} bits, {:?}, \
                     high bits {})",
                    s.op, s.trunc_bits, self.trunc, self.high_bits_drelu
                )));
            }
        }
        if let Some(g) = self.pooling {
            let s = &self.spec;
            let max = matches!(s.op, Nonlinear::Max { .. } | Nonlinear::MaxPool { .. });
            let per_channel = g.out_h.saturating_mul(g.out_w);
            if !max
                || g.k < 2
                || g.stride == 0
                || g.stride >= g.k
                || per_channel == 0
                || g.k.saturating_mul(g.k) != s.window()
                || !s.count.is_multiple_of(per_channel)
            {
                return Err(OtError::InvalidSpec(format!(
                    "pooling {g:?} does not fit {:?} over {} windows (needs Max/MaxPool, \
                     2 ≤ k, 1 ≤ stride < k, window k·k, count a multiple of out_h·out_w)",
                    s.op, s.count
                )));
            }
        }
        Ok(())
    }

    fn faithful_trunc(&self) -> bool {
        self.trunc == Truncation::Faithful
    }

    /// The steps of the layer.
    pub(crate) fn steps(&self) -> Vec<Step> {
        let s = &self.spec;
        let (n, f, faithful) = (s.count, s.trunc_bits, self.faithful_trunc());
        let high = self.high_bits_drelu && f > 0;
        let coarse = if high && !faithful {
            self.coarse_drelu_bits
        } else {
            0
        };
        if n == 0 {
            return vec![];
        }
        let single = |relu: bool| {
            if !relu && f == 0 {
                Step::Reshare { n }
            } else {
                Step::Core {
                    n,
                    relu,
                    f,
                    faithful,
                    high,
                    coarse,
                }
            }
        };
        match s.op {
            Nonlinear::Relu => vec![single(true)],
            Nonlinear::Identity => vec![single(false)],
            Nonlinear::Max { window } | Nonlinear::MaxPool { window } => {
                let relu = matches!(s.op, Nonlinear::MaxPool { .. });
                if window <= 1 {
                    return vec![single(relu)];
                }
                let signs = !self.inputs_within_quarter;
                let mut steps = Vec::new();
                let tree = |steps: &mut Vec<Step>, count: usize, window: usize, first: bool| {
                    let (mut w, mut first) = (window, first);
                    while w > 1 {
                        steps.push(Step::MaxLevel {
                            count,
                            w,
                            first,
                            signs,
                        });
                        w = w.div_ceil(2);
                        first = false;
                    }
                };
                match self.pooling {
                    Some(pooling) => {
                        // each used input row's k-wide pieces, then k of those per window
                        // (a geometry that does not fit is refused by `validate`)
                        let per_channel = pooling.out_h.saturating_mul(pooling.out_w).max(1);
                        let channels = n / per_channel;
                        steps.push(Step::Regroup {
                            pooling,
                            channels,
                            stage: Stage::Rows,
                        });
                        tree(
                            &mut steps,
                            channels * pooling.rows() * pooling.out_w,
                            pooling.k,
                            true,
                        );
                        steps.push(Step::Regroup {
                            pooling,
                            channels,
                            stage: Stage::Columns,
                        });
                        tree(&mut steps, n, pooling.k, false);
                    }
                    None => tree(&mut steps, n, window, true),
                }
                if f > 0 || (relu && !signs) {
                    // the truncation, or the ReLU of the maximum (its sign untracked)
                    steps.push(Step::Core {
                        n,
                        relu,
                        f,
                        faithful,
                        high,
                        coarse: 0,
                    });
                } else if relu {
                    steps.push(Step::Mux { n });
                }
                steps
            }
        }
    }

    fn shapes(&self) -> Vec<StepShape> {
        self.steps()
            .into_iter()
            .map(|s| s.shape(self.spec.p))
            .collect()
    }

    /// Upper estimate of the memory (bytes) one party's offline phase of this layer
    /// holds: the precomputed material kept until the online phase (leaf-OT pads,
    /// AND triples, OT pads into Z_p and the steps' circuits) plus the largest
    /// transient while computing it (one window of COTs, each take being consumed
    /// batch by batch; the triples' per-element pads; hashing scratch). The session's own buffers, in which
    /// the refills run, are [`SilentParams::session_memory_bytes`]. `u64::MAX` if the
    /// description is invalid ([`OtSpec::validate`]).
    pub fn precompute_bytes(&self) -> u64 {
        if self.validate().is_err() {
            return u64::MAX;
        }
        let shapes = self.shapes();
        let programs = shapes.iter().filter_map(|s| s.shape.as_ref());
        let held: usize = programs
            .clone()
            .map(|sh| sh.pre_bytes() + sh.circuit.approx_bytes())
            .sum();
        let transient = programs
            .map(|sh| sh.precompute_transient_bytes())
            .max()
            .unwrap_or(0);
        (held + transient) as u64
    }

    /// COTs the layer consumes in directions SC and CS.
    pub fn cots(&self) -> (usize, usize) {
        self.shapes()
            .iter()
            .filter_map(|s| s.shape.as_ref())
            .map(|s| s.cots())
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// Online flights (both directions counted), from the schedule: consecutive
    /// flights of the same party across steps merge into one.
    pub fn online_flights(&self) -> Result<usize> {
        self.validate()?;
        let mut owners: Vec<Role> = Vec::new();
        for s in self.shapes() {
            if let Some(sh) = &s.shape {
                owners.extend(program::flight_owners(sh, self.spec.p)?);
            }
        }
        owners.dedup();
        Ok(owners.len())
    }

    fn hello(&self, role: Role, session: &OtSession, layer: u64) -> [u8; HELLO_BYTES] {
        let s = &self.spec;
        let mut h = [0u8; HELLO_BYTES];
        let mut at = 0;
        let mut put = |b: &[u8]| {
            h[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        put(&VERSION.to_le_bytes());
        put(&[role as u8]);
        put(&s.p.to_le_bytes());
        put(&[op_code(s.op)]);
        put(&(s.window() as u64).to_le_bytes());
        put(&s.trunc_bits.to_le_bytes());
        put(&(s.count as u64).to_le_bytes());
        put(&[self.trunc as u8]);
        put(&self.coarse_drelu_bits.to_le_bytes());
        put(&layer.to_le_bytes());
        put(&session.position(Dir::Sc).to_le_bytes());
        put(&session.position(Dir::Cs).to_le_bytes());
        put(&(session.params().trees as u32).to_le_bytes());
        put(&(session.params().depth as u32).to_le_bytes());
        let g = self.pooling;
        for v in [
            g.map_or(0, |g| g.k),
            g.map_or(0, |g| g.stride),
            g.map_or(0, |g| g.out_h),
            g.map_or(0, |g| g.out_w),
        ] {
            put(&(v as u32).to_le_bytes());
        }
        h
    }
}

const HELLO_BYTES: usize = 4 + 1 + 8 + 1 + 8 + 4 + 8 + 1 + 4 + 8 + 8 + 8 + 4 + 4 + 4 * 4;

fn op_code(op: Nonlinear) -> u8 {
    match op {
        Nonlinear::Relu => 0,
        Nonlinear::MaxPool { .. } => 1,
        Nonlinear::Identity => 2,
        Nonlinear::Max { .. } => 3,
    }
}

fn hello_fields(h: &[u8]) -> [(&'static str, u64); 18] {
    let rd = |a: usize, n: usize| -> u64 {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&h[a..a + n]);
        u64::from_le_bytes(b)
    };
    [
        ("version", rd(0, 4)),
        ("role", rd(4, 1)),
        ("p", rd(5, 8)),
        ("op", rd(13, 1)),
        ("window", rd(14, 8)),
        ("trunc_bits", rd(22, 4)),
        ("count", rd(26, 8)),
        ("truncation", rd(34, 1)),
        ("coarse_drelu_bits", rd(35, 4)),
        ("layer", rd(39, 8)),
        ("pool_sc", rd(47, 8)),
        ("pool_cs", rd(55, 8)),
        ("trees", rd(63, 4)),
        ("depth", rd(67, 4)),
        ("pooling_k", rd(71, 4)),
        ("pooling_stride", rd(75, 4)),
        ("pooling_out_h", rd(79, 4)),
        ("pooling_out_w", rd(83, 4)),
    ]
}

fn check_hello(ours: &[u8], theirs: &[u8]) -> Result<()> {
    expect_len("layer hello", HELLO_BYTES, theirs.len())?;
    for ((field, o), (_, t)) in hello_fields(ours).into_iter().zip(hello_fields(theirs)) {
        let ok = if field == "role" { o != t } else { o == t };
        if !ok {
            return Err(OtError::SpecMismatch {
                field,
                ours: o,
                theirs: t,
            });
        }
    }
    Ok(())
}

/// Traffic and COT use of one layer's offline phase, as seen by one party.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerStats {
    /// COTs consumed in direction SC.
    pub cots_sc: u64,
    /// COTs consumed in direction CS.
    pub cots_cs: u64,
    /// Bytes of silent-OT refills the offline phase ran (both directions).
    pub refill_bytes: u64,
    /// Wall time of those refills on this side.
    pub refill_ms: f64,
    /// Amortised silent-OT bytes per COT of this session.
    pub bytes_per_cot: f64,
    /// Time this side waited for the peer's hello, ms: the peer still busy with its
    /// earlier steps (for the client, typically the server's flooding encryptions of the
    /// linear step before), not work of this layer.
    pub hello_wait_ms: f64,
}

struct LayerPre {
    role: Role,
    spec: OtSpec,
    steps: Vec<StepShape>,
    pres: Vec<Option<program::Pre>>,
    mask: ChaCha20Rng,
    stats: LayerStats,
}

/// The server's state between the phases.
pub struct ServerPre(LayerPre);
/// The client's state between the phases.
pub struct ClientPre(LayerPre);

impl std::fmt::Debug for ServerPre {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerPre({:?})", self.0.spec)
    }
}
impl std::fmt::Debug for ClientPre {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientPre({:?})", self.0.spec)
    }
}

impl ServerPre {
    /// COT use and refill traffic of the offline phase.
    pub fn stats(&self) -> LayerStats {
        self.0.stats
    }
}
impl ClientPre {
    /// COT use and refill traffic of the offline phase.
    pub fn stats(&self) -> LayerStats {
        self.0.stats
    }
}

impl OtSession {
    fn layer_offline<C: Channel>(&mut self, ch: &mut C, spec: &OtSpec) -> Result<LayerPre> {
        spec.validate()?;
        let role = self.role();
        let layer = self.layers();
        let ours = spec.hello(role, self, layer);
        // the peer's hello, and how long this side waited for it
        let hear = |ch: &mut C| -> Result<(Vec<u8>, f64)> {
            let t = std::time::Instant::now();
            let theirs = ch.recv_at_most(HELLO_BYTES)?;
            Ok((theirs, t.elapsed().as_secs_f64() * 1e3))
        };
        let (theirs, hello_wait_ms) = match role {
            Role::Server => {
                ch.send(&ours)?;
                hear(ch)?
            }
            Role::Client => {
                let heard = hear(ch)?;
                ch.send(&ours)?;
                heard
            }
        };
        check_hello(&ours, &theirs)?;
        let (sc, cs) = spec.cots();
        let mut pre = self.steps_offline(ch, spec, spec.shapes(), (sc, cs))?;
        pre.stats.hello_wait_ms = hello_wait_ms;
        Ok(pre)
    }

    /// Precomputes the given steps (after the hello).
    fn steps_offline<C: Channel>(
        &mut self,
        ch: &mut C,
        spec: &OtSpec,
        steps: Vec<StepShape>,
        (sc, cs): (usize, usize),
    ) -> Result<LayerPre> {
        let role = self.role();
        let before = self.stats().refill_bytes;
        let before_ms = self.stats().refill_ms;
        let mut pres = Vec::with_capacity(steps.len());
        for s in &steps {
            pres.push(match &s.shape {
                Some(sh) => Some(program::precompute(sh, self, ch, spec.spec.p)?),
                None => None,
            });
        }
        let refill_bytes = self.stats().refill_bytes - before;
        let refill_ms = self.stats().refill_ms - before_ms;
        let (_, mask) = self.next_layer();
        Ok(LayerPre {
            role,
            spec: *spec,
            steps,
            pres,
            mask,
            stats: LayerStats {
                cots_sc: sc as u64,
                cots_cs: cs as u64,
                refill_bytes,
                refill_ms,
                bytes_per_cot: self.bytes_per_cot(),
                hello_wait_ms: 0.0,
            },
        })
    }

    /// Server, offline phase of one layer in this session.
    pub fn server_offline<C: Channel>(&mut self, ch: &mut C, spec: &OtSpec) -> Result<ServerPre> {
        if self.role() != Role::Server {
            return Err(OtError::Misuse("server_offline on a client session"));
        }
        self.layer_offline(ch, spec).map(ServerPre)
    }

    /// Client, offline phase of one layer in this session.
    pub fn client_offline<C: Channel>(&mut self, ch: &mut C, spec: &OtSpec) -> Result<ClientPre> {
        if self.role() != Role::Client {
            return Err(OtError::Misuse("client_offline on a server session"));
        }
        self.layer_offline(ch, spec).map(ClientPre)
    }
}

fn check_shares(spec: &NonlinSpec, shares: &[u64]) -> Result<()> {
    if shares.len() != spec.inputs() {
        return Err(OtError::ShareCount {
            expected: spec.inputs(),
            actual: shares.len(),
        });
    }
    if let Some((index, &value)) = shares.iter().enumerate().find(|(_, &v)| v >= spec.p) {
        return Err(OtError::ShareOutOfRange {
            index,
            value,
            p: spec.p,
        });
    }
    Ok(())
}

fn online<C: Channel>(ch: &mut C, pre: LayerPre, shares: &[u64]) -> Result<Vec<u64>> {
    let LayerPre {
        role,
        spec,
        steps,
        pres,
        mut mask,
        ..
    } = pre;
    check_shares(&spec.spec, shares)?;
    let p = spec.spec.p;
    let mut cur = shares.to_vec();
    let mut sigma: Option<BitVec> = None;
    for (s, pre) in steps.iter().zip(pres) {
        match (&s.shape, pre) {
            (None, _) => match s.step {
                Step::Regroup {
                    pooling,
                    channels,
                    stage,
                } => {
                    let order = layer::regroup_order(pooling, channels, stage);
                    cur = order.iter().map(|&i| cur[i]).collect();
                    sigma = sigma.map(|g| BitVec::from_fn(order.len(), |j| g.get(order[j])));
                }
                _ => cur = layer::reshare(role, p, &cur, &mut mask),
            },
            (Some(shape), Some(pre)) => {
                let inputs = layer::inputs(s, role, p, &cur, sigma.as_ref());
                let (out, eval) = program::run(ch, role, p, shape, pre, inputs)?;
                sigma = match s.wires.sigma_out {
                    Some(w) => Some(eval.get(&shape.circuit, w)?.clone()),
                    None => None,
                };
                cur = out;
            }
            (Some(_), None) => return Err(OtError::Internal("step without precomputation")),
        }
    }
    if spec.spec.count == 0 {
        cur.clear();
    }
    Ok(cur)
}

/// Server, online phase: `shares` (length `spec.inputs()`, each `< p`) → the server's
/// output shares (length `spec.count`).
pub fn server_online<C: Channel>(ch: &mut C, pre: ServerPre, shares: &[u64]) -> Result<Vec<u64>> {
    online(ch, pre.0, shares)
}

/// Client, online phase.
pub fn client_online<C: Channel>(ch: &mut C, pre: ClientPre, shares: &[u64]) -> Result<Vec<u64>> {
    online(ch, pre.0, shares)
}

/// Server, offline phase in a fresh session (base OTs, IKNP and the first silent
/// batches included) with the default silent parameters.
pub fn server_offline<C: Channel>(ch: &mut C, spec: &OtSpec) -> Result<ServerPre> {
    spec.validate()?;
    OtSession::server(ch)?.server_offline(ch, spec)
}

/// Client, offline phase in a fresh session.
pub fn client_offline<C: Channel>(ch: &mut C, spec: &OtSpec) -> Result<ClientPre> {
    spec.validate()?;
    OtSession::client(ch)?.client_offline(ch, spec)
}

/// Time, traffic and COT use of one layer run by [`run_local`] / [`run_over`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OtReport {
    /// Session setup (base OT, IKNP, first silent batch each way): wall time, slower
    /// party.
    pub setup_ms: f64,
    /// Session setup bytes, both directions, frame headers included.
    pub bytes_setup: u64,
    /// Layer offline wall time (the slower party; setup and warm-up layers excluded).
    pub offline_ms: f64,
    /// Layer offline bytes, both directions (hello and any silent refill).
    pub bytes_offline: u64,
    /// Silent-OT refill bytes inside `bytes_offline`.
    pub bytes_refill: u64,
    /// Wall time of the silent-OT refills inside `offline_ms` (the slower party).
    pub refill_ms: f64,
    /// Online wall time (the slower party).
    pub online_ms: f64,
    /// Online bytes, both directions.
    pub bytes_online: u64,
    /// Online flights, both directions (2 = one round trip), from the schedule.
    pub rounds_online: u64,
    /// Online flights as counted by the channels (`net::Counters::flights` of both
    /// sides): one less than `rounds_online` when the online phase starts with the
    /// party that sent last in the offline phase, as in a back-to-back run.
    pub flights_counted: u64,
    /// COTs the layer consumed (both directions).
    pub cots: u64,
    /// COTs per output element.
    pub cots_per_element: f64,
    /// Amortised silent-OT bytes per COT (batch message over usable COTs).
    pub bytes_per_cot: f64,
    /// Bytes per output element: online + offline without refills + the layer's COTs
    /// at the amortised price (the steady state of a long session).
    pub bytes_per_element: f64,
}

/// The silent batches a session's offline phases run, counted without running them:
/// the refill rule of the session's pools (`refill_rounds`, which `OtSession`'s takes
/// run: a direction short of a take refills batch by batch until it holds it, the
/// first round carrying a batch of the other direction too if that pool is below half
/// a batch) replayed on the
/// takes of each layer ([`OtSpec`]'s steps, in order), from the pools right after the
/// setup (one batch each way). Both parties refill at these points; the projection
/// prices each layer's refills with it.
#[derive(Clone, Debug)]
pub struct PoolModel {
    usable: usize,
    /// COTs available, SC and CS.
    available: [usize; 2],
}

impl PoolModel {
    /// The pools of a fresh session with `params`.
    pub fn new(params: SilentParams) -> Self {
        PoolModel {
            usable: params.usable(),
            available: [params.usable(); 2],
        }
    }

    /// The silent batches (SC, CS) the offline phase of `spec` runs, as the next layer
    /// of the session.
    pub fn layer(&mut self, spec: &OtSpec) -> [u64; 2] {
        let mut batches = [0u64; 2];
        for step in spec.shapes() {
            for (dir, n) in step.shape.iter().flat_map(|sh| sh.cot_takes()) {
                let (d, o) = match dir {
                    Dir::Sc => (0, 1),
                    Dir::Cs => (1, 0),
                };
                let (rounds, pair) =
                    refill_rounds(self.available[d], self.available[o], n, self.usable);
                self.available[d] += rounds * self.usable;
                batches[d] += rounds as u64;
                if pair {
                    self.available[o] += self.usable;
                    batches[o] += 1;
                }
                self.available[d] -= n;
            }
        }
        batches
    }
}

/// Options of [`run_over_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Silent-OT parameters of the session.
    pub params: SilentParams,
    /// Layers of the same description run (and discarded) before the measured one.
    pub warmup: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            params: SilentParams::DEFAULT,
            warmup: 0,
        }
    }
}

/// Both parties in two threads over an in-memory channel pair, fresh session with the
/// default parameters. Returns (client output shares, server output shares, report).
pub fn run_local(
    spec: &OtSpec,
    client: &[u64],
    server: &[u64],
) -> Result<(Vec<u64>, Vec<u64>, OtReport)> {
    let (cch, sch) = MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(300), Link::NONE);
    run_over_with(spec, RunOptions::default(), client, server, cch, sch)
}

/// [`run_local`] over the given channel ends (client's first), e.g. loopback TCP.
pub fn run_over<C: Channel + Send>(
    spec: &OtSpec,
    client: &[u64],
    server: &[u64],
    cch: C,
    sch: C,
) -> Result<(Vec<u64>, Vec<u64>, OtReport)> {
    run_over_with(spec, RunOptions::default(), client, server, cch, sch)
}

struct PartyOut {
    out: Vec<u64>,
    setup_ms: f64,
    offline_ms: f64,
    online_ms: f64,
    c_setup: net::Counters,
    c_off: net::Counters,
    c_on: net::Counters,
    stats: LayerStats,
}

fn party<C: Channel>(
    mut ch: C,
    role: Role,
    spec: &OtSpec,
    opts: RunOptions,
    shares: &[u64],
    barrier: &Barrier,
) -> Result<PartyOut> {
    let fail = |e: OtError, barrier: &Barrier| {
        barrier.wait();
        Err(e)
    };
    let t0 = Instant::now();
    let mut session = match OtSession::new(&mut ch, role, opts.params) {
        Ok(s) => s,
        Err(e) => return fail(e, barrier),
    };
    let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    let c_setup = ch.counters();
    for _ in 0..opts.warmup {
        let r = (|| -> Result<()> {
            match role {
                Role::Server => {
                    let pre = session.server_offline(&mut ch, spec)?;
                    server_online(&mut ch, pre, shares)?;
                }
                Role::Client => {
                    let pre = session.client_offline(&mut ch, spec)?;
                    client_online(&mut ch, pre, shares)?;
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            return fail(e, barrier);
        }
    }
    let c_layer = ch.counters();
    let t1 = Instant::now();
    let pre = match role {
        Role::Server => session.server_offline(&mut ch, spec).map(|p| p.0),
        Role::Client => session.client_offline(&mut ch, spec).map(|p| p.0),
    };
    let offline_ms = t1.elapsed().as_secs_f64() * 1e3;
    let c_mid = ch.counters();
    let pre = match pre {
        Ok(p) => p,
        Err(e) => {
            drop(ch);
            return fail(e, barrier);
        }
    };
    let stats = pre.stats;
    barrier.wait();
    let t2 = Instant::now();
    let out = online(&mut ch, pre, shares)?;
    let online_ms = t2.elapsed().as_secs_f64() * 1e3;
    let c_end = ch.counters();
    Ok(PartyOut {
        out,
        setup_ms,
        offline_ms,
        online_ms,
        c_setup,
        c_off: c_mid - c_layer,
        c_on: c_end - c_mid,
        stats,
    })
}

/// Both parties over the given channel ends with explicit options: a session is set
/// up, `opts.warmup` layers run and are discarded, then the measured layer.
pub fn run_over_with<C: Channel + Send>(
    spec: &OtSpec,
    opts: RunOptions,
    client: &[u64],
    server: &[u64],
    cch: C,
    sch: C,
) -> Result<(Vec<u64>, Vec<u64>, OtReport)> {
    spec.validate()?;
    let barrier = Arc::new(Barrier::new(2));
    let (rc, rs) = std::thread::scope(|s| {
        let b = &barrier;
        let hc = s.spawn(move || party(cch, Role::Client, spec, opts, client, b));
        let hs = s.spawn(move || party(sch, Role::Server, spec, opts, server, b));
        (
            hc.join()
                .unwrap_or(Err(OtError::Internal("client thread panicked"))),
            hs.join()
                .unwrap_or(Err(OtError::Internal("server thread panicked"))),
        )
    });
    let (c, s) = match (rc, rs) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(e), Err(OtError::Net(_))) | (Err(e), Ok(_)) => return Err(e),
        (_, Err(e)) => return Err(e),
    };
    let bytes = |x: net::Counters| x.bytes_sent + x.bytes_received;
    let count = spec.spec.count.max(1) as f64;
    let cots = c.stats.cots_sc + c.stats.cots_cs;
    let bytes_offline = bytes(c.c_off);
    let bytes_online = bytes(c.c_on);
    let cot_bytes = cots as f64 * c.stats.bytes_per_cot;
    let report = OtReport {
        setup_ms: c.setup_ms.max(s.setup_ms),
        bytes_setup: bytes(c.c_setup),
        offline_ms: c.offline_ms.max(s.offline_ms),
        bytes_offline,
        bytes_refill: c.stats.refill_bytes,
        refill_ms: c.stats.refill_ms.max(s.stats.refill_ms),
        online_ms: c.online_ms.max(s.online_ms),
        bytes_online,
        rounds_online: spec.online_flights()? as u64,
        flights_counted: c.c_on.flights + s.c_on.flights,
        cots,
        cots_per_element: cots as f64 / count,
        bytes_per_cot: c.stats.bytes_per_cot,
        bytes_per_element: (bytes_online as f64
            + (bytes_offline - c.stats.refill_bytes.min(bytes_offline)) as f64
            + cot_bytes)
            / count,
    };
    Ok((c.out, s.out, report))
}

/// The cleartext model of [`Truncation::Approximate`]: the output for the centred
/// value of `y` when the server's input share is `y_s` (for `Relu`/`Identity`; for
/// `Max`/`MaxPool` the share is that of the maximum before truncation, which the
/// protocol draws fresh), with the full DReLU or, `high`, the high-bits one
/// ([`OtSpec::high_bits_drelu`], for inputs within its bound) leaving out `coarse` more
/// bits ([`OtSpec::coarse_drelu_bits`]). Equal to `gc::reference` except that it may be
/// one less, and, with `coarse`, 0 for a ReLU of `y ∈ [2^f, 2^(f + coarse))`.
pub fn approx_trunc(p: u64, f: u32, relu: bool, high: bool, coarse: u32, y: u64, y_s: u64) -> u64 {
    // Every value below is within a few p of 0 (p < 2^63): no 128-bit division, and
    // the powers of two by shifts and masks (the reference runs this per element).
    let pi = p as i128;
    let below_p = |v: i128| {
        // v in (−2p, 2p): its residue in [0, p)
        let v = if v < 0 { v + pi } else { v };
        let v = if v < 0 { v + pi } else { v };
        if v >= pi {
            v - pi
        } else {
            v
        }
    };
    // shares and reference values are normally reduced already: no division then
    let reduce = |v: u64| if v < p { v } else { v % p };
    let yc = {
        let v = reduce(y) as i128;
        if v > (pi - 1) / 2 {
            v - pi
        } else {
            v
        }
    };
    if relu && yc < 0 {
        return 0;
    }
    let low = (1i128 << f) - 1;
    // ⌊yc / 2^f⌋ and yc mod 2^f (two's complement: both exact for negative yc)
    let exact = yc >> f;
    let zs = below_p(2 * reduce(y_s) as i128);
    let eps = (zs & ((1i128 << (f + 1)) - 1) > 2 * (yc & low)) as i128;
    let drop = crate::layer::dropped_bits(p, f, high, coarse);
    if relu && drop > 0 && yc < (1i128 << (drop - 1)) {
        // the high-bits DReLU misses the wrap of z = 2Y (and reads Y as negative) when
        // z_C and p − 1 − z_S share their bits above the low `drop`: the ReLU is then 0
        // (which is ⌊Y/2^f⌋ for Y < 2^f)
        let zc = below_p(2 * yc - zs);
        let t = pi - 1 - zs;
        if zc > t && zc >> drop == t >> drop {
            return 0;
        }
    }
    below_p(exact - eps) as u64
}

/// DReLU alone, for tests and diagnostics: both parties in two threads over the given
/// channel ends (client's first) in a fresh session; returns the client's and the
/// server's shares mod p of `[y ≥ 0]` (0 or 1) for the centred `y` of each input.
pub fn run_drelu_over<C: Channel + Send>(
    p: u64,
    params: SilentParams,
    client: &[u64],
    server: &[u64],
    cch: C,
    sch: C,
) -> Result<(Vec<u64>, Vec<u64>)> {
    let spec = OtSpec::faithful(NonlinSpec {
        p,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count: client.len(),
    });
    spec.validate()?;
    let step = Step::Drelu { n: client.len() }.shape(p);
    let cots = step.shape.as_ref().map_or((0, 0), |s| s.cots());
    let go = &|mut ch: C, role: Role, x: &[u64]| -> Result<Vec<u64>> {
        let mut s = OtSession::new(&mut ch, role, params)?;
        let pre = s.steps_offline(&mut ch, &spec, vec![step.clone()], cots)?;
        online(&mut ch, pre, x)
    };
    let (rc, rs) = std::thread::scope(|sc| {
        let hs = sc.spawn(move || go(sch, Role::Server, server));
        let rc = go(cch, Role::Client, client);
        (
            rc,
            hs.join()
                .unwrap_or(Err(OtError::Internal("server thread panicked"))),
        )
    });
    Ok((rc?, rs?))
}
