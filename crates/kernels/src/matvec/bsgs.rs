//! Diagonal method with baby-step/giant-step rotations (Halevi–Shoup 2018).
//!
//! d = b·g diagonals (see [`super::diagonal`]). y = Σ_j rot(Σ_i rot(diag_{jb+i}, −jb) ⊙
//! rot(x, i), jb): the b − 1 baby steps of each query ciphertext are one hoisted group,
//! the diagonals are pre-rotated by −jb offline, and the giant steps are accumulated in
//! Horner form (acc ← rot(acc, b) + inner_j, descending j, as HELiKs accumulates), so
//! they need a single key. Cost per tile and block: b − 1 HstPerm, g − 1 Perm, d ScMult,
//! d − 1 Add; keys: b (steps 1..b−1 and b). b is the power of two nearest √(2d) (hoisted
//! baby steps are cheaper than giant steps), capped so that b keys fit the key budget.

use he::Backend;

use super::{diagonal, row_rotated_source, Ctx, Geometry, Weights};
use crate::error::Result;
use crate::noise::{log2_add, NoiseModel};
use crate::rotate::Hoist;

/// The number of baby steps for d diagonals under a key budget.
pub(crate) fn baby_steps(d: usize, budget: Option<usize>) -> usize {
    let target = ((2.0 * d as f64).sqrt().ceil() as usize)
        .next_power_of_two()
        .min(d);
    match budget {
        Some(b) if target > b => {
            let cap = b.max(1);
            1usize << (usize::BITS - 1 - cap.leading_zeros())
        }
        _ => target,
    }
    .max(1)
}

pub(crate) fn steps(g: &Geometry) -> Vec<i64> {
    let mut s: Vec<i64> = (1..g.baby as i64).collect();
    if g.diags > g.baby {
        s.push(g.baby as i64);
    }
    s
}

/// Diagonal k pre-rotated by −j·b (j = k / b) within each row.
pub(crate) fn value(
    g: &Geometry,
    w: &Weights<'_>,
    block: usize,
    k: usize,
    tile: usize,
    slot: usize,
) -> u64 {
    let src = row_rotated_source(g, slot, (k / g.baby) * g.baby);
    diagonal::value(g, w, block, k, tile, src)
}

pub(crate) fn compute<B: Backend>(c: &Ctx<'_, B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
    let (b, giants) = (c.g.baby, c.g.diags / c.g.baby);
    let baby = q
        .iter()
        .map(|qt| {
            let mut h = Hoist::new(qt);
            let steps: Vec<i64> = (0..b as i64).collect();
            c.rot.rotate_many(c.b, &mut h, &steps)
        })
        .collect::<Result<Vec<_>>>()?;
    crate::par::map(0..c.g.row_blocks, |block| {
        let mut acc: Option<B::Ct> = None;
        for j in (0..giants).rev() {
            let mut cts = Vec::with_capacity(b * q.len());
            let mut pts = Vec::with_capacity(b * q.len());
            for (tile, rots) in baby.iter().enumerate() {
                for (i, r) in rots.iter().enumerate() {
                    cts.push(r);
                    pts.push(c.pt(block, j * b + i, tile));
                }
            }
            let inner = c.b.dot(&cts, &pts)?;
            acc = Some(match acc {
                None => inner,
                Some(a) => {
                    let r = c.rot.rotate(c.b, &a, b as i64)?;
                    c.b.add(&r, &inner)?
                }
            });
        }
        acc.ok_or(crate::error::KernelError::EmptyDimension { what: "diagonals" })
    })
}

pub(crate) fn noise(g: &Geometry, m: &NoiseModel) -> f64 {
    let inner = m.sum(m.mult(m.rotate(m.fresh)), g.baby * g.col_tiles);
    (1..g.diags / g.baby).fold(inner, |acc, _| log2_add(m.rotate(acc), inner))
}
