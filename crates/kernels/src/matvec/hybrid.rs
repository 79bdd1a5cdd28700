//! GAZELLE's hybrid method (GAZELLE §5; GALA §III-A-2, Fig. 4; GAZELLE Table 8 "H").
//!
//! The query holds n/T copies of x (period T). Output row r of a block owns the L slots
//! [rL, (r+1)L) with L = min(T, n/R); diagonal plaintext k (k < K = T/L) holds
//! W[r][(t + kL) mod T] at slot g of segment r (t = g mod S). u = Σ_k P_k ⊙ rot(x, kL)
//! (one hoisted group of K − 1 input rotations per query ciphertext), then a
//! rotate-and-sum over the segment (L/2, …, 1) leaves y\[r\] in slot rL.
//! Cost (ideal, n_i·n_o ≥ n): n_i n_o/n ScMult, n_i n_o/n − 1 HstPerm, log2(n/n_o) Perm,
//! n_i n_o/n + log2(n/n_o) − 1 Add, one output ciphertext (GALA Table II row 2).
//! Keys: K − 1 input steps + log2 L RaS steps.

use he::Backend;

use super::{input_rotation_sum, Ctx, Geometry, Weights};
use crate::error::Result;
use crate::noise::NoiseModel;

pub(crate) fn steps(g: &Geometry) -> Vec<i64> {
    let mut s: Vec<i64> = (1..g.diags).map(|k| (k * g.seg) as i64).collect();
    let mut r = g.seg / 2;
    while r >= 1 {
        s.push(r as i64);
        r /= 2;
    }
    s
}

/// The value of diagonal plaintext k at global slot `slot`.
pub(crate) fn value(
    g: &Geometry,
    w: &Weights<'_>,
    block: usize,
    k: usize,
    tile: usize,
    slot: usize,
) -> u64 {
    if slot >= g.block_rows * g.seg {
        return 0;
    }
    let r = slot / g.seg;
    let t = slot % g.span;
    w.at(
        block * g.block_rows + r,
        tile * g.tile + (t + k * g.seg) % g.tile,
    )
}

pub(crate) fn compute<B: Backend>(c: &Ctx<'_, B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
    let seg = c.g.seg;
    input_rotation_sum(c, q, 0..c.g.diags, |k| (k * seg) as i64, |k| k)?
        .into_iter()
        .map(|u| c.ras(u, seg))
        .collect()
}

pub(crate) fn noise(g: &Geometry, m: &NoiseModel) -> f64 {
    let u = m.sum(m.mult(m.rotate(m.fresh)), g.diags * g.col_tiles);
    m.ras(u, g.seg.trailing_zeros())
}
