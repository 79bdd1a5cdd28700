//! `Sim`: a cleartext simulator with the exact semantics of the BFV backend (same
//! layouts, same rotation directions, same declared-key checks, same levels), no noise.
//! Kernels are tested for logic on it at any size in milliseconds.
//!
//! Coefficient encoding is simulated as polynomials in Z_p\[X\]/(X^n + 1): products are
//! negacyclic (through fhe-math's negacyclic NTT mod p when p ≡ 1 mod 2n, schoolbook
//! over the non-zero coefficients otherwise). Every value carries its encoding and the
//! simulator refuses to mix them (a slot product of a coefficient-encoded ciphertext,
//! a rotation of one, a slot decryption of one): [`HeError::EncodingMismatch`].
//! Encryptions of zero (the flooding zeros) are valid in both encodings.

use std::collections::BTreeSet;

use rand::Rng;

use crate::backend::{check_step, Backend, Encoding, GaloisSpec, Layout, SlotInfo};
use crate::error::{HeError, Result};
use crate::params::Params;
use crate::plain_ntt::PlainNtt;
use crate::rounding::Rounding;

/// A simulated ciphertext: the slot values (or, coefficient encoded, the plaintext
/// polynomial's coefficients) in the clear, with a level, a seeded flag and the
/// encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimCt {
    /// The n slot values, or the n coefficients in coefficient encoding.
    pub slots: Vec<u64>,
    level: usize,
    seeded: bool,
    /// `None` for an encryption of zero, which is valid in either encoding.
    encoding: Option<Encoding>,
    /// For a selected ciphertext: (runs, kept coefficients); the others read 0.
    selected: Option<(usize, usize)>,
    /// Its wire rounding (recorded for the wire size; the values stay exact).
    rounding: Rounding,
}

impl SimCt {
    /// The encoding (`None` for an encryption of zero, valid in both).
    pub fn encoding(&self) -> Option<Encoding> {
        self.encoding
    }
}

/// A simulated plaintext: its n values and their encoding; a prepared coefficient
/// plaintext also holds its negacyclic transform mod p (when p allows one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimPt {
    values: Vec<u64>,
    encoding: Encoding,
    ntt: Option<Vec<u64>>,
    level: usize,
}

impl SimPt {
    /// The n values (slots or coefficients).
    pub fn values(&self) -> &[u64] {
        &self.values
    }
    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
}

/// The encoding of a combination of two operands, or a mismatch.
fn join(
    operation: &'static str,
    a: Option<Encoding>,
    b: Option<Encoding>,
) -> Result<Option<Encoding>> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => Err(HeError::EncodingMismatch {
            operation,
            expected: x,
            actual: y,
        }),
        (Some(x), _) | (None, Some(x)) => Ok(Some(x)),
        (None, None) => Ok(None),
    }
}

/// Checks that a value has the encoding an operation needs (a zero has both).
fn need(operation: &'static str, expected: Encoding, actual: Option<Encoding>) -> Result<()> {
    join(operation, Some(expected), actual).map(|_| ())
}

/// The cleartext simulator backend.
#[derive(Clone, Debug)]
pub struct Sim {
    info: SlotInfo,
    params: Option<Params>,
    levels: usize,
    galois: GaloisSpec,
    keys: BTreeSet<usize>,
    /// The negacyclic NTT mod p of length n, when p ≡ 1 mod 2n.
    ntt: Option<PlainNtt>,
}

impl Sim {
    /// A simulator of real BFV with these parameters and keys (2 x n/2 layout).
    pub fn new(params: &Params, galois: GaloisSpec) -> Self {
        let info = SlotInfo {
            n: params.n(),
            p: params.p(),
            layout: Layout::TwoRows,
        };
        Self::build(info, Some(params.clone()), params.levels(), galois)
    }

    /// A simulator of the papers' model: one cyclic vector of n slots, any power-of-two
    /// n (no security check: it is a model), plaintext modulus p.
    pub fn ideal(n: usize, p: u64, galois: GaloisSpec) -> Self {
        let info = SlotInfo {
            n,
            p,
            layout: Layout::Cyclic,
        };
        Self::build(info, None, 2, galois)
    }

    fn build(info: SlotInfo, params: Option<Params>, levels: usize, galois: GaloisSpec) -> Self {
        let keys = galois.normalized(info.span());
        Self {
            ntt: PlainNtt::new(info.p, info.n),
            info,
            params,
            levels,
            galois,
            keys,
        }
    }

    fn same_level(a: &SimCt, b: &SimCt) -> Result<usize> {
        Self::whole(a, "add")?;
        Self::whole(b, "add")?;
        if a.level != b.level {
            return Err(HeError::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        Ok(a.level)
    }

    fn at_pt_level(a: &SimCt, b: &SimPt) -> Result<()> {
        Self::whole(a, "a plaintext addition")?;
        if a.level != b.level {
            return Err(HeError::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        Ok(())
    }

    fn zip(&self, a: &SimCt, b: &[u64], f: impl Fn(u64, u64) -> u64) -> Vec<u64> {
        a.slots.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
    }

    fn ct(&self, slots: Vec<u64>, level: usize, encoding: Option<Encoding>) -> SimCt {
        SimCt {
            slots,
            level,
            seeded: false,
            encoding,
            selected: None,
            rounding: Rounding::NONE,
        }
    }

    fn whole(a: &SimCt, operation: &'static str) -> Result<()> {
        match a.selected {
            Some(_) => Err(HeError::Selected { operation }),
            None => Ok(()),
        }
    }

    fn check_level(&self, level: usize) -> Result<usize> {
        crate::backend::check_level(level, self.levels)
    }

    fn pt(&self, values: &[u64], encoding: Encoding, level: usize) -> Result<SimPt> {
        Ok(SimPt {
            values: self.padded(values)?,
            encoding,
            ntt: None,
            level: self.check_level(level)?,
        })
    }

    /// Common checks of the fused products.
    fn check_dot(&self, cts: &[&SimCt], pts: &[&SimPt]) -> Result<()> {
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
        for (c, pt) in cts.iter().zip(pts) {
            Self::whole(c, "a fused product")?;
            for right in [c.level, pt.level] {
                if right != level {
                    return Err(HeError::LevelMismatch { left: level, right });
                }
            }
        }
        Ok(())
    }

    /// Negacyclic product a·b in Z_p\[X\]/(X^n + 1), schoolbook over the non-zero
    /// coefficients, added into `acc`.
    fn negacyclic_into(&self, acc: &mut [u64], a: &[u64], b: &[u64]) {
        let (n, p) = (self.info.n, self.info.p);
        let nz: Vec<(usize, u64)> = a
            .iter()
            .enumerate()
            .filter(|(_, &v)| v != 0)
            .map(|(i, &v)| (i, v))
            .collect();
        for (j, &y) in b.iter().enumerate().filter(|(_, &y)| y != 0) {
            for &(i, x) in &nz {
                let v = mulmod(x, y, p);
                let k = i + j;
                if k < n {
                    acc[k] = (acc[k] + v) % p;
                } else {
                    acc[k - n] = (acc[k - n] + p - v) % p;
                }
            }
        }
    }

    fn padded(&self, values: &[u64]) -> Result<Vec<u64>> {
        self.check_values(values)?;
        let mut v = values.to_vec();
        v.resize(self.info.n, 0);
        Ok(v)
    }

    fn rotate_slots(&self, a: &SimCt, s: usize) -> SimCt {
        let n = self.info.n;
        let slots = match self.info.layout {
            Layout::Cyclic => (0..n).map(|j| a.slots[(j + s) % n]).collect(),
            Layout::TwoRows => {
                let h = n / 2;
                (0..n)
                    .map(|j| {
                        let row = j / h;
                        a.slots[row * h + (j % h + s) % h]
                    })
                    .collect()
            }
        };
        self.ct(slots, a.level, a.encoding)
    }
}

fn mulmod(a: u64, b: u64, p: u64) -> u64 {
    ((a as u128 * b as u128) % p as u128) as u64
}

impl Backend for Sim {
    type Ct = SimCt;
    type Pt = SimPt;
    type PreparedPt = SimPt;
    type Hoisted = SimCt;

    fn slots(&self) -> SlotInfo {
        self.info
    }
    fn params(&self) -> Option<&Params> {
        self.params.as_ref()
    }
    fn galois(&self) -> &GaloisSpec {
        &self.galois
    }
    fn encode_at(&self, values: &[u64], level: usize) -> Result<SimPt> {
        self.pt(values, Encoding::Slots, level)
    }
    fn prepare(&self, values: &[u64]) -> Result<SimPt> {
        self.pt(values, Encoding::Slots, 0)
    }
    fn prepared_to_bytes(&self, pt: &SimPt) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(2 + 8 * pt.values.len());
        out.push(match pt.encoding {
            Encoding::Slots => 0,
            Encoding::Coeffs => 1,
        });
        out.push(pt.level as u8);
        out.extend(pt.values.iter().flat_map(|v| v.to_le_bytes()));
        Ok(out)
    }
    fn prepared_from_bytes(&self, bytes: &[u8]) -> Result<SimPt> {
        if bytes.len() != 2 + 8 * self.info.n {
            return Err(HeError::Malformed {
                what: "simulated plaintext",
                detail: format!(
                    "expected {} bytes, got {}",
                    2 + 8 * self.info.n,
                    bytes.len()
                ),
            });
        }
        let level = bytes[1] as usize;
        let v: Vec<u64> = bytes[2..]
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect();
        match bytes[0] {
            0 if level == 0 => self.prepare(&v),
            1 => self.prepare_coeffs_at(&v, level),
            t => Err(HeError::Malformed {
                what: "simulated plaintext",
                detail: format!("encoding tag {t} at level {level}"),
            }),
        }
    }
    fn encrypt_sym(&self, pt: &SimPt) -> Result<SimCt> {
        Ok(SimCt {
            slots: self.padded(&pt.values)?,
            level: pt.level,
            seeded: true,
            encoding: Some(pt.encoding),
            selected: None,
            rounding: Rounding::NONE,
        })
    }
    fn encrypt_pk(&self, pt: &SimPt) -> Result<SimCt> {
        Ok(self.ct(self.padded(&pt.values)?, pt.level, Some(pt.encoding)))
    }
    fn encrypt_zero_flood_at(&self, _bits: u32, level: usize) -> Result<SimCt> {
        Ok(self.ct(vec![0; self.info.n], self.check_level(level)?, None))
    }
    fn decrypt(&self, ct: &SimCt) -> Result<Vec<u64>> {
        Self::whole(ct, "slot decryption")?;
        need("slot decryption", Encoding::Slots, ct.encoding)?;
        Ok(ct.slots.clone())
    }
    fn noise_budget(&self, ct: &SimCt) -> Result<Option<u32>> {
        let _ = ct; // no noise here; a selected ciphertext has none defined either
        Ok(None)
    }
    fn add(&self, a: &SimCt, b: &SimCt) -> Result<SimCt> {
        let l = Self::same_level(a, b)?;
        let e = join("add", a.encoding, b.encoding)?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, &b.slots, |x, y| (x + y) % p), l, e))
    }
    fn sub(&self, a: &SimCt, b: &SimCt) -> Result<SimCt> {
        let l = Self::same_level(a, b)?;
        let e = join("sub", a.encoding, b.encoding)?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, &b.slots, |x, y| (x + p - y) % p), l, e))
    }
    fn add_plain(&self, a: &SimCt, b: &SimPt) -> Result<SimCt> {
        Self::at_pt_level(a, b)?;
        let e = join("add_plain", a.encoding, Some(b.encoding))?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, &b.values, |x, y| (x + y) % p), a.level, e))
    }
    fn sub_plain(&self, a: &SimCt, b: &SimPt) -> Result<SimCt> {
        Self::at_pt_level(a, b)?;
        let e = join("sub_plain", a.encoding, Some(b.encoding))?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, &b.values, |x, y| (x + p - y) % p), a.level, e))
    }
    fn negate(&self, a: &SimCt) -> Result<SimCt> {
        Self::whole(a, "negate")?;
        let p = self.info.p;
        Ok(self.ct(
            a.slots.iter().map(|&x| (p - x) % p).collect(),
            a.level,
            a.encoding,
        ))
    }
    fn mul_plain(&self, a: &SimCt, b: &SimPt) -> Result<SimCt> {
        self.dot(&[a], &[b])
    }
    fn dot(&self, cts: &[&SimCt], pts: &[&SimPt]) -> Result<SimCt> {
        self.check_dot(cts, pts)?;
        let p = self.info.p as u128;
        let mut acc = vec![0u128; self.info.n];
        for (c, pt) in cts.iter().zip(pts) {
            need("a slot product", Encoding::Slots, c.encoding)?;
            need("a slot product", Encoding::Slots, Some(pt.encoding))?;
            for ((a, &x), &y) in acc.iter_mut().zip(&c.slots).zip(pt.values.iter()) {
                *a = (*a + x as u128 * y as u128) % p;
            }
        }
        Ok(self.ct(
            acc.into_iter().map(|a| a as u64).collect(),
            cts[0].level,
            Some(Encoding::Slots),
        ))
    }
    fn encode_coeffs_at(&self, values: &[u64], level: usize) -> Result<SimPt> {
        self.pt(values, Encoding::Coeffs, level)
    }
    fn prepare_coeffs_at(&self, values: &[u64], level: usize) -> Result<SimPt> {
        let mut pt = self.pt(values, Encoding::Coeffs, level)?;
        if let Some(t) = &self.ntt {
            let mut f = pt.values.clone();
            t.forward(&mut f);
            pt.ntt = Some(f);
        }
        Ok(pt)
    }
    fn dot_coeffs(&self, cts: &[&SimCt], pts: &[&SimPt]) -> Result<SimCt> {
        self.check_dot(cts, pts)?;
        let (n, p) = (self.info.n, self.info.p);
        for (c, pt) in cts.iter().zip(pts) {
            need("a polynomial product", Encoding::Coeffs, c.encoding)?;
            need("a polynomial product", Encoding::Coeffs, Some(pt.encoding))?;
        }
        let mut acc = vec![0u64; n];
        match &self.ntt {
            Some(t) => {
                // In the transform domain the negacyclic product is slot-wise.
                for (c, pt) in cts.iter().zip(pts) {
                    let mut a = c.slots.clone();
                    t.forward(&mut a);
                    let fb;
                    let b = match &pt.ntt {
                        Some(b) => b,
                        None => {
                            let mut v = pt.values.clone();
                            t.forward(&mut v);
                            fb = v;
                            &fb
                        }
                    };
                    for ((s, &x), &y) in acc.iter_mut().zip(&a).zip(b) {
                        *s = (*s + mulmod(x, y, p)) % p;
                    }
                }
                t.backward(&mut acc);
            }
            None => {
                for (c, pt) in cts.iter().zip(pts) {
                    self.negacyclic_into(&mut acc, &c.slots, &pt.values);
                }
            }
        }
        Ok(self.ct(acc, cts[0].level, Some(Encoding::Coeffs)))
    }
    fn decrypt_coeffs(&self, ct: &SimCt) -> Result<Vec<u64>> {
        need("coefficient decryption", Encoding::Coeffs, ct.encoding)?;
        Ok(ct.slots.clone())
    }
    fn select_coeffs(&self, a: &SimCt, keep: &[std::ops::Range<usize>]) -> Result<SimCt> {
        Self::whole(a, "select_coeffs")?;
        need("select_coeffs", Encoding::Coeffs, a.encoding)?;
        let kept = crate::backend::check_runs(keep, self.info.n)?;
        // The client learns nothing at the other coefficients: they read 0 here.
        let mut slots = vec![0u64; self.info.n];
        for r in keep {
            slots[r.clone()].copy_from_slice(&a.slots[r.clone()]);
        }
        let mut out = self.ct(slots, a.level, Some(Encoding::Coeffs));
        out.selected = Some((keep.len(), kept));
        out.rounding = a.rounding;
        Ok(out)
    }
    fn round(&self, a: &SimCt, r: Rounding) -> Result<SimCt> {
        if let Some(p) = &self.params {
            crate::rounding::check_ct(p, a.level, a.seeded, a.rounding, r)?;
        }
        Ok(SimCt {
            rounding: r,
            ..a.clone()
        })
    }
    fn wire_size(&self, a: &SimCt) -> usize {
        self.params.as_ref().map_or(0, |p| {
            p.rounded_ct_wire_size(a.level, a.seeded, a.selected, a.rounding)
        })
    }
    fn rotate_rows(&self, a: &SimCt, step: i64) -> Result<SimCt> {
        Self::whole(a, "a slot rotation")?;
        need("a slot rotation", Encoding::Slots, a.encoding)?;
        match check_step(step, self.info.span(), &self.keys, &self.galois)? {
            None => Ok(self.ct(a.slots.clone(), a.level, a.encoding)),
            Some(s) => Ok(self.rotate_slots(a, s)),
        }
    }
    fn rotate_columns(&self, a: &SimCt) -> Result<SimCt> {
        Self::whole(a, "a slot rotation")?;
        need("a slot rotation", Encoding::Slots, a.encoding)?;
        if self.info.layout != Layout::TwoRows || !self.galois.column {
            return Err(HeError::UndeclaredColumnRotation);
        }
        let h = self.info.n / 2;
        let mut slots = a.slots[h..].to_vec();
        slots.extend_from_slice(&a.slots[..h]);
        Ok(self.ct(slots, a.level, a.encoding))
    }
    fn hoist(&self, a: &SimCt) -> Result<SimCt> {
        Self::whole(a, "a slot rotation")?;
        need("a slot rotation", Encoding::Slots, a.encoding)?;
        Ok(a.clone())
    }
    fn rotate_hoisted(&self, h: &SimCt, step: i64) -> Result<SimCt> {
        self.rotate_rows(h, step)
    }
    fn switch_to_last(&self, a: &SimCt) -> Result<SimCt> {
        Self::whole(a, "switch_to_last")?;
        Ok(self.ct(a.slots.clone(), self.levels - 1, a.encoding))
    }
    fn level(&self, a: &SimCt) -> usize {
        a.level
    }
    fn is_seeded(&self, a: &SimCt) -> bool {
        a.seeded
    }
    fn serialize(&self, a: &SimCt) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(8 * a.slots.len() + 12);
        out.push(a.level as u8);
        out.push(u8::from(a.seeded));
        out.push(match a.encoding {
            None => 0,
            Some(Encoding::Slots) => 1,
            Some(Encoding::Coeffs) => 2,
        });
        let (runs, kept) = a.selected.unwrap_or((0, 0));
        out.extend((runs as u32).to_le_bytes());
        out.extend((kept as u32).to_le_bytes());
        let r = a.rounding;
        out.extend([r.c0.limbs, r.c0.bits, r.c1.limbs, r.c1.bits].map(|v| v as u8));
        for s in &a.slots {
            out.extend_from_slice(&s.to_le_bytes());
        }
        Ok(out)
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<SimCt> {
        let n = self.info.n;
        const HEADER: usize = 15;
        if bytes.len() != HEADER + 8 * n {
            return Err(HeError::Malformed {
                what: "simulated ciphertext",
                detail: format!("expected {} bytes, got {}", HEADER + 8 * n, bytes.len()),
            });
        }
        let word = |i: usize| {
            u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]) as usize
        };
        let selected = match (word(3), word(7)) {
            (0, 0) => None,
            (runs, kept) if runs >= 1 && runs <= kept && kept <= n && bytes[2] == 2 => {
                Some((runs, kept))
            }
            (runs, kept) => {
                return Err(HeError::Malformed {
                    what: "simulated ciphertext",
                    detail: format!("{runs} runs keeping {kept} coefficients"),
                })
            }
        };
        let level = bytes[0] as usize;
        if level >= self.levels || bytes[1] > 1 || bytes[2] > 2 {
            return Err(HeError::Malformed {
                what: "simulated ciphertext",
                detail: format!(
                    "bad level {level}, seed flag {} or encoding tag {}",
                    bytes[1], bytes[2]
                ),
            });
        }
        let d = |i: usize| crate::Dropped {
            limbs: bytes[i] as u32,
            bits: bytes[i + 1] as u32,
        };
        let rounding = Rounding {
            c0: d(11),
            c1: d(13),
        };
        if let Some(p) = &self.params {
            crate::rounding::check_ct(p, level, bytes[1] == 1, Rounding::NONE, rounding)?;
        }
        let encoding = match bytes[2] {
            0 => None,
            1 => Some(Encoding::Slots),
            _ => Some(Encoding::Coeffs),
        };
        let mut slots = Vec::with_capacity(n);
        for (index, c) in bytes[HEADER..].chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            let value = u64::from_le_bytes(b);
            if value >= self.info.p {
                return Err(HeError::NotReduced {
                    index,
                    value,
                    p: self.info.p,
                });
            }
            slots.push(value);
        }
        Ok(SimCt {
            slots,
            level,
            seeded: bytes[1] == 1,
            encoding,
            selected,
            rounding,
        })
    }
}

/// Uniform random vector of `n` elements of Z_p (test and benchmark data).
pub fn random_slots<R: Rng + ?Sized>(n: usize, p: u64, rng: &mut R) -> Vec<u64> {
    (0..n).map(|_| rng.random_range(0..p)).collect()
}
