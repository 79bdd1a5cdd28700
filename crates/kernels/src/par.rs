//! Parallelism over independent work (output ciphertexts, blocks, rotations of one
//! hoisted input) with rayon. The number of threads is rayon's global pool
//! (`helina --threads N` sets it); results are identical to a single thread because
//! every parallel map keeps its order and no reduction is reordered.

use rayon::prelude::*;

use crate::error::Result;

/// `f(i)` for every `i` in `range`, in parallel, in order; the first error wins.
pub(crate) fn map<T: Send>(
    range: std::ops::Range<usize>,
    f: impl Fn(usize) -> Result<T> + Sync + Send,
) -> Result<Vec<T>> {
    range.into_par_iter().map(f).collect()
}
