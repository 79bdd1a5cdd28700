//! One interactive step of a layer ("program"): some batched millionaires, one
//! boolean circuit on their outputs, and some OTs that turn circuit bits into
//! arithmetic shares mod p; plus the scheduler that runs it in as few flights as the
//! data dependencies allow.
//!
//! **Messages** are nodes of a dependency graph, each owned by the party that sends it
//! and of a length fixed by the layer description: a millionaire's derandomisation
//! (receiver) and tables (sender), a circuit level's openings (one node per party),
//! an OT's derandomisation (receiver) and tables (sender). The scheduler simulates
//! strictly alternating flights: on its turn a party sends every node whose
//! dependencies it has (its own earlier nodes, or the peer's from earlier flights).
//! Both parties compute the same schedule from the shape, so every flight's length is
//! known in advance and checked. Strict alternation also means at most one party is
//! writing at any time, so large flights cannot deadlock on TCP buffers. With
//! ping-pong openings a circuit of depth `D` takes about `D + 1` flights, not `2D`.
//! In each flight one party computes while the other waits for its message, so the
//! per-element loops of the online phase (the millionaire's tables and leaf shares, the
//! OTs' rows on both sides) run in pieces of 4096 elements on the rayon pool, their
//! bit streams appended in order: the same bytes as one loop.
//!
//! **OTs into Z_p** ("F_OT"): the receiver's choice `x` is its `k` share bits of the
//! choice wires, the sender's table is `T[x] = F(s ⊕ x)` with `s` its own share bits,
//! i.e. `F` of the actual wire values (e.g. `F(d) = d·y_S` for a multiplexer). With
//! pads `P = pad mod p` of a 1-of-2^k OT ([`crate::kot`]): the receiver sends
//! `δ = x ⊕ c`, the sender keeps `ρ = T[δ] + P(0)` and sends `T[x] − ρ + P(x ⊕ δ)` for
//! the `2^k − 1` indices `x ≠ δ`; the receiver's share is that entry at its `x` (zero
//! when `x = δ`) minus `P(c)`. Cost: `k` COTs, `k + (2^k − 1)·ℓ` bits per element.
//! This is CrypTFlow2's `COT_ℓ`/multiplexer (§2.2, §4.1) generalised to `k` choice bits.

use net::Channel;

use crate::bits::{bytes_for, BitReader, BitVec, BitWriter};
use crate::circuit::{self, Circuit, Eval, Wire};
use crate::error::{expect_len, OtError, Result};
use crate::hash::Tccr;
use crate::kot;
use crate::mill::{self, LeafPre, LeafWires, MillShape};
use crate::pprf::wipe_bytes;
use crate::session::{Cots, Dir, OtSession, Role};

/// Bytes per frame when a flight is larger.
const CHUNK: usize = 4 << 20;

/// An OT into Z_p.
#[derive(Clone, Debug)]
pub(crate) struct OtShape {
    /// Elements.
    pub n: usize,
    /// The party with the table.
    pub sender: Role,
    /// Choice wires (bit `s` of the index = wire `s`), `1 ≤ k ≤ 3`.
    pub choice: Vec<Wire>,
    /// Output position of element `i` (identity if `None`).
    pub out: Option<Vec<u32>>,
}

impl OtShape {
    fn k(&self) -> usize {
        self.choice.len()
    }
    fn dir(&self) -> Dir {
        Dir::sent_by(self.sender)
    }
    fn table_bytes(&self, l: usize) -> usize {
        bytes_for(self.n * ((1 << self.k()) - 1) * l)
    }
}

/// The shape of a program: everything both parties know in advance.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    pub mills: Vec<MillShape>,
    pub leaves: Vec<LeafWires>,
    pub circuit: Circuit,
    pub ots: Vec<OtShape>,
    /// Arithmetic outputs.
    pub n_out: usize,
}

impl Shape {
    /// The COTs [`precompute`] takes from the session's pools, in the order it takes
    /// them: every millionaire's digits, then each circuit group's triples in both
    /// directions ([`Dir::CANONICAL`]), then every OT. A function of the shape alone,
    /// the same for both roles, so the two parties' pools run their refills at the
    /// same points; `precompute` checks each take against it.
    pub(crate) fn cot_takes(&self) -> Vec<(Dir, usize)> {
        let mut takes = Vec::new();
        for m in &self.mills {
            takes.extend(m.digits().into_iter().map(|d| (m.dir(), m.n * d)));
        }
        for len in self.circuit.group_lens() {
            takes.extend(Dir::CANONICAL.map(|d| (d, len)));
        }
        for o in &self.ots {
            takes.push((o.dir(), o.n * o.k()));
        }
        takes
    }

    /// COTs needed in directions SC and CS.
    pub(crate) fn cots(&self) -> (usize, usize) {
        let (mut sc, mut cs) = (0, 0);
        for (d, n) in self.cot_takes() {
            match d {
                Dir::Sc => sc += n,
                Dir::Cs => cs += n,
            }
        }
        (sc, cs)
    }
}

impl Shape {
    /// Bytes of one party's precomputed material ([`Pre`]) for this program, upper
    /// estimate for either role.
    pub(crate) fn pre_bytes(&self) -> usize {
        let mut b = 0;
        for m in &self.mills {
            let digits = m.digits();
            let sender: usize = digits.iter().map(|&d| (m.n << d) + 32).sum();
            let receiver = (2 * m.n + 64) * digits.len();
            b += sender.max(receiver);
        }
        b += self.circuit.triple_bytes();
        for o in &self.ots {
            b += ((o.n << o.k()) * 8).max(o.n * 9) + 64;
        }
        b
    }

    /// The largest transient of [`precompute`]: one window of COTs
    /// ([`OtSession::take_each`]: at most [`crate::session::TAKE_WINDOW`] plus a unit,
    /// whatever the take; the pool's own carry is in
    /// [`crate::SilentParams::session_memory_bytes`]), the triples' per-element pads, and
    /// the hash scratch.
    pub(crate) fn precompute_transient_bytes(&self) -> usize {
        let mut take = self.circuit.group_lens().into_iter().max().unwrap_or(0);
        for m in &self.mills {
            take = take.max(m.n * m.digits().into_iter().max().unwrap_or(0));
        }
        for o in &self.ots {
            take = take.max(o.n * o.k());
        }
        16 * take.min(crate::session::TAKE_WINDOW + 8) + 8 * self.circuit.cots() + (1 << 20)
    }
}

/// `(a + b) mod p` for `a, b < p`.
#[inline(always)]
fn add_mod(a: u64, b: u64, p: u64) -> u64 {
    debug_assert!(a < p && b < p);
    let (s, carry) = a.overflowing_add(b);
    if carry || s >= p {
        s.wrapping_sub(p)
    } else {
        s
    }
}

/// `(a − b) mod p` for `a, b < p`.
#[inline(always)]
fn sub_mod(a: u64, b: u64, p: u64) -> u64 {
    debug_assert!(a < p && b < p);
    if a >= b {
        a - b
    } else {
        a.wrapping_sub(b).wrapping_add(p)
    }
}

/// A table function of an OT sender: `F(v, i)` for the actual choice-wire bits `v`.
#[derive(Clone, Debug)]
pub(crate) enum OtFn {
    /// `F(v, i) = v₀ · vals[i]` (multiplexer; B2A with all ones).
    Mul(Vec<u64>),
}

impl OtFn {
    fn eval(&self, v: usize, i: usize, _p: u64) -> u64 {
        match self {
            OtFn::Mul(vals) => {
                if v & 1 == 1 {
                    vals[i]
                } else {
                    0
                }
            }
        }
    }
}

/// One party's precomputed (offline) material for a program.
#[derive(Debug)]
pub(crate) struct Pre {
    leaves: Vec<LeafPre>,
    triples: Vec<circuit::Triple>,
    /// Per OT: sender `n·2^k` pads mod p, or receiver `(c, P(c))`.
    ots: Vec<OtPre>,
}

#[derive(Debug)]
enum OtPre {
    Sender(Vec<u64>),
    Receiver(Vec<u8>, Vec<u64>),
}

impl Drop for Pre {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        for l in self.leaves.iter_mut() {
            match l {
                LeafPre::Sender(p) => p.iter_mut().for_each(|v| wipe_bytes(v)),
                LeafPre::Receiver(p) => p.iter_mut().for_each(|(c, v)| {
                    wipe_bytes(c);
                    wipe_bytes(v);
                }),
            }
        }
        for o in self.ots.iter_mut() {
            match o {
                OtPre::Sender(p) => p.zeroize(),
                OtPre::Receiver(c, p) => {
                    c.zeroize();
                    p.zeroize();
                }
            }
        }
    }
}

/// Precomputes a program's material from the session's pools, one component at a
/// time, each take consumed window by window as its batches are made
/// ([`OtSession::take_each`]), so memory stays at the material plus one batch.
pub(crate) fn precompute<C: Channel>(
    shape: &Shape,
    session: &mut OtSession,
    ch: &mut C,
    p: u64,
) -> Result<Pre> {
    let role = session.role();
    let mut hash = Tccr::new();
    let mut takes = shape.cot_takes().into_iter();
    let mut take = |session: &mut OtSession,
                    dir: Dir,
                    n: usize,
                    unit: usize,
                    consume: &mut dyn FnMut(&Cots)| {
        if takes.next() != Some((dir, n)) {
            return Err(OtError::Internal("COT take out of the shape's order"));
        }
        session.take_each(ch, dir, n, unit, consume)
    };
    let low = |x: u128| x as u8;
    let mut leaves = Vec::with_capacity(shape.mills.len());
    for m in &shape.mills {
        let dir = m.dir();
        let mut per_digit_s = Vec::new();
        let mut per_digit_r = Vec::new();
        for &dm in &m.digits() {
            let (mut pads, mut c, mut recv_pads) = (Vec::new(), Vec::new(), Vec::new());
            take(session, dir, m.n * dm, dm, &mut |cots| match cots {
                Cots::Send { delta, v, first } => {
                    kot::sender_pads_map(*delta, v, *first, dir.id(), dm, &mut hash, &mut pads, low)
                }
                Cots::Recv { w, first } => kot::receiver_pads_map(
                    w,
                    *first,
                    dir.id(),
                    dm,
                    &mut hash,
                    &mut c,
                    &mut recv_pads,
                    low,
                ),
            })?;
            if m.recv == role {
                per_digit_r.push((c, recv_pads));
            } else {
                per_digit_s.push(pads);
            }
        }
        leaves.push(if m.recv == role {
            LeafPre::Receiver(per_digit_r)
        } else {
            LeafPre::Sender(per_digit_s)
        });
    }
    let nt = shape.circuit.cots();
    let mut sent: Vec<u8> = Vec::with_capacity(2 * nt);
    let mut recvd_c: Vec<u8> = Vec::with_capacity(nt);
    let mut recvd_p: Vec<u8> = Vec::with_capacity(nt);
    for len in shape.circuit.group_lens() {
        // Both parties take in the same order (SC, then CS), whoever sends: the pools'
        // refills depend on the sequence of takes, which must be the same on both sides.
        for dir in Dir::CANONICAL {
            take(session, dir, len, 1, &mut |cots| match cots {
                Cots::Send { delta, v, first } => {
                    kot::sender_pads_map(*delta, v, *first, dir.id(), 1, &mut hash, &mut sent, low)
                }
                Cots::Recv { w, first } => {
                    let (c, p) = (&mut recvd_c, &mut recvd_p);
                    kot::receiver_pads_map(w, *first, dir.id(), 1, &mut hash, c, p, low)
                }
            })?;
        }
    }
    let sent: Vec<(u8, u8)> = sent.chunks_exact(2).map(|c| (c[0], c[1])).collect();
    let recvd: Vec<(bool, u8)> = recvd_c
        .iter()
        .zip(&recvd_p)
        .map(|(&c, &p)| (c == 1, p))
        .collect();
    let triples = circuit::triples(&shape.circuit, &sent, &recvd);
    let mut ots = Vec::with_capacity(shape.ots.len());
    let modp = |x: u128| (x % p as u128) as u64;
    for o in &shape.ots {
        let k = o.k();
        let d = o.dir().id();
        let (mut pads, mut c) = (Vec::new(), Vec::new());
        take(session, o.dir(), o.n * k, k, &mut |cots| match cots {
            Cots::Send { delta, v, first } => {
                kot::sender_pads_map(*delta, v, *first, d, k, &mut hash, &mut pads, modp)
            }
            Cots::Recv { w, first } => {
                kot::receiver_pads_map(w, *first, d, k, &mut hash, &mut c, &mut pads, modp)
            }
        })?;
        ots.push(if o.dir().sender() == role {
            OtPre::Sender(pads)
        } else {
            OtPre::Receiver(c, pads)
        });
    }
    if takes.next().is_some() {
        return Err(OtError::Internal("COT takes left over"));
    }
    Ok(Pre {
        leaves,
        triples,
        ots,
    })
}

/// One party's online inputs of a program.
#[derive(Debug, Default)]
pub(crate) struct Inputs {
    /// Per millionaire: the receiver's values `u` (if this party receives) or the
    /// sender's thresholds `t[κ]`.
    pub mills: Vec<MillIn>,
    /// Other circuit inputs: this party's shares.
    pub wires: Vec<(Wire, BitVec)>,
    /// Per OT where this party sends: the table function (`None` where it receives).
    pub ots: Vec<Option<OtFn>>,
    /// Added to this party's outputs.
    pub local: Vec<u64>,
}

/// A party's input to one millionaire.
#[derive(Debug)]
pub(crate) enum MillIn {
    /// Receiver: `u`.
    Recv(Vec<u64>),
    /// Sender: thresholds per comparison.
    Send(Vec<Vec<u64>>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    LeafDerand(usize),
    LeafTables(usize),
    Open(usize, Role),
    OtDerand(usize),
    OtTables(usize),
}

#[derive(Clone, Debug)]
struct NodeInfo {
    node: Node,
    owner: Role,
    deps: Vec<usize>,
    bytes: usize,
}

fn level_of(c: &Circuit, ws: &[Wire], levels: &[usize]) -> usize {
    ws.iter()
        .map(|&w| levels[w])
        .max()
        .unwrap_or(0)
        .min(c.depth())
}

fn nodes(shape: &Shape, l: usize) -> Vec<NodeInfo> {
    let mut v: Vec<NodeInfo> = Vec::new();
    let mut tables = Vec::new();
    for (i, m) in shape.mills.iter().enumerate() {
        v.push(NodeInfo {
            node: Node::LeafDerand(i),
            owner: m.recv,
            deps: vec![],
            bytes: m.derand_bytes(),
        });
        v.push(NodeInfo {
            node: Node::LeafTables(i),
            owner: m.recv.other(),
            deps: vec![v.len() - 1],
            bytes: m.table_bytes(),
        });
        tables.push(v.len() - 1);
    }
    let c = &shape.circuit;
    let mut open_at = vec![(0usize, 0usize); c.depth() + 1];
    for lv in 1..=c.depth() {
        let deps = if lv == 1 {
            tables.clone()
        } else {
            vec![open_at[lv - 1].0, open_at[lv - 1].1]
        };
        let bytes = c.open_bytes(lv);
        v.push(NodeInfo {
            node: Node::Open(lv, Role::Server),
            owner: Role::Server,
            deps: deps.clone(),
            bytes,
        });
        v.push(NodeInfo {
            node: Node::Open(lv, Role::Client),
            owner: Role::Client,
            deps,
            bytes,
        });
        open_at[lv] = (v.len() - 2, v.len() - 1);
    }
    let levels = c.levels();
    for (i, o) in shape.ots.iter().enumerate() {
        let lv = level_of(c, &o.choice, &levels);
        let deps = if lv == 0 {
            tables.clone()
        } else {
            vec![open_at[lv].0, open_at[lv].1]
        };
        v.push(NodeInfo {
            node: Node::OtDerand(i),
            owner: o.sender.other(),
            deps: deps.clone(),
            bytes: bytes_for(o.n * o.k()),
        });
        let mut d2 = deps;
        d2.push(v.len() - 1);
        v.push(NodeInfo {
            node: Node::OtTables(i),
            owner: o.sender,
            deps: d2,
            bytes: o.table_bytes(l),
        });
    }
    v
}

/// The flights: who sends, which nodes.
fn schedule(nodes: &[NodeInfo]) -> Result<Vec<(Role, Vec<usize>)>> {
    let mut sent_in: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut flights: Vec<(Role, Vec<usize>)> = Vec::new();
    let ready = |sent_in: &[Option<usize>], i: usize, who: Role, flight: usize| {
        nodes[i].deps.iter().all(|&d| match sent_in[d] {
            Some(f) => nodes[d].owner == who || f < flight,
            None => false,
        })
    };
    let first = if nodes.iter().enumerate().any(|(i, n)| {
        n.owner == Role::Server && ready(&vec![None; nodes.len()], i, Role::Server, 0)
    }) {
        Role::Server
    } else {
        Role::Client
    };
    let mut who = first;
    let mut idle = 0;
    while sent_in.iter().any(|s| s.is_none()) {
        let f = flights.len();
        let mut these = Vec::new();
        for i in 0..nodes.len() {
            if sent_in[i].is_none() && nodes[i].owner == who && ready(&sent_in, i, who, f) {
                sent_in[i] = Some(f);
                these.push(i);
            }
        }
        if these.is_empty() {
            idle += 1;
            if idle >= 2 {
                return Err(OtError::Internal("program schedule deadlocks"));
            }
        } else {
            idle = 0;
            flights.push((who, these));
        }
        who = who.other();
    }
    Ok(flights)
}

/// Who sends each non-empty flight of a program.
pub(crate) fn flight_owners(shape: &Shape, p: u64) -> Result<Vec<Role>> {
    let l = (64 - p.leading_zeros()) as usize;
    let nodes = nodes(shape, l);
    Ok(schedule(&nodes)?
        .iter()
        .filter(|(_, ids)| ids.iter().map(|&i| nodes[i].bytes).sum::<usize>() > 0)
        .map(|(r, _)| *r)
        .collect())
}

struct MillRun {
    u: Vec<u64>,
    deltas: Vec<Vec<u8>>,
    derand: Vec<u8>,
}

struct OtRun {
    /// Receiver: its choice `x`; sender: the received `δ`.
    x: Vec<u8>,
}

/// Runs a program; returns this party's arithmetic outputs (length `n_out`) and the
/// finished circuit evaluation (for bit outputs).
pub(crate) fn run<C: Channel>(
    ch: &mut C,
    role: Role,
    p: u64,
    shape: &Shape,
    pre: Pre,
    inputs: Inputs,
) -> Result<(Vec<u64>, Eval)> {
    let l = (64 - p.leading_zeros()) as usize;
    let c = &shape.circuit;
    let mut pre = pre;
    let triples = std::mem::take(&mut pre.triples);
    let (leaves, ot_pre) = (&pre.leaves, &pre.ots);
    if leaves.len() != shape.mills.len()
        || ot_pre.len() != shape.ots.len()
        || inputs.mills.len() != shape.mills.len()
        || inputs.ots.len() != shape.ots.len()
    {
        return Err(OtError::Misuse("program material does not match its shape"));
    }
    let mut eval = Eval::new(role, c, triples);
    for (w, v) in inputs.wires {
        eval.set(w, v);
    }
    let mut mills: Vec<MillRun> = inputs
        .mills
        .iter()
        .map(|_| MillRun {
            u: vec![],
            deltas: vec![],
            derand: vec![],
        })
        .collect();
    let mut thresholds: Vec<Vec<Vec<u64>>> = vec![vec![]; shape.mills.len()];
    for (i, mi) in inputs.mills.into_iter().enumerate() {
        match (mi, shape.mills[i].recv == role) {
            (MillIn::Recv(u), true) => mills[i].u = u,
            (MillIn::Send(t), false) => thresholds[i] = t,
            _ => return Err(OtError::Misuse("millionaire input of the wrong side")),
        }
    }
    let mut ots: Vec<OtRun> = shape.ots.iter().map(|_| OtRun { x: vec![] }).collect();
    let mut out = vec![0u64; shape.n_out];
    let add = |out: &mut Vec<u64>, o: &OtShape, i: usize, v: u64| {
        let at = o.out.as_ref().map_or(i, |m| m[i] as usize);
        if let Some(x) = out.get_mut(at) {
            *x = add_mod(*x, v, p);
        }
    };
    let nodes = nodes(shape, l);
    let plan = schedule(&nodes)?;
    let set_leaves = |eval: &mut Eval, i: usize, gt: Vec<Vec<BitVec>>, eq: Vec<Vec<BitVec>>| {
        let lw = &shape.leaves[i];
        for (kk, (g, e)) in gt.into_iter().zip(eq).enumerate() {
            for (j, (gj, ej)) in g.into_iter().zip(e).enumerate() {
                eval.set(lw.gt[kk][j], gj);
                if let Some(w) = lw.eq[kk][j] {
                    eval.set(w, ej);
                }
            }
        }
    };
    let choice_bits = |eval: &Eval, o: &OtShape| -> Result<Vec<u8>> {
        let mut x = vec![0u8; o.n];
        for (s, &w) in o.choice.iter().enumerate() {
            let b = eval.get(c, w)?;
            for (i, xi) in x.iter_mut().enumerate() {
                *xi |= (b.get(i) as u8) << s;
            }
        }
        Ok(x)
    };
    for (owner, ids) in plan {
        let total: usize = ids.iter().map(|&i| nodes[i].bytes).sum();
        if total == 0 {
            continue;
        }
        if owner == role {
            let mut buf = Vec::with_capacity(total);
            for &id in &ids {
                let before = buf.len();
                match nodes[id].node {
                    Node::LeafDerand(i) => {
                        let (msg, deltas) = mill::derand(&shape.mills[i], &leaves[i], &mills[i].u)?;
                        mills[i].deltas = deltas;
                        buf.extend_from_slice(&msg);
                    }
                    Node::LeafTables(i) => {
                        let (msg, gt, eq) = mill::tables(
                            &shape.mills[i],
                            &leaves[i],
                            &thresholds[i],
                            &mills[i].derand,
                        )?;
                        set_leaves(&mut eval, i, gt, eq);
                        buf.extend_from_slice(&msg);
                    }
                    Node::Open(lv, _) => buf.extend_from_slice(&eval.open(c, lv)?),
                    Node::OtDerand(i) => {
                        let o = &shape.ots[i];
                        eval.advance(c)?;
                        let x = choice_bits(&eval, o)?;
                        let OtPre::Receiver(cc, _) = &ot_pre[i] else {
                            return Err(OtError::Internal("OT derandomisation on sender state"));
                        };
                        let mut w = BitWriter::with_capacity(o.n * o.k());
                        for (xi, ci) in x.iter().zip(cc) {
                            w.push((xi ^ ci) as u64, o.k() as u32);
                        }
                        buf.extend_from_slice(&w.finish());
                        ots[i].x = x;
                    }
                    Node::OtTables(i) => {
                        let o = &shape.ots[i];
                        let (OtPre::Sender(pads), Some(f)) = (&ot_pre[i], &inputs.ots[i]) else {
                            return Err(OtError::Internal("OT tables on receiver state"));
                        };
                        eval.advance(c)?;
                        let s = choice_bits(&eval, o)?;
                        let size = 1usize << o.k();
                        let delta_of = &ots[i].x;
                        if delta_of.len() != o.n || pads.len() != o.n * size {
                            return Err(OtError::Internal("OT tables of the wrong shape"));
                        }
                        // the rows in pieces on the rayon pool, the sender's shares added
                        // in order afterwards
                        let piece = |range: std::ops::Range<usize>| {
                            let mut w = BitWriter::with_capacity(range.len() * (size - 1) * l);
                            let mut rhos = Vec::with_capacity(range.len());
                            let mut t = vec![0u64; size];
                            for i2 in range {
                                let delta = delta_of[i2] as usize;
                                for (x, tx) in t.iter_mut().enumerate() {
                                    *tx = f.eval((s[i2] as usize) ^ x, i2, p);
                                }
                                let row = &pads[i2 * size..(i2 + 1) * size];
                                let rho = add_mod(t[delta], row[0], p);
                                for x in 0..size {
                                    if x != delta {
                                        let m = add_mod(sub_mod(t[x], rho, p), row[x ^ delta], p);
                                        w.push(m, l as u32);
                                    }
                                }
                                rhos.push(rho);
                            }
                            (w.bits(), w.finish(), rhos)
                        };
                        let mut w = BitWriter::with_capacity(o.n * (size - 1) * l);
                        let mut rhos = Vec::with_capacity(o.n);
                        for (bits, bytes, piece_rhos) in crate::bits::pieces(o.n, piece) {
                            w.append(&bytes, bits);
                            rhos.extend(piece_rhos);
                        }
                        for (i2, rho) in rhos.into_iter().enumerate() {
                            add(&mut out, o, i2, rho);
                        }
                        buf.extend_from_slice(&w.finish());
                    }
                }
                if buf.len() - before != nodes[id].bytes {
                    return Err(OtError::Internal("a message has the wrong length"));
                }
            }
            for chunk in buf.chunks(CHUNK) {
                ch.send(chunk)?;
            }
        } else {
            let mut buf = Vec::with_capacity(total);
            while buf.len() < total {
                let want = CHUNK.min(total - buf.len());
                let f = ch.recv_at_most(want)?;
                expect_len("flight frame", want, f.len())?;
                buf.extend_from_slice(&f);
            }
            let mut at = 0;
            for &id in &ids {
                let msg = &buf[at..at + nodes[id].bytes];
                at += nodes[id].bytes;
                match nodes[id].node {
                    Node::LeafDerand(i) => mills[i].derand = msg.to_vec(),
                    Node::LeafTables(i) => {
                        let (gt, eq) = mill::receive(
                            &shape.mills[i],
                            &leaves[i],
                            &mills[i].u,
                            &mills[i].deltas,
                            msg,
                        )?;
                        set_leaves(&mut eval, i, gt, eq);
                    }
                    Node::Open(lv, _) => eval.receive(c, lv, msg)?,
                    Node::OtDerand(i) => {
                        let o = &shape.ots[i];
                        let mut r = BitReader::new(msg);
                        ots[i].x = (0..o.n).map(|_| r.read(o.k() as u32) as u8).collect();
                    }
                    Node::OtTables(i) => {
                        let o = &shape.ots[i];
                        let OtPre::Receiver(cs, pc) = &ot_pre[i] else {
                            return Err(OtError::Internal("OT tables received on sender state"));
                        };
                        let size = 1usize << o.k();
                        let choice = &ots[i].x;
                        if choice.len() != o.n || cs.len() != o.n || pc.len() != o.n {
                            return Err(OtError::Internal("OT receiver state of the wrong shape"));
                        }
                        // the rows in pieces on the rayon pool, the shares added in order
                        // afterwards
                        let piece = |range: std::ops::Range<usize>| -> Result<Vec<u64>> {
                            let mut r = BitReader::at(msg, range.start * (size - 1) * l);
                            let mut at = range.start * (size - 1);
                            let mut vals = Vec::with_capacity(range.len());
                            for i2 in range {
                                let x = choice[i2] as usize;
                                // our δ was x ⊕ c; the sender skipped index δ
                                let delta = x ^ cs[i2] as usize;
                                let mut val = 0u64;
                                for y in 0..size {
                                    if y == delta {
                                        continue;
                                    }
                                    let m = r.read(l as u32);
                                    if m >= p {
                                        return Err(OtError::OutOfRange {
                                            what: "OT message mod p",
                                            index: at,
                                            value: m,
                                            bound: p,
                                        });
                                    }
                                    at += 1;
                                    if y == x {
                                        val = m;
                                    }
                                }
                                vals.push(sub_mod(val, pc[i2], p));
                            }
                            Ok(vals)
                        };
                        let vals = crate::bits::pieces(o.n, piece)
                            .into_iter()
                            .collect::<Result<Vec<_>>>()?;
                        for (i2, v) in vals.into_iter().flatten().enumerate() {
                            add(&mut out, o, i2, v);
                        }
                    }
                }
            }
        }
    }
    eval.finish(c)?;
    for (o, v) in out.iter_mut().zip(&inputs.local) {
        *o = add_mod(*o, *v, p);
    }
    Ok((out, eval))
}
