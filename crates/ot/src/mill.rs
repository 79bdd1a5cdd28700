//! The millionaire protocol of CrypTFlow2 (Rathee, Rathee, Kumar, Chandran, Gupta,
//! Rastogi, Sharma, CCS 2020, §3, Algorithm 1; OpenCheetah
//! `SCI/src/Millionaire/millionaire.h`), batched, with `K` comparisons sharing the
//! receiver's digits.
//!
//! The receiver holds `u` (`L` bits), the sender thresholds `T_1..T_K`; the outputs
//! are XOR shares of `[u > T_κ]`. `u` and `T` are cut into `m`-bit digits (least
//! significant first, the top digit may be narrower). Per element and digit `j` one
//! 1-of-2^{m_j} OT ([`crate::kot`]) gives the receiver, masked by the sender's
//! random share, the leaf bits `gt_{κ,j} = [u_j > T_{κ,j}]` and `eq_{κ,j} = [u_j = T_{κ,j}]`
//! (`eq` is not needed for digit 0). The leaves are combined by the log-depth tree
//! `gt = gt_hi ⊕ eq_hi ∧ gt_lo`, `eq = eq_hi ∧ eq_lo` (`tree`, in the
//! [`crate::circuit`]), with `eq` computed only where an ancestor needs it.
//!
//! The leaf OT is the chosen-choice 1-of-2^{m_j} OT with one message fewer: the
//! receiver sends `δ = u_j ⊕ c` (`m_j` bits, `c` the random choice of its COTs); the
//! sender, with table `T[x]` (`w_j = 2K` bits, `K` for digit 0) and pads `P`, keeps
//! `ρ = T[δ] ⊕ P(0)` as its share and sends `T[x] ⊕ ρ ⊕ P(x ⊕ δ)` for the
//! `2^{m_j} − 1` indices `x ≠ δ` (the one at `δ` would be zero); the receiver's share is
//! that entry at `x = u_j` (zero if `u_j = δ`) ⊕ `P(c)`.
//!
//! Cost per element: `L` COTs; `L` bits receiver → sender and
//! `Σ_j (2^{m_j} − 1)·w_j` bits back (one round trip); then the tree: `⌈log₂ q⌉`
//! rounds (`q` digits), at most `q − 1` AND groups per comparison. With `m = 3`,
//! `L = 40`, `K = 1`: digits 4, 3, …, 3 (`MillShape::digits`), 40 + 183 leaf bits and
//! 12 groups.
//! Departure: CrypTFlow2 sends all `2^m` messages and uses IKNP-based
//! 1-of-2^m OT (KK13); here the OTs come from silent COTs and one message is implicit.

use crate::bits::{bytes_for, BitReader, BitVec, BitWriter};
use crate::circuit::{Builder, Wire};
use crate::error::{expect_len, OtError, Result};
use crate::session::{Dir, Role};

/// Digit width used by the layers. Measured for 10⁴ ReLUs at ℓ = 40 (leaves + tree +
/// amortised COTs): `m = 2` saves about 1 B per element but adds an AND level (one or
/// two flights) and 15 % more COTs; `m = 4` costs 9–14 B more (CrypTFlow2 uses 4 with
/// IKNP, where COTs are dear and all `2^m` messages are sent). For ResNet-50's 17-bit
/// comparisons (`bench relu --count 802816 --truncate 7 --approx-trunc --within-quarter
/// --coarse-drelu 3 --params n8192-p28`, alternating, 3 runs each) `m = 4` takes 28
/// COTs instead of 32 and offline 2.72 s instead of 2.82 s (medians), but online
/// 0.52-0.63 s instead of 0.33-0.39 s (twice the table entries) and 21 % more online
/// bytes: slower in sum.
pub(crate) const DIGIT_BITS: usize = 3;

/// Shape of one batched millionaire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MillShape {
    /// Elements.
    pub n: usize,
    /// Bits of `u` and `T`.
    pub bits: usize,
    /// Comparisons per element (≤ 4).
    pub k: usize,
    /// Who holds `u`.
    pub recv: Role,
}

impl MillShape {
    /// Digit widths, least significant first: `m`-bit digits, except that when
    /// `ℓ ≡ 1 (mod m)` digit 0 takes `m + 1` bits instead of leaving a one-bit top
    /// digit. Digit 0's entries carry no `eq` bit, so its `2^m` more table bits cost
    /// about what the top digit's table and its AND group would have, and one AND group
    /// (2 COTs per comparison) goes: 49 COTs instead of 51 for a ReLU at ℓ = 28.
    pub(crate) fn digits(&self) -> Vec<usize> {
        let mut d = Vec::new();
        let mut left = self.bits;
        if left > DIGIT_BITS && left % DIGIT_BITS == 1 {
            d.push(DIGIT_BITS + 1);
            left -= DIGIT_BITS + 1;
        }
        while left > 0 {
            let m = left.min(DIGIT_BITS);
            d.push(m);
            left -= m;
        }
        d
    }
    /// Bits of one table entry of digit `j`.
    pub(crate) fn entry_bits(&self, j: usize) -> usize {
        if j == 0 {
            self.k
        } else {
            2 * self.k
        }
    }
    /// The COT direction of the leaf OTs (sender → receiver).
    pub(crate) fn dir(&self) -> Dir {
        Dir::sent_by(self.recv.other())
    }
    /// Bytes of the receiver's derandomisation message.
    pub(crate) fn derand_bytes(&self) -> usize {
        bytes_for(self.n * self.bits)
    }
    /// Bytes of the sender's tables.
    pub(crate) fn table_bytes(&self) -> usize {
        let per: usize = self
            .digits()
            .iter()
            .enumerate()
            .map(|(j, &m)| ((1 << m) - 1) * self.entry_bits(j))
            .sum();
        bytes_for(self.n * per)
    }
}

/// Precomputed leaf-OT pads of one party.
#[derive(Clone, Debug)]
pub(crate) enum LeafPre {
    /// Sender: per digit, `n·2^{m_j}` pads (low `w_j` bits).
    Sender(Vec<Vec<u8>>),
    /// Receiver: per digit, the random choices and `P(c)`.
    Receiver(Vec<(Vec<u8>, Vec<u8>)>),
}

/// The leaf input wires of one millionaire in a circuit: `gt[κ][j]`, `eq[κ][j]`
/// (`None` for digit 0).
#[derive(Clone, Debug)]
pub(crate) struct LeafWires {
    pub gt: Vec<Vec<Wire>>,
    pub eq: Vec<Vec<Option<Wire>>>,
}

/// Adds the leaf inputs and the `K` comparison trees to `b`; returns the wires and
/// the roots `[u > T_κ]`.
pub(crate) fn tree(b: &mut Builder, s: &MillShape) -> (LeafWires, Vec<Wire>) {
    let q = s.digits().len();
    let mut gt = Vec::new();
    let mut eq = Vec::new();
    let mut roots = Vec::new();
    for _ in 0..s.k {
        let g: Vec<Wire> = (0..q).map(|_| b.input(s.n)).collect();
        let e: Vec<Option<Wire>> = (0..q)
            .map(|j| if j == 0 { None } else { Some(b.input(s.n)) })
            .collect();
        roots.push(combine(b, &g, &e));
        gt.push(g);
        eq.push(e);
    }
    (LeafWires { gt, eq }, roots)
}

enum Tree {
    Leaf(usize),
    Comb(Box<Tree>, Box<Tree>),
}

fn emit(
    b: &mut Builder,
    p: &Tree,
    need_eq: bool,
    gt: &[Wire],
    eq: &[Option<Wire>],
) -> (Wire, Option<Wire>) {
    match p {
        Tree::Leaf(j) => (gt[*j], if need_eq { eq[*j] } else { None }),
        Tree::Comb(hi, lo) => {
            let (hg, he) = emit(b, hi, true, gt, eq);
            let (lg, le) = emit(b, lo, need_eq, gt, eq);
            // hi never contains digit 0, so it has eq
            let he = he.unwrap_or(hg);
            match (need_eq, le) {
                (true, Some(le)) => {
                    let o = b.and_many(he, &[lg, le]);
                    (b.xor(hg, o[0]), Some(o[1]))
                }
                _ => {
                    let t = b.and(he, lg);
                    (b.xor(hg, t), None)
                }
            }
        }
    }
}

fn combine(b: &mut Builder, gt: &[Wire], eq: &[Option<Wire>]) -> Wire {
    let mut level: Vec<Tree> = (0..gt.len()).map(Tree::Leaf).collect();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut it = level.into_iter();
        while let Some(lo) = it.next() {
            match it.next() {
                Some(hi) => next.push(Tree::Comb(Box::new(hi), Box::new(lo))),
                None => next.push(lo),
            }
        }
        level = next;
    }
    match level.pop() {
        Some(p) => emit(b, &p, false, gt, eq).0,
        None => b.input(0),
    }
}

fn digit_of(x: u64, shift: usize, m: usize) -> usize {
    ((x >> shift) & ((1u64 << m) - 1)) as usize
}

/// Receiver: `δ = u_j ⊕ c` for every digit (digit-major, then element).
pub(crate) fn derand(s: &MillShape, pre: &LeafPre, u: &[u64]) -> Result<(Vec<u8>, Vec<Vec<u8>>)> {
    let LeafPre::Receiver(pads) = pre else {
        return Err(OtError::Internal(
            "millionaire: receiver derandomisation on sender state",
        ));
    };
    let mut w = BitWriter::with_capacity(s.n * s.bits);
    let mut deltas = Vec::new();
    let mut shift = 0;
    for (j, &m) in s.digits().iter().enumerate() {
        let (c, _) = &pads[j];
        let d: Vec<u8> = (0..s.n)
            .map(|i| (digit_of(u[i], shift, m) as u8) ^ c[i])
            .collect();
        for &x in &d {
            w.push(x as u64, m as u32);
        }
        deltas.push(d);
        shift += m;
    }
    Ok((w.finish(), deltas))
}

/// `v` with its bytes permuted: byte `x` of the result is byte `x ⊕ δ` of `v`
/// (`δ < 8`), branch-free.
#[inline(always)]
fn xor_permute_bytes64(v: u64, delta: usize) -> u64 {
    let pick = |v: u64, w: u64, bit: usize| {
        let m = 0u64.wrapping_sub(((delta >> bit) & 1) as u64);
        (v & !m) | (w & m)
    };
    let w = ((v >> 8) & 0x00FF_00FF_00FF_00FF) | ((v & 0x00FF_00FF_00FF_00FF) << 8);
    let v = pick(v, w, 0);
    let w = ((v >> 16) & 0x0000_FFFF_0000_FFFF) | ((v & 0x0000_FFFF_0000_FFFF) << 16);
    let v = pick(v, w, 1);
    pick(v, v.rotate_left(32), 2)
}

/// [`xor_permute_bytes64`] for 16 bytes (`δ < 16`).
#[inline(always)]
fn xor_permute_bytes128(v: u128, delta: usize) -> u128 {
    let pick = |v: u128, w: u128, bit: usize| {
        let m = 0u128.wrapping_sub(((delta >> bit) & 1) as u128);
        (v & !m) | (w & m)
    };
    const M8: u128 = 0x00FF_00FF_00FF_00FF_00FF_00FF_00FF_00FF;
    const M16: u128 = 0x0000_FFFF_0000_FFFF_0000_FFFF_0000_FFFF;
    const M32: u128 = 0x0000_0000_FFFF_FFFF_0000_0000_FFFF_FFFF;
    let v = pick(v, ((v >> 8) & M8) | ((v & M8) << 8), 0);
    let v = pick(v, ((v >> 16) & M16) | ((v & M16) << 16), 1);
    let v = pick(v, ((v >> 32) & M32) | ((v & M32) << 32), 2);
    pick(v, v.rotate_left(64), 3)
}

/// One piece's leaf shares of one digit ([`crate::bits::pieces`]): per comparison `κ`,
/// the words of its `gt` and `eq` bits, the piece's first element at bit 0.
struct PieceShares {
    gt: Vec<Vec<u64>>,
    eq: Vec<Vec<u64>>,
}

impl PieceShares {
    fn new(k: usize, len: usize) -> Self {
        Self {
            gt: vec![vec![0u64; len.div_ceil(64)]; k],
            eq: vec![vec![0u64; len.div_ceil(64)]; k],
        }
    }

    /// Bits of element `i`'s (of the piece) share into the comparison outputs' words.
    #[inline(always)]
    fn set(&mut self, j: usize, i: usize, share: u8) {
        let (w, b) = (i / 64, i % 64);
        for (kk, (gt, eq)) in self.gt.iter_mut().zip(&mut self.eq).enumerate() {
            if j == 0 {
                gt[w] |= (((share >> kk) & 1) as u64) << b;
            } else {
                gt[w] |= (((share >> (2 * kk)) & 1) as u64) << b;
                eq[w] |= (((share >> (2 * kk + 1)) & 1) as u64) << b;
            }
        }
    }

    /// Copies the words into digit `j` of the layer's `[κ][digit]` word vectors, the
    /// piece starting at element `start` (a multiple of 64).
    fn place(self, gt: &mut [Vec<Vec<u64>>], eq: &mut [Vec<Vec<u64>>], j: usize, start: usize) {
        let at = start / 64;
        for (kk, (g, e)) in self.gt.into_iter().zip(self.eq).enumerate() {
            gt[kk][j][at..at + g.len()].copy_from_slice(&g);
            eq[kk][j][at..at + e.len()].copy_from_slice(&e);
        }
    }
}

/// Zeroed word vectors for `[κ][digit]` bit vectors of `n` bits.
fn words(k: usize, digits: usize, n: usize) -> Vec<Vec<Vec<u64>>> {
    vec![vec![vec![0u64; n.div_ceil(64)]; digits]; k]
}

fn to_bits(w: Vec<Vec<Vec<u64>>>, n: usize) -> Vec<Vec<BitVec>> {
    w.into_iter()
        .map(|d| d.into_iter().map(|v| BitVec::from_words(v, n)).collect())
        .collect()
}

/// Sender: reads the receiver's `δ`s, builds the tables for thresholds `t[κ][i]`;
/// returns the message and its leaf shares `(gt[κ][j], eq[κ][j])`. The elements run
/// in pieces on the rayon pool (the message is the same).
#[allow(clippy::type_complexity)]
pub(crate) fn tables(
    s: &MillShape,
    pre: &LeafPre,
    t: &[Vec<u64>],
    derand: &[u8],
) -> Result<(Vec<u8>, Vec<Vec<BitVec>>, Vec<Vec<BitVec>>)> {
    let LeafPre::Sender(pads) = pre else {
        return Err(OtError::Internal("millionaire: tables on receiver state"));
    };
    expect_len(
        "millionaire derandomisation bits",
        s.derand_bytes(),
        derand.len(),
    )?;
    if t.len() != s.k || t.iter().any(|tk| tk.len() != s.n) {
        return Err(OtError::Internal(
            "millionaire: thresholds of the wrong shape",
        ));
    }
    let digits = s.digits();
    if pads.len() != digits.len() || pads.iter().zip(&digits).any(|(p, &m)| p.len() != s.n << m) {
        return Err(OtError::Internal("millionaire: pads of the wrong shape"));
    }
    let mut w = BitWriter::with_capacity(8 * s.table_bytes());
    let mut gt = words(s.k, digits.len(), s.n);
    let mut eq = words(s.k, digits.len(), s.n);
    let (mut shift, mut derand_at) = (0, 0);
    for (j, &m) in digits.iter().enumerate() {
        let size = 1usize << m;
        let wb = s.entry_bits(j) as u32;
        let mask = (1u64 << wb) - 1;
        let p = &pads[j];
        let piece = |range: std::ops::Range<usize>| {
            let mut r = BitReader::at(derand, derand_at + range.start * m);
            let mut w = BitWriter::with_capacity(range.len() * (size - 1) * wb as usize);
            let mut sh = PieceShares::new(s.k, range.len());
            let start = range.start;
            // The sender's table rows of digit `j` for every element, with all `2^m`
            // entries as the bytes of one `$word` (`u64` for `m ≤ 3`, `u128` for
            // `m = 4`): table `T[x]` from the threshold digits, pads `P(x ⊕ δ)` by a
            // byte permutation; pushes each row without its entry at `δ` and records the
            // sender's share.
            macro_rules! table_rows {
                ($word:ty, $permute:ident) => {{
                    const BYTES: usize = std::mem::size_of::<$word>();
                    let size_mask: $word = if size == BYTES {
                        <$word>::MAX
                    } else {
                        ((1 as $word) << (8 * size)) - 1
                    };
                    let ones: $word = <$word>::from_le_bytes([1u8; BYTES]) & size_mask;
                    for i in range {
                        let delta = r.read(m as u32) as usize;
                        let mut e: $word = 0;
                        for (kk, tk) in t.iter().enumerate() {
                            let td = digit_of(tk[i], shift, m);
                            let gt_x =
                                ones.checked_shl(8 * (td as u32 + 1)).unwrap_or(0) & size_mask;
                            if j == 0 {
                                e |= gt_x << kk;
                            } else {
                                e |= (gt_x << (2 * kk)) | ((1 as $word) << (8 * td + 2 * kk + 1));
                            }
                        }
                        let mut rb = [0u8; BYTES];
                        rb[..size].copy_from_slice(&p[i * size..(i + 1) * size]);
                        let pads_x = $permute(<$word>::from_le_bytes(rb), delta);
                        let rho = (e >> (8 * delta)) as u8 ^ rb[0];
                        let v = e ^ pads_x ^ (ones * rho as $word);
                        let mut packed = 0u64;
                        for x in 0..size {
                            packed |= (((v >> (8 * x)) as u64) & mask) << (wb * x as u32);
                        }
                        let cut = wb * delta as u32;
                        let lo = packed & ((1u64 << cut) - 1);
                        let hi = packed.checked_shr(cut + wb).unwrap_or(0) << cut;
                        w.push(lo | hi, wb * (size as u32 - 1));
                        sh.set(j, i - start, rho);
                    }
                }};
            }
            if size <= 8 && s.k <= 4 {
                table_rows!(u64, xor_permute_bytes64);
            } else if size <= 16 && s.k <= 4 && (size - 1) * wb as usize <= 64 {
                table_rows!(u128, xor_permute_bytes128);
            } else {
                let mut table = vec![0u8; size];
                for i in range {
                    let delta = r.read(m as u32) as usize;
                    for (x, e) in table.iter_mut().enumerate() {
                        let mut v = 0u8;
                        for (kk, tk) in t.iter().enumerate() {
                            let td = digit_of(tk[i], shift, m);
                            if j == 0 {
                                v |= ((x > td) as u8) << kk;
                            } else {
                                v |= ((x > td) as u8) << (2 * kk);
                                v |= ((x == td) as u8) << (2 * kk + 1);
                            }
                        }
                        *e = v;
                    }
                    let row = &p[i * size..(i + 1) * size];
                    let rho = table[delta] ^ row[0];
                    for x in (0..size).filter(|&x| x != delta) {
                        w.push(((table[x] ^ rho ^ row[x ^ delta]) as u64) & mask, wb);
                    }
                    sh.set(j, i - start, rho);
                }
            }
            (w.bits(), w.finish(), sh)
        };
        let parts = crate::bits::pieces(s.n, piece);
        for (c, (bits, bytes, sh)) in parts.into_iter().enumerate() {
            w.append(&bytes, bits);
            sh.place(&mut gt, &mut eq, j, c * crate::bits::PIECE);
        }
        shift += m;
        derand_at += s.n * m;
    }
    Ok((w.finish(), to_bits(gt, s.n), to_bits(eq, s.n)))
}

/// Receiver: its leaf shares from the sender's tables (`u` and the `δ`s it sent), in
/// pieces on the rayon pool.
#[allow(clippy::type_complexity)]
pub(crate) fn receive(
    s: &MillShape,
    pre: &LeafPre,
    u: &[u64],
    deltas: &[Vec<u8>],
    msg: &[u8],
) -> Result<(Vec<Vec<BitVec>>, Vec<Vec<BitVec>>)> {
    let LeafPre::Receiver(pads) = pre else {
        return Err(OtError::Internal("millionaire: receive on sender state"));
    };
    expect_len("millionaire tables", s.table_bytes(), msg.len())?;
    let digits = s.digits();
    if pads.len() != digits.len()
        || deltas.len() != digits.len()
        || u.len() != s.n
        || deltas.iter().any(|d| d.len() != s.n)
        || pads.iter().any(|(_, pc)| pc.len() != s.n)
    {
        return Err(OtError::Internal(
            "millionaire: receiver state of the wrong shape",
        ));
    }
    let mut gt = words(s.k, digits.len(), s.n);
    let mut eq = words(s.k, digits.len(), s.n);
    let (mut shift, mut msg_at) = (0, 0);
    for (j, &m) in digits.iter().enumerate() {
        let size = 1usize << m;
        let wb = s.entry_bits(j) as u32;
        let mask = (1u64 << wb) - 1;
        let packed = (size - 1) * wb as usize <= 64;
        let row_bits = (size - 1) * wb as usize;
        let (_, pc) = &pads[j];
        let piece = |range: std::ops::Range<usize>| {
            let mut r = BitReader::at(msg, msg_at + range.start * row_bits);
            let mut sh = PieceShares::new(s.k, range.len());
            let start = range.start;
            for i in range {
                let x = digit_of(u[i], shift, m);
                let delta = deltas[j][i] as usize;
                // the sender skipped index δ; our entry (none if x = δ) has rank x − [x > δ]
                let rank = x - (x > delta) as usize;
                let val = if packed {
                    let all = r.read((size - 1) as u32 * wb);
                    if x == delta {
                        0
                    } else {
                        ((all >> (rank as u32 * wb)) & mask) as u8
                    }
                } else {
                    let mut val = 0u8;
                    for y in (0..size).filter(|&y| y != delta) {
                        let e = r.read(wb) as u8;
                        if y == x {
                            val = e;
                        }
                    }
                    val
                };
                sh.set(j, i - start, val ^ pc[i]);
            }
            sh
        };
        for (c, sh) in crate::bits::pieces(s.n, piece).into_iter().enumerate() {
            sh.place(&mut gt, &mut eq, j, c * crate::bits::PIECE);
        }
        shift += m;
        msg_at += s.n * row_bits;
    }
    Ok((to_bits(gt, s.n), to_bits(eq, s.n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(bits: usize) -> MillShape {
        MillShape {
            n: 1,
            bits,
            k: 1,
            recv: Role::Client,
        }
    }

    #[test]
    fn digits_cover_the_bits_without_a_one_bit_top_digit() {
        for bits in 1..=62 {
            let d = shape(bits).digits();
            assert_eq!(d.iter().sum::<usize>(), bits, "{bits} bits: {d:?}");
            assert!(d.iter().all(|&m| (1..=DIGIT_BITS + 1).contains(&m)));
            assert!(
                d[1..].iter().all(|&m| m <= DIGIT_BITS),
                "{bits} bits: {d:?}"
            );
            if bits > DIGIT_BITS {
                assert!(d[d.len() - 1] > 1, "{bits} bits: {d:?}");
            }
            // one digit fewer than ⌈ℓ/3⌉ exactly when ℓ ≡ 1 (mod 3), ℓ > 3
            let fewer = bits > DIGIT_BITS && bits % DIGIT_BITS == 1;
            assert_eq!(d.len(), bits.div_ceil(DIGIT_BITS) - fewer as usize);
        }
        assert_eq!(shape(28).digits(), [4, 3, 3, 3, 3, 3, 3, 3, 3]);
        assert_eq!(shape(20).digits(), [3, 3, 3, 3, 3, 3, 2]);
    }
}
