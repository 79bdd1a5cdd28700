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
/// chunks (no buffer of the size of the input), the chunks on the rayon pool (each
/// with its own hash scratch; `hash` serves a single chunk).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sender_pads_map<T: Send>(
    delta: u128,
    v: &[u128],
    first: u64,
    dir: u8,
    k: usize,
    hash: &mut Tccr,
    out: &mut Vec<T>,
    f: impl Fn(u128) -> T + Sync,
) {
    debug_assert!((1..=8).contains(&k));
    let inst = v.len() / k;
    let nodes = (1usize << k) - 1; // prefix-tree nodes per instance
    let per_chunk = (CHUNK_HASHES / (2 * nodes)).max(1);
    out.reserve(inst << k);
    let chunk = |hash: &mut Tccr, c: usize, out: &mut Vec<T>| {
        let i0 = c * per_chunk;
        let i1 = (i0 + per_chunk).min(inst);
        sender_chunk(
            delta,
            &v[i0 * k..i1 * k],
            first + (i0 * k) as u64,
            dir,
            k,
            hash,
            out,
            &f,
        );
    };
    in_chunks(inst.div_ceil(per_chunk), hash, out, chunk);
}

/// `sender_pads_map` of one chunk of instances (`v` holds whole instances, `first`
/// the global index of `v[0]`).
#[allow(clippy::too_many_arguments)]
fn sender_chunk<T>(
    delta: u128,
    v: &[u128],
    first: u64,
    dir: u8,
    k: usize,
    hash: &mut Tccr,
    out: &mut Vec<T>,
    f: &impl Fn(u128) -> T,
) {
    let inst = v.len() / k;
    let nodes = (1usize << k) - 1;
    let n = 1usize << k;
    // π(K) of each key once (`H(K, i) = π(π(K) ⊕ i) ⊕ π(K)`): a key serves 2^s
    // nodes, so 2k + 2(2^k − 1) AES calls per instance instead of 4(2^k − 1).
    let mut keys = Vec::with_capacity(inst * k * 2);
    for key in v {
        keys.push(*key);
        keys.push(key ^ delta);
    }
    hash.permute(&mut keys);
    let mut xs = Vec::with_capacity(inst * nodes * 2);
    for i in 0..inst {
        for s in 0..k {
            let g = first + (i * k + s) as u64;
            let at = 2 * (i * k + s);
            let (p0, p1) = (keys[at], keys[at + 1]);
            for pref in 0..1usize << s {
                let t = tweak(DOMAIN_POOL, dir, g, ((1usize << s) | pref) as u8);
                xs.push(p0 ^ t);
                xs.push(p1 ^ t);
            }
        }
    }
    hash.permute(&mut xs);
    let mut pads = [0u128; 256];
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
    keys.zeroize();
    xs.zeroize();
    pads.zeroize();
}

/// Runs `chunk(hash, c, out)` for chunks `c = 0..count` in order into `out`: on the
/// calling thread with `hash` when there is one chunk, else on the rayon pool, each
/// worker with a hash of its own, the chunks' outputs appended in order.
fn in_chunks<T: Send>(
    count: usize,
    hash: &mut Tccr,
    out: &mut Vec<T>,
    chunk: impl Fn(&mut Tccr, usize, &mut Vec<T>) + Sync,
) {
    use rayon::prelude::*;
    if count <= 1 {
        (0..count).for_each(|c| chunk(hash, c, out));
        return;
    }
    let parts: Vec<Vec<T>> = (0..count)
        .into_par_iter()
        .map_init(Tccr::new, |hash, c| {
            let mut part = Vec::new();
            chunk(hash, c, &mut part);
            part
        })
        .collect();
    for part in parts {
        out.extend(part);
    }
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
/// hashing in chunks, the chunks on the rayon pool as [`sender_pads_map`]'s.
#[allow(clippy::too_many_arguments)]
pub(crate) fn receiver_pads_map<T: Send>(
    w: &[u128],
    first: u64,
    dir: u8,
    k: usize,
    hash: &mut Tccr,
    choice: &mut Vec<u8>,
    out: &mut Vec<T>,
    f: impl Fn(u128) -> T + Sync,
) {
    debug_assert!((1..=8).contains(&k));
    let inst = w.len() / k;
    let per_chunk = (CHUNK_HASHES / k).max(1);
    choice.reserve(inst);
    out.reserve(inst);
    let mut both = Vec::with_capacity(inst);
    let chunk = |hash: &mut Tccr, c: usize, out: &mut Vec<(u8, T)>| {
        let i0 = c * per_chunk;
        let i1 = (i0 + per_chunk).min(inst);
        let w = &w[i0 * k..i1 * k];
        let first = first + (i0 * k) as u64;
        let mut xs = Vec::with_capacity(w.len());
        let mut tw = Vec::with_capacity(w.len());
        let mut cs = Vec::with_capacity(i1 - i0);
        for wi in w.chunks_exact(k) {
            let mut c = 0usize;
            for (s, ws) in wi.iter().enumerate() {
                c |= ((ws & 1) as usize) << s;
            }
            cs.push(c as u8);
        }
        for (i, (wi, &c)) in w.chunks_exact(k).zip(&cs).enumerate() {
            for (s, &ws) in wi.iter().enumerate() {
                let g = first + (i * k + s) as u64;
                let pref = c as usize & ((1 << s) - 1);
                xs.push(ws);
                tw.push(tweak(DOMAIN_POOL, dir, g, ((1usize << s) | pref) as u8));
            }
        }
        hash.hash(&mut xs, &tw);
        out.extend(
            xs.chunks_exact(k)
                .zip(cs)
                .map(|(h, c)| (c, f(h.iter().fold(0, |a, b| a ^ b)))),
        );
        xs.zeroize();
    };
    in_chunks(inst.div_ceil(per_chunk), hash, &mut both, chunk);
    for (c, p) in both {
        choice.push(c);
        out.push(p);
    }
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
