//! GALA's row-encoding-share-RaS product (GALA §III-A-3, Fig. 5, Table II row 3).
//!
//! The hybrid's diagonal plaintexts ([`super::hybrid`]) pre-rotated by −kL within each
//! row (row encoding): v_k = rot(P_k, −kL) ⊙ x needs no input rotation; the server
//! rotates the K − 1 products instead (rot(v_k, kL), summed), and the final
//! log2 L rotate-and-sum moves onto the cleartext shares: both parties sum the L slots
//! of each output's segment. Cost (ideal): n_i n_o/n ScMult, n_i n_o/n − 1 Perm,
//! n_i n_o/n − 1 Add, no HstPerm, one output ciphertext; one ScMult and nothing else
//! when n_i n_o ≤ n (GALA fn. 7). Keys: K − 1.

use he::Backend;

use super::{hybrid, row_rotated_source, Ctx, Geometry, Weights};
use crate::error::{KernelError, Result};
use crate::noise::NoiseModel;

pub(crate) fn steps(g: &Geometry) -> Vec<i64> {
    (1..g.diags).map(|k| (k * g.seg) as i64).collect()
}

/// Row encoding (shared with HELiKs): the hybrid's plaintext k rotated by −kL within
/// each row.
pub(crate) fn value(
    g: &Geometry,
    w: &Weights<'_>,
    block: usize,
    k: usize,
    tile: usize,
    slot: usize,
) -> u64 {
    hybrid::value(g, w, block, k, tile, row_rotated_source(g, slot, k * g.seg))
}

pub(crate) fn compute<B: Backend>(c: &Ctx<'_, B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
    let refs: Vec<&B::Ct> = q.iter().collect();
    crate::par::map(0..c.g.row_blocks, |block| {
        let mut total: Option<B::Ct> = None;
        for k in 0..c.g.diags {
            let v = c.tiles_dot(&refs, block, k)?;
            let v = c.rot.rotate(c.b, &v, (k * c.g.seg) as i64)?;
            total = c.accumulate(total, v)?;
        }
        total.ok_or(KernelError::EmptyDimension { what: "diagonals" })
    })
}

pub(crate) fn noise(g: &Geometry, m: &NoiseModel) -> f64 {
    let v = m.sum(m.mult(m.fresh), g.col_tiles);
    m.sum(m.rotate(v), g.diags)
}
