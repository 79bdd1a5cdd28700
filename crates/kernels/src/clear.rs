//! The server's own part of a linear layer, in the clear: with the input shared as
//! x = x_c + x_s, the server answers W·x_c under HE and adds W·x_s + b itself, mod p.
//! Same arithmetic as [`crate::reference`] (which stays the tests' independent, naive
//! reference), organised for speed: the share is centred, each output channel (matrix
//! row) is computed in parallel, a convolution runs filter tap by filter tap over whole
//! output rows (contiguous for stride 1), and the sums stay in i64 whenever the public
//! bound (taps · p/2 · max |w| + max |b|) fits, in i128 otherwise.

use rayon::prelude::*;

use crate::conv::grouped::GroupedConvShape;
use crate::error::{KernelError, Result};
use crate::reference::conv_output;

/// Integer accumulators for the sums: i64 when the bound fits, i128 otherwise.
trait Acc:
    Copy + Default + Send + Sync + From<i64> + std::ops::AddAssign + std::ops::Mul<Output = Self>
{
    fn rem_p(self, p: u64) -> u64;
}

impl Acc for i64 {
    fn rem_p(self, p: u64) -> u64 {
        self.rem_euclid(p as i64) as u64
    }
}

impl Acc for i128 {
    fn rem_p(self, p: u64) -> u64 {
        self.rem_euclid(p as i128) as u64
    }
}

/// True when `terms` products of a centred share (|x| ≤ p/2) and a weight of at most
/// `w_max`, plus a bias of at most `b_max`, fit an i64 sum.
fn fits_i64(terms: usize, p: u64, w_max: u64, b_max: u64) -> bool {
    let bound = terms as u128 * (p / 2) as u128 * w_max as u128 + b_max as u128;
    bound < i64::MAX as u128
}

/// A share in Z_p (reduced first) read centred: values above p/2 as value − p.
pub fn centred(x: &[u64], p: u64) -> Vec<i64> {
    x.iter()
        .map(|&v| {
            let v = v % p;
            if v > p / 2 {
                v as i64 - p as i64
            } else {
                v as i64
            }
        })
        .collect()
}

fn max_abs(v: &[i64]) -> u64 {
    v.iter().map(|w| w.unsigned_abs()).max().unwrap_or(0)
}

fn check_len(what: &'static str, expected: usize, actual: usize) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(KernelError::Shape {
            what,
            expected,
            actual,
        })
    }
}

/// A bias of one value per output channel, or none.
fn check_bias(bias: &[i64], outputs: usize) -> Result<()> {
    if bias.is_empty() {
        Ok(())
    } else {
        check_len("bias", outputs, bias.len())
    }
}

/// W·x + b mod p for a `rows` x `cols` matrix W (row-major), a share x in Z_p and a bias
/// of one value per row (or none).
pub fn matvec_mod_p(
    w: &[i64],
    x: &[u64],
    bias: &[i64],
    rows: usize,
    cols: usize,
    p: u64,
) -> Result<Vec<u64>> {
    check_len("weight matrix", rows * cols, w.len())?;
    check_len("input vector", cols, x.len())?;
    check_bias(bias, rows)?;
    let xc = centred(x, p);
    if fits_i64(cols, p, max_abs(w), max_abs(bias)) {
        Ok(matvec_acc::<i64>(w, &xc, bias, cols, p))
    } else {
        Ok(matvec_acc::<i128>(w, &xc, bias, cols, p))
    }
}

fn matvec_acc<A: Acc>(w: &[i64], x: &[i64], bias: &[i64], cols: usize, p: u64) -> Vec<u64> {
    w.par_chunks(cols.max(1))
        .enumerate()
        .map(|(r, row)| {
            let mut acc = A::from(bias.get(r).copied().unwrap_or(0));
            for (&a, &b) in row.iter().zip(x) {
                acc += A::from(a) * A::from(b);
            }
            acc.rem_p(p)
        })
        .collect()
}

/// The (grouped) convolution W * x + b mod p of a c_i x h x w share x in Z_p with
/// c_o x c_i/G x k_h x k_w filters (ONNX layout), zero padding and stride as
/// [`crate::reference::grouped_conv`], a bias of one value per output channel (or
/// none); c_o x h_out x w_out values.
pub fn conv_mod_p(
    sh: &GroupedConvShape,
    x: &[u64],
    f: &[i64],
    bias: &[i64],
    p: u64,
) -> Result<Vec<u64>> {
    sh.validate()?;
    check_len("input image", sh.input_len(), x.len())?;
    check_len("filters", sh.weight_len(), f.len())?;
    check_bias(bias, sh.c_o)?;
    let xc = centred(x, p);
    let taps = sh.group_in() * sh.k_h * sh.k_w;
    if fits_i64(taps, p, max_abs(f), max_abs(bias)) {
        Ok(conv_acc::<i64>(sh, &xc, f, bias, p))
    } else {
        Ok(conv_acc::<i128>(sh, &xc, f, bias, p))
    }
}

/// The output positions o (along one axis of `out` positions) whose input position
/// o·stride + tap − pad lies in 0..len.
fn valid(out: usize, len: usize, stride: usize, tap: usize, pad: usize) -> std::ops::Range<usize> {
    // o·stride + tap ≥ pad  and  o·stride + tap < len + pad
    let lo = pad.saturating_sub(tap).div_ceil(stride);
    let hi = if len + pad > tap {
        (len + pad - tap).div_ceil(stride).min(out)
    } else {
        0
    };
    lo.min(hi)..hi
}

fn conv_acc<A: Acc>(sh: &GroupedConvShape, x: &[i64], f: &[i64], bias: &[i64], p: u64) -> Vec<u64> {
    let gs = sh.group_shape();
    let (ho, wo, pt, pl) = conv_output(&gs);
    let (cig, cog, s) = (sh.group_in(), sh.group_out(), sh.stride);
    let (h, w, kh, kw) = (sh.h, sh.w, sh.k_h, sh.k_w);
    let per_filter = cig * kh * kw;
    let channels: Vec<Vec<u64>> = (0..sh.c_o)
        .into_par_iter()
        .map(|o| {
            let mut acc = vec![A::from(bias.get(o).copied().unwrap_or(0)); ho * wo];
            let filter = &f[o * per_filter..(o + 1) * per_filter];
            let group = o / cog;
            for c in 0..cig {
                let image = &x[(group * cig + c) * h * w..(group * cig + c + 1) * h * w];
                for dy in 0..kh {
                    let ys = valid(ho, h, s, dy, pt);
                    for dx in 0..kw {
                        let wv = filter[(c * kh + dy) * kw + dx];
                        if wv == 0 {
                            continue;
                        }
                        let wv = A::from(wv);
                        let xs = valid(wo, w, s, dx, pl);
                        if xs.is_empty() {
                            continue;
                        }
                        for y in ys.clone() {
                            let iy = y * s + dy - pt;
                            let out = &mut acc[y * wo + xs.start..y * wo + xs.end];
                            let first = iy * w + xs.start * s + dx - pl;
                            if s == 1 {
                                let row = &image[first..first + out.len()];
                                for (a, &v) in out.iter_mut().zip(row) {
                                    *a += wv * A::from(v);
                                }
                            } else {
                                let row = image[first..].iter().step_by(s);
                                for (a, &v) in out.iter_mut().zip(row) {
                                    *a += wv * A::from(v);
                                }
                            }
                        }
                    }
                }
            }
            acc.into_iter().map(|a| a.rem_p(p)).collect()
        })
        .collect();
    channels.concat()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::conv::Padding;
    use proptest::prelude::*;

    fn reference_mod_p(acc: &[i128], bias: &[i64], per: usize, p: u64) -> Vec<u64> {
        acc.iter()
            .enumerate()
            .map(|(i, &a)| {
                let b = bias.get(i / per).copied().unwrap_or(0) as i128;
                (a + b).rem_euclid(p as i128) as u64
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Odd shapes, strides 1-3, same/valid, groups, both accumulators (a large p
        /// forces i128): equal to the naive reference mod p.
        #[test]
        fn conv_equals_the_reference(
            c in 1usize..4, g in 1usize..3, co in 1usize..4, h in 1usize..9, w in 1usize..9,
            kh in 1usize..4, kw in 1usize..4, s in 1usize..4, same in any::<bool>(),
            big_p in any::<bool>(), seed in any::<u64>(),
        ) {
            use rand::{Rng, SeedableRng};
            let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let p: u64 = if big_p { (1 << 61) - 1 } else { 1032193 };
            let padding = if same { Padding::Same } else { Padding::Valid };
            prop_assume!(same || (kh <= h && kw <= w));
            let sh = GroupedConvShape {
                c_i: c * g, h, w, c_o: co * g, k_h: kh, k_w: kw, stride: s, padding, groups: g,
            };
            let x: Vec<u64> = (0..sh.input_len()).map(|_| r.random_range(0..p)).collect();
            let wmax = if big_p { 1i64 << 40 } else { 300 };
            let f: Vec<i64> = (0..sh.weight_len()).map(|_| r.random_range(-wmax..=wmax)).collect();
            let bias: Vec<i64> = (0..sh.c_o).map(|_| r.random_range(-wmax..=wmax)).collect();
            let xi: Vec<i64> = x.iter().map(|&v| v as i64).collect();
            let acc = crate::reference::grouped_conv(&sh, &xi, &f).unwrap();
            let (ho, wo, _, _) = conv_output(&sh.group_shape());
            prop_assert_eq!(conv_mod_p(&sh, &x, &f, &bias, p).unwrap(), reference_mod_p(&acc, &bias, ho * wo, p));
            prop_assert_eq!(conv_mod_p(&sh, &x, &f, &[], p).unwrap(), reference_mod_p(&acc, &[], ho * wo, p));
        }

        #[test]
        fn matvec_equals_the_reference(rows in 1usize..20, cols in 1usize..40, big_p in any::<bool>(), seed in any::<u64>()) {
            use rand::{Rng, SeedableRng};
            let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let p: u64 = if big_p { (1 << 61) - 1 } else { 1032193 };
            let wmax = if big_p { 1i64 << 40 } else { 300 };
            let x: Vec<u64> = (0..cols).map(|_| r.random_range(0..p)).collect();
            let w: Vec<i64> = (0..rows * cols).map(|_| r.random_range(-wmax..=wmax)).collect();
            let bias: Vec<i64> = (0..rows).map(|_| r.random_range(-wmax..=wmax)).collect();
            let xi: Vec<i64> = x.iter().map(|&v| v as i64).collect();
            let acc = crate::reference::matvec(&w, &xi, rows, cols);
            prop_assert_eq!(matvec_mod_p(&w, &x, &bias, rows, cols, p).unwrap(), reference_mod_p(&acc, &bias, 1, p));
        }
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let sh = GroupedConvShape {
            c_i: 2,
            h: 3,
            w: 3,
            c_o: 2,
            k_h: 1,
            k_w: 1,
            stride: 1,
            padding: Padding::Valid,
            groups: 1,
        };
        assert!(matches!(
            conv_mod_p(&sh, &[0; 17], &[0; 4], &[], 17),
            Err(KernelError::Shape {
                what: "input image",
                ..
            })
        ));
        assert!(matches!(
            conv_mod_p(&sh, &[0; 18], &[0; 4], &[1], 17),
            Err(KernelError::Shape { what: "bias", .. })
        ));
        assert!(matches!(
            matvec_mod_p(&[0; 5], &[0; 3], &[], 2, 3, 17),
            Err(KernelError::Shape {
                what: "weight matrix",
                ..
            })
        ));
    }
}
