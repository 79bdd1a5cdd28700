//! `Sim`: a cleartext slot simulator with the exact semantics of the BFV backend (same
//! layouts, same rotation directions, same declared-key checks, same levels), no noise.
//! Kernels are tested for logic on it at any size in milliseconds.

use std::collections::BTreeSet;

use rand::Rng;

use crate::backend::{check_step, Backend, GaloisSpec, Layout, SlotInfo};
use crate::error::{HeError, Result};
use crate::params::Params;

/// A simulated ciphertext: the slot values in the clear, with a level and a seeded flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimCt {
    /// The n slot values.
    pub slots: Vec<u64>,
    level: usize,
    seeded: bool,
}

/// The cleartext simulator backend.
#[derive(Clone, Debug)]
pub struct Sim {
    info: SlotInfo,
    params: Option<Params>,
    levels: usize,
    galois: GaloisSpec,
    keys: BTreeSet<usize>,
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
            info,
            params,
            levels,
            galois,
            keys,
        }
    }

    fn same_level(a: &SimCt, b: &SimCt) -> Result<usize> {
        if a.level != b.level {
            return Err(HeError::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        Ok(a.level)
    }

    fn top(a: &SimCt) -> Result<()> {
        if a.level != 0 {
            return Err(HeError::WrongLevel {
                expected: 0,
                actual: a.level,
            });
        }
        Ok(())
    }

    fn zip(&self, a: &SimCt, b: &[u64], f: impl Fn(u64, u64) -> u64) -> Vec<u64> {
        a.slots.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
    }

    fn ct(&self, slots: Vec<u64>, level: usize) -> SimCt {
        SimCt {
            slots,
            level,
            seeded: false,
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
        self.ct(slots, a.level)
    }
}

fn mulmod(a: u64, b: u64, p: u64) -> u64 {
    ((a as u128 * b as u128) % p as u128) as u64
}

impl Backend for Sim {
    type Ct = SimCt;
    type Pt = Vec<u64>;
    type PreparedPt = Vec<u64>;
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
    fn encode(&self, values: &[u64]) -> Result<Vec<u64>> {
        self.padded(values)
    }
    fn prepare(&self, values: &[u64]) -> Result<Vec<u64>> {
        self.padded(values)
    }
    fn prepared_to_bytes(&self, pt: &Vec<u64>) -> Result<Vec<u8>> {
        Ok(pt.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
    fn prepared_from_bytes(&self, bytes: &[u8]) -> Result<Vec<u64>> {
        if bytes.len() != 8 * self.info.n {
            return Err(HeError::Malformed {
                what: "simulated plaintext",
                detail: format!("expected {} bytes, got {}", 8 * self.info.n, bytes.len()),
            });
        }
        let v: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect();
        self.check_values(&v)?;
        Ok(v)
    }
    fn encrypt_sym(&self, pt: &Vec<u64>) -> Result<SimCt> {
        Ok(SimCt {
            slots: self.padded(pt)?,
            level: 0,
            seeded: true,
        })
    }
    fn encrypt_pk(&self, pt: &Vec<u64>) -> Result<SimCt> {
        Ok(self.ct(self.padded(pt)?, 0))
    }
    fn encrypt_zero_flood(&self, _bits: u32) -> Result<SimCt> {
        Ok(self.ct(vec![0; self.info.n], 0))
    }
    fn decrypt(&self, ct: &SimCt) -> Result<Vec<u64>> {
        Ok(ct.slots.clone())
    }
    fn noise_budget(&self, _ct: &SimCt) -> Result<Option<u32>> {
        Ok(None)
    }
    fn add(&self, a: &SimCt, b: &SimCt) -> Result<SimCt> {
        let l = Self::same_level(a, b)?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, &b.slots, |x, y| (x + y) % p), l))
    }
    fn sub(&self, a: &SimCt, b: &SimCt) -> Result<SimCt> {
        let l = Self::same_level(a, b)?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, &b.slots, |x, y| (x + p - y) % p), l))
    }
    fn add_plain(&self, a: &SimCt, b: &Vec<u64>) -> Result<SimCt> {
        Self::top(a)?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, b, |x, y| (x + y) % p), 0))
    }
    fn sub_plain(&self, a: &SimCt, b: &Vec<u64>) -> Result<SimCt> {
        Self::top(a)?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, b, |x, y| (x + p - y) % p), 0))
    }
    fn negate(&self, a: &SimCt) -> Result<SimCt> {
        let p = self.info.p;
        Ok(self.ct(a.slots.iter().map(|&x| (p - x) % p).collect(), a.level))
    }
    fn mul_plain(&self, a: &SimCt, b: &Vec<u64>) -> Result<SimCt> {
        Self::top(a)?;
        let p = self.info.p;
        Ok(self.ct(self.zip(a, b, |x, y| mulmod(x, y, p)), 0))
    }
    fn dot(&self, cts: &[&SimCt], pts: &[&Vec<u64>]) -> Result<SimCt> {
        if cts.is_empty() || pts.is_empty() {
            return Err(HeError::Empty { what: "dot" });
        }
        if cts.len() != pts.len() {
            return Err(HeError::WrongLength {
                expected: cts.len(),
                actual: pts.len(),
            });
        }
        let p = self.info.p as u128;
        let mut acc = vec![0u128; self.info.n];
        for (c, pt) in cts.iter().zip(pts) {
            Self::top(c)?;
            for ((a, &x), &y) in acc.iter_mut().zip(&c.slots).zip(pt.iter()) {
                *a = (*a + x as u128 * y as u128) % p;
            }
        }
        Ok(self.ct(acc.into_iter().map(|a| a as u64).collect(), 0))
    }
    fn rotate_rows(&self, a: &SimCt, step: i64) -> Result<SimCt> {
        match check_step(step, self.info.span(), &self.keys, &self.galois)? {
            None => Ok(self.ct(a.slots.clone(), a.level)),
            Some(s) => Ok(self.rotate_slots(a, s)),
        }
    }
    fn rotate_columns(&self, a: &SimCt) -> Result<SimCt> {
        if self.info.layout != Layout::TwoRows || !self.galois.column {
            return Err(HeError::UndeclaredColumnRotation);
        }
        let h = self.info.n / 2;
        let mut slots = a.slots[h..].to_vec();
        slots.extend_from_slice(&a.slots[..h]);
        Ok(self.ct(slots, a.level))
    }
    fn hoist(&self, a: &SimCt) -> Result<SimCt> {
        Ok(a.clone())
    }
    fn rotate_hoisted(&self, h: &SimCt, step: i64) -> Result<SimCt> {
        self.rotate_rows(h, step)
    }
    fn switch_to_last(&self, a: &SimCt) -> Result<SimCt> {
        Ok(self.ct(a.slots.clone(), self.levels - 1))
    }
    fn level(&self, a: &SimCt) -> usize {
        a.level
    }
    fn is_seeded(&self, a: &SimCt) -> bool {
        a.seeded
    }
    fn serialize(&self, a: &SimCt) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(8 * a.slots.len() + 2);
        out.push(a.level as u8);
        out.push(u8::from(a.seeded));
        for s in &a.slots {
            out.extend_from_slice(&s.to_le_bytes());
        }
        Ok(out)
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<SimCt> {
        let n = self.info.n;
        if bytes.len() != 2 + 8 * n {
            return Err(HeError::Malformed {
                what: "simulated ciphertext",
                detail: format!("expected {} bytes, got {}", 2 + 8 * n, bytes.len()),
            });
        }
        let level = bytes[0] as usize;
        if level >= self.levels || bytes[1] > 1 {
            return Err(HeError::Malformed {
                what: "simulated ciphertext",
                detail: format!("bad level {level} or seed flag {}", bytes[1]),
            });
        }
        let mut slots = Vec::with_capacity(n);
        for (index, c) in bytes[2..].chunks_exact(8).enumerate() {
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
        })
    }
}

/// Uniform random vector of `n` elements of Z_p (test and benchmark data).
pub fn random_slots<R: Rng + ?Sized>(n: usize, p: u64, rng: &mut R) -> Vec<u64> {
    (0..n).map(|_| rng.random_range(0..p)).collect()
}
