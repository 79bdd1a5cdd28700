//! Silent correlated OT from dual LPN with the expand-convolute code: Boyle, Couteau,
//! Gilboa, Ishai, Kohl, Rindal, Scholl (CCS 2019, §5, "silent OT extension from the
//! dual-LPN / syndrome-decoding assumption") with the code of Raghuraman, Rindal,
//! Tanguy ("Expand-convolute codes for pseudorandom correlation generators from
//! LPN", CRYPTO 2023), as deployed in libOTe and CryProt.
//!
//! One batch produces `N = t·2^{h−1}` COTs `w_i = v_i ⊕ b_i·Δ` (sender `v`, `Δ`;
//! receiver `b`, `w`):
//! 1. the [`crate::pprf`] over `t` trees of depth `h` gives the sender `s ∈ F^{N'}`,
//!    `N' = t·2^h`, and the receiver `r = s ⊕ e·Δ` with `e` regular of weight `t`
//!    (one noisy position per tree);
//! 2. both compress with the dual (parity-check) map of the ExConv code of rate 1/2,
//!    `cryprot_codes::ExConvCode::new(N).dual_encode` (expander weight 7,
//!    accumulator 24, accumulated twice: libOTe's `ExConv7x24`): `v = H·s`,
//!    `w = H·r = v ⊕ (H·e)·Δ`, and `b = H·e` is the least significant bit of `w`
//!    because `lsb(s_i) = 0` and `lsb(Δ) = 1`.
//!
//! `b` is pseudorandom under the dual-LPN (regular syndrome decoding) assumption for
//! the ExConv code. Parameters ([`SilentParams::DEFAULT`]): `t = 512` noisy
//! positions, `h = 10` (`N' = 524 288`, `N = 2^18` per batch). libOTe's rule
//! (`getRegNoiseWeight`, also CryProt's `get_reg_noise_weight`) takes
//! `t = ⌈−λ / log₂(1 − 2δ)⌉` for security `λ` against linear tests with the code's
//! minimum-distance ratio `δ`; libOTe and CryProt assume `δ = 0.15` for ExConv7x24
//! (`t = 248` for λ = 128). We assume the more conservative `δ = 0.1`, which gives
//! `t ≥ 398`, and use `t = 512` (≥ 128-bit computational security against linear
//! tests, the attack family libOTe's estimate covers; the newest libOTe additionally
//! asks `t ≥ λ`, which holds). [`SilentParams`] refuses fewer than 400 trees. The
//! rule does not depend on the batch size `N` (libOTe sizes its trees to the COTs a
//! caller asks for, with the same `t`), so the depth `h` trades bytes against speed
//! only, and `t` above 398 is free to choose: 512 makes `N` a power of two, so that
//! cryprot-codes' expander draws its indices (mod `N` and mod `N/4`, 7 per output) by
//! masking its AES output instead of a division per index. `silent_throughput`,
//! alternating on one 2-core AVX2 host (AMD EPYC, 2026-12-06), four runs each: wall
//! time per usable COT (both parties) 77.0–81.1 ns with `t = 400`, 67.1–93.9 ns with
//! `t = 512` (medians 79.0 and 74.6); CPU time per COT, both parties, medians 151 and
//! 144 ns.
//!
//! The first batch of a direction takes its `t·h` base COTs from IKNP (`gc::ot`, with
//! the silent sender's `Δ` as IKNP's offset); every later batch reserves the first
//! `t·h` outputs of the previous one for the next ("bootstrapping from reserved
//! COTs", as Ferret does), so a batch costs one flight of `16·t·h` bytes (the
//! half-tree PPRF: one block per tree and level): 81 937 B for the default (a 17-byte
//! header naming the direction, the batch and the position of its first COT, then the
//! PPRF message), 0.319 B per usable COT (257 024 per batch).
//! Computation: the PPRF (`≈ N'` AES per side) and one `dual_encode` of `N'` blocks
//! per side, which takes most of the time. cryprot-codes uses its branch-free SSE4.1
//! accumulator only when compiled with `target-feature=+sse4.1`, which
//! `.cargo/config.toml` sets for x86-64 (its scalar accumulator was 0.28 µs per COT
//! for the two parties together, against 0.17 µs with it; tests/bench.rs
//! `silent_throughput`, both parties on one 2-core host).
//!
//! **The depth.** The encoder reads its input at random positions (the expander) and
//! the PPRF writes a leaf buffer of `16·N'` bytes per side, so the batch is fastest
//! when both parties' buffers stay in the last-level cache. `silent_throughput`, both
//! parties on one 2-core host with a 32 MB L3, wall time per usable COT (two runs,
//! 2026-12-02): `h = 10` 63–75 ns at 0.319 B, `h = 11` 75–85 ns at 0.174 B, `h = 12`
//! 116–118 ns at 0.094 B; with the two-key GGM tree's `2h + 1` blocks per tree, on the
//! same host an hour earlier (it drifts), `h = 10` 94–106 ns and `h = 11` 130–156 ns.
//! `h = 10` (6.6 MB of leaves per side at `t = 400`, 8.4 MB at 512) is the fastest
//! depth whose bytes stay below 0.4 B per COT: for ResNet-50's 309 M COTs, 99 MB of
//! batch messages. A default batch takes about 20 ms.
//!
//! Departures: semi-honest only (no consistency check); the puncture points come from
//! the random base-COT choice bits (power-of-two trees) instead of chosen points.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

use cryprot_codes::ExConvCode;
use cryprot_core::Block;

use crate::error::{expect_len, OtError, Result};
use crate::pprf::{self, Prg, Shape, GROUP};
use crate::pprf::{unlane, wipe, Lane};

/// The fewest noisy positions (trees) accepted: 128-bit security with `δ = 0.1`.
pub const MIN_TREES: usize = 400;

/// Parameters of one silent batch: `trees` noisy positions, trees of depth `depth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SilentParams {
    /// Noise weight `t` (trees), a multiple of 8, at least [`MIN_TREES`].
    pub trees: usize,
    /// Tree depth `h` (5..=16).
    pub depth: usize,
}

impl Default for SilentParams {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl SilentParams {
    /// `t = 512`, `h = 10`: 262 144 COTs per batch, 257 024 usable.
    pub const DEFAULT: SilentParams = SilentParams {
        trees: 512,
        depth: 10,
    };

    /// The default noise weight with trees of depth `depth` (smaller batches, same
    /// security; used by the tests).
    pub const fn with_depth(depth: usize) -> Self {
        SilentParams {
            trees: Self::DEFAULT.trees,
            depth,
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if self.trees < MIN_TREES || !self.trees.is_multiple_of(GROUP) || self.trees > 1 << 16 {
            return Err(OtError::InvalidSpec(format!(
                "silent OT needs a multiple of 8 trees in {MIN_TREES}..=65536, not {}",
                self.trees
            )));
        }
        if !(5..=16).contains(&self.depth) {
            return Err(OtError::InvalidSpec(format!(
                "silent OT tree depth must be in 5..=16, not {}",
                self.depth
            )));
        }
        Ok(())
    }

    pub(crate) fn shape(&self) -> Shape {
        Shape {
            trees: self.trees,
            depth: self.depth,
        }
    }

    /// COTs per batch, `N = t·2^{h−1}`.
    pub fn outputs(&self) -> usize {
        (self.trees << self.depth) / 2
    }

    /// COTs of each batch kept as base COTs of the next, `t·h`.
    pub fn reserve(&self) -> usize {
        self.trees * self.depth
    }

    /// COTs per batch handed out.
    pub fn usable(&self) -> usize {
        self.outputs() - self.reserve()
    }

    /// Bytes of a batch message (frame headers excluded): the batch header and the
    /// PPRF message.
    pub fn message_bytes(&self) -> usize {
        BatchHeader::BYTES + 16 * self.shape().msg_blocks()
    }

    /// Upper estimate of the peak memory (bytes) one [`crate::OtSession`] with these
    /// parameters holds, a refill in flight included. Per direction: the leaf buffer
    /// (16 B per leaf, `t·2^h` leaves: 8.4 MB by default), which is kept between
    /// batches and from which the usable COTs are handed out; the unconsumed COTs a
    /// refill moves aside (at most one batch's usable outputs when every request is
    /// at most a batch; a larger request is counted by
    /// [`crate::OtSpec::precompute_bytes`]); the GGM and hashing scratch, the batch
    /// message and the base COTs (the encoder, `cryprot_codes::ExConvCode`, holds
    /// no tables). About 28 MB for [`SilentParams::DEFAULT`].
    pub fn session_memory_bytes(&self) -> u64 {
        let s = self.shape();
        let leaves = 16 * s.leaves() as u64;
        let carry = 16 * self.usable() as u64;
        let tree = 2 * 16 * ((GROUP as u64) << self.depth);
        let base = 16 * 8 * s.base_cots() as u64;
        let msg = 4 * self.message_bytes() as u64;
        let per_dir = leaves + carry + tree + base + msg + 4096;
        2 * per_dir
    }
}

/// What a batch message says about itself, checked by the receiver before it expands
/// anything: the direction, the batch's index in that direction, and the global index
/// its first usable COT will get. Both parties derive all three from their own state,
/// so a refill that only one of them runs (a difference in the COT accounting) is a
/// typed [`OtError::SpecMismatch`] at that refill, not garbage later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BatchHeader {
    dir: u8,
    batch: u64,
    first: u64,
}

impl BatchHeader {
    const BYTES: usize = 1 + 8 + 8;

    fn to_bytes(self) -> [u8; Self::BYTES] {
        let mut h = [0u8; Self::BYTES];
        h[0] = self.dir;
        h[1..9].copy_from_slice(&self.batch.to_le_bytes());
        h[9..17].copy_from_slice(&self.first.to_le_bytes());
        h
    }

    fn check(self, theirs: &[u8]) -> Result<()> {
        expect_len("silent OT batch header", Self::BYTES, theirs.len())?;
        let word = |a: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&theirs[a..a + 8]);
            u64::from_le_bytes(b)
        };
        let fields = [
            ("refill direction", self.dir as u64, theirs[0] as u64),
            ("refill batch", self.batch, word(1)),
            ("refill position", self.first, word(9)),
        ];
        for (field, ours, theirs) in fields {
            if ours != theirs {
                return Err(OtError::SpecMismatch {
                    field,
                    ours,
                    theirs,
                });
            }
        }
        Ok(())
    }
}

fn blocks_to_bytes(bs: &[u128]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 * bs.len());
    for b in bs {
        out.extend_from_slice(&b.to_le_bytes());
    }
    out
}

pub(crate) fn bytes_to_blocks(bytes: &[u8]) -> Vec<u128> {
    bytes
        .chunks_exact(16)
        .map(|c| {
            let mut a = [0u8; 16];
            a.copy_from_slice(c);
            u128::from_le_bytes(a)
        })
        .collect()
}

/// Encodes the leaves in `pool`'s buffer in place, moves the first `reserve`
/// outputs into `base` and leaves the next ones in the buffer as the pool's fresh
/// COTs; everything else in the buffer is cleared.
fn compress(code: &ExConvCode, pool: &mut Pool, reserve: usize, base: &mut Vec<u128>) {
    let n = code.message_size();
    let leaves = pool.buffer();
    code.dual_encode(leaves);
    let (out, rest) = leaves.split_at_mut(n);
    wipe(rest);
    let first = &mut out[..reserve];
    base.zeroize();
    base.clear();
    base.extend(first.iter().map(|&l| unlane(l)));
    wipe(first);
    pool.filled(reserve, n);
}

/// The sending side of one direction (holds `Δ`).
pub(crate) struct SilentSender {
    params: SilentParams,
    delta: u128,
    base: Vec<u128>,
    batch: u64,
    dir: u8,
    code: ExConvCode,
    prg: Prg,
    rng: ChaCha20Rng,
}

impl Drop for SilentSender {
    fn drop(&mut self) {
        self.delta.zeroize();
        self.base.zeroize();
    }
}

impl std::fmt::Debug for SilentSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SilentSender")
            .field("params", &self.params)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl SilentSender {
    /// `base`: the sender's halves of `params.reserve()` base COTs with offset `delta`.
    pub(crate) fn new(params: SilentParams, delta: u128, base: Vec<u128>, dir: u8) -> Self {
        Self {
            params,
            delta,
            base,
            batch: 0,
            dir,
            code: ExConvCode::new(params.outputs()),
            prg: Prg::new(),
            rng: ChaCha20Rng::from_rng(&mut rand::rng()),
        }
    }

    pub(crate) fn delta(&self) -> u128 {
        self.delta
    }

    /// The first half of a batch: expands the leaves into `pool`'s buffer (moving
    /// its unconsumed COTs aside) and returns the message for the receiver. Send it
    /// before calling [`SilentSender::finish`], so that both sides compress at the
    /// same time.
    pub(crate) fn expand(&mut self, pool: &mut Pool) -> Vec<u8> {
        let shape = self.params.shape();
        let first_index = pool.next_index() + pool.available() as u64;
        let mut seeds: Vec<u128> = (0..shape.trees)
            .map(|_| {
                let mut b = [0u8; 16];
                self.rng.fill_bytes(&mut b);
                u128::from_le_bytes(b)
            })
            .collect();
        let msg = pprf::send(
            shape,
            self.delta,
            &self.base,
            &seeds,
            &mut self.prg,
            pool.refill_buffer(shape.leaves()),
        );
        seeds.zeroize();
        let header = BatchHeader {
            dir: self.dir,
            batch: self.batch,
            first: first_index,
        };
        self.batch += 1;
        let mut out = Vec::with_capacity(BatchHeader::BYTES + 16 * msg.len());
        out.extend_from_slice(&header.to_bytes());
        out.extend_from_slice(&blocks_to_bytes(&msg));
        out
    }

    /// The second half: compresses the leaves in `pool`'s buffer, keeps the base
    /// COTs of the next batch, and leaves the usable outputs `v` in the pool.
    pub(crate) fn finish(&mut self, pool: &mut Pool) {
        compress(&self.code, pool, self.params.reserve(), &mut self.base);
    }
}

/// The receiving side of one direction.
pub(crate) struct SilentReceiver {
    params: SilentParams,
    base_w: Vec<u128>,
    base_c: Vec<bool>,
    batch: u64,
    dir: u8,
    code: ExConvCode,
    prg: Prg,
}

impl Drop for SilentReceiver {
    fn drop(&mut self) {
        self.base_w.zeroize();
        self.base_c.zeroize();
    }
}

impl std::fmt::Debug for SilentReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SilentReceiver")
            .field("params", &self.params)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl SilentReceiver {
    /// `base_w`, `base_c`: the receiver's halves and choice bits of the base COTs.
    pub(crate) fn new(params: SilentParams, base_w: Vec<u128>, base_c: Vec<bool>, dir: u8) -> Self {
        Self {
            params,
            base_w,
            base_c,
            batch: 0,
            dir,
            code: ExConvCode::new(params.outputs()),
            prg: Prg::new(),
        }
    }

    /// The first half of a batch: rebuilds the leaves into `pool`'s buffer (moving
    /// its unconsumed COTs aside) from the sender's message.
    pub(crate) fn expand(&mut self, msg: &[u8], pool: &mut Pool) -> Result<()> {
        expect_len(
            "silent OT batch message",
            self.params.message_bytes(),
            msg.len(),
        )?;
        let (header, body) = msg.split_at(BatchHeader::BYTES);
        let ours = BatchHeader {
            dir: self.dir,
            batch: self.batch,
            first: pool.next_index() + pool.available() as u64,
        };
        ours.check(header)?;
        let blocks = bytes_to_blocks(body);
        let shape = self.params.shape();
        pprf::receive(
            shape,
            &self.base_w,
            &self.base_c,
            &blocks,
            &mut self.prg,
            pool.refill_buffer(shape.leaves()),
        )?;
        self.batch += 1;
        Ok(())
    }

    /// The second half: compresses, keeps the next base COTs, and leaves the usable
    /// outputs `w` (choice bit = least significant bit) in `pool`.
    pub(crate) fn finish(&mut self, pool: &mut Pool) {
        compress(&self.code, pool, self.params.reserve(), &mut self.base_w);
        self.base_c.zeroize();
        self.base_c = self.base_w.iter().map(|w| w & 1 == 1).collect();
    }
}

/// COTs ready to be handed out, with their global indices (for hash tweaks). The
/// pool owns its side's leaf buffer (`N'` lanes, allocated by the first batch and
/// reused): after a batch the buffer holds the batch's usable outputs at `lo..hi`
/// and zeros elsewhere, and COTs are handed out from there without copying the batch;
/// the next refill first moves what is left into `carry` (with the layers' takes
/// consumed batch by batch, `OtSession::take_each`, less than one 1-of-2^k instance),
/// which is handed out first.
#[derive(Default)]
pub(crate) struct Pool {
    buf: Vec<Lane>,
    lo: usize,
    hi: usize,
    carry: Vec<u128>,
    carry_pos: usize,
    next_index: u64,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("available", &self.available())
            .field("next_index", &self.next_index)
            .finish()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        wipe(&mut self.buf);
        self.carry.zeroize();
    }
}

impl Pool {
    pub(crate) fn available(&self) -> usize {
        self.carry.len() - self.carry_pos + self.hi - self.lo
    }

    /// Global index of the next COT handed out.
    pub(crate) fn next_index(&self) -> u64 {
        self.next_index
    }

    /// The leaf buffer.
    fn buffer(&mut self) -> &mut [Lane] {
        &mut self.buf
    }

    /// Moves the unconsumed COTs of the buffer into `carry` and returns the (all
    /// zero) buffer of `len` lanes for the next batch. The consumed parts of both were
    /// cleared by [`Pool::take`]; `carry` only grows by moving into a fresh allocation
    /// and clearing the old one, so no copy of a COT is left behind.
    fn refill_buffer(&mut self, len: usize) -> &mut [Lane] {
        let window = self.hi - self.lo;
        if window > 0 {
            let left = self.carry.len() - self.carry_pos;
            if self.carry_pos > 0 {
                self.carry.copy_within(self.carry_pos.., 0);
                // the moved-from tail beyond the live part
                self.carry[left.max(self.carry_pos)..].zeroize();
                self.carry.truncate(left);
                self.carry_pos = 0;
            }
            if self.carry.capacity() < left + window {
                // doubling, so that a long run of refills copies each COT O(1) times
                let mut grown = Vec::with_capacity((left + window).max(2 * self.carry.capacity()));
                grown.extend_from_slice(&self.carry);
                self.carry.zeroize();
                self.carry = grown;
            }
            let src = &mut self.buf[self.lo..self.hi];
            self.carry.extend(src.iter().map(|&x| unlane(x)));
            wipe(src);
        } else if self.carry_pos == self.carry.len() {
            self.carry.clear();
            self.carry_pos = 0;
        }
        self.lo = 0;
        self.hi = 0;
        if self.buf.len() != len {
            wipe(&mut self.buf);
            self.buf = vec![Block::ZERO; len];
        }
        &mut self.buf
    }

    /// The batch in the buffer is done: its usable outputs are at `lo..hi`.
    fn filled(&mut self, lo: usize, hi: usize) {
        debug_assert!(lo <= hi && hi <= self.buf.len());
        self.lo = lo;
        self.hi = hi;
    }

    /// `n` COTs and the global index of the first, or `None` if fewer are left.
    pub(crate) fn take(&mut self, n: usize) -> Option<(Vec<u128>, u64)> {
        if self.available() < n {
            return None;
        }
        let from_carry = n.min(self.carry.len() - self.carry_pos);
        let mut v = if self.carry_pos == 0
            && from_carry == self.carry.len()
            && self.carry.capacity() >= n
        {
            // all of `carry`, with room for the rest: handed out as it is
            std::mem::take(&mut self.carry)
        } else {
            let mut v = Vec::with_capacity(n);
            let c = &mut self.carry[self.carry_pos..self.carry_pos + from_carry];
            v.extend_from_slice(c);
            c.zeroize();
            self.carry_pos += from_carry;
            v
        };
        let rest = n - from_carry;
        let b = &mut self.buf[self.lo..self.lo + rest];
        v.extend(b.iter().map(|&x| unlane(x)));
        wipe(b);
        self.lo += rest;
        let first = self.next_index;
        self.next_index += n as u64;
        Some((v, first))
    }
}
