//! HELiKs convolution (HELiKs §5.1-5.2, Algorithms 1-2), in this module's shared layout.
//!
//! Multiply first: the filter plaintexts are pre-rotated offline by −(dy·wp + dx), so the
//! input ciphertexts are used as they arrive (no input rotation, no hoisting). For each
//! output ciphertext and block shift k, the taps are walked backwards: the products of
//! all input ciphertexts for a tap are summed (one fused product), added to the
//! accumulator, and the accumulator is rotated by 1, or by wp − k_w + 1 at the end of a
//! filter row (Algorithm 1, 2 keys). The c_n block-shifted partial results are folded
//! the same way, descending, with a rotation by the block stride B' (Algorithm 2's fold,
//! 1 key), and the two rows are paired through the row swap (1 key): 4 keys in all.
//! Cost per output ciphertext: c_n (f − 1) + c_n − 1 Perm, no HstPerm; ideal model
//! (one row): c_o (f − 1) + c_o (c_n − 1)/c_n Perm (HELiKs Table 1),
//! c_i c_o f/c_n ScMult, c_o/c_n output ciphertexts.
//!
//! Departure from the paper: Algorithm 2 packs outputs with rotations by h·w and a final
//! column rotation; here output channels sit in their blocks from the start and the fold
//! is a Horner sum over block shifts (same count in the ideal model).

use he::Backend;

use super::{ConvCtx, ConvGeometry};
use crate::error::Result;
use crate::noise::NoiseModel;

/// The rotation steps: 1, the filter-row wrap, and the block stride.
pub(crate) fn steps(g: &ConvGeometry) -> Vec<i64> {
    let mut s = Vec::new();
    if g.shape.k_w > 1 {
        s.push(1);
    }
    if g.shape.k_h > 1 {
        s.push((g.wp - g.shape.k_w + 1) as i64);
    }
    if g.c_n > 1 {
        s.push(g.block as i64);
    }
    s
}

/// Every output ciphertext of one strip: the baby-step giant-step kernel with one baby
/// step is this method's loop (same products, rotations and order).
pub(crate) fn compute<B: Backend>(c: &ConvCtx<'_, B>) -> Result<Vec<B::Ct>> {
    super::bsgs::compute_with(c, 1)
}

pub(crate) fn noise(g: &ConvGeometry, m: &NoiseModel) -> f64 {
    let v = m.sum(m.mult(m.rotate(m.fresh)), g.in_cts * g.versions());
    let taps = (1..g.taps()).fold(v, |a, _| crate::noise::log2_add(m.rotate(a), v));
    (1..g.c_n).fold(taps, |a, _| crate::noise::log2_add(m.rotate(a), taps))
}
