#![allow(clippy::unwrap_used)]
//! Coefficient encoding on every backend: products are negacyclic polynomial products
//! in Z_p[X]/(X^n + 1) (checked against a schoolbook reference), weights are lifted
//! centred (a weight −1 given as p − 1 costs no noise), the simulator refuses to mix
//! encodings, and the three backends count the same operations.

mod common;

use common::*;
use he::{random_slots, Backend, Bfv, Count, Counting, Encoding, GaloisSpec, HeError, Sim};
use rand::Rng;

/// Independent reference: the negacyclic product a·b mod (X^n + 1, p), schoolbook.
fn negacyclic(a: &[u64], b: &[u64], p: u64) -> Vec<u64> {
    let n = a.len();
    let mut out = vec![0i128; n];
    for i in 0..n {
        if a[i] == 0 {
            continue;
        }
        for j in 0..n {
            let v = a[i] as i128 * b[j] as i128;
            if i + j < n {
                out[i + j] += v;
            } else {
                out[i + j - n] -= v;
            }
        }
    }
    out.iter().map(|v| v.rem_euclid(p as i128) as u64).collect()
}

fn add(a: &[u64], b: &[u64], p: u64) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| (x + y) % p).collect()
}

/// Sparse random polynomial: `k` random non-zero coefficients (and the extremes ±p/2).
fn sparse(n: usize, k: usize, p: u64, seed: u64) -> Vec<u64> {
    let mut r = rng(seed);
    let mut v = vec![0u64; n];
    for _ in 0..k {
        v[r.random_range(0..n)] = r.random_range(0..p);
    }
    v[n - 1] = p - 1; // −1
    v[n / 2] = p / 2; // the largest centred magnitude
    v[n / 2 + 1] = p / 2 + 1; // −p/2 (p odd)
    v
}

#[test]
fn bfv_and_sim_multiply_polynomials_negacyclically() {
    let b = client();
    let s = sim();
    let (n, p) = (params().n(), params().p());
    let x1 = random_slots(n, p, &mut rng(1));
    let x2 = sparse(n, 40, p, 2);
    let w1 = sparse(n, 30, p, 3);
    let w2 = sparse(n, 50, p, 4);
    let want = add(&negacyclic(&x1, &w1, p), &negacyclic(&x2, &w2, p), p);

    let c1 = b.encrypt_sym(&b.encode_coeffs(&x1).unwrap()).unwrap();
    let c2 = b.encrypt_pk(&b.encode_coeffs(&x2).unwrap()).unwrap();
    let (p1, p2) = (
        b.prepare_coeffs(&w1).unwrap(),
        b.prepare_coeffs(&w2).unwrap(),
    );
    let prod = b.dot_coeffs(&[&c1, &c2], &[&p1, &p2]).unwrap();
    assert_eq!(b.decrypt_coeffs(&prod).unwrap(), want);
    // After the switch to the last level too.
    let low = b.switch_to_last(&prod).unwrap();
    assert_eq!(b.decrypt_coeffs(&low).unwrap(), want);
    // Plain additions in coefficient encoding.
    let r = random_slots(n, p, &mut rng(5));
    let masked = b.add_plain(&prod, &b.encode_coeffs(&r).unwrap()).unwrap();
    assert_eq!(b.decrypt_coeffs(&masked).unwrap(), add(&want, &r, p));

    let d1 = s.encrypt_sym(&s.encode_coeffs(&x1).unwrap()).unwrap();
    let d2 = s.encrypt_pk(&s.encode_coeffs(&x2).unwrap()).unwrap();
    let (q1, q2) = (
        s.prepare_coeffs(&w1).unwrap(),
        s.prepare_coeffs(&w2).unwrap(),
    );
    let sp = s.dot_coeffs(&[&d1, &d2], &[&q1, &q2]).unwrap();
    assert_eq!(s.decrypt_coeffs(&sp).unwrap(), want);
}

#[test]
fn sim_without_a_transform_multiplies_by_schoolbook() {
    // p ≡ 1 mod 2048 but not mod 4096: no negacyclic NTT of length 2048 mod p.
    let p = 12289;
    let n = 2048;
    let s = Sim::ideal(n, p, GaloisSpec::none());
    let x = sparse(n, 100, p, 6);
    let w = sparse(n, 100, p, 7);
    let c = s.encrypt_sym(&s.encode_coeffs(&x).unwrap()).unwrap();
    let prod = s
        .dot_coeffs(&[&c], &[&s.prepare_coeffs(&w).unwrap()])
        .unwrap();
    assert_eq!(s.decrypt_coeffs(&prod).unwrap(), negacyclic(&x, &w, p));
    // and with a transform (p ≡ 1 mod 4096), the same result
    let q = he::batching_prime(20, n).unwrap();
    let t = Sim::ideal(n, q, GaloisSpec::none());
    let xq: Vec<u64> = x.iter().map(|v| v % q).collect();
    let wq: Vec<u64> = w.iter().map(|v| v % q).collect();
    let c = t.encrypt_sym(&t.encode_coeffs(&xq).unwrap()).unwrap();
    let prod = t
        .dot_coeffs(&[&c], &[&t.prepare_coeffs(&wq).unwrap()])
        .unwrap();
    assert_eq!(t.decrypt_coeffs(&prod).unwrap(), negacyclic(&xq, &wq, q));
}

/// Weights given as p − 1 multiply as −1: the product of a fresh encryption by a dense
/// polynomial of −1s keeps nearly the budget of one by +1s (an unsigned lift would
/// multiply the noise by p ≈ 2^20 and lose ~20 bits).
#[test]
fn signed_weights_are_lifted_centred() {
    let b = client();
    let (n, p) = (params().n(), params().p());
    let x = random_slots(n, p, &mut rng(8));
    let ct = b.encrypt_sym(&b.encode_coeffs(&x).unwrap()).unwrap();
    let budget = |w: &[u64]| {
        let prod = b
            .dot_coeffs(&[&ct], &[&b.prepare_coeffs(w).unwrap()])
            .unwrap();
        assert_eq!(b.decrypt_coeffs(&prod).unwrap(), negacyclic(&x, w, p));
        b.noise_budget(&prod).unwrap().unwrap() as i64
    };
    let dense = |v: u64| -> Vec<u64> { (0..n).map(|i| if i < 64 { v } else { 0 }).collect() };
    let plus = budget(&dense(1));
    let minus = budget(&dense(p - 1));
    eprintln!("budget after a product by 64 coefficients +1: {plus} bits, −1: {minus} bits");
    assert!(
        (plus - minus).abs() <= 2,
        "+1: {plus} bits, −1: {minus} bits"
    );
}

#[test]
fn the_simulator_refuses_to_mix_encodings() {
    let s = sim();
    let slot = s.encrypt_sym(&s.encode(&[1, 2]).unwrap()).unwrap();
    let coef = s.encrypt_sym(&s.encode_coeffs(&[1, 2]).unwrap()).unwrap();
    assert_eq!(coef.encoding(), Some(Encoding::Coeffs));
    let mismatch = |r: Result<_, HeError>| matches!(r, Err(HeError::EncodingMismatch { .. }));
    assert!(mismatch(s.add(&slot, &coef).map(|_| ())));
    assert!(mismatch(s.rotate_rows(&coef, 1).map(|_| ())));
    assert!(mismatch(s.hoist(&coef).map(|_| ())));
    assert!(mismatch(s.decrypt(&coef).map(|_| ())));
    assert!(mismatch(s.decrypt_coeffs(&slot).map(|_| ())));
    let wc = s.prepare_coeffs(&[3]).unwrap();
    let ws = s.prepare(&[3]).unwrap();
    assert!(mismatch(s.mul_plain(&coef, &ws).map(|_| ())));
    assert!(mismatch(s.mul_plain(&slot, &wc).map(|_| ())));
    assert!(mismatch(s.dot_coeffs(&[&slot], &[&wc]).map(|_| ())));
    assert!(mismatch(s.dot_coeffs(&[&coef], &[&ws]).map(|_| ())));
    assert!(mismatch(
        s.add_plain(&coef, &s.encode(&[1]).unwrap()).map(|_| ())
    ));
    // An encryption of zero (the flooding zeros) goes with either encoding.
    let zero = s.encrypt_zero_flood(10).unwrap();
    assert_eq!(zero.encoding(), None);
    let sum = s.add(&coef, &zero).unwrap();
    assert_eq!(s.decrypt_coeffs(&sum).unwrap()[..2], [1, 2]);
    assert_eq!(
        s.decrypt(&s.add(&slot, &zero).unwrap()).unwrap()[..2],
        [1, 2]
    );
    // The encoding survives the wire and stored plaintexts.
    let back = s.deserialize(&s.serialize(&coef).unwrap()).unwrap();
    assert_eq!(back, coef);
    let wb = s
        .prepared_from_bytes(&s.prepared_to_bytes(&wc).unwrap())
        .unwrap();
    assert_eq!(wb, wc);
    let mut bad = s.serialize(&coef).unwrap();
    bad[2] = 7;
    assert!(matches!(
        s.deserialize(&bad),
        Err(HeError::Malformed { .. })
    ));
}

#[test]
fn coefficient_ops_count_the_same_on_every_backend() {
    fn workload<B: Backend>(b: &B) -> usize {
        let n = b.slots().n;
        let x = vec![1u64; n];
        let c = b.encrypt_sym(&b.encode_coeffs(&x).unwrap()).unwrap();
        let w = b.prepare_coeffs(&x).unwrap();
        let w2 = b.prepare_coeffs(&x[..3]).unwrap();
        let d = b.dot_coeffs(&[&c, &c], &[&w, &w2]).unwrap();
        let last = b.switch_to_last(&d).unwrap();
        let sel = b.select_coeffs(&last, &[1..4, 9..10]).unwrap();
        b.decrypt_coeffs(&sel).unwrap();
        b.wire_size(&sel)
    }
    let bfv = Counting::new(Bfv::keygen(params(), GaloisSpec::none()).unwrap());
    let s = Counting::new(Sim::new(params(), GaloisSpec::none()));
    let c = Count::real(params(), GaloisSpec::none());
    let sizes = [workload(&bfv), workload(&s), workload(&c)];
    assert_eq!(sizes, [sizes[0]; 3]);
    assert_eq!(
        sizes[0],
        params().selected_ct_wire_size(params().last_level(), 2, 4)
    );
    let k = c.counts();
    assert_eq!(bfv.counts(), k);
    assert_eq!(s.counts(), k);
    // NTTs: encode 1, prepare 2, switch 2·2, select 1; iNTTs: switch 2·2, select 1,
    // decrypt 1.
    assert_eq!(
        (k.sc_mult, k.add, k.fused_add, k.ntt, k.intt, k.decrypt),
        (2, 1, 1, 8, 6, 1)
    );
    assert_eq!(k.rotations() + k.dec_perm, 0);
}

/// Test-side mirror of the ciphertext wire message (fhe.rs's three fields + helina's
/// runs), to corrupt selected ciphertexts.
#[derive(Clone, PartialEq, prost::Message)]
struct Wire {
    #[prost(bytes = "vec", repeated, tag = "1")]
    c: Vec<Vec<u8>>,
    #[prost(bytes = "vec", tag = "2")]
    seed: Vec<u8>,
    #[prost(uint32, tag = "3")]
    level: u32,
    #[prost(fixed32, repeated, tag = "4")]
    keep: Vec<u32>,
}

#[test]
fn selected_ciphertexts_carry_only_the_kept_coefficients() {
    use prost::Message;
    let b = client();
    let s = sim();
    let (n, p) = (params().n(), params().p());
    let last = params().last_level();
    let x = random_slots(n, p, &mut rng(9));
    let w = sparse(n, 20, p, 10);
    let keep = vec![0..1, 7..20, 100..101, n - 3..n];
    let kept = 1 + 13 + 1 + 3;
    let want = negacyclic(&x, &w, p);

    let c = b.encrypt_sym(&b.encode_coeffs(&x).unwrap()).unwrap();
    let prod = b
        .dot_coeffs(&[&c], &[&b.prepare_coeffs(&w).unwrap()])
        .unwrap();
    let low = b.switch_to_last(&prod).unwrap();
    let sel = b.select_coeffs(&low, &keep).unwrap();
    let bytes = b.serialize(&sel).unwrap();
    assert_eq!(bytes.len(), b.wire_size(&sel));
    assert_eq!(
        bytes.len(),
        params().selected_ct_wire_size(last, keep.len(), kept)
    );
    let full = b.serialize(&low).unwrap().len();
    assert!(bytes.len() * 100 < full * 55, "{} of {full}", bytes.len());
    let back = b.deserialize(&bytes).unwrap();
    assert_eq!(b.level(&back), last);
    let got = b.decrypt_coeffs(&back).unwrap();
    for r in &keep {
        assert_eq!(got[r.clone()], want[r.clone()]);
    }
    // Everything but coefficient decryption and the wire refuses it; its noise is
    // not measured.
    let sel_err = |r: Result<(), HeError>| matches!(r, Err(HeError::Selected { .. }));
    assert!(sel_err(b.add(&back, &back).map(|_| ())));
    assert!(sel_err(b.decrypt(&back).map(|_| ())));
    assert_eq!(b.noise_budget(&back).unwrap(), None);
    assert!(sel_err(b.switch_to_last(&back).map(|_| ())));
    assert!(sel_err(b.select_coeffs(&back, &keep).map(|_| ())));
    // Bad runs: typed errors.
    let run = |start: usize, end: usize| std::ops::Range { start, end };
    for bad in [
        vec![run(5, 3)],
        vec![run(0, 5), run(3, 8)],
        vec![run(n - 1, n + 1)],
        vec![run(4, 4)],
    ] {
        assert!(matches!(
            b.select_coeffs(&low, &bad),
            Err(HeError::BadRuns { .. })
        ));
    }
    // Corrupted wire forms: typed errors, never a panic.
    let wire = Wire::decode(bytes.as_slice()).unwrap();
    let mut variants = Vec::new();
    let mut odd = wire.clone();
    odd.keep.pop();
    variants.push(odd);
    let mut overlap = wire.clone();
    overlap.keep[3] = 3; // 7..20 becomes 7..3
    variants.push(overlap);
    let mut beyond = wire.clone();
    let last_end = beyond.keep.len() - 1;
    beyond.keep[last_end] = n as u32 + 8;
    variants.push(beyond);
    let mut short = wire.clone();
    let len = short.c[0].len();
    short.c[0].truncate(len - 3);
    variants.push(short);
    let mut huge = wire.clone();
    huge.keep = (0..2 * n as u32 + 2).collect();
    variants.push(huge);
    let mut seeded = wire.clone();
    seeded.seed = vec![0; 32];
    variants.push(seeded);
    for v in variants {
        assert!(matches!(
            b.deserialize(&v.encode_to_vec()),
            Err(HeError::Malformed { .. })
        ));
    }

    // The simulator: the same wire size, the kept coefficients only.
    let sc = s.encrypt_sym(&s.encode_coeffs(&x).unwrap()).unwrap();
    let sp = s
        .dot_coeffs(&[&sc], &[&s.prepare_coeffs(&w).unwrap()])
        .unwrap();
    let ssel = s
        .select_coeffs(&s.switch_to_last(&sp).unwrap(), &keep)
        .unwrap();
    assert_eq!(s.wire_size(&ssel), bytes.len());
    let sback = s.deserialize(&s.serialize(&ssel).unwrap()).unwrap();
    assert_eq!(sback, ssel);
    let sgot = s.decrypt_coeffs(&sback).unwrap();
    for (i, v) in sgot.iter().enumerate() {
        let inside = keep.iter().any(|r| r.contains(&i));
        assert_eq!(*v, if inside { want[i] } else { 0 });
    }
    assert!(sel_err(s.add(&sback, &sback).map(|_| ())));
}

/// Each output's terms encoded in `encoding` and encrypted (symmetric, top level).
fn encrypt_terms<B: Backend>(
    b: &B,
    inputs: &[Vec<Vec<u64>>],
    encoding: Encoding,
) -> Vec<Vec<B::Ct>> {
    inputs
        .iter()
        .map(|xs| {
            xs.iter()
                .map(|x| {
                    let pt = match encoding {
                        Encoding::Coeffs => b.encode_coeffs_at(x, 0).unwrap(),
                        Encoding::Slots => b.encode(x).unwrap(),
                    };
                    b.encrypt_sym(&pt).unwrap()
                })
                .collect()
        })
        .collect()
}

/// Σ_i w_i·x_i mod p: schoolbook negacyclic products (coefficient encoding) or
/// slot-wise products (slot encoding).
fn plaintext_sum(encoding: Encoding, w: &[Vec<u64>], xs: &[Vec<u64>], p: u64) -> Vec<u64> {
    let n = xs[0].len();
    match encoding {
        Encoding::Coeffs => (0..w.len()).fold(vec![0; n], |acc, i| {
            add(&acc, &negacyclic(&w[i], &xs[i], p), p)
        }),
        Encoding::Slots => (0..n)
            .map(|k| {
                (0..w.len()).fold(0u64, |acc, i| {
                    ((acc as u128 + xs[i][k] as u128 * w[i][k] as u128) % p as u128) as u64
                })
            })
            .collect(),
    }
}

/// A fused sum over more terms than BFV's 128-bit sums take between two reductions
/// (16): 37 terms, three outputs, against the schoolbook negacyclic products in
/// coefficient encoding and slot-wise products mod p in slot encoding.
#[test]
fn fused_sums_over_many_terms_equal_the_plaintext_sums() {
    let b = client();
    let (n, p) = (params().n(), params().p());
    let terms = 37;
    let weights: Vec<Vec<u64>> = (0..terms)
        .map(|i| sparse(n, 3, p, 700 + i as u64))
        .collect();
    let fill = |i: usize, v: &mut [u64]| v.copy_from_slice(&weights[i]);
    let inputs: Vec<Vec<Vec<u64>>> = (0..3)
        .map(|t| {
            (0..terms)
                .map(|i| random_slots(n, p, &mut rng(900 + (terms * t + i) as u64)))
                .collect()
        })
        .collect();
    for encoding in [Encoding::Coeffs, Encoding::Slots] {
        let cts = encrypt_terms(b, &inputs, encoding);
        let refs: Vec<Vec<&he::BfvCt>> = cts.iter().map(|c| c.iter().collect()).collect();
        let out = b.dot_encoded(encoding, 0, terms, &fill, &refs).unwrap();
        assert_eq!(out.len(), 3);
        for (t, (o, xs)) in out.iter().zip(&inputs).enumerate() {
            let got = match encoding {
                Encoding::Coeffs => b.decrypt_coeffs(o).unwrap(),
                Encoding::Slots => b.decrypt(o).unwrap(),
            };
            let want = plaintext_sum(encoding, &weights, xs, p);
            assert_eq!(got, want, "{encoding:?}, output {t}");
        }
    }
}

/// A fused sum long enough to be reduced on the way: with 60-bit moduli (n8192-q164)
/// BFV's 128-bit sums take 64 products between two reductions, and 1202 terms (blocks
/// of four, the last one short) would overflow 128 bits without them (products of
/// uniform residues average 2^118). Two outputs share the plaintexts (weights at ±p/2
/// among them), each term reads one of five ciphertexts; against the schoolbook
/// negacyclic sums mod p.
#[test]
fn fused_sums_reduced_on_the_way_equal_the_plaintext_sums() {
    let params = he::Params::preset("n8192-q164").unwrap();
    assert!(params.moduli().iter().any(|q| q.ilog2() >= 59));
    let b = Bfv::keygen(&params, GaloisSpec::none()).unwrap();
    let (n, p) = (params.n(), params.p());
    let (terms, distinct) = (1202, 5);
    let weights: Vec<Vec<u64>> = (0..terms)
        .map(|i| sparse(n, 2, p, 3000 + i as u64))
        .collect();
    let fill = |i: usize, v: &mut [u64]| v.copy_from_slice(&weights[i]);
    let inputs: Vec<Vec<Vec<u64>>> = (0..2)
        .map(|t| {
            (0..distinct)
                .map(|k| random_slots(n, p, &mut rng(5000 + (distinct * t + k) as u64)))
                .collect()
        })
        .collect();
    let cts: Vec<Vec<he::BfvCt>> = inputs
        .iter()
        .map(|xs| {
            xs.iter()
                .map(|x| b.encrypt_sym(&b.encode_coeffs_at(x, 0).unwrap()).unwrap())
                .collect()
        })
        .collect();
    let refs: Vec<Vec<&he::BfvCt>> = cts
        .iter()
        .map(|c| (0..terms).map(|i| &c[i % distinct]).collect())
        .collect();
    let out = b
        .dot_encoded(Encoding::Coeffs, 0, terms, &fill, &refs)
        .unwrap();
    assert_eq!(out.len(), 2);
    // Σ_i w_i·x_(i mod 5) = Σ_k (Σ_(i ≡ k) w_i)·x_k
    let class_weights: Vec<Vec<u64>> = (0..distinct)
        .map(|k| {
            (k..terms)
                .step_by(distinct)
                .fold(vec![0; n], |acc, i| add(&acc, &weights[i], p))
        })
        .collect();
    for (t, (o, xs)) in out.iter().zip(&inputs).enumerate() {
        let want = (0..distinct).fold(vec![0; n], |acc, k| {
            add(&acc, &negacyclic(&class_weights[k], &xs[k], p), p)
        });
        assert_eq!(b.decrypt_coeffs(o).unwrap(), want, "output {t}");
    }
}

/// `dot_encoded` (weights encoded on the fly; BFV fuses the encoding into the
/// products) against the schoolbook reference, at the top level and one below, for
/// several outputs sharing the plaintexts, and against slot-wise products in slot
/// encoding; the same counts as preparing every plaintext
/// and one fused sum per output, on every backend; bad values and shapes refused.
#[test]
fn plaintexts_encoded_inside_the_products_give_the_same_sums() {
    let b = client();
    let (n, p) = (params().n(), params().p());
    let weights: Vec<Vec<u64>> = (0..3)
        .map(|i| sparse(n, 20 + i, p, 40 + i as u64))
        .collect();
    let fill = |i: usize, v: &mut [u64]| v.copy_from_slice(&weights[i]);
    let inputs: Vec<Vec<Vec<u64>>> = (0..2)
        .map(|t| {
            (0..3)
                .map(|i| random_slots(n, p, &mut rng(50 + 3 * t + i)))
                .collect()
        })
        .collect();
    for level in [0, 1] {
        let cts: Vec<Vec<he::BfvCt>> = inputs
            .iter()
            .map(|xs| {
                xs.iter()
                    .map(|x| {
                        b.encrypt_sym(&b.encode_coeffs_at(x, level).unwrap())
                            .unwrap()
                    })
                    .collect()
            })
            .collect();
        let refs: Vec<Vec<&he::BfvCt>> = cts.iter().map(|c| c.iter().collect()).collect();
        let out = b
            .dot_encoded(Encoding::Coeffs, level, 3, &fill, &refs)
            .unwrap();
        assert_eq!(out.len(), 2);
        for (o, xs) in out.iter().zip(&inputs) {
            let want = (0..3).fold(vec![0; n], |acc, i| {
                add(&acc, &negacyclic(&xs[i], &weights[i], p), p)
            });
            assert_eq!(b.decrypt_coeffs(o).unwrap(), want, "level {level}");
        }
        // Refused: a value not reduced mod p, a ciphertext count other than `terms`, a
        // plaintext level other than the ciphertexts'.
        let bad = |_: usize, v: &mut [u64]| v[7] = p;
        assert!(matches!(
            b.dot_encoded(Encoding::Coeffs, level, 3, &bad, &refs),
            Err(HeError::NotReduced { index: 7, .. })
        ));
        assert!(matches!(
            b.dot_encoded(Encoding::Coeffs, level, 2, &fill, &refs),
            Err(HeError::WrongLength {
                expected: 2,
                actual: 3
            })
        ));
        assert!(matches!(
            b.dot_encoded(Encoding::Coeffs, 1 - level, 3, &fill, &refs),
            Err(HeError::LevelMismatch { .. })
        ));
    }
    // Slot encoding: slot-wise products; slot plaintexts only at the top level.
    let cts: Vec<he::BfvCt> = inputs[0]
        .iter()
        .map(|x| b.encrypt_sym(&b.encode(x).unwrap()).unwrap())
        .collect();
    let refs = vec![cts.iter().collect::<Vec<_>>()];
    let out = b.dot_encoded(Encoding::Slots, 0, 3, &fill, &refs).unwrap();
    let want: Vec<u64> = (0..n)
        .map(|k| {
            (0..3).fold(0u64, |acc, i| {
                ((acc as u128 + inputs[0][i][k] as u128 * weights[i][k] as u128) % p as u128) as u64
            })
        })
        .collect();
    assert_eq!(b.decrypt(&out[0]).unwrap(), want);
    assert!(matches!(
        b.dot_encoded(Encoding::Slots, 1, 3, &fill, &refs),
        Err(HeError::WrongLevel {
            expected: 0,
            actual: 1
        })
    ));

    fn workload<B: Backend>(b: &B, w: &[Vec<u64>]) {
        let n = b.slots().n;
        let x = vec![1u64; n];
        let c = b.encrypt_sym(&b.encode_coeffs_at(&x, 1).unwrap()).unwrap();
        let fill = |i: usize, v: &mut [u64]| v.copy_from_slice(&w[i]);
        b.dot_encoded(Encoding::Coeffs, 1, 3, &fill, &[vec![&c; 3], vec![&c; 3]])
            .unwrap();
        let s = b.encrypt_sym(&b.encode(&x).unwrap()).unwrap();
        b.dot_encoded(Encoding::Slots, 0, 2, &fill, &[vec![&s; 2]])
            .unwrap();
    }
    let bfv = Counting::new(Bfv::keygen(params(), GaloisSpec::none()).unwrap());
    let s = Counting::new(Sim::new(params(), GaloisSpec::none()));
    let c = Count::real(params(), GaloisSpec::none());
    workload(&bfv, &weights);
    workload(&s, &weights);
    workload(&c, &weights);
    let k = c.counts();
    assert_eq!(bfv.counts(), k);
    assert_eq!(s.counts(), k);
    // 2 encodes, 3 + 2 prepares; 2 sums of 3 products and one of 2.
    assert_eq!((k.ntt, k.sc_mult, k.fused_add), (7, 8, 5));
}

/// Sums mixing row-constant and NTT-form plaintexts, in every arrangement the products
/// meet (blocks of four of one kind, mixed blocks, a short last block, a row constant
/// alone): 13 terms on two outputs' worth of inputs, against the slot-wise products mod p
/// (a row constant is `rows[0]` on slots 0..n/2 and `rows[1]` on the rest).
#[test]
fn sums_mixing_row_constants_and_ntt_plaintexts_equal_the_plaintext_sums() {
    let b = client();
    let (n, p) = (params().n(), params().p());
    // R: row constants, N: NTT form
    let kinds = "RRRRNNNNRNRNR";
    let mut r = rng(4242);
    let mut weights: Vec<Vec<u64>> = Vec::new();
    let mut pts = Vec::new();
    for (t, kind) in kinds.chars().enumerate() {
        if kind == 'R' {
            // the extremes among them
            let rows = match t {
                0 => [p - 1, p / 2],
                1 => [p / 2 + 1, 1],
                _ => [r.random_range(0..p), r.random_range(0..p)],
            };
            weights.push((0..n).map(|k| rows[usize::from(k >= n / 2)]).collect());
            pts.push(b.prepare_row_constants(rows).unwrap());
        } else {
            let w = random_slots(n, p, &mut r);
            pts.push(b.prepare(&w).unwrap());
            weights.push(w);
        }
    }
    for start in [0, 5] {
        let xs: Vec<Vec<u64>> = (start..kinds.len())
            .map(|_| random_slots(n, p, &mut r))
            .collect();
        let cts: Vec<he::BfvCt> = xs
            .iter()
            .map(|x| b.encrypt_sym(&b.encode(x).unwrap()).unwrap())
            .collect();
        let ct_refs: Vec<&he::BfvCt> = cts.iter().collect();
        let pt_refs: Vec<&he::BfvPrepared> = pts[start..].iter().collect();
        let got = b.decrypt(&b.dot(&ct_refs, &pt_refs).unwrap()).unwrap();
        let want: Vec<u64> = (0..n)
            .map(|k| {
                xs.iter().zip(&weights[start..]).fold(0u64, |acc, (x, w)| {
                    ((acc as u128 + x[k] as u128 * w[k] as u128) % p as u128) as u64
                })
            })
            .collect();
        assert_eq!(got, want, "terms from {start}");
    }
}

/// Groups of plaintexts over the same ciphertexts in one fused call
/// (`dot_encoded_groups`): 3 groups, 2 outputs, 9 terms (blocks of four, the last one
/// short), both encodings, on the IFMA chain and on 60-bit moduli (128-bit sums,
/// reduced on the way with 70 terms); each group's sums against the schoolbook
/// negacyclic (or slot-wise) products mod p, and the counts those of one
/// `dot_encoded` per group on BFV and the simulator alike.
#[test]
fn grouped_fused_sums_equal_each_groups_plaintext_sums() {
    let q164 = he::Params::preset("n8192-q164").unwrap();
    for (params, terms) in [(params().clone(), 9), (q164, 70)] {
        let b = Counting::new(Bfv::keygen(&params, GaloisSpec::none()).unwrap());
        let (n, p, groups, outs) = (params.n(), params.p(), 3, 2);
        let weights: Vec<Vec<Vec<u64>>> = (0..groups)
            .map(|g| {
                (0..terms)
                    .map(|i| sparse(n, 3, p, 7000 + (g * terms + i) as u64))
                    .collect()
            })
            .collect();
        let fill = |g: usize, i: usize, v: &mut [u64]| v.copy_from_slice(&weights[g][i]);
        let inputs: Vec<Vec<Vec<u64>>> = (0..outs)
            .map(|t| {
                (0..terms)
                    .map(|i| random_slots(n, p, &mut rng(8000 + (terms * t + i) as u64)))
                    .collect()
            })
            .collect();
        for encoding in [Encoding::Coeffs, Encoding::Slots] {
            let cts = encrypt_terms(&b, &inputs, encoding);
            let refs: Vec<Vec<&he::BfvCt>> = cts.iter().map(|c| c.iter().collect()).collect();
            b.take();
            let out = b
                .dot_encoded_groups(encoding, 0, 0, groups, terms, &fill, &refs)
                .unwrap();
            let grouped = b.take();
            for g in 0..groups {
                let one = |i: usize, v: &mut [u64]| fill(g, i, v);
                b.dot_encoded(encoding, 0, terms, &one, &refs).unwrap();
            }
            assert_eq!(grouped, b.take(), "{encoding:?}: counts");
            let s = Counting::new(Sim::new(&params, GaloisSpec::none()));
            let sim_cts = encrypt_terms(&s, &inputs, encoding);
            let sim_refs: Vec<Vec<&he::SimCt>> =
                sim_cts.iter().map(|c| c.iter().collect()).collect();
            s.take();
            s.dot_encoded_groups(encoding, 0, 0, groups, terms, &fill, &sim_refs)
                .unwrap();
            assert_eq!(s.take(), grouped, "{encoding:?}: simulator counts");
            assert_eq!(out.len(), groups);
            for (g, group) in out.iter().enumerate() {
                assert_eq!(group.len(), outs);
                for (t, (o, xs)) in group.iter().zip(&inputs).enumerate() {
                    let got = match encoding {
                        Encoding::Coeffs => b.decrypt_coeffs(o).unwrap(),
                        Encoding::Slots => b.decrypt(o).unwrap(),
                    };
                    let want = plaintext_sum(encoding, &weights[g], xs, p);
                    assert_eq!(got, want, "{encoding:?}, group {g}, output {t}");
                }
            }
        }
    }
}

/// A polynomial in X^(2^a): `k` random values of Z_p at multiples of 2^a, with -1 and the
/// largest centred magnitudes among them.
fn strided(n: usize, a: u32, k: usize, p: u64, seed: u64) -> Vec<u64> {
    let mut r = rng(seed);
    let mut v = vec![0u64; n];
    let m = n >> a;
    for _ in 0..k {
        v[r.random_range(0..m) << a] = r.random_range(0..p);
    }
    v[(m - 1) << a] = p - 1;
    v[(m / 2) << a] = p / 2;
    if m > 2 {
        v[(m / 2 + 1) << a] = p / 2 + 1;
    }
    v
}

/// Plaintexts declared to be polynomials in X^(2^a) (Cheetah's 1x1 filters), which BFV
/// transforms in n/2^a points and spreads: for every stride up to n (the shortest
/// transform is 16 points), on n4096 at two levels, on 60-bit moduli and on n8192-p28 at
/// the Cheetah layers' query level, the
/// fused grouped sums and the prepared plaintexts' products equal the schoolbook
/// negacyclic sums mod p; the counts are those without a stride on BFV and the
/// simulator alike; a value off the stride and a stride on slots are refused.
#[test]
fn strided_plaintexts_give_the_same_sums() {
    let q164 = he::Params::preset("n8192-q164").unwrap();
    let p28 = he::Params::preset("n8192-p28").unwrap();
    for (params, level) in [
        (params().clone(), 0),
        (params().clone(), 1),
        (q164, 0),
        (p28, 2),
    ] {
        let b = Counting::new(Bfv::keygen(&params, GaloisSpec::none()).unwrap());
        let s = Counting::new(Sim::new(&params, GaloisSpec::none()));
        let (n, p, groups, outs, terms) = (params.n(), params.p(), 2, 2, 5);
        let inputs: Vec<Vec<Vec<u64>>> = (0..outs)
            .map(|t| {
                (0..terms)
                    .map(|i| random_slots(n, p, &mut rng(9000 + (terms * t + i) as u64)))
                    .collect()
            })
            .collect();
        let cts: Vec<Vec<he::BfvCt>> = inputs
            .iter()
            .map(|xs| {
                xs.iter()
                    .map(|x| {
                        b.encrypt_sym(&b.encode_coeffs_at(x, level).unwrap())
                            .unwrap()
                    })
                    .collect()
            })
            .collect();
        let refs: Vec<Vec<&he::BfvCt>> = cts.iter().map(|c| c.iter().collect()).collect();
        let sim_cts = encrypt_terms(&s, &inputs, Encoding::Coeffs);
        let sim_refs: Vec<Vec<&he::SimCt>> = sim_cts.iter().map(|c| c.iter().collect()).collect();
        let log_n = n.trailing_zeros();
        for a in [1u32, 2, 6, log_n - 4, log_n - 3, log_n - 1, log_n] {
            let weights: Vec<Vec<Vec<u64>>> = (0..groups)
                .map(|g| {
                    (0..terms)
                        .map(|i| {
                            strided(n, a, 3, p, 9500 + (g * terms + i) as u64 + 100 * a as u64)
                        })
                        .collect()
                })
                .collect();
            let fill = |g: usize, i: usize, v: &mut [u64]| v.copy_from_slice(&weights[g][i]);
            b.take();
            let out = b
                .dot_encoded_groups(Encoding::Coeffs, level, a, groups, terms, &fill, &refs)
                .unwrap();
            let counted = b.take();
            b.dot_encoded_groups(Encoding::Coeffs, level, 0, groups, terms, &fill, &refs)
                .unwrap();
            assert_eq!(counted, b.take(), "stride 2^{a}: counts");
            s.take();
            s.dot_encoded_groups(Encoding::Coeffs, 0, a, groups, terms, &fill, &sim_refs)
                .unwrap();
            assert_eq!(s.take(), counted, "stride 2^{a}: simulator counts");
            for (g, group) in out.iter().enumerate() {
                for (t, (o, xs)) in group.iter().zip(&inputs).enumerate() {
                    let want = plaintext_sum(Encoding::Coeffs, &weights[g], xs, p);
                    assert_eq!(
                        b.decrypt_coeffs(o).unwrap(),
                        want,
                        "level {level}, stride 2^{a}, group {g}, output {t}"
                    );
                }
            }
            // held: the same product as the plaintext prepared without a stride
            let w = &weights[1][3];
            let held = b.prepare_coeffs_strided(w, level, a).unwrap();
            let plain = b.prepare_coeffs_at(w, level).unwrap();
            let x = &refs[0][0];
            assert_eq!(
                b.decrypt_coeffs(&b.dot_coeffs(&[x], &[&held]).unwrap())
                    .unwrap(),
                b.decrypt_coeffs(&b.dot_coeffs(&[x], &[&plain]).unwrap())
                    .unwrap(),
                "level {level}, stride 2^{a}: prepared"
            );
            // held, every term (BFV keeps them as their small transforms): each output's
            // products equal the schoolbook sums, also after a round trip through bytes
            for (g, ws) in weights.iter().enumerate() {
                let held: Vec<_> = ws
                    .iter()
                    .map(|w| b.prepare_coeffs_strided(w, level, a).unwrap())
                    .collect();
                let again: Vec<_> = held
                    .iter()
                    .map(|h| {
                        let bytes = b.prepared_to_bytes(h).unwrap();
                        b.prepared_from_bytes(&bytes).unwrap()
                    })
                    .collect();
                for (t, xs) in inputs.iter().enumerate() {
                    let want = plaintext_sum(Encoding::Coeffs, ws, xs, p);
                    for pts in [&held, &again] {
                        let pts: Vec<_> = pts.iter().collect();
                        let got = b.dot_coeffs(&refs[t], &pts).unwrap();
                        assert_eq!(
                            b.decrypt_coeffs(&got).unwrap(),
                            want,
                            "level {level}, stride 2^{a}, held group {g}, output {t}"
                        );
                    }
                }
            }
            // a value off the stride
            let mut off = w.clone();
            off[(1 << a) - 1] = 1;
            let bad = |_: usize, _: usize, v: &mut [u64]| v.copy_from_slice(&off);
            let one = [vec![refs[0][0]]];
            let sim_one = [vec![sim_refs[0][0]]];
            for result in [
                b.dot_encoded_groups(Encoding::Coeffs, level, a, 1, 1, &bad, &one)
                    .map(|_| ()),
                b.prepare_coeffs_strided(&off, level, a).map(|_| ()),
                s.dot_encoded_groups(Encoding::Coeffs, 0, a, 1, 1, &bad, &sim_one)
                    .map(|_| ()),
            ] {
                assert!(
                    matches!(result, Err(HeError::OffStride { index, stride_log2 }) if index == (1 << a) - 1 && stride_log2 == a),
                    "stride 2^{a}: {result:?}"
                );
            }
        }
        if level == 0 {
            let slots = |_: usize, _: usize, v: &mut [u64]| v.fill(0);
            assert!(matches!(
                b.dot_encoded_groups(Encoding::Slots, 0, 1, 1, 1, &slots, &[vec![refs[0][0]]]),
                Err(HeError::EncodingMismatch { .. })
            ));
        }
    }
}
