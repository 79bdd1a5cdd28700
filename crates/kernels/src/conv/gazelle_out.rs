//! GAZELLE's output-rotation convolution (GAZELLE §5; GALA §III-B, Table III row 1):
//! every input ciphertext's f − 1 tap rotations form one hoisted group; for each
//! (output ciphertext, input ciphertext) pair the c_n block-shifted partial products are
//! rotated into place separately (c_n − 1 Perm per pair) and summed. Cost (ideal):
//! c_i c_o (c_n − 1)/c_n² Perm, c_i (f − 1)/c_n HstPerm, c_i c_o f/c_n ScMult,
//! c_o (c_i f − 1)/c_n Add; c_o/c_n output ciphertexts.

use he::Backend;

use super::ConvCtx;
use crate::error::Result;

pub(crate) fn compute<B: Backend>(c: &ConvCtx<'_, B>) -> Result<Vec<B::Ct>> {
    crate::par::map(0..c.g.out_cts, |o| output(c, o))
}

/// Output ciphertext `o`.
pub(crate) fn output<B: Backend>(c: &ConvCtx<'_, B>, o: usize) -> Result<B::Ct> {
    let g = c.g;
    let mut acc: Option<B::Ct> = None;
    for i in 0..g.in_cts {
        for k in 0..g.c_n {
            let s = c.products(o, k, &[i])?;
            let s = c.rot.rotate(c.b, &s, (k * g.block) as i64)?;
            acc = crate::layer::accumulate(c.b, acc, s)?;
        }
    }
    acc.ok_or(crate::error::KernelError::EmptyDimension { what: "blocks" })
}
