//! Grouped and depthwise convolutions (ONNX `Conv` with `group` = G > 1).
//!
//! Output channel o reads the input channels g·(c_i/G) .. (g+1)·(c_i/G) with
//! g = o / (c_o/G); the weights are laid out [c_o, c_i/G, k_h, k_w] as in ONNX and
//! PyTorch. Two layouts:
//!
//! ## [`DepthwiseLayout`]: G = c_i, c_o = m·c_i (MobileNet's depthwise 3x3, multiplier m)
//! Every channel is zero padded to the hp x wp grid of the dense layout (module
//! [`super`]: padding `same`/`valid`, horizontal strips with halos when a padded channel
//! exceeds a row) and stored row-major in a block of hp·wp slots; c_n = ⌊S / (hp·wp)⌋
//! blocks per row of S = n/2 slots (no power of two: no block shift is ever needed, so
//! the blocks are packed tighter than in the dense layout), both rows used, so
//! I = ⌈c_i / (2 c_n)⌉ query ciphertexts per strip. Output channel c·m + j is computed
//! in the block of input channel c:
//!
//! y_j = Σ_d P_{j,d} ⊙ rot(x, Δ_d),  Δ_d = dy·wp + dx,
//!
//! where P_{j,d} holds, in each packed channel's block, that channel's tap-d weight at
//! the output positions (y·wp + x for the kept y, x) and zero elsewhere: the zeros mask
//! the positions where a rotated tap reads across a channel's border (the zero-padded
//! grid keeps every kept output's reads inside its own block). No rotation sums over
//! channels. Per input ciphertext: one hoisted decomposition, f − 1 rotations (f =
//! k_h·k_w taps; tap 0 is the identity), m fused sums of f ScMults.
//!
//! **Stride s > 1.** The stride-1 convolution is computed and only the positions
//! (y·s, x·s) are kept, so an output ciphertext would carry 1/s² useful slots. Instead,
//! P = min(s², I) input ciphertexts share one output ciphertext: input ciphertext i has
//! phase t = i mod P, (a, b) = (t / s, t mod s), and its outputs are written shifted to
//! (y·s + a)·wp + x·s + b, which interleaves the P phases into disjoint slots of the same
//! blocks. The shift costs nothing: it is folded into the tap rotations
//! (rot(x, Δ_d − a·wp − b), still f − 1 rotations per input ciphertext when
//! k_h, k_w ≥ s, since exactly one tap then lands on step 0) and into the plaintexts'
//! positions. The response shrinks by P: ⌈I/P⌉·m ciphertexts per strip instead of I·m
//! (32x32x32 stride 2: 2 instead of 6). The price is (k_h + s − 1)(k_w + s − 1) − 1
//! Galois keys instead of f − 1 (15 instead of 8 for 3x3, s = 2). The phases are used
//! only when the shifted positions fit the grid (⌈h1/s⌉·s ≤ hp and ⌈w1/s⌉·s ≤ wp, true
//! for every `same` shape with k ≥ s) and the keys fit the key budget; otherwise P = 1
//! and the response is as large as at stride 1 (s² times the useful slots).
//!
//! Cost per strip (I input ciphertexts, f taps, multiplier m, P phases):
//! DecPerm I, HstPerm I·(f − 1) (I·f for phases beyond the filter, k < s), Perm 0,
//! ScMult I·m·f, ⌈I/P⌉·m response ciphertexts. The dense convolution of the same
//! c_i → c_o shape needs c_i·c_o·f/c_n ScMults and its block-shift rotations.
//!
//! Measured (release, one thread, n = 8192; `cargo test --release -p kernels --test
//! grouped -- --ignored --nocapture measure`): 96x16x16 3x3 stride 1 takes 4 query and
//! 4 response ciphertexts, 32 rotations, 36 ScMults, about 60 ms, against 15x the
//! ScMults and 4.5x the rotations for GALA's dense kernel of the same 96 → 96 shape
//! (3x faster than the best dense method there). At 32x32x32 stride 1 the dense
//! Cheetah kernel (no rotation, 176 ScMults) is about as fast on the server but sends
//! 1.8x the bytes: a planner should price both ([`crate::estimate::estimate`]). The
//! rotation-free methods run per group through [`GroupedLayout`] (ENSEI, Cheetah: one
//! ScMult per channel) send a query and a response per channel: fewer products, several
//! times the bytes and more server time (`share_output` per response).
//!
//! ## [`GroupedLayout`]: any G
//! Each group is an independent dense convolution c_i/G → c_o/G planned with a
//! [`ConvMethod`] the caller picks (one [`ConvLayout`] serves every group: the shapes are
//! equal). The query is the concatenation of the groups' queries on their channel slices,
//! the response the concatenation of the groups' responses, and `finish` concatenates
//! the groups' outputs in channel order. Costs are G times the per-group layout's. It also
//! runs depthwise shapes (G = c_i: one query ciphertext per channel), which makes it the
//! fallback and the cross-check of [`DepthwiseLayout`].

use he::{Backend, Encoding, GaloisSpec, Params, SlotInfo};
use serde::{Deserialize, Serialize};

use super::{
    check_input, check_weights, ConvGeometry, ConvLayout, ConvMethod, ConvShape, EncodedFilters,
    Padding,
};
use crate::error::{KernelError, Result};
use crate::layer::LinearLayer;
use crate::noise::NoiseModel;
use crate::rotate::{Hoist, Rotations, DEFAULT_KEY_BUDGET};

/// A grouped convolution layer's shape (ONNX `Conv` with `group`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupedConvShape {
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
    /// Groups G: output channel o reads input channels g·(c_i/G) .. (g+1)·(c_i/G),
    /// g = o / (c_o/G).
    pub groups: usize,
}

impl GroupedConvShape {
    /// A depthwise shape: `channels` groups of one input and one output channel, a
    /// k x k filter.
    pub fn depthwise(
        channels: usize,
        h: usize,
        w: usize,
        k: usize,
        stride: usize,
        padding: Padding,
    ) -> Self {
        Self {
            c_i: channels,
            h,
            w,
            c_o: channels,
            k_h: k,
            k_w: k,
            stride,
            padding,
            groups: channels,
        }
    }
    /// Checks the shape: no zero dimension, G divides c_i and c_o, the filter fits the
    /// input under `valid` padding.
    pub fn validate(&self) -> Result<()> {
        for (what, v) in [
            ("input channels", self.c_i),
            ("height", self.h),
            ("width", self.w),
            ("output channels", self.c_o),
            ("filter height", self.k_h),
            ("filter width", self.k_w),
            ("stride", self.stride),
            ("groups", self.groups),
        ] {
            if v == 0 {
                return Err(KernelError::EmptyDimension { what });
            }
        }
        if !self.c_i.is_multiple_of(self.groups) || !self.c_o.is_multiple_of(self.groups) {
            return Err(KernelError::Groups {
                groups: self.groups,
                c_i: self.c_i,
                c_o: self.c_o,
            });
        }
        if self.padding == Padding::Valid {
            for (len, k) in [(self.h, self.k_h), (self.w, self.k_w)] {
                if k > len {
                    return Err(KernelError::Shape {
                        what: "filter larger than the input (valid padding)",
                        expected: len,
                        actual: k,
                    });
                }
            }
        }
        Ok(())
    }
    /// Input channels per group, c_i / G.
    pub fn group_in(&self) -> usize {
        self.c_i / self.groups.max(1)
    }
    /// Output channels per group, c_o / G.
    pub fn group_out(&self) -> usize {
        self.c_o / self.groups.max(1)
    }
    /// The dense convolution one group computes: c_i/G → c_o/G.
    pub fn group_shape(&self) -> ConvShape {
        ConvShape {
            c_i: self.group_in(),
            c_o: self.group_out(),
            ..self.dense_shape()
        }
    }
    /// The dense convolution of the same c_i → c_o size (what the layer would cost
    /// without groups).
    pub fn dense_shape(&self) -> ConvShape {
        ConvShape {
            c_i: self.c_i,
            h: self.h,
            w: self.w,
            c_o: self.c_o,
            k_h: self.k_h,
            k_w: self.k_w,
            stride: self.stride,
            padding: self.padding,
        }
    }
    /// Whether [`DepthwiseLayout`] runs it: G = c_i and c_o a multiple of c_i.
    pub fn is_depthwise(&self) -> bool {
        self.groups == self.c_i && self.c_i > 0 && self.c_o.is_multiple_of(self.c_i)
    }
    /// The channel multiplier c_o / c_i of a depthwise shape.
    pub fn multiplier(&self) -> usize {
        self.c_o / self.c_i.max(1)
    }
    /// Input length c_i·h·w.
    pub fn input_len(&self) -> usize {
        self.c_i * self.h * self.w
    }
    /// Number of weights c_o·(c_i/G)·k_h·k_w.
    pub fn weight_len(&self) -> usize {
        self.c_o * self.group_in() * self.k_h * self.k_w
    }
    /// Output shape (c_o, h_out, w_out) of a valid shape.
    pub fn output_shape(&self) -> Result<(usize, usize, usize)> {
        self.validate()?;
        let (h_out, w_out, _, _) = crate::reference::conv_output(&self.group_shape());
        Ok((self.c_o, h_out, w_out))
    }
}

fn check_count(what: &'static str, expected: usize, actual: usize) -> Result<()> {
    if expected != actual {
        return Err(KernelError::CiphertextCount {
            what,
            expected,
            actual,
        });
    }
    Ok(())
}

/// The slot geometry of a [`DepthwiseLayout`] (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepthwiseGeometry {
    /// The shape.
    pub shape: GroupedConvShape,
    /// Padding top, bottom, left, right.
    pub pad: [usize; 4],
    /// Padded grid height of one strip (its stride-1 output rows plus the k_h − 1 halo).
    pub hp: usize,
    /// Padded grid width (the row stride within a block).
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
    /// Rows used per ciphertext (2 real, 1 ideal).
    pub rows: usize,
    /// Horizontal strips (1 when a padded channel fits a row).
    pub strips: usize,
    /// Channels per row, ⌊S / (hp·wp)⌋.
    pub c_n: usize,
    /// Block stride hp·wp.
    pub block: usize,
    /// Query ciphertexts per strip.
    pub in_cts: usize,
    /// Channel multiplier m = c_o / c_i.
    pub multiplier: usize,
    /// Input ciphertexts sharing one output ciphertext (stride phases, 1 at stride 1).
    pub phases: usize,
    /// Response ciphertexts per strip, ⌈in_cts / phases⌉·m.
    pub out_cts: usize,
}

impl DepthwiseGeometry {
    fn new(shape: GroupedConvShape, slots: SlotInfo) -> Result<Self> {
        shape.validate()?;
        if !shape.is_depthwise() {
            return Err(KernelError::NotDepthwise {
                groups: shape.groups,
                c_i: shape.c_i,
                c_o: shape.c_o,
            });
        }
        // The dense layout's grid, strips and output size (its channel packing unused).
        let cg = ConvGeometry::new(
            ConvShape {
                c_o: shape.c_i,
                ..shape.dense_shape()
            },
            slots,
            false,
        )?;
        let block = cg.hp * cg.wp;
        let c_n = (cg.span / block).max(1);
        let in_cts = shape.c_i.div_ceil(c_n * cg.rows);
        let s = shape.stride;
        let fits = s > 1 && cg.h1.div_ceil(s) * s <= cg.hp && cg.w1.div_ceil(s) * s <= cg.wp;
        let phases = if fits { (s * s).min(in_cts) } else { 1 };
        let multiplier = shape.multiplier();
        Ok(Self {
            shape,
            pad: cg.pad,
            hp: cg.hp,
            wp: cg.wp,
            h1: cg.h1,
            w1: cg.w1,
            h_out: cg.h_out,
            w_out: cg.w_out,
            n: cg.n,
            span: cg.span,
            rows: cg.rows,
            strips: cg.strips,
            c_n,
            block,
            in_cts,
            multiplier,
            phases,
            out_cts: in_cts.div_ceil(phases) * multiplier,
        })
    }
    fn with_phases(mut self, phases: usize) -> Self {
        self.phases = phases;
        self.out_cts = self.in_cts.div_ceil(phases) * self.multiplier;
        self
    }
    /// Channels per ciphertext.
    pub fn per_ct(&self) -> usize {
        self.c_n * self.rows
    }
    /// Filter taps f = k_h·k_w.
    pub fn taps(&self) -> usize {
        self.shape.k_h * self.shape.k_w
    }
    /// The phase shift (a, b) of input ciphertext `i` (rows, columns).
    pub fn phase(&self, i: usize) -> (usize, usize) {
        let t = i % self.phases.max(1);
        (t / self.shape.stride, t % self.shape.stride)
    }
    /// The rotation steps of input ciphertext `i`: Δ_d − (a·wp + b) for every tap d.
    pub fn steps(&self, i: usize) -> Vec<i64> {
        let (a, b) = self.phase(i);
        let shift = (a * self.wp + b) as i64;
        (0..self.taps())
            .map(|d| ((d / self.shape.k_w) * self.wp + d % self.shape.k_w) as i64 - shift)
            .collect()
    }
    fn all_steps(&self) -> Vec<i64> {
        (0..self.phases.min(self.in_cts))
            .flat_map(|i| self.steps(i))
            .collect()
    }
    /// (ciphertext within a strip, slot of the block start) of input channel `c`.
    fn channel(&self, c: usize) -> (usize, usize) {
        let per = self.per_ct();
        let (row, bl) = ((c % per) / self.c_n, c % self.c_n);
        (c / per, row * self.span + bl * self.block)
    }
}

/// A depthwise convolution (G = c_i, c_o = m·c_i) planned for a slot layout: per input
/// ciphertext one hoisted decomposition, f − 1 rotations and m·f ScMults (module doc).
#[derive(Clone, Debug)]
pub struct DepthwiseLayout {
    geom: DepthwiseGeometry,
    rot: Rotations,
    slots: SlotInfo,
}

impl DepthwiseLayout {
    /// The layout with the default key budget.
    pub fn new(shape: GroupedConvShape, slots: SlotInfo) -> Result<Self> {
        Self::with_key_budget(shape, slots, Some(DEFAULT_KEY_BUDGET))
    }
    /// The layout with a key budget (`None`: one key per step). The stride phases are dropped
    /// when their keys would exceed the budget and the stride-1 taps' keys would not.
    pub fn with_key_budget(
        shape: GroupedConvShape,
        slots: SlotInfo,
        budget: Option<usize>,
    ) -> Result<Self> {
        let mut geom = DepthwiseGeometry::new(shape, slots)?;
        let mut rot = Rotations::new(geom.all_steps(), geom.span, budget);
        if rot.composed() && geom.phases > 1 {
            let single = geom.clone().with_phases(1);
            let r = Rotations::new(single.all_steps(), single.span, budget);
            if !r.composed() {
                geom = single;
                rot = r;
            }
        }
        Ok(Self { geom, rot, slots })
    }
    /// The shape.
    pub fn shape(&self) -> &GroupedConvShape {
        &self.geom.shape
    }
    /// The geometry.
    pub fn geometry(&self) -> &DepthwiseGeometry {
        &self.geom
    }
    /// Rotations and keys.
    pub fn rotations(&self) -> &Rotations {
        &self.rot
    }
    /// Prepared plaintexts the encoded filters hold (in_cts·m·f; n·L·16 bytes each).
    pub fn encoded_plaintexts(&self) -> usize {
        self.geom.in_cts * self.geom.multiplier * self.geom.taps()
    }
    /// Worst-case kernel noise bits: a sum of phases·f products of rotated fresh
    /// ciphertexts.
    pub fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        let m = m.with_hops(self.rot.max_hops());
        m.sum(
            m.mult(m.rotate(m.fresh)),
            self.geom.phases * self.geom.taps(),
        )
    }
    fn id(&self) -> String {
        format!(
            "depthwise {:?} n={} {:?} phases={}",
            self.geom.shape, self.slots.n, self.slots.layout, self.geom.phases
        )
    }
}

impl LinearLayer for DepthwiseLayout {
    type Encoded<B: Backend> = EncodedFilters<B>;
    fn method_name(&self) -> String {
        "depthwise".into()
    }
    fn galois(&self) -> GaloisSpec {
        // Channels never leave their row: no column rotation.
        self.rot.galois()
    }
    fn query_cts(&self) -> usize {
        self.geom.in_cts * self.geom.strips
    }
    fn output_cts(&self) -> usize {
        self.geom.out_cts * self.geom.strips
    }
    fn input_len(&self) -> usize {
        self.geom.shape.input_len()
    }
    fn weight_len(&self) -> usize {
        self.geom.shape.weight_len()
    }
    fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        DepthwiseLayout::kernel_noise(self, m)
    }
    fn flood_bits(&self, params: &Params) -> Result<u32> {
        let m = self.query_model(params);
        let k = self.kernel_noise(&m);
        if m.affords(k) {
            Ok(m.flood_bits(k))
        } else {
            Err(KernelError::NoiseBudget {
                method: self.method_name(),
                params: params.name().to_string(),
                needed: m.needed_bits(k),
                available: m.log_q.floor() as u32,
                suggestion: "preset n8192".into(),
            })
        }
    }
    /// Filters as c_o x 1 x k_h x k_w signed integers (output channel c·m + j reads
    /// input channel c).
    fn encode_weights<B: Backend>(&self, b: &B, f: &[i64]) -> Result<EncodedFilters<B>> {
        let g = &self.geom;
        let p = self.slots.p;
        check_weights(f, g.shape.weight_len(), p)?;
        let (taps, m, s) = (g.taps(), g.multiplier, g.shape.stride);
        let groups = crate::par::map(0..g.in_cts, |i| {
            let mut pts = Vec::with_capacity(m * taps);
            let (a, bb) = g.phase(i);
            for j in 0..m {
                for d in 0..taps {
                    if !b.carries_data() {
                        pts.push(b.prepare(&[])?);
                        continue;
                    }
                    let mut vals = vec![0u64; g.n];
                    for k in 0..g.per_ct() {
                        let c = i * g.per_ct() + k;
                        if c >= g.shape.c_i {
                            break;
                        }
                        let (_, base) = g.channel(c);
                        let wv = f[(c * m + j) * taps + d].rem_euclid(p as i64) as u64;
                        for y in (0..g.h1).step_by(s) {
                            for x in (0..g.w1).step_by(s) {
                                vals[base + (y + a) * g.wp + x + bb] = wv;
                            }
                        }
                    }
                    pts.push(b.prepare(&vals)?);
                }
            }
            Ok(pts)
        })?;
        Ok(EncodedFilters {
            layout: self.id(),
            pts: groups.into_iter().flatten().collect(),
        })
    }
    fn query_values(&self, x: &[u64]) -> Result<Vec<Vec<u64>>> {
        let g = &self.geom;
        let sh = g.shape;
        check_input(x, sh.input_len(), self.slots.p)?;
        let mut out = Vec::with_capacity(self.query_cts());
        for strip in 0..g.strips {
            // Input rows of this strip: padded rows [start, start + hp), halo included.
            let start = strip * g.h1;
            let local = |y: usize| (y + g.pad[0]).checked_sub(start).filter(|&l| l < g.hp);
            for i in 0..g.in_cts {
                let mut vals = vec![0u64; g.n];
                for k in 0..g.per_ct() {
                    let c = i * g.per_ct() + k;
                    if c >= sh.c_i {
                        break;
                    }
                    let (_, base) = g.channel(c);
                    for y in 0..sh.h {
                        let Some(ly) = local(y) else { continue };
                        let src = (c * sh.h + y) * sh.w;
                        let dst = base + ly * g.wp + g.pad[2];
                        vals[dst..dst + sh.w].copy_from_slice(&x[src..src + sh.w]);
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
        check_count("query", self.query_cts(), q.len())?;
        if m.pts.len() != self.encoded_plaintexts() {
            return Err(KernelError::Shape {
                what: "encoded depthwise filters",
                expected: self.encoded_plaintexts(),
                actual: m.pts.len(),
            });
        }
        let g = &self.geom;
        let (taps, mult, phases) = (g.taps(), g.multiplier, g.phases.max(1));
        let mut out = Vec::with_capacity(self.output_cts());
        for qs in q.chunks(g.in_cts.max(1)) {
            // Output group gi: the input ciphertexts gi·P .. (gi+1)·P, one per phase.
            let parts = crate::par::map(0..g.in_cts.div_ceil(phases), |gi| {
                let inputs: Vec<usize> = (gi * phases..((gi + 1) * phases).min(g.in_cts)).collect();
                let rotated = inputs
                    .iter()
                    .map(|&i| {
                        let mut h = Hoist::new(&qs[i]);
                        self.rot.rotate_many(b, &mut h, &g.steps(i))
                    })
                    .collect::<Result<Vec<_>>>()?;
                (0..mult)
                    .map(|j| {
                        let mut cts = Vec::with_capacity(inputs.len() * taps);
                        let mut pts = Vec::with_capacity(inputs.len() * taps);
                        for (r, &i) in rotated.iter().zip(&inputs) {
                            for (d, ct) in r.iter().enumerate() {
                                cts.push(ct);
                                pts.push(&m.pts[(i * mult + j) * taps + d]);
                            }
                        }
                        Ok(b.dot(&cts, &pts)?)
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            out.extend(parts.into_iter().flatten());
        }
        Ok(out)
    }
    fn finish(&self, slots: &[Vec<u64>]) -> Result<Vec<u64>> {
        let g = &self.geom;
        check_count("response", self.output_cts(), slots.len())?;
        let (s, mult, phases) = (g.shape.stride, g.multiplier, g.phases.max(1));
        let mut out = Vec::with_capacity(g.shape.c_o * g.h_out * g.w_out);
        for o in 0..g.shape.c_o {
            let (c, j) = (o / mult, o % mult);
            let (i, base) = g.channel(c);
            let (a, b) = g.phase(i);
            let ct = (i / phases) * mult + j;
            for y in 0..g.h_out {
                let (strip, ly) = ((y * s) / g.h1, (y * s) % g.h1);
                let v = &slots[strip * g.out_cts + ct];
                for x in 0..g.w_out {
                    let at = base + (ly + a) * g.wp + x * s + b;
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

/// Encoded filters of a [`GroupedLayout`]: one encoding per group.
pub struct EncodedGroups<B: Backend> {
    layout: String,
    groups: Vec<EncodedFilters<B>>,
}

/// A grouped convolution: G independent dense convolutions c_i/G → c_o/G, each run
/// with one [`ConvLayout`] of the caller's method (module doc).
#[derive(Clone, Debug)]
pub struct GroupedLayout {
    shape: GroupedConvShape,
    inner: ConvLayout,
}

impl GroupedLayout {
    /// The layout with the default key budget.
    pub fn new(method: ConvMethod, shape: GroupedConvShape, slots: SlotInfo) -> Result<Self> {
        Self::with_key_budget(method, shape, slots, Some(DEFAULT_KEY_BUDGET))
    }
    /// The layout with a key budget (`None`: one key per step).
    pub fn with_key_budget(
        method: ConvMethod,
        shape: GroupedConvShape,
        slots: SlotInfo,
        budget: Option<usize>,
    ) -> Result<Self> {
        shape.validate()?;
        let inner = ConvLayout::with_key_budget(method, shape.group_shape(), slots, budget)?;
        Ok(Self { shape, inner })
    }
    /// The shape.
    pub fn shape(&self) -> &GroupedConvShape {
        &self.shape
    }
    /// The method every group runs.
    pub fn method(&self) -> ConvMethod {
        self.inner.method()
    }
    /// The layout of one group (c_i/G → c_o/G).
    pub fn group_plan(&self) -> &ConvLayout {
        &self.inner
    }
    /// Prepared plaintexts the encoded filters hold (G times one group's).
    pub fn encoded_plaintexts(&self) -> usize {
        self.shape.groups * self.inner.encoded_plaintexts()
    }
    fn id(&self) -> String {
        format!("grouped {:?} {}", self.shape, self.inner.id())
    }
}

impl LinearLayer for GroupedLayout {
    type Encoded<B: Backend> = EncodedGroups<B>;
    fn method_name(&self) -> String {
        format!("grouped:{}", self.inner.method())
    }
    fn galois(&self) -> GaloisSpec {
        ConvLayout::galois(&self.inner)
    }
    fn query_cts(&self) -> usize {
        self.shape.groups * self.inner.query_cts()
    }
    fn output_cts(&self) -> usize {
        self.shape.groups * self.inner.output_cts()
    }
    fn input_len(&self) -> usize {
        self.shape.input_len()
    }
    fn weight_len(&self) -> usize {
        self.shape.weight_len()
    }
    fn query_level(&self, params: &Params) -> usize {
        self.inner.query_level(params)
    }
    fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        self.inner.kernel_noise(m)
    }
    fn flood_bits(&self, params: &Params) -> Result<u32> {
        // Every group is one independent run of the group layout: the same noise.
        self.inner.flood_bits(params).map_err(|e| match e {
            KernelError::NoiseBudget {
                params,
                needed,
                available,
                suggestion,
                ..
            } => KernelError::NoiseBudget {
                method: self.method_name(),
                params,
                needed,
                available,
                suggestion,
            },
            e => e,
        })
    }
    /// Filters as c_o x c_i/G x k_h x k_w signed integers (ONNX / PyTorch layout).
    fn encode_weights<B: Backend>(&self, b: &B, f: &[i64]) -> Result<EncodedGroups<B>> {
        check_weights(f, self.shape.weight_len(), b.slots().p)?;
        let per = self.shape.weight_len() / self.shape.groups;
        let groups = f
            .chunks(per.max(1))
            .map(|fg| self.inner.encode(b, fg))
            .collect::<Result<Vec<_>>>()?;
        Ok(EncodedGroups {
            layout: self.id(),
            groups,
        })
    }
    fn query_values(&self, x: &[u64]) -> Result<Vec<Vec<u64>>> {
        check_input(x, self.shape.input_len(), self.inner.slots.p)?;
        let per = self.shape.input_len() / self.shape.groups;
        let mut out = Vec::with_capacity(self.query_cts());
        for xg in x.chunks(per.max(1)) {
            out.extend(self.inner.query_values(xg)?);
        }
        Ok(out)
    }
    fn compute<B: Backend>(&self, b: &B, m: &EncodedGroups<B>, q: &[B::Ct]) -> Result<Vec<B::Ct>> {
        if m.layout != self.id() || m.groups.len() != self.shape.groups {
            return Err(KernelError::PlanMismatch {
                expected: m.layout.clone(),
                actual: self.id(),
            });
        }
        check_count("query", self.query_cts(), q.len())?;
        let per = self.inner.query_cts();
        let parts = crate::par::map(0..self.shape.groups, |g| {
            self.inner
                .compute(b, &m.groups[g], &q[g * per..(g + 1) * per])
        })?;
        Ok(parts.into_iter().flatten().collect())
    }
    // The response format of the group layout (Cheetah: coefficients, and only those that
    // its `finish` reads), per group.
    fn encoding(&self) -> Encoding {
        LinearLayer::encoding(&self.inner)
    }
    fn response_coeffs(&self, index: usize) -> Option<Vec<std::ops::Range<usize>>> {
        self.inner
            .response_coeffs(index % self.inner.output_cts().max(1))
    }
    fn finish(&self, slots: &[Vec<u64>]) -> Result<Vec<u64>> {
        check_count("response", self.output_cts(), slots.len())?;
        let per = self.inner.output_cts();
        let mut out = Vec::new();
        for sg in slots.chunks(per.max(1)) {
            out.extend(self.inner.finish(sg)?);
        }
        Ok(out)
    }
}
