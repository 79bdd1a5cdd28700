//! Cheetah's HomFC: a matrix-vector product in coefficient encoding, no rotations and
//! no Galois keys (Huang, Lu, Hong, Ding: "Cheetah: Lean and Fast Secure Two-Party Deep
//! Neural Network Inference", USENIX Security 2022, §4.2; index maps as in OpenCheetah's
//! `hom_fc_ss.cc`, written anew here).
//!
//! W (n_o x n_i) is cut into blocks of d0 rows x d1 columns with d0·d1 ≤ n, and x into
//! chunks of d1 (one query ciphertext each). In Z_p\[X\]/(X^n + 1):
//! - chunk: x̂(X) = x_0 − Σ_{j=1}^{d1−1} x_j X^{n−j} (= Σ_j x_j X^{−j});
//! - block: Ŵ(X) = Σ_{r<d0, c<d1} W\[r\]\[c\] X^{r·d1 + c}, coefficients lifted centred;
//! - Ŵ·x̂ has Σ_c W\[r\]\[c\] x_c at coefficient r·d1: the exponents r·d1 + c − j meet
//!   r·d1 only for j = c, and the wrapped terms (c < j in the first row) land at
//!   n − d1 + 1 … n − 1, above (d0 − 1)·d1 because d0·d1 ≤ n.
//!
//! Output block b is Σ_chunks Ŵ_{b,chunk}·x̂_chunk: one fused sum of products per
//! response ciphertext, ceil(n_i/d1)·ceil(n_o/d0) ScMult in all, no rotation, no
//! Galois key. Both parties read output r of block b at coefficient (r mod d0)·d1 of
//! their share of response b.
//!
//! The response goes through `share_output` (mask on all n coefficients, flooding
//! encryption of zero, last level) and is then reduced to the d0 coefficients the
//! client reads ([`he::Backend::select_coeffs`]: c1 whole, c0 at those coefficients):
//! about half a last-level ciphertext.
//!
//! The split (d0, d1) minimises 2·(query ciphertexts) + (response ciphertexts), a
//! proxy for bytes and time (a seeded query at the top level is 2-5x a selected
//! response; each response costs a `share_output`), then the number of products;
//! OpenCheetah minimises the plain sum.

use he::Backend;

use super::{Ctx, Geometry, Weights};
use crate::error::{KernelError, Result};
use crate::noise::NoiseModel;

/// (d0, d1): rows per block and columns per chunk, d0·d1 ≤ n.
pub(crate) fn split(n_o: usize, n_i: usize, n: usize) -> (usize, usize) {
    let mut best = (usize::MAX, usize::MAX, 1usize, 1usize);
    for d1 in 1..=n_i.min(n) {
        let d0 = (n / d1).min(n_o);
        let (ins, outs) = (n_i.div_ceil(d1), n_o.div_ceil(d0));
        let key = (2 * ins + outs, ins * outs);
        if key < (best.0, best.1) {
            best = (key.0, key.1, d0, d1);
        }
    }
    (best.2, best.3)
}

/// The coefficients of query chunk `tile`: x_0 at 0 and −x_j at n − j.
pub(crate) fn query_values(g: &Geometry, x: &[u64], p: u64, tile: usize) -> Vec<u64> {
    let mut v = vec![0u64; g.n];
    for j in 0..g.tile {
        let c = tile * g.tile + j;
        if c >= g.n_i {
            break;
        }
        if j == 0 {
            v[0] = x[c];
        } else {
            v[g.n - j] = (p - x[c]) % p;
        }
    }
    v
}

/// The coefficients of weight block (block, tile): W\[r\]\[c\] at r·d1 + c.
pub(crate) fn weight_values(g: &Geometry, w: &Weights<'_>, block: usize, tile: usize) -> Vec<u64> {
    let mut v = vec![0u64; g.n];
    for r in 0..g.block_rows {
        for c in 0..g.tile {
            v[r * g.tile + c] = w.at(block * g.block_rows + r, tile * g.tile + c);
        }
    }
    v
}

/// One fused sum of polynomial products per output block.
pub(crate) fn compute<B: Backend>(c: &Ctx<'_, B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
    let refs: Vec<&B::Ct> = q.iter().collect();
    crate::par::map(0..c.g.row_blocks, |block| {
        let pts: Vec<&B::PreparedPt> = (0..q.len()).map(|t| c.pt(block, 0, t)).collect();
        if pts.is_empty() {
            return Err(KernelError::EmptyDimension {
                what: "query chunks",
            });
        }
        Ok(c.b.dot_coeffs(&refs, &pts)?)
    })
}

/// The coefficient of output row `local` of a block.
pub(crate) fn output_coefficient(g: &Geometry, local: usize) -> usize {
    local * g.tile
}

/// A block has d0·d1 weight coefficients; the chunk products (different query
/// ciphertexts: independent noise) are summed.
pub(crate) fn noise(g: &Geometry, m: &NoiseModel) -> f64 {
    m.sum_independent(m.mult_sparse(m.fresh, g.block_rows * g.tile), g.col_tiles)
}
