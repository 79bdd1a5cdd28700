//! Plaintext references in exact integer arithmetic (no HE, no slots, no packing): what
//! every kernel's reconstructed output must equal mod p. Used by the kernel tests, the
//! demo and the client's `--reveal` check.

use crate::conv::grouped::GroupedConvShape;
use crate::conv::{ConvShape, Padding};
use crate::error::{KernelError, Result};

/// W·x for a row-major `rows x cols` matrix.
pub fn matvec(w: &[i64], x: &[i64], rows: usize, cols: usize) -> Vec<i128> {
    (0..rows)
        .map(|r| {
            (0..cols)
                .map(|c| w[r * cols + c] as i128 * x[c] as i128)
                .sum()
        })
        .collect()
}

/// Output height, width and the top/left padding of a convolution.
pub fn conv_output(sh: &ConvShape) -> (usize, usize, usize, usize) {
    match sh.padding {
        Padding::Valid => (
            (sh.h - sh.k_h) / sh.stride + 1,
            (sh.w - sh.k_w) / sh.stride + 1,
            0,
            0,
        ),
        Padding::Same => {
            let (ho, wo) = (sh.h.div_ceil(sh.stride), sh.w.div_ceil(sh.stride));
            let th = ((ho - 1) * sh.stride + sh.k_h).saturating_sub(sh.h);
            let tw = ((wo - 1) * sh.stride + sh.k_w).saturating_sub(sh.w);
            (ho, wo, th / 2, tw / 2)
        }
    }
}

/// The convolution of a c_i x h x w image with c_o x c_i x k_h x k_w filters (zero
/// padding, stride), as c_o x h_out x w_out.
pub fn conv(sh: &ConvShape, x: &[i64], f: &[i64]) -> Vec<i128> {
    let (h_out, w_out, pt, pl) = conv_output(sh);
    let mut out = Vec::with_capacity(sh.c_o * h_out * w_out);
    for o in 0..sh.c_o {
        for y in 0..h_out {
            for xx in 0..w_out {
                let mut acc: i128 = 0;
                for c in 0..sh.c_i {
                    for dy in 0..sh.k_h {
                        for dx in 0..sh.k_w {
                            let iy = (y * sh.stride + dy) as i64 - pt as i64;
                            let ix = (xx * sh.stride + dx) as i64 - pl as i64;
                            if iy < 0 || ix < 0 || iy >= sh.h as i64 || ix >= sh.w as i64 {
                                continue;
                            }
                            let xv = x[(c * sh.h + iy as usize) * sh.w + ix as usize];
                            let fv = f[((o * sh.c_i + c) * sh.k_h + dy) * sh.k_w + dx];
                            acc += xv as i128 * fv as i128;
                        }
                    }
                }
                out.push(acc);
            }
        }
    }
    out
}

/// The grouped convolution of a c_i x h x w image with c_o x c_i/G x k_h x k_w filters
/// (ONNX / PyTorch layout: output channel o reads the input channels of group
/// o / (c_o/G)), zero padding and stride as [`conv`], as c_o x h_out x w_out. Checks the
/// shape and the lengths.
pub fn grouped_conv(sh: &GroupedConvShape, x: &[i64], f: &[i64]) -> Result<Vec<i128>> {
    sh.validate()?;
    for (what, expected, actual) in [
        ("input image", sh.input_len(), x.len()),
        ("filters", sh.weight_len(), f.len()),
    ] {
        if expected != actual {
            return Err(KernelError::Shape {
                what,
                expected,
                actual,
            });
        }
    }
    let (h_out, w_out, pt, pl) = conv_output(&sh.group_shape());
    let (cig, cog) = (sh.group_in(), sh.group_out());
    let mut out = Vec::with_capacity(sh.c_o * h_out * w_out);
    for o in 0..sh.c_o {
        let group = o / cog;
        for y in 0..h_out {
            for xx in 0..w_out {
                let mut acc: i128 = 0;
                for c in 0..cig {
                    let ic = group * cig + c;
                    for dy in 0..sh.k_h {
                        for dx in 0..sh.k_w {
                            let iy = (y * sh.stride + dy) as i64 - pt as i64;
                            let ix = (xx * sh.stride + dx) as i64 - pl as i64;
                            if iy < 0 || ix < 0 || iy >= sh.h as i64 || ix >= sh.w as i64 {
                                continue;
                            }
                            let xv = x[(ic * sh.h + iy as usize) * sh.w + ix as usize];
                            let fv = f[((o * cig + c) * sh.k_h + dy) * sh.k_w + dx];
                            acc += xv as i128 * fv as i128;
                        }
                    }
                }
                out.push(acc);
            }
        }
    }
    Ok(out)
}

/// Values reduced into [0, p).
pub fn reduce(v: &[i128], p: u64) -> Vec<u64> {
    v.iter().map(|a| a.rem_euclid(p as i128) as u64).collect()
}
