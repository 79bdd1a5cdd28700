//! Wire labels and the fixed-key-AES hash used by garbling and OT extension.
//!
//! Labels are 128-bit [`Block`]s drawn from a CSPRNG (ChaCha20 seeded from the OS).
//! With free-XOR the two labels of a wire differ by the global offset `Δ`, whose
//! least significant bit is 1 so the lsb of a label is its point-and-permute bit.
//!
//! The garbling hash is the fixed-key construction of Guo, Katz, Wang, Yu
//! ("Efficient and secure multiparty computation from fixed-key block ciphers",
//! S&P 2020), MMO with a linear orthomorphism:
//!
//! `H(x, i) = π(σ(x) ⊕ i) ⊕ σ(x)`, with `π` = AES-128 under a public fixed key
//! and `σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L`.
//!
//! This is the (tweakable) circular-correlation-robust hash half-gates needs,
//! as used by emp-toolkit; one AES call per hash, batched so AES-NI pipelines
//! (the `aes` crate detects AES-NI, and VAES with AVX-512, at run time). For OT extension we use the
//! two-call `TMMO` variant `π(π(x) ⊕ i) ⊕ π(x)`, which Guo et al. prove
//! tweakable correlation robust.

use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes128;

/// A 128-bit label / OT string.
pub type Block = u128;

/// The public key of the fixed-key permutation.
const FIXED_KEY: [u8; 16] = *b"helina-gc-fk-v1!";

/// The point-and-permute bit of a label.
#[inline]
pub fn lsb(b: Block) -> bool {
    b & 1 == 1
}

/// `0` or all ones.
#[inline]
pub(crate) fn mask(bit: bool) -> Block {
    0u128.wrapping_sub(bit as u128)
}

/// `σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L` (x_L the high half).
#[inline]
pub fn sigma(x: Block) -> Block {
    let hi = x >> 64;
    let lo = x & 0xFFFF_FFFF_FFFF_FFFF;
    ((hi ^ lo) << 64) | hi
}

/// Fixed-key AES as a random permutation, with batched hashes.
#[derive(Clone)]
pub struct FixedKeyAes {
    cipher: Aes128,
}

impl Default for FixedKeyAes {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FixedKeyAes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FixedKeyAes")
    }
}

impl FixedKeyAes {
    /// The permutation under the crate's public fixed key.
    pub fn new() -> Self {
        Self {
            cipher: Aes128::new(&FIXED_KEY.into()),
        }
    }

    /// `xs[k] ← π(xs[k])`, batched.
    pub fn permute(&self, xs: &mut [Block], scratch: &mut Vec<aes::Block>) {
        scratch.clear();
        scratch.extend(xs.iter().map(|x| aes::Block::from(x.to_le_bytes())));
        self.cipher.encrypt_blocks(scratch);
        for (x, b) in xs.iter_mut().zip(scratch.iter()) {
            let bytes: [u8; 16] = (*b).into();
            *x = u128::from_le_bytes(bytes);
        }
    }

    /// `xs[k] ← H(xs[k], tweaks[k]) = π(σ(x) ⊕ i) ⊕ σ(x)`, batched.
    pub fn hash_batch(&self, xs: &mut [Block], tweaks: &[Block], scratch: &mut Vec<aes::Block>) {
        for x in xs.iter_mut() {
            *x = sigma(*x);
        }
        scratch.clear();
        scratch.extend(
            xs.iter()
                .zip(tweaks)
                .map(|(x, t)| aes::Block::from((x ^ t).to_le_bytes())),
        );
        self.cipher.encrypt_blocks(scratch);
        for (x, b) in xs.iter_mut().zip(scratch.iter()) {
            let bytes: [u8; 16] = (*b).into();
            *x ^= u128::from_le_bytes(bytes);
        }
    }

    /// One hash `H(x, i)`.
    pub fn hash(&self, x: Block, tweak: Block) -> Block {
        let mut xs = [x];
        let mut s = Vec::with_capacity(1);
        self.hash_batch(&mut xs, &[tweak], &mut s);
        xs[0]
    }

    /// `xs[k] ← π(π(x) ⊕ i) ⊕ π(x)` with `i = first_tweak + k` (TMMO, for OT extension).
    pub fn tccr_batch(&self, xs: &mut [Block], first_tweak: u64, scratch: &mut Vec<aes::Block>) {
        self.permute(xs, scratch);
        let mut ys: Vec<Block> = xs
            .iter()
            .enumerate()
            .map(|(k, x)| x ^ (first_tweak as u128 + k as u128))
            .collect();
        self.permute(&mut ys, scratch);
        for (x, y) in xs.iter_mut().zip(ys) {
            *x ^= y;
        }
    }
}

/// Random blocks from a CSPRNG.
pub(crate) fn random_blocks<R: rand::RngCore>(rng: &mut R, n: usize) -> Vec<Block> {
    let mut bytes = vec![0u8; n * 16];
    rng.fill_bytes(&mut bytes);
    bytes_to_blocks_exact(&bytes)
}

/// Little-endian bytes → blocks (length a multiple of 16 is the caller's duty; a tail is ignored).
pub(crate) fn bytes_to_blocks_exact(bytes: &[u8]) -> Vec<Block> {
    bytes
        .chunks_exact(16)
        .map(|c| {
            let mut a = [0u8; 16];
            a.copy_from_slice(c);
            u128::from_le_bytes(a)
        })
        .collect()
}

/// Blocks → little-endian bytes.
pub(crate) fn blocks_to_bytes(blocks: &[Block]) -> Vec<u8> {
    let mut out = Vec::with_capacity(blocks.len() * 16);
    for b in blocks {
        out.extend_from_slice(&b.to_le_bytes());
    }
    out
}

/// Bits → bytes, LSB first.
pub(crate) fn pack_bits(bits: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        out[i / 8] |= (b as u8) << (i % 8);
    }
    out
}

/// Bytes → `n` bits, LSB first; `None` if the byte count is not `ceil(n/8)`.
pub(crate) fn unpack_bits(bytes: &[u8], n: usize) -> Option<Vec<bool>> {
    if bytes.len() != n.div_ceil(8) {
        return None;
    }
    Some((0..n).map(|i| (bytes[i / 8] >> (i % 8)) & 1 == 1).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_deterministic_and_tweaked() {
        let h = FixedKeyAes::new();
        assert_eq!(h.hash(5, 1), h.hash(5, 1));
        assert_ne!(h.hash(5, 1), h.hash(5, 2));
        let mut xs = vec![1u128, 2, 3];
        let mut s = Vec::new();
        h.hash_batch(&mut xs, &[7, 8, 9], &mut s);
        assert_eq!(xs[1], h.hash(2, 8));
    }

    #[test]
    fn bits_roundtrip() {
        let bits: Vec<bool> = (0..13).map(|i| i % 3 == 0).collect();
        assert_eq!(unpack_bits(&pack_bits(&bits), 13), Some(bits));
        assert_eq!(unpack_bits(&[0u8; 3], 13), None);
    }
}
