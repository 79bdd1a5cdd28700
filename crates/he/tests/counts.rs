#![allow(clippy::unwrap_used)]
//! The counting wrapper reports identical counts on Bfv, Sim and the data-free Count for
//! the same sequence of operations, and the counts are the ones the sequence implies.

mod common;

use common::*;
use he::{Backend, Count, Counting, Dir, OpCounts};

/// A small kernel-like sequence: a query goes up, a hoisted group, products, sums,
/// a plain rotation, a column rotation, flooding, switch, response goes down.
fn workload<B: Backend>(b: &B) -> he::Result<()> {
    let x = b.encrypt_sym(&b.encode(&[1, 2, 3])?)?;
    let x = b.transfer(Dir::Up, &x)?;
    let w1 = b.prepare(&[4, 5])?;
    let w2 = b.prepare(&[6])?;
    let _rows = b.prepare_row_constants([7, 8])?;
    let rots = b.rotate_group(&x, &[0, 1, 2, -1])?;
    let prods: Vec<B::Ct> = rots
        .iter()
        .map(|r| b.mul_plain(r, &w1))
        .collect::<he::Result<_>>()?;
    let mut acc = b.dot(&[&prods[0], &prods[1]], &[&w2, &w2])?;
    acc = b.add(&acc, &prods[2])?;
    acc = b.rotate_rows(&acc, 3)?;
    acc = b.rotate_columns(&acc)?;
    acc = b.add_plain(&acc, &b.encode(&[7])?)?;
    acc = b.add(&acc, &b.encrypt_zero_flood(30)?)?;
    let out = b.switch_to_last(&acc)?;
    let out = b.transfer(Dir::Down, &out)?;
    let _ = b.decrypt(&out)?;
    Ok(())
}

#[test]
fn counts_are_identical_on_all_backends_and_as_expected() {
    let bfv = Counting::new(he::Bfv::keygen(params(), spec()).unwrap());
    let sim = Counting::new(sim());
    let count = Count::real(params(), spec());
    workload(&bfv).unwrap();
    workload(&sim).unwrap();
    workload(&count).unwrap();
    let l = params().levels() as u64;
    let expected = OpCounts {
        add: 1 + 1 + 1 + 1,           // dot's one add, add, add_plain, add flood
        sc_mult: 4 + 2,               // four products (step 0 included), a dot of two
        fused_add: 1,                 // the dot's add
        perm: 2,                      // rotate_rows, rotate_columns
        dec_perm: 1,                  // one group
        hst_perm: 3,                  // steps 1, 2, -1 (0 is free)
        ntt: 4 + 3 * l + 2 * (l - 1), // 2 prepared + 2 encoded, 3 key switches, switch
        intt: 3 + 2 * (l - 1) + 1,    // 3 key switches, switch, decrypt
        row_constants: 1,             // no NTT
        encrypt: 2,
        decrypt: 1,
        mod_switch: l - 1,
        bytes_up: params().ct_wire_size(0, true) as u64,
        bytes_down: params().ct_wire_size(params().last_level(), false) as u64,
    };
    assert_eq!(bfv.counts(), expected);
    assert_eq!(sim.counts(), expected);
    assert_eq!(count.counts(), expected);
}

#[test]
fn ideal_model_is_one_cyclic_vector() {
    // n = 2048 cyclic (the papers' model): rotation by 1 moves slot 1024 into 1023.
    let s = he::Sim::ideal(2048, 12289, he::GaloisSpec::new([1]));
    let v: Vec<u64> = (0..2048).collect();
    let ct = s.encrypt_sym(&s.encode(&v).unwrap()).unwrap();
    let out = s.decrypt(&s.rotate_rows(&ct, 1).unwrap()).unwrap();
    assert_eq!(out[1023], 1024);
    assert_eq!(out[2047], 0);
    assert_eq!(
        s.rotate_columns(&ct),
        Err(he::HeError::UndeclaredColumnRotation)
    );
    let c = Count::ideal(2048, 12289, he::GaloisSpec::new([1, 1500]));
    let x = c.encrypt_sym(&c.encode(&[]).unwrap()).unwrap();
    c.rotate_rows(&x, 1500).unwrap();
    assert_eq!(c.counts().perm, 1);
    assert_eq!(c.galois().key_count(2048), 2);
}
