//! Rounding ciphertexts for the wire: the low-order precision decryption does not need.
//!
//! A ciphertext polynomial's coefficient x mod Q = q_0···q_{L−1} (RNS rows at its level)
//! is written in mixed radix, x = v_0 + v_1·q_0 + v_2·q_0·q_1 + … (0 ≤ v_i < q_i). A
//! [`Dropped`] of (limbs f, bits j) leaves off the digits v_0..v_{f−1} and the low j bits
//! of v_f; the receiver puts their midpoints back. Per coefficient the error is at most
//! (2^(j−1) + 1/2 + 2^-30)·q_0···q_{f−1} (2^(j−1) when f = 0): rounding is noise, and
//! whoever rounds a ciphertext must afford it:
//! - **queries** (client → server): c1 comes from a seed and stays exact; c0 is rounded as
//!   far as the layer's noise budget allows (the rounding error adds to the fresh noise
//!   the weights multiply; `kernels::LinearLayer::query_rounding` picks the largest);
//! - **responses** (server → client, last level, one modulus): c0 and c1 are rounded to
//!   what decryption needs ([`crate::Params::response_rounding`]): an error δ in c1
//!   reaches the phase as δ·s.
//!
//! Rounding is a public function of a ciphertext: it cannot reveal more than the
//! ciphertext itself (OpenCheetah's `truncate_for_decryption` drops response bits the
//! same way).
//!
//! Wire form: for each kept digit, from v_f up, the values of the sent coefficients
//! bit-packed at the digit's width (`bitlen((q_f − 1) >> j)` for v_f, `bitlen(q_i − 1)`
//! above), each digit's run padded to a byte.

use fhe_math::zq::Modulus;
use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use crate::error::{HeError, Result};

/// Low-order precision one ciphertext polynomial leaves off on the wire (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dropped {
    /// Whole mixed-radix digits dropped from the bottom (v_0..v_{limbs−1}).
    pub limbs: u32,
    /// Low bits dropped from the next digit v_limbs.
    pub bits: u32,
}

impl Dropped {
    /// Nothing dropped.
    pub const NONE: Dropped = Dropped { limbs: 0, bits: 0 };
    /// Whether anything is dropped.
    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }
}

/// The rounding of a whole ciphertext on the wire: c0 and c1 (c1 of a seeded query is
/// never rounded: the seed regenerates it exactly).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rounding {
    /// c0's dropped precision.
    pub c0: Dropped,
    /// c1's dropped precision.
    pub c1: Dropped,
}

impl Rounding {
    /// Nothing rounded: fhe.rs's own wire form.
    pub const NONE: Rounding = Rounding {
        c0: Dropped::NONE,
        c1: Dropped::NONE,
    };
    /// Whether anything is rounded.
    pub fn is_none(&self) -> bool {
        self.c0.is_none() && self.c1.is_none()
    }
}

fn bitlen(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// The error a rounding must stay within: `what` names the part.
fn invalid(what: &'static str, d: Dropped, limbs: usize) -> HeError {
    HeError::Malformed {
        what,
        detail: format!(
            "rounding of {} limbs and {} bits on a ciphertext of {limbs} limbs",
            d.limbs, d.bits
        ),
    }
}

/// Checks that `d` keeps at least one bit of the ciphertext's top digit.
pub(crate) fn check(moduli: &[u64], d: Dropped, what: &'static str) -> Result<()> {
    let f = d.limbs as usize;
    if f >= moduli.len() || d.bits >= bitlen(moduli[f] - 1) {
        return Err(invalid(what, d, moduli.len()));
    }
    Ok(())
}

/// Checks that a ciphertext at `level` (seeded or not, already rounded by `current`)
/// can be rounded by `r`.
pub(crate) fn check_ct(
    params: &crate::Params,
    level: usize,
    seeded: bool,
    current: Rounding,
    r: Rounding,
) -> Result<()> {
    let refuse = |detail: &str| {
        Err(HeError::Malformed {
            what: "rounding",
            detail: detail.into(),
        })
    };
    if !current.is_none() && current != r {
        return refuse("the ciphertext is already rounded differently");
    }
    if seeded && !r.c1.is_none() {
        return refuse("c1 of a seeded ciphertext comes from its seed and is not rounded");
    }
    let q = params.moduli_at(level);
    for d in [r.c0, r.c1] {
        if !d.is_none() {
            check(q, d, "rounding")?;
        }
    }
    Ok(())
}

/// log2 of the largest error `d` adds to a coefficient (−∞ when it drops nothing).
pub fn bound_log2(moduli: &[u64], d: Dropped) -> f64 {
    let f = (d.limbs as usize).min(moduli.len());
    let low: f64 = moduli[..f].iter().map(|&q| (q as f64).log2()).sum();
    let digit = if d.bits > 0 {
        (d.bits as f64 - 1.0).exp2()
    } else {
        0.0
    };
    let lower = if f > 0 { 0.5 + 2f64.powi(-30) } else { 0.0 };
    let total = digit + lower;
    if total == 0.0 {
        f64::NEG_INFINITY
    } else {
        low + total.log2()
    }
}

/// Every rounding with at least one bit of the top digit kept, by increasing error.
pub fn candidates(moduli: &[u64]) -> Vec<Dropped> {
    let mut out = Vec::new();
    for (f, &q) in moduli.iter().enumerate() {
        for j in 0..bitlen(q - 1) {
            out.push(Dropped {
                limbs: f as u32,
                bits: j,
            });
        }
    }
    out.sort_by(|a, b| bound_log2(moduli, *a).total_cmp(&bound_log2(moduli, *b)));
    out
}

/// Bit widths of the sent digits v_f, v_{f+1}, …
fn widths(moduli: &[u64], d: Dropped) -> Vec<u32> {
    let f = d.limbs as usize;
    moduli[f..]
        .iter()
        .enumerate()
        .map(|(i, &q)| {
            if i == 0 {
                bitlen((q - 1) >> d.bits)
            } else {
                bitlen(q - 1)
            }
        })
        .collect()
}

/// Bytes of `count` coefficients of a polynomial rounded by `d`.
pub fn packed_len(moduli: &[u64], d: Dropped, count: usize) -> usize {
    widths(moduli, d)
        .iter()
        .map(|&w| (count * w as usize).div_ceil(8))
        .sum()
}

/// Mixed-radix conversion tables for one level.
struct Radix<'a> {
    q: &'a [u64],
    /// Constant-time Barrett/Shoup arithmetic mod each q_k.
    m: Vec<Modulus>,
    /// inv[i][k] = q_i^{-1} mod q_k (i < k), with its Shoup companion.
    inv: Vec<Vec<(u64, u64)>>,
    /// pow[i][k] = q_0···q_{i−1} mod q_k, with its Shoup companion.
    pow: Vec<Vec<(u64, u64)>>,
}

impl<'a> Radix<'a> {
    fn new(q: &'a [u64]) -> Result<Self> {
        let l = q.len();
        let m = q
            .iter()
            .map(|&qk| Modulus::new(qk).map_err(|e| HeError::Engine(e.to_string())))
            .collect::<Result<Vec<_>>>()?;
        let mut inv = vec![vec![(0u64, 0u64); l]; l];
        let mut pow = vec![vec![(0u64, 0u64); l]; l];
        for k in 0..l {
            pow[0][k] = (1, m[k].shoup(1));
            for i in 0..l {
                if i < k {
                    let x = fhe_util::inverse(q[i] % q[k], q[k]).ok_or_else(|| {
                        HeError::Engine(format!("moduli {} and {} not coprime", q[i], q[k]))
                    })?;
                    inv[i][k] = (x, m[k].shoup(x));
                }
                if i > 0 {
                    let x = m[k].mul(pow[i - 1][k].0, q[i - 1] % q[k]);
                    pow[i][k] = (x, m[k].shoup(x));
                }
            }
        }
        Ok(Self { q, m, inv, pow })
    }

    /// Digits v_0..v_{L−1} of the coefficient with residues `x`.
    fn digits(&self, x: &[u64], v: &mut [u64]) {
        for k in 0..self.q.len() {
            let mk = &self.m[k];
            let mut t = mk.reduce(x[k]);
            for (vi, inv) in v[..k].iter().zip(&self.inv) {
                let (c, c_shoup) = inv[k];
                t = mk.mul_shoup(mk.sub(t, mk.reduce(*vi)), c, c_shoup);
            }
            v[k] = t;
        }
    }

    /// Residues of the coefficient with digits `v` (any values below 2^64).
    fn residues(&self, v: &[u64], x: &mut [u64]) {
        for (k, xk) in x.iter_mut().enumerate() {
            let mk = &self.m[k];
            let mut acc = 0u64;
            for (vi, pow) in v[..=k].iter().zip(&self.pow) {
                let (c, c_shoup) = pow[k];
                acc = mk.add(acc, mk.mul_shoup(mk.reduce(*vi), c, c_shoup));
            }
            *xk = acc;
        }
    }

    /// The digits the receiver rebuilds from the sent part: midpoints below, v_f's
    /// dropped bits at their midpoint (kept below q_f).
    fn midpoints(&self, d: Dropped, v: &mut [u64]) {
        let f = d.limbs as usize;
        for (vi, &q) in v.iter_mut().zip(self.q).take(f) {
            *vi = q / 2;
        }
        if d.bits > 0 {
            let base = (v[f] >> d.bits) << d.bits;
            let half = 1u64 << (d.bits - 1);
            v[f] = base + half.min(self.q[f] - 1 - base);
        }
    }
}

/// Rounds the coefficients at `at` (all when `None`) of the RNS rows in place: what the
/// receiver of [`pack`]ed rows rebuilds.
pub(crate) fn round_rows(
    moduli: &[u64],
    rows: &mut Array2<u64>,
    d: Dropped,
    at: Option<&[usize]>,
) -> Result<()> {
    check(moduli, d, "rounding")?;
    let r = Radix::new(moduli)?;
    let l = moduli.len();
    let cols = rows.ncols();
    let (mut x, mut v) = (vec![0u64; l], vec![0u64; l]);
    let mut one = |i: usize| {
        for k in 0..l {
            x[k] = rows[[k, i]];
        }
        r.digits(&x, &mut v);
        r.midpoints(d, &mut v);
        r.residues(&v, &mut x);
        for k in 0..l {
            rows[[k, i]] = x[k];
        }
    };
    match at {
        Some(at) => at.iter().for_each(|&i| one(i)),
        None => (0..cols).for_each(one),
    }
    Ok(())
}

/// The sent digits of the coefficients at `at` (power-basis RNS rows), bit-packed.
pub(crate) fn pack(
    moduli: &[u64],
    rows: ArrayView2<u64>,
    d: Dropped,
    at: &[usize],
) -> Result<Vec<u8>> {
    check(moduli, d, "rounding")?;
    let r = Radix::new(moduli)?;
    let l = moduli.len();
    let f = d.limbs as usize;
    let mut streams: Vec<Vec<u64>> = vec![Vec::with_capacity(at.len()); l - f];
    let (mut x, mut v) = (vec![0u64; l], vec![0u64; l]);
    for &i in at {
        for k in 0..l {
            x[k] = rows[[k, i]];
        }
        r.digits(&x, &mut v);
        streams[0].push(v[f] >> d.bits);
        for (s, &vk) in streams[1..].iter_mut().zip(&v[f + 1..]) {
            s.push(vk);
        }
    }
    let mut out = Vec::with_capacity(packed_len(moduli, d, at.len()));
    for (s, w) in streams.iter().zip(widths(moduli, d)) {
        out.extend(fhe_util::transcode_to_bytes(s, w as usize));
    }
    Ok(out)
}

/// Rebuilds power-basis RNS rows (n coefficients, zero outside `at`) from [`pack`]ed
/// bytes, checking the length and that every digit is in range.
pub(crate) fn unpack(
    moduli: &[u64],
    bytes: &[u8],
    d: Dropped,
    at: &[usize],
    n: usize,
    what: &'static str,
) -> Result<Array2<u64>> {
    check(moduli, d, what)?;
    let expected = packed_len(moduli, d, at.len());
    if bytes.len() != expected {
        return Err(HeError::Malformed {
            what,
            detail: format!("{} rounded bytes instead of {expected}", bytes.len()),
        });
    }
    let r = Radix::new(moduli)?;
    let l = moduli.len();
    let f = d.limbs as usize;
    let ws = widths(moduli, d);
    let mut streams = Vec::with_capacity(ws.len());
    let mut pos = 0;
    for (i, &w) in ws.iter().enumerate() {
        let len = (at.len() * w as usize).div_ceil(8);
        let mut s = if len == 0 {
            Vec::new()
        } else {
            fhe_util::transcode_from_bytes(&bytes[pos..pos + len], w as usize)
        };
        pos += len;
        s.truncate(at.len());
        let max = if i == 0 {
            (moduli[f] - 1) >> d.bits
        } else {
            moduli[f + i] - 1
        };
        if s.len() != at.len() || s.iter().any(|&x| x > max) {
            return Err(HeError::Malformed {
                what,
                detail: "a rounded digit out of range".into(),
            });
        }
        streams.push(s);
    }
    let mut rows = Array2::<u64>::zeros((l, n));
    let (mut x, mut v) = (vec![0u64; l], vec![0u64; l]);
    for (c, &i) in at.iter().enumerate() {
        v[f] = streams[0][c] << d.bits;
        for k in f + 1..l {
            v[k] = streams[k - f][c];
        }
        r.midpoints(d, &mut v);
        r.residues(&v, &mut x);
        for k in 0..l {
            rows[[k, i]] = x[k];
        }
    }
    Ok(rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use num_bigint::{BigInt, BigUint};
    use rand::{Rng, SeedableRng};

    /// Exact CRT reconstruction (independent of the mixed-radix code).
    fn crt(q: &[u64], x: &[u64]) -> BigUint {
        let big_q: BigUint = q.iter().map(|&v| BigUint::from(v)).product();
        let mut acc = BigUint::from(0u8);
        for (&qi, &xi) in q.iter().zip(x) {
            let m = &big_q / qi;
            let inv = fhe_util::inverse((&m % qi).try_into().unwrap(), qi).unwrap();
            acc += m * xi * inv;
        }
        acc % big_q
    }

    #[test]
    fn rounding_error_stays_within_its_bound_and_packing_round_trips() {
        let params = crate::Params::preset("n8192").unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        for level in 0..params.levels() {
            let q = params.moduli_at(level);
            let big_q: BigInt = q.iter().map(|&v| BigInt::from(v)).product();
            let n = 64;
            let mut rows = Array2::<u64>::zeros((q.len(), n));
            for (k, &qk) in q.iter().enumerate() {
                for i in 0..n {
                    // include the extremes of every residue
                    rows[[k, i]] = match i {
                        0 => 0,
                        1 => qk - 1,
                        _ => rng.random_range(0..qk),
                    };
                }
            }
            let cands = candidates(q);
            assert!(cands
                .windows(2)
                .all(|w| bound_log2(q, w[0]) <= bound_log2(q, w[1])));
            for d in cands.iter().step_by(7).chain(cands.last()) {
                let mut rounded = rows.clone();
                round_rows(q, &mut rounded, *d, None).unwrap();
                let at: Vec<usize> = (0..n).collect();
                let bytes = pack(q, rounded.view(), *d, &at).unwrap();
                assert_eq!(bytes.len(), packed_len(q, *d, n));
                assert_eq!(unpack(q, &bytes, *d, &at, n, "test").unwrap(), rounded);
                // packing the unrounded rows sends the same digits
                assert_eq!(pack(q, rows.view(), *d, &at).unwrap(), bytes);
                let bound = bound_log2(q, *d);
                for i in 0..n {
                    let col = |r: &Array2<u64>| (0..q.len()).map(|k| r[[k, i]]).collect::<Vec<_>>();
                    let x = BigInt::from(crt(q, &col(&rows)));
                    let y = BigInt::from(crt(q, &col(&rounded)));
                    let mut e = (x - y) % &big_q;
                    if e.clone() * 2 > big_q {
                        e -= &big_q;
                    } else if e.clone() * -2 > big_q {
                        e += &big_q;
                    }
                    let mag = e.magnitude().to_string().parse::<f64>().unwrap();
                    assert!(
                        mag == 0.0 || mag.log2() <= bound,
                        "level {level} {d:?}: error 2^{} above 2^{bound}",
                        mag.log2()
                    );
                }
            }
        }
    }

    #[test]
    fn unpack_refuses_wrong_lengths_and_digits_out_of_range() {
        let params = crate::Params::preset("n4096").unwrap();
        let q = params.moduli_at(0);
        let d = Dropped { limbs: 1, bits: 5 };
        let at: Vec<usize> = (0..16).collect();
        let len = packed_len(q, d, at.len());
        assert!(unpack(q, &vec![0u8; len + 1], d, &at, 16, "t").is_err());
        // all ones: the top digit exceeds q − 1
        assert!(unpack(q, &vec![0xffu8; len], d, &at, 16, "t").is_err());
        assert!(unpack(q, &vec![0u8; len], d, &at, 16, "t").is_ok());
        assert!(check(q, Dropped { limbs: 3, bits: 0 }, "t").is_err());
        assert!(check(q, Dropped { limbs: 0, bits: 40 }, "t").is_err());
    }
}
