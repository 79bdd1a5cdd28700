//! Convolutions and matrix products of the two interpreters as matrix products on a
//! GEMM (ndarray's, on `matrixmultiply`): a convolution is its filters times the image's
//! im2col matrix, per group. The server's clear product of a linear step on its own
//! share ([`conv_mod_p`], [`linear_mod_p`]) runs the same way, mod p.
//!
//! **Exact integers in f64.** The fixed-point reference must be exact. A product of
//! integer matrices computed in f64 is: when every |x| ≤ X and every filter's
//! Σ|w| ≤ L with X·L < 2^53, every product and every partial sum, in whatever order
//! the GEMM adds them, is an integer of magnitude below 2^53, hence exactly
//! representable, so the result is the integer result bit for bit. `conv_exact` and
//! `linear_exact` check that bound on the actual values and return `None` otherwise
//! (the caller then takes the exact 128-bit loops); at the fixed points the planner
//! chooses, activations and weights are far below it.

use kernels::reference::conv_output;
use kernels::ConvShape;
use ndarray::{Array2, ArrayView2};

/// 2^53: integers below it are exact in f64.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// The im2col matrix of input channels `c0..c0 + cn` of `x` (c_i × h × w): one row per
/// (channel, dy, dx), one column per output position, zero where a tap falls in the
/// padding.
fn im2col(sh: &ConvShape, x: &[f64], c0: usize, cn: usize) -> Array2<f64> {
    let (ho, wo, pt, pl) = conv_output(sh);
    let n = ho * wo;
    let mut col = Array2::<f64>::zeros((cn * sh.k_h * sh.k_w, n));
    for c in 0..cn {
        let plane = &x[(c0 + c) * sh.h * sh.w..(c0 + c + 1) * sh.h * sh.w];
        for dy in 0..sh.k_h {
            for dx in 0..sh.k_w {
                let mut row = col.row_mut((c * sh.k_h + dy) * sh.k_w + dx);
                for y in 0..ho {
                    let iy = (y * sh.stride + dy) as isize - pt as isize;
                    if iy < 0 || iy >= sh.h as isize {
                        continue;
                    }
                    let src = &plane[iy as usize * sh.w..(iy as usize + 1) * sh.w];
                    for xx in 0..wo {
                        let ix = (xx * sh.stride + dx) as isize - pl as isize;
                        if ix >= 0 && ix < sh.w as isize {
                            row[y * wo + xx] = src[ix as usize];
                        }
                    }
                }
            }
        }
    }
    col
}

/// The convolution of `x` (c_i × h × w) with `w` (c_o × c_i/groups × k_h × k_w, the
/// ONNX layout: output channel o reads the input channels of group o / (c_o/groups)),
/// in f64, as c_o × h_out × w_out. The caller checks the lengths.
pub(crate) fn conv_f64(sh: &ConvShape, groups: usize, x: &[f64], w: &[f64]) -> Vec<f64> {
    let groups = groups.max(1);
    let (ho, wo, _, _) = conv_output(sh);
    let (cig, cog) = (sh.c_i / groups, sh.c_o / groups);
    let k = cig * sh.k_h * sh.k_w;
    let mut out = Vec::with_capacity(sh.c_o * ho * wo);
    for g in 0..groups {
        let col = im2col(sh, x, g * cig, cig);
        let filters = ArrayView2::from_shape((cog, k), &w[g * cog * k..(g + 1) * cog * k]);
        let Ok(filters) = filters else {
            return Vec::new();
        };
        out.extend(filters.dot(&col).iter());
    }
    out
}

/// The largest |v|.
fn max_abs(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(0.0, |m, a| m.max(a.abs()))
}

/// The largest Σ|w| of a row of `rows`-long rows.
fn max_l1(w: &[i64], len: usize) -> f64 {
    w.chunks(len.max(1))
        .map(|r| r.iter().map(|&v| (v as f64).abs()).sum::<f64>())
        .fold(0.0, f64::max)
}

/// The integer convolution of [`conv_f64`], exactly, when its values allow f64 (see the
/// module doc); `None` otherwise.
pub(crate) fn conv_exact(
    sh: &ConvShape,
    groups: usize,
    x: &[i128],
    w: &[i64],
) -> Option<Vec<i128>> {
    let per = sh.c_i / groups.max(1) * sh.k_h * sh.k_w;
    let xf = exact_inputs(x, w, per)?;
    let wf: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    Some(from_exact(conv_f64(sh, groups, &xf, &wf)))
}

/// `x` as f64 when every Σ|w|·|x| of a `len`-long weight row stays below 2^53 (so
/// every partial sum of the product is an exact f64); `None` otherwise. Each value
/// converts once, through i64 (all are below 2^53 in magnitude).
fn exact_inputs(x: &[i128], w: &[i64], len: usize) -> Option<Vec<f64>> {
    const BELOW: u128 = 1 << 53;
    if x.iter().any(|v| v.unsigned_abs() >= BELOW) {
        return None;
    }
    let xf: Vec<f64> = x.iter().map(|&v| v as i64 as f64).collect();
    if max_abs(xf.iter().copied()) * max_l1(w, len) >= EXACT {
        return None;
    }
    Some(xf)
}

/// Exact integer results (below 2^53 in magnitude) back to i128, through i64.
fn from_exact(v: Vec<f64>) -> Vec<i128> {
    v.into_iter().map(|v| v as i64 as i128).collect()
}

/// The server's clear product of a convolution step on its share: W·x + b mod p for a
/// share `x` ∈ Z_p read centred, with `w` in the ONNX layout (c_o × c_i/groups × k_h ×
/// k_w) and one bias per output channel (or none), as c_o × h_out × w_out values,
/// exactly through the f64 GEMM where the values allow it (see the module doc), the
/// output channels of each group split over the threads. `None` where they do not, or
/// where the lengths do not fit the shape: the caller then takes
/// `kernels::clear::conv_mod_p`, which checks them and gives the same values.
pub fn conv_mod_p(
    sh: &ConvShape,
    groups: usize,
    x: &[u64],
    w: &[i64],
    bias: &[i64],
    p: u64,
) -> Option<Vec<u64>> {
    use rayon::prelude::*;
    let groups = groups.max(1);
    let (ho, wo, _, _) = conv_output(sh);
    let (cig, cog) = (sh.c_i / groups, sh.c_o / groups);
    let k = cig * sh.k_h * sh.k_w;
    if !sh.c_i.is_multiple_of(groups)
        || !sh.c_o.is_multiple_of(groups)
        || x.len() != sh.c_i * sh.h * sh.w
        || w.len() != sh.c_o * k
        || !(bias.is_empty() || bias.len() == sh.c_o)
    {
        return None;
    }
    let xf = exact_inputs(&centred(x, p), w, k)?;
    let wf: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    // A 1×1 filter at stride 1 reads the image itself: its im2col matrix is the image.
    let pointwise = sh.k_h == 1 && sh.k_w == 1 && sh.stride == 1 && (ho, wo) == (sh.h, sh.w);
    let cols: Vec<Array2<f64>> = if pointwise {
        Vec::new()
    } else {
        (0..groups)
            .into_par_iter()
            .map(|g| im2col(sh, &xf, g * cig, cig))
            .collect()
    };
    let plane = ho * wo;
    // blocks of output channels, in order: a few per thread within each group
    let per = cog.div_ceil(rayon::current_num_threads().max(1)).max(1);
    let blocks: Vec<(usize, usize, usize)> = (0..groups)
        .flat_map(|g| (0..cog).step_by(per).map(move |o| (g, o, per.min(cog - o))))
        .collect();
    let parts: Vec<Vec<u64>> = blocks
        .into_par_iter()
        .map(|(g, o, n)| {
            let rows = &wf[(g * cog + o) * k..(g * cog + o + n) * k];
            let product = match (ArrayView2::from_shape((n, k), rows), cols.get(g)) {
                (Ok(f), Some(col)) => f.dot(col),
                // pointwise: the group's channels of the image are its im2col matrix
                (Ok(f), None) => match xf
                    .get(g * k * plane..(g + 1) * k * plane)
                    .map(|image| ArrayView2::from_shape((k, plane), image))
                {
                    Some(Ok(col)) => f.dot(&col),
                    _ => return Vec::new(),
                },
                (Err(_), _) => return Vec::new(),
            };
            product
                .iter()
                .enumerate()
                .map(|(i, &v)| plus_bias_mod_p(v, bias, g * cog + o + i / plane.max(1), p))
                .collect()
        })
        .collect();
    let out: Vec<u64> = parts.concat();
    (out.len() == sh.c_o * plane).then_some(out)
}

/// As [`conv_mod_p`] for a `rows` × `cols` matrix (one bias per row, or none).
pub fn linear_mod_p(
    w: &[i64],
    x: &[u64],
    bias: &[i64],
    rows: usize,
    cols: usize,
    p: u64,
) -> Option<Vec<u64>> {
    if x.len() != cols || w.len() != rows * cols || !(bias.is_empty() || bias.len() == rows) {
        return None;
    }
    let xf = exact_inputs(&centred(x, p), w, cols)?;
    let wf: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    let y = linear_f64(&wf, &xf, rows, cols);
    (y.len() == rows).then(|| {
        y.iter()
            .enumerate()
            .map(|(i, &v)| plus_bias_mod_p(v, bias, i, p))
            .collect()
    })
}

/// An exact product entry (an integer below 2^53) plus output `c`'s bias (none: 0),
/// reduced mod p.
fn plus_bias_mod_p(v: f64, bias: &[i64], c: usize, p: u64) -> u64 {
    let b = bias.get(c).copied().unwrap_or(0) as i128;
    (v as i64 as i128 + b).rem_euclid(p as i128) as u64
}

/// A share in Z_p read centred, as `kernels::clear` reads it.
fn centred(x: &[u64], p: u64) -> Vec<i128> {
    kernels::clear::centred(x, p)
        .into_iter()
        .map(i128::from)
        .collect()
}

/// W·x for a `rows` × `cols` matrix in f64.
pub(crate) fn linear_f64(w: &[f64], x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    match (
        ArrayView2::from_shape((rows, cols), w),
        ArrayView2::from_shape((cols, 1), x),
    ) {
        (Ok(w), Ok(x)) => w.dot(&x).iter().copied().collect(),
        _ => Vec::new(),
    }
}

/// W·x of integers, exactly, when its values allow f64; `None` otherwise.
pub(crate) fn linear_exact(w: &[i64], x: &[i128], rows: usize, cols: usize) -> Option<Vec<i128>> {
    let xf = exact_inputs(x, w, cols)?;
    let wf: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    Some(from_exact(linear_f64(&wf, &xf, rows, cols)))
}

/// W·x of integers, exactly: the f64 GEMM where its values allow it
/// ([`linear_exact`]), else the 128-bit loops.
pub(crate) fn linear(w: &[i64], x: &[i128], rows: usize, cols: usize) -> Vec<i128> {
    linear_exact(w, x, rows, cols).unwrap_or_else(|| {
        let x64: Vec<i64> = x.iter().map(|&v| v as i64).collect();
        kernels::reference::matvec(w, &x64, rows, cols)
    })
}

/// The integer convolution of [`conv_f64`], exactly: the f64 GEMM where its values allow
/// it ([`conv_exact`]), else the 128-bit loops; `None` when the grouped loops refuse the
/// shapes.
pub(crate) fn conv(sh: &ConvShape, groups: usize, x: &[i128], w: &[i64]) -> Option<Vec<i128>> {
    if let Some(y) = conv_exact(sh, groups, x, w) {
        return Some(y);
    }
    let x64: Vec<i64> = x.iter().map(|&v| v as i64).collect();
    if groups == 1 {
        Some(kernels::reference::conv(sh, &x64, w))
    } else {
        let g = crate::quant::grouped_shape(sh, groups);
        kernels::reference::grouped_conv(&g, &x64, w).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::Padding;
    use rand::{Rng, SeedableRng};

    /// Against the 128-bit loops, on odd shapes (stride, both paddings, groups, taps
    /// outside the image), with values near the exactness bound; beyond it, `None`.
    #[test]
    fn exact_products_equal_the_integer_loops() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        for (c_i, h, w, c_o, k, stride, padding, groups) in [
            (3, 7, 9, 4, 3, 1, Padding::Same, 1),
            (4, 8, 8, 6, 3, 2, Padding::Same, 2),
            (6, 5, 6, 6, 3, 1, Padding::Valid, 6),
            (2, 9, 7, 3, 1, 1, Padding::Valid, 1),
            (3, 11, 10, 5, 5, 3, Padding::Same, 1),
        ] {
            let sh = ConvShape {
                c_i,
                h,
                w,
                c_o,
                k_h: k,
                k_w: k,
                stride,
                padding,
            };
            let x: Vec<i128> = (0..c_i * h * w)
                .map(|_| rng.random_range(-(1i128 << 30)..1 << 30))
                .collect();
            let wt: Vec<i64> = (0..c_o * c_i / groups * k * k)
                .map(|_| rng.random_range(-(1i64 << 14)..1 << 14))
                .collect();
            let x64: Vec<i64> = x.iter().map(|&v| v as i64).collect();
            let g = crate::quant::grouped_shape(&sh, groups);
            let want = kernels::reference::grouped_conv(&g, &x64, &wt).unwrap_or_default();
            assert_eq!(conv_exact(&sh, groups, &x, &wt), Some(want));
            let big: Vec<i128> = x.iter().map(|&v| v << 22).collect();
            assert_eq!(conv_exact(&sh, groups, &big, &wt), None);
            // beyond i64 (the conversion goes through it only below 2^53)
            let huge: Vec<i128> = x.iter().map(|&v| v << 40).collect();
            assert_eq!(conv_exact(&sh, groups, &huge, &wt), None);
        }
        let (rows, cols) = (7, 300);
        let x: Vec<i128> = (0..cols)
            .map(|_| rng.random_range(-(1i128 << 30)..1 << 30))
            .collect();
        let wt: Vec<i64> = (0..rows * cols)
            .map(|_| rng.random_range(-(1i64 << 13)..1 << 13))
            .collect();
        let x64: Vec<i64> = x.iter().map(|&v| v as i64).collect();
        assert_eq!(
            linear_exact(&wt, &x, rows, cols),
            Some(kernels::reference::matvec(&wt, &x64, rows, cols))
        );
    }
}
