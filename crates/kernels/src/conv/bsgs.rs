//! Baby-step giant-step over the channel blocks: HELiKs's multiply-first kernel
//! ([`super::heliks`]) with its block fold split in two.
//!
//! HELiKs folds the c_n block-shifted partial sums of every output ciphertext with
//! c_n − 1 rotations by the block stride B' (a Horner sum). Writing the block shift as
//! k = g·b₁ + b, the b₁ baby shifts are rotations of the *inputs* by b·B' (hoisted,
//! shared by every output ciphertext), and only the c_n/b₁ giant shifts are folded on
//! each output, with rotations by b₁·B': per output ciphertext (c_n/b₁)·f rotations
//! instead of c_n·f, for (b₁ − 1) hoisted rotations per input ciphertext and version.
//! The plaintext of shift k is HELiKs's, rotated by b·B' (slot block bl holds the
//! weight HELiKs puts at block bl + b), so rot(pt'⊙rot(x, bB'), g·b₁·B') = rot(pt⊙x, kB').
//! Same products (c_i c_o f / c_n ScMult) and output ciphertexts as HELiKs; b₁ = 1 is
//! HELiKs. b₁ is the power of two that minimises the reference rotation cost.

use he::Backend;

use super::{ConvCtx, ConvGeometry, REF_PERM_US};
use crate::error::{KernelError, Result};
use crate::noise::NoiseModel;

/// The rotation cost in reference µs with baby step b₁: the hoisted baby shifts of
/// every input and version, and the giant folds and tap rotations of every output.
pub(crate) fn rotation_us(g: &ConvGeometry, b1: usize) -> f64 {
    let baby = g.hoisted_us((b1 - 1) as f64);
    let giant = (g.out_cts * (g.c_n / b1) * g.taps()) as f64 * REF_PERM_US;
    baby + giant
}

/// The baby-step count b₁ (a power of two dividing c_n; 1 = HELiKs's fold): the one
/// of least `rotation_us`.
pub fn baby(g: &ConvGeometry) -> usize {
    let mut best = 1;
    let mut b1 = 2;
    while b1 <= g.c_n {
        if rotation_us(g, b1) < rotation_us(g, best) {
            best = b1;
        }
        b1 *= 2;
    }
    best
}

/// The rotation steps: HELiKs's tap steps, the baby steps b·B' and the giant step b₁·B'.
pub(crate) fn steps(g: &ConvGeometry) -> Vec<i64> {
    let b1 = baby(g);
    let mut s = Vec::new();
    if g.shape.k_w > 1 {
        s.push(1);
    }
    if g.shape.k_h > 1 {
        s.push((g.wp - g.shape.k_w + 1) as i64);
    }
    s.extend((1..b1).map(|b| (b * g.block) as i64));
    if g.c_n > b1 {
        s.push((b1 * g.block) as i64);
    }
    s
}

/// The input rotations (baby steps) for each input ciphertext and version.
pub(crate) fn input_steps(g: &ConvGeometry) -> Vec<i64> {
    (0..baby(g)).map(|b| (b * g.block) as i64).collect()
}

/// The slot block where the plaintext of block shift `k` holds the weight HELiKs puts
/// at block `bl`: rotated left by the baby shift k mod b₁ (`b1` = [`baby`]).
pub(crate) fn plaintext_block(g: &ConvGeometry, b1: usize, k: usize, bl: usize) -> usize {
    (bl + g.c_n - k % b1) % g.c_n
}

pub(crate) fn compute<B: Backend>(c: &ConvCtx<'_, B>) -> Result<Vec<B::Ct>> {
    compute_with(c, baby(c.g))
}

/// Every output ciphertext of one strip with baby step `b1` (1: HELiKs's fold).
pub(crate) fn compute_with<B: Backend>(c: &ConvCtx<'_, B>, b1: usize) -> Result<Vec<B::Ct>> {
    crate::par::map(0..c.g.out_cts, |o| {
        let mut one = output(std::slice::from_ref(c), Plaintexts::Encoded(c.pts), o, b1)?;
        one.pop()
            .ok_or(KernelError::EmptyDimension { what: "strips" })
    })
}

/// Where an output's plaintexts come from.
pub(crate) enum Plaintexts<'a, B: Backend> {
    /// The whole filter bank, indexed by `pt_index`.
    Encoded(&'a [B::PreparedPt]),
    /// Encoded when a fused product needs them: (k, i, v, d) → plaintext.
    OnTheFly(&'a (dyn Fn(usize, usize, usize, usize) -> Result<B::PreparedPt> + Sync)),
    /// Slot values written into n zeros, (k, i, v, d) → values, encoded inside the
    /// fused products ([`Backend::dot_encoded`]: on BFV each plaintext is transformed
    /// and multiplied into every strip while in cache, none held).
    Values(&'a (dyn Fn([usize; 4], &mut [u64]) + Sync)),
}

/// A strip's rotated inputs for the products of `index` ((baby step, input version,
/// plaintext) per product).
fn strip_cts<'c, B: Backend>(
    index: &[(usize, usize, [usize; 4])],
    c: &ConvCtx<'c, B>,
) -> Vec<&'c B::Ct> {
    index.iter().map(|&(b, iv, _)| &c.rotated[iv][b]).collect()
}

/// Output ciphertext o of every strip in `cs` (same geometry and plaintexts, one
/// context per strip) with baby step `b1` ([`baby`] for this method, 1 for HELiKs,
/// whose contexts hold each input unrotated): each fused product's plaintexts are
/// fetched (or encoded) once and used for every strip.
pub(crate) fn output<B: Backend>(
    cs: &[ConvCtx<'_, B>],
    pts: Plaintexts<'_, B>,
    o: usize,
    b1: usize,
) -> Result<Vec<B::Ct>> {
    let Some(c0) = cs.first() else {
        return Ok(Vec::new());
    };
    let g = c0.g;
    let taps = g.taps();
    let mut blocks: Vec<Option<B::Ct>> = vec![None; cs.len()];
    for giant in (0..g.c_n / b1).rev() {
        let mut acc: Vec<Option<B::Ct>> = vec![None; cs.len()];
        for d in (0..taps).rev() {
            let mut index = Vec::new();
            for b in 0..b1 {
                let k = giant * b1 + b;
                for i in 0..g.in_cts {
                    for v in 0..g.versions() {
                        index.push((b, i * g.versions() + v, [k, i, v, d]));
                    }
                }
            }
            let mut fused = match pts {
                Plaintexts::Values(fill) => {
                    let terms: Vec<Vec<&B::Ct>> = cs.iter().map(|c| strip_cts(&index, c)).collect();
                    let values = |t: usize, v: &mut [u64]| fill(index[t].2, v);
                    c0.b.dot_encoded(he::Encoding::Slots, 0, index.len(), &values, &terms)?
                }
                _ => Vec::new(),
            }
            .into_iter();
            let encoded: Vec<B::PreparedPt> = match pts {
                Plaintexts::Encoded(_) | Plaintexts::Values(_) => Vec::new(),
                Plaintexts::OnTheFly(encode) => index
                    .iter()
                    .map(|&(_, _, [k, i, v, d])| encode(k, i, v, d))
                    .collect::<Result<_>>()?,
            };
            let ps: Vec<&B::PreparedPt> = match pts {
                Plaintexts::Encoded(all) => index
                    .iter()
                    .map(|&(_, _, [k, i, v, d])| &all[g.pt_index(o, k, i, v, d)])
                    .collect(),
                Plaintexts::OnTheFly(_) | Plaintexts::Values(_) => encoded.iter().collect(),
            };
            for (c, a) in cs.iter().zip(acc.iter_mut()) {
                let term = match fused.next() {
                    Some(term) => term,
                    None => c.b.dot(&strip_cts(&index, c), &ps)?,
                };
                *a = Some(match a.take() {
                    None => term,
                    Some(prev) => {
                        let step = g.tap_step(d + 1) - g.tap_step(d);
                        let r = c.rot.rotate(c.b, &prev, step)?;
                        c.b.add(&r, &term)?
                    }
                });
            }
        }
        for ((c, bl), a) in cs.iter().zip(blocks.iter_mut()).zip(acc) {
            let a = a.ok_or(KernelError::EmptyDimension { what: "taps" })?;
            *bl = Some(match bl.take() {
                None => a,
                Some(prev) => {
                    let r = c.rot.rotate(c.b, &prev, (b1 * g.block) as i64)?;
                    c.b.add(&r, &a)?
                }
            });
        }
    }
    blocks
        .into_iter()
        .map(|b| b.ok_or(KernelError::EmptyDimension { what: "blocks" }))
        .collect()
}

pub(crate) fn noise(g: &ConvGeometry, m: &NoiseModel) -> f64 {
    let b1 = baby(g);
    let input = if b1 > 1 {
        m.rotate(m.rotate(m.fresh))
    } else {
        m.rotate(m.fresh)
    };
    let v = m.sum(m.mult(input), g.in_cts * g.versions() * b1);
    let taps = (1..g.taps()).fold(v, |a, _| crate::noise::log2_add(m.rotate(a), v));
    (1..g.c_n / b1).fold(taps, |a, _| crate::noise::log2_add(m.rotate(a), taps))
}
