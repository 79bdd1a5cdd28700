//! Boolean circuits on XOR-shared bits, evaluated for a whole batch at once (GMW with
//! Beaver triples; Goldreich, Micali, Wigderson 1987; Beaver, CRYPTO 1991), the
//! "AND tree" part of CrypTFlow2's millionaire protocol (Rathee et al., CCS 2020,
//! §3, Algorithm 1, steps 9–13) and the few ANDs around it.
//!
//! A wire holds one bit per element of its batch (its own length: `Builder::gather`
//! moves between batches of different sizes). XOR, NOT and gathers are local; AND
//! gates are grouped by depth, and all gates of one depth are opened in one message
//! per party. A group `(a; b₁, …, b_m)` shares its first operand (CrypTFlow2's
//! "correlated" triples: `lt ⊕= eq_hi ∧ lt_lo` and `eq = eq_hi ∧ eq_lo` open `eq_hi`
//! once), so a party opens `1 + m` bits per element.
//!
//! Triples from COTs, offline and without communication: per element one COT in each
//! direction. In the COT a party *sends*, the hashed pads `u₀ = H(v)`, `u₁ = H(v ⊕ Δ)`
//! (low `m` bits) define its share `β_P = u₀ ⊕ u₁` of the `b`s and its share `u₀` of
//! `α_Q·β_P`; in the COT it *receives* with random choice `c`, `α_P = c` and `H(w)` is
//! its share of `α_P·β_Q`. Then `γ_P = α_P·β_P ⊕ u₀ ⊕ H(w)` gives `γ = α·β`.
//! Cost per AND group of `m` outputs: 2 COTs per element, `2(1 + m)` bits opened per
//! element (both parties), one round per depth.

use crate::bits::{bytes_for, BitVec};
use crate::error::{expect_len, OtError, Result};
use crate::session::Role;

/// A wire index.
pub(crate) type Wire = usize;

#[derive(Clone, Debug)]
enum Op {
    Input,
    Xor(Wire, Wire),
    Not(Wire),
    Gather(Vec<Wire>, Vec<(u8, u32)>),
    AndOut,
}

#[derive(Clone, Debug)]
struct WireDef {
    op: Op,
    len: usize,
    level: usize,
}

/// An AND group: `outs[i] = a ∧ bs[i]`.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    a: Wire,
    bs: Vec<Wire>,
    outs: Vec<Wire>,
    /// Elements.
    pub len: usize,
    /// Depth (1-based).
    pub level: usize,
}

/// A circuit (one per program), built once and evaluated by both parties.
#[derive(Clone, Debug, Default)]
pub(crate) struct Circuit {
    wires: Vec<WireDef>,
    groups: Vec<Group>,
    depth: usize,
}

/// Builds a [`Circuit`].
#[derive(Debug, Default)]
pub(crate) struct Builder {
    c: Circuit,
}

impl Builder {
    fn push(&mut self, op: Op, len: usize, level: usize) -> Wire {
        self.c.wires.push(WireDef { op, len, level });
        self.c.wires.len() - 1
    }
    fn len(&self, w: Wire) -> usize {
        self.c.wires[w].len
    }
    fn level(&self, w: Wire) -> usize {
        self.c.wires[w].level
    }

    /// An input wire of `len` elements (each party sets its share).
    pub(crate) fn input(&mut self, len: usize) -> Wire {
        self.push(Op::Input, len, 0)
    }

    /// `a ⊕ b`.
    pub(crate) fn xor(&mut self, a: Wire, b: Wire) -> Wire {
        debug_assert_eq!(self.len(a), self.len(b));
        let l = self.level(a).max(self.level(b));
        self.push(Op::Xor(a, b), self.len(a), l)
    }

    /// `¬a` (the server flips its share).
    pub(crate) fn not(&mut self, a: Wire) -> Wire {
        let l = self.level(a);
        self.push(Op::Not(a), self.len(a), l)
    }

    /// Element `i` of the result is element `idx[i].1` of `srcs[idx[i].0]`.
    pub(crate) fn gather(&mut self, srcs: &[Wire], idx: Vec<(u8, u32)>) -> Wire {
        let l = srcs.iter().map(|&w| self.level(w)).max().unwrap_or(0);
        let n = idx.len();
        self.push(Op::Gather(srcs.to_vec(), idx), n, l)
    }

    /// `a ∧ b_i` for each `b_i` (one correlated group).
    pub(crate) fn and_many(&mut self, a: Wire, bs: &[Wire]) -> Vec<Wire> {
        let len = self.len(a);
        debug_assert!(bs.iter().all(|&b| self.len(b) == len));
        debug_assert!(!bs.is_empty() && bs.len() <= 8);
        let level = bs
            .iter()
            .map(|&b| self.level(b))
            .fold(self.level(a), usize::max)
            + 1;
        let outs: Vec<Wire> = bs
            .iter()
            .map(|_| self.push(Op::AndOut, len, level))
            .collect();
        self.c.groups.push(Group {
            a,
            bs: bs.to_vec(),
            outs: outs.clone(),
            len,
            level,
        });
        self.c.depth = self.c.depth.max(level);
        outs
    }

    /// `a ∧ b`.
    pub(crate) fn and(&mut self, a: Wire, b: Wire) -> Wire {
        self.and_many(a, &[b])[0]
    }

    /// The circuit.
    pub(crate) fn finish(self) -> Circuit {
        self.c
    }
}

impl Circuit {
    /// AND depth.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }
    /// Elements of each AND group, in order (COTs per direction per group).
    pub(crate) fn group_lens(&self) -> Vec<usize> {
        self.groups.iter().map(|g| g.len).collect()
    }
    /// COTs per direction for the triples.
    pub(crate) fn cots(&self) -> usize {
        self.groups.iter().map(|g| g.len).sum()
    }
    /// Bytes one party opens at `level` (1-based).
    pub(crate) fn open_bytes(&self, level: usize) -> usize {
        self.groups
            .iter()
            .filter(|g| g.level == level)
            .map(|g| (1 + g.bs.len()) * bytes_for(g.len))
            .sum()
    }
    /// The AND depth of every wire.
    pub(crate) fn levels(&self) -> Vec<usize> {
        self.wires.iter().map(|w| w.level).collect()
    }
    /// Bytes of one party's triples (upper estimate, allocation overhead included).
    pub(crate) fn triple_bytes(&self) -> usize {
        self.groups
            .iter()
            .map(|g| (1 + 2 * g.bs.len()) * (8 * g.len.div_ceil(64) + 32) + 64)
            .sum()
    }
    /// Bytes of the circuit description itself (upper estimate).
    pub(crate) fn approx_bytes(&self) -> usize {
        let gathers: usize = self
            .wires
            .iter()
            .map(|w| match &w.op {
                Op::Gather(srcs, idx) => 8 * srcs.len() + 8 * idx.len() + 48,
                _ => 0,
            })
            .sum();
        self.wires.len() * std::mem::size_of::<WireDef>()
            + self.groups.len() * (std::mem::size_of::<Group>() + 64)
            + gathers
    }
}

/// One party's triples for one group.
#[derive(Clone, Debug)]
pub(crate) struct Triple {
    alpha: BitVec,
    beta: Vec<BitVec>,
    gamma: Vec<BitVec>,
}

impl Drop for Triple {
    fn drop(&mut self) {
        self.alpha.zeroize();
        self.beta.iter_mut().for_each(BitVec::zeroize);
        self.gamma.iter_mut().for_each(BitVec::zeroize);
    }
}

/// Builds the triples of all groups from this party's hashed COT pads: `sent[g]` holds,
/// per element of group `g`, the low bits of `(H(v), H(v ⊕ Δ))` of the COT this party
/// sent; `recvd[g]` the choice bit and low bits of `H(w)` of the COT it received.
pub(crate) fn triples(circuit: &Circuit, sent: &[(u8, u8)], recvd: &[(bool, u8)]) -> Vec<Triple> {
    let mut out = Vec::with_capacity(circuit.groups.len());
    let mut at = 0;
    for g in &circuit.groups {
        let m = g.bs.len();
        let words = g.len.div_ceil(64);
        let mut alpha = vec![0u64; words];
        let mut beta = vec![vec![0u64; words]; m];
        let mut gamma = vec![vec![0u64; words]; m];
        let sent = &sent[at..at + g.len];
        let recvd = &recvd[at..at + g.len];
        for (i, (&(u0, u1), &(c, hw))) in sent.iter().zip(recvd).enumerate() {
            let (w, bit) = (i / 64, i % 64);
            let b = u0 ^ u1;
            // γ_j = α·β_j ⊕ u₀_j ⊕ H(w)_j for all j at once
            let gm = (if c { b } else { 0 }) ^ u0 ^ hw;
            alpha[w] |= (c as u64) << bit;
            for j in 0..m {
                beta[j][w] |= (((b >> j) & 1) as u64) << bit;
                gamma[j][w] |= (((gm >> j) & 1) as u64) << bit;
            }
        }
        at += g.len;
        out.push(Triple {
            alpha: BitVec::from_words(alpha, g.len),
            beta: beta
                .into_iter()
                .map(|b| BitVec::from_words(b, g.len))
                .collect(),
            gamma: gamma
                .into_iter()
                .map(|c| BitVec::from_words(c, g.len))
                .collect(),
        });
    }
    out
}

/// One party's evaluation state.
#[derive(Debug)]
pub(crate) struct Eval {
    role: Role,
    vals: Vec<Option<BitVec>>,
    triples: Vec<Triple>,
    /// Per level (index = level): this party's openings, the peer's.
    mine: Vec<Option<Vec<BitVec>>>,
    theirs: Vec<Option<Vec<u8>>>,
    closed: usize,
    started: bool,
}

impl Eval {
    pub(crate) fn new(role: Role, circuit: &Circuit, triples: Vec<Triple>) -> Self {
        Self {
            role,
            vals: vec![None; circuit.wires.len()],
            triples,
            mine: vec![None; circuit.depth + 1],
            theirs: vec![None; circuit.depth + 1],
            closed: 0,
            started: false,
        }
    }

    /// Sets this party's share of input `w`.
    pub(crate) fn set(&mut self, w: Wire, v: BitVec) {
        self.vals[w] = Some(v);
    }

    /// This party's share of wire `w` (after it is computed).
    pub(crate) fn get(&self, c: &Circuit, w: Wire) -> Result<&BitVec> {
        let _ = c;
        self.vals[w].as_ref().ok_or(OtError::Internal(
            "circuit wire read before it was computed",
        ))
    }

    fn val(&self, w: Wire) -> Result<&BitVec> {
        self.vals[w].as_ref().ok_or(OtError::Internal(
            "circuit wire used before it was computed",
        ))
    }

    fn linear(&mut self, c: &Circuit, level: usize) -> Result<()> {
        for (w, def) in c.wires.iter().enumerate() {
            if def.level != level || self.vals[w].is_some() {
                continue;
            }
            let v = match &def.op {
                Op::Input => return Err(OtError::Internal("circuit input not set")),
                Op::AndOut => continue,
                Op::Xor(a, b) => self.val(*a)?.xor(self.val(*b)?),
                Op::Not(a) => {
                    if self.role == Role::Server {
                        self.val(*a)?.not()
                    } else {
                        self.val(*a)?.clone()
                    }
                }
                Op::Gather(srcs, idx) => {
                    let s: Vec<&BitVec> =
                        srcs.iter().map(|&w| self.val(w)).collect::<Result<_>>()?;
                    BitVec::from_fn(idx.len(), |i| {
                        let (k, j) = idx[i];
                        s.get(k as usize).is_some_and(|v| v.get(j as usize))
                    })
                }
            };
            self.vals[w] = Some(v);
        }
        Ok(())
    }

    fn start(&mut self, c: &Circuit) -> Result<()> {
        if !self.started {
            self.linear(c, 0)?;
            self.started = true;
        }
        Ok(())
    }

    /// Closes every level whose openings are both in.
    pub(crate) fn advance(&mut self, c: &Circuit) -> Result<()> {
        self.start(c)?;
        while self.closed < c.depth {
            let l = self.closed + 1;
            let (Some(mine), Some(theirs)) = (&self.mine[l], &self.theirs[l]) else {
                break;
            };
            let mut at = 0;
            let mut k = 0;
            let mut results = Vec::new();
            for (gi, g) in c.groups.iter().enumerate() {
                if g.level != l {
                    continue;
                }
                let nb = bytes_for(g.len);
                let mut open = |k: &mut usize| -> BitVec {
                    let their = BitVec::from_bytes(&theirs[at..at + nb], g.len);
                    at += nb;
                    let v = mine[*k].xor(&their);
                    *k += 1;
                    v
                };
                let d = open(&mut k);
                let t = &self.triples[gi];
                for (j, &o) in g.outs.iter().enumerate() {
                    let e = open(&mut k);
                    let mut z = t.gamma[j].xor(&d.and(&t.beta[j]));
                    z.xor_assign(&e.and(&t.alpha));
                    if self.role == Role::Server {
                        z.xor_assign(&d.and(&e));
                    }
                    results.push((o, z));
                }
            }
            for (o, z) in results {
                self.vals[o] = Some(z);
            }
            self.closed = l;
            self.linear(c, l)?;
        }
        Ok(())
    }

    /// This party's opening of `level` (its inputs must be known).
    pub(crate) fn open(&mut self, c: &Circuit, level: usize) -> Result<Vec<u8>> {
        self.advance(c)?;
        if self.closed + 1 != level {
            return Err(OtError::Internal("circuit level opened out of order"));
        }
        let mut bits = Vec::new();
        let mut out = Vec::with_capacity(c.open_bytes(level));
        for (gi, g) in c.groups.iter().enumerate() {
            if g.level != level {
                continue;
            }
            let t = &self.triples[gi];
            let d = self.val(g.a)?.xor(&t.alpha);
            d.write_to(&mut out);
            bits.push(d);
            for (j, &b) in g.bs.iter().enumerate() {
                let e = self.val(b)?.xor(&t.beta[j]);
                e.write_to(&mut out);
                bits.push(e);
            }
        }
        self.mine[level] = Some(bits);
        self.advance(c)?;
        Ok(out)
    }

    /// The peer's opening of `level`.
    pub(crate) fn receive(&mut self, c: &Circuit, level: usize, bytes: &[u8]) -> Result<()> {
        expect_len("AND-gate openings", c.open_bytes(level), bytes.len())?;
        self.theirs[level] = Some(bytes.to_vec());
        self.advance(c)
    }

    /// Finishes everything computable (all levels must be closed for the outputs).
    pub(crate) fn finish(&mut self, c: &Circuit) -> Result<()> {
        self.advance(c)?;
        if self.closed != c.depth {
            return Err(OtError::Internal(
                "circuit outputs read before the last level",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::needless_range_loop)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// Triples from ideal COTs; both parties evaluate a circuit locally.
    #[test]
    fn and_tree_matches_plaintext() {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let n = 77;
        let mut b = Builder::default();
        let x = b.input(n);
        let y = b.input(n);
        let z = b.input(n);
        let o = b.and_many(x, &[y, z]);
        let nx = b.not(x);
        let q = b.xor(o[0], nx);
        let r = b.and(q, o[1]);
        let g = b.gather(&[r, z], vec![(1, 0), (0, 5), (0, 76)]);
        let c = b.finish();
        assert_eq!(c.depth(), 2);
        // ideal COT material for each party
        let m = c.cots();
        let mut s_sent = Vec::new();
        let mut c_recvd = Vec::new();
        let mut c_sent = Vec::new();
        let mut s_recvd = Vec::new();
        for _ in 0..m {
            let (u0, u1): (u8, u8) = (rng.random(), rng.random());
            let ch: bool = rng.random();
            s_sent.push((u0, u1));
            c_recvd.push((ch, if ch { u1 } else { u0 }));
            let (q0, q1): (u8, u8) = (rng.random(), rng.random());
            let ch2: bool = rng.random();
            c_sent.push((q0, q1));
            s_recvd.push((ch2, if ch2 { q1 } else { q0 }));
        }
        let mut es = Eval::new(Role::Server, &c, triples(&c, &s_sent, &s_recvd));
        let mut ec = Eval::new(Role::Client, &c, triples(&c, &c_sent, &c_recvd));
        let vals: Vec<Vec<bool>> = (0..3)
            .map(|_| (0..n).map(|_| rng.random()).collect())
            .collect();
        for (w, v) in [x, y, z].into_iter().zip(&vals) {
            let share: Vec<bool> = (0..n).map(|_| rng.random()).collect();
            let other: Vec<bool> = v.iter().zip(&share).map(|(a, b)| a ^ b).collect();
            es.set(w, BitVec::from_bools(&share));
            ec.set(w, BitVec::from_bools(&other));
        }
        for l in 1..=c.depth() {
            let a = es.open(&c, l).unwrap();
            let bb = ec.open(&c, l).unwrap();
            es.receive(&c, l, &bb).unwrap();
            ec.receive(&c, l, &a).unwrap();
        }
        es.finish(&c).unwrap();
        ec.finish(&c).unwrap();
        let rs = es.get(&c, r).unwrap().xor(ec.get(&c, r).unwrap());
        for i in 0..n {
            let (xv, yv, zv) = (vals[0][i], vals[1][i], vals[2][i]);
            assert_eq!(rs.get(i), ((xv & yv) ^ !xv) & (xv & zv));
        }
        let gs = es.get(&c, g).unwrap().xor(ec.get(&c, g).unwrap());
        assert_eq!(gs.get(0), vals[2][0]);
        assert_eq!(gs.get(1), rs.get(5));
        assert_eq!(gs.get(2), rs.get(76));
        assert!(es.receive(&c, 1, &[0u8; 3]).is_err());
    }
}
