//! Convolutions with secret-shared outputs, one module per method:
//!
//! | method | paper | Perm | HstPerm | ScMult |
//! |---|---|---|---|---|
//! | [`gazelle_out`] | GAZELLE output rotation (GALA §III-B, Table III row 1) | c_i c_o (c_n − 1)/c_n² | c_i (f − 1)/c_n | c_i c_o f/c_n |
//! | [`gala`] | GALA kernel grouping (§III-B, Table III row 2) | c_o (c_n − 1)/c_n | c_i (f − 1)/c_n | c_i c_o f/c_n |
//!
//! (ideal model, c_n channels per ciphertext), [`gazelle_in`] (input rotation, no
//! output rotation: c_i f − c_i/c_n HstPerm), [`heliks`] (multiply first, ≤ 4 keys:
//! c_o (f − 1) + c_o (c_n − 1)/c_n Perm, HELiKs Table 1), [`ensei`] (frequency domain:
//! c_o·c_i/c_n ScMult, no rotation, c_o output ciphertexts, fewer when c_i < c_n) and
//! [`cheetah`] (coefficient encoding, no rotation, no Galois key; its own tiling, see
//! its module doc: the layout below is the slot methods').
//!
//! ## Layout (the same for every slot method)
//! Each input channel is zero padded to an hp x wp grid (padding `same` or `valid`) and
//! stored row-major in a block of B' slots, B' = S / c_n, where c_n (channels per row,
//! a power of two) is the most blocks of hp·wp slots one row of S = n/2 slots holds; so
//! a rotation by a multiple of B' is a cyclic block shift within a row. Channel ch lives
//! in ciphertext ch / (2 c_n), row (ch / c_n) mod 2, block ch mod c_n (the ideal cyclic
//! model has one row of S = n). A filter tap (dy, dx) is a left rotation by
//! dy·wp + dx: output pixel (y, x) of the stride-1 convolution sits at block offset
//! y·wp + x. Strided convolution is computed at stride 1 and the shares keep only the
//! positions (y·s, x·s): s² more products than necessary, no extra rotation.
//! A padded channel larger than a row is cut into horizontal strips, each with the
//! k_h − 1 rows of halo below it (as CrypTFlow2/SCI tile): every strip is an
//! independent convolution with the same encoded filters, so query and response
//! ciphertexts multiply by the number of strips and nothing else changes.
//! The two rows of a ciphertext are paired with the column rotation (row swap): every
//! input ciphertext is used as is and swapped, so output row ρ receives input row ρ and
//! 1 − ρ. Output shares are returned as c_o x h_out x w_out, row-major.
//!
//! **Scalar path** ([`ConvGeometry::scalar_path`]): where a row holds one padded channel
//! (c_n = 1), a weight plaintext is one constant per row, built without an NTT and
//! held as four values per modulus ([`he::Backend::prepare_row_constants`]).
//!
//! **Compact packing** ([`Packing::Compact`], 'same' convolutions whose channel fits a
//! row; GAZELLE's layout, "dense packing" in the papers' sense; "dense" elsewhere in
//! helina means ungrouped): a channel keeps only its h x w pixels, so c_n = S/(h·w) (rounded
//! down to a power of two) as the papers count, wp = w. Pixel (r, c) sits at block
//! offset pt·w + pl + r·w + c (pt, pl: the top and left padding), cyclically within the
//! row, so a channel runs into the next block and the last one wraps to the first; tap
//! (dy, dx) is still a rotation by dy·w + dx and output (y, x) still sits at y·w + x,
//! but a tap that reads across the channel's border (another row's pixel, or another
//! channel's) has its weight zeroed at that output in the plaintexts. Everything else
//! (methods, counts, rows) is as above. [`ConvLayout::new`] takes it where it packs more
//! channels per row and the reference cost ([`ConvGeometry::reference_us`]) is lower;
//! both parties derive the same layout from the layer's shape and method.
//!
//! Block shift k pairs input block b with output block (b − k) mod c_n: the products'
//! plaintexts hold, at input block b, the filter tap of the output channel in block
//! (b − k); rotating the product left by k·B' moves it there.

pub mod bsgs;
pub mod cheetah;
pub mod ensei;
pub mod gala;
pub mod gazelle_in;
pub mod gazelle_out;
pub mod grouped;
pub mod heliks;

use he::{Backend, Encoding, GaloisSpec, Layout, Params, SlotInfo};
use serde::{Deserialize, Serialize};

use crate::error::{KernelError, Result};
use crate::noise::NoiseModel;
use crate::rotate::{Hoist, Rotations, DEFAULT_KEY_BUDGET};

/// A convolution method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConvMethod {
    /// GAZELLE, output rotation.
    GazelleOut,
    /// GAZELLE, input rotation.
    GazelleIn,
    /// GALA kernel grouping.
    Gala,
    /// ENSEI frequency domain, no rotations.
    Ensei,
    /// HELiKs: multiply first, fixed-step rotations, ≤ 4 keys.
    Heliks,
    /// Cheetah's HomConv: coefficient encoding, no rotations, no Galois keys.
    Cheetah,
    /// Cheetah's HomConv on tiles padded so that their area (1x1 filters) or width
    /// (k x 1 filters) is a multiple of 2^[`cheetah::PADDED_TILE_TWOS`]: the filter
    /// plaintexts are then polynomials in X^(2^a), transformed in n/2^a points, for some
    /// more ciphertexts than the fewest (7x7 feature maps: 7x8 tiles, 14% more). Not for
    /// filters wider than one column.
    CheetahPadded,
    /// HELiKs with a baby-step giant-step block fold: baby shifts on the inputs
    /// (hoisted, shared), giant shifts on the outputs.
    Bsgs,
}

impl ConvMethod {
    /// Every method.
    pub const ALL: [ConvMethod; 8] = [
        ConvMethod::GazelleOut,
        ConvMethod::GazelleIn,
        ConvMethod::Gala,
        ConvMethod::Heliks,
        ConvMethod::Bsgs,
        ConvMethod::Ensei,
        ConvMethod::Cheetah,
        ConvMethod::CheetahPadded,
    ];
    /// Name.
    pub fn name(self) -> &'static str {
        match self {
            ConvMethod::GazelleOut => "gazelle-out",
            ConvMethod::GazelleIn => "gazelle-in",
            ConvMethod::Gala => "gala",
            ConvMethod::Ensei => "ensei",
            ConvMethod::Heliks => "heliks",
            ConvMethod::Cheetah => "cheetah",
            ConvMethod::CheetahPadded => "cheetah-padded",
            ConvMethod::Bsgs => "bsgs",
        }
    }
    /// Cheetah's coefficient encoding (either tiling).
    pub fn is_cheetah(self) -> bool {
        matches!(self, ConvMethod::Cheetah | ConvMethod::CheetahPadded)
    }
    /// Whether the method takes filters `k_w` columns wide: every method but
    /// [`ConvMethod::CheetahPadded`] takes any width, it only one column (a layout with a
    /// wider filter is refused with [`KernelError::Shape`]).
    pub fn takes_filter_width(self, k_w: usize) -> bool {
        self.tile_twos() == 0 || k_w <= 1
    }
    /// The twos [`cheetah::geometry`] pads a tile to: none for Cheetah's own tiling.
    fn tile_twos(self) -> u32 {
        match self {
            ConvMethod::CheetahPadded => cheetah::PADDED_TILE_TWOS,
            _ => 0,
        }
    }
    /// Parses a name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }
}

impl std::fmt::Display for ConvMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Zero padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Padding {
    /// Output ceil(h / s) x ceil(w / s) (TensorFlow's SAME: the extra pad goes bottom/right).
    Same,
    /// No padding.
    Valid,
}

/// How the slot methods lay a channel out in its block (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Packing {
    /// Each channel zero padded to its hp x wp grid: taps read the padding.
    Padded,
    /// 'same' convolutions at the papers' density: a channel's h x w pixels only
    /// (c_n = S / (h·w) rounded down to a power of two), rows at stride w, the channel
    /// shifted by pad_top·w + pad_left within its row (cyclically into the next block);
    /// a tap that would read across the channel's border is zeroed in the plaintexts.
    Compact,
}

impl Packing {
    /// Name.
    pub fn name(self) -> &'static str {
        match self {
            Packing::Padded => "padded",
            Packing::Compact => "compact",
        }
    }
}

/// A convolution layer's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConvShape {
    /// Input channels.
    pub c_i: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels (filters).
    pub c_o: usize,
    /// Filter height.
    pub k_h: usize,
    /// Filter width.
    pub k_w: usize,
    /// Stride (both directions).
    pub stride: usize,
    /// Padding.
    pub padding: Padding,
}

impl ConvShape {
    /// The convolution of a `[c_i, h, w]` input by `[c_o, k_h, k_w]` filters.
    pub fn new(input: [usize; 3], filters: [usize; 3], stride: usize, padding: Padding) -> Self {
        let ([c_i, h, w], [c_o, k_h, k_w]) = (input, filters);
        ConvShape {
            c_i,
            h,
            w,
            c_o,
            k_h,
            k_w,
            stride,
            padding,
        }
    }
}

/// The slot geometry of a planned convolution (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvGeometry {
    /// The shape.
    pub shape: ConvShape,
    /// Padding top, bottom, left, right.
    pub pad: [usize; 4],
    /// Padded grid height of one strip (its stride-1 output rows plus the k_h − 1 halo).
    pub hp: usize,
    /// Padded grid width (the row stride of a block).
    pub wp: usize,
    /// Stride-1 output rows per strip.
    pub h1: usize,
    /// Stride-1 output width on the grid.
    pub w1: usize,
    /// Output height.
    pub h_out: usize,
    /// Output width.
    pub w_out: usize,
    /// Slots per ciphertext.
    pub n: usize,
    /// Rotation span S.
    pub span: usize,
    /// Channels per row c_n.
    pub c_n: usize,
    /// Block stride B' = S / c_n.
    pub block: usize,
    /// Rows used per ciphertext (2 real, 1 ideal).
    pub rows: usize,
    /// Input ciphertexts.
    pub in_cts: usize,
    /// Output ciphertexts per strip.
    pub out_cts: usize,
    /// Horizontal strips the image is cut into (1 when a padded channel fits a row):
    /// each strip is an independent convolution over its rows and halo, with the same
    /// encoded filters.
    pub strips: usize,
    /// The channel layout (compact: `wp` = w, one strip, `hp` the padded height).
    pub packing: Packing,
}

impl ConvGeometry {
    /// The padded-grid row where strip `s` starts.
    pub fn strip_start(&self, strip: usize) -> usize {
        strip * self.h1
    }
    fn new(shape: ConvShape, slots: SlotInfo, frequency_domain: bool) -> Result<Self> {
        Self::new_packed(shape, slots, frequency_domain, false, Packing::Padded)
    }
    /// As [`ConvGeometry::new`]; `coefficients`: Cheetah tiles the image itself, so the
    /// slot layout's strips are not needed (one strip, whatever the row width);
    /// `packing`: [`Packing::Compact`] needs 'same' padding, a filter no larger than the
    /// image and a channel that fits one row (else [`KernelError::Packing`]).
    fn new_packed(
        shape: ConvShape,
        slots: SlotInfo,
        frequency_domain: bool,
        coefficients: bool,
        packing: Packing,
    ) -> Result<Self> {
        for (what, v) in [
            ("input channels", shape.c_i),
            ("height", shape.h),
            ("width", shape.w),
            ("output channels", shape.c_o),
            ("filter height", shape.k_h),
            ("filter width", shape.k_w),
            ("stride", shape.stride),
        ] {
            if v == 0 {
                return Err(KernelError::EmptyDimension { what });
            }
        }
        let s = shape.stride;
        let pads = |len: usize, k: usize| -> Result<(usize, usize)> {
            match shape.padding {
                Padding::Valid => {
                    if k > len {
                        Err(KernelError::Shape {
                            what: "filter larger than the input (valid padding)",
                            expected: len,
                            actual: k,
                        })
                    } else {
                        Ok((0, 0))
                    }
                }
                Padding::Same => {
                    let out = len.div_ceil(s);
                    let total = ((out - 1) * s + k).saturating_sub(len);
                    Ok((total / 2, total - total / 2))
                }
            }
        };
        let (pt, pb) = pads(shape.h, shape.k_h)?;
        let (pl, pr) = pads(shape.w, shape.k_w)?;
        let (hp_full, wp) = (shape.h + pt + pb, shape.w + pl + pr);
        let (h1_full, w1) = (hp_full - shape.k_h + 1, wp - shape.k_w + 1);
        let span = slots.span();
        let rows = match slots.layout {
            Layout::TwoRows => 2,
            Layout::Cyclic => 1,
        };
        // (strips, grid rows hp, row stride wp, stride-1 output rows h1 per strip, the
        // slots of one channel's block)
        let (strips, hp, wp, h1, grid) = if packing == Packing::Compact {
            let channel = shape.h * shape.w;
            let why = if shape.padding != Padding::Same {
                Some("compact packing is for 'same' padding")
            } else if frequency_domain || coefficients {
                Some("compact packing is for the slot methods")
            } else if shape.k_h > shape.h || shape.k_w > shape.w {
                Some("compact packing needs a filter no larger than the image")
            } else if channel > span {
                Some("compact packing needs a channel within one row of slots")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(KernelError::Packing {
                    why,
                    h: shape.h,
                    w: shape.w,
                    span,
                });
            }
            (1, hp_full, shape.w, h1_full, channel)
        } else {
            // A strip of r stride-1 output rows needs r + k_h − 1 input rows (its halo).
            let fits = |r: usize| -> bool {
                let rows_in = r + shape.k_h - 1;
                if coefficients {
                    true
                } else if frequency_domain {
                    (rows_in + shape.k_h - 1).next_power_of_two().max(8)
                        * (wp + shape.k_w - 1).next_power_of_two().max(8)
                        <= slots.n
                } else {
                    rows_in * wp <= span
                }
            };
            let (strips, strip_rows) = if fits(h1_full) {
                (1, h1_full)
            } else {
                let mut best = 0;
                let mut r = s;
                while r <= h1_full && fits(r) {
                    best = r;
                    r += s;
                }
                if best == 0 {
                    return Err(KernelError::Shape {
                        what: "padded image row with its filter halo: slots per row",
                        expected: span,
                        actual: shape.k_h.max(s) * wp,
                    });
                }
                let strips = h1_full.div_ceil(best);
                (strips, h1_full.div_ceil(strips).div_ceil(s) * s)
            };
            let hp = strip_rows + shape.k_h - 1;
            (strips, hp, wp, strip_rows, hp * wp)
        };
        // The most channels per row, a power of two.
        let fit = (span / grid).max(1);
        let c_n = 1usize << (usize::BITS - 1 - fit.leading_zeros());
        let per_ct = c_n * rows;
        Ok(Self {
            shape,
            pad: [pt, pb, pl, pr],
            hp,
            wp,
            h1,
            w1,
            h_out: (h1_full - 1) / s + 1,
            w_out: (w1 - 1) / s + 1,
            n: slots.n,
            span,
            c_n,
            block: span / c_n,
            rows,
            in_cts: shape.c_i.div_ceil(per_ct),
            out_cts: shape.c_o.div_ceil(per_ct),
            strips,
            packing,
        })
    }
    /// A slot method's reference cost in µs (n = 8192, 218 bits, one thread), from its
    /// operation counts in this geometry: fused products, rotations (plain, hoisting
    /// decompositions, hoisted; the row swap per input), and per query and response
    /// ciphertext the client's and the share step's fixed work. Only used to choose the
    /// packing (and `bsgs`'s baby step), not a prediction: [`mod@crate::estimate`] prices
    /// the counted kernel.
    pub fn reference_us(&self, method: ConvMethod) -> f64 {
        let (i, o, c, v, f) = (
            self.in_cts as f64,
            self.out_cts as f64,
            self.c_n as f64,
            self.versions() as f64,
            self.taps() as f64,
        );
        let inputs = i * v;
        let rotations = match method {
            ConvMethod::GazelleOut => o * i * (c - 1.0) * REF_PERM_US + self.hoisted_us(f - 1.0),
            ConvMethod::Gala => o * (c - 1.0) * REF_PERM_US + self.hoisted_us(f - 1.0),
            ConvMethod::GazelleIn => self.hoisted_us(c * f - 1.0),
            ConvMethod::Heliks => o * (c * (f - 1.0) + c - 1.0) * REF_PERM_US,
            ConvMethod::Bsgs => bsgs::rotation_us(self, bsgs::baby(self)),
            ConvMethod::Ensei | ConvMethod::Cheetah | ConvMethod::CheetahPadded => 0.0,
        };
        let swaps = if self.versions() == 2 {
            i * REF_PERM_US
        } else {
            0.0
        };
        let products = o * c * inputs * f * REF_TERM_US;
        let per_ct = (i + o) * REF_CT_US;
        self.strips as f64 * (rotations + swaps + products + per_ct)
    }
    /// Reference cost (µs) of `rotations` hoisted rotations of every input ciphertext
    /// and version, each group sharing one decomposition (none for no rotation).
    pub(crate) fn hoisted_us(&self, rotations: f64) -> f64 {
        if rotations > 0.0 {
            (self.in_cts * self.versions()) as f64 * (REF_DEC_US + rotations * REF_HST_US)
        } else {
            0.0
        }
    }
    /// Channels per ciphertext.
    pub fn per_ct(&self) -> usize {
        self.c_n * self.rows
    }
    /// Filter taps f = k_h·k_w.
    pub fn taps(&self) -> usize {
        self.shape.k_h * self.shape.k_w
    }
    /// Rotation of tap index d (row-major dy, dx).
    pub fn tap_step(&self, d: usize) -> i64 {
        ((d / self.shape.k_w) * self.wp + d % self.shape.k_w) as i64
    }
    /// Input versions per ciphertext (as is, and row-swapped in the real layout).
    pub fn versions(&self) -> usize {
        self.rows
    }
    pub(crate) fn pt_index(&self, o: usize, k: usize, i: usize, v: usize, d: usize) -> usize {
        (((o * self.c_n + k) * self.in_cts + i) * self.versions() + v) * self.taps() + d
    }
    fn plaintexts(&self) -> usize {
        self.out_cts * self.c_n * self.in_cts * self.versions() * self.taps()
    }
    /// Slot of (channel slot-group, pixel offset) in a ciphertext: cyclic within the
    /// row (a compact channel's shifted pixels run into the next block, the last block's
    /// into the first; a padded grid never leaves its block).
    fn slot(&self, row: usize, block: usize, offset: usize) -> usize {
        // Most positions do not wrap: the division only for those that do (weight
        // plaintexts encoded per query fill every slot through here).
        let at = block * self.block + offset;
        row * self.span + if at < self.span { at } else { at % self.span }
    }
    /// The scalar path: one padded channel per row (c_n = 1), so every weight plaintext
    /// is one constant per row ([`he::Backend::prepare_row_constants`]: no NTT, a few
    /// values per modulus). Every slot method's output at (y, x) only takes slot
    /// y·wp + x + Δ_d < hp·wp of tap d's product (rotated down, or read through the
    /// rotated input), which holds the right pixel or padding; what the constant puts
    /// in the other slots is never read. Not for the compact layout, whose border taps
    /// must be zeroed per position.
    pub fn scalar_path(&self) -> bool {
        self.c_n == 1 && self.packing == Packing::Padded
    }
    /// Whether tap d at stride-1 output (y, x) reads an image pixel (not the padding),
    /// in a one-strip geometry: in the padded layout the others read zeros, in the compact
    /// one another pixel, so its plaintexts zero them.
    fn tap_reads_image(&self, y: usize, x: usize, d: usize) -> bool {
        let sh = &self.shape;
        let (r, c) = (y + d / sh.k_w, x + d % sh.k_w);
        (self.pad[0]..self.pad[0] + sh.h).contains(&r)
            && (self.pad[2]..self.pad[2] + sh.w).contains(&c)
    }
}

/// Reference costs (µs at n = 8192, 218 bits, one thread;
/// [`crate::estimate::CostModel::reference`]) for choices made at planning time: a
/// rotation, a hoisting decomposition, a hoisted rotation, one term of a fused product,
/// and a query or response ciphertext's fixed work (client encryption or decryption,
/// wire handling, the share step).
pub(crate) const REF_PERM_US: f64 = 2700.0;
pub(crate) const REF_DEC_US: f64 = 1500.0;
pub(crate) const REF_HST_US: f64 = 800.0;
pub(crate) const REF_TERM_US: f64 = 150.0;
pub(crate) const REF_CT_US: f64 = 3000.0;

/// An encoded filter bank (offline).
pub struct EncodedFilters<B: Backend> {
    layout: String,
    pts: Vec<B::PreparedPt>,
}

/// A convolution method planned for a shape and a slot layout.
#[derive(Clone, Debug)]
pub struct ConvLayout {
    method: ConvMethod,
    geom: ConvGeometry,
    rot: Rotations,
    slots: SlotInfo,
    ensei: Option<(ensei::EnseiGeometry, ensei::Transform)>,
    cheetah: Option<cheetah::CheetahGeometry>,
}

impl ConvLayout {
    /// The layout with the default key budget.
    pub fn new(method: ConvMethod, shape: ConvShape, slots: SlotInfo) -> Result<Self> {
        Self::with_key_budget(method, shape, slots, Some(DEFAULT_KEY_BUDGET))
    }

    /// The layout with a key budget (`None`: one key per step). A slot method on a 'same'
    /// convolution takes [`Packing::Compact`] where it packs more channels per row and its
    /// reference cost ([`ConvGeometry::reference_us`]) is lower; else the padded layout.
    pub fn with_key_budget(
        method: ConvMethod,
        shape: ConvShape,
        slots: SlotInfo,
        budget: Option<usize>,
    ) -> Result<Self> {
        let padded = Self::with_packing(method, shape, slots, budget, Packing::Padded)?;
        let Ok(compact) = Self::with_packing(method, shape, slots, budget, Packing::Compact) else {
            return Ok(padded);
        };
        let (d, p) = (&compact.geom, &padded.geom);
        let denser = d.c_n > p.c_n || d.strips < p.strips;
        Ok(
            if denser && d.reference_us(method) < p.reference_us(method) {
                compact
            } else {
                padded
            },
        )
    }

    /// The layout with a key budget and a channel packing (an error where the packing does
    /// not apply: compact needs a slot method, 'same' padding and a channel within a row).
    pub fn with_packing(
        method: ConvMethod,
        shape: ConvShape,
        slots: SlotInfo,
        budget: Option<usize>,
        packing: Packing,
    ) -> Result<Self> {
        let geom = ConvGeometry::new_packed(
            shape,
            slots,
            method == ConvMethod::Ensei,
            method.is_cheetah(),
            packing,
        )?;
        let mut steps: Vec<i64> = Vec::new();
        let mut ens = None;
        let mut coeff = None;
        if method.is_cheetah() {
            let half = (slots.p as f64 / 2.0).log2();
            coeff = Some(cheetah::geometry(&geom, slots.p, half, method.tile_twos())?);
        } else if method == ConvMethod::Ensei {
            let e = ensei::geometry(&geom)?;
            let t = ensei::transform(&e, slots.p)?;
            ens = Some((e, t));
        } else if method == ConvMethod::Heliks {
            steps = heliks::steps(&geom);
        } else if method == ConvMethod::Bsgs {
            steps = bsgs::steps(&geom);
        } else if method == ConvMethod::GazelleIn {
            steps = gazelle_in::steps(&geom);
        } else {
            steps.extend((1..geom.taps()).map(|d| geom.tap_step(d)));
            steps.extend((1..geom.c_n).map(|k| (k * geom.block) as i64));
        }
        Ok(Self {
            method,
            rot: Rotations::new(steps, geom.span, budget),
            geom,
            slots,
            ensei: ens,
            cheetah: coeff,
        })
    }
    /// The layout for weights with a public bound `|w| ≤ 2^weight_log2`
    /// ([`he::Params::weight_bound_log2`]): Cheetah's tiles are chosen again for the
    /// smaller queries the bound allows; the other methods do not change.
    pub fn with_weight_bound(mut self, weight_log2: f64) -> Result<Self> {
        if self.cheetah.is_some() {
            self.cheetah = Some(cheetah::geometry(
                &self.geom,
                self.slots.p,
                weight_log2,
                self.method.tile_twos(),
            )?);
        }
        Ok(self)
    }
    /// The method.
    pub fn method(&self) -> ConvMethod {
        self.method
    }
    /// The geometry.
    pub fn geometry(&self) -> &ConvGeometry {
        &self.geom
    }
    /// Cheetah's coefficient-encoding geometry (tiles, channels per ciphertext), for
    /// [`ConvMethod::Cheetah`] and [`ConvMethod::CheetahPadded`] only.
    pub fn cheetah_geometry(&self) -> Option<&cheetah::CheetahGeometry> {
        self.cheetah.as_ref()
    }
    /// Rotations and keys.
    pub fn rotations(&self) -> &Rotations {
        &self.rot
    }
    /// Galois keys the client generates (plus the row swap in the real layout).
    pub fn galois(&self) -> GaloisSpec {
        let g = self.rot.galois();
        if self.geom.rows == 2 && self.ensei.is_none() && self.cheetah.is_none() {
            g.with_column()
        } else {
            g
        }
    }
    /// Response ciphertexts (c_o for ENSEI: its block sums happen on the shares).
    pub fn output_cts(&self) -> usize {
        if let Some(e) = &self.cheetah {
            return e.output_cts();
        }
        match &self.ensei {
            Some((e, _)) => e.out_cts * self.geom.strips,
            None => self.geom.out_cts * self.geom.strips,
        }
    }
    /// Prepared plaintexts the encoded filters hold (memory: each is n·L·16 bytes).
    pub fn encoded_plaintexts(&self) -> usize {
        if let Some(e) = &self.cheetah {
            return e.plaintexts();
        }
        match &self.ensei {
            Some((e, _)) => e.out_cts * e.in_cts,
            None => self.geom.plaintexts(),
        }
    }
    /// Query ciphertexts.
    pub fn query_cts(&self) -> usize {
        if let Some(e) = &self.cheetah {
            return e.query_cts();
        }
        match &self.ensei {
            Some((e, _)) => e.in_cts * self.geom.strips,
            None => self.geom.in_cts * self.geom.strips,
        }
    }
    fn id(&self) -> String {
        format!(
            "{} {:?} n={} {:?} {}",
            self.method,
            self.geom.shape,
            self.slots.n,
            self.slots.layout,
            self.geom.packing.name()
        )
    }
    /// The channel packing (always padded for `ensei` and `cheetah`, which lay out
    /// their own).
    pub fn packing(&self) -> Packing {
        self.geom.packing
    }

    /// A query of the layout's ciphertext count.
    fn check_query<C>(&self, q: &[C]) -> Result<()> {
        if q.len() != self.query_cts() {
            return Err(KernelError::CiphertextCount {
                what: "query",
                expected: self.query_cts(),
                actual: q.len(),
            });
        }
        Ok(())
    }

    /// The slot plaintexts of output ciphertext o, in `pt_index` order (k, i, v, d):
    /// filters `f` already checked.
    fn slot_filters<B: Backend>(&self, b: &B, f: &[i64], o: usize) -> Result<Vec<B::PreparedPt>> {
        let g = &self.geom;
        let mut pts = Vec::with_capacity(g.plaintexts() / g.out_cts.max(1));
        for k in 0..g.c_n {
            for i in 0..g.in_cts {
                for v in 0..g.versions() {
                    for d in 0..g.taps() {
                        pts.push(self.slot_filter(b, f, [o, k, i, v, d])?);
                    }
                }
            }
        }
        Ok(pts)
    }

    /// The slot plaintext `pt_index(o, k, i, v, d)`: filters `f` already checked.
    fn slot_filter<B: Backend>(
        &self,
        b: &B,
        f: &[i64],
        [o, k, i, v, d]: [usize; 5],
    ) -> Result<B::PreparedPt> {
        let g = &self.geom;
        let sh = g.shape;
        let taps = g.taps();
        let p = self.slots.p;
        let per = g.per_ct();
        if g.scalar_path() {
            // One channel per row: the weight is constant over the row (the positions
            // that are not outputs only feed slots `finish` never reads, and the share
            // step masks every slot).
            let mut rows = [0u64; 2];
            if b.carries_data() {
                for (row, r) in rows.iter_mut().enumerate().take(g.rows) {
                    let (oc, ic) = (o * per + row, i * per + (row ^ v));
                    if oc < sh.c_o && ic < sh.c_i {
                        *r = f[(oc * sh.c_i + ic) * taps + d].rem_euclid(p as i64) as u64;
                    }
                }
                if g.rows == 1 {
                    rows[1] = rows[0];
                }
            }
            return Ok(b.prepare_row_constants(rows)?);
        }
        if !b.carries_data() {
            return Ok(b.prepare(&[])?);
        }
        let mut vals = vec![0u64; g.n];
        self.slot_filter_values(f, [o, k, i, v, d], &mut vals);
        Ok(b.prepare(&vals)?)
    }

    /// Writes the slot values of plaintext `pt_index(o, k, i, v, d)` into `vals` (n
    /// zeros; not the scalar path): filters `f` already checked.
    fn slot_filter_values(&self, f: &[i64], [o, k, i, v, d]: [usize; 5], vals: &mut [u64]) {
        let g = &self.geom;
        let sh = g.shape;
        let taps = g.taps();
        let p = self.slots.p;
        let per = g.per_ct();
        // HELiKs multiplies first: its taps are pre-rotated by −Δ_d.
        let multiply_first = matches!(self.method, ConvMethod::Heliks | ConvMethod::Bsgs);
        let shift = if multiply_first {
            g.tap_step(d) as usize
        } else {
            0
        };
        // BSGS's baby step, once per plaintext (not per block)
        let b1 = if self.method == ConvMethod::Bsgs {
            bsgs::baby(g)
        } else {
            1
        };
        // a padded, stride-1 grid writes each row of the image as one run of slots
        let runs = g.packing == Packing::Padded && sh.stride == 1;
        for row in 0..g.rows {
            for bl in 0..g.c_n {
                let oc = o * per + row * g.c_n + (bl + g.c_n - k) % g.c_n;
                let ic = i * per + (row ^ v) * g.c_n + bl;
                // Input rotation pre-rotates the plaintexts by k·B': the weight sits at
                // its output block. BSGS: by its baby shift.
                let at = match self.method {
                    ConvMethod::GazelleIn => (bl + g.c_n - k) % g.c_n,
                    ConvMethod::Bsgs => bsgs::plaintext_block(g, b1, k, bl),
                    _ => bl,
                };
                if oc >= sh.c_o || ic >= sh.c_i {
                    continue;
                }
                let w = f[(oc * sh.c_i + ic) * taps + d];
                let wv = w.rem_euclid(p as i64) as u64;
                for y in (0..g.h1).step_by(sh.stride) {
                    // the run of slots of this row when it does not wrap (g.slot's
                    // positions, written at once)
                    let first = at * g.block + y * g.wp + shift;
                    if runs && first + g.w1 <= g.span {
                        let start = row * g.span + first;
                        vals[start..start + g.w1].fill(wv);
                        continue;
                    }
                    for x in (0..g.w1).step_by(sh.stride) {
                        if g.packing == Packing::Padded || g.tap_reads_image(y, x, d) {
                            let u = y * g.wp + x + shift;
                            vals[g.slot(row, at, u)] = wv;
                        }
                    }
                }
            }
        }
    }

    /// Offline: encodes filters given as c_o x c_i x k_h x k_w signed integers.
    pub fn encode<B: Backend>(&self, b: &B, f: &[i64]) -> Result<EncodedFilters<B>> {
        let g = &self.geom;
        let sh = g.shape;
        let taps = g.taps();
        let p = self.slots.p;
        check_weights(f, sh.c_o * sh.c_i * taps, p)?;
        if let Some(e) = &self.cheetah {
            use crate::layer::LinearLayer;
            let level = self.query_level_on(b);
            // In parallel over output groups, in order.
            let groups = crate::par::map(0..e.out_groups, |og| {
                (0..e.in_groups)
                    .map(|ig| {
                        let v = if b.carries_data() {
                            cheetah::filter_values(&sh, e, f, p, og, ig)
                        } else {
                            Vec::new()
                        };
                        Ok(b.prepare_coeffs_strided(&v, level, e.stride_log2(&sh))?)
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            return Ok(EncodedFilters {
                layout: self.id(),
                pts: groups.into_iter().flatten().collect(),
            });
        }
        if let Some((e, t)) = &self.ensei {
            // In parallel over output ciphertexts, in order.
            let groups = crate::par::map(0..e.out_cts, |j| {
                (0..e.in_cts)
                    .map(|i| {
                        let v = if b.carries_data() {
                            ensei::filter_values(g, e, t, f, p, j, i)
                        } else {
                            Vec::new()
                        };
                        Ok(b.prepare(&v)?)
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            let pts: Vec<B::PreparedPt> = groups.into_iter().flatten().collect();
            return Ok(EncodedFilters {
                layout: self.id(),
                pts,
            });
        }
        // In parallel over output ciphertexts, in order.
        let groups = crate::par::map(0..g.out_cts, |o| self.slot_filters(b, f, o))?;
        let pts: Vec<B::PreparedPt> = groups.into_iter().flatten().collect();
        Ok(EncodedFilters {
            layout: self.id(),
            pts,
        })
    }

    /// For every input ciphertext and version, the f tap rotations (hoisted).
    fn rotated_inputs<B: Backend>(&self, b: &B, q: &[B::Ct]) -> Result<Vec<Vec<B::Ct>>> {
        let g = &self.geom;
        // In parallel over input ciphertexts, then over (input, version), in order.
        let versions = crate::par::map(0..q.len(), |i| {
            if g.versions() == 2 {
                Ok(vec![q[i].clone(), b.rotate_columns(&q[i])?])
            } else {
                Ok(vec![q[i].clone()])
            }
        })?;
        let versions: Vec<B::Ct> = versions.into_iter().flatten().collect();
        if self.method == ConvMethod::Heliks {
            return Ok(versions.into_iter().map(|v| vec![v]).collect());
        }
        let offsets: Vec<i64> = match self.method {
            ConvMethod::GazelleIn => gazelle_in::steps(g),
            ConvMethod::Bsgs => bsgs::input_steps(g),
            _ => (0..g.taps()).map(|d| g.tap_step(d)).collect(),
        };
        crate::par::map(0..versions.len(), |i| {
            let mut h = Hoist::new(&versions[i]);
            self.rot.rotate_many(b, &mut h, &offsets)
        })
    }

    /// Worst-case kernel noise bits.
    pub fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        let m = &m.with_hops(self.rot.max_hops());
        if let Some(e) = &self.cheetah {
            return cheetah::noise(&self.geom.shape, e, m);
        }
        if let Some((e, _)) = &self.ensei {
            return ensei::noise(e, m);
        }
        let g = &self.geom;
        if self.method == ConvMethod::Heliks {
            return heliks::noise(g, m);
        }
        if self.method == ConvMethod::Bsgs {
            return bsgs::noise(g, m);
        }
        let terms = g.in_cts * g.versions() * g.taps();
        let prod = m.sum(m.mult(m.rotate(m.rotate(m.fresh))), terms);
        m.sum(m.rotate(prod), g.c_n * g.in_cts)
    }
}

impl crate::layer::LinearLayer for ConvLayout {
    type Encoded<B: Backend> = EncodedFilters<B>;
    fn method_name(&self) -> String {
        self.method.to_string()
    }
    fn galois(&self) -> GaloisSpec {
        ConvLayout::galois(self)
    }
    fn query_cts(&self) -> usize {
        ConvLayout::query_cts(self)
    }
    fn output_cts(&self) -> usize {
        ConvLayout::output_cts(self)
    }
    fn input_len(&self) -> usize {
        let s = self.geom.shape;
        s.c_i * s.h * s.w
    }
    fn weight_len(&self) -> usize {
        let s = self.geom.shape;
        s.c_o * s.c_i * s.k_h * s.k_w
    }
    fn weight_stride_log2(&self) -> u32 {
        self.cheetah
            .as_ref()
            .map_or(0, |e| e.stride_log2(&self.geom.shape))
    }
    fn encodes_in_products(&self) -> bool {
        // as compute_on_the_fly streams them: Cheetah's filters (a layer with fewer
        // output groups than threads prepares each group's apart: a few small layers),
        // and the bsgs and HELiKs plaintexts except the scalar path's row constants
        self.cheetah.is_some()
            || (matches!(self.method, ConvMethod::Bsgs | ConvMethod::Heliks)
                && !self.geom.scalar_path())
    }
    fn query_level(&self, params: &Params) -> usize {
        if self.cheetah.is_none() {
            return 0;
        }
        NoiseModel::lowest_level(params, self.kernel_noise(&NoiseModel::new(params)))
    }
    fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        ConvLayout::kernel_noise(self, m)
    }
    fn flood_bits(&self, params: &Params) -> Result<u32> {
        let m = self.query_model(params);
        let k = self.kernel_noise(&m);
        if m.affords(k) {
            Ok(m.flood_bits(k))
        } else {
            Err(KernelError::NoiseBudget {
                method: self.method.to_string(),
                params: params.name().to_string(),
                needed: m.needed_bits(k),
                available: m.log_q.floor() as u32,
                suggestion: "preset n8192".into(),
            })
        }
    }
    fn encode_weights<B: Backend>(&self, b: &B, w: &[i64]) -> Result<EncodedFilters<B>> {
        self.encode(b, w)
    }
    fn compute_on_the_fly<B: Backend>(&self, b: &B, w: &[i64], q: &[B::Ct]) -> Result<Vec<B::Ct>> {
        let b1 = match self.method {
            ConvMethod::Bsgs => bsgs::baby(&self.geom),
            ConvMethod::Heliks => 1,
            _ => 0,
        };
        let per_output: Option<OutputFn<B>> = match self.method {
            ConvMethod::GazelleIn => Some(gazelle_in::output),
            ConvMethod::GazelleOut => Some(gazelle_out::output),
            ConvMethod::Gala => Some(gala::output),
            _ => None,
        };
        let streams = self.cheetah.is_some() || b1 > 0 || per_output.is_some();
        if !streams {
            return self.compute(b, &self.encode(b, w)?, q);
        }
        let g = &self.geom;
        let sh = g.shape;
        check_weights(w, sh.c_o * sh.c_i * g.taps(), self.slots.p)?;
        self.check_query(q)?;
        if let Some(e) = &self.cheetah {
            let level = self.query_level_on(b);
            return cheetah::compute_on_the_fly(b, &sh, e, w, self.slots.p, level, q);
        }
        // every strip's rotated inputs, for the slot methods below
        let per_strip = q.len() / g.strips;
        let rotated = q
            .chunks(per_strip.max(1))
            .map(|qs| self.rotated_inputs(b, qs))
            .collect::<Result<Vec<_>>>()?;
        if let Some(output) = per_output {
            // GAZELLE's and GALA's: per output ciphertext its plaintexts prepared
            // (`slot_filters`), used for every strip and dropped: the same prepares,
            // rotations and products as `encode` + `compute`, one output's plaintexts
            // held per thread instead of the layer's.
            let per_output = crate::par::map(0..g.out_cts, |o| {
                let pts = self.slot_filters(b, w, o)?;
                rotated
                    .iter()
                    .map(|r| {
                        let ctx = ConvCtx {
                            b,
                            g,
                            rot: &self.rot,
                            pts: &pts,
                            one_output: true,
                            rotated: r,
                        };
                        output(&ctx, o)
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            return interleave(per_output, rotated.len());
        }
        // bsgs and heliks (b₁ = 1): per output ciphertext and per fused product its
        // plaintexts encoded inside the product of every strip (`Backend::dot_encoded`;
        // the scalar path's row constants are prepared, used for every strip and
        // dropped): the same prepares, rotations and products as `encode` + `compute`,
        // no plaintext held.
        let ctxs: Vec<ConvCtx<'_, B>> = rotated
            .iter()
            .map(|r| ConvCtx {
                b,
                g,
                rot: &self.rot,
                pts: &[],
                one_output: false,
                rotated: r,
            })
            .collect();
        let per_output = crate::par::map(0..g.out_cts, |o| {
            if g.scalar_path() {
                let encode = |k, i, v, d| self.slot_filter(b, w, [o, k, i, v, d]);
                bsgs::output(&ctxs, bsgs::Plaintexts::OnTheFly(&encode), o, b1)
            } else {
                let fill = |[k, i, v, d]: [usize; 4], vals: &mut [u64]| {
                    self.slot_filter_values(w, [o, k, i, v, d], vals)
                };
                bsgs::output(&ctxs, bsgs::Plaintexts::Values(&fill), o, b1)
            }
        })?;
        // Strip-major, as `compute` orders them.
        interleave(per_output, ctxs.len())
    }
    fn query_values(&self, x: &[u64]) -> Result<Vec<Vec<u64>>> {
        let g = &self.geom;
        let sh = g.shape;
        let p = self.slots.p;
        check_input(x, sh.c_i * sh.h * sh.w, p)?;
        if let Some(e) = &self.cheetah {
            return Ok(cheetah::query_values(&sh, e, x));
        }
        let mut out: Vec<Vec<u64>> = Vec::with_capacity(self.query_cts());
        for strip in 0..g.strips {
            // Input rows of this strip: padded rows [start, start + hp), halo included.
            let start = g.strip_start(strip);
            let local = |y: usize| (y + g.pad[0]).checked_sub(start).filter(|&l| l < g.hp);
            if let Some((e, t)) = &self.ensei {
                out.extend(ensei::query_values(g, e, t, x, &local));
                continue;
            }
            let per = g.per_ct();
            for i in 0..g.in_cts {
                let mut vals = vec![0u64; g.n];
                for row in 0..g.rows {
                    for bl in 0..g.c_n {
                        let c = i * per + row * g.c_n + bl;
                        if c >= sh.c_i {
                            continue;
                        }
                        for y in 0..sh.h {
                            let Some(ly) = local(y) else { continue };
                            for xx in 0..sh.w {
                                let off = ly * g.wp + xx + g.pad[2];
                                vals[g.slot(row, bl, off)] = x[(c * sh.h + y) * sh.w + xx];
                            }
                        }
                    }
                }
                out.push(vals);
            }
        }
        Ok(out)
    }
    fn compute<B: Backend>(&self, b: &B, m: &EncodedFilters<B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
        if m.layout != self.id() {
            return Err(KernelError::PlanMismatch {
                expected: m.layout.clone(),
                actual: self.id(),
            });
        }
        self.check_query(q)?;
        if let Some(e) = &self.cheetah {
            return cheetah::compute(b, e, &m.pts, q);
        }
        let per_strip = q.len() / self.geom.strips;
        let mut out = Vec::with_capacity(self.output_cts());
        for qs in q.chunks(per_strip.max(1)) {
            if let Some((e, _)) = &self.ensei {
                out.extend(ensei::compute(b, e, &m.pts, qs)?);
                continue;
            }
            let rotated = self.rotated_inputs(b, qs)?;
            let ctx = ConvCtx {
                b,
                g: &self.geom,
                rot: &self.rot,
                pts: &m.pts,
                one_output: false,
                rotated: &rotated,
            };
            out.extend(match self.method {
                ConvMethod::GazelleOut => gazelle_out::compute(&ctx)?,
                ConvMethod::GazelleIn => gazelle_in::compute(&ctx)?,
                ConvMethod::Gala => gala::compute(&ctx)?,
                ConvMethod::Heliks => heliks::compute(&ctx)?,
                ConvMethod::Bsgs => bsgs::compute(&ctx)?,
                ConvMethod::Ensei | ConvMethod::Cheetah | ConvMethod::CheetahPadded => {
                    return Err(KernelError::EmptyDimension {
                        what: "ENSEI transform",
                    })
                }
            });
        }
        Ok(out)
    }
    fn encoding(&self) -> Encoding {
        if self.cheetah.is_some() {
            Encoding::Coeffs
        } else {
            Encoding::Slots
        }
    }
    fn response_coeffs(&self, index: usize) -> Option<Vec<std::ops::Range<usize>>> {
        let e = self.cheetah.as_ref()?;
        Some(crate::layer::runs(cheetah::response_indices(
            &self.geom, e, index,
        )))
    }
    fn finish(&self, slots: &[Vec<u64>]) -> Result<Vec<u64>> {
        let g = &self.geom;
        if let Some(e) = &self.cheetah {
            return cheetah::finish(g, e, slots);
        }
        if let Some((e, t)) = &self.ensei {
            if slots.len() != self.output_cts() {
                return Err(KernelError::CiphertextCount {
                    what: "response",
                    expected: self.output_cts(),
                    actual: slots.len(),
                });
            }
            return ensei::finish(g, e, t, self.slots.p, slots);
        }
        if slots.len() != self.output_cts() {
            return Err(KernelError::CiphertextCount {
                what: "response",
                expected: self.output_cts(),
                actual: slots.len(),
            });
        }
        let per = g.per_ct();
        let s = g.shape.stride;
        let mut out = Vec::with_capacity(g.shape.c_o * g.h_out * g.w_out);
        for oc in 0..g.shape.c_o {
            let (ct, row, bl) = (oc / per, (oc % per) / g.c_n, oc % g.c_n);
            for y in 0..g.h_out {
                let (strip, ly) = ((y * s) / g.h1, (y * s) % g.h1);
                let v = &slots[strip * g.out_cts + ct];
                for x in 0..g.w_out {
                    let at = g.slot(row, bl, ly * g.wp + x * s);
                    out.push(*v.get(at).ok_or(KernelError::Shape {
                        what: "response slots",
                        expected: g.n,
                        actual: v.len(),
                    })?);
                }
            }
        }
        Ok(out)
    }
}

/// A slot method's output ciphertext `o` of one strip (`gazelle_in::output` and the like).
type OutputFn<B> = for<'a, 'b> fn(&'a ConvCtx<'b, B>, usize) -> Result<<B as Backend>::Ct>;

/// What a conv method's `compute` needs.
pub(crate) struct ConvCtx<'a, B: Backend> {
    pub(crate) b: &'a B,
    pub(crate) g: &'a ConvGeometry,
    pub(crate) rot: &'a Rotations,
    pub(crate) pts: &'a [B::PreparedPt],
    /// `pts` holds the plaintexts of one output ciphertext only, the one being computed
    /// (weights encoded per query, output by output), in `pt_index` order as output 0.
    pub(crate) one_output: bool,
    /// [input ct · versions + version][tap]
    pub(crate) rotated: &'a [Vec<B::Ct>],
}

impl<B: Backend> ConvCtx<'_, B> {
    /// The plaintext `pt_index(o, k, i, v, d)`.
    pub(crate) fn pt(&self, o: usize, k: usize, i: usize, v: usize, d: usize) -> &B::PreparedPt {
        let o = if self.one_output { 0 } else { o };
        &self.pts[self.g.pt_index(o, k, i, v, d)]
    }

    /// Σ over the given input ciphertexts, their versions and taps of
    /// pt(o, k, i, v, d) ⊙ rot(x_i^v, tap d): one fused product.
    pub(crate) fn products(&self, o: usize, k: usize, inputs: &[usize]) -> Result<B::Ct> {
        let g = self.g;
        let mut cts = Vec::new();
        let mut pts = Vec::new();
        for &i in inputs {
            for v in 0..g.versions() {
                for d in 0..g.taps() {
                    cts.push(&self.rotated[i * g.versions() + v][d]);
                    pts.push(self.pt(o, k, i, v, d));
                }
            }
        }
        Ok(self.b.dot(&cts, &pts)?)
    }
}

/// Responses computed per group (`groups[j][r]`: group j's response in round r, e.g. a
/// strip or a tile) in the order `compute` returns them: round-major, j within a round.
pub(super) fn interleave<T>(groups: Vec<Vec<T>>, rounds: usize) -> Result<Vec<T>> {
    let expected = groups.len() * rounds;
    let mut iters: Vec<std::vec::IntoIter<T>> = groups.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::with_capacity(expected);
    for _ in 0..rounds {
        for group in iters.iter_mut() {
            out.push(group.next().ok_or(KernelError::CiphertextCount {
                what: "response",
                expected,
                actual: out.len(),
            })?);
        }
    }
    Ok(out)
}

/// Checks signed weights against the centred range of Z_p.
pub(super) fn check_weights(w: &[i64], expected: usize, p: u64) -> Result<()> {
    if w.len() != expected {
        return Err(KernelError::Shape {
            what: "filters",
            expected,
            actual: w.len(),
        });
    }
    let half = (p / 2) as i64;
    if let Some((index, &value)) = w.iter().enumerate().find(|(_, v)| v.abs() > half) {
        return Err(KernelError::WeightRange { index, value, p });
    }
    Ok(())
}

/// Checks an input vector's length and that it is reduced mod p.
pub(super) fn check_input(x: &[u64], expected: usize, p: u64) -> Result<()> {
    if x.len() != expected {
        return Err(KernelError::Shape {
            what: "input image",
            expected,
            actual: x.len(),
        });
    }
    if let Some((index, &value)) = x.iter().enumerate().find(|(_, &v)| v >= p) {
        return Err(he::HeError::NotReduced { index, value, p }.into());
    }
    Ok(())
}
