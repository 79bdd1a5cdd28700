//! GAZELLE's input-rotation convolution (GAZELLE Table 9 "I" rows). The texts give no
//! algorithm for it; this is the derivation used here.
//!
//! Output rotation (see [`super::gala`]) computes
//! y = Σ_k rot(Σ_{i,d} P_{k,i,d} ⊙ rot(x_i, Δ_d), k·B'). Rotation distributes over the
//! slot-wise product, so y = Σ_{k,i,d} rot(P_{k,i,d}, k·B') ⊙ rot(x_i, Δ_d + k·B'): the
//! block permutations move onto the inputs. The plaintexts are pre-rotated offline (the
//! weight pairing output block j with input block j + k sits at output block j), every
//! input ciphertext (and its row swap) is rotated by all c_n·f offsets Δ_d + k·B' in one
//! hoisted group, and each output ciphertext is one fused sum of products: no output
//! rotation at all.
//!
//! Count (ideal model, c_n channels per ciphertext):
//! HstPerm = (c_i/c_n)(c_n f − 1) = c_i f − c_i/c_n, DecPerm = c_i/c_n (when c_n f > 1),
//! Perm = 0, ScMult = c_i c_o f/c_n, Add = c_o (c_i f − 1)/c_n, c_o/c_n output
//! ciphertexts. Keys: c_n f − 1 (composed from powers of two beyond the key budget).
//! It trades the c_o(c_n − 1)/c_n output Perms of kernel grouping for
//! (c_i/c_n)(c_n − 1) f extra HstPerms: a win when f = 1 and c_i ≤ c_o, as GAZELLE
//! reports for 1x1 filters.

use he::Backend;

use super::{ConvCtx, ConvGeometry};
use crate::error::Result;

/// Input rotation steps: Δ_d + k·B' for every block shift k and tap d.
pub(crate) fn steps(g: &ConvGeometry) -> Vec<i64> {
    (0..g.c_n)
        .flat_map(|k| (0..g.taps()).map(move |d| (k, d)))
        .map(|(k, d)| g.tap_step(d) + (k * g.block) as i64)
        .collect()
}

pub(crate) fn compute<B: Backend>(c: &ConvCtx<'_, B>) -> Result<Vec<B::Ct>> {
    crate::par::map(0..c.g.out_cts, |o| output(c, o))
}

/// Output ciphertext `o`: one fused sum of products.
pub(crate) fn output<B: Backend>(c: &ConvCtx<'_, B>, o: usize) -> Result<B::Ct> {
    let g = c.g;
    let taps = g.taps();
    let mut cts = Vec::new();
    let mut pts = Vec::new();
    for k in 0..g.c_n {
        for i in 0..g.in_cts {
            for v in 0..g.versions() {
                for d in 0..taps {
                    cts.push(&c.rotated[i * g.versions() + v][k * taps + d]);
                    pts.push(c.pt(o, k, i, v, d));
                }
            }
        }
    }
    Ok(c.b.dot(&cts, &pts)?)
}
