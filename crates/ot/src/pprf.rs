//! Puncturable PRF from GGM trees, punctured by COT: the sparse half of silent OT
//! (Boyle, Couteau, Gilboa, Ishai, Kohl, Rindal, Scholl, "Efficient two-round OT
//! extension and silent non-interactive secure computation", CCS 2019, §4), with the
//! trees of Guo, Yang, Wang, Zhang, Xie, Liu, Zhao ("Half-tree: halving the cost of
//! tree expansion in COT and DPF", EUROCRYPT 2023, §4, the single-point COT of Fig. 4,
//! semi-honest part).
//!
//! `t` trees of depth `h`. The sender draws a seed `s` per tree and sets level 1 to
//! `(s, s ⊕ Δ)`; every node `x` of a level `l < h` has the children `(H(x), x ⊕ H(x))`
//! with the circular correlation-robust hash `H(x) = π(σ(x)) ⊕ σ(x)` (`π` AES-128
//! under a fixed public key, `σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L`; Guo, Katz, Wang, Yu,
//! S&P 2020, §7.3). So the children of a node sum to the node and every level sums to
//! `Δ`: the XOR `K¹_l` of a level's right children is `K⁰_l ⊕ Δ`, `K⁰_l` that of its
//! left children. Per level the sender sends `c_l = K⁰_l ⊕ v` for the level's base COT
//! `(v, w = v ⊕ c·Δ)`; the receiver learns `c_l ⊕ w = K^c_l`, the sum on the side
//! *off* its path (its puncture point `α_j` is the complement of the choice bits of
//! the tree's `h` base COTs, most significant bit first, so no derandomisation bit is
//! sent), from which it rebuilds the sibling of its path node. The leaves too sum to
//! `Δ`, so the receiver's `X = ⊕_{i≠α} s_i` is `s_α ⊕ Δ` with no message. Both clear the
//! least significant bit of every leaf they hold, and the receiver sets
//! `r_α = X | 1 = (s_α with its lsb cleared) ⊕ Δ` (`lsb(Δ) = 1`). So `lsb(r_i)` is the
//! noise bit `e_i` (libOTe's "packed" choice bits), and the receiver never encodes a
//! separate bit vector.
//!
//! Layout: trees in groups of 8 (AES pipelining, and libOTe/CryProt's "interleaved"
//! output format): leaf `i` of tree `8g + k` sits at position `(g·2^h + i)·8 + k` of
//! the `N' = t·2^h` output. Regular noise: exactly one `e_i = 1` per tree.
//!
//! Cost per batch: `h·t` base COTs; the sender sends `t·h` blocks (one flight; the
//! two-key GGM tree of the CCS 2019 and Ferret constructions sends `t·(2h + 1)`);
//! each side computes about `N'` AES for the trees (one per parent, where the
//! length-doubling PRG takes two). Departure from the papers: no consistency check
//! (semi-honest only), and the puncture points are fixed by the random base-COT
//! choices instead of being chosen.

use aes::cipher::{BlockCipherEncrypt, KeyInit};
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

/// Overwrites secret lanes with zeros (volatile writes, not optimised away), one
/// 128-bit word per lane: `zeroize` writes a slice element by element, so a byte view
/// would cost 16 stores per lane (about 3.5 s of CPU over ResNet-50's 309 M COTs, whose
/// leaf buffers are wiped twice per batch).
pub(crate) fn wipe(l: &mut [Lane]) {
    bytemuck::cast_slice_mut::<Lane, u128>(l).zeroize();
}

/// Overwrites secret bytes with zeros as [`wipe`] does, in 128-bit words where they
/// are aligned (a 1-of-2^k sender's pads are a byte each, 8 per instance).
pub(crate) fn wipe_bytes(b: &mut [u8]) {
    let (head, words, tail) = bytemuck::pod_align_to_mut::<u8, u128>(b);
    head.zeroize();
    words.zeroize();
    tail.zeroize();
}
use crate::error::{expect_len, Result};

/// Trees expanded together.
pub(crate) const GROUP: usize = 8;

/// Public fixed key of the tree hash's permutation `π` (its own, apart from
/// [`crate::hash`]'s).
const TREE_KEY: [u8; 16] = *b"helina-halftree1";

/// `σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L` (`x_L` the high half): a linear orthomorphism.
#[inline(always)]
fn sigma(x: u128) -> u128 {
    let (l, r) = (x >> 64, x & u128::from(u64::MAX));
    ((l ^ r) << 64) | l
}

/// The tree hash `H(x) = π(σ(x)) ⊕ σ(x)`, batched.
pub(crate) struct Prg {
    aes: Aes128,
    buf: Vec<aes::Block>,
}

impl std::fmt::Debug for Prg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prg")
    }
}

impl Drop for Prg {
    fn drop(&mut self) {
        for b in self.buf.iter_mut() {
            b.as_mut_slice().zeroize();
        }
    }
}

impl Prg {
    pub(crate) fn new() -> Self {
        Self {
            aes: Aes128::new(&TREE_KEY.into()),
            buf: Vec::new(),
        }
    }

    /// `out[(2·node)·8 + k] = H(x)`, `out[(2·node + 1)·8 + k] = x ⊕ H(x)` for the
    /// parents `x = xs[node·8 + k]` of one group level (children in the same layout);
    /// returns for each tree `k` the XOR of its left and of its right children.
    fn expand_level(&mut self, xs: &[u128], out: &mut [u128]) -> [[u128; 2]; GROUP] {
        let mut sums = [[0u128; 2]; GROUP];
        self.buf.clear();
        self.buf
            .extend(xs.iter().map(|&x| aes::Block::from(sigma(x).to_le_bytes())));
        self.aes.encrypt_blocks(&mut self.buf);
        let parents = self.buf.chunks_exact(GROUP).zip(xs.chunks_exact(GROUP));
        for ((enc, x), o) in parents.zip(out.chunks_exact_mut(2 * GROUP)) {
            let (left, right) = o.split_at_mut(GROUP);
            for k in 0..GROUP {
                let y = u128::from_le_bytes(enc[k].into()) ^ sigma(x[k]);
                left[k] = y;
                right[k] = x[k] ^ y;
                sums[k][0] ^= y;
                sums[k][1] ^= x[k] ^ y;
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
        self.trees * self.depth
    }
}

/// Sender side: expands the trees from `seeds` (one per tree) into `leaves` (the
/// `N'` leaves as lanes, least significant bit cleared) and returns the message for
/// the receiver. `base_v[j·h + l]` is the sender's half of the base COT of tree `j`,
/// level `l+1`. On the calling party's thread (the groups on the rayon pool, with the
/// 1-of-2^k pads there too, made ResNet-50's offline phase slower: BENCHMARKS.md).
pub(crate) fn send(
    shape: Shape,
    delta: u128,
    base_v: &[u128],
    seeds: &[u128],
    prg: &mut Prg,
    leaves: &mut [Lane],
) -> Vec<u128> {
    let (t, h) = (shape.trees, shape.depth);
    debug_assert_eq!(base_v.len(), t * h);
    debug_assert_eq!(seeds.len(), t);
    debug_assert_eq!(leaves.len(), shape.leaves());
    let mut msg = vec![0u128; shape.msg_blocks()];
    let mut cur = Vec::new();
    let mut next = Vec::new();
    for g in 0..t / GROUP {
        // level 1: (s, s ⊕ Δ)
        cur.clear();
        cur.extend_from_slice(&seeds[g * GROUP..(g + 1) * GROUP]);
        cur.extend(seeds[g * GROUP..(g + 1) * GROUP].iter().map(|s| s ^ delta));
        for k in 0..GROUP {
            msg[(g * GROUP + k) * h] = seeds[g * GROUP + k];
        }
        for l in 1..h {
            next.resize(GROUP << (l + 1), 0);
            let sides = prg.expand_level(&cur, &mut next);
            for (k, side) in sides.iter().enumerate() {
                msg[(g * GROUP + k) * h + l] = side[0];
            }
            std::mem::swap(&mut cur, &mut next);
        }
        // `cur` holds the group's leaves
        let chunk = &mut leaves[(g * GROUP) << h..((g + 1) * GROUP) << h];
        for (out, kids) in chunk.chunks_exact_mut(GROUP).zip(cur.chunks_exact(GROUP)) {
            for k in 0..GROUP {
                out[k] = lane(kids[k] & !1);
            }
        }
    }
    cur.zeroize();
    next.zeroize();
    // c_l = K⁰_l ⊕ v
    for (c, v) in msg.iter_mut().zip(base_v) {
        *c ^= v;
    }
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
    shape: Shape,
    base_w: &[u128],
    base_c: &[bool],
    msg: &[u128],
    prg: &mut Prg,
    leaves: &mut [Lane],
) -> Result<()> {
    let (t, h) = (shape.trees, shape.depth);
    expect_len("PPRF message (blocks)", shape.msg_blocks(), msg.len())?;
    expect_len("PPRF base COTs", t * h, base_w.len())?;
    expect_len("PPRF base choices", t * h, base_c.len())?;
    expect_len("PPRF leaves", shape.leaves(), leaves.len())?;
    let alpha = points(shape, base_c);
    let mut cur = Vec::new();
    let mut next = Vec::new();
    for g in 0..t / GROUP {
        for l in 0..h {
            // level l+1 from level l; the path node's children come from a zero
            // placeholder and are fixed below (level 1 has no parent: zeros)
            next.clear();
            next.resize(GROUP << (l + 1), 0);
            let side = if l == 0 {
                [[0u128; 2]; GROUP]
            } else {
                prg.expand_level(&cur, &mut next)
            };
            for k in 0..GROUP {
                let j = g * GROUP + k;
                let i = j * h + l;
                let c = base_c[i] as usize;
                // path node at level l+1 and its sibling (on side c)
                let path = alpha[j] >> (h - l - 1);
                let sib = path ^ 1;
                // K^c_{l+1} = c_l ⊕ w
                let known = msg[i] ^ base_w[i];
                next[sib * GROUP + k] ^= known ^ side[k][c];
                next[path * GROUP + k] = 0;
            }
            std::mem::swap(&mut cur, &mut next);
        }
        let chunk = &mut leaves[(g * GROUP) << h..((g + 1) * GROUP) << h];
        // X = ⊕_{i≠α} s_i (the punctured leaf is a zero placeholder) = s_α ⊕ Δ
        let mut acc = [0u128; GROUP];
        for (out, kids) in chunk.chunks_exact_mut(GROUP).zip(cur.chunks_exact(GROUP)) {
            for k in 0..GROUP {
                acc[k] ^= kids[k];
                out[k] = lane(kids[k] & !1);
            }
        }
        for k in 0..GROUP {
            let j = g * GROUP + k;
            chunk[alpha[j] * GROUP + k] = lane(acc[k] | 1);
        }
        acc.zeroize();
    }
    cur.zeroize();
    next.zeroize();
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
    fn wipes_clear_every_byte_aligned_or_not() {
        let mut lanes: Vec<Lane> = (1..=9u128)
            .map(|x| lane((x * 0x0101_0101) | (1 << 127)))
            .collect();
        wipe(&mut lanes[2..7]);
        for (i, l) in lanes.iter().enumerate() {
            assert_eq!(unlane(*l) == 0, (2..7).contains(&i));
        }
        let mut bytes: Vec<u8> = (1..=100u8).collect();
        // an unaligned start and length: head, 128-bit words and tail
        wipe_bytes(&mut bytes[3..97]);
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(*b == 0, (3..97).contains(&i));
        }
    }

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
        let mut prg = Prg::new();
        let mut s = vec![Block::ZERO; shape.leaves()];
        let msg = send(shape, delta, &v, &seeds, &mut prg, &mut s);
        let mut r = vec![Block::ZERO; shape.leaves()];
        receive(shape, &w, &c, &msg, &mut prg, &mut r).unwrap();
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
        assert!(receive(shape, &w, &c, &msg[1..], &mut prg, &mut r2).is_err());
    }
}
