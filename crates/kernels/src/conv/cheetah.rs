//! Cheetah's HomConv: convolution in coefficient encoding, no rotations and no Galois
//! keys (Huang et al., USENIX Security 2022, §4.1; index maps as in OpenCheetah's
//! `tensor_encoder.cc`, written anew here).
//!
//! The zero-padded input is cut into tiles of C_w channels x H_w x W_w pixels (tiles
//! overlap by the k − 1 halo rows and columns; a tile's stride-1 outputs are
//! (H_w − k_h + 1) x (W_w − k_w + 1)). In Z_p\[X\]/(X^n + 1), with HW = H_w·W_w:
//! - tile: x̂ = Σ x(c, i, j) X^{c·HW + i·W_w + j};
//! - filter of output channel m: F̂_m = Σ f(m, c, l, l') X^{O − c·HW − l·W_w − l'},
//!   O = HW·(C_w − 1) + W_w·(k_h − 1) + (k_w − 1), coefficients lifted centred;
//! - x̂·F̂_m holds the stride-1 output (i, j) of the tile at coefficient O + i·W_w + j
//!   (0 ≤ i ≤ H_w − k_h, 0 ≤ j ≤ W_w − k_w): the channel sum happens inside the
//!   product, and no other pair of exponents meets there.
//!
//! Output-channel packing (beyond OpenCheetah, which sends one response ciphertext per
//! output channel and tile): the filters of M_w output channels share one plaintext,
//! F̂ = Σ_{m<M_w} X^{m·C_w·HW}·F̂_m. Every x̂·F̂_m has exponents in [0, O + C_w·HW − 1],
//! so channel m's outputs at m·C_w·HW + O + i·W_w + j meet no term of another channel,
//! and with M_w·C_w·HW ≤ n nothing wraps onto them. So C_w·M_w·HW ≤ n trades query
//! ciphertexts (C/C_w per tile) against response ciphertexts (M/M_w per tile); M_w = 1
//! is Cheetah's layout. The layout minimises the bytes on the wire, then the products:
//! a rounded query ciphertext costs n times the bits its noise needs (about 105-115 at
//! p = 2^20 with weights up to p/2, about 95 with a fixed point's 8-bit weights), a
//! response n·(p + 12) bits of c1 plus its read coefficients (fixed by the layer).
//!
//! Padded tiles ([`crate::ConvMethod::CheetahPadded`]): H_w and W_w may exceed the
//! stride-1 outputs' extents plus the halo; the products are the same, and the outputs
//! at the extra rows and columns (which read the next tile's inputs or zeros) are not
//! read. A 1x1 filter's plaintext Σ f X^(m·C_w·HW + O − c·HW) is then a polynomial in
//! X^HW, which the server transforms in n/2^a points for the 2^a dividing HW
//! ([`he::Backend::prepare_coeffs_strided`]).
//!
//! Strides: 1x1 filters subsample the input first (Cheetah's `strided_tshape`); other
//! filters compute the stride-1 outputs of the rows and columns the strided output
//! needs and the shares keep every s-th (the network lowering turns strided layers
//! into a space-to-depth and a stride-1 convolution anyway).
//!
//! Responses: `share_output` (mask on all n coefficients, flooding, last level), then
//! only the coefficients `finish` reads travel in c0 ([`he::Backend::select_coeffs`];
//! c1 whole), as OpenCheetah sends them.
//!
//! Counts: query ciphertexts T·ceil(C/C_w), response ciphertexts T·ceil(M/M_w),
//! ScMult T·ceil(C/C_w)·ceil(M/M_w) (T tiles), no rotation; the filters are
//! ceil(M/M_w)·ceil(C/C_w) plaintexts shared by every tile.

use he::Backend;
use serde::{Deserialize, Serialize};

use super::{ConvGeometry, ConvShape};
use crate::error::{KernelError, Result};
use crate::noise::NoiseModel;

/// The coefficient-encoding geometry of a planned convolution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheetahGeometry {
    /// Ring degree.
    pub n: usize,
    /// Input subsampling (the stride, for 1x1 filters; 1 otherwise).
    pub sub: usize,
    /// Stride applied to the stride-1 outputs (1 when the input is subsampled).
    pub step: usize,
    /// Padding top and left on the (subsampled) input.
    pub pad_top: usize,
    /// Padding left.
    pub pad_left: usize,
    /// Input height and width after subsampling.
    pub h: usize,
    /// Input width after subsampling.
    pub w: usize,
    /// Stride-1 output rows needed.
    pub h1: usize,
    /// Stride-1 output columns needed.
    pub w1: usize,
    /// Stride-1 output rows per tile.
    pub oh: usize,
    /// Stride-1 output columns per tile.
    pub ow: usize,
    /// Tile height H_w = oh + k_h − 1 (more with padded tiles: the extra rows' outputs
    /// are not read).
    pub th: usize,
    /// Tile width W_w = ow + k_w − 1 (more with padded tiles).
    pub tw: usize,
    /// Tiles down.
    pub tiles_h: usize,
    /// Tiles across.
    pub tiles_w: usize,
    /// Input channels per query ciphertext C_w.
    pub c_w: usize,
    /// Output channels per response ciphertext M_w.
    pub m_w: usize,
    /// Channel groups of the input, ceil(C/C_w).
    pub in_groups: usize,
    /// Channel groups of the output, ceil(M/M_w).
    pub out_groups: usize,
    /// Output offset O.
    pub offset: usize,
}

impl CheetahGeometry {
    /// Spatial tiles T.
    pub fn tiles(&self) -> usize {
        self.tiles_h * self.tiles_w
    }
    /// Query ciphertexts.
    pub fn query_cts(&self) -> usize {
        self.tiles() * self.in_groups
    }
    /// Response ciphertexts.
    pub fn output_cts(&self) -> usize {
        self.tiles() * self.out_groups
    }
    /// Encoded filter plaintexts.
    pub fn plaintexts(&self) -> usize {
        self.in_groups * self.out_groups
    }
    fn hw(&self) -> usize {
        self.th * self.tw
    }
    /// The filter plaintexts are polynomials in X^(2^stride_log2)
    /// ([`he::Backend::prepare_coeffs_strided`]): every coefficient sits at a multiple
    /// of H_w·W_w plus a row offset l·W_w (k_h > 1) plus a column offset (k_w > 1), so the
    /// stride is the twos of H_w·W_w for 1x1 filters, of W_w for k_h x 1 ones, else none.
    pub fn stride_log2(&self, sh: &ConvShape) -> u32 {
        if sh.k_w > 1 {
            0
        } else if sh.k_h > 1 {
            self.tw.trailing_zeros()
        } else {
            self.hw().trailing_zeros()
        }
    }
}

/// The twos [`crate::ConvMethod::CheetahPadded`] pads a tile's area (1x1 filters) or
/// width (k x 1) to: 2^3, so that a 1x1 filter's plaintext is transformed in n/8 points
/// or fewer (`bench ops`: about a quarter of a whole transform's price at n = 8192).
pub const PADDED_TILE_TWOS: u32 = 3;

/// The smallest tile of at least `th0` x `tw0` pixels whose area (`area`) or width is a
/// multiple of 2^`twos`: (H_w, W_w).
fn padded_tile(th0: usize, tw0: usize, twos: u32, area: bool) -> (usize, usize) {
    let up = |v: usize, t: u32| v.div_ceil(1 << t) << t;
    if twos == 0 {
        return (th0, tw0);
    }
    if !area {
        return (th0, up(tw0, twos));
    }
    // the twos split between the two sides, the smallest area (then the narrower tile)
    (0..=twos)
        .map(|t| (up(th0, twos - t), up(tw0, t)))
        .min_by_key(|&(h, w)| (h * w, w))
        .unwrap_or((th0, tw0))
}

/// The candidate extents of `len` items cut into t parts: for each t, the smallest
/// extent giving t parts (O(√len) distinct values).
fn extents(len: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (1..=len).map(|t| len.div_ceil(t)).collect();
    v.dedup();
    v
}

/// The tiling of the fewest wire bytes (then products, then plaintexts); with
/// `tile_twos` > 0, among tiles padded ([`padded_tile`]) so that the filters are
/// polynomials in X^(2^tile_twos) or finer, which only filters one column wide have.
pub(crate) fn geometry(
    g: &ConvGeometry,
    p: u64,
    weight_log2: f64,
    tile_twos: u32,
) -> Result<CheetahGeometry> {
    let sh: ConvShape = g.shape;
    let n = g.n;
    if tile_twos > 0 && sh.k_w > 1 {
        return Err(KernelError::Shape {
            what: "filter columns for padded tiles",
            expected: 1,
            actual: sh.k_w,
        });
    }
    if sh.k_h * sh.k_w > n {
        return Err(KernelError::Shape {
            what: "filter taps in one ciphertext: coefficients",
            expected: n,
            actual: sh.k_h * sh.k_w,
        });
    }
    // 1x1 filters: subsample first (no padding is needed for them).
    let pointwise = sh.k_h == 1 && sh.k_w == 1;
    let (sub, step) = if pointwise {
        (sh.stride, 1)
    } else {
        (1, sh.stride)
    };
    let (h, w) = (sh.h.div_ceil(sub), sh.w.div_ceil(sub));
    let (pad_top, pad_left) = if pointwise {
        (0, 0)
    } else {
        (g.pad[0], g.pad[2])
    };
    let (h1, w1) = ((g.h_out - 1) * step + 1, (g.w_out - 1) * step + 1);
    let (c, m) = (sh.c_i, sh.c_o);
    // (wire bits, products, plaintexts) and the geometry
    let mut best: Option<((u64, usize, usize), CheetahGeometry)> = None;
    let model = NoiseModel {
        n,
        log_p: (p as f64).log2(),
        log_q: 0.0,
        fresh: 0.0,
        key_switch: 0.0,
        sc_mult: 0.5 * (n as f64).log2() + (p as f64 / 2.0).log2(),
        weight: weight_log2,
        session_responses_log2: 0,
    };
    // a response's c1 on the wire (he::Params::response_rounding: about p + 12 bits)
    let c1_bits = model.log_p + 12.0;
    // With a stride, tiles start at multiples of it, so every tile holds outputs.
    let aligned = |len: usize| -> Vec<usize> {
        let mut v: Vec<usize> = extents(len)
            .into_iter()
            .map(|t| (t.div_ceil(step) * step).min(len))
            .collect();
        v.dedup();
        v
    };
    let (ohs, ows) = (aligned(h1), aligned(w1));
    for &oh in &ohs {
        for &ow in &ows {
            let (th, tw) = padded_tile(oh + sh.k_h - 1, ow + sh.k_w - 1, tile_twos, pointwise);
            let hw = th * tw;
            if hw > n {
                continue;
            }
            let tiles = h1.div_ceil(oh) * w1.div_ceil(ow);
            for &c_w in extents(c).iter().filter(|&&cw| cw <= n / hw) {
                let m_w = m.min(n / (c_w * hw));
                let (ig, og) = (c.div_ceil(c_w), m.div_ceil(m_w));
                // the same counts with the fewest channels per ciphertext
                let (c_w, m_w) = (c.div_ceil(ig), m.div_ceil(og));
                // A rounded query keeps about the bits its noise needs (the rounding
                // error takes the fresh noise's place): needed_bits with fresh = 0.
                let kernel =
                    model.sum_independent(model.mult_sparse(0.0, m_w * c_w * sh.k_h * sh.k_w), ig);
                let query_bits = model.needed_bits(kernel) as f64;
                let wire =
                    (tiles as f64 * n as f64 * (ig as f64 * query_bits + og as f64 * c1_bits))
                        as u64;
                let key = (wire, tiles * ig * og, ig * og);
                if best.as_ref().is_some_and(|(k, _)| *k <= key) {
                    continue;
                }
                best = Some((
                    key,
                    CheetahGeometry {
                        n,
                        sub,
                        step,
                        pad_top,
                        pad_left,
                        h,
                        w,
                        h1,
                        w1,
                        oh,
                        ow,
                        th,
                        tw,
                        tiles_h: h1.div_ceil(oh),
                        tiles_w: w1.div_ceil(ow),
                        c_w,
                        m_w,
                        in_groups: ig,
                        out_groups: og,
                        offset: hw * (c_w - 1) + tw * (sh.k_h - 1) + (sh.k_w - 1),
                    },
                ));
            }
        }
    }
    best.map(|(_, geom)| geom).ok_or(KernelError::Shape {
        what: "filter with its halo in one ciphertext: coefficients",
        expected: n,
        actual: sh.k_h * sh.k_w,
    })
}

/// Client: the query polynomials, tile by tile (ciphertext tile·in_groups + group).
pub(crate) fn query_values(sh: &ConvShape, e: &CheetahGeometry, x: &[u64]) -> Vec<Vec<u64>> {
    let mut out = Vec::with_capacity(e.query_cts());
    for ty in 0..e.tiles_h {
        for tx in 0..e.tiles_w {
            for grp in 0..e.in_groups {
                let mut v = vec![0u64; e.n];
                for cl in 0..e.c_w {
                    let c = grp * e.c_w + cl;
                    if c >= sh.c_i {
                        break;
                    }
                    for i in 0..e.th {
                        // padded row → input row
                        let Some(y) = (ty * e.oh + i).checked_sub(e.pad_top).filter(|&y| y < e.h)
                        else {
                            continue;
                        };
                        for j in 0..e.tw {
                            let Some(xx) = (tx * e.ow + j)
                                .checked_sub(e.pad_left)
                                .filter(|&xx| xx < e.w)
                            else {
                                continue;
                            };
                            let at = (c * sh.h + y * e.sub) * sh.w + xx * e.sub;
                            v[cl * e.hw() + i * e.tw + j] = x[at];
                        }
                    }
                }
                out.push(v);
            }
        }
    }
    out
}

/// Offline: the filter polynomial of output group `og` and input group `ig`.
pub(crate) fn filter_values(
    sh: &ConvShape,
    e: &CheetahGeometry,
    f: &[i64],
    p: u64,
    og: usize,
    ig: usize,
) -> Vec<u64> {
    let mut v = vec![0u64; e.n];
    fill_filter(sh, e, f, p, og, ig, &mut v);
    v
}

/// Writes the filter polynomial of output group `og` and input group `ig` into `v` (n
/// zeros): its M_w·C_w·k_h·k_w non-zero coefficients.
fn fill_filter(
    sh: &ConvShape,
    e: &CheetahGeometry,
    f: &[i64],
    p: u64,
    og: usize,
    ig: usize,
    v: &mut [u64],
) {
    let taps = sh.k_h * sh.k_w;
    for ml in 0..e.m_w {
        let m = og * e.m_w + ml;
        if m >= sh.c_o {
            break;
        }
        let base = ml * e.c_w * e.hw() + e.offset;
        for cl in 0..e.c_w {
            let c = ig * e.c_w + cl;
            if c >= sh.c_i {
                break;
            }
            for l in 0..sh.k_h {
                for l2 in 0..sh.k_w {
                    let wv = f[(m * sh.c_i + c) * taps + l * sh.k_w + l2];
                    v[base - cl * e.hw() - l * e.tw - l2] = wv.rem_euclid(p as i64) as u64;
                }
            }
        }
    }
}

/// Server: per tile and output group, one fused sum of polynomial products over the
/// tile's input groups (response tile·out_groups + group).
pub(crate) fn compute<B: Backend>(
    b: &B,
    e: &CheetahGeometry,
    pts: &[B::PreparedPt],
    q: &[B::Ct],
) -> Result<Vec<B::Ct>> {
    crate::par::map(0..e.output_cts(), |o| {
        let (tile, og) = (o / e.out_groups, o % e.out_groups);
        let cts: Vec<&B::Ct> = q[tile * e.in_groups..(tile + 1) * e.in_groups]
            .iter()
            .collect();
        let ps: Vec<&B::PreparedPt> = (0..e.in_groups)
            .map(|ig| &pts[og * e.in_groups + ig])
            .collect();
        Ok(b.dot_coeffs(&cts, &ps)?)
    })
}

/// Output groups one fused call encodes together ([`Backend::dot_encoded_groups`]),
/// with `tiles` outputs each: at most [`GROUP_SUMS`] sums of outputs (the BFV sums of
/// one output are ~0.4 MB at the query level), so that they stay in the caches while
/// each query ciphertext row is read once for all of them, and at least two chunks
/// per thread.
const GROUP_SUMS: usize = 8;

fn group_chunk(out_groups: usize, tiles: usize, threads: usize) -> usize {
    let by_sums = (GROUP_SUMS / tiles.max(1)).max(1);
    let by_threads = out_groups.div_ceil(2 * threads.max(1)).max(1);
    by_sums.min(by_threads)
}

/// Server, weights encoded on the fly. With at least one output group per thread, in
/// parallel over chunks of groups: a chunk's filter polynomials are encoded inside its
/// products with every tile ([`Backend::dot_encoded_groups`]: on BFV each plaintext is
/// transformed and used while in cache, none is held, and each query row is read once
/// for the chunk's groups). With fewer groups, per group its plaintexts are prepared
/// and held while the tiles' sums run in parallel. Either way the same prepares and
/// fused products as [`ConvLayout::encode`](super::ConvLayout::encode) + [`compute`],
/// in the same response order.
pub(crate) fn compute_on_the_fly<B: Backend>(
    b: &B,
    sh: &ConvShape,
    e: &CheetahGeometry,
    f: &[i64],
    p: u64,
    level: usize,
    q: &[B::Ct],
) -> Result<Vec<B::Ct>> {
    let tile_cts = |tile: usize| -> Vec<&B::Ct> {
        q[tile * e.in_groups..(tile + 1) * e.in_groups]
            .iter()
            .collect()
    };
    let threads = rayon::current_num_threads();
    let per_group = if e.out_groups >= threads {
        let tiles: Vec<Vec<&B::Ct>> = (0..e.tiles()).map(tile_cts).collect();
        let chunk = group_chunk(e.out_groups, e.tiles(), threads);
        let chunks = crate::par::map(0..e.out_groups.div_ceil(chunk), |k| {
            let first = k * chunk;
            let groups = chunk.min(e.out_groups - first);
            let fill =
                |g: usize, ig: usize, v: &mut [u64]| fill_filter(sh, e, f, p, first + g, ig, v);
            Ok(b.dot_encoded_groups(
                he::Encoding::Coeffs,
                level,
                e.stride_log2(sh),
                groups,
                e.in_groups,
                &fill,
                &tiles,
            )?)
        })?;
        chunks.into_iter().flatten().collect()
    } else {
        crate::par::map(0..e.out_groups, |og| {
            let pts = (0..e.in_groups)
                .map(|ig| {
                    let v = if b.carries_data() {
                        filter_values(sh, e, f, p, og, ig)
                    } else {
                        Vec::new()
                    };
                    Ok(b.prepare_coeffs_strided(&v, level, e.stride_log2(sh))?)
                })
                .collect::<Result<Vec<_>>>()?;
            let ps: Vec<&B::PreparedPt> = pts.iter().collect();
            crate::par::map(0..e.tiles(), |tile| Ok(b.dot_coeffs(&tile_cts(tile), &ps)?))
        })?
    };
    // Response tile·out_groups + group, as `compute` orders them.
    super::interleave(per_group, e.tiles())
}

/// Both parties: read the strided outputs (c_o x h_out x w_out) from the response
/// coefficients.
pub(crate) fn finish(
    g: &ConvGeometry,
    e: &CheetahGeometry,
    coeffs: &[Vec<u64>],
) -> Result<Vec<u64>> {
    let sh = g.shape;
    if coeffs.len() != e.output_cts() {
        return Err(KernelError::CiphertextCount {
            what: "response",
            expected: e.output_cts(),
            actual: coeffs.len(),
        });
    }
    let mut out = Vec::with_capacity(sh.c_o * g.h_out * g.w_out);
    for m in 0..sh.c_o {
        let (og, ml) = (m / e.m_w, m % e.m_w);
        for y in 0..g.h_out {
            let yy = y * e.step;
            let (ty, i) = (yy / e.oh, yy % e.oh);
            for x in 0..g.w_out {
                let xx = x * e.step;
                let (tx, j) = (xx / e.ow, xx % e.ow);
                let v = &coeffs[(ty * e.tiles_w + tx) * e.out_groups + og];
                let at = ml * e.c_w * e.hw() + e.offset + i * e.tw + j;
                out.push(*v.get(at).ok_or(KernelError::Shape {
                    what: "response coefficients",
                    expected: e.n,
                    actual: v.len(),
                })?);
            }
        }
    }
    Ok(out)
}

/// The coefficients of response `o` that [`finish`] reads.
pub(crate) fn response_indices(g: &ConvGeometry, e: &CheetahGeometry, o: usize) -> Vec<usize> {
    let sh = g.shape;
    let (tile, og) = (o / e.out_groups, o % e.out_groups);
    let (ty, tx) = (tile / e.tiles_w, tile % e.tiles_w);
    let rows: Vec<usize> = (0..g.h_out)
        .map(|y| y * e.step)
        .filter(|yy| yy / e.oh == ty)
        .map(|yy| yy % e.oh)
        .collect();
    let cols: Vec<usize> = (0..g.w_out)
        .map(|x| x * e.step)
        .filter(|xx| xx / e.ow == tx)
        .map(|xx| xx % e.ow)
        .collect();
    let mut out = Vec::new();
    for ml in 0..e.m_w {
        if og * e.m_w + ml >= sh.c_o {
            break;
        }
        for &i in &rows {
            for &j in &cols {
                out.push(ml * e.c_w * e.hw() + e.offset + i * e.tw + j);
            }
        }
    }
    out
}

/// A filter plaintext has M_w·C_w·k_h·k_w coefficients; the products of the input
/// groups (different query ciphertexts: independent noise) are summed.
pub(crate) fn noise(sh: &ConvShape, e: &CheetahGeometry, m: &NoiseModel) -> f64 {
    let nonzero = e.m_w * e.c_w * sh.k_h * sh.k_w;
    m.sum_independent(m.mult_sparse(m.fresh, nonzero), e.in_groups)
}
