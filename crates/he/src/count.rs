//! Counting: a wrapper that forwards every operation to any backend and counts it (like
//! swanky's `Informer`), and `Shape`, a backend that carries only shapes. `Count` =
//! `Counting<Shape>` costs whole networks with millions of operations in milliseconds;
//! `Counting<Bfv>` and `Counting<Sim>` count the same kernel identically by construction.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::backend::{check_step, Backend, Dir, GaloisSpec, Layout, OpCounts, SlotInfo};
use crate::error::{HeError, Result};
use crate::params::Params;
use crate::rounding::Rounding;

/// Forwards to `B` and counts every operation.
#[derive(Debug)]
pub struct Counting<B> {
    inner: B,
    counts: Mutex<OpCounts>,
}

impl<B: Backend> Counting<B> {
    /// Wraps a backend with zeroed counters.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            counts: Mutex::new(OpCounts::default()),
        }
    }
    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }
    /// The counts so far.
    pub fn counts(&self) -> OpCounts {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Returns the counts so far and zeroes them.
    pub fn take(&self) -> OpCounts {
        std::mem::take(&mut *self.counts.lock().unwrap_or_else(|e| e.into_inner()))
    }
    fn bump(&self, f: impl FnOnce(&mut OpCounts)) {
        f(&mut self.counts.lock().unwrap_or_else(|e| e.into_inner()));
    }
    /// A switch down `dropped` levels: per level one ModSwitch, and both polynomials out
    /// of and back into the NTT domain.
    fn bump_switch(&self, dropped: u64) {
        self.bump(|c| {
            c.mod_switch += dropped;
            c.intt += 2 * dropped;
            c.ntt += 2 * dropped
        });
    }
    /// A fused sum of `k` products: k ScMult and k − 1 (fused) additions.
    fn bump_dot(&self, k: u64) {
        self.bump(|c| {
            c.sc_mult += k;
            c.add += k - 1;
            c.fused_add += k - 1
        });
    }
    /// One [`Backend::dot_encoded`] as the default runs it: `terms` prepares, then one
    /// fused sum per output.
    fn bump_dot_encoded<C>(&self, terms: usize, cts: &[Vec<C>]) {
        self.bump(|c| c.ntt += terms as u64);
        for c in cts {
            self.bump_dot(c.len() as u64);
        }
    }
    /// RNS moduli at a level (1 in the ideal model).
    fn moduli_at(&self, level: usize) -> u64 {
        self.inner
            .params()
            .map(|p| (p.levels() - level.min(p.levels() - 1)) as u64)
            .unwrap_or(1)
    }
}

impl<B: Backend> Backend for Counting<B> {
    type Ct = B::Ct;
    type Pt = B::Pt;
    type PreparedPt = B::PreparedPt;
    type Hoisted = B::Hoisted;

    fn slots(&self) -> SlotInfo {
        self.inner.slots()
    }
    fn params(&self) -> Option<&Params> {
        self.inner.params()
    }
    fn galois(&self) -> &GaloisSpec {
        self.inner.galois()
    }
    fn carries_data(&self) -> bool {
        self.inner.carries_data()
    }
    fn encode_at(&self, values: &[u64], level: usize) -> Result<Self::Pt> {
        let r = self.inner.encode_at(values, level)?;
        self.bump(|c| c.ntt += 1);
        Ok(r)
    }
    fn prepare(&self, values: &[u64]) -> Result<Self::PreparedPt> {
        let r = self.inner.prepare(values)?;
        self.bump(|c| c.ntt += 1);
        Ok(r)
    }
    fn prepare_row_constants(&self, rows: [u64; 2]) -> Result<Self::PreparedPt> {
        let r = self.inner.prepare_row_constants(rows)?;
        self.bump(|c| c.row_constants += 1);
        Ok(r)
    }
    fn prepared_to_bytes(&self, pt: &Self::PreparedPt) -> Result<Vec<u8>> {
        self.inner.prepared_to_bytes(pt)
    }
    fn prepared_from_bytes(&self, bytes: &[u8]) -> Result<Self::PreparedPt> {
        self.inner.prepared_from_bytes(bytes)
    }
    fn encrypt_sym(&self, pt: &Self::Pt) -> Result<Self::Ct> {
        let r = self.inner.encrypt_sym(pt)?;
        self.bump(|c| c.encrypt += 1);
        Ok(r)
    }
    fn encrypt_pk(&self, pt: &Self::Pt) -> Result<Self::Ct> {
        let r = self.inner.encrypt_pk(pt)?;
        self.bump(|c| c.encrypt += 1);
        Ok(r)
    }
    fn encrypt_zero_flood_at(&self, bits: u32, level: usize) -> Result<Self::Ct> {
        let r = self.inner.encrypt_zero_flood_at(bits, level)?;
        self.bump(|c| c.encrypt += 1);
        Ok(r)
    }
    fn decrypt(&self, ct: &Self::Ct) -> Result<Vec<u64>> {
        let r = self.inner.decrypt(ct)?;
        self.bump(|c| {
            c.decrypt += 1;
            c.intt += 1
        });
        Ok(r)
    }
    fn noise_budget(&self, ct: &Self::Ct) -> Result<Option<u32>> {
        self.inner.noise_budget(ct)
    }
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        let r = self.inner.add(a, b)?;
        self.bump(|c| c.add += 1);
        Ok(r)
    }
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        let r = self.inner.sub(a, b)?;
        self.bump(|c| c.add += 1);
        Ok(r)
    }
    fn add_plain(&self, a: &Self::Ct, b: &Self::Pt) -> Result<Self::Ct> {
        let r = self.inner.add_plain(a, b)?;
        self.bump(|c| c.add += 1);
        Ok(r)
    }
    fn sub_plain(&self, a: &Self::Ct, b: &Self::Pt) -> Result<Self::Ct> {
        let r = self.inner.sub_plain(a, b)?;
        self.bump(|c| c.add += 1);
        Ok(r)
    }
    fn negate(&self, a: &Self::Ct) -> Result<Self::Ct> {
        let r = self.inner.negate(a)?;
        self.bump(|c| c.add += 1);
        Ok(r)
    }
    fn mul_plain(&self, a: &Self::Ct, b: &Self::PreparedPt) -> Result<Self::Ct> {
        let r = self.inner.mul_plain(a, b)?;
        self.bump(|c| c.sc_mult += 1);
        Ok(r)
    }
    fn dot(&self, cts: &[&Self::Ct], pts: &[&Self::PreparedPt]) -> Result<Self::Ct> {
        let r = self.inner.dot(cts, pts)?;
        self.bump_dot(cts.len() as u64);
        Ok(r)
    }
    fn encode_coeffs_at(&self, values: &[u64], level: usize) -> Result<Self::Pt> {
        let r = self.inner.encode_coeffs_at(values, level)?;
        self.bump(|c| c.ntt += 1);
        Ok(r)
    }
    fn prepare_coeffs_at(&self, values: &[u64], level: usize) -> Result<Self::PreparedPt> {
        let r = self.inner.prepare_coeffs_at(values, level)?;
        self.bump(|c| c.ntt += 1);
        Ok(r)
    }
    fn prepare_coeffs_strided(
        &self,
        values: &[u64],
        level: usize,
        stride_log2: u32,
    ) -> Result<Self::PreparedPt> {
        let r = self
            .inner
            .prepare_coeffs_strided(values, level, stride_log2)?;
        self.bump(|c| c.ntt += 1);
        Ok(r)
    }
    fn dot_coeffs(&self, cts: &[&Self::Ct], pts: &[&Self::PreparedPt]) -> Result<Self::Ct> {
        let r = self.inner.dot_coeffs(cts, pts)?;
        self.bump_dot(cts.len() as u64);
        Ok(r)
    }
    fn dot_encoded(
        &self,
        encoding: crate::Encoding,
        level: usize,
        terms: usize,
        fill: &(dyn Fn(usize, &mut [u64]) + Sync),
        cts: &[Vec<&Self::Ct>],
    ) -> Result<Vec<Self::Ct>> {
        let r = self.inner.dot_encoded(encoding, level, terms, fill, cts)?;
        self.bump_dot_encoded(terms, cts);
        Ok(r)
    }
    fn dot_encoded_groups(
        &self,
        encoding: crate::Encoding,
        level: usize,
        stride_log2: u32,
        groups: usize,
        terms: usize,
        fill: &(dyn Fn(usize, usize, &mut [u64]) + Sync),
        cts: &[Vec<&Self::Ct>],
    ) -> Result<Vec<Vec<Self::Ct>>> {
        let r = self.inner.dot_encoded_groups(
            encoding,
            level,
            stride_log2,
            groups,
            terms,
            fill,
            cts,
        )?;
        // As the default: one `dot_encoded` per group.
        for _ in 0..groups {
            self.bump_dot_encoded(terms, cts);
        }
        Ok(r)
    }
    fn decrypt_coeffs(&self, ct: &Self::Ct) -> Result<Vec<u64>> {
        let r = self.inner.decrypt_coeffs(ct)?;
        self.bump(|c| {
            c.decrypt += 1;
            c.intt += 1
        });
        Ok(r)
    }
    fn select_coeffs(&self, a: &Self::Ct, keep: &[std::ops::Range<usize>]) -> Result<Self::Ct> {
        let r = self.inner.select_coeffs(a, keep)?;
        // c0 to power basis and back (the backend keeps ciphertexts in NTT form).
        self.bump(|c| {
            c.intt += 1;
            c.ntt += 1
        });
        Ok(r)
    }
    fn round(&self, a: &Self::Ct, r: Rounding) -> Result<Self::Ct> {
        let out = self.inner.round(a, r)?;
        // each rounded polynomial to power basis and back
        let parts = u64::from(!r.c0.is_none()) + u64::from(!r.c1.is_none());
        self.bump(|c| {
            c.intt += parts;
            c.ntt += parts
        });
        Ok(out)
    }
    fn rotate_rows(&self, a: &Self::Ct, step: i64) -> Result<Self::Ct> {
        let r = self.inner.rotate_rows(a, step)?;
        if step != 0 {
            let l = self.moduli_at(self.inner.level(a));
            self.bump(|c| {
                c.perm += 1;
                c.intt += 1;
                c.ntt += l
            });
        }
        Ok(r)
    }
    fn rotate_columns(&self, a: &Self::Ct) -> Result<Self::Ct> {
        let r = self.inner.rotate_columns(a)?;
        let l = self.moduli_at(self.inner.level(a));
        self.bump(|c| {
            c.perm += 1;
            c.intt += 1;
            c.ntt += l
        });
        Ok(r)
    }
    fn hoist(&self, a: &Self::Ct) -> Result<Self::Hoisted> {
        let r = self.inner.hoist(a)?;
        let l = self.moduli_at(self.inner.level(a));
        self.bump(|c| {
            c.dec_perm += 1;
            c.intt += 1;
            c.ntt += l
        });
        Ok(r)
    }
    fn rotate_hoisted(&self, h: &Self::Hoisted, step: i64) -> Result<Self::Ct> {
        let r = self.inner.rotate_hoisted(h, step)?;
        if step != 0 {
            self.bump(|c| c.hst_perm += 1);
        }
        Ok(r)
    }
    fn switch_to_last(&self, a: &Self::Ct) -> Result<Self::Ct> {
        let from = self.inner.level(a);
        let r = self.inner.switch_to_last(a)?;
        self.bump_switch((self.inner.level(&r) - from) as u64);
        Ok(r)
    }
    fn mask_and_switch(
        &self,
        ct: &Self::Ct,
        mask: &[u64],
        encoding: crate::Encoding,
        zero: &Self::Ct,
    ) -> Result<Self::Ct> {
        let from = self.inner.level(ct);
        let r = self.inner.mask_and_switch(ct, mask, encoding, zero)?;
        // what the default's encode_as_at, add_plain, add and switch_to_last count
        self.bump(|c| {
            c.ntt += 1;
            c.add += 2
        });
        self.bump_switch((self.inner.level(&r) - from) as u64);
        Ok(r)
    }
    fn level(&self, a: &Self::Ct) -> usize {
        self.inner.level(a)
    }
    fn is_seeded(&self, a: &Self::Ct) -> bool {
        self.inner.is_seeded(a)
    }
    fn serialize(&self, a: &Self::Ct) -> Result<Vec<u8>> {
        self.inner.serialize(a)
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Ct> {
        self.inner.deserialize(bytes)
    }
    fn wire_size(&self, a: &Self::Ct) -> usize {
        self.inner.wire_size(a)
    }
    fn transfer(&self, dir: Dir, a: &Self::Ct) -> Result<Self::Ct> {
        let bytes = self.inner.wire_size(a) as u64;
        let r = self.inner.transfer(dir, a)?;
        self.bump(|c| match dir {
            Dir::Up => c.bytes_up += bytes,
            Dir::Down => c.bytes_down += bytes,
        });
        Ok(r)
    }
}

/// A ciphertext of the data-free backend: its level, whether it is seeded, and for a
/// selected ciphertext its (runs, kept coefficients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapeCt {
    level: usize,
    seeded: bool,
    selected: Option<(u32, u32)>,
    rounding: Rounding,
}

/// A backend that carries no data, only shapes; it enforces the same layout, key and
/// level rules as the others. Decryption yields zeros.
#[derive(Clone, Debug)]
pub struct Shape {
    info: SlotInfo,
    params: Option<Params>,
    levels: usize,
    galois: GaloisSpec,
    keys: BTreeSet<usize>,
}

/// The data-free counting backend.
pub type Count = Counting<Shape>;

impl Count {
    /// Counts real BFV with these parameters (2 x n/2 layout, exact byte sizes).
    pub fn real(params: &Params, galois: GaloisSpec) -> Self {
        Counting::new(Shape::new(params, galois))
    }
    /// Counts in the papers' ideal model: one cyclic vector of n slots, a key per step.
    pub fn ideal(n: usize, p: u64, galois: GaloisSpec) -> Self {
        Counting::new(Shape::ideal(n, p, galois))
    }
}

impl Shape {
    /// Shapes of real BFV with these parameters.
    pub fn new(params: &Params, galois: GaloisSpec) -> Self {
        let info = SlotInfo {
            n: params.n(),
            p: params.p(),
            layout: Layout::TwoRows,
        };
        let keys = galois.normalized(info.span());
        Self {
            info,
            params: Some(params.clone()),
            levels: params.levels(),
            galois,
            keys,
        }
    }
    /// Shapes in the ideal cyclic model.
    pub fn ideal(n: usize, p: u64, galois: GaloisSpec) -> Self {
        let info = SlotInfo {
            n,
            p,
            layout: Layout::Cyclic,
        };
        let keys = galois.normalized(n);
        Self {
            info,
            params: None,
            levels: 2,
            galois,
            keys,
        }
    }
    fn whole(a: &ShapeCt, operation: &'static str) -> Result<()> {
        match a.selected {
            Some(_) => Err(HeError::Selected { operation }),
            None => Ok(()),
        }
    }
    fn same(a: &ShapeCt, b: &ShapeCt) -> Result<ShapeCt> {
        Self::whole(a, "add")?;
        Self::whole(b, "add")?;
        if a.level != b.level {
            return Err(HeError::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            selected: None,
            level: a.level,
            seeded: false,
        })
    }
    fn top(a: &ShapeCt) -> Result<ShapeCt> {
        Self::whole(a, "an operation at the top level")?;
        if a.level != 0 {
            return Err(HeError::WrongLevel {
                expected: 0,
                actual: a.level,
            });
        }
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            selected: None,
            level: 0,
            seeded: false,
        })
    }
    fn at_pt_level(a: &ShapeCt, pt: usize) -> Result<ShapeCt> {
        Self::whole(a, "a plaintext addition")?;
        if a.level != pt {
            return Err(HeError::LevelMismatch {
                left: a.level,
                right: pt,
            });
        }
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            selected: None,
            level: a.level,
            seeded: false,
        })
    }
    fn check_level(&self, level: usize) -> Result<usize> {
        crate::backend::check_level(level, self.levels)
    }
    const FRESH: ShapeCt = ShapeCt {
        rounding: Rounding::NONE,
        selected: None,
        level: 0,
        seeded: false,
    };
}

impl Backend for Shape {
    type Ct = ShapeCt;
    /// A plaintext is its level.
    type Pt = usize;
    /// A prepared plaintext is its level.
    type PreparedPt = usize;
    type Hoisted = ShapeCt;

    fn slots(&self) -> SlotInfo {
        self.info
    }
    fn params(&self) -> Option<&Params> {
        self.params.as_ref()
    }
    fn galois(&self) -> &GaloisSpec {
        &self.galois
    }
    fn carries_data(&self) -> bool {
        false
    }
    fn encode_at(&self, values: &[u64], level: usize) -> Result<usize> {
        self.check_values(values)?;
        self.check_level(level)
    }
    fn prepare(&self, values: &[u64]) -> Result<usize> {
        self.check_values(values)?;
        Ok(0)
    }
    fn prepare_row_constants(&self, rows: [u64; 2]) -> Result<usize> {
        self.check_values(&rows)?;
        Ok(0)
    }
    fn prepared_to_bytes(&self, _pt: &usize) -> Result<Vec<u8>> {
        Ok(Vec::new())
    }
    fn prepared_from_bytes(&self, bytes: &[u8]) -> Result<usize> {
        if bytes.is_empty() {
            Ok(0)
        } else {
            Err(HeError::Malformed {
                what: "shape plaintext",
                detail: format!("{} bytes", bytes.len()),
            })
        }
    }
    fn encrypt_sym(&self, pt: &usize) -> Result<ShapeCt> {
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            selected: None,
            level: *pt,
            seeded: true,
        })
    }
    fn encrypt_pk(&self, pt: &usize) -> Result<ShapeCt> {
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            level: *pt,
            ..Self::FRESH
        })
    }
    fn encrypt_zero_flood_at(&self, _bits: u32, level: usize) -> Result<ShapeCt> {
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            level: self.check_level(level)?,
            ..Self::FRESH
        })
    }
    fn decrypt(&self, ct: &ShapeCt) -> Result<Vec<u64>> {
        Self::whole(ct, "slot decryption")?;
        Ok(vec![0; self.info.n])
    }
    fn noise_budget(&self, ct: &ShapeCt) -> Result<Option<u32>> {
        let _ = ct; // no noise here; a selected ciphertext has none defined either
        Ok(None)
    }
    fn add(&self, a: &ShapeCt, b: &ShapeCt) -> Result<ShapeCt> {
        Self::same(a, b)
    }
    fn sub(&self, a: &ShapeCt, b: &ShapeCt) -> Result<ShapeCt> {
        Self::same(a, b)
    }
    fn add_plain(&self, a: &ShapeCt, b: &usize) -> Result<ShapeCt> {
        Self::at_pt_level(a, *b)
    }
    fn sub_plain(&self, a: &ShapeCt, b: &usize) -> Result<ShapeCt> {
        Self::at_pt_level(a, *b)
    }
    fn negate(&self, a: &ShapeCt) -> Result<ShapeCt> {
        Self::whole(a, "negate")?;
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            selected: None,
            level: a.level,
            seeded: false,
        })
    }
    fn mul_plain(&self, a: &ShapeCt, b: &usize) -> Result<ShapeCt> {
        self.dot(&[a], &[b])
    }
    fn dot(&self, cts: &[&ShapeCt], pts: &[&usize]) -> Result<ShapeCt> {
        if cts.is_empty() || pts.is_empty() {
            return Err(HeError::Empty { what: "dot" });
        }
        if cts.len() != pts.len() {
            return Err(HeError::WrongLength {
                expected: cts.len(),
                actual: pts.len(),
            });
        }
        let level = cts[0].level;
        for (c, &&l) in cts.iter().zip(pts) {
            Self::whole(c, "a fused product")?;
            for right in [c.level, l] {
                if right != level {
                    return Err(HeError::LevelMismatch { left: level, right });
                }
            }
        }
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            level,
            ..Self::FRESH
        })
    }
    fn encode_coeffs_at(&self, values: &[u64], level: usize) -> Result<usize> {
        self.check_values(values)?;
        self.check_level(level)
    }
    fn prepare_coeffs_at(&self, values: &[u64], level: usize) -> Result<usize> {
        self.check_values(values)?;
        self.check_level(level)
    }
    fn dot_coeffs(&self, cts: &[&ShapeCt], pts: &[&usize]) -> Result<ShapeCt> {
        self.dot(cts, pts)
    }
    fn decrypt_coeffs(&self, _ct: &ShapeCt) -> Result<Vec<u64>> {
        Ok(vec![0; self.info.n])
    }
    fn select_coeffs(&self, a: &ShapeCt, keep: &[std::ops::Range<usize>]) -> Result<ShapeCt> {
        Self::whole(a, "select_coeffs")?;
        let kept = crate::backend::check_runs(keep, self.info.n)?;
        Ok(ShapeCt {
            rounding: a.rounding,
            level: a.level,
            seeded: false,
            selected: Some((keep.len() as u32, kept as u32)),
        })
    }
    fn round(&self, a: &ShapeCt, r: Rounding) -> Result<ShapeCt> {
        if let Some(p) = &self.params {
            crate::rounding::check_ct(p, a.level, a.seeded, a.rounding, r)?;
        }
        Ok(ShapeCt { rounding: r, ..*a })
    }
    fn wire_size(&self, a: &ShapeCt) -> usize {
        self.params.as_ref().map_or(0, |p| {
            p.rounded_ct_wire_size(
                a.level,
                a.seeded,
                a.selected.map(|(r, k)| (r as usize, k as usize)),
                a.rounding,
            )
        })
    }
    fn rotate_rows(&self, a: &ShapeCt, step: i64) -> Result<ShapeCt> {
        Self::whole(a, "a slot rotation")?;
        check_step(step, self.info.span(), &self.keys, &self.galois)?;
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            selected: None,
            level: a.level,
            seeded: false,
        })
    }
    fn rotate_columns(&self, a: &ShapeCt) -> Result<ShapeCt> {
        Self::whole(a, "a slot rotation")?;
        if self.info.layout != Layout::TwoRows || !self.galois.column {
            return Err(HeError::UndeclaredColumnRotation);
        }
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            selected: None,
            level: a.level,
            seeded: false,
        })
    }
    fn hoist(&self, a: &ShapeCt) -> Result<ShapeCt> {
        Self::top(a)
    }
    fn rotate_hoisted(&self, h: &ShapeCt, step: i64) -> Result<ShapeCt> {
        self.rotate_rows(h, step)
    }
    fn switch_to_last(&self, a: &ShapeCt) -> Result<ShapeCt> {
        Self::whole(a, "switch_to_last")?;
        Ok(ShapeCt {
            rounding: Rounding::NONE,
            selected: None,
            level: self.levels - 1,
            seeded: false,
        })
    }
    fn level(&self, a: &ShapeCt) -> usize {
        a.level
    }
    fn is_seeded(&self, a: &ShapeCt) -> bool {
        a.seeded
    }
    fn serialize(&self, a: &ShapeCt) -> Result<Vec<u8>> {
        let r = a.rounding;
        let mut out = vec![a.level as u8, u8::from(a.seeded)];
        out.extend([r.c0.limbs, r.c0.bits, r.c1.limbs, r.c1.bits].map(|v| v as u8));
        if let Some((runs, kept)) = a.selected {
            out.extend(runs.to_le_bytes());
            out.extend(kept.to_le_bytes());
        }
        Ok(out)
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<ShapeCt> {
        let bad = || HeError::Malformed {
            what: "shape ciphertext",
            detail: format!("{} bytes", bytes.len()),
        };
        let (head, rest) = bytes.split_at_checked(6).ok_or_else(bad)?;
        let (level, seeded) = (head[0] as usize, head[1]);
        if level >= self.levels || seeded > 1 {
            return Err(bad());
        }
        let d = |l: u8, b: u8| crate::Dropped {
            limbs: l as u32,
            bits: b as u32,
        };
        let rounding = Rounding {
            c0: d(head[2], head[3]),
            c1: d(head[4], head[5]),
        };
        if let Some(p) = &self.params {
            crate::rounding::check_ct(p, level, seeded == 1, Rounding::NONE, rounding)?;
        }
        let selected = match rest {
            [] => None,
            r if r.len() == 8 && seeded == 0 => {
                let word = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
                let (runs, kept) = (word(0), word(4));
                if runs == 0 || runs > kept || kept as usize > self.info.n {
                    return Err(bad());
                }
                Some((runs, kept))
            }
            _ => return Err(bad()),
        };
        Ok(ShapeCt {
            level,
            seeded: seeded == 1,
            selected,
            rounding,
        })
    }
}
