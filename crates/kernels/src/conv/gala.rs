//! GALA kernel grouping (GALA §III-B, Table III row 2): for each output ciphertext and
//! block shift k, the products of *all* input ciphertexts (both row versions, all taps)
//! are added first, then rotated once by k·B' ("first Add, second Perm"). Cost (ideal):
//! c_o (c_n − 1)/c_n Perm, c_i (f − 1)/c_n HstPerm (one DecPerm per input ciphertext),
//! c_i c_o f/c_n ScMult, c_o (c_i f − 1)/c_n Add; c_o/c_n output ciphertexts.

use he::Backend;

use super::ConvCtx;
use crate::error::Result;

pub(crate) fn compute<B: Backend>(c: &ConvCtx<'_, B>) -> Result<Vec<B::Ct>> {
    crate::par::map(0..c.g.out_cts, |o| output(c, o))
}

/// Output ciphertext `o`.
pub(crate) fn output<B: Backend>(c: &ConvCtx<'_, B>, o: usize) -> Result<B::Ct> {
    let g = c.g;
    let inputs: Vec<usize> = (0..g.in_cts).collect();
    let mut acc: Option<B::Ct> = None;
    for k in 0..g.c_n {
        let s = c.products(o, k, &inputs)?;
        let s = c.rot.rotate(c.b, &s, (k * g.block) as i64)?;
        acc = crate::layer::accumulate(c.b, acc, s)?;
    }
    acc.ok_or(crate::error::KernelError::EmptyDimension { what: "blocks" })
}
