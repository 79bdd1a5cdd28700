//! Diagonal method (Halevi–Shoup; GALA Table V "Diagonal").
//!
//! W is zero-padded to d x d tiles (d = the larger padded dimension, at most the span);
//! diagonal k holds W[i][(i + k) mod d] at every slot t with i = t mod d, and the query
//! holds x with period d. y = Σ_k diag_k ⊙ rot(x, k): the d − 1 input rotations of
//! each query ciphertext form one hoisted group. Cost (ideal, one tile):
//! d − 1 HstPerm (1 DecPerm), d ScMult, d − 1 Add, no output rotation; output row r in
//! slot r. Keys: d − 1 (beyond the key budget, composed from powers of two).
//!
//! GAZELLE's Table 8 "D" column counts differently (its text does not describe it);
//! this is the plain Halevi–Shoup form GALA's Table V counts.

use he::Backend;

use super::{input_rotation_sum, Ctx, Geometry, Weights};
use crate::error::Result;
use crate::noise::NoiseModel;

pub(crate) fn steps(g: &Geometry) -> Vec<i64> {
    (1..g.diags as i64).collect()
}

/// Diagonal k at a slot (period d divides the span, so slot mod d is the row index).
pub(crate) fn value(
    g: &Geometry,
    w: &Weights<'_>,
    block: usize,
    k: usize,
    tile: usize,
    slot: usize,
) -> u64 {
    let d = g.diags;
    let i = slot % d;
    w.at(block * d + i, tile * d + (i + k) % d)
}

pub(crate) fn compute<B: Backend>(c: &Ctx<'_, B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
    input_rotation_sum(c, q, 0..c.g.diags, |k| k as i64, |k| k)
}

pub(crate) fn noise(g: &Geometry, m: &NoiseModel) -> f64 {
    m.sum(m.mult(m.rotate(m.fresh)), g.diags * g.col_tiles)
}
