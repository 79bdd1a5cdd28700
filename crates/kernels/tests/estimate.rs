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
    assert!(g.bytes_down * 10 < params.ct_wire_size(last, false) as u64 * 8);
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
    let bits = gala.flood_pool::<he::Count>(&params).unwrap().bits();
    let flood = model.flood_us_at(bits, gala.query_level(&params), &params);
    assert!(g.flood_ms > 0.0 && (g.flood_ms - flood / 1e3).abs() < 1e-9);
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
    // query level (2 on this chain); queries priced at that level's ciphertext size.
    let c = MatvecLayout::new(Method::Cheetah, 100, 3000, slots).unwrap();
    assert_eq!(c.query_level(&params), 2);
    let e = estimate(&c, &params, &model).unwrap();
    assert_eq!(
        e.encoded_bytes,
        e.plaintexts * (8192 * (params.levels() - 2) * 8) as u64
    );
    let rounded = Rounding {
        c0: c.query_rounding(&params),
        c1: Dropped::NONE,
    };
    assert_eq!(
        e.bytes_up,
        (c.query_cts() * params.rounded_ct_wire_size(2, true, None, rounded)) as u64
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

/// The flooding encryption's price: the measured top-level cost with one chunk of noise,
/// one more chunk per 60 bits, and a level's encryption on the line from the last
/// level's cost (one modulus, no noise) to the top's.
#[test]
fn flooding_is_priced_by_its_level_and_noise_chunks() {
    let params = Params::preset("n8192-p32").unwrap();
    let model = CostModel::reference(&params);
    let (top, last) = (0, params.last_level());
    let chunk = model.flood_chunk_us.unwrap();
    // 40 bits are one chunk (41 bits of noise), 100 bits two, 130 bits three
    assert!((model.flood_us_at(40, top, &params) - model.flood_us()).abs() < 1e-9);
    assert!((model.flood_us_at(100, top, &params) - model.flood_us() - chunk).abs() < 1e-9);
    assert!((model.flood_us_at(130, top, &params) - model.flood_us() - 2.0 * chunk).abs() < 1e-9);
    assert!((model.flood_us_at(0, last, &params) - model.flood_last_us.unwrap()).abs() < 1e-9);
    // each level below the top saves the same share of the encryption, and a chunk
    // costs in proportion to the moduli it touches
    let levels = params.levels();
    let at = |bits, level| model.flood_us_at(bits, level, &params);
    let step = at(0, 0) - at(0, 1);
    assert!(step > 0.0);
    for level in 1..levels - 1 {
        assert!((at(0, level) - at(0, level + 1) - step).abs() < 1e-9);
        let limbs = (levels - level) as f64;
        assert!((at(100, level) - at(0, level) - 2.0 * chunk * limbs / levels as f64).abs() < 1e-9);
    }
}

/// A layer on the scalar path (every weight plaintext one constant per row) prices its
/// products at the row-constant product's cost; a layer of full plaintexts at the fused
/// product's.
#[test]
fn row_constant_products_are_priced_apart() {
    use kernels::{ConvLayout, ConvMethod, ConvShape, Padding};
    let params = Params::preset("n8192").unwrap();
    let slots = SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: Layout::TwoRows,
    };
    let reference = CostModel::reference(&params);
    // the reference prices a row-constant product above a full one
    assert!(reference.sc_mult_rows_us() > reference.sc_mult_us);
    let base = CostModel {
        sc_mult_rows_us: Some(reference.sc_mult_us),
        ..reference
    };
    let dearer = CostModel {
        sc_mult_rows_us: Some(reference.sc_mult_us + 100.0),
        ..reference
    };
    let scalar = ConvLayout::new(
        ConvMethod::Heliks,
        ConvShape::new([3, 50, 50], [4, 3, 3], 1, Padding::Same),
        slots,
    )
    .unwrap();
    assert!(scalar.geometry().scalar_path());
    let (a, b) = (
        estimate(&scalar, &params, &base).unwrap(),
        estimate(&scalar, &params, &dearer).unwrap(),
    );
    assert!(a.counts.sc_mult > 0);
    let extra = a.counts.sc_mult as f64 * 100.0 / 1e3;
    assert!(((b.server_ms - a.server_ms) - extra).abs() < 1e-6);
    let full = MatvecLayout::new(Method::Diagonal, 128, 128, slots).unwrap();
    assert_eq!(
        estimate(&full, &params, &base).unwrap().server_ms,
        estimate(&full, &params, &dearer).unwrap().server_ms
    );
}

/// A layer whose held weights are strided transforms (Cheetah's 1x1 filters) prices its
/// products held at the strided product's cost, beyond the fused product's
/// (`held_products_ms`, which the planner adds only when the weights are held); every
/// held layer also pays for reading its plaintexts from memory, by their bytes, and
/// nothing else.
#[test]
fn strided_held_products_are_priced_apart() {
    use kernels::{ConvLayout, ConvMethod, ConvShape, Padding};
    let params = Params::preset("n8192").unwrap();
    let slots = SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: Layout::TwoRows,
    };
    let reference = CostModel::reference(&params);
    // without a figure of its own, the strided product costs the fused product's
    assert_eq!(reference.sc_mult_strided_us(), reference.sc_mult_us);
    let dearer = CostModel {
        sc_mult_strided_us: Some(reference.sc_mult_us + 100.0),
        ..reference
    };
    let strided = ConvLayout::new(
        ConvMethod::Cheetah,
        ConvShape::new([64, 14, 14], [64, 1, 1], 1, Padding::Same),
        slots,
    )
    .unwrap();
    assert!(strided.weight_stride_log2() > 0);
    // reading held plaintexts from memory priced apart: 0 here, 30 µs per MB below
    let no_read = CostModel {
        held_read_us_per_mb: Some(0.0),
        ..reference
    };
    let dearer = CostModel {
        held_read_us_per_mb: Some(0.0),
        ..dearer
    };
    let (a, b) = (
        estimate(&strided, &params, &no_read).unwrap(),
        estimate(&strided, &params, &dearer).unwrap(),
    );
    assert_eq!(a.held_products_ms, 0.0);
    assert_eq!(a.server_ms, b.server_ms);
    let level = strided.query_level(&params);
    let limbs = (params.levels() - level) as f64 / params.levels() as f64;
    assert!(b.counts.sc_mult > 0);
    let extra = b.counts.sc_mult as f64 * 100.0 * limbs / 1e3;
    assert!((b.held_products_ms - extra).abs() < 1e-6, "{b:?}");
    let read = |e: &kernels::Estimate| e.encoded_bytes as f64 / 1e6 * 30.0 / 1e3;
    let reading = |m: &CostModel| CostModel {
        held_read_us_per_mb: Some(30.0),
        ..*m
    };
    let c = estimate(&strided, &params, &reading(&dearer)).unwrap();
    assert!(c.encoded_bytes > 0);
    assert!(
        (c.held_products_ms - extra - read(&c)).abs() < 1e-6,
        "{c:?}"
    );
    assert_eq!(c.server_ms, b.server_ms);
    // a 3x3 filter is not strided: held, it adds only the reading of its plaintexts
    let full = ConvLayout::new(
        ConvMethod::Cheetah,
        ConvShape::new([64, 14, 14], [64, 3, 3], 1, Padding::Same),
        slots,
    )
    .unwrap();
    assert_eq!(full.weight_stride_log2(), 0);
    assert_eq!(
        estimate(&full, &params, &dearer).unwrap().held_products_ms,
        0.0
    );
    let d = estimate(&full, &params, &reading(&dearer)).unwrap();
    assert!(d.encoded_bytes > c.encoded_bytes);
    assert!((d.held_products_ms - read(&d)).abs() < 1e-6, "{d:?}");
    // a cache saved before the figure existed reads at the reference's price
    assert_eq!(
        reference.held_read_us_per_mb(),
        kernels::estimate::REFERENCE_HELD_READ_US_PER_MB
    );
}

/// The measured costs time each operation on every thread at once: all copies run
/// together, and each thread's median comes back.
#[test]
fn busy_timing_runs_every_thread_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let out = kernels::estimate::on_every_thread(3, || {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
        running.fetch_sub(1, Ordering::SeqCst);
        now
    });
    assert_eq!(out.len(), 3);
    assert_eq!(most.load(Ordering::SeqCst), 3);
    let us =
        kernels::estimate::busy_median_us(2, 3, || std::thread::sleep(Duration::from_millis(2)));
    assert!((2000.0..50_000.0).contains(&us), "{us}");
    assert_eq!(kernels::estimate::on_every_thread(0, || 1), vec![1]);
}

/// Weights encoded on the fly inside the fused products (a streaming kernel: Cheetah,
/// bsgs) are priced by the fused encoding at the layer's query level; a kernel that
/// prepares its plaintexts apart (the diagonal method) by the prepare, as the held
/// weights' one-time encoding always is.
#[test]
fn weights_encoded_inside_the_products_are_priced_at_their_level() {
    use kernels::{ConvLayout, ConvMethod, ConvShape, Padding};
    let params = Params::preset("n8192").unwrap();
    let slots = SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: Layout::TwoRows,
    };
    let mut model = CostModel::reference(&params);
    model.encode_in_product_us = Some(1000.0);
    for (level, us) in model.encode_in_product_coeffs_us.iter_mut().enumerate() {
        *us = Some(100.0 * (level + 1) as f64);
    }
    let cheetah = ConvLayout::new(
        ConvMethod::Cheetah,
        ConvShape::new([64, 14, 14], [64, 1, 1], 1, Padding::Same),
        slots,
    )
    .unwrap();
    assert!(cheetah.encodes_in_products());
    // 1x1 filters on 14x14 tiles: polynomials in X^196, transformed in n/4 points
    assert_eq!(cheetah.weight_stride_log2(), 2);
    let strided = model.stride_ratio(params.n(), 2);
    assert_eq!(strided, model.coeffs_stride_ratio.unwrap()[2]);
    assert!(strided < 1.0);
    let level = cheetah.query_level(&params);
    let e = estimate(&cheetah, &params, &model).unwrap();
    let limbs = (params.levels() - level) as f64 / params.levels() as f64;
    let ntt = e.plaintexts as f64;
    assert!(
        (e.encode_on_the_fly_ms - ntt * 100.0 * (level + 1) as f64 * strided / 1e3).abs() < 1e-9
    );
    assert!(
        (e.encode_ms - ntt * model.prepare_us_for(he::Encoding::Coeffs) * limbs * strided / 1e3)
            .abs()
            < 1e-9
    );
    // a 3x3 filter's plaintexts have no stride
    let three = ConvLayout::new(
        ConvMethod::Cheetah,
        ConvShape::new([64, 14, 14], [64, 3, 3], 1, Padding::Same),
        slots,
    )
    .unwrap();
    assert_eq!(three.weight_stride_log2(), 0);
    assert_eq!(model.stride_ratio(params.n(), 0), 1.0);
    // strides past the shortest transform are priced as it
    assert_eq!(
        model.stride_ratio(params.n(), 13),
        model.stride_ratio(params.n(), 9)
    );
    let bsgs = ConvLayout::new(
        ConvMethod::Bsgs,
        ConvShape::new([64, 14, 14], [64, 1, 1], 1, Padding::Same),
        slots,
    )
    .unwrap();
    assert!(bsgs.encodes_in_products());
    let e = estimate(&bsgs, &params, &model).unwrap();
    assert!((e.encode_on_the_fly_ms - e.plaintexts as f64 * 1000.0 / 1e3).abs() < 1e-9);
    let d = MatvecLayout::new(Method::Diagonal, 128, 128, slots).unwrap();
    assert!(!d.encodes_in_products());
    let e = estimate(&d, &params, &model).unwrap();
    assert_eq!(e.encode_on_the_fly_ms, e.encode_ms);
}
