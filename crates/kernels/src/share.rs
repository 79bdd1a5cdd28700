//! `share_output`: the one step every linear kernel's response goes through.
//!
//! For every returned ciphertext:
//! 1. **mask**: add r, uniform over all n slots (fresh from a CSPRNG); the server's share
//!    is −r mod p. Coefficient-encoded responses (Cheetah) are masked the same way with
//!    r as the n plaintext coefficients ([`share_output_encoded`]): a uniform plaintext
//!    is uniform in either encoding, and the server's share is then −r coefficient-wise;
//! 2. **re-randomise and flood**: add a public-key encryption of zero whose c0 carries
//!    uniform noise of `flood_bits` bits (see [`crate::noise`]): the c1 half is then a
//!    fresh RLWE sample instead of a weight-dependent function of the client's query,
//!    and the weight-dependent noise is statistically hidden (2^-40);
//! 3. **switch to the last level**: about 5x smaller at n = 8192 (responses computed
//!    on queries below the top level — rotation-free kernels — are masked and flooded
//!    at their own level, then switched the same way);
//! 4. **round** c0 and c1 to what decryption needs ([`he::Params::response_rounding`]):
//!    a public function of the re-randomised ciphertext, about 40% fewer bytes again.
//!
//! The encryptions of zero do not depend on the query: [`FloodPool`] precomputes them
//! offline.

use std::collections::VecDeque;

use he::{Backend, Encoding};
use rand::Rng;
use rayon::prelude::*;

use crate::error::{KernelError, Result};

/// Precomputed flooding encryptions of zero (offline work of the server).
pub struct FloodPool<B: Backend> {
    zeros: VecDeque<B::Ct>,
    bits: u32,
    level: usize,
}

impl<B: Backend> FloodPool<B> {
    /// An empty pool for noise of `bits` bits at the top level.
    pub fn new(bits: u32) -> Self {
        Self::at_level(bits, 0)
    }
    /// An empty pool for noise of `bits` bits at `level` (the level of the responses
    /// it re-randomises: a layer's [`crate::LinearLayer::query_level`]).
    pub fn at_level(bits: u32, level: usize) -> Self {
        Self {
            zeros: VecDeque::new(),
            bits,
            level,
        }
    }
    /// Precomputes `count` encryptions of zero, on all threads of the pool.
    pub fn fill(&mut self, b: &B, count: usize) -> Result<()> {
        let (bits, level) = (self.bits, self.level);
        let zeros = (0..count)
            .into_par_iter()
            .map(|_| b.encrypt_zero_flood_at(bits, level))
            .collect::<he::Result<Vec<_>>>()?;
        self.zeros.extend(zeros);
        Ok(())
    }
    /// The level of its encryptions of zero.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Flooding noise size.
    pub fn bits(&self) -> u32 {
        self.bits
    }
    /// Encryptions of zero left.
    pub fn len(&self) -> usize {
        self.zeros.len()
    }
    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.zeros.is_empty()
    }
    fn take(&mut self, needed: usize) -> Result<B::Ct> {
        self.zeros
            .pop_front()
            .ok_or(KernelError::PoolEmpty { needed })
    }
}

/// A masked, flooded, switched response and the server's share of each ciphertext's
/// slots (−r mod p).
pub struct Shared<B: Backend> {
    /// The ciphertexts to send to the client.
    pub response: Vec<B::Ct>,
    /// The server's share, slot vectors, one per response ciphertext.
    pub server_slots: Vec<Vec<u64>>,
}

/// Masks, re-randomises (flooding) and switches every ciphertext to the last level
/// (slot encoding: the server's share is per slot).
pub fn share_output<B: Backend>(
    b: &B,
    cts: Vec<B::Ct>,
    pool: &mut FloodPool<B>,
) -> Result<Shared<B>> {
    share_output_encoded(b, cts, pool, Encoding::Slots)
}

/// [`share_output`] for ciphertexts in either encoding: the mask r is encoded as
/// `encoding` says, and the server's share (−r) is given in that encoding's values
/// (slots, or the plaintext polynomial's coefficients).
pub fn share_output_encoded<B: Backend>(
    b: &B,
    cts: Vec<B::Ct>,
    pool: &mut FloodPool<B>,
    encoding: Encoding,
) -> Result<Shared<B>> {
    use rayon::prelude::*;
    let s = b.slots();
    let needed = cts.len();
    let zeros = (0..needed)
        .map(|_| pool.take(needed))
        .collect::<Result<Vec<_>>>()?;
    // Each ciphertext independently (in parallel, in order), with a fresh mask from the
    // thread's CSPRNG.
    let parts = cts
        .into_par_iter()
        .zip(zeros)
        .map(|(ct, zero)| -> Result<(B::Ct, Vec<u64>)> {
            // (the shape-only backend reads no values: no mask to draw)
            let r: Vec<u64> = if b.carries_data() {
                let mut rng = rand::rng();
                (0..s.n).map(|_| rng.random_range(0..s.p)).collect()
            } else {
                vec![0; s.n]
            };
            // steps 1-3 (one pass in the power basis on Bfv)
            let last = b.mask_and_switch(&ct, &r, encoding, &zero)?;
            // what decryption does not need stays off the wire
            let out = match b.params() {
                Some(params) => b.round(&last, params.response_rounding())?,
                None => last,
            };
            Ok((out, r.iter().map(|&v| (s.p - v) % s.p).collect()))
        })
        .collect::<Result<Vec<_>>>()?;
    let (response, server_slots): (Vec<B::Ct>, Vec<Vec<u64>>) = parts.into_iter().unzip();
    Ok(Shared {
        response,
        server_slots,
    })
}
