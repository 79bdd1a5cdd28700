//! IKNP OT extension (Ishai, Kilian, Nissim, Petrank, CRYPTO 2003), semi-honest.
//!
//! Setup: the extension *receiver* acts as base-OT sender of [`KAPPA`] = 128 seed
//! pairs `(k⁰_j, k¹_j)`; the extension *sender* picks `Δ ∈ {0,1}¹²⁸` and receives
//! `k^{Δ_j}_j`. Each seed keys a ChaCha20 stream, continued across extensions.
//!
//! Extension of `n` OTs with choice bits `c`: the receiver sends the columns
//! `u_j = G(k⁰_j) ⊕ G(k¹_j) ⊕ c` (16 bytes per OT); the sender computes
//! `q_j = G(k^{Δ_j}_j) ⊕ Δ_j·u_j`. Transposed (128×128 bit blocks), the rows satisfy
//! `q_i = t_i ⊕ c_i·Δ` with `t_i` the rows of `G(k⁰)`: a correlated OT. Random OT:
//! `m_b = H(q_i ⊕ b·Δ, i)` for the sender, `m_{c_i} = H(t_i, i)` for the receiver,
//! `H` the TMMO fixed-key-AES hash (tweakable correlation robust). Extensions run in
//! batches of [`BATCH`] OTs, one frame each.

use net::Channel;
use rand::{CryptoRng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::BaseOt;
use crate::error::{GcError, Result};
use crate::label::{blocks_to_bytes, bytes_to_blocks_exact, Block, FixedKeyAes};

/// Base OTs (computational security parameter).
pub const KAPPA: usize = 128;
/// OTs per extension frame (16 MiB of columns).
pub const BATCH: usize = 1 << 20;

fn prg(k: Block) -> ChaCha20Rng {
    let mut seed = [0u8; 32];
    seed[..16].copy_from_slice(&k.to_le_bytes());
    ChaCha20Rng::from_seed(seed)
}

/// Transposes a 128×128 bit matrix in place: afterwards bit `j` of `a[i]` is the
/// former bit `i` of `a[j]`.
pub fn transpose128(a: &mut [u128; 128]) {
    let mut j = 64;
    let mut m: u128 = (1u128 << 64) - 1;
    while j != 0 {
        let mut k = 0;
        while k < 128 {
            let t = ((a[k] >> j) ^ a[k + j]) & m;
            a[k] ^= t << j;
            a[k + j] ^= t;
            k = (k + j + 1) & !j;
        }
        j >>= 1;
        m ^= m << j;
    }
}

/// Columns (128 of `nbytes` bytes each, back to back; `nbytes` a multiple of 16)
/// to rows (`8·nbytes` blocks).
fn columns_to_rows(cols: &[u8], nbytes: usize) -> Vec<Block> {
    let mut rows = Vec::with_capacity(nbytes * 8);
    let mut a = [0u128; 128];
    for blk in 0..nbytes / 16 {
        for (j, aj) in a.iter_mut().enumerate() {
            let mut b = [0u8; 16];
            b.copy_from_slice(&cols[j * nbytes + 16 * blk..j * nbytes + 16 * blk + 16]);
            *aj = u128::from_le_bytes(b);
        }
        transpose128(&mut a);
        rows.extend_from_slice(&a);
    }
    rows
}

/// The extension sender (holds `Δ`).
pub struct IknpSender {
    delta: Block,
    prgs: Vec<ChaCha20Rng>,
    counter: u64,
    hash: FixedKeyAes,
}

impl std::fmt::Debug for IknpSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IknpSender")
            .field("counter", &self.counter)
            .finish_non_exhaustive()
    }
}

impl Drop for IknpSender {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.delta);
    }
}

/// The extension receiver.
pub struct IknpReceiver {
    prgs: Vec<[ChaCha20Rng; 2]>,
    counter: u64,
    hash: FixedKeyAes,
}

impl std::fmt::Debug for IknpReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IknpReceiver")
            .field("counter", &self.counter)
            .finish_non_exhaustive()
    }
}

impl IknpSender {
    /// Runs the base OTs as their receiver with choices `Δ` (random if `None`).
    pub fn setup<B: BaseOt, C: Channel, R: RngCore + CryptoRng>(
        base: &mut B,
        ch: &mut C,
        rng: &mut R,
        delta: Option<Block>,
    ) -> Result<Self> {
        let delta = delta.unwrap_or_else(|| {
            let mut b = [0u8; 16];
            rng.fill_bytes(&mut b);
            u128::from_le_bytes(b)
        });
        let choices: Vec<bool> = (0..KAPPA).map(|j| (delta >> j) & 1 == 1).collect();
        let keys = base.receive(ch, rng, &choices)?;
        Ok(Self {
            delta,
            prgs: keys.into_iter().map(prg).collect(),
            counter: 0,
            hash: FixedKeyAes::new(),
        })
    }

    /// `Δ`.
    pub fn delta(&self) -> Block {
        self.delta
    }

    /// `n` correlated OTs: returns `q_i` (the receiver holds `q_i ⊕ c_i·Δ`).
    pub fn extend_cot<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<Vec<Block>> {
        let mut out = Vec::with_capacity(n);
        let mut done = 0;
        while done < n {
            let m = BATCH.min(n - done);
            let nbytes = m.div_ceil(128) * 16;
            let u = ch.recv_at_most(KAPPA * nbytes)?;
            if u.len() != KAPPA * nbytes {
                return Err(GcError::Length {
                    what: "IKNP columns (bytes)",
                    expected: (KAPPA * nbytes) as u64,
                    actual: u.len() as u64,
                });
            }
            let mut cols = vec![0u8; KAPPA * nbytes];
            for (j, g) in self.prgs.iter_mut().enumerate() {
                let col = &mut cols[j * nbytes..(j + 1) * nbytes];
                g.fill_bytes(col);
                if (self.delta >> j) & 1 == 1 {
                    for (x, y) in col.iter_mut().zip(&u[j * nbytes..(j + 1) * nbytes]) {
                        *x ^= y;
                    }
                }
            }
            let rows = columns_to_rows(&cols, nbytes);
            out.extend_from_slice(&rows[..m]);
            done += m;
        }
        self.counter += n as u64;
        Ok(out)
    }

    /// `n` random OTs: the pairs `(m₀, m₁)`.
    pub fn extend_random<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<Vec<[Block; 2]>> {
        let first = self.counter;
        let q = self.extend_cot(ch, n)?;
        let mut m0 = q.clone();
        let mut m1: Vec<Block> = q.iter().map(|x| x ^ self.delta).collect();
        let mut s = Vec::new();
        self.hash.tccr_batch(&mut m0, first, &mut s);
        self.hash.tccr_batch(&mut m1, first, &mut s);
        Ok(m0.into_iter().zip(m1).map(|(a, b)| [a, b]).collect())
    }

    /// Chosen-message OT: the receiver learns `msgs[i][c_i]` only.
    pub fn send<C: Channel>(&mut self, ch: &mut C, msgs: &[[Block; 2]]) -> Result<()> {
        let pads = self.extend_random(ch, msgs.len())?;
        let mut ys = Vec::with_capacity(2 * msgs.len());
        for (m, p) in msgs.iter().zip(&pads) {
            ys.push(m[0] ^ p[0]);
            ys.push(m[1] ^ p[1]);
        }
        ch.send(&blocks_to_bytes(&ys))?;
        Ok(())
    }
}

impl IknpReceiver {
    /// Runs the base OTs as their sender.
    pub fn setup<B: BaseOt, C: Channel, R: RngCore + CryptoRng>(
        base: &mut B,
        ch: &mut C,
        rng: &mut R,
    ) -> Result<Self> {
        let keys = base.send(ch, rng, KAPPA)?;
        Ok(Self {
            prgs: keys.into_iter().map(|[a, b]| [prg(a), prg(b)]).collect(),
            counter: 0,
            hash: FixedKeyAes::new(),
        })
    }

    /// Correlated OTs with choices `c`: returns `t_i` (the sender holds `q_i = t_i ⊕ c_i·Δ`).
    pub fn extend_cot<C: Channel>(&mut self, ch: &mut C, choices: &[bool]) -> Result<Vec<Block>> {
        let n = choices.len();
        let mut out = Vec::with_capacity(n);
        let mut done = 0;
        while done < n {
            let m = BATCH.min(n - done);
            let nbytes = m.div_ceil(128) * 16;
            let mut c = vec![0u8; nbytes];
            for (i, &b) in choices[done..done + m].iter().enumerate() {
                c[i / 8] |= (b as u8) << (i % 8);
            }
            let mut t = vec![0u8; KAPPA * nbytes];
            let mut u = vec![0u8; KAPPA * nbytes];
            for (j, [g0, g1]) in self.prgs.iter_mut().enumerate() {
                let tj = &mut t[j * nbytes..(j + 1) * nbytes];
                let uj = &mut u[j * nbytes..(j + 1) * nbytes];
                g0.fill_bytes(tj);
                g1.fill_bytes(uj);
                for ((x, y), z) in uj.iter_mut().zip(tj.iter()).zip(&c) {
                    *x ^= y ^ z;
                }
            }
            ch.send(&u)?;
            let rows = columns_to_rows(&t, nbytes);
            out.extend_from_slice(&rows[..m]);
            done += m;
        }
        self.counter += n as u64;
        Ok(out)
    }

    /// Random OTs with choices `c`: returns `m_{c_i}`.
    pub fn extend_random<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>> {
        let first = self.counter;
        let mut t = self.extend_cot(ch, choices)?;
        let mut s = Vec::new();
        self.hash.tccr_batch(&mut t, first, &mut s);
        Ok(t)
    }

    /// Chosen-message OT: returns `msgs[i][c_i]`.
    pub fn receive<C: Channel>(&mut self, ch: &mut C, choices: &[bool]) -> Result<Vec<Block>> {
        let pads = self.extend_random(ch, choices)?;
        let bytes = ch.recv_at_most(32 * choices.len())?;
        if bytes.len() != 32 * choices.len() {
            return Err(GcError::Length {
                what: "OT ciphertexts (bytes)",
                expected: 32 * choices.len() as u64,
                actual: bytes.len() as u64,
            });
        }
        let ys = bytes_to_blocks_exact(&bytes);
        Ok(choices
            .iter()
            .zip(pads)
            .enumerate()
            .map(|(i, (&c, p))| ys[2 * i + c as usize] ^ p)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_matches_naive() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let mut a = [0u128; 128];
        for x in a.iter_mut() {
            let mut b = [0u8; 16];
            rng.fill_bytes(&mut b);
            *x = u128::from_le_bytes(b);
        }
        let orig = a;
        transpose128(&mut a);
        for (i, ai) in a.iter().enumerate() {
            for (j, oj) in orig.iter().enumerate() {
                assert_eq!((ai >> j) & 1, (oj >> i) & 1);
            }
        }
    }
}
