//! The two-party GC step with an offline/online split (GAZELLE §7.3, Table 10).
//!
//! Inputs are additive shares `s_C + s_S = y (mod p)`. The circuit of one element
//! ([`NonlinSpec::circuit`]) reconstructs `y` with a mod-p adder, applies the
//! nonlinearity to the centred value (`y > (p−1)/2` means `y − p`), truncates by
//! `2^f` (floor division of the signed value, i.e. an arithmetic shift), and
//! subtracts the garbler's fresh uniform mask `r ∈ Z_p`:
//!
//! * the **garbler** (server or client, [`Garbler`]) keeps `r` as its output share;
//! * the **evaluator** decodes `z − r mod p` as its output share.
//!
//! So, whichever party garbles, client share + server share = `z (mod p)`, each share
//! alone uniform. The roles are symmetric in the bytes sent; the garbler hashes
//! twice as much (4 vs 2 AES per AND gate). Measured with `run_local` (the crate's
//! `bench` test, 10 000 ReLUs, p = 1032193, release, one 2-core host running both
//! parties) both roles send exactly the same bytes (49.95 MB offline, 6.43 MB online)
//! and take the same time within noise (~200–575 ms offline, ~50–200 ms online), so
//! total cost does not separate them; the default is **the server garbles**, because
//! the garbler's 2× hashing then lands on the server (the stronger machine in
//! deployment) and, as in GAZELLE, the bulky garbled tables flow server → client,
//! the direction with more bandwidth on typical asymmetric client links.
//!
//! **Offline** (inputs unknown): layer descriptions are compared; Chou-Orlandi base
//! OTs and IKNP produce `n_E = count·window·ℓ` *random* correlated OTs with the
//! garbler's free-XOR `Δ` as IKNP's offset (the evaluator holds `t_i` for random
//! `c_i`, the garbler `q_i = t_i ⊕ c_i·Δ`); the garbler garbles with fresh labels,
//! picks `r`, and sends the tables, the output decoding bits and the labels of `r`.
//!
//! **Online**: the evaluator sends `e = b ⊕ c` (bits); the garbler answers one block
//! per evaluator bit, `X⁰_i ⊕ q_i ⊕ e_i·Δ` (the evaluator adds `t_i` and gets
//! `X⁰_i ⊕ b_i·Δ`), and the labels of its own share bits; the evaluator evaluates
//! and decodes. One round trip.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use net::{Channel, Link, MemChannel};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

use crate::circuit::{from_bits, to_bits, Bit, Builder, Circuit};
use crate::error::{GcError, Result};
use crate::garble::{evaluate, garble};
use crate::label::{
    blocks_to_bytes, bytes_to_blocks_exact, mask, pack_bits, random_blocks, unpack_bits, Block,
    FixedKeyAes,
};
use crate::ot::{ChouOrlandi, IknpReceiver, IknpSender};
use crate::wire::{self, Choice, GarbledHeader, Hello, VERSION};

/// The nonlinearity of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Nonlinear {
    /// `max(y, 0)` per element.
    Relu,
    /// `relu(max(window))` over `window` consecutive inputs per output.
    MaxPool {
        /// Inputs per output (≥ 1).
        window: usize,
    },
    /// No nonlinearity: only truncation (if `trunc_bits > 0`) and re-sharing.
    Identity,
    /// `max(window)` of the signed values, no ReLU (a MaxPool that no ReLU touches).
    Max {
        /// Inputs per output (≥ 1).
        window: usize,
    },
}

/// A nonlinear layer: `count` outputs of `op` over Z_p, truncated by `2^trunc_bits`.
///
/// Truncation is `⌊v / 2^f⌋` of the signed (centred) value `v` — an arithmetic right
/// shift, rounding toward −∞ (so −1 ↦ −1 for f ≥ 1) — reduced mod p.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NonlinSpec {
    /// Plaintext modulus: an odd prime, 3 ≤ p < 2^62.
    pub p: u64,
    /// The operation.
    pub op: Nonlinear,
    /// Fractional bits dropped (`f < ℓ`).
    pub trunc_bits: u32,
    /// Number of outputs.
    pub count: usize,
}

/// Who garbles. The other party evaluates. Default: [`Garbler::Server`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Garbler {
    /// The server garbles, the client evaluates (default).
    #[default]
    Server,
    /// The client garbles, the server evaluates.
    Client,
}

impl std::str::FromStr for Garbler {
    type Err = GcError;
    /// `server` or `client`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "server" => Ok(Garbler::Server),
            "client" => Ok(Garbler::Client),
            _ => Err(GcError::InvalidSpec(format!(
                "garbler must be `server` or `client`, not `{s}`"
            ))),
        }
    }
}

impl std::fmt::Display for Garbler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Garbler::Server => "server",
            Garbler::Client => "client",
        })
    }
}

impl NonlinSpec {
    /// Inputs per output.
    pub fn window(&self) -> usize {
        match self.op {
            Nonlinear::MaxPool { window } | Nonlinear::Max { window } => window,
            _ => 1,
        }
    }
    /// Input shares per party: `count · window`.
    pub fn inputs(&self) -> usize {
        self.count.saturating_mul(self.window())
    }
    /// `ℓ = ⌈log₂ p⌉`.
    pub fn bits(&self) -> usize {
        (64 - self.p.leading_zeros()) as usize
    }
    /// Checks the description.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(GcError::InvalidSpec(s));
        if self.p < 3 || self.p & 1 == 0 || self.p >= 1 << 62 {
            return bad(format!("p = {} must be odd, ≥ 3 and < 2^62", self.p));
        }
        if self.window() == 0 {
            return bad("MaxPool window must be ≥ 1".into());
        }
        if self.trunc_bits as usize >= self.bits() {
            return bad(format!(
                "trunc_bits = {} must be below ℓ = {}",
                self.trunc_bits,
                self.bits()
            ));
        }
        if self
            .count
            .checked_mul(self.window())
            .and_then(|x| x.checked_mul(2 * self.bits() + 1))
            .is_none_or(|x| x > u32::MAX as usize)
        {
            return bad(format!("count = {} is too large", self.count));
        }
        Ok(())
    }

    /// The circuit of one element: evaluator inputs `window·ℓ` share bits; garbler
    /// inputs `window·ℓ` share bits then the `ℓ` bits of the mask `r`; outputs the `ℓ`
    /// bits of `z − r mod p`.
    pub fn circuit(&self) -> Result<Circuit> {
        self.validate()?;
        Ok(build(self))
    }

    /// AND gates per element, counted on the built circuit (constant folding
    /// included; 0 for an invalid spec). At most [`NonlinSpec::and_gates_bound`]; for ReLU it is about 7ℓ
    /// (136 for p = 1032193, ℓ = 20; 220 for p = 4293918721, ℓ = 32).
    pub fn and_gates_per_element(&self) -> u64 {
        if self.validate().is_err() {
            return 0;
        }
        build(self).and_gates()
    }

    /// Closed-form upper bound on the AND gates per element from the gadget costs:
    /// reconstruct `window·(3ℓ+1)`; ReLU `ℓ` (sign) `+ ℓ − 1`; MaxPool
    /// `window·ℓ` (signs) `+ (window−1)(2ℓ+2) + ℓ − 1`; Identity with `f > 0`
    /// `ℓ + 2ℓ − 1`; re-share `2ℓ − 1`. ReLU: `7ℓ − 1`.
    pub fn and_gates_bound(&self) -> u64 {
        let l = self.bits() as u64;
        let k = self.window() as u64;
        let rec = k * (3 * l + 1);
        let op = match self.op {
            Nonlinear::Relu => 2 * l - 1,
            Nonlinear::MaxPool { .. } => k * l + (k - 1) * (2 * l + 2) + l - 1,
            Nonlinear::Max { .. } => {
                k * l + (k - 1) * (2 * l + 2) + if self.trunc_bits > 0 { 2 * l - 1 } else { 0 }
            }
            Nonlinear::Identity => {
                if self.trunc_bits == 0 {
                    0
                } else {
                    3 * l - 1
                }
            }
        };
        rec + op + 2 * l - 1
    }

    /// AND gates of the whole layer.
    pub fn and_gates(&self) -> u64 {
        self.and_gates_per_element() * self.count as u64
    }

    fn hello(&self, garbler: Garbler) -> Hello {
        Hello {
            version: VERSION,
            p: self.p,
            op: match self.op {
                Nonlinear::Relu => 0,
                Nonlinear::MaxPool { .. } => 1,
                Nonlinear::Identity => 2,
                Nonlinear::Max { .. } => 3,
            },
            window: self.window() as u64,
            trunc_bits: self.trunc_bits,
            count: self.count as u64,
            garbler: garbler as u8,
        }
    }
}

fn build(spec: &NonlinSpec) -> Circuit {
    let (p, l, k, f) = (spec.p, spec.bits(), spec.window(), spec.trunc_bits as usize);
    let (mut b, e, g) = Builder::new(k * l, k * l + l);
    let ys: Vec<Vec<Bit>> = (0..k)
        .map(|i| b.add_mod(&e[i * l..(i + 1) * l], &g[i * l..(i + 1) * l], p))
        .collect();
    let shift = |v: Vec<Bit>| -> Vec<Bit> {
        let mut s = v[f..].to_vec();
        s.resize(l, Bit::Const(false));
        s
    };
    let z = match spec.op {
        Nonlinear::Relu => {
            let s = b.sign(&ys[0], p);
            shift(b.relu(&ys[0], s))
        }
        Nonlinear::MaxPool { .. } | Nonlinear::Max { .. } => {
            let signs: Vec<Bit> = ys.iter().map(|y| b.sign(y, p)).collect();
            let mut m = ys[0].clone();
            let mut sm = signs[0];
            for i in 1..k {
                let (m2, s2) = b.max_signed(&m, sm, &ys[i], signs[i]);
                m = m2;
                sm = s2;
            }
            match spec.op {
                Nonlinear::MaxPool { .. } => shift(b.relu(&m, sm)),
                _ if f == 0 => m,
                _ => b.trunc_signed(&m, sm, p, f),
            }
        }
        Nonlinear::Identity => {
            if f == 0 {
                ys[0].clone()
            } else {
                let s = b.sign(&ys[0], p);
                b.trunc_signed(&ys[0], s, p, f)
            }
        }
    };
    let out = b.sub_mod(&z, &g[k * l..], p);
    b.finish(out)
}

/// Cleartext reference: the op on centred values, truncated (floor), mod p.
/// Inputs must be below p (they are reduced otherwise).
pub fn reference(spec: &NonlinSpec, y: &[u64]) -> Vec<u64> {
    let p = spec.p as i128;
    let centre = |v: u64| {
        let v = v as i128 % p;
        if v > (p - 1) / 2 {
            v - p
        } else {
            v
        }
    };
    let k = spec.window().max(1);
    y.chunks(k)
        .map(|w| {
            let v = match spec.op {
                Nonlinear::Relu => centre(w[0]).max(0),
                Nonlinear::MaxPool { .. } => w.iter().map(|&x| centre(x)).max().unwrap_or(0).max(0),
                Nonlinear::Max { .. } => w.iter().map(|&x| centre(x)).max().unwrap_or(0),
                Nonlinear::Identity => centre(w[0]),
            };
            let t = v.div_euclid(1i128 << spec.trunc_bits);
            t.rem_euclid(p) as u64
        })
        .collect()
}

/// Time and traffic of one run of the step (both parties, both directions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseReport {
    /// Offline wall time (the slower party).
    pub offline_ms: f64,
    /// Online wall time (the slower party).
    pub online_ms: f64,
    /// Offline bytes, both directions, frame headers included.
    pub bytes_offline: u64,
    /// Online bytes, both directions.
    pub bytes_online: u64,
    /// Online flights, both directions (2 = one round trip).
    pub rounds_online: u64,
    /// AND gates of the layer.
    pub and_gates: u64,
}

struct GarblerPre {
    spec: NonlinSpec,
    delta: Block,
    /// `X⁰_i ⊕ q_i` per evaluator input bit.
    eval_corr: Vec<Block>,
    /// Zero labels of the garbler's share bits (`count·window·ℓ`).
    share_zero: Vec<Block>,
    /// The mask `r` (the garbler's output share).
    mask: Vec<u64>,
}

struct EvaluatorPre {
    spec: NonlinSpec,
    circuit: Circuit,
    choice: Vec<bool>,
    t: Vec<Block>,
    tables: Vec<Block>,
    decode: Vec<bool>,
    mask_labels: Vec<Block>,
}

impl Drop for GarblerPre {
    fn drop(&mut self) {
        self.delta.zeroize();
        self.eval_corr.zeroize();
        self.share_zero.zeroize();
        self.mask.zeroize();
    }
}

impl Drop for EvaluatorPre {
    fn drop(&mut self) {
        self.choice.zeroize();
        self.t.zeroize();
        self.mask_labels.zeroize();
    }
}

enum Pre {
    Garbler(Box<GarblerPre>),
    Evaluator(Box<EvaluatorPre>),
}

impl Pre {
    fn spec(&self) -> &NonlinSpec {
        match self {
            Pre::Garbler(g) => &g.spec,
            Pre::Evaluator(e) => &e.spec,
        }
    }
}

/// The server's state between the phases.
pub struct ServerPre(Pre);
/// The client's state between the phases.
pub struct ClientPre(Pre);

impl std::fmt::Debug for ServerPre {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerPre({:?})", self.0.spec())
    }
}
impl std::fmt::Debug for ClientPre {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientPre({:?})", self.0.spec())
    }
}

fn check_hello(ours: &Hello, theirs: &Hello) -> Result<()> {
    let fields: [(&'static str, u64, u64); 7] = [
        ("version", ours.version as u64, theirs.version as u64),
        ("p", ours.p, theirs.p),
        ("op", ours.op as u64, theirs.op as u64),
        ("window", ours.window, theirs.window),
        (
            "trunc_bits",
            ours.trunc_bits as u64,
            theirs.trunc_bits as u64,
        ),
        ("count", ours.count, theirs.count),
        ("garbler", ours.garbler as u64, theirs.garbler as u64),
    ];
    for (field, o, t) in fields {
        if o != t {
            return Err(GcError::SpecMismatch {
                field,
                ours: o,
                theirs: t,
            });
        }
    }
    Ok(())
}

fn fresh_rng() -> ChaCha20Rng {
    ChaCha20Rng::from_rng(&mut rand::rng())
}

fn offline<C: Channel>(
    ch: &mut C,
    spec: &NonlinSpec,
    garbler: Garbler,
    i_garble: bool,
) -> Result<Pre> {
    let circuit = spec.circuit()?;
    let hello = spec.hello(garbler);
    ch.send(&wire::encode(&hello)?)?;
    let theirs: Hello = wire::decode(&ch.recv_at_most(256)?, "hello")?;
    check_hello(&hello, &theirs)?;
    let mut rng = fresh_rng();
    let (l, count) = (spec.bits(), spec.count);
    let n_e = count * circuit.evaluator_inputs;
    let n_tables = 2 * circuit.and_gates() as usize * count;
    if i_garble {
        let delta = rng.random::<u128>() | 1;
        let mut ot = IknpSender::setup(&mut ChouOrlandi, ch, &mut rng, Some(delta))?;
        let q = ot.extend_cot(ch, n_e)?;
        let eval_zero = random_blocks(&mut rng, n_e);
        let n_s = spec.inputs() * l;
        let share_zero = random_blocks(&mut rng, n_s);
        let mask_zero = random_blocks(&mut rng, count * l);
        let r: Vec<u64> = (0..count).map(|_| rng.random_range(0..spec.p)).collect();
        let ng = circuit.garbler_inputs;
        let kl = ng - l;
        let mut garbler_zero = Vec::with_capacity(count * ng);
        for e in 0..count {
            garbler_zero.extend_from_slice(&share_zero[e * kl..(e + 1) * kl]);
            garbler_zero.extend_from_slice(&mask_zero[e * l..(e + 1) * l]);
        }
        let hash = FixedKeyAes::new();
        let (tables, decode) = garble(&circuit, count, delta, &eval_zero, &garbler_zero, &hash);
        garbler_zero.zeroize();
        let mut mask_labels: Vec<Block> = Vec::with_capacity(count * l);
        for (e, &rv) in r.iter().enumerate() {
            for (j, bit) in to_bits(rv, l).into_iter().enumerate() {
                mask_labels.push(mask_zero[e * l + j] ^ (mask(bit) & delta));
            }
        }
        let header = GarbledHeader {
            table_blocks: tables.len() as u64,
            decode: pack_bits(&decode),
            mask_labels: blocks_to_bytes(&mask_labels),
        };
        ch.send(&wire::encode(&header)?)?;
        wire::send_blocks(ch, &tables)?;
        let eval_corr = eval_zero.iter().zip(&q).map(|(x, q)| x ^ q).collect();
        Ok(Pre::Garbler(Box::new(GarblerPre {
            spec: *spec,
            delta,
            eval_corr,
            share_zero,
            mask: r,
        })))
    } else {
        let mut ot = IknpReceiver::setup(&mut ChouOrlandi, ch, &mut rng)?;
        let mut cb = vec![0u8; n_e.div_ceil(8)];
        rng.fill_bytes(&mut cb);
        let choice: Vec<bool> = (0..n_e).map(|i| (cb[i / 8] >> (i % 8)) & 1 == 1).collect();
        let t = ot.extend_cot(ch, &choice)?;
        // the header's size follows from the spec: two byte vectors (with their 8-byte
        // lengths) of `count·ℓ` bits and `count·ℓ` blocks; a little more is read so that
        // a field of the wrong length is named by the checks below
        let header_max = 8 + 2 * 8 + (count * l).div_ceil(8) + 16 * count * l + 64;
        let header: GarbledHeader = wire::decode(&ch.recv_at_most(header_max)?, "garbled header")?;
        if header.table_blocks != n_tables as u64 {
            return Err(GcError::Length {
                what: "garbled table blocks",
                expected: n_tables as u64,
                actual: header.table_blocks,
            });
        }
        let n_out = count * circuit.outputs.len();
        let decode = unpack_bits(&header.decode, n_out).ok_or(GcError::Length {
            what: "output decoding bytes",
            expected: n_out.div_ceil(8) as u64,
            actual: header.decode.len() as u64,
        })?;
        if header.mask_labels.len() != 16 * count * l {
            return Err(GcError::Length {
                what: "mask label bytes",
                expected: (16 * count * l) as u64,
                actual: header.mask_labels.len() as u64,
            });
        }
        let mask_labels = bytes_to_blocks_exact(&header.mask_labels);
        let tables = wire::recv_blocks(ch, n_tables, "garbled table frame (bytes)")?;
        Ok(Pre::Evaluator(Box::new(EvaluatorPre {
            spec: *spec,
            circuit,
            choice,
            t,
            tables,
            decode,
            mask_labels,
        })))
    }
}

fn check_shares(spec: &NonlinSpec, shares: &[u64]) -> Result<()> {
    if shares.len() != spec.inputs() {
        return Err(GcError::ShareCount {
            expected: spec.inputs(),
            actual: shares.len(),
        });
    }
    if let Some((index, &value)) = shares.iter().enumerate().find(|(_, &v)| v >= spec.p) {
        return Err(GcError::ShareOutOfRange {
            index,
            value,
            p: spec.p,
        });
    }
    Ok(())
}

fn online<C: Channel>(ch: &mut C, pre: Pre, shares: &[u64]) -> Result<Vec<u64>> {
    check_shares(pre.spec(), shares)?;
    match pre {
        Pre::Garbler(g) => {
            let l = g.spec.bits();
            let n_e = g.eval_corr.len();
            let msg: Choice =
                wire::decode(&ch.recv_at_most(8 + n_e.div_ceil(8) + 64)?, "choice bits")?;
            let e = unpack_bits(&msg.e, n_e).ok_or(GcError::Length {
                what: "choice bytes",
                expected: n_e.div_ceil(8) as u64,
                actual: msg.e.len() as u64,
            })?;
            let mut labels = Vec::with_capacity(n_e + g.share_zero.len());
            labels.extend(
                g.eval_corr
                    .iter()
                    .zip(&e)
                    .map(|(x, &b)| x ^ (mask(b) & g.delta)),
            );
            for (i, &s) in shares.iter().enumerate() {
                for (j, bit) in to_bits(s, l).into_iter().enumerate() {
                    labels.push(g.share_zero[i * l + j] ^ (mask(bit) & g.delta));
                }
            }
            wire::send_blocks(ch, &labels)?;
            labels.zeroize();
            Ok(g.mask.clone())
        }
        Pre::Evaluator(ev) => {
            let spec = ev.spec;
            let l = spec.bits();
            let c = &ev.circuit;
            let n_e = ev.t.len();
            let mut bits = Vec::with_capacity(n_e);
            for &s in shares {
                bits.extend(to_bits(s, l));
            }
            let e: Vec<bool> = bits.iter().zip(&ev.choice).map(|(b, c)| b ^ c).collect();
            ch.send(&wire::encode(&Choice { e: pack_bits(&e) })?)?;
            let n_s = spec.inputs() * l;
            let labels = wire::recv_blocks(ch, n_e + n_s, "online label frame (bytes)")?;
            let eval_labels: Vec<Block> = labels[..n_e]
                .iter()
                .zip(&ev.t)
                .map(|(x, t)| x ^ t)
                .collect();
            let (ng, kl) = (c.garbler_inputs, c.garbler_inputs - l);
            let mut garb_labels = Vec::with_capacity(spec.count * ng);
            for el in 0..spec.count {
                garb_labels.extend_from_slice(&labels[n_e + el * kl..n_e + (el + 1) * kl]);
                garb_labels.extend_from_slice(&ev.mask_labels[el * l..(el + 1) * l]);
            }
            let hash = FixedKeyAes::new();
            let out = evaluate(
                c,
                spec.count,
                &eval_labels,
                &garb_labels,
                &ev.tables,
                &ev.decode,
                &hash,
            )?;
            let no = c.outputs.len();
            out.chunks(no.max(1))
                .take(spec.count)
                .enumerate()
                .map(|(index, b)| {
                    let value = from_bits(b);
                    if value >= spec.p {
                        Err(GcError::OutputOutOfRange {
                            index,
                            value,
                            p: spec.p,
                        })
                    } else {
                        Ok(value)
                    }
                })
                .collect()
        }
    }
}

/// Server, offline phase (before the inputs are known).
pub fn server_offline<C: Channel>(
    ch: &mut C,
    spec: &NonlinSpec,
    garbler: Garbler,
) -> Result<ServerPre> {
    offline(ch, spec, garbler, garbler == Garbler::Server).map(ServerPre)
}

/// Client, offline phase.
pub fn client_offline<C: Channel>(
    ch: &mut C,
    spec: &NonlinSpec,
    garbler: Garbler,
) -> Result<ClientPre> {
    offline(ch, spec, garbler, garbler == Garbler::Client).map(ClientPre)
}

/// Server, online phase: `shares` (len `spec.inputs()`, each `< p`) → the server's
/// output shares (len `spec.count`).
pub fn server_online<C: Channel>(ch: &mut C, pre: ServerPre, shares: &[u64]) -> Result<Vec<u64>> {
    online(ch, pre.0, shares)
}

/// Client, online phase: `shares` → the client's output shares.
pub fn client_online<C: Channel>(ch: &mut C, pre: ClientPre, shares: &[u64]) -> Result<Vec<u64>> {
    online(ch, pre.0, shares)
}

/// Both parties in two threads over an in-memory channel pair (no link emulation).
/// Returns (client output shares, server output shares, report).
pub fn run_local(
    spec: &NonlinSpec,
    garbler: Garbler,
    client: &[u64],
    server: &[u64],
) -> Result<(Vec<u64>, Vec<u64>, PhaseReport)> {
    run_local_link(spec, garbler, client, server, Link::NONE)
}

type PartyOut = (Vec<u64>, f64, f64, net::Counters, net::Counters);

fn party<C: Channel, P>(
    mut ch: C,
    barrier: &Barrier,
    off: impl FnOnce(&mut C) -> Result<P>,
    on: impl FnOnce(&mut C, P) -> Result<Vec<u64>>,
) -> Result<PartyOut> {
    let t0 = Instant::now();
    let pre = off(&mut ch);
    let offline_ms = t0.elapsed().as_secs_f64() * 1e3;
    let c_off = ch.counters();
    let pre = match pre {
        Ok(p) => p,
        Err(e) => {
            drop(ch);
            barrier.wait();
            return Err(e);
        }
    };
    barrier.wait();
    let t1 = Instant::now();
    let out = on(&mut ch, pre)?;
    let online_ms = t1.elapsed().as_secs_f64() * 1e3;
    Ok((out, offline_ms, online_ms, c_off, ch.counters() - c_off))
}

/// [`run_local`] with an emulated link.
pub fn run_local_link(
    spec: &NonlinSpec,
    garbler: Garbler,
    client: &[u64],
    server: &[u64],
    link: Link,
) -> Result<(Vec<u64>, Vec<u64>, PhaseReport)> {
    spec.validate()?;
    let (cch, sch) = MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(300), link);
    run_over(spec, garbler, client, server, cch, sch)
}

/// Both parties in two threads over the given channel ends (client's first), e.g. two
/// TCP channels on loopback.
pub fn run_over<C: Channel + Send>(
    spec: &NonlinSpec,
    garbler: Garbler,
    client: &[u64],
    server: &[u64],
    cch: C,
    sch: C,
) -> Result<(Vec<u64>, Vec<u64>, PhaseReport)> {
    spec.validate()?;
    let barrier = Arc::new(Barrier::new(2));
    let (rc, rs) = std::thread::scope(|s| {
        let b = &barrier;
        let hc = s.spawn(move || {
            party(
                cch,
                b,
                |ch| client_offline(ch, spec, garbler),
                |ch, pre| client_online(ch, pre, client),
            )
        });
        let hs = s.spawn(move || {
            party(
                sch,
                b,
                |ch| server_offline(ch, spec, garbler),
                |ch, pre| server_online(ch, pre, server),
            )
        });
        (
            hc.join()
                .unwrap_or(Err(GcError::Internal("client thread panicked"))),
            hs.join()
                .unwrap_or(Err(GcError::Internal("server thread panicked"))),
        )
    });
    let (rc, rs) = match (rc, rs) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(e), Err(GcError::Net(_))) | (Err(e), Ok(_)) => return Err(e),
        (_, Err(e)) => return Err(e),
    };
    let (cout, c_off_ms, c_on_ms, c_off, c_on) = rc;
    let (sout, s_off_ms, s_on_ms, _, s_on) = rs;
    let report = PhaseReport {
        offline_ms: c_off_ms.max(s_off_ms),
        online_ms: c_on_ms.max(s_on_ms),
        bytes_offline: c_off.bytes_sent + c_off.bytes_received,
        bytes_online: c_on.bytes_sent + c_on.bytes_received,
        rounds_online: c_on.flights + s_on.flights,
        and_gates: spec.and_gates(),
    };
    Ok((cout, sout, report))
}
