#![allow(clippy::unwrap_used)]
//! Every Bfv operation equals the cleartext reference (and Sim) on random data at n4096.

mod common;

use common::*;
use he::{random_slots, Backend, HeError};
use proptest::prelude::*;

/// (operation, reference, Bfv result, Sim result)
type Check = (&'static str, Vec<u64>, Vec<u64>, Vec<u64>);

fn mulmod(a: u64, b: u64, p: u64) -> u64 {
    ((a as u128 * b as u128) % p as u128) as u64
}

#[test]
fn encode_decrypt_round_trip_and_signed_values() {
    let b = client();
    let p = params().p();
    let mut r = rng(1);
    let v = random_slots(params().n(), p, &mut r);
    let ct = b.encrypt_sym(&b.encode(&v).unwrap()).unwrap();
    assert_eq!(b.decrypt(&ct).unwrap(), v);
    // Fewer values are zero-padded; signed values use the centred representation.
    let signed: Vec<i64> = vec![-1, 2, -(p as i64 / 2), 7];
    let reduced: Vec<u64> = signed.iter().map(|&x| params().reduce(x)).collect();
    let ct = b.encrypt_pk(&b.encode(&reduced).unwrap()).unwrap();
    let out = b.decrypt(&ct).unwrap();
    let back: Vec<i64> = out[..4].iter().map(|&x| params().center(x)).collect();
    assert_eq!(back, signed);
    assert!(out[4..].iter().all(|&x| x == 0));
}

#[test]
fn values_not_reduced_or_too_many_are_errors() {
    let b = client();
    let p = params().p();
    assert!(matches!(
        b.encode(&[1, p]),
        Err(HeError::NotReduced { index: 1, .. })
    ));
    assert!(matches!(
        b.encode(&vec![0; params().n() + 1]),
        Err(HeError::WrongLength { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    #[test]
    fn bfv_ops_equal_reference(seed in any::<u64>()) {
        let b = client();
        let s = sim();
        let p = params().p();
        let n = params().n();
        let mut r = rng(seed);
        let x = random_slots(n, p, &mut r);
        let y = random_slots(n, p, &mut r);
        let w = random_slots(n, p, &mut r);
        let w2 = random_slots(n, p, &mut r);
        let cx = b.encrypt_sym(&b.encode(&x).unwrap()).unwrap();
        let cy = b.encrypt_pk(&b.encode(&y).unwrap()).unwrap();
        let sx = s.encrypt_sym(&s.encode(&x).unwrap()).unwrap();
        let sy = s.encrypt_pk(&s.encode(&y).unwrap()).unwrap();
        let (pw, pw2) = (b.prepare(&w).unwrap(), b.prepare(&w2).unwrap());
        let (qw, qw2) = (s.prepare(&w).unwrap(), s.prepare(&w2).unwrap());

        let add: Vec<u64> = x.iter().zip(&y).map(|(a, c)| (a + c) % p).collect();
        let sub: Vec<u64> = x.iter().zip(&y).map(|(a, c)| (a + p - c) % p).collect();
        let neg: Vec<u64> = x.iter().map(|a| (p - a) % p).collect();
        let mul: Vec<u64> = x.iter().zip(&w).map(|(a, c)| mulmod(*a, *c, p)).collect();
        let dot: Vec<u64> = (0..n).map(|i| (mulmod(x[i], w[i], p) + mulmod(y[i], w2[i], p)) % p).collect();

        let checks: Vec<Check> = vec![
            ("add", add.clone(), b.decrypt(&b.add(&cx, &cy).unwrap()).unwrap(), s.decrypt(&s.add(&sx, &sy).unwrap()).unwrap()),
            ("sub", sub.clone(), b.decrypt(&b.sub(&cx, &cy).unwrap()).unwrap(), s.decrypt(&s.sub(&sx, &sy).unwrap()).unwrap()),
            ("add_plain", add, b.decrypt(&b.add_plain(&cx, &b.encode(&y).unwrap()).unwrap()).unwrap(), s.decrypt(&s.add_plain(&sx, &s.encode(&y).unwrap()).unwrap()).unwrap()),
            ("sub_plain", sub, b.decrypt(&b.sub_plain(&cx, &b.encode(&y).unwrap()).unwrap()).unwrap(), s.decrypt(&s.sub_plain(&sx, &s.encode(&y).unwrap()).unwrap()).unwrap()),
            ("negate", neg, b.decrypt(&b.negate(&cx).unwrap()).unwrap(), s.decrypt(&s.negate(&sx).unwrap()).unwrap()),
            ("mul_plain", mul.clone(), b.decrypt(&b.mul_plain(&cx, &pw).unwrap()).unwrap(), s.decrypt(&s.mul_plain(&sx, &qw).unwrap()).unwrap()),
            ("mul_plain_fhe", mul, b.decrypt(&b.mul_plain_fhe(&cx, &b.encode(&w).unwrap()).unwrap()).unwrap(), s.decrypt(&s.mul_plain(&sx, &qw).unwrap()).unwrap()),
            ("dot", dot, b.decrypt(&b.dot(&[&cx, &cy], &[&pw, &pw2]).unwrap()).unwrap(), s.decrypt(&s.dot(&[&sx, &sy], &[&qw, &qw2]).unwrap()).unwrap()),
            ("switch_to_last", x.clone(), b.decrypt(&b.switch_to_last(&cx).unwrap()).unwrap(), s.decrypt(&s.switch_to_last(&sx).unwrap()).unwrap()),
        ];
        for (name, want, got_bfv, got_sim) in checks {
            prop_assert_eq!(&got_bfv, &want, "bfv {}", name);
            prop_assert_eq!(&got_sim, &want, "sim {}", name);
        }
        for &k in &common::STEPS {
            let want = rotate_rows_ref(&x, k);
            prop_assert_eq!(&b.decrypt(&b.rotate_rows(&cx, k).unwrap()).unwrap(), &want, "bfv rotate {}", k);
            prop_assert_eq!(&s.decrypt(&s.rotate_rows(&sx, k).unwrap()).unwrap(), &want, "sim rotate {}", k);
        }
        let h = n / 2;
        let swapped: Vec<u64> = x[h..].iter().chain(&x[..h]).copied().collect();
        prop_assert_eq!(&b.decrypt(&b.rotate_columns(&cx).unwrap()).unwrap(), &swapped);
        prop_assert_eq!(&s.decrypt(&s.rotate_columns(&sx).unwrap()).unwrap(), &swapped);
    }
}

#[test]
fn rotation_moves_each_row_left_within_the_row() {
    // Slot j of each row receives slot j + k of the same row: row 0 never leaks into row 1.
    let b = client();
    let n = params().n();
    let h = n / 2;
    let v: Vec<u64> = (0..n as u64).collect();
    let ct = b.encrypt_sym(&b.encode(&v).unwrap()).unwrap();
    let out = b.decrypt(&b.rotate_rows(&ct, 1).unwrap()).unwrap();
    assert_eq!(out[0], 1);
    assert_eq!(out[h - 1], 0);
    assert_eq!(out[h], h as u64 + 1);
    assert_eq!(out[n - 1], h as u64);
    let out = b.decrypt(&b.rotate_rows(&ct, -1).unwrap()).unwrap();
    assert_eq!(out[0], h as u64 - 1);
    assert_eq!(out[h], n as u64 - 1);
}

#[test]
fn hoisted_groups_equal_fhe_rs_plain_rotations() {
    let b = client();
    let mut r = rng(7);
    let x = random_slots(params().n(), params().p(), &mut r);
    let ct = b.encrypt_sym(&b.encode(&x).unwrap()).unwrap();
    let steps = [1, 2, 3, -1, 5, 100, 0];
    let group = b.rotate_group(&ct, &steps).unwrap();
    for (k, g) in steps.iter().zip(&group) {
        let plain = b.rotate_rows_fhe(&ct, *k).unwrap();
        let want = rotate_rows_ref(&x, *k);
        assert_eq!(b.decrypt(g).unwrap(), want, "hoisted step {k}");
        assert_eq!(b.decrypt(&plain).unwrap(), want, "fhe.rs step {k}");
        // Same noise behaviour as fhe.rs's own key switch, within a few bits.
        let (nh, np) = (
            b.noise_budget(g).unwrap().unwrap_or(0) as i64,
            b.noise_budget(&plain).unwrap().unwrap_or(0) as i64,
        );
        assert!((nh - np).abs() <= 3, "step {k}: budget {nh} vs {np}");
    }
}

#[test]
fn undeclared_steps_are_errors_on_every_backend() {
    let b = client();
    let s = sim();
    let c = he::Count::real(params(), spec());
    let bx = b.encrypt_sym(&b.encode(&[1]).unwrap()).unwrap();
    let sx = s.encrypt_sym(&s.encode(&[1]).unwrap()).unwrap();
    let cx = c.encrypt_sym(&c.encode(&[1]).unwrap()).unwrap();
    assert!(matches!(
        b.rotate_rows(&bx, 4),
        Err(HeError::UndeclaredRotation { step: 4, .. })
    ));
    assert!(matches!(
        s.rotate_rows(&sx, 4),
        Err(HeError::UndeclaredRotation { step: 4, .. })
    ));
    assert!(matches!(
        c.rotate_rows(&cx, 4),
        Err(HeError::UndeclaredRotation { step: 4, .. })
    ));
    let half = params().n() as i64 / 2;
    assert!(matches!(
        b.rotate_rows(&bx, half),
        Err(HeError::RotationOutOfRange { .. })
    ));
    // -1 and n/2 - 1 are the same key.
    assert!(b.rotate_rows(&bx, half - 1).is_ok());
    let no_col = he::Sim::new(params(), he::GaloisSpec::new([1]));
    let nx = no_col.encrypt_sym(&no_col.encode(&[1]).unwrap()).unwrap();
    assert_eq!(
        no_col.rotate_columns(&nx),
        Err(HeError::UndeclaredColumnRotation)
    );
}

#[test]
fn level_rules() {
    let b = client();
    let x = b.encrypt_sym(&b.encode(&[3]).unwrap()).unwrap();
    let low = b.switch_to_last(&x).unwrap();
    assert_eq!(b.level(&low), params().last_level());
    assert!(matches!(
        b.add(&x, &low),
        Err(HeError::LevelMismatch { .. })
    ));
    let w = b.prepare(&[2]).unwrap();
    assert!(matches!(
        b.mul_plain(&low, &w),
        Err(HeError::LevelMismatch { .. })
    ));
    assert!(matches!(b.dot(&[], &[]), Err(HeError::Empty { .. })));
}

/// Below the top level (rotation-free kernels): a query encrypted at level l, weights
/// prepared at l, a product and a flooded mask at l, the same on Bfv and Sim; operands
/// of different levels are refused instead of reaching fhe.rs's assertions.
#[test]
fn products_below_the_top_level() {
    let l = params().last_level() - 1;
    assert!(l > 0, "the test needs three moduli or more");
    let p = params().p();
    let (b, sim) = (client(), he::Sim::new(params(), he::GaloisSpec::none()));
    let x = [3, 1, p - 2];
    let mut got = Vec::new();
    for run in 0..2 {
        let r = if run == 0 {
            let q = b.encrypt_sym(&b.encode_coeffs_at(&x, l).unwrap()).unwrap();
            assert_eq!(b.level(&q), l);
            let w = b.prepare_coeffs_at(&[2, p - 1], l).unwrap();
            let y = b.dot_coeffs(&[&q], &[&w]).unwrap();
            let z = b.encrypt_zero_flood_at(30, l).unwrap();
            let m = b.add_plain(
                &b.add(&y, &z).unwrap(),
                &b.encode_coeffs_at(&[5], l).unwrap(),
            );
            let top = b.prepare_coeffs(&[2]).unwrap();
            assert!(matches!(
                b.dot_coeffs(&[&q], &[&top]),
                Err(HeError::LevelMismatch { .. })
            ));
            assert!(matches!(
                b.add_plain(&q, &b.encode_coeffs(&[1]).unwrap()),
                Err(HeError::LevelMismatch { .. })
            ));
            b.decrypt_coeffs(&b.switch_to_last(&m.unwrap()).unwrap())
                .unwrap()
        } else {
            let q = sim
                .encrypt_sym(&sim.encode_coeffs_at(&x, l).unwrap())
                .unwrap();
            let w = sim.prepare_coeffs_at(&[2, p - 1], l).unwrap();
            let y = sim.dot_coeffs(&[&q], &[&w]).unwrap();
            let z = sim.encrypt_zero_flood_at(30, l).unwrap();
            let m = sim.add_plain(
                &sim.add(&y, &z).unwrap(),
                &sim.encode_coeffs_at(&[5], l).unwrap(),
            );
            sim.decrypt_coeffs(&sim.switch_to_last(&m.unwrap()).unwrap())
                .unwrap()
        };
        got.push(r[..4].to_vec());
    }
    // (3 + X − 2X²)(2 − X) + 5 = 11 − X − 5X² + 2X³
    let want = vec![11, p - 1, p - 5, 2];
    assert_eq!(got, vec![want.clone(), want]);
    assert!(matches!(
        b.encode_coeffs_at(&[1], params().levels()),
        Err(HeError::WrongLevel { .. })
    ));
}

/// `mask_and_switch` (fused on Bfv: one pass in the power basis) is the composition
/// encode_as_at + add_plain + add + switch_to_last, bit for bit, from every level above
/// the last (where n4096 has no budget for a public-key encryption) and in both
/// encodings; it decrypts to x + mask; and a counting backend counts it as that
/// composition.
#[test]
fn mask_and_switch_is_the_composition_it_replaces() {
    let b = client();
    let (n, p) = (params().n(), params().p());
    let mut r = rng(41);
    for level in 0..params().last_level() {
        for e in [he::Encoding::Slots, he::Encoding::Coeffs] {
            let x = random_slots(n, p, &mut r);
            let mask = random_slots(n, p, &mut r);
            let ct = b
                .encrypt_pk(&b.encode_as_at(&x, e, level).unwrap())
                .unwrap();
            let zero = b.encrypt_zero_flood_at(8, level).unwrap();
            let fused = b.mask_and_switch(&ct, &mask, e, &zero).unwrap();
            let masked = b
                .add_plain(&ct, &b.encode_as_at(&mask, e, level).unwrap())
                .unwrap();
            let composed = b.switch_to_last(&b.add(&masked, &zero).unwrap()).unwrap();
            assert_eq!(
                b.serialize(&fused).unwrap(),
                b.serialize(&composed).unwrap(),
                "level {level} {e}"
            );
            let sum: Vec<u64> = x.iter().zip(&mask).map(|(a, m)| (a + m) % p).collect();
            assert_eq!(b.decrypt_as(&fused, e).unwrap(), sum, "level {level} {e}");
        }
    }
    let counting = he::Counting::new(sim());
    let x = random_slots(n, p, &mut r);
    let ct = counting.encrypt_pk(&counting.encode(&x).unwrap()).unwrap();
    let zero = counting.encrypt_zero_flood_at(8, 0).unwrap();
    counting.take();
    counting
        .mask_and_switch(&ct, &x, he::Encoding::Slots, &zero)
        .unwrap();
    let fused = counting.take();
    let masked = counting
        .add_plain(
            &ct,
            &counting.encode_as_at(&x, he::Encoding::Slots, 0).unwrap(),
        )
        .unwrap();
    counting
        .switch_to_last(&counting.add(&masked, &zero).unwrap())
        .unwrap();
    assert_eq!(fused, counting.take());
}
