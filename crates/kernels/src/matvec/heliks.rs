//! HELiKs matrix-vector product (HELiKs §3.2, §4: V2 descending accumulation with one
//! fixed rotation, V3 weights stored in NTT/Shoup form, V4 seeded symmetric queries,
//! tiling; the row halves' sums on the cleartext shares).
//!
//! Same row-encoded diagonals as [`super::gala`] (input-aligned: multiply first, no input
//! rotation). The K products are accumulated in descending order with a single rotation
//! step: acc ← rot(acc, L) + v_k, so product k is rotated by kL in total, with one Galois
//! key for the whole layer. Products of all column tiles are fused (one reduction)
//! before each rotation, so rotations do not grow with the number of input tiles
//! (§4.5). Each output's partial sums — within its segment and across the two BFV rows —
//! are added on the cleartext shares. Cost per block: K ScMult per tile, K − 1 Perm,
//! K − 1 Add (+ tile sums), one output ciphertext; keys: 1 (none when K = 1).
//!
//! Departure from the paper: the fixed step is the segment length L rather than 1 (the
//! segments here are contiguous; HELiKs interleaves them); one key either way.

use he::Backend;

use super::{Ctx, Geometry};
use crate::error::{KernelError, Result};
use crate::noise::{log2_add, NoiseModel};

pub(crate) fn steps(g: &Geometry) -> Vec<i64> {
    if g.diags > 1 {
        vec![g.seg as i64]
    } else {
        vec![]
    }
}

pub(crate) fn compute<B: Backend>(c: &Ctx<'_, B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
    let refs: Vec<&B::Ct> = q.iter().collect();
    crate::par::map(0..c.g.row_blocks, |block| {
        let mut acc: Option<B::Ct> = None;
        for k in (0..c.g.diags).rev() {
            let v = c.tiles_dot(&refs, block, k)?;
            acc = Some(match acc {
                None => v,
                Some(a) => {
                    let r = c.rot.rotate(c.b, &a, c.g.seg as i64)?;
                    c.b.add(&r, &v)?
                }
            });
        }
        acc.ok_or(KernelError::EmptyDimension { what: "diagonals" })
    })
}

pub(crate) fn noise(g: &Geometry, m: &NoiseModel) -> f64 {
    let v = m.sum(m.mult(m.fresh), g.col_tiles);
    (1..g.diags).fold(v, |acc, _| log2_add(m.rotate(acc), v))
}
