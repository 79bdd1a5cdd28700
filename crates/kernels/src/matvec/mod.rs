//! Matrix-vector products W·x with secret-shared outputs, one module per method:
//!
//! | method | paper | rotations (ideal n-slot model, n_i·n_o ≥ n) | keys |
//! |---|---|---|---|
//! | [`naive`] | GALA §III-A-1 | n_o·log2 n_i Perm | log2 n_i |
//! | [`diagonal`] | Halevi–Shoup | d − 1 HstPerm | d − 1 |
//! | [`bsgs`] | Halevi–Shoup, baby-step/giant-step | b − 1 HstPerm + d/b − 1 Perm | b |
//! | [`hybrid`] | GAZELLE (GALA §III-A-2) | n_i n_o/n − 1 HstPerm + log2(n/n_o) Perm | both sets |
//! | [`gala`] | GALA §III-A-3 | n_i n_o/n − 1 Perm | n_i n_o/n − 1 |
//! | [`heliks`] | HELiKs §4 | n_i n_o/n − 1 Perm, one fixed step | 1 |
//! | [`cheetah`] | Cheetah HomFC (coefficient encoding) | none | 0 |
//!
//! One interface for every method ([`MatvecLayout`]): the server encodes W offline
//! ([`MatvecLayout::encode`]); the client encrypts x ([`LinearLayer::query`](crate::LinearLayer::query), seeded
//! symmetric, and generates only the keys [`MatvecLayout::galois`] lists); the server
//! computes and shares ([`LinearLayer::respond`](crate::LinearLayer::respond): kernel, then [`crate::share_output`],
//! then its own cleartext finishing step on −r); the client decrypts and finishes
//! ([`LinearLayer::decrypt`](crate::LinearLayer::decrypt)). The shares satisfy client + server ≡ W·x (mod p).
//!
//! ## Layout
//! Slots are numbered globally 0..n; in the real 2 x n/2 layout slot g is row g / (n/2),
//! column g mod (n/2), and a rotation acts within each row (span S = n/2; S = n in the
//! ideal cyclic model). Inputs larger than the span are cut into column tiles of T
//! columns (one query ciphertext each); outputs into row blocks (one response
//! ciphertext each, except `naive`: one per row). Each query ciphertext holds copies of
//! its tile with period P (P = T, or d for the diagonal methods) in both rows, zero
//! padded. Products of all column tiles are summed before any output rotation.
//!
//! The segment methods (hybrid, gala, heliks) give output row r of a block the L slots
//! [rL, (r+1)L) (L = min(T, n/R) for R rows per block) and K = T/L diagonal plaintexts:
//! P_k\[g\] = W\[r\]\[(t + kL) mod T\] with t = g mod S, so Σ_k P_k ⊙ rot(x, kL) holds, in
//! segment r, partial sums whose total is row r of W·x. GALA and HELiKs pre-rotate P_k
//! by −kL (row encoding) and rotate the products instead; all three leave the final
//! in-segment sum to the cleartext shares (GALA, HELiKs) or to log2 L HE rotations
//! (hybrid). Where the paper's figures interleave rows instead of using contiguous
//! segments, the counts are the same.
//!
//! [`cheetah`] uses no slots: queries and weights are polynomials in coefficient
//! encoding (see its module doc); in [`Geometry`] its chunk width d1 is `tile` (and
//! `period`), its rows per block d0 `block_rows`, and `diags` = 1.

pub mod bsgs;
pub mod cheetah;
pub mod diagonal;
pub mod gala;
pub mod heliks;
pub mod hybrid;
pub mod naive;

use bincode::Options;
use he::{Backend, Encoding, GaloisSpec, Params, SlotInfo};
use serde::{Deserialize, Serialize};

use crate::error::{KernelError, Result};
use crate::noise::NoiseModel;
use crate::rotate::{Rotations, DEFAULT_KEY_BUDGET};

/// A matrix-vector method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Method {
    /// One row per ciphertext, rotate-and-sum in HE.
    Naive,
    /// Halevi–Shoup diagonals with hoisted input rotations.
    Diagonal,
    /// Diagonals with baby-step/giant-step rotations.
    Bsgs,
    /// GAZELLE's hybrid: packed copies, hoisted input rotations, HE rotate-and-sum.
    Hybrid,
    /// GALA's row encoding with share-RaS.
    Gala,
    /// HELiKs: multiply first, one fixed rotation step, cleartext row-half sums.
    Heliks,
    /// Cheetah's HomFC: coefficient encoding, no rotations, no Galois keys.
    Cheetah,
}

impl Method {
    /// Every method, in table order.
    pub const ALL: [Method; 7] = [
        Method::Naive,
        Method::Diagonal,
        Method::Bsgs,
        Method::Hybrid,
        Method::Gala,
        Method::Heliks,
        Method::Cheetah,
    ];
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Naive => "naive",
            Method::Diagonal => "diagonal",
            Method::Bsgs => "bsgs",
            Method::Hybrid => "hybrid",
            Method::Gala => "gala",
            Method::Heliks => "heliks",
            Method::Cheetah => "cheetah",
        }
    }
    /// Parses a name.
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == s)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The shape of a layout in slots; see the module doc for the symbols.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    /// Slots per ciphertext.
    pub n: usize,
    /// Rotation span S (n/2 real, n ideal).
    pub span: usize,
    /// Output rows.
    pub n_o: usize,
    /// Input columns.
    pub n_i: usize,
    /// Columns per query ciphertext T.
    pub tile: usize,
    /// Period P of the packed input copies.
    pub period: usize,
    /// Number of query ciphertexts.
    pub col_tiles: usize,
    /// Rows per output block R.
    pub block_rows: usize,
    /// Number of row blocks.
    pub row_blocks: usize,
    /// Segment length L (1 where unused).
    pub seg: usize,
    /// Diagonal plaintexts per (block, tile) K.
    pub diags: usize,
    /// Baby steps b (BSGS; 1 otherwise).
    pub baby: usize,
}

/// Signed weights reduced mod p, with zero padding outside the matrix.
pub(crate) struct Weights<'a> {
    w: &'a [u64],
    n_o: usize,
    n_i: usize,
}

impl Weights<'_> {
    pub(crate) fn at(&self, r: usize, c: usize) -> u64 {
        if r < self.n_o && c < self.n_i {
            self.w[r * self.n_i + c]
        } else {
            0
        }
    }
}

/// The slot whose value lands on `slot` when a vector is rotated right by `shift` within
/// each row (how plaintexts are pre-rotated by −shift offline).
pub(crate) fn row_rotated_source(g: &Geometry, slot: usize, shift: usize) -> usize {
    let (row, t) = (slot / g.span, slot % g.span);
    row * g.span + (t + g.span - shift % g.span) % g.span
}

/// An encoded weight matrix (offline), reusable across queries.
pub struct EncodedMatrix<B: Backend> {
    layout: String,
    pts: Vec<B::PreparedPt>,
}

/// The stored form of an [`EncodedMatrix`].
#[derive(Serialize, Deserialize)]
struct StoredMatrix {
    format: u32,
    layout: String,
    pts: Vec<Vec<u8>>,
}

const STORED_FORMAT: u32 = 1;

impl<B: Backend> EncodedMatrix<B> {
    /// Serialises the encoded matrix (to store offline work and reuse it).
    pub fn save(&self, b: &B) -> Result<Vec<u8>> {
        let stored = StoredMatrix {
            format: STORED_FORMAT,
            layout: self.layout.clone(),
            pts: self
                .pts
                .iter()
                .map(|p| b.prepared_to_bytes(p))
                .collect::<std::result::Result<_, _>>()?,
        };
        bincode::serialize(&stored).map_err(|e| KernelError::Storage {
            detail: e.to_string(),
        })
    }

    /// Loads an encoded matrix saved for `layout`, validating every plaintext.
    pub fn load(b: &B, layout: &MatvecLayout, bytes: &[u8]) -> Result<Self> {
        let stored: StoredMatrix = bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .with_limit(bytes.len() as u64)
            .deserialize(bytes)
            .map_err(|e| KernelError::Storage {
                detail: e.to_string(),
            })?;
        if stored.format != STORED_FORMAT {
            return Err(KernelError::Storage {
                detail: format!("format {} (expected {STORED_FORMAT})", stored.format),
            });
        }
        if stored.layout != layout.id() {
            return Err(KernelError::PlanMismatch {
                expected: stored.layout,
                actual: layout.id(),
            });
        }
        let g = &layout.geom;
        let count = g.row_blocks * g.diags * g.col_tiles;
        if stored.pts.len() != count {
            return Err(KernelError::Storage {
                detail: format!("{} plaintexts, expected {count}", stored.pts.len()),
            });
        }
        let pts = stored
            .pts
            .iter()
            .map(|p| b.prepared_from_bytes(p))
            .collect::<std::result::Result<_, _>>()?;
        Ok(Self {
            layout: stored.layout,
            pts,
        })
    }

    /// Number of prepared plaintexts.
    pub fn len(&self) -> usize {
        self.pts.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pts.is_empty()
    }
}

/// A matrix-vector method planned for a shape and a slot layout.
#[derive(Clone, Debug)]
pub struct MatvecLayout {
    method: Method,
    geom: Geometry,
    rot: Rotations,
    slots: SlotInfo,
}

fn pow2(x: usize) -> usize {
    x.max(1).next_power_of_two()
}

impl MatvecLayout {
    /// Lays out `method` for an n_o x n_i matrix with the default key budget (64 keys).
    pub fn new(method: Method, n_o: usize, n_i: usize, slots: SlotInfo) -> Result<Self> {
        Self::with_key_budget(method, n_o, n_i, slots, Some(DEFAULT_KEY_BUDGET))
    }

    /// The layout with a key budget (`None`: one key per step, the papers' counting model).
    pub fn with_key_budget(
        method: Method,
        n_o: usize,
        n_i: usize,
        slots: SlotInfo,
        budget: Option<usize>,
    ) -> Result<Self> {
        if n_o == 0 {
            return Err(KernelError::EmptyDimension { what: "rows (n_o)" });
        }
        if n_i == 0 {
            return Err(KernelError::EmptyDimension {
                what: "columns (n_i)",
            });
        }
        let n = slots.n;
        let span = slots.span();
        let tile = pow2(n_i).min(span);
        let col_tiles = n_i.div_ceil(tile);
        let mut g = Geometry {
            n,
            span,
            n_o,
            n_i,
            tile,
            period: tile,
            col_tiles,
            block_rows: 1,
            row_blocks: n_o,
            seg: 1,
            diags: 1,
            baby: 1,
        };
        match method {
            Method::Naive => {}
            Method::Diagonal | Method::Bsgs => {
                let d = pow2(n_i).max(pow2(n_o)).min(span);
                g.tile = d;
                g.period = d;
                g.col_tiles = n_i.div_ceil(d);
                g.block_rows = d;
                g.row_blocks = n_o.div_ceil(d);
                g.diags = d;
                if method == Method::Bsgs {
                    g.baby = bsgs::baby_steps(d, budget);
                }
            }
            Method::Hybrid | Method::Gala | Method::Heliks => {
                let r = pow2(n_o).min(span);
                g.block_rows = r;
                g.row_blocks = n_o.div_ceil(r);
                g.seg = tile.min(n / r);
                g.diags = tile / g.seg;
            }
            Method::Cheetah => {
                let (d0, d1) = cheetah::split(n_o, n_i, n);
                g.tile = d1;
                g.period = d1;
                g.col_tiles = n_i.div_ceil(d1);
                g.block_rows = d0;
                g.row_blocks = n_o.div_ceil(d0);
            }
        }
        let steps = match method {
            Method::Naive => naive::steps(&g),
            Method::Diagonal => diagonal::steps(&g),
            Method::Bsgs => bsgs::steps(&g),
            Method::Hybrid => hybrid::steps(&g),
            Method::Gala => gala::steps(&g),
            Method::Heliks => heliks::steps(&g),
            Method::Cheetah => Vec::new(),
        };
        let budget = if method == Method::Bsgs { None } else { budget };
        Ok(Self {
            method,
            rot: Rotations::new(steps, span, budget),
            geom: g,
            slots,
        })
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }
    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geom
    }
    /// How rotations map to keys.
    pub fn rotations(&self) -> &Rotations {
        &self.rot
    }
    /// The Galois keys the client must generate for this layout.
    pub fn galois(&self) -> GaloisSpec {
        self.rot.galois()
    }
    /// Query ciphertexts per vector.
    pub fn query_cts(&self) -> usize {
        self.geom.col_tiles
    }
    /// Response ciphertexts.
    pub fn output_cts(&self) -> usize {
        self.geom.row_blocks
    }
    fn id(&self) -> String {
        format!(
            "{} {}x{} n={} {:?}",
            self.method, self.geom.n_o, self.geom.n_i, self.slots.n, self.slots.layout
        )
    }

    /// Offline: encodes a row-major n_o x n_i matrix of signed weights.
    pub fn encode<B: Backend>(&self, b: &B, w: &[i64]) -> Result<EncodedMatrix<B>> {
        let g = &self.geom;
        if w.len() != g.n_o * g.n_i {
            return Err(KernelError::Shape {
                what: "weight matrix",
                expected: g.n_o * g.n_i,
                actual: w.len(),
            });
        }
        let p = self.slots.p;
        let half = (p / 2) as i64;
        let mut reduced = Vec::with_capacity(w.len());
        for (index, &value) in w.iter().enumerate() {
            if value.abs() > half {
                return Err(KernelError::WeightRange { index, value, p });
            }
            reduced.push(value.rem_euclid(p as i64) as u64);
        }
        let wt = Weights {
            w: &reduced,
            n_o: g.n_o,
            n_i: g.n_i,
        };
        let level = crate::layer::LinearLayer::query_level_on(self, b);
        // In parallel over (block, diagonal), in order.
        let groups = crate::par::map(0..g.row_blocks * g.diags, |bk| {
            let (block, k) = (bk / g.diags, bk % g.diags);
            let mut pts = Vec::with_capacity(g.col_tiles);
            for tile in 0..g.col_tiles {
                if self.method == Method::Cheetah {
                    pts.push(if b.carries_data() {
                        b.prepare_coeffs_at(&cheetah::weight_values(g, &wt, block, tile), level)?
                    } else {
                        b.prepare_coeffs_at(&[], level)?
                    });
                    continue;
                }
                if !b.carries_data() {
                    pts.push(b.prepare(&[])?);
                    continue;
                }
                let value = |slot: usize| match self.method {
                    Method::Naive => naive::value(g, &wt, block, tile, slot),
                    Method::Diagonal => diagonal::value(g, &wt, block, k, tile, slot),
                    Method::Bsgs => bsgs::value(g, &wt, block, k, tile, slot),
                    Method::Hybrid => hybrid::value(g, &wt, block, k, tile, slot),
                    Method::Gala | Method::Heliks => gala::value(g, &wt, block, k, tile, slot),
                    Method::Cheetah => 0, // encoded above
                };
                let v: Vec<u64> = (0..g.n).map(value).collect();
                pts.push(b.prepare(&v)?);
            }
            Ok(pts)
        })?;
        let pts: Vec<B::PreparedPt> = groups.into_iter().flatten().collect();
        Ok(EncodedMatrix {
            layout: self.id(),
            pts,
        })
    }

    /// Worst-case noise bits of the kernel's result (see [`crate::noise`]).
    pub fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        let g = &self.geom;
        let m = &m.with_hops(self.rot.max_hops());
        match self.method {
            Method::Naive => naive::noise(g, m),
            Method::Diagonal => diagonal::noise(g, m),
            Method::Bsgs => bsgs::noise(g, m),
            Method::Hybrid => hybrid::noise(g, m),
            Method::Gala => gala::noise(g, m),
            Method::Heliks => heliks::noise(g, m),
            Method::Cheetah => cheetah::noise(g, m),
        }
    }
}

impl crate::layer::LinearLayer for MatvecLayout {
    type Encoded<B: Backend> = EncodedMatrix<B>;
    fn method_name(&self) -> String {
        self.method.to_string()
    }
    fn galois(&self) -> GaloisSpec {
        MatvecLayout::galois(self)
    }
    fn query_cts(&self) -> usize {
        MatvecLayout::query_cts(self)
    }
    fn output_cts(&self) -> usize {
        MatvecLayout::output_cts(self)
    }
    fn input_len(&self) -> usize {
        self.geom.n_i
    }
    fn weight_len(&self) -> usize {
        self.geom.n_i * self.geom.n_o
    }
    fn query_level(&self, params: &Params) -> usize {
        if self.method != Method::Cheetah {
            return 0;
        }
        NoiseModel::lowest_level(params, self.kernel_noise(&NoiseModel::new(params)))
    }
    fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        MatvecLayout::kernel_noise(self, m)
    }
    fn flood_bits(&self, params: &Params) -> Result<u32> {
        let model = self.query_model(params);
        let kernel = self.kernel_noise(&model);
        if model.affords(kernel) {
            return Ok(model.flood_bits(kernel));
        }
        let suggestion = he::PRESETS
            .iter()
            .filter_map(|name| Params::preset(name).ok())
            .find(|cand| {
                let m = NoiseModel::new(cand);
                let layout = MatvecLayout::with_key_budget(
                    self.method,
                    self.geom.n_o,
                    self.geom.n_i,
                    SlotInfo {
                        n: cand.n(),
                        p: cand.p(),
                        layout: he::Layout::TwoRows,
                    },
                    None,
                );
                layout.is_ok_and(|pl| m.affords(pl.kernel_noise(&m)))
            })
            .map(|c| format!("preset {}", c.name()))
            .unwrap_or_else(|| "a larger ring degree".to_string());
        Err(KernelError::NoiseBudget {
            method: self.method.to_string(),
            params: params.name().to_string(),
            needed: model.needed_bits(kernel),
            available: model.log_q.floor() as u32,
            suggestion,
        })
    }
    fn encode_weights<B: Backend>(&self, b: &B, w: &[i64]) -> Result<EncodedMatrix<B>> {
        self.encode(b, w)
    }
    fn query_values(&self, x: &[u64]) -> Result<Vec<Vec<u64>>> {
        let g = &self.geom;
        if x.len() != g.n_i {
            return Err(KernelError::Shape {
                what: "input vector",
                expected: g.n_i,
                actual: x.len(),
            });
        }
        let p = self.slots.p;
        if let Some((index, &value)) = x.iter().enumerate().find(|(_, &v)| v >= p) {
            return Err(he::HeError::NotReduced { index, value, p }.into());
        }
        if self.method == Method::Cheetah {
            return Ok((0..g.col_tiles)
                .map(|tile| cheetah::query_values(g, x, p, tile))
                .collect());
        }
        Ok((0..g.col_tiles)
            .map(|tile| {
                (0..g.n)
                    .map(|slot| {
                        let i = (slot % g.span) % g.period;
                        let c = tile * g.tile + i;
                        if i < g.tile && c < g.n_i {
                            x[c]
                        } else {
                            0
                        }
                    })
                    .collect()
            })
            .collect())
    }
    fn compute<B: Backend>(&self, b: &B, m: &EncodedMatrix<B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
        if m.layout != self.id() {
            return Err(KernelError::PlanMismatch {
                expected: m.layout.clone(),
                actual: self.id(),
            });
        }
        if q.len() != self.geom.col_tiles {
            return Err(KernelError::CiphertextCount {
                what: "query",
                expected: self.geom.col_tiles,
                actual: q.len(),
            });
        }
        let ctx = Ctx {
            b,
            g: &self.geom,
            rot: &self.rot,
            pts: &m.pts,
        };
        match self.method {
            Method::Naive => naive::compute(&ctx, q),
            Method::Diagonal => diagonal::compute(&ctx, q),
            Method::Bsgs => bsgs::compute(&ctx, q),
            Method::Hybrid => hybrid::compute(&ctx, q),
            Method::Gala => gala::compute(&ctx, q),
            Method::Heliks => heliks::compute(&ctx, q),
            Method::Cheetah => cheetah::compute(&ctx, q),
        }
    }
    fn encoding(&self) -> Encoding {
        if self.method == Method::Cheetah {
            Encoding::Coeffs
        } else {
            Encoding::Slots
        }
    }
    fn response_coeffs(&self, index: usize) -> Option<Vec<std::ops::Range<usize>>> {
        let g = &self.geom;
        (self.method == Method::Cheetah).then(|| {
            let rows = g.block_rows.min(g.n_o.saturating_sub(index * g.block_rows));
            crate::layer::runs(
                (0..rows)
                    .map(|r| cheetah::output_coefficient(g, r))
                    .collect(),
            )
        })
    }
    fn finish(&self, slots: &[Vec<u64>]) -> Result<Vec<u64>> {
        let g = &self.geom;
        if slots.len() != self.output_cts() {
            return Err(KernelError::CiphertextCount {
                what: "response",
                expected: self.output_cts(),
                actual: slots.len(),
            });
        }
        let p = self.slots.p as u128;
        (0..g.n_o)
            .map(|r| {
                let (block, local) = (r / g.block_rows, r % g.block_rows);
                let v = slots.get(block).ok_or(KernelError::CiphertextCount {
                    what: "response",
                    expected: self.output_cts(),
                    actual: slots.len(),
                })?;
                let (start, len) = match self.method {
                    Method::Naive => (0, 1),
                    Method::Diagonal | Method::Bsgs => (local, 1),
                    Method::Hybrid => (local * g.seg, 1),
                    Method::Gala | Method::Heliks => (local * g.seg, g.seg),
                    Method::Cheetah => (cheetah::output_coefficient(g, local), 1),
                };
                let s = v
                    .get(start..start + len)
                    .ok_or(KernelError::Shape {
                        what: "response slots",
                        expected: g.n,
                        actual: v.len(),
                    })?
                    .iter()
                    .fold(0u128, |a, &x| (a + x as u128) % p);
                Ok(s as u64)
            })
            .collect()
    }
}

/// What a method's `compute` needs.
pub(crate) struct Ctx<'a, B: Backend> {
    pub(crate) b: &'a B,
    pub(crate) g: &'a Geometry,
    pub(crate) rot: &'a Rotations,
    pub(crate) pts: &'a [B::PreparedPt],
}

impl<B: Backend> Ctx<'_, B> {
    /// The prepared plaintext of (block, diagonal k, column tile).
    pub(crate) fn pt(&self, block: usize, k: usize, tile: usize) -> &B::PreparedPt {
        &self.pts[(block * self.g.diags + k) * self.g.col_tiles + tile]
    }
    /// Σ over tiles of q[tile] ⊙ pt(block, k, tile): one fused product.
    pub(crate) fn tiles_dot(&self, q: &[&B::Ct], block: usize, k: usize) -> Result<B::Ct> {
        let pts: Vec<&B::PreparedPt> = (0..q.len()).map(|t| self.pt(block, k, t)).collect();
        Ok(self.b.dot(q, &pts)?)
    }
    /// acc + x, or x when there is no accumulator yet.
    pub(crate) fn accumulate(&self, acc: Option<B::Ct>, x: B::Ct) -> Result<Option<B::Ct>> {
        crate::layer::accumulate(self.b, acc, x)
    }
    /// Rotate-and-sum over `len` consecutive slots (steps len/2, …, 1): slot s of each
    /// aligned segment then holds the segment's sum.
    pub(crate) fn ras(&self, mut ct: B::Ct, len: usize) -> Result<B::Ct> {
        let mut s = len / 2;
        while s >= 1 {
            let r = self.rot.rotate(self.b, &ct, s as i64)?;
            ct = self.b.add(&ct, &r)?;
            s /= 2;
        }
        Ok(ct)
    }
}

/// Number of products combined per fused `dot` when streaming hoisted rotations.
pub(crate) const CHUNK: usize = 32;

/// Σ_k pt(block, k, tile) ⊙ rot(q[tile], step(k)) over all k and tiles, for every block,
/// with each query ciphertext hoisted once and rotations streamed in chunks (memory
/// stays O(CHUNK) ciphertexts). Used by the input-rotation methods.
pub(crate) fn input_rotation_sum<B: Backend>(
    c: &Ctx<'_, B>,
    q: &[B::Ct],
    ks: std::ops::Range<usize>,
    step: impl Fn(usize) -> i64,
    pt_index: impl Fn(usize) -> usize + Sync,
) -> Result<Vec<B::Ct>> {
    let g = c.g;
    let mut acc: Vec<Option<B::Ct>> = (0..g.row_blocks).map(|_| None).collect();
    let ks: Vec<usize> = ks.collect();
    for (tile, qt) in q.iter().enumerate() {
        let mut h = crate::rotate::Hoist::new(qt);
        for chunk in ks.chunks(CHUNK) {
            let steps: Vec<i64> = chunk.iter().map(|&k| step(k)).collect();
            let rots = c.rot.rotate_many(c.b, &mut h, &steps)?;
            let refs: Vec<&B::Ct> = rots.iter().collect();
            let parts = crate::par::map(0..acc.len(), |block| {
                let pts: Vec<&B::PreparedPt> = chunk
                    .iter()
                    .map(|&k| c.pt(block, pt_index(k), tile))
                    .collect();
                Ok(c.b.dot(&refs, &pts)?)
            })?;
            for (a, part) in acc.iter_mut().zip(parts) {
                *a = c.accumulate(a.take(), part)?;
            }
        }
    }
    acc.into_iter()
        .map(|a| a.ok_or(KernelError::EmptyDimension { what: "diagonals" }))
        .collect()
}
