//! Random 1-of-2^k OT from `k` random COTs (k ≤ 8), the pads every OT of the crate
//! is built from.
//!
//! Construction: the Naor-Pinkas/CrypTFlow2 way of building 1-of-N OT from `log N`
//! 1-of-2 OTs, as in OpenCheetah's `SilentOTN` (`SCI/src/OT/silent_ot.h`): the `s`-th
//! COT `(v_s, w_s = v_s ⊕ c_s·Δ)` supplies the keys `K_s^b = v_s ⊕ b·Δ`, and the pad of
//! index `x` is
//!
//! `pad(x) = ⊕_{s<k} H(K_s^{x_s}, τ(s, x mod 2^s))`
//!
//! with `H` the tweakable correlation-robust hash of [`crate::hash`] and the tweak
//! naming the COT (its global index) and the node `2^s + (x mod 2^s)` of the prefix
//! tree. The receiver, holding `w_s = K_s^{c_s}`, computes `pad(c)` for its random
//! choice `c = (c_0, …)` only. For `x ≠ c` let `s*` be the highest bit where `x` and
//! `c` differ: the term at `s*` uses the unknown key `w_{s*} ⊕ Δ` with a tweak
//! (`s*`, `x mod 2^{s*}`) that no other `x'` shares (an `x` with highest difference `s*`
//! is determined by its low bits), so the `2^k − 1` other pads are jointly
//! pseudorandom. (A plain XOR of per-bit hashes, `⊕_s H(K_s^{x_s}, s)`, would not be:
//! four such pads XOR to a known value.)
//!
//! Cost per instance: `k` COTs; the sender hashes `2(2^k − 1)` times (with `π(K)`
//! computed once per key: `2k + 2(2^k − 1)` AES calls), the receiver `k` times.
//! Chosen-choice use sends `k` derandomisation bits `x ⊕ c` first.
//! Departure from SCI: its PRF is AES re-keyed with each ROT key (`MITCCRH`); here
//! the keys are the raw COT strings fed to the fixed-key TMMO hash with the node as
//! tweak, which needs no key schedule and keeps a single hash assumption.

use zeroize::Zeroize;

use crate::hash::{tweak, Tccr, DOMAIN_POOL};

/// Hashes per chunk (the scratch stays in the L1/L2 caches and small).
const CHUNK_HASHES: usize = 4096;

/// Sender: `2^k` pads per instance for `v.len() / k` instances (instance-major:
/// instance `i` uses `v[i·k .. i·k + k]`, bit `s` ↔ `v[i·k + s]`). `first` is the
/// global index of `v[0]`.
pub(crate) fn sender_pads(
    delta: u128,
    v: &[u128],
    first: u64,
    dir: u8,
    k: usize,
    hash: &mut Tccr,
) -> Vec<u128> {
    let mut out = Vec::with_capacity((v.len() / k) << k);
    sender_pads_map(delta, v, first, dir, k, hash, &mut out, |x| x);
    out
}

/// [`sender_pads`] with each pad mapped by `f` and appended to `out`, hashing in
/// chunks (no buffer of the size of the input), on the calling party's thread: with
/// the chunks on the rayon pool, where the other party's offline work also runs,
/// ResNet-50's offline phase took 4-12 s longer (BENCHMARKS.md, "the nonlinear
/// layers' online loops on both cores").
#[allow(clippy::too_many_arguments)]
pub(crate) fn sender_pads_map<T>(
    delta: u128,
    v: &[u128],
    first: u64,
    dir: u8,
    k: usize,
    hash: &mut Tccr,
    out: &mut Vec<T>,
    f: impl Fn(u128) -> T,
) {
    debug_assert!((1..=8).contains(&k));
    let inst = v.len() / k;
    let nodes = (1usize << k) - 1; // prefix-tree nodes per instance
    let n = 1usize << k;
    let per_chunk = (CHUNK_HASHES / (2 * nodes)).max(1);
    out.reserve(inst * n);
    // π(K) of each key once (`H(K, i) = π(π(K) ⊕ i) ⊕ π(K)`): a key serves 2^s
    // nodes, so 2k + 2(2^k − 1) AES calls per instance instead of 4(2^k − 1).
    let mut keys = Vec::with_capacity(per_chunk * k * 2);
    let mut xs = Vec::with_capacity(per_chunk * nodes * 2);
    let mut pads = [0u128; 256];
    let mut i0 = 0;
    while i0 < inst {
        let i1 = (i0 + per_chunk).min(inst);
        keys.clear();
        for key in &v[i0 * k..i1 * k] {
            keys.push(*key);
            keys.push(key ^ delta);
        }
        hash.permute(&mut keys);
        xs.clear();
        for i in i0..i1 {
            for s in 0..k {
                let g = first + (i * k + s) as u64;
                let at = 2 * ((i - i0) * k + s);
                let (p0, p1) = (keys[at], keys[at + 1]);
                for pref in 0..1usize << s {
                    let t = tweak(DOMAIN_POOL, dir, g, ((1usize << s) | pref) as u8);
                    xs.push(p0 ^ t);
                    xs.push(p1 ^ t);
                }
            }
        }
        hash.permute(&mut xs);
        let instances = xs.chunks_exact(2 * nodes).zip(keys.chunks_exact(2 * k));
        for (h, pk) in instances {
            // pad(x) by prefix doubling: P_{s+1}(x) = P_s(x mod 2^s) ⊕ H(K_s^{x_s},
            // node (s, x mod 2^s)), in place from the top so that P_s(low) is still
            // there when read; H = π(π(K) ⊕ node) ⊕ π(K), its second π(K) added here
            pads[0] = 0;
            let (mut width, mut node0) = (1usize, 0usize);
            for s in 0..k {
                for x in (0..2 * width).rev() {
                    let (low, bit) = (x & (width - 1), x >> s);
                    pads[x] = pads[low] ^ h[2 * (node0 + low) + bit] ^ pk[2 * s + bit];
                }
                node0 += width;
                width *= 2;
            }
            out.extend(pads[..n].iter().map(|&p| f(p)));
        }
        i0 = i1;
    }
    keys.zeroize();
    xs.zeroize();
    pads.zeroize();
}

/// Receiver: the random choice `c` (bit `s` = `lsb(w[i·k + s])`) and `pad(c)` of each
/// instance.
pub(crate) fn receiver_pads(
    w: &[u128],
    first: u64,
    dir: u8,
    k: usize,
    hash: &mut Tccr,
) -> (Vec<u8>, Vec<u128>) {
    let inst = w.len() / k;
    let (mut c, mut p) = (Vec::with_capacity(inst), Vec::with_capacity(inst));
    receiver_pads_map(w, first, dir, k, hash, &mut c, &mut p, |x| x);
    (c, p)
}

/// [`receiver_pads`] with each pad mapped by `f`, appended to `choice` and `out`,
/// hashing in chunks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn receiver_pads_map<T>(
    w: &[u128],
    first: u64,
    dir: u8,
    k: usize,
    hash: &mut Tccr,
    choice: &mut Vec<u8>,
    out: &mut Vec<T>,
    f: impl Fn(u128) -> T,
) {
    debug_assert!((1..=8).contains(&k));
    let inst = w.len() / k;
    let per_chunk = (CHUNK_HASHES / k).max(1);
    choice.reserve(inst);
    out.reserve(inst);
    let mut xs = Vec::with_capacity(per_chunk * k);
    let mut tw = Vec::with_capacity(per_chunk * k);
    let mut i0 = 0;
    while i0 < inst {
        let i1 = (i0 + per_chunk).min(inst);
        xs.clear();
        tw.clear();
        for i in i0..i1 {
            let mut c = 0usize;
            for s in 0..k {
                c |= ((w[i * k + s] & 1) as usize) << s;
            }
            choice.push(c as u8);
            for s in 0..k {
                let g = first + (i * k + s) as u64;
                let pref = c & ((1 << s) - 1);
                xs.push(w[i * k + s]);
                tw.push(tweak(DOMAIN_POOL, dir, g, ((1usize << s) | pref) as u8));
            }
        }
        hash.hash(&mut xs, &tw);
        out.extend(
            xs.chunks_exact(k)
                .map(|h| f(h.iter().fold(0, |a, b| a ^ b))),
        );
        i0 = i1;
    }
    xs.zeroize();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn receiver_gets_the_pad_of_its_choice_only() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let delta = rng.random::<u128>() | 1;
        for k in 1..=8 {
            let inst = 20;
            let v: Vec<u128> = (0..inst * k).map(|_| rng.random::<u128>() & !1).collect();
            let c: Vec<bool> = (0..inst * k).map(|_| rng.random()).collect();
            let w: Vec<u128> = v
                .iter()
                .zip(&c)
                .map(|(v, &c)| if c { v ^ delta } else { *v })
                .collect();
            let mut h = Tccr::new();
            let pads = sender_pads(delta, &v, 100, 1, k, &mut h);
            let (ch, pc) = receiver_pads(&w, 100, 1, k, &mut h);
            for i in 0..inst {
                let n = 1 << k;
                let row = &pads[i * n..(i + 1) * n];
                assert_eq!(row[ch[i] as usize], pc[i]);
                let mut sorted = row.to_vec();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), n, "pads of one instance are distinct");
            }
        }
    }
}
