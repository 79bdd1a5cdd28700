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

    /// Digits v_0..v_{L−1} (one row per digit) of the coefficients at `at` of
    /// power-basis RNS rows. Row by row, so that the coefficients' independent chains
    /// overlap in the pipeline.
    fn digits(&self, rows: ArrayView2<u64>, at: &[usize]) -> Vec<Vec<u64>> {
        let l = self.q.len();
        let mut v: Vec<Vec<u64>> = Vec::with_capacity(l);
        for k in 0..l {
            let mk = &self.m[k];
            let row = rows.row(k);
            let mut t: Vec<u64> = at.iter().map(|&i| mk.reduce(row[i])).collect();
            for (vi, inv) in v.iter().zip(&self.inv) {
                let (c, c_shoup) = inv[k];
                for (tj, &vij) in t.iter_mut().zip(vi) {
                    *tj = mk.mul_shoup(mk.sub(*tj, mk.reduce(vij)), c, c_shoup);
                }
            }
            v.push(t);
        }
        v
    }

    /// Writes the residues of the coefficients with digit rows `v` (any values below
    /// 2^64: Shoup products take them unreduced) into the columns `at` of `rows`.
    fn residues(&self, v: &[Vec<u64>], rows: &mut Array2<u64>, at: &[usize]) {
        for (k, mut row) in rows.outer_iter_mut().enumerate() {
            let mk = &self.m[k];
            let mut acc = vec![0u64; at.len()];
            for (vi, pow) in v[..=k].iter().zip(&self.pow) {
                let (c, c_shoup) = pow[k];
                for (a, &x) in acc.iter_mut().zip(vi) {
                    *a = mk.add(*a, mk.mul_shoup(x, c, c_shoup));
                }
            }
            for (&i, a) in at.iter().zip(acc) {
                row[i] = a;
            }
        }
    }

    /// The digits the receiver rebuilds from the sent part: midpoints below, v_f's
    /// dropped bits at their midpoint (kept below q_f).
    fn midpoints(&self, d: Dropped, v: &mut [Vec<u64>]) {
        let f = d.limbs as usize;
        for (vi, &q) in v.iter_mut().zip(self.q).take(f) {
            vi.iter_mut().for_each(|x| *x = q / 2);
        }
        if d.bits > 0 {
            let half = 1u64 << (d.bits - 1);
            let top = self.q[f] - 1;
            for x in &mut v[f] {
                let base = (*x >> d.bits) << d.bits;
                *x = base + half.min(top - base);
            }
        }
    }
}

/// `w`-bit values (each below 2^w, 1 ≤ w ≤ 64) bit-packed least significant bit first,
/// padded to a byte: fhe-util's `transcode_to_bytes` layout, a word at a time.
fn pack_bits(values: &[u64], w: u32) -> Vec<u8> {
    let nbytes = (values.len() * w as usize).div_ceil(8);
    let mut out = vec![0u8; nbytes + 16];
    let mut bit = 0usize;
    for &v in values {
        let (at, shift) = (bit / 8, bit % 8);
        let mut window = [0u8; 16];
        window.copy_from_slice(&out[at..at + 16]);
        let merged = u128::from_le_bytes(window) | (v as u128) << shift;
        out[at..at + 16].copy_from_slice(&merged.to_le_bytes());
        bit += w as usize;
    }
    out.truncate(nbytes);
    out
}

/// The first `count` `w`-bit values of [`pack_bits`]'s layout (bits past the end read
/// as zero; the caller checks the length).
fn unpack_bits(bytes: &[u8], w: u32, count: usize) -> Vec<u64> {
    let mut padded = Vec::with_capacity(bytes.len() + 16);
    padded.extend_from_slice(bytes);
    padded.resize(bytes.len() + 16, 0);
    let mask = u64::MAX >> (64 - w);
    (0..count)
        .map(|i| {
            let bit = i * w as usize;
            let (at, shift) = (bit / 8, bit % 8);
            let mut window = [0u8; 16];
            window.copy_from_slice(&padded[at..at + 16]);
            ((u128::from_le_bytes(window) >> shift) as u64) & mask
        })
        .collect()
}

/// Rounds the coefficients at `at` (all when `None`) of the RNS rows in place: what the
/// receiver of [`pack`]ed rows rebuilds; returns the packed bytes (what [`pack`] writes
/// for the same rows and positions: the rounded rows have the same sent digits).
pub(crate) fn round_rows(
    moduli: &[u64],
    rows: &mut Array2<u64>,
    d: Dropped,
    at: Option<&[usize]>,
) -> Result<Vec<u8>> {
    check(moduli, d, "rounding")?;
    let r = Radix::new(moduli)?;
    let all: Vec<usize>;
    let at = match at {
        Some(at) => at,
        None => {
            all = (0..rows.ncols()).collect();
            &all
        }
    };
    let mut v = r.digits(rows.view(), at);
    let packed = pack_digits(moduli, d, &v);
    r.midpoints(d, &mut v);
    r.residues(&v, rows, at);
    Ok(packed)
}

/// The sent part of digit rows `v` (whole rows), bit-packed: [`pack`]'s wire form.
fn pack_digits(moduli: &[u64], d: Dropped, v: &[Vec<u64>]) -> Vec<u8> {
    let f = d.limbs as usize;
    let count = v.first().map_or(0, |r| r.len());
    let mut out = Vec::with_capacity(packed_len(moduli, d, count));
    for (i, (s, w)) in v[f..].iter().zip(widths(moduli, d)).enumerate() {
        if i == 0 && d.bits > 0 {
            let top: Vec<u64> = s.iter().map(|x| x >> d.bits).collect();
            out.extend(pack_bits(&top, w));
        } else {
            out.extend(pack_bits(s, w));
        }
    }
    out
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
    Ok(pack_digits(moduli, d, &r.digits(rows, at)))
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
    // the dropped digits (rebuilt as midpoints), then the sent ones
    let mut v: Vec<Vec<u64>> = vec![vec![0u64; at.len()]; f];
    let mut pos = 0;
    for (i, &w) in ws.iter().enumerate() {
        let len = (at.len() * w as usize).div_ceil(8);
        let mut s = unpack_bits(&bytes[pos..pos + len], w, at.len());
        pos += len;
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
        if i == 0 && d.bits > 0 {
            s.iter_mut().for_each(|x| *x <<= d.bits);
        }
        v.push(s);
    }
    r.midpoints(d, &mut v);
    let mut rows = Array2::<u64>::zeros((l, n));
    r.residues(&v, &mut rows, at);
    Ok(rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The word-at-a-time bit packing is fhe-util's transcoding, byte for byte.
    #[test]
    fn bit_packing_is_fhe_utils_layout() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for w in 1..=64u32 {
            for len in [0usize, 1, 7, 8, 13, 100] {
                let v: Vec<u64> = (0..len).map(|_| rng.random::<u64>() >> (64 - w)).collect();
                let ours = pack_bits(&v, w);
                if len > 0 {
                    assert_eq!(ours, fhe_util::transcode_to_bytes(&v, w as usize), "w {w}");
                }
                assert_eq!(unpack_bits(&ours, w, len), v, "w {w} len {len}");
            }
        }
    }
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
                    // (the bound is a sum of logarithms: 1e-9 bits of float slack)
                    assert!(
                        mag == 0.0 || mag.log2() <= bound + 1e-9,
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
