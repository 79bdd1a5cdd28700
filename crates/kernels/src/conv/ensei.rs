//! ENSEI: convolution in the frequency domain, no rotations (ENSEI §4, Fig. 2, Eq. 7-8).
//!
//! The client zero-pads each channel into an N_h x N_w grid (the same padded grid as the
//! other methods, at the same offsets), applies a 2-D number-theoretic transform mod p
//! and encrypts the transformed values; n / (N_h N_w) channels share a ciphertext in
//! blocks of N_h·N_w slots. The server transforms its filters offline (flipped, so
//! cross-correlation becomes a convolution read at offset (k_h − 1, k_w − 1)) and, per
//! output channel, multiplies slot-wise and sums over input ciphertexts: c_o · c_i/c_n
//! ScMult, no rotation, no Galois key. The partial sums of the c_n blocks of an output
//! channel are added on the cleartext shares (so c_o output ciphertexts instead of
//! c_o/c_n: more download), and each party inverse-transforms its own share (the
//! transform is linear, so shares of the transform are shares of the result).
//!
//! Transform: fhe-math's negacyclic NTT mod p in each dimension (p ≡ 1 mod 2N). With
//! N_h ≥ hp + k_h − 1 and N_w ≥ wp + k_w − 1 no product wraps around, so the negacyclic
//! product equals the linear convolution at every position read. One prime
//! p = p_E = p_A = p_N serves as HE plaintext, sharing and transform modulus
//! (../shared/papers.md §6: ENSEI's p_A > p_N claim does not hold in general).
//! Not done: ENSEI §5.1 (writing the transform straight into an NTT-form plaintext).

pub(crate) use fhe_like::Transform;
use he::Backend;

use super::ConvGeometry;
use crate::error::{KernelError, Result};
use crate::noise::NoiseModel;

/// 2-D transforms mod p (kept local: the only NTT the kernels crate needs).
mod fhe_like {
    use crate::error::{KernelError, Result};

    /// Row and column NTT operators for an N_h x N_w grid mod p.
    #[derive(Clone, Debug)]
    pub(crate) struct Transform {
        pub(crate) nh: usize,
        pub(crate) nw: usize,
        rows: he::PlainNtt,
        cols: he::PlainNtt,
    }

    impl Transform {
        pub(crate) fn new(p: u64, nh: usize, nw: usize) -> Result<Self> {
            let mk = |len: usize| {
                he::PlainNtt::new(p, len).ok_or_else(|| KernelError::NoTransform {
                    p,
                    len,
                    suggestion: he::batching_prime(20, len.max(4096))
                        .map(|q| q.to_string())
                        .unwrap_or_else(|_| "a prime ≡ 1 mod 2·len".into()),
                })
            };
            Ok(Self {
                nh,
                nw,
                rows: mk(nw)?,
                cols: mk(nh)?,
            })
        }
        fn apply(&self, grid: &mut [u64], forward: bool) {
            let (nh, nw) = (self.nh, self.nw);
            let mut col = vec![0u64; nh];
            let do_rows = |g: &mut [u64]| {
                for r in 0..nh {
                    let row = &mut g[r * nw..(r + 1) * nw];
                    if forward {
                        self.rows.forward(row)
                    } else {
                        self.rows.backward(row)
                    }
                }
            };
            if forward {
                do_rows(grid);
            }
            for c in 0..nw {
                for r in 0..nh {
                    col[r] = grid[r * nw + c];
                }
                if forward {
                    self.cols.forward(&mut col)
                } else {
                    self.cols.backward(&mut col)
                }
                for r in 0..nh {
                    grid[r * nw + c] = col[r];
                }
            }
            if !forward {
                do_rows(grid);
            }
        }
        pub(crate) fn forward(&self, grid: &mut [u64]) {
            self.apply(grid, true)
        }
        pub(crate) fn backward(&self, grid: &mut [u64]) {
            self.apply(grid, false)
        }
    }
}

/// ENSEI's geometry: transform sizes and blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnseiGeometry {
    /// Transform height N_h.
    pub nh: usize,
    /// Transform width N_w.
    pub nw: usize,
    /// Channels per ciphertext.
    pub per_ct: usize,
    /// Input ciphertexts.
    pub in_cts: usize,
    /// Copies of the input channels in one ciphertext (when c_i < channels per
    /// ciphertext): copy r of the channels serves output channel j·rep + r of response j.
    pub rep: usize,
    /// Response ciphertexts.
    pub out_cts: usize,
}

impl EnseiGeometry {
    /// (input channel, output channel within response `j`) of block `b` of input
    /// ciphertext `i`, or None for an empty block.
    fn block(
        &self,
        c_i: usize,
        c_o: usize,
        i: usize,
        j: usize,
        b: usize,
    ) -> Option<(usize, usize)> {
        if self.rep > 1 {
            let (r, c) = (b / c_i, b % c_i);
            let o = j * self.rep + r;
            (r < self.rep && o < c_o).then_some((c, o))
        } else {
            let c = i * self.per_ct + b;
            (c < c_i && j < c_o).then_some((c, j))
        }
    }
}

pub(crate) fn geometry(g: &ConvGeometry) -> Result<EnseiGeometry> {
    let sh = g.shape;
    let nh = (g.hp + sh.k_h - 1).next_power_of_two().max(8);
    let nw = (g.wp + sh.k_w - 1).next_power_of_two().max(8);
    if nh * nw > g.n {
        return Err(KernelError::Shape {
            what: "transformed channel (tiling is not implemented yet): slots",
            expected: g.n,
            actual: nh * nw,
        });
    }
    let per_ct = g.n / (nh * nw);
    let rep = (per_ct / sh.c_i).max(1);
    Ok(EnseiGeometry {
        nh,
        nw,
        per_ct,
        in_cts: sh.c_i.div_ceil(per_ct),
        rep,
        out_cts: sh.c_o.div_ceil(rep),
    })
}

pub(crate) fn transform(e: &EnseiGeometry, p: u64) -> Result<Transform> {
    Transform::new(p, e.nh, e.nw)
}

/// Client: padded, transformed channels in blocks.
pub(crate) fn query_values(
    g: &ConvGeometry,
    e: &EnseiGeometry,
    t: &Transform,
    x: &[u64],
    local: &dyn Fn(usize) -> Option<usize>,
) -> Vec<Vec<u64>> {
    let sh = g.shape;
    let block = e.nh * e.nw;
    (0..e.in_cts)
        .map(|i| {
            let mut vals = vec![0u64; g.n];
            for b in 0..e.per_ct {
                // The input side of a block does not depend on the response index.
                let Some((c, _)) = e.block(sh.c_i, usize::MAX, i, 0, b) else {
                    continue;
                };
                let grid = &mut vals[b * block..(b + 1) * block];
                for y in 0..sh.h {
                    let Some(ly) = local(y) else { continue };
                    for xx in 0..sh.w {
                        grid[ly * e.nw + xx + g.pad[2]] = x[(c * sh.h + y) * sh.w + xx];
                    }
                }
                t.forward(grid);
            }
            vals
        })
        .collect()
}

/// Offline: the transformed, flipped filters of response `j` for input ciphertext `i`.
pub(crate) fn filter_values(
    g: &ConvGeometry,
    e: &EnseiGeometry,
    t: &Transform,
    f: &[i64],
    p: u64,
    j: usize,
    i: usize,
) -> Vec<u64> {
    let sh = g.shape;
    let block = e.nh * e.nw;
    let mut vals = vec![0u64; g.n];
    for b in 0..e.per_ct {
        let Some((c, o)) = e.block(sh.c_i, sh.c_o, i, j, b) else {
            continue;
        };
        let grid = &mut vals[b * block..(b + 1) * block];
        for dy in 0..sh.k_h {
            for dx in 0..sh.k_w {
                let w = f[((o * sh.c_i + c) * sh.k_h + dy) * sh.k_w + dx];
                grid[(sh.k_h - 1 - dy) * e.nw + (sh.k_w - 1 - dx)] = w.rem_euclid(p as i64) as u64;
            }
        }
        t.forward(grid);
    }
    vals
}

/// Server: per response, Σ over input ciphertexts of slot-wise products.
pub(crate) fn compute<B: Backend>(
    b: &B,
    e: &EnseiGeometry,
    pts: &[B::PreparedPt],
    q: &[B::Ct],
) -> Result<Vec<B::Ct>> {
    crate::par::map(0..e.out_cts, |o| {
        let cts: Vec<&B::Ct> = q.iter().collect();
        let ps: Vec<&B::PreparedPt> = (0..e.in_cts).map(|i| &pts[o * e.in_cts + i]).collect();
        Ok(b.dot(&cts, &ps)?)
    })
}

/// Both parties: sum the blocks of each output channel, inverse-transform, read the
/// strided outputs (c_o x h_out x w_out).
pub(crate) fn finish(
    g: &ConvGeometry,
    e: &EnseiGeometry,
    t: &Transform,
    p: u64,
    slots: &[Vec<u64>],
) -> Result<Vec<u64>> {
    let sh = g.shape;
    let block = e.nh * e.nw;
    let mut out = Vec::with_capacity(sh.c_o * g.h_out * g.w_out);
    for o in 0..sh.c_o {
        let j = o / e.rep;
        // The inverse transform of each strip's block sum, computed once per strip.
        let mut strips: Vec<Vec<u64>> = Vec::with_capacity(g.strips);
        for strip in 0..g.strips {
            let v = slots
                .get(strip * e.out_cts + j)
                .ok_or(KernelError::CiphertextCount {
                    what: "response",
                    expected: g.strips * e.out_cts,
                    actual: slots.len(),
                })?;
            if v.len() < e.per_ct * block {
                return Err(KernelError::Shape {
                    what: "response slots",
                    expected: e.per_ct * block,
                    actual: v.len(),
                });
            }
            let mut grid = vec![0u64; block];
            for b in 0..e.per_ct {
                if e.block(sh.c_i, sh.c_o, 0, j, b)
                    .is_none_or(|(_, ob)| ob != o)
                {
                    continue;
                }
                for (acc, &s) in grid.iter_mut().zip(&v[b * block..(b + 1) * block]) {
                    *acc = (*acc + s) % p;
                }
            }
            t.backward(&mut grid);
            strips.push(grid);
        }
        for y in 0..g.h_out {
            let (strip, ly) = ((y * sh.stride) / g.h1, (y * sh.stride) % g.h1);
            for x in 0..g.w_out {
                let (uy, ux) = (ly + sh.k_h - 1, x * sh.stride + sh.k_w - 1);
                out.push(strips[strip][uy * e.nw + ux]);
            }
        }
    }
    Ok(out)
}

pub(crate) fn noise(e: &EnseiGeometry, m: &NoiseModel) -> f64 {
    m.sum(m.mult(m.fresh), e.in_cts)
}
