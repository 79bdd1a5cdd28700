//! Naive matrix-vector product (GALA §III-A-1, Fig. 3; GAZELLE Table 8 "N").
//!
//! Each row of W is one plaintext (slots [0, T) of row 0); the query holds x with period
//! T. Per output row: one ScMult (products of all column tiles fused), then a
//! rotate-and-sum over log2 T steps (T/2, …, 1) leaves the dot product in slot 0.
//! Cost (ideal model, T = n_i): n_o ScMult, n_o·log2 n_i Perm, n_o·log2 n_i Add,
//! n_o output ciphertexts (GALA Table II row 1). Keys: log2 T.

use he::Backend;

use super::{Ctx, Geometry, Weights};
use crate::error::Result;
use crate::noise::NoiseModel;

pub(crate) fn steps(g: &Geometry) -> Vec<i64> {
    std::iter::successors(Some(g.tile / 2), |s| Some(s / 2))
        .take_while(|&s| s >= 1)
        .map(|s| s as i64)
        .collect()
}

/// Row `row` of W (column tile `tile`) in slots [0, T).
pub(crate) fn value(g: &Geometry, w: &Weights<'_>, row: usize, tile: usize, slot: usize) -> u64 {
    if slot < g.tile {
        w.at(row, tile * g.tile + slot)
    } else {
        0
    }
}

pub(crate) fn compute<B: Backend>(c: &Ctx<'_, B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
    let refs: Vec<&B::Ct> = q.iter().collect();
    crate::par::map(0..c.g.row_blocks, |row| {
        let v = c.tiles_dot(&refs, row, 0)?;
        c.ras(v, c.g.tile)
    })
}

pub(crate) fn noise(g: &Geometry, m: &NoiseModel) -> f64 {
    let v = m.sum(m.mult(m.fresh), g.col_tiles);
    m.ras(v, g.tile.trailing_zeros())
}
