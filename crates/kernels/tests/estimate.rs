//! The cost estimate: bytes from the parameters' wire sizes, counts from the counting
//! backend, and an ordering the measurements agree with (GALA's 10x128 needs no
//! rotation, GAZELLE's hybrid needs seven).
#![allow(clippy::unwrap_used)]

use he::{Dropped, Layout, Params, Rounding, SlotInfo};
use kernels::{estimate, CostModel, LinearLayer, MatvecLayout, Method};

#[test]
fn estimates_price_counts_and_bytes() {
    let params = Params::preset("n8192").unwrap();
    let slots = SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: Layout::TwoRows,
    };
    let model = CostModel::reference(&params);
    let gala = MatvecLayout::new(Method::Gala, 10, 128, slots).unwrap();
    let hybrid = MatvecLayout::new(Method::Hybrid, 10, 128, slots).unwrap();
    let g = estimate(&gala, &params, &model).unwrap();
    let h = estimate(&hybrid, &params, &model).unwrap();
    let last = params.levels() - 1;
    // the query seeded with c0 rounded as GALA's noise affords; the response rounded to
    // what decryption needs
    let rounded = Rounding {
        c0: gala.query_rounding(&params),
        c1: Dropped::NONE,
    };
    assert_eq!(
        g.bytes_up,
        params.rounded_ct_wire_size(0, true, None, rounded) as u64
    );
    assert!(g.bytes_up * 10 < params.ct_wire_size(0, true) as u64 * 8);
    assert_eq!(
        g.bytes_down,
        params.rounded_ct_wire_size(last, false, None, params.response_rounding()) as u64
    );
    assert!(g.bytes_down * 10 < params.ct_wire_size(last, false) as u64 * 7);
    assert_eq!((g.counts.rotations(), g.galois_keys), (0, 0));
    assert_eq!(h.counts.rotations(), 7);
    assert!(h.server_ms > g.server_ms + 5.0 * model.hst_perm_us / 1e3);
    // One fused product and the share step (58 µs + 1.9 ms at the reference costs), the
    // query's deserialisation and the response's serialisation.
    let wire = model.wire_us_for(he::Dir::Up) + model.wire_us_for(he::Dir::Down);
    assert!(wire > 0.0);
    assert!((g.server_ms - (model.sc_mult_us + model.share_us + wire) / 1e3).abs() < 0.2);
    // The client encrypts one query and decrypts one response.
    let client =
        model.encrypt_us_for(he::Encoding::Slots) + model.decrypt_us_for(he::Encoding::Slots);
    assert!(g.client_ms > 0.0 && (g.client_ms - client / 1e3).abs() < 1e-9);
    // Offline, the server makes one flooding encryption of zero per response ciphertext.
    assert_eq!(gala.output_cts(), 1);
    assert!(g.flood_ms > 0.0 && (g.flood_ms - model.flood_us() / 1e3).abs() < 1e-9);
    // A link adds the transfer and one round trip.
    let wan = g.total_ms(200e6 / 8.0, 13.0);
    let bytes = (g.bytes_up + g.bytes_down) as f64;
    assert!((wan - g.server_ms - g.client_ms - 13.0 - bytes / 25e6 * 1e3).abs() < 1e-9);
}

/// The weights a method encodes: the diagonal method holds one plaintext per diagonal of
/// the (padded) square block (128 for 128x128), GALA's 10x128 one packed plaintext; the
/// memory is n·L coefficients of one word (NTT form) each.
#[test]
fn encoded_plaintexts_and_their_memory() {
    let params = Params::preset("n8192").unwrap();
    let slots = SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: Layout::TwoRows,
    };
    let model = CostModel::reference(&params);
    let per = (8192 * params.levels() * 8) as u64;
    let d = MatvecLayout::new(Method::Diagonal, 128, 128, slots).unwrap();
    let e = estimate(&d, &params, &model).unwrap();
    assert_eq!(e.plaintexts, 128);
    assert_eq!(e.encoded_bytes, 128 * per);
    assert!((e.encode_ms - 128.0 * model.prepare_us / 1e3).abs() < 1e-9);
    let g = MatvecLayout::new(Method::Gala, 10, 128, slots).unwrap();
    assert_eq!(estimate(&g, &params, &model).unwrap().plaintexts, 1);
    // Coefficient plaintexts: NTT form too, with the moduli of the
    // query level (1 on this chain); queries priced at that level's ciphertext size.
    let c = MatvecLayout::new(Method::Cheetah, 100, 3000, slots).unwrap();
    assert_eq!(c.query_level(&params), 1);
    let e = estimate(&c, &params, &model).unwrap();
    assert_eq!(
        e.encoded_bytes,
        e.plaintexts * (8192 * (params.levels() - 1) * 8) as u64
    );
    let rounded = Rounding {
        c0: c.query_rounding(&params),
        c1: Dropped::NONE,
    };
    assert_eq!(
        e.bytes_up,
        (c.query_cts() * params.rounded_ct_wire_size(1, true, None, rounded)) as u64
    );
}

#[test]
fn a_cost_model_round_trips_through_its_file() {
    let params = Params::preset("n4096").unwrap();
    let mut m = CostModel::reference(&params);
    m.perm_us = 1234.5;
    let dir = std::env::temp_dir().join(format!("helina-costs-{}", std::process::id()));
    let path = dir.join("nested").join("costs.json");
    m.save(&path).unwrap();
    assert_eq!(CostModel::load(&path).unwrap(), m);
    std::fs::write(&path, b"{ not json").unwrap();
    assert_eq!(
        CostModel::load(&path).unwrap_err().kind(),
        std::io::ErrorKind::InvalidData
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
