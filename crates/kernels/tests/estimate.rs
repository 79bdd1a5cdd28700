//! The cost estimate: bytes from the parameters' wire sizes, counts from the counting
//! backend, and an ordering the measurements agree with (GALA's 10x128 needs no
//! rotation, GAZELLE's hybrid needs seven).
#![allow(clippy::unwrap_used)]

use he::{Layout, Params, SlotInfo};
use kernels::{estimate, CostModel, MatvecPlan, Method};

#[test]
fn estimates_price_counts_and_bytes() {
    let params = Params::preset("n8192").unwrap();
    let slots = SlotInfo {
        n: params.n(),
        p: params.p(),
        layout: Layout::TwoRows,
    };
    let model = CostModel::reference(&params);
    let gala = MatvecPlan::new(Method::Gala, 10, 128, slots).unwrap();
    let hybrid = MatvecPlan::new(Method::Hybrid, 10, 128, slots).unwrap();
    let g = estimate(&gala, &params, &model).unwrap();
    let h = estimate(&hybrid, &params, &model).unwrap();
    let last = params.levels() - 1;
    assert_eq!(g.bytes_up, params.ct_wire_size(0, true) as u64);
    assert_eq!(g.bytes_down, params.ct_wire_size(last, false) as u64);
    assert_eq!((g.counts.rotations(), g.galois_keys), (0, 0));
    assert_eq!(h.counts.rotations(), 7);
    assert!(h.server_ms > g.server_ms + 5.0 * model.hst_perm_us / 1e3);
    // One fused product and the share step: 58 µs + 2.8 ms at the reference costs.
    assert!((g.server_ms - (model.sc_mult_us + model.share_us) / 1e3).abs() < 0.2);
    // A link adds the transfer and one round trip.
    let wan = g.total_ms(200e6 / 8.0, 13.0);
    let bytes = (g.bytes_up + g.bytes_down) as f64;
    assert!((wan - g.server_ms - 13.0 - bytes / 25e6 * 1e3).abs() < 1e-9);
}
