//! Half-gates garbling and evaluation (Zahur, Rosulek, Evans, "Two halves make a
//! whole", EUROCRYPT 2015) with free-XOR (Kolesnikov-Schneider) and
//! point-and-permute.
//!
//! Each AND gate costs two ciphertexts `(T_G, T_E)`; the garbler makes four hash
//! calls per AND gate and the evaluator two. A layer is `count` copies of the same
//! per-element [`Circuit`]; copies are processed in chunks of [`CHUNK`] elements
//! gate by gate, so every hash call of a gate over a chunk is one batch of AES
//! blocks (AES-NI pipelines them). The tables are laid out chunk by chunk, then
//! gate by gate, then element by element; the hash tweak of a gate instance is
//! `2·k` and `2·k + 1` for its position `k` in that order, unique in the layer.

use crate::circuit::{Bit, Circuit, Gate};
use crate::error::{GcError, Result};
use crate::label::{lsb, mask, Block, FixedKeyAes};

/// Elements garbled side by side.
pub const CHUNK: usize = 64;

/// Garbles `count` copies of `c` with offset `delta` (lsb 1).
/// `evaluator_zero` holds `count × c.evaluator_inputs` zero labels (element-major),
/// `garbler_zero` `count × c.garbler_inputs`. Returns the tables (`2 × ANDs × count`
/// blocks) and the output decoding bits (`count × outputs`): output value = lsb(label) ⊕ bit.
pub fn garble(
    c: &Circuit,
    count: usize,
    delta: Block,
    evaluator_zero: &[Block],
    garbler_zero: &[Block],
    hash: &FixedKeyAes,
) -> (Vec<Block>, Vec<bool>) {
    let (ne, ng, ni) = (c.evaluator_inputs, c.garbler_inputs, c.inputs());
    debug_assert_eq!(evaluator_zero.len(), ne * count);
    debug_assert_eq!(garbler_zero.len(), ng * count);
    let ands = c.and_gates() as usize;
    let mut tables = Vec::with_capacity(2 * ands * count);
    let mut decode = Vec::with_capacity(c.outputs.len() * count);
    let mut w = vec![0u128; c.wires() * CHUNK];
    let mut hx = vec![0u128; 4 * CHUNK];
    let mut tw = vec![0u128; 4 * CHUNK];
    let mut scratch = Vec::with_capacity(4 * CHUNK);
    let mut k: u128 = 0;
    let zero_of = |w: &[Block], b: Bit, e: usize| -> Block {
        match b {
            Bit::Const(_) => 0,
            Bit::Wire { id, neg } => w[id as usize * CHUNK + e] ^ (mask(neg) & delta),
        }
    };
    let mut start = 0;
    while start < count {
        let m = CHUNK.min(count - start);
        for e in 0..m {
            for i in 0..ne {
                w[i * CHUNK + e] = evaluator_zero[(start + e) * ne + i];
            }
            for i in 0..ng {
                w[(ne + i) * CHUNK + e] = garbler_zero[(start + e) * ng + i];
            }
        }
        for (gi, g) in c.gates.iter().enumerate() {
            let o = (ni + gi) * CHUNK;
            match *g {
                Gate::Xor { a, b } => {
                    let (a, b) = (a as usize * CHUNK, b as usize * CHUNK);
                    for e in 0..m {
                        w[o + e] = w[a + e] ^ w[b + e];
                    }
                }
                Gate::And { a, na, b, nb } => {
                    let (ma, mb) = (mask(na) & delta, mask(nb) & delta);
                    let (a, b) = (a as usize * CHUNK, b as usize * CHUNK);
                    for e in 0..m {
                        let a0 = w[a + e] ^ ma;
                        let b0 = w[b + e] ^ mb;
                        let j = 2 * (k + e as u128);
                        hx[4 * e] = a0;
                        hx[4 * e + 1] = a0 ^ delta;
                        hx[4 * e + 2] = b0;
                        hx[4 * e + 3] = b0 ^ delta;
                        tw[4 * e] = j;
                        tw[4 * e + 1] = j;
                        tw[4 * e + 2] = j + 1;
                        tw[4 * e + 3] = j + 1;
                    }
                    hash.hash_batch(&mut hx[..4 * m], &tw[..4 * m], &mut scratch);
                    for e in 0..m {
                        let a0 = w[a + e] ^ ma;
                        let b0 = w[b + e] ^ mb;
                        let (pa, pb) = (mask(lsb(a0)), mask(lsb(b0)));
                        let (ha0, ha1, hb0, hb1) =
                            (hx[4 * e], hx[4 * e + 1], hx[4 * e + 2], hx[4 * e + 3]);
                        // garbler half
                        let tg = ha0 ^ ha1 ^ (pb & delta);
                        let wg = ha0 ^ (pa & tg);
                        // evaluator half
                        let te = hb0 ^ hb1 ^ a0;
                        let we = hb0 ^ (pb & (te ^ a0));
                        tables.push(tg);
                        tables.push(te);
                        w[o + e] = wg ^ we;
                    }
                    k += m as u128;
                }
            }
        }
        for e in 0..m {
            for &b in &c.outputs {
                decode.push(match b {
                    Bit::Const(v) => v,
                    Bit::Wire { .. } => lsb(zero_of(&w, b, e)),
                });
            }
        }
        start += m;
    }
    (tables, decode)
}

/// Evaluates `count` copies of `c` on one label per input wire; `tables` and
/// `decode` as produced by [`garble`]. Returns the output bits, element-major,
/// or [`GcError::Length`] if a slice has the wrong length.
pub fn evaluate(
    c: &Circuit,
    count: usize,
    evaluator_labels: &[Block],
    garbler_labels: &[Block],
    tables: &[Block],
    decode: &[bool],
    hash: &FixedKeyAes,
) -> Result<Vec<bool>> {
    let (ne, ng, ni) = (c.evaluator_inputs, c.garbler_inputs, c.inputs());
    for (what, expected, actual) in [
        ("evaluator input labels", ne * count, evaluator_labels.len()),
        ("garbler input labels", ng * count, garbler_labels.len()),
        (
            "garbled table blocks",
            2 * c.and_gates() as usize * count,
            tables.len(),
        ),
        (
            "output decoding bits",
            c.outputs.len() * count,
            decode.len(),
        ),
    ] {
        if expected != actual {
            return Err(GcError::Length {
                what,
                expected: expected as u64,
                actual: actual as u64,
            });
        }
    }
    let mut out = Vec::with_capacity(c.outputs.len() * count);
    let mut w = vec![0u128; c.wires() * CHUNK];
    let mut hx = vec![0u128; 2 * CHUNK];
    let mut tw = vec![0u128; 2 * CHUNK];
    let mut scratch = Vec::with_capacity(2 * CHUNK);
    let mut k: usize = 0;
    let mut start = 0;
    while start < count {
        let m = CHUNK.min(count - start);
        for e in 0..m {
            for i in 0..ne {
                w[i * CHUNK + e] = evaluator_labels[(start + e) * ne + i];
            }
            for i in 0..ng {
                w[(ne + i) * CHUNK + e] = garbler_labels[(start + e) * ng + i];
            }
        }
        for (gi, g) in c.gates.iter().enumerate() {
            let o = (ni + gi) * CHUNK;
            match *g {
                Gate::Xor { a, b } => {
                    let (a, b) = (a as usize * CHUNK, b as usize * CHUNK);
                    for e in 0..m {
                        w[o + e] = w[a + e] ^ w[b + e];
                    }
                }
                Gate::And { a, b, .. } => {
                    let (a, b) = (a as usize * CHUNK, b as usize * CHUNK);
                    for e in 0..m {
                        let j = 2 * (k + e) as u128;
                        hx[2 * e] = w[a + e];
                        hx[2 * e + 1] = w[b + e];
                        tw[2 * e] = j;
                        tw[2 * e + 1] = j + 1;
                    }
                    hash.hash_batch(&mut hx[..2 * m], &tw[..2 * m], &mut scratch);
                    for e in 0..m {
                        let (la, lb) = (w[a + e], w[b + e]);
                        let (tg, te) = (tables[2 * (k + e)], tables[2 * (k + e) + 1]);
                        let wg = hx[2 * e] ^ (mask(lsb(la)) & tg);
                        let we = hx[2 * e + 1] ^ (mask(lsb(lb)) & (te ^ la));
                        w[o + e] = wg ^ we;
                    }
                    k += m;
                }
            }
        }
        for e in 0..m {
            for (oi, &b) in c.outputs.iter().enumerate() {
                let d = decode[(start + e) * c.outputs.len() + oi];
                out.push(match b {
                    Bit::Const(v) => v,
                    Bit::Wire { id, .. } => lsb(w[id as usize * CHUNK + e]) ^ d,
                });
            }
        }
        start += m;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::{from_bits, to_bits, Builder};
    use crate::label::random_blocks;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn garbled_add_mod_matches_plain() {
        let p = 1032193u64;
        let l = 20;
        let (mut b, e, g) = Builder::new(l, l);
        let s = b.add_mod(&e, &g, p);
        let sg = b.sign(&s, p);
        let mut out = b.relu(&s, sg);
        out.push(!sg);
        let c = b.finish(out);
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let count = 150;
        let delta = rng.random::<u128>() | 1;
        let ez = random_blocks(&mut rng, l * count);
        let gz = random_blocks(&mut rng, l * count);
        let h = FixedKeyAes::new();
        let (tables, decode) = garble(&c, count, delta, &ez, &gz, &h);
        assert_eq!(tables.len() as u64, 2 * c.and_gates() * count as u64);
        let xs: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
        let ys: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
        let mut el = Vec::new();
        let mut gl = Vec::new();
        for i in 0..count {
            for (j, bit) in to_bits(xs[i], l).into_iter().enumerate() {
                el.push(ez[i * l + j] ^ (mask(bit) & delta));
            }
            for (j, bit) in to_bits(ys[i], l).into_iter().enumerate() {
                gl.push(gz[i * l + j] ^ (mask(bit) & delta));
            }
        }
        let out = evaluate(&c, count, &el, &gl, &tables, &decode, &h).expect("lengths match");
        assert!(evaluate(&c, count, &el, &gl, &tables[1..], &decode, &h).is_err());
        let no = c.outputs.len();
        for i in 0..count {
            let bits = &out[i * no..(i + 1) * no];
            let plain = c.eval_plain(&to_bits(xs[i], l), &to_bits(ys[i], l));
            assert_eq!(bits, &plain[..]);
            let y = (xs[i] + ys[i]) % p;
            let want = if y > p / 2 { 0 } else { y };
            assert_eq!(from_bits(&bits[..l]), want);
        }
    }
}
