//! Grouped and depthwise convolutions: shares reconstruct the plaintext grouped
//! convolution mod p on Bfv and Sim, op counts are identical on every backend and exact,
//! the depthwise kernel is much cheaper than the grouped fallback and the dense
//! convolution, and bad shapes are typed errors.
#![allow(clippy::unwrap_used)]

use he::{Backend, Bfv, Count, Counting, Layout, OpCounts, Params, Sim, SlotInfo};
use kernels::{
    estimate, ConvLayout, ConvMethod, CostModel, DepthwiseLayout, FloodPool, GroupedConvShape,
    GroupedLayout, KernelError, LinearLayer, Padding,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn real(p: &Params) -> SlotInfo {
    SlotInfo {
        n: p.n(),
        p: p.p(),
        layout: Layout::TwoRows,
    }
}

fn params() -> Params {
    Params::preset("n8192").unwrap()
}

fn dw(c: usize, h: usize, w: usize, k: usize, s: usize, pad: Padding) -> GroupedConvShape {
    GroupedConvShape::depthwise(c, h, w, k, s, pad)
}

#[allow(clippy::too_many_arguments)]
fn grouped(
    c_i: usize,
    h: usize,
    w: usize,
    c_o: usize,
    k: usize,
    s: usize,
    pad: Padding,
    groups: usize,
) -> GroupedConvShape {
    GroupedConvShape {
        c_i,
        h,
        w,
        c_o,
        k_h: k,
        k_w: k,
        stride: s,
        padding: pad,
        groups,
    }
}

/// Whether `method` applies to `sh`'s filters (checked: a grouped layout is refused
/// where it does not).
fn applies(method: ConvMethod, sh: &GroupedConvShape) -> bool {
    if method.takes_filter_width(sh.k_w) {
        return true;
    }
    let p = params();
    assert!(
        GroupedLayout::new(method, *sh, real(&p)).is_err(),
        "{method} {sh:?}"
    );
    false
}

fn problem(sh: &GroupedConvShape, seed: u64) -> (Vec<i64>, Vec<i64>) {
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let x = (0..sh.input_len())
        .map(|_| r.random_range(-16..=16))
        .collect();
    let f = (0..sh.weight_len())
        .map(|_| r.random_range(-16..=16))
        .collect();
    (x, f)
}

/// The expected output mod p, by two independent routes: `reference::grouped_conv`, and
/// the dense `reference::conv` with the block-diagonal filters (zeros across groups).
fn reference(sh: &GroupedConvShape, x: &[i64], f: &[i64], p: u64) -> Vec<u64> {
    let direct = kernels::reference::grouped_conv(sh, x, f).unwrap();
    let (cig, cog, taps) = (sh.group_in(), sh.group_out(), sh.k_h * sh.k_w);
    let mut dense = vec![0i64; sh.c_o * sh.c_i * taps];
    for o in 0..sh.c_o {
        let g = o / cog;
        for c in 0..cig {
            for d in 0..taps {
                dense[(o * sh.c_i + g * cig + c) * taps + d] = f[(o * cig + c) * taps + d];
            }
        }
    }
    let via_dense = kernels::reference::conv(&sh.dense_shape(), x, &dense);
    assert_eq!(direct, via_dense, "grouped reference vs dense {sh:?}");
    let (c_o, h_out, w_out) = sh.output_shape().unwrap();
    assert_eq!(direct.len(), c_o * h_out * w_out);
    kernels::reference::reduce(&direct, p)
}

fn run<B: Backend, L: LinearLayer>(b: &B, layout: &L, x: &[i64], f: &[i64], bits: u32) -> Vec<u64> {
    let p = b.slots().p;
    let xr: Vec<u64> = x.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect();
    let m = layout.encode_weights(b, f).unwrap();
    let q = layout.query(b, &xr).unwrap();
    assert_eq!(q.len(), layout.query_cts());
    let mut pool = FloodPool::at_level(bits, b.level(&q[0]));
    pool.fill(b, layout.output_cts()).unwrap();
    let (resp, server) = layout.respond(b, &m, &q, &mut pool).unwrap();
    assert_eq!(resp.len(), layout.output_cts());
    let client = layout.decrypt(b, &resp).unwrap();
    client
        .iter()
        .zip(&server)
        .map(|(a, c)| (a + c) % p)
        .collect()
}

/// The server's online counts of one layer (compute only) on the counting backend.
fn counts<L: LinearLayer>(layout: &L, params: &Params) -> OpCounts {
    let c = Count::real(params, layout.galois());
    let m = layout
        .encode_weights(&c, &vec![0; layout.weight_len()])
        .unwrap();
    let q = layout.query(&c, &vec![0; layout.input_len()]).unwrap();
    c.take();
    layout.compute(&c, &m, &q).unwrap();
    c.take()
}

fn depthwise_shapes() -> Vec<GroupedConvShape> {
    let mut v = vec![
        dw(1, 5, 5, 3, 1, Padding::Same),
        dw(3, 8, 8, 3, 1, Padding::Same),
        dw(3, 9, 7, 3, 2, Padding::Same),
        dw(16, 16, 16, 3, 1, Padding::Same),
        dw(16, 16, 16, 3, 2, Padding::Same),
        // c·h·w > n: several query ciphertexts (and stride phases at s = 2).
        dw(32, 32, 32, 3, 1, Padding::Same),
        dw(32, 32, 32, 3, 2, Padding::Same),
        dw(96, 16, 16, 3, 1, Padding::Same),
        dw(96, 16, 16, 3, 2, Padding::Same),
        dw(8, 14, 14, 5, 1, Padding::Valid),
        dw(8, 14, 14, 5, 2, Padding::Valid),
        dw(40, 13, 13, 5, 2, Padding::Same),
        dw(16, 12, 12, 1, 1, Padding::Same),
        // 1x1 at stride 2: phases beyond the filter (every phase shift is a rotation).
        dw(64, 12, 12, 1, 2, Padding::Valid),
        // Odd size, 1x1 stride 2 valid: the phases do not fit the grid (P = 1).
        dw(40, 9, 9, 1, 2, Padding::Valid),
        dw(30, 20, 20, 3, 3, Padding::Same),
        // Channels larger than a row: strips with halos.
        dw(2, 100, 90, 3, 1, Padding::Same),
        dw(3, 70, 70, 5, 2, Padding::Valid),
        // Channel multipliers.
        grouped(4, 10, 10, 8, 3, 1, Padding::Same, 4),
        grouped(30, 12, 12, 90, 5, 2, Padding::Same, 30),
    ];
    // A rectangular filter.
    v.push(GroupedConvShape {
        k_w: 1,
        ..dw(5, 9, 8, 3, 1, Padding::Same)
    });
    v
}

#[test]
fn depthwise_reconstructs_on_sim() {
    let params = params();
    for (i, sh) in depthwise_shapes().iter().enumerate() {
        let (x, f) = problem(sh, i as u64);
        let want = reference(sh, &x, &f, params.p());
        let layout = DepthwiseLayout::new(*sh, real(&params)).unwrap();
        let sim = Sim::new(&params, layout.galois());
        assert_eq!(run(&sim, &layout, &x, &f, 0), want, "depthwise {sh:?}");
    }
}

#[test]
fn grouped_plan_runs_depthwise_shapes_too() {
    // The fallback and cross-check: depthwise shapes through GroupedLayout (a few here,
    // every one in the ignored test below), equal to DepthwiseLayout's output.
    grouped_runs_depthwise(&[
        dw(3, 9, 7, 3, 2, Padding::Same),
        dw(16, 16, 16, 3, 2, Padding::Same),
        dw(8, 14, 14, 5, 1, Padding::Valid),
        dw(2, 100, 90, 3, 1, Padding::Same),
        grouped(4, 10, 10, 8, 3, 1, Padding::Same, 4),
    ]);
}

#[test]
#[ignore]
fn grouped_plan_runs_every_depthwise_shape() {
    grouped_runs_depthwise(&depthwise_shapes());
}

fn grouped_runs_depthwise(shapes: &[GroupedConvShape]) {
    let params = params();
    for (i, sh) in shapes.iter().enumerate() {
        let (x, f) = problem(sh, 100 + i as u64);
        let want = reference(sh, &x, &f, params.p());
        let layout = GroupedLayout::new(ConvMethod::Gala, *sh, real(&params)).unwrap();
        let sim = Sim::new(&params, layout.galois());
        assert_eq!(run(&sim, &layout, &x, &f, 0), want, "grouped {sh:?}");
        let d = DepthwiseLayout::new(*sh, real(&params)).unwrap();
        let sim = Sim::new(&params, d.galois());
        assert_eq!(run(&sim, &d, &x, &f, 0), want, "depthwise {sh:?}");
    }
}

#[test]
fn general_groups_with_every_method_on_sim() {
    let params = params();
    let shapes = [
        grouped(8, 8, 8, 16, 3, 1, Padding::Same, 4),
        grouped(6, 9, 9, 9, 3, 2, Padding::Valid, 3),
        grouped(4, 6, 6, 4, 1, 1, Padding::Same, 2),
        grouped(8, 7, 7, 4, 5, 2, Padding::Same, 1),
    ];
    for (i, sh) in shapes.iter().enumerate() {
        let (x, f) = problem(sh, 200 + i as u64);
        let want = reference(sh, &x, &f, params.p());
        for method in ConvMethod::ALL {
            if !applies(method, sh) {
                continue;
            }
            let layout = GroupedLayout::new(method, *sh, real(&params)).unwrap();
            assert_eq!(layout.method_name(), format!("grouped:{method}"));
            let sim = Sim::new(&params, layout.galois());
            assert_eq!(run(&sim, &layout, &x, &f, 0), want, "{method} {sh:?}");
        }
    }
    // One group is the dense convolution.
    let sh = shapes[3];
    let (x, f) = problem(&sh, 203);
    let dense = ConvLayout::new(ConvMethod::Gala, sh.dense_shape(), real(&params)).unwrap();
    let sim = Sim::new(&params, dense.galois());
    assert_eq!(
        run(&sim, &dense, &x, &f, 0),
        reference(&sh, &x, &f, params.p())
    );
}

#[test]
fn bfv_grouped_and_depthwise() {
    let params = params();
    let depthwise = [
        dw(3, 8, 8, 3, 1, Padding::Same),
        // Two query ciphertexts sharing one response (stride phases).
        dw(32, 16, 16, 3, 2, Padding::Same),
        grouped(2, 8, 8, 4, 3, 1, Padding::Valid, 2),
    ];
    for (i, sh) in depthwise.iter().enumerate() {
        let (x, f) = problem(sh, 300 + i as u64);
        let want = reference(sh, &x, &f, params.p());
        let layout = DepthwiseLayout::new(*sh, real(&params)).unwrap();
        check_bfv(
            &params,
            &layout,
            &x,
            &f,
            &want,
            &format!("depthwise {sh:?}"),
        );
    }
    // 30x30 grids: 4 blocks per row, so GALA's block shifts stay few.
    let sh = grouped(4, 28, 28, 8, 3, 1, Padding::Same, 2);
    let (x, f) = problem(&sh, 310);
    let want = reference(&sh, &x, &f, params.p());
    let layout = GroupedLayout::new(ConvMethod::Gala, sh, real(&params)).unwrap();
    check_bfv(&params, &layout, &x, &f, &want, &format!("grouped {sh:?}"));
}

fn check_bfv<L: LinearLayer>(
    params: &Params,
    layout: &L,
    x: &[i64],
    f: &[i64],
    want: &[u64],
    what: &str,
) {
    let bits = layout.flood_bits(params).unwrap();
    let b = Counting::new(Bfv::keygen(params, layout.galois()).unwrap());
    assert_eq!(run(&b, layout, x, f, bits), want, "{what} on Bfv");
    let c = Count::real(params, layout.galois());
    run(&c, layout, x, f, bits);
    let (bc, cc) = (b.counts(), c.counts());
    assert_eq!(
        (bc.perm, bc.dec_perm, bc.hst_perm, bc.sc_mult, bc.add),
        (cc.perm, cc.dec_perm, cc.hst_perm, cc.sc_mult, cc.add),
        "{what}"
    );
}

#[test]
fn identical_counts_on_sim_and_count() {
    let params = params();
    for (i, sh) in [
        dw(32, 32, 32, 3, 2, Padding::Same),
        dw(2, 100, 90, 3, 1, Padding::Same),
        grouped(30, 12, 12, 90, 5, 2, Padding::Same, 30),
    ]
    .iter()
    .enumerate()
    {
        let (x, f) = problem(sh, 400 + i as u64);
        let layout = DepthwiseLayout::new(*sh, real(&params)).unwrap();
        same_counts(&params, &layout, &x, &f);
    }
    let sh = grouped(8, 8, 8, 16, 3, 2, Padding::Same, 4);
    let (x, f) = problem(&sh, 410);
    for method in ConvMethod::ALL {
        if !applies(method, &sh) {
            continue;
        }
        let layout = GroupedLayout::new(method, sh, real(&params)).unwrap();
        same_counts(&params, &layout, &x, &f);
    }
}

fn same_counts<L: LinearLayer>(params: &Params, layout: &L, x: &[i64], f: &[i64]) {
    let sim = Counting::new(Sim::new(params, layout.galois()));
    let cnt = Count::real(params, layout.galois());
    run(&sim, layout, x, f, 0);
    run(&cnt, layout, x, f, 0);
    assert_eq!(sim.counts(), cnt.counts(), "{}", layout.method_name());
}

#[test]
fn depthwise_counts_are_exact() {
    // Per query ciphertext: one decomposition, f − 1 hoisted rotations (k ≥ s), m·f
    // ScMults; no plain rotation, no column rotation.
    let params = params();
    for sh in depthwise_shapes() {
        let layout = DepthwiseLayout::new(sh, real(&params)).unwrap();
        let g = layout.geometry().clone();
        let taps = (sh.k_h * sh.k_w) as u64;
        let inputs = (g.in_cts * g.strips) as u64;
        let rotations: u64 = (0..g.in_cts)
            .map(|i| g.steps(i).iter().filter(|&&s| s != 0).count() as u64)
            .sum::<u64>()
            * g.strips as u64;
        let c = counts(&layout, &params);
        assert_eq!(c.perm, 0, "{sh:?}");
        assert_eq!(c.hst_perm, rotations, "{sh:?}");
        if sh.k_h >= sh.stride && sh.k_w >= sh.stride {
            assert_eq!(c.hst_perm, inputs * (taps - 1), "{sh:?}");
        }
        let hoisted = (0..g.in_cts)
            .filter(|&i| g.steps(i).iter().any(|&s| s != 0))
            .count()
            * g.strips;
        assert_eq!(c.dec_perm, hoisted as u64, "{sh:?}");
        assert_eq!(c.sc_mult, inputs * sh.multiplier() as u64 * taps, "{sh:?}");
        assert!(!layout.galois().column);
        assert_eq!(
            layout.output_cts(),
            g.strips * g.in_cts.div_ceil(g.phases) * sh.multiplier()
        );
    }
    // The measured shapes, by hand: 32x32 same 3x3 → 34x34 grids, 3 per row, 6 per
    // ciphertext; 16x16 → 18x18 grids, 12 per row. At stride 2 the grids are 33x33
    // (3 per row) and 17x17 (14 per row) and four phases share a response.
    let want = [
        (dw(32, 32, 32, 3, 1, Padding::Same), (6, 48, 54, 6, 8)),
        (dw(32, 32, 32, 3, 2, Padding::Same), (6, 48, 54, 2, 15)),
        (dw(96, 16, 16, 3, 1, Padding::Same), (4, 32, 36, 4, 8)),
        (dw(96, 16, 16, 3, 2, Padding::Same), (4, 32, 36, 1, 15)),
    ];
    for (sh, (q, rot, sc, out, keys)) in want {
        let layout = DepthwiseLayout::new(sh, real(&params)).unwrap();
        let c = counts(&layout, &params);
        assert_eq!(
            (
                layout.query_cts(),
                c.rotations(),
                c.sc_mult,
                layout.output_cts(),
                layout.galois().key_count(4096)
            ),
            (q, rot, sc, out, keys),
            "{sh:?}"
        );
    }
}

#[test]
fn depthwise_is_much_cheaper_than_grouped_and_dense() {
    let params = params();
    for sh in [
        dw(32, 32, 32, 3, 1, Padding::Same),
        dw(32, 32, 32, 3, 2, Padding::Same),
        dw(96, 16, 16, 3, 1, Padding::Same),
        dw(96, 16, 16, 3, 2, Padding::Same),
    ] {
        let dp = DepthwiseLayout::new(sh, real(&params)).unwrap();
        let d = counts(&dp, &params);
        for method in ConvMethod::ALL {
            if !applies(method, &sh) {
                continue;
            }
            let gp = GroupedLayout::new(method, sh, real(&params)).unwrap();
            let g = counts(&gp, &params);
            let dense = counts(
                &ConvLayout::new(method, sh.dense_shape(), real(&params)).unwrap(),
                &params,
            );
            eprintln!(
                "{method} {sh:?}: depthwise {}/{} grouped {}/{} dense {}/{}",
                d.rotations(),
                d.sc_mult,
                g.rotations(),
                g.sc_mult,
                dense.rotations(),
                dense.sc_mult
            );
            if dense.rotations() > 0 {
                // The slot methods: GALA's dense kernel needs 3x the rotations.
                assert!(4 * d.rotations() <= g.rotations(), "{method} {sh:?}");
                // The dense layer packs its channels densely ('same' padding) and BSGS
                // folds its blocks with √c_n giant steps: fewer rotations than before
                // (80 for GALA, 88 for BSGS on 32x32x32 3x3), still above depthwise.
                assert!(d.rotations() < dense.rotations(), "{method} {sh:?}");
                assert!(4 * d.sc_mult <= g.sc_mult, "{method} {sh:?}");
                assert!(10 * d.sc_mult <= dense.sc_mult, "{method} {sh:?}");
            } else {
                // ENSEI and Cheetah rotate nothing (ENSEI transforms in the clear,
                // Cheetah encodes coefficients) and need fewer products than the
                // depthwise kernel's f per ciphertext when run per group; but every
                // group sends its own query and response: at least twice the bytes.
                let model = CostModel::reference(&params);
                let (ed, eg) = (
                    estimate(&dp, &params, &model).unwrap(),
                    estimate(&gp, &params, &model).unwrap(),
                );
                assert!(
                    2 * (ed.bytes_up + ed.bytes_down) <= eg.bytes_up + eg.bytes_down,
                    "{method} {sh:?} {ed:?} {eg:?}"
                );
            }
        }
    }
}

#[test]
fn stride_phases_shrink_the_response() {
    // 32x32x32 stride 2: four query ciphertexts share a response (2 instead of 6). With
    // a budget below the phases' 15 keys, the layout falls back to one phase per response.
    let params = params();
    let sh = dw(32, 32, 32, 3, 2, Padding::Same);
    let (x, f) = problem(&sh, 500);
    let want = reference(&sh, &x, &f, params.p());
    let phased = DepthwiseLayout::new(sh, real(&params)).unwrap();
    let single = DepthwiseLayout::with_key_budget(sh, real(&params), Some(10)).unwrap();
    assert_eq!((phased.geometry().phases, phased.output_cts()), (4, 2));
    assert_eq!((single.geometry().phases, single.output_cts()), (1, 6));
    assert_eq!(single.galois().key_count(4096), 8);
    for layout in [&phased, &single] {
        let sim = Sim::new(&params, layout.galois());
        assert_eq!(run(&sim, layout, &x, &f, 0), want);
    }
    let model = CostModel::reference(&params);
    let a = estimate(&phased, &params, &model).unwrap();
    let b = estimate(&single, &params, &model).unwrap();
    assert_eq!(3 * a.bytes_down, b.bytes_down);
    assert_eq!(a.counts.rotations(), b.counts.rotations());
}

#[test]
fn estimate_prices_both_plans() {
    let params = params();
    let model = CostModel::reference(&params);
    let last = params.levels() - 1;
    let sh = dw(96, 16, 16, 3, 2, Padding::Same);
    let d = DepthwiseLayout::new(sh, real(&params)).unwrap();
    let e = estimate(&d, &params, &model).unwrap();
    assert_eq!(e.counts.sc_mult, counts(&d, &params).sc_mult);
    let query = |layout: &dyn Fn(&Params) -> he::Dropped| {
        let r = he::Rounding {
            c0: layout(&params),
            c1: he::Dropped::NONE,
        };
        params.rounded_ct_wire_size(0, true, None, r) as u64
    };
    let response =
        params.rounded_ct_wire_size(last, false, None, params.response_rounding()) as u64;
    assert_eq!(e.bytes_up, 4 * query(&|p| d.query_rounding(p)));
    assert_eq!(e.bytes_down, response);
    assert_eq!(e.plaintexts, d.encoded_plaintexts() as u64);
    assert_eq!(e.galois_keys, 15);
    let g = GroupedLayout::new(ConvMethod::Gala, sh, real(&params)).unwrap();
    let eg = estimate(&g, &params, &model).unwrap();
    assert_eq!(eg.plaintexts, g.encoded_plaintexts() as u64);
    assert_eq!(eg.bytes_down, g.output_cts() as u64 * response);
    assert_eq!(
        eg.bytes_up,
        g.query_cts() as u64 * query(&|p| g.query_rounding(p))
    );
    assert!(e.server_ms * 10.0 < eg.server_ms, "{e:?} {eg:?}");
}

#[test]
fn bad_shapes_are_typed_errors() {
    let params = params();
    let slots = real(&params);
    let bad_groups = grouped(8, 4, 4, 12, 3, 1, Padding::Same, 3);
    assert_eq!(
        bad_groups.validate(),
        Err(KernelError::Groups {
            groups: 3,
            c_i: 8,
            c_o: 12
        })
    );
    assert!(matches!(
        GroupedLayout::new(ConvMethod::Gala, bad_groups, slots),
        Err(KernelError::Groups { .. })
    ));
    assert!(matches!(
        DepthwiseLayout::new(grouped(8, 4, 4, 12, 3, 1, Padding::Same, 8), slots),
        Err(KernelError::Groups { .. })
    ));
    assert!(matches!(
        GroupedLayout::new(
            ConvMethod::Gala,
            grouped(8, 4, 4, 8, 3, 1, Padding::Same, 0),
            slots
        ),
        Err(KernelError::EmptyDimension { what: "groups" })
    ));
    assert_eq!(
        DepthwiseLayout::new(grouped(8, 4, 4, 8, 3, 1, Padding::Same, 4), slots).unwrap_err(),
        KernelError::NotDepthwise {
            groups: 4,
            c_i: 8,
            c_o: 8
        }
    );
    assert!(matches!(
        DepthwiseLayout::new(dw(4, 2, 2, 3, 1, Padding::Valid), slots),
        Err(KernelError::Shape { .. })
    ));
    assert!(matches!(
        DepthwiseLayout::new(dw(1, 3, 5000, 3, 1, Padding::Same), slots),
        Err(KernelError::Shape { .. })
    ));
    assert!(dw(4, 2, 2, 3, 1, Padding::Valid).output_shape().is_err());
    assert!(kernels::reference::grouped_conv(&bad_groups, &[], &[]).is_err());
    let ok = dw(4, 6, 6, 3, 1, Padding::Same);
    assert!(matches!(
        kernels::reference::grouped_conv(&ok, &[0; 5], &[0; 36]),
        Err(KernelError::Shape { .. })
    ));

    let d = DepthwiseLayout::new(ok, slots).unwrap();
    let g = GroupedLayout::new(ConvMethod::Gala, ok, slots).unwrap();
    let sim = Sim::new(&params, d.galois().union(&g.galois()));
    let p = params.p() as i64;
    assert!(matches!(
        d.encode_weights(&sim, &[1; 5]),
        Err(KernelError::Shape { .. })
    ));
    assert!(matches!(
        g.encode_weights(&sim, &[1; 5]),
        Err(KernelError::Shape { .. })
    ));
    let mut w = vec![1i64; 36];
    w[7] = p / 2 + 1;
    assert_eq!(
        d.encode_weights(&sim, &w).err(),
        Some(KernelError::WeightRange {
            index: 7,
            value: p / 2 + 1,
            p: p as u64
        })
    );
    assert!(matches!(
        g.encode_weights(&sim, &w),
        Err(KernelError::WeightRange { index: 7, .. })
    ));
    assert!(matches!(
        d.query(&sim, &[1; 5]),
        Err(KernelError::Shape { .. })
    ));
    let mut x = vec![0u64; 4 * 36];
    x[3] = p as u64;
    assert!(matches!(d.query(&sim, &x), Err(KernelError::He(_))));
    assert!(matches!(g.query(&sim, &x), Err(KernelError::He(_))));
    // Wrong ciphertext counts, foreign encodings, short responses.
    let x = vec![0u64; 4 * 36];
    let md = d.encode_weights(&sim, &[1; 36]).unwrap();
    let mg = g.encode_weights(&sim, &[1; 36]).unwrap();
    let q = d.query(&sim, &x).unwrap();
    let qg = g.query(&sim, &x).unwrap();
    assert!(matches!(
        d.compute(&sim, &md, &[]),
        Err(KernelError::CiphertextCount { .. })
    ));
    assert!(matches!(
        g.compute(&sim, &mg, &qg[1..]),
        Err(KernelError::CiphertextCount { .. })
    ));
    let other = DepthwiseLayout::new(dw(4, 6, 6, 3, 2, Padding::Same), slots).unwrap();
    assert!(matches!(
        other.compute(&sim, &md, &q),
        Err(KernelError::PlanMismatch { .. })
    ));
    assert!(matches!(
        d.finish(&[]),
        Err(KernelError::CiphertextCount { .. })
    ));
    assert!(matches!(
        g.finish(&[vec![0; 8]]),
        Err(KernelError::CiphertextCount { .. })
    ));
    assert!(matches!(
        d.finish(&vec![vec![0; 8]; d.output_cts()]),
        Err(KernelError::Shape { .. })
    ));
}

/// The closing note's table (release):
/// `RAYON_NUM_THREADS=1 cargo test --release -p kernels --test grouped -- --ignored --nocapture measure`
#[test]
#[ignore]
fn measure_depthwise_against_dense() {
    let params = params();
    let model = CostModel::reference(&params);
    println!(
        "{:<34} {:<18} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>5}",
        "layer", "method", "server ms", "pred ms", "up KB", "down KB", "rot", "ScMult", "keys"
    );
    for sh in [
        dw(32, 32, 32, 3, 1, Padding::Same),
        dw(32, 32, 32, 3, 2, Padding::Same),
        dw(96, 16, 16, 3, 1, Padding::Same),
        dw(96, 16, 16, 3, 2, Padding::Same),
    ] {
        let name = format!(
            "{}x{}x{} 3x3 s{} -> {}",
            sh.c_i, sh.h, sh.w, sh.stride, sh.c_o
        );
        let d = DepthwiseLayout::new(sh, real(&params)).unwrap();
        measure(&name, &d, &sh, &params, &model);
        // The best dense method of the same c_i → c_o shape by predicted server time,
        // and GALA (the best slot method here) if that is another.
        let best = ConvMethod::ALL
            .into_iter()
            .filter_map(|m| ConvLayout::new(m, sh.dense_shape(), real(&params)).ok())
            .filter_map(|p| estimate(&p, &params, &model).ok().map(|e| (p, e.server_ms)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap()
            .0
            .method();
        let mut methods = vec![best];
        if best != ConvMethod::Gala {
            methods.push(ConvMethod::Gala);
        }
        for &m in &methods {
            let dense = ConvLayout::new(m, sh.dense_shape(), real(&params)).unwrap();
            measure(&name, &dense, &sh, &params, &model);
        }
        // The grouped fallback with the best dense method, and with ENSEI (no rotation).
        let mut grouped_methods = vec![best];
        if best != ConvMethod::Ensei {
            grouped_methods.push(ConvMethod::Ensei);
        }
        for m in grouped_methods {
            let g = GroupedLayout::new(m, sh, real(&params)).unwrap();
            measure(&name, &g, &sh, &params, &model);
        }
    }
}

fn measure<L: LinearLayer>(
    name: &str,
    layout: &L,
    sh: &GroupedConvShape,
    params: &Params,
    model: &CostModel,
) {
    let e = estimate(layout, params, model).unwrap();
    let (x, mut f) = problem(sh, 7);
    if layout.weight_len() != f.len() {
        // The dense layout: block-diagonal filters.
        f = vec![1; layout.weight_len()];
    }
    let bits = layout.flood_bits(params).unwrap();
    let b = Bfv::keygen(params, layout.galois()).unwrap();
    let p = params.p();
    let xr: Vec<u64> = x.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect();
    let m = layout.encode_weights(&b, &f).unwrap();
    let q = layout.query(&b, &xr).unwrap();
    let reps = 3;
    let mut times = Vec::new();
    for _ in 0..reps {
        let mut pool = FloodPool::at_level(bits, b.level(&q[0]));
        pool.fill(&b, layout.output_cts()).unwrap();
        let t = std::time::Instant::now();
        let r = layout.respond(&b, &m, &q, &mut pool).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(r);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{:<34} {:<18} {:>10.1} {:>10.1} {:>10.0} {:>10.0} {:>8} {:>8} {:>5}",
        name,
        layout.method_name(),
        times[reps / 2],
        e.server_ms,
        e.bytes_up as f64 / 1024.0,
        e.bytes_down as f64 / 1024.0,
        e.counts.rotations(),
        e.counts.sc_mult,
        e.galois_keys
    );
}
