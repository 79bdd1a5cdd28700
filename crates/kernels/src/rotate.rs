//! Rotations under a Galois-key budget.
//!
//! A kernel declares the steps it rotates by. If they fit the budget (default 64 keys),
//! each step gets its own key and groups of rotations of one ciphertext are hoisted. If
//! not, only the power-of-two steps get keys and each rotation is composed of
//! popcount(step) plain rotations; the extra hops are reported. Ideal-model counts
//! (the papers' tables) use an unlimited budget.

use std::collections::BTreeSet;

use he::{Backend, GaloisSpec};

use crate::error::Result;

/// Default Galois-key budget.
pub const DEFAULT_KEY_BUDGET: usize = 64;

/// How a kernel's rotation steps are served by keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rotations {
    span: usize,
    needed: BTreeSet<usize>,
    composed: bool,
}

impl Rotations {
    /// Plans the keys for `needed` steps on a rotation span (n/2 or n), under `budget`
    /// keys (`None`: unlimited).
    pub fn new(needed: impl IntoIterator<Item = i64>, span: usize, budget: Option<usize>) -> Self {
        let needed: BTreeSet<usize> = needed
            .into_iter()
            .map(|s| s.rem_euclid(span as i64) as usize)
            .filter(|&s| s != 0)
            .collect();
        let composed = budget.is_some_and(|b| needed.len() > b);
        Self {
            span,
            needed,
            composed,
        }
    }
    /// Whether rotations are composed from power-of-two keys.
    pub fn composed(&self) -> bool {
        self.composed
    }
    /// The Galois keys the client must generate.
    pub fn galois(&self) -> GaloisSpec {
        if self.composed {
            let mut s = Vec::new();
            let mut p = 1usize;
            while p < self.span {
                if self.needed.iter().any(|&k| k & p != 0) {
                    s.push(p as i64);
                }
                p <<= 1;
            }
            GaloisSpec::new(s)
        } else {
            GaloisSpec::new(self.needed.iter().map(|&s| s as i64))
        }
    }
    fn hops(&self, step: i64) -> Vec<i64> {
        let s = step.rem_euclid(self.span as i64) as usize;
        if !self.composed || s == 0 {
            return vec![step];
        }
        (0..usize::BITS)
            .map(|i| 1usize << i)
            .filter(|&p| s & p != 0)
            .map(|p| p as i64)
            .collect()
    }
    /// The most key switches one rotation takes (1 unless composed: then the largest
    /// number of set bits of a needed step).
    pub fn max_hops(&self) -> usize {
        if self.composed {
            self.needed
                .iter()
                .map(|s| s.count_ones() as usize)
                .max()
                .unwrap_or(1)
        } else {
            1
        }
    }
    /// Extra plain rotations that composing adds for one rotation by `step`.
    pub fn extra_hops(&self, step: i64) -> usize {
        self.hops(step).len().saturating_sub(1)
    }
    /// Rotates by `step`.
    pub fn rotate<B: Backend>(&self, b: &B, ct: &B::Ct, step: i64) -> Result<B::Ct> {
        let mut out = ct.clone();
        for h in self.hops(step) {
            out = b.rotate_rows(&out, h)?;
        }
        Ok(out)
    }
    /// Rotates one ciphertext by several steps: one hoisted group when every step has
    /// its own key, composed plain rotations otherwise.
    pub fn group<B: Backend>(&self, b: &B, ct: &B::Ct, steps: &[i64]) -> Result<Vec<B::Ct>> {
        if self.composed {
            steps.iter().map(|&s| self.rotate(b, ct, s)).collect()
        } else {
            Ok(b.rotate_group(ct, steps)?)
        }
    }
}

/// A ciphertext prepared for several rotations: hoisted lazily on the first non-zero
/// step (so a group of only step 0 costs no DecPerm).
pub struct Hoist<'a, B: Backend> {
    ct: &'a B::Ct,
    hoisted: Option<B::Hoisted>,
}

impl<'a, B: Backend> Hoist<'a, B> {
    /// Wraps a ciphertext.
    pub fn new(ct: &'a B::Ct) -> Self {
        Self { ct, hoisted: None }
    }
}

impl Rotations {
    /// Rotates a prepared ciphertext: hoisted when every step has its own key.
    pub fn rotate_hoisted<B: Backend>(
        &self,
        b: &B,
        h: &mut Hoist<'_, B>,
        step: i64,
    ) -> Result<B::Ct> {
        if step.rem_euclid(self.span as i64) == 0 {
            return Ok(h.ct.clone());
        }
        if self.composed {
            return self.rotate(b, h.ct, step);
        }
        if h.hoisted.is_none() {
            h.hoisted = Some(b.hoist(h.ct)?);
        }
        match &h.hoisted {
            Some(x) => Ok(b.rotate_hoisted(x, step)?),
            None => self.rotate(b, h.ct, step),
        }
    }

    /// Rotates a prepared ciphertext by several steps, in parallel: the decomposition
    /// is made once (as [`Rotations::rotate_hoisted`] would on the first non-zero
    /// step), then each rotation is independent. Same results and counts as calling
    /// `rotate_hoisted` for each step in turn.
    pub fn rotate_many<B: Backend>(
        &self,
        b: &B,
        h: &mut Hoist<'_, B>,
        steps: &[i64],
    ) -> Result<Vec<B::Ct>> {
        let span = self.span as i64;
        if !self.composed && h.hoisted.is_none() && steps.iter().any(|s| s.rem_euclid(span) != 0) {
            h.hoisted = Some(b.hoist(h.ct)?);
        }
        let h: &Hoist<'_, B> = h;
        crate::par::map(0..steps.len(), |i| {
            let step = steps[i];
            if step.rem_euclid(span) == 0 {
                return Ok(h.ct.clone());
            }
            match (&h.hoisted, self.composed) {
                (Some(x), false) => Ok(b.rotate_hoisted(x, step)?),
                _ => self.rotate(b, h.ct, step),
            }
        })
    }
}
