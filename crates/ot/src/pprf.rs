//! Puncturable PRF from GGM trees, punctured by OT: the sparse half of silent OT
//! (Boyle, Couteau, Gilboa, Ishai, Kohl, Rindal, Scholl, "Efficient two-round OT
//! extension and silent non-interactive secure computation", CCS 2019, §4 and Fig. 5
//! (the PPRF of Kurosawa-style GGM trees, punctured with one 1-of-2 OT per level);
//! the same construction as Ferret's SPCOT, Yang, Weng, Lan, Zhang, Wang, CCS 2020,
//! Fig. 4, semi-honest part).
//!
//! `t` trees of depth `h`. The sender draws a seed per tree and expands it with the
//! length-doubling PRG `G(x) = (AES_{k₀}(x) ⊕ x, AES_{k₁}(x) ⊕ x)` (two public fixed
//! keys, MMO, as in emp-ot's `TwoKeyPRP`); per level `l` it forms the XOR of all left
//! children `K⁰_l` and of all right children `K¹_l`. The receiver's puncture point
//! `α_j` is the complement of the choice bits of the tree's `h` base COTs (most
//! significant bit first), so no derandomisation bit is sent: with the base COT
//! `(v, w = v ⊕ c·Δ)` the sender sends `K⁰ ⊕ H(v)`, `K¹ ⊕ H(v ⊕ Δ)` and the receiver
//! learns `K^c`, the sum on the side *off* its path, from which it rebuilds the sibling
//! of its path node. At the leaves the sender clears the least significant bit of
//! every leaf `s_i` and sends `c_j = Δ ⊕ ⊕_i s_i`; the receiver sets
//! `r_α = c_j ⊕ ⊕_{i≠α} s_i = s_α ⊕ Δ`. Since `lsb(Δ) = 1`, `lsb(r_i)` is the noise
//! bit `e_i` (libOTe's "packed" choice bits), so the receiver never encodes a separate
//! bit vector.
//!
//! Layout: trees in groups of 8 (AES pipelining, and libOTe/CryProt's "interleaved"
//! output format): leaf `i` of tree `8g + k` sits at position `(g·2^h + i)·8 + k` of
//! the `N' = t·2^h` output. Regular noise: exactly one `e_i = 1` per tree.
//!
//! Cost per batch: `h·t` base COTs; the sender sends `t·(2h + 1)` blocks (one flight);
//! each side computes `2N'` AES for the trees plus `2th` (sender) / `th` (receiver)
//! hashes. Departure from the paper: no consistency check (semi-honest only), and the
//! puncture points are fixed by the random base-COT choices instead of being chosen.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;

use zeroize::Zeroize;

use cryprot_core::Block;

/// One 128-bit leaf or COT value as the encoder (`cryprot_codes`) stores it.
pub(crate) type Lane = Block;

/// `x` as a [`Lane`].
#[inline(always)]
pub(crate) fn lane(x: u128) -> Lane {
    Block::from(x)
}

/// A [`Lane`] as `u128`.
#[inline(always)]
pub(crate) fn unlane(l: Lane) -> u128 {
    u128::from(l)
}

/// Overwrites secret lanes with zeros (volatile writes, not optimised away).
pub(crate) fn wipe(l: &mut [Lane]) {
    bytemuck::cast_slice_mut::<Lane, u8>(l).zeroize();
}
use crate::error::{expect_len, Result};
use crate::hash::{tweak, Tccr, DOMAIN_GGM};

/// Trees expanded together.
pub(crate) const GROUP: usize = 8;

/// Public fixed keys of the two halves of the GGM PRG.
const PRG_KEYS: [[u8; 16]; 2] = [*b"helina-ggm-left!", *b"helina-ggm-right"];

/// The length-doubling PRG.
pub(crate) struct Prg {
    aes: [Aes128; 2],
    src: Vec<aes::Block>,
    dst: Vec<aes::Block>,
}

impl std::fmt::Debug for Prg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prg")
    }
}

impl Drop for Prg {
    fn drop(&mut self) {
        for b in self.src.iter_mut().chain(self.dst.iter_mut()) {
            b.as_mut_slice().zeroize();
        }
    }
}

impl Prg {
    pub(crate) fn new() -> Self {
        Self {
            aes: [
                Aes128::new(&PRG_KEYS[0].into()),
                Aes128::new(&PRG_KEYS[1].into()),
            ],
            src: Vec::new(),
            dst: Vec::new(),
        }
    }

    /// `out[(2·node + b)·8 + k] = AES_{k_b}(x) ⊕ x` for the parents
    /// `x = xs[node·8 + k]` of one group level (children in the same layout); returns
    /// for each tree `k` the XOR of its left (`b = 0`) and of its right children.
    fn expand_level(&mut self, xs: &[u128], out: &mut [u128]) -> [[u128; 2]; GROUP] {
        let mut sums = [[0u128; 2]; GROUP];
        self.src.clear();
        self.src
            .extend(xs.iter().map(|x| aes::Block::from(x.to_le_bytes())));
        self.dst.resize(xs.len(), aes::Block::default());
        for b in 0..2 {
            self.dst.copy_from_slice(&self.src);
            self.aes[b].encrypt_blocks(&mut self.dst);
            let parents = self.dst.chunks_exact(GROUP).zip(xs.chunks_exact(GROUP));
            for ((enc, x), o) in parents.zip(out.chunks_exact_mut(2 * GROUP)) {
                let o = &mut o[b * GROUP..(b + 1) * GROUP];
                for k in 0..GROUP {
                    let y = u128::from_le_bytes(enc[k].into()) ^ x[k];
                    o[k] = y;
                    sums[k][b] ^= y;
                }
            }
        }
        sums
    }
}

/// Shape of a batch of trees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Trees (a multiple of [`GROUP`]).
    pub trees: usize,
    /// Depth `h` (leaves per tree `2^h`).
    pub depth: usize,
}

impl Shape {
    pub(crate) fn leaves(&self) -> usize {
        self.trees << self.depth
    }
    pub(crate) fn base_cots(&self) -> usize {
        self.trees * self.depth
    }
    pub(crate) fn msg_blocks(&self) -> usize {
        self.trees * (2 * self.depth + 1)
    }
}

/// Which batch of which direction (for the hash tweaks) and its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    pub shape: Shape,
    /// Direction id.
    pub dir: u8,
    /// Batch number in this direction.
    pub index: u64,
}

impl Batch {
    /// The tweak of the level OT of `tree` at `level` (0-based).
    fn tweak(&self, tree: usize, level: usize) -> u128 {
        let s = &self.shape;
        let idx = self.index * s.base_cots() as u64 + (tree * s.depth + level) as u64;
        tweak(DOMAIN_GGM, self.dir, idx, 0)
    }
}

/// Sender side: expands the trees from `seeds` (one per tree) into `leaves` (the
/// `N'` leaves as lanes, least significant bit cleared) and returns the message for
/// the receiver. `base_v[j·h + l]` is the sender's half of the base COT of tree `j`,
/// level `l+1`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send(
    id: Batch,
    delta: u128,
    base_v: &[u128],
    seeds: &[u128],
    prg: &mut Prg,
    hash: &mut Tccr,
    leaves: &mut [Lane],
) -> Vec<u128> {
    let shape = id.shape;
    let (t, h) = (shape.trees, shape.depth);
    debug_assert_eq!(base_v.len(), t * h);
    debug_assert_eq!(seeds.len(), t);
    debug_assert_eq!(leaves.len(), shape.leaves());
    // sums[(j·h + l)·2 + b]
    let mut sums = vec![0u128; t * h * 2];
    let mut csum = vec![delta; t];
    let mut cur = Vec::new();
    let mut next = Vec::new();
    for g in 0..t / GROUP {
        cur.clear();
        cur.extend_from_slice(&seeds[g * GROUP..(g + 1) * GROUP]);
        for l in 0..h {
            let width = 1usize << (l + 1);
            next.resize(width * GROUP, 0);
            let sides = prg.expand_level(&cur, &mut next);
            for (k, side) in sides.iter().enumerate() {
                let j = g * GROUP + k;
                sums[(j * h + l) * 2] = side[0];
                sums[(j * h + l) * 2 + 1] = side[1];
            }
            std::mem::swap(&mut cur, &mut next);
        }
        // `cur` holds the group's leaves
        let chunk = &mut leaves[(g * GROUP) << h..((g + 1) * GROUP) << h];
        let mut acc = [0u128; GROUP];
        for (out, kids) in chunk.chunks_exact_mut(GROUP).zip(cur.chunks_exact(GROUP)) {
            for k in 0..GROUP {
                let x = kids[k] & !1;
                acc[k] ^= x;
                out[k] = lane(x);
            }
        }
        for k in 0..GROUP {
            csum[g * GROUP + k] ^= acc[k];
        }
    }
    cur.zeroize();
    next.zeroize();
    let mut m0: Vec<u128> = base_v.to_vec();
    let mut m1: Vec<u128> = base_v.iter().map(|v| v ^ delta).collect();
    let tw: Vec<u128> = (0..t * h).map(|i| id.tweak(i / h, i % h)).collect();
    hash.hash(&mut m0, &tw);
    hash.hash(&mut m1, &tw);
    let mut msg = Vec::with_capacity(shape.msg_blocks());
    for (j, cj) in csum.iter().enumerate() {
        for l in 0..h {
            let i = j * h + l;
            msg.push(sums[2 * i] ^ m0[i]);
            msg.push(sums[2 * i + 1] ^ m1[i]);
        }
        msg.push(*cj);
    }
    sums.zeroize();
    csum.zeroize();
    m0.zeroize();
    m1.zeroize();
    msg
}

/// The puncture point of each tree from the receiver's base-COT choice bits.
pub(crate) fn points(shape: Shape, base_c: &[bool]) -> Vec<usize> {
    let h = shape.depth;
    (0..shape.trees)
        .map(|j| {
            (0..h).fold(0usize, |a, l| {
                (a << 1) | (!base_c.get(j * h + l).copied().unwrap_or(false)) as usize
            })
        })
        .collect()
}

/// Receiver side: rebuilds every leaf but the punctured ones into `leaves` and sets
/// `r_α = s_α ⊕ Δ`: the `N'` leaves in the sender's layout (least significant bit =
/// noise bit). `msg` must hold [`Shape::msg_blocks`] blocks.
pub(crate) fn receive(
    id: Batch,
    base_w: &[u128],
    base_c: &[bool],
    msg: &[u128],
    prg: &mut Prg,
    hash: &mut Tccr,
    leaves: &mut [Lane],
) -> Result<()> {
    let shape = id.shape;
    let (t, h) = (shape.trees, shape.depth);
    expect_len("PPRF message (blocks)", shape.msg_blocks(), msg.len())?;
    expect_len("PPRF base COTs", t * h, base_w.len())?;
    expect_len("PPRF base choices", t * h, base_c.len())?;
    expect_len("PPRF leaves", shape.leaves(), leaves.len())?;
    let alpha = points(shape, base_c);
    let mut pads: Vec<u128> = base_w.to_vec();
    let tw: Vec<u128> = (0..t * h).map(|i| id.tweak(i / h, i % h)).collect();
    hash.hash(&mut pads, &tw);
    let mut cur = Vec::new();
    let mut next = Vec::new();
    for g in 0..t / GROUP {
        cur.clear();
        cur.resize(GROUP, 0);
        for l in 0..h {
            let width = 1usize << (l + 1);
            next.resize(width * GROUP, 0);
            // the sums of each tree's left and right children
            let side = prg.expand_level(&cur, &mut next);
            for k in 0..GROUP {
                let j = g * GROUP + k;
                let i = j * h + l;
                let c = base_c[i] as usize;
                // path node at level l+1 and its sibling (on side c); the path node
                // (on side 1 − c) was expanded from the zero placeholder
                let path = alpha[j] >> (h - l - 1);
                let sib = path ^ 1;
                let known = msg[j * (2 * h + 1) + 2 * l + c] ^ pads[i];
                next[sib * GROUP + k] ^= known ^ side[k][c];
                next[path * GROUP + k] = 0;
            }
            std::mem::swap(&mut cur, &mut next);
        }
        let chunk = &mut leaves[(g * GROUP) << h..((g + 1) * GROUP) << h];
        let mut acc = [0u128; GROUP];
        for (out, kids) in chunk.chunks_exact_mut(GROUP).zip(cur.chunks_exact(GROUP)) {
            for k in 0..GROUP {
                let x = kids[k] & !1;
                acc[k] ^= x;
                out[k] = lane(x);
            }
        }
        for k in 0..GROUP {
            let j = g * GROUP + k;
            chunk[alpha[j] * GROUP + k] = lane(msg[j * (2 * h + 1) + 2 * h] ^ acc[k]);
        }
    }
    cur.zeroize();
    next.zeroize();
    pads.zeroize();
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::unlane;
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn punctured_leaves_match() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let shape = Shape {
            trees: 16,
            depth: 5,
        };
        let delta = rng.random::<u128>() | 1;
        let n = shape.base_cots();
        let v: Vec<u128> = (0..n).map(|_| rng.random()).collect();
        let c: Vec<bool> = (0..n).map(|_| rng.random()).collect();
        let w: Vec<u128> = v
            .iter()
            .zip(&c)
            .map(|(v, &c)| if c { v ^ delta } else { *v })
            .collect();
        let seeds: Vec<u128> = (0..shape.trees).map(|_| rng.random()).collect();
        let (mut prg, mut h) = (Prg::new(), Tccr::new());
        let id = Batch {
            shape,
            dir: 0,
            index: 3,
        };
        let mut s = vec![Block::ZERO; shape.leaves()];
        let msg = send(id, delta, &v, &seeds, &mut prg, &mut h, &mut s);
        let mut r = vec![Block::ZERO; shape.leaves()];
        receive(id, &w, &c, &msg, &mut prg, &mut h, &mut r).unwrap();
        let (s, r): (Vec<u128>, Vec<u128>) = (
            s.into_iter().map(unlane).collect(),
            r.into_iter().map(unlane).collect(),
        );
        let alpha = points(shape, &c);
        let mut noisy = 0;
        for (pos, (a, b)) in s.iter().zip(&r).enumerate() {
            let (g, rest) = (pos / (GROUP << shape.depth), pos % (GROUP << shape.depth));
            let (leaf, k) = (rest / GROUP, rest % GROUP);
            let j = g * GROUP + k;
            assert_eq!(a & 1, 0);
            if leaf == alpha[j] {
                assert_eq!(a ^ b, delta, "punctured leaf of tree {j}");
                noisy += 1;
            } else {
                assert_eq!(a, b, "leaf {leaf} of tree {j}");
            }
        }
        assert_eq!(noisy, shape.trees);
        // a wrong message length is an error, not a panic
        let mut r2 = vec![Block::ZERO; shape.leaves()];
        assert!(receive(id, &w, &c, &msg[1..], &mut prg, &mut h, &mut r2).is_err());
    }
}
