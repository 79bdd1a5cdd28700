//! Convolution kernels: shares reconstruct an independent integer convolution; op counts
//! equal GALA Table III and the consistent cells of Table VII.
#![allow(clippy::unwrap_used)]

use he::{Backend, Bfv, Count, Counting, Layout, OpCounts, Params, Sim, SlotInfo};
use kernels::{
    ConvLayout, ConvMethod, ConvShape, FloodPool, KernelError, LinearLayer, Packing, Padding,
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

fn shape(
    c_i: usize,
    h: usize,
    w: usize,
    c_o: usize,
    k: usize,
    s: usize,
    pad: Padding,
) -> ConvShape {
    ConvShape {
        c_i,
        h,
        w,
        c_o,
        k_h: k,
        k_w: k,
        stride: s,
        padding: pad,
    }
}

/// Independent reference: zero-padded integer convolution (TensorFlow SAME / VALID).
fn reference(sh: &ConvShape, x: &[i64], f: &[i64], p: u64) -> Vec<u64> {
    kernels::reference::reduce(&kernels::reference::conv(sh, x, f), p)
}

fn problem(sh: &ConvShape, seed: u64) -> (Vec<i64>, Vec<i64>) {
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let x = (0..sh.c_i * sh.h * sh.w)
        .map(|_| r.random_range(-16..=16))
        .collect();
    let f = (0..sh.c_o * sh.c_i * sh.k_h * sh.k_w)
        .map(|_| r.random_range(-16..=16))
        .collect();
    (x, f)
}

fn run<B: Backend>(b: &B, layout: &ConvLayout, x: &[i64], f: &[i64], bits: u32) -> Vec<u64> {
    let p = b.slots().p;
    let xr: Vec<u64> = x.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect();
    let m = layout.encode(b, f).unwrap();
    let q = layout.query(b, &xr).unwrap();
    let mut pool = FloodPool::at_level(bits, b.level(&q[0]));
    pool.fill(b, layout.output_cts()).unwrap();
    let (resp, server) = layout.respond(b, &m, &q, &mut pool).unwrap();
    let client = layout.decrypt(b, &resp).unwrap();
    client
        .iter()
        .zip(&server)
        .map(|(a, c)| (a + c) % p)
        .collect()
}

#[test]
fn every_method_reconstructs_on_sim() {
    let params = Params::preset("n8192").unwrap();
    let shapes = [
        shape(1, 5, 5, 2, 3, 1, Padding::Same),
        shape(3, 8, 8, 4, 3, 1, Padding::Same),
        shape(1, 28, 28, 5, 5, 2, Padding::Valid),
        shape(16, 16, 16, 16, 1, 1, Padding::Same),
        shape(8, 14, 14, 8, 3, 1, Padding::Same),
        shape(3, 9, 7, 5, 3, 2, Padding::Same),
        shape(32, 32, 32, 32, 3, 1, Padding::Same),
        // Channels larger than a row (S = 4096 slots): strips with halos.
        shape(2, 100, 90, 3, 3, 1, Padding::Same),
        shape(1, 70, 70, 2, 5, 2, Padding::Valid),
    ];
    for (i, sh) in shapes.iter().enumerate() {
        let (x, f) = problem(sh, i as u64);
        let want = reference(sh, &x, &f, params.p());
        for method in ConvMethod::ALL {
            if !applies(method, sh) {
                continue;
            }
            let layout = ConvLayout::new(method, *sh, real(&params)).unwrap();
            let sim = Sim::new(&params, layout.galois());
            assert_eq!(run(&sim, &layout, &x, &f, 0), want, "{method} {sh:?}");
        }
    }
}

/// Whether `method` applies to `sh`: padded Cheetah tiles only for filters one column
/// wide (checked: it refuses the others).
fn applies(method: ConvMethod, sh: &ConvShape) -> bool {
    if !method.takes_filter_width(sh.k_w) {
        let p = Params::preset("n8192").unwrap();
        assert!(ConvLayout::new(method, *sh, real(&p)).is_err(), "{sh:?}");
        return false;
    }
    true
}

/// The slot methods (the ones with a choice of packing).
const SLOT_METHODS: [ConvMethod; 5] = [
    ConvMethod::GazelleOut,
    ConvMethod::GazelleIn,
    ConvMethod::Gala,
    ConvMethod::Heliks,
    ConvMethod::Bsgs,
];

#[test]
fn compact_packing_reconstructs_on_sim() {
    // 'same' convolutions on odd sizes, even and odd filters, strides 1 and 2, where
    // the shifted channels run into the next block and the last block wraps to the
    // first; every tap that crosses a border must be zeroed.
    let params = Params::preset("n8192").unwrap();
    let shapes = [
        shape(1, 5, 5, 2, 3, 1, Padding::Same),
        shape(5, 7, 9, 3, 3, 1, Padding::Same),
        shape(3, 9, 7, 5, 3, 2, Padding::Same),
        shape(6, 11, 6, 7, 5, 1, Padding::Same),
        shape(4, 10, 10, 4, 4, 2, Padding::Same),
        shape(3, 13, 13, 9, 2, 1, Padding::Same),
        shape(20, 16, 16, 12, 3, 1, Padding::Same),
        shape(2, 60, 60, 3, 3, 1, Padding::Same),
        shape(3, 8, 8, 4, 1, 1, Padding::Same),
    ];
    for (i, sh) in shapes.iter().enumerate() {
        let (x, f) = problem(sh, 100 + i as u64);
        let want = reference(sh, &x, &f, params.p());
        for method in SLOT_METHODS {
            let layout =
                ConvLayout::with_packing(method, *sh, real(&params), None, Packing::Compact)
                    .unwrap();
            let g = layout.geometry();
            assert!(
                g.c_n * sh.h * sh.w <= 4096 && 2 * g.c_n * sh.h * sh.w > 4096,
                "{g:?}"
            );
            let sim = Sim::new(&params, layout.galois());
            assert_eq!(
                run(&sim, &layout, &x, &f, 0),
                want,
                "{method} compact {sh:?}"
            );
        }
    }
}

#[test]
fn compact_packing_on_bfv() {
    // 45x45 'same': two channels per row compact, one padded (47x47 > 2048 + halo).
    let params = Params::preset("n8192").unwrap();
    let sh = shape(5, 45, 45, 3, 3, 1, Padding::Same);
    let (x, f) = problem(&sh, 7);
    let want = reference(&sh, &x, &f, params.p());
    for method in [ConvMethod::Gala, ConvMethod::Heliks, ConvMethod::Bsgs] {
        let layout =
            ConvLayout::with_packing(method, sh, real(&params), Some(16), Packing::Compact)
                .unwrap();
        assert_eq!(layout.geometry().c_n, 2);
        let bits = layout.flood_bits(&params).unwrap();
        let b = Bfv::keygen(&params, layout.galois()).unwrap();
        assert_eq!(
            run(&b, &layout, &x, &f, bits),
            want,
            "{method} compact on Bfv"
        );
    }
}

#[test]
fn scalar_path_on_bfv() {
    // One channel per row: every weight plaintext is one constant per row (no NTT, four
    // words per modulus held).
    let params = Params::preset("n8192").unwrap();
    for (i, (sh, methods)) in [
        (
            shape(3, 50, 50, 4, 3, 1, Padding::Same),
            &[ConvMethod::Gala, ConvMethod::Heliks][..],
        ),
        (
            shape(2, 61, 61, 3, 5, 2, Padding::Valid),
            &[ConvMethod::GazelleOut, ConvMethod::Bsgs][..],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let (x, f) = problem(&sh, 40 + i as u64);
        let want = reference(&sh, &x, &f, params.p());
        for &method in methods {
            let layout = ConvLayout::new(method, sh, real(&params)).unwrap();
            assert!(layout.geometry().scalar_path(), "{method} {sh:?}");
            let bits = layout.flood_bits(&params).unwrap();
            let b = Counting::new(Bfv::keygen(&params, layout.galois()).unwrap());
            b.take();
            let m = layout.encode(&b, &f).unwrap();
            let c = b.take();
            assert_eq!(
                (c.ntt, c.row_constants as usize),
                (0, layout.encoded_plaintexts())
            );
            drop(m);
            // held compactly: four words per modulus, not n·L
            let est = kernels::estimate::estimate(
                &layout,
                &params,
                &kernels::CostModel::reference(&params),
            )
            .unwrap();
            assert_eq!(
                est.encoded_bytes,
                layout.encoded_plaintexts() as u64 * 4 * 8 * params.levels() as u64
            );
            assert_eq!(
                run(&b, &layout, &x, &f, bits),
                want,
                "{method} {sh:?} on Bfv"
            );
        }
    }
}

#[test]
fn compact_packing_only_where_it_applies() {
    let params = Params::preset("n8192").unwrap();
    let compact = |m, sh| ConvLayout::with_packing(m, sh, real(&params), None, Packing::Compact);
    for (m, sh) in [
        (ConvMethod::Gala, shape(3, 8, 8, 4, 3, 1, Padding::Valid)),
        (ConvMethod::Ensei, shape(3, 8, 8, 4, 3, 1, Padding::Same)),
        (ConvMethod::Cheetah, shape(3, 8, 8, 4, 3, 1, Padding::Same)),
        (ConvMethod::Gala, shape(3, 2, 8, 4, 3, 1, Padding::Same)),
        (
            ConvMethod::Heliks,
            shape(2, 100, 90, 3, 3, 1, Padding::Same),
        ),
    ] {
        assert!(
            matches!(compact(m, sh), Err(KernelError::Packing { .. })),
            "{m} {sh:?}"
        );
    }
    // The automatic choice: compact where it packs more channels and costs less.
    let auto = |m, sh| ConvLayout::new(m, sh, real(&params)).unwrap().packing();
    let sh16 = shape(128, 16, 16, 128, 3, 1, Padding::Same);
    assert_eq!(
        ConvLayout::with_packing(
            ConvMethod::Gala,
            sh16,
            real(&params),
            None,
            Packing::Compact
        )
        .unwrap()
        .geometry()
        .c_n,
        16
    );
    assert_eq!(
        ConvLayout::new(ConvMethod::Gala, sh16, real(&params))
            .unwrap()
            .geometry()
            .c_n,
        16
    );
    for m in SLOT_METHODS {
        assert_eq!(auto(m, sh16), Packing::Compact, "{m}");
        // 56x56: both layouts hold one channel per row; padded kept.
        assert_eq!(
            auto(m, shape(64, 56, 56, 64, 3, 1, Padding::Same)),
            Packing::Padded
        );
        assert_eq!(
            auto(m, shape(64, 16, 16, 64, 3, 1, Padding::Valid)),
            Packing::Padded
        );
    }
    for m in [ConvMethod::Ensei, ConvMethod::Cheetah] {
        assert_eq!(auto(m, sh16), Packing::Padded, "{m}");
    }
}

#[test]
fn bfv_small_convolutions() {
    let params = Params::preset("n8192").unwrap();
    // GAZELLE's input rotation needs c_n·f keys (composed beyond 64, slow on Bfv): it
    // runs on a 1x1 shape whose 63 steps fit the budget; the others on 3x3 and 5x5.
    let cases = [
        (shape(3, 8, 8, 4, 3, 1, Padding::Same), false),
        (shape(1, 28, 28, 5, 5, 2, Padding::Valid), false),
        (shape(4, 6, 6, 2, 1, 1, Padding::Same), true),
    ];
    for (i, (sh, input_rotation)) in cases.iter().enumerate() {
        let (x, f) = problem(sh, 10 + i as u64);
        let want = reference(sh, &x, &f, params.p());
        for method in ConvMethod::ALL {
            if (method == ConvMethod::GazelleIn) != *input_rotation || !applies(method, sh) {
                continue;
            }
            let layout = ConvLayout::new(method, *sh, real(&params)).unwrap();
            let bits = layout.flood_bits(&params).unwrap();
            let b = Counting::new(Bfv::keygen(&params, layout.galois()).unwrap());
            assert_eq!(
                run(&b, &layout, &x, &f, bits),
                want,
                "{method} {sh:?} on Bfv"
            );
            let c = Count::real(&params, layout.galois());
            run(&c, &layout, &x, &f, bits);
            let (bc, cc) = (b.counts(), c.counts());
            assert_eq!(
                (bc.perm, bc.hst_perm, bc.sc_mult, bc.add),
                (cc.perm, cc.hst_perm, cc.sc_mult, cc.add)
            );
        }
    }
}

/// Counts in the papers' model (one cyclic row of n slots): 'valid' shapes padded (no
/// padding), 'same' shapes compactly packed (c_n = n/(h·w) as the papers count).
fn ideal_counts(method: ConvMethod, sh: ConvShape, n: usize) -> OpCounts {
    let slots = SlotInfo {
        n,
        p: 12289,
        layout: Layout::Cyclic,
    };
    let packing = match sh.padding {
        Padding::Same => Packing::Compact,
        Padding::Valid => Packing::Padded,
    };
    let layout = ConvLayout::with_packing(method, sh, slots, None, packing).unwrap();
    let c = Count::ideal(n, 12289, layout.galois());
    let m = layout
        .encode(&c, &vec![0; sh.c_o * sh.c_i * sh.k_h * sh.k_w])
        .unwrap();
    let q = layout.query(&c, &vec![0; sh.c_i * sh.h * sh.w]).unwrap();
    c.take();
    layout.compute(&c, &m, &q).unwrap();
    c.take()
}

#[test]
fn gala_table_iii_formulas() {
    // 16x16 inputs fill blocks of 256 slots exactly (the papers' model, c_n = n / 256):
    // with valid padding, and on the papers' own 'same' shapes compactly packed; formulas
    // of GALA Table III.
    for (n, pad) in [2048usize, 4096]
        .into_iter()
        .flat_map(|n| [(n, Padding::Valid), (n, Padding::Same)])
    {
        let c_n = (n / 256) as u64;
        for (c_i, c_o, k) in [(64usize, 32usize, 3usize), (128, 128, 1), (32, 64, 5)] {
            let sh = shape(c_i, 16, 16, c_o, k, 1, pad);
            let (ci, co, f) = (c_i as u64, c_o as u64, (k * k) as u64);
            let gz = ideal_counts(ConvMethod::GazelleOut, sh, n);
            let ga = ideal_counts(ConvMethod::Gala, sh, n);
            let common = (
                ci * (f - 1) / c_n,
                ci * co * f / c_n,
                co * (ci * f - 1) / c_n,
            );
            assert_eq!(
                gz.perm,
                ci * co * (c_n - 1) / (c_n * c_n),
                "gazelle perm n={n} {sh:?}"
            );
            assert_eq!(ga.perm, co * (c_n - 1) / c_n, "gala perm n={n} {sh:?}");
            for c in [gz, ga] {
                assert_eq!((c.hst_perm, c.sc_mult, c.add), common, "n={n} {sh:?}");
                assert_eq!(c.dec_perm, if f > 1 { ci / c_n } else { 0 });
            }
        }
    }
}

#[test]
fn gala_table_vii_consistent_cells() {
    for pad in [Padding::Same, Padding::Valid] {
        gala_table_vii(pad);
    }
}

fn gala_table_vii(pad: Padding) {
    // GALA Table VII (n = 2048, 16x16 inputs, c_n = 8), on its own 'same' shapes (compact)
    // and 'valid'. Cells DecPerm / HstPerm include the output Perms. Consistent cells
    // (those that agree with GALA Table III's formulas): rows 1, 3, 4 all; row 2 GAZELLE HstPerm and
    // ScMult, GALA ScMult.
    let table = |c: OpCounts| (c.perm + c.dec_perm, c.perm + c.hst_perm, c.sc_mult, c.add);
    let row1 = shape(128, 16, 16, 128, 1, 1, pad);
    assert_eq!(
        table(ideal_counts(ConvMethod::GazelleOut, row1, 2048)),
        (1792, 1792, 2048, 2032)
    );
    assert_eq!(
        table(ideal_counts(ConvMethod::Gala, row1, 2048)),
        (112, 112, 2048, 2032)
    );
    let row3 = shape(128, 16, 16, 128, 3, 1, pad);
    assert_eq!(
        table(ideal_counts(ConvMethod::GazelleOut, row3, 2048)),
        (1808, 1920, 18432, 18416)
    );
    assert_eq!(
        table(ideal_counts(ConvMethod::Gala, row3, 2048)),
        (128, 240, 18432, 18416)
    );
    let row2 = shape(2048, 16, 16, 512, 1, 1, pad);
    let g = table(ideal_counts(ConvMethod::GazelleOut, row2, 2048));
    assert_eq!((g.1, g.2), (114688, 131072));
    assert_eq!(table(ideal_counts(ConvMethod::Gala, row2, 2048)).2, 131072);
    let row4 = shape(2048, 16, 16, 64, 5, 1, pad);
    assert_eq!(
        table(ideal_counts(ConvMethod::GazelleOut, row4, 2048)),
        (14592, 20480, 409600, 409592)
    );
    assert_eq!(
        table(ideal_counts(ConvMethod::Gala, row4, 2048)),
        (312, 6200, 409600, 409592)
    );
}

#[test]
fn heliks_matches_table_1_with_at_most_four_keys() {
    // Ideal model, 16x16 valid or 'same' compact (c_n = n/256):
    // Perm = c_o (f − 1) + c_o (c_n − 1)/c_n.
    for (n, c_i, c_o, k, pad) in [
        (2048usize, 64usize, 32usize, 3usize, Padding::Valid),
        (4096, 32, 64, 5, Padding::Valid),
        (2048, 16, 16, 1, Padding::Valid),
        (2048, 64, 32, 3, Padding::Same),
        (4096, 32, 64, 5, Padding::Same),
    ] {
        let sh = shape(c_i, 16, 16, c_o, k, 1, pad);
        let c_n = (n / 256) as u64;
        let (co, ci, f) = (c_o as u64, c_i as u64, (k * k) as u64);
        let c = ideal_counts(ConvMethod::Heliks, sh, n);
        assert_eq!(c.perm, co * (f - 1) + co * (c_n - 1) / c_n, "n={n} {sh:?}");
        assert_eq!((c.hst_perm, c.sc_mult), (0, ci * co * f / c_n));
    }
    let params = Params::preset("n8192").unwrap();
    let layout = ConvLayout::new(
        ConvMethod::Heliks,
        shape(16, 16, 16, 16, 3, 1, Padding::Same),
        real(&params),
    )
    .unwrap();
    assert!(layout.galois().key_count(4096) <= 4);
}

#[test]
fn gazelle_in_matches_its_derived_formula() {
    // HstPerm = c_i f − c_i/c_n, DecPerm = c_i/c_n, no Perm (gazelle_in module doc).
    for (n, c_i, c_o, k, pad) in [
        (2048usize, 64usize, 32usize, 3usize, Padding::Valid),
        (2048, 128, 128, 1, Padding::Valid),
        (4096, 32, 16, 5, Padding::Valid),
        (2048, 64, 32, 3, Padding::Same),
        (4096, 32, 16, 5, Padding::Same),
    ] {
        let sh = shape(c_i, 16, 16, c_o, k, 1, pad);
        let c_n = (n / 256) as u64;
        let (ci, co, f) = (c_i as u64, c_o as u64, (k * k) as u64);
        let c = ideal_counts(ConvMethod::GazelleIn, sh, n);
        assert_eq!(
            (c.perm, c.hst_perm, c.dec_perm, c.sc_mult, c.add),
            (
                0,
                ci * f - ci / c_n,
                ci / c_n,
                ci * co * f / c_n,
                co * (ci * f - 1) / c_n
            ),
            "n={n} {sh:?}"
        );
    }
}

#[test]
fn ensei_needs_no_rotation() {
    // 32x32x32 -> 32 3x3 same at n = 8192: 36 + 2 → 64 x 64 transforms, 2 channels per
    // ciphertext: 16 query ciphertexts, 32 · 16 ScMult, 32 responses, no key.
    let params = Params::preset("n8192").unwrap();
    let sh = shape(32, 32, 32, 32, 3, 1, Padding::Same);
    let layout = ConvLayout::new(ConvMethod::Ensei, sh, real(&params)).unwrap();
    assert_eq!(layout.galois().key_count(4096), 0);
    assert_eq!((layout.query_cts(), layout.output_cts()), (16, 32));
    let c = Count::real(&params, layout.galois());
    let m = layout.encode(&c, &vec![0; 32 * 32 * 9]).unwrap();
    let q = layout.query(&c, &vec![0; 32 * 32 * 32]).unwrap();
    c.take();
    layout.compute(&c, &m, &q).unwrap();
    let k = c.take();
    assert_eq!((k.perm, k.hst_perm, k.sc_mult), (0, 0, 32 * 16));
}

#[test]
fn large_channels_are_cut_into_strips() {
    let params = Params::preset("n8192").unwrap();
    let layout = ConvLayout::new(
        ConvMethod::Gala,
        shape(2, 100, 90, 3, 3, 1, Padding::Same),
        real(&params),
    )
    .unwrap();
    let g = layout.geometry();
    assert!(g.strips > 1 && g.hp * g.wp <= 4096, "{g:?}");
    assert_eq!(layout.query_cts(), g.strips * g.in_cts);
}

#[test]
fn bad_shapes_are_typed_errors() {
    let params = Params::preset("n8192").unwrap();
    assert!(matches!(
        ConvLayout::new(
            ConvMethod::Gala,
            shape(0, 4, 4, 1, 3, 1, Padding::Same),
            real(&params)
        ),
        Err(KernelError::EmptyDimension { .. })
    ));
    assert!(matches!(
        ConvLayout::new(
            ConvMethod::Gala,
            shape(1, 2, 2, 1, 3, 1, Padding::Valid),
            real(&params)
        ),
        Err(KernelError::Shape { .. })
    ));
    // A padded row wider than a ciphertext row cannot be cut into strips.
    assert!(matches!(
        ConvLayout::new(
            ConvMethod::Gala,
            shape(1, 3, 5000, 1, 3, 1, Padding::Same),
            real(&params)
        ),
        Err(KernelError::Shape { .. })
    ));
    let layout = ConvLayout::new(
        ConvMethod::Gala,
        shape(2, 4, 4, 2, 3, 1, Padding::Same),
        real(&params),
    )
    .unwrap();
    let sim = Sim::new(&params, layout.galois());
    assert!(matches!(
        layout.encode(&sim, &[1; 5]),
        Err(KernelError::Shape { .. })
    ));
    assert!(matches!(
        layout.query(&sim, &[1; 5]),
        Err(KernelError::Shape { .. })
    ));
}

#[test]
fn identical_counts_on_sim_and_count() {
    let params = Params::preset("n8192").unwrap();
    for sh in [
        shape(8, 14, 14, 8, 3, 1, Padding::Same),
        shape(2, 100, 90, 3, 3, 2, Padding::Same),
    ] {
        for method in ConvMethod::ALL {
            if !applies(method, &sh) {
                continue;
            }
            let layout = ConvLayout::new(method, sh, real(&params)).unwrap();
            let (x, f) = problem(&sh, 3);
            let sim = Counting::new(Sim::new(&params, layout.galois()));
            let cnt = Count::real(&params, layout.galois());
            run(&sim, &layout, &x, &f, 0);
            run(&cnt, &layout, &x, &f, 0);
            assert_eq!(sim.counts(), cnt.counts(), "{method} {sh:?}");
        }
    }
}

/// The baby-step giant-step fold, ideal model: per output ciphertext (c_n/b₁)·f − 1
/// rotations instead of HELiKs's c_n·f − 1, b₁ − 1 hoisted rotations per input
/// ciphertext, HELiKs's products; b₁ > 1 wherever the fold has blocks to share.
#[test]
fn bsgs_rotates_inputs_by_baby_steps_and_outputs_by_giant_steps() {
    for (n, c_i, c_o, k, pad) in [
        (4096usize, 64usize, 32usize, 1usize, Padding::Same),
        (4096, 32, 64, 3, Padding::Same),
        (8192, 128, 128, 1, Padding::Same),
        (2048, 16, 16, 5, Padding::Valid),
    ] {
        let sh = shape(c_i, 16, 16, c_o, k, 1, pad);
        let slots = SlotInfo {
            n,
            p: 12289,
            layout: Layout::Cyclic,
        };
        let layout = ConvLayout::with_key_budget(ConvMethod::Bsgs, sh, slots, None).unwrap();
        let g = layout.geometry();
        let b1 = kernels::conv::bsgs::baby(g) as u64;
        let (c_n, ins, outs, f) = (
            g.c_n as u64,
            g.in_cts as u64,
            g.out_cts as u64,
            (k * k) as u64,
        );
        if c_n > 1 {
            assert!(b1 > 1 && c_n % b1 == 0, "b1 = {b1}, c_n = {c_n}");
        }
        let c = ideal_counts(ConvMethod::Bsgs, sh, n);
        assert_eq!(c.perm, outs * ((c_n / b1) * f - 1), "n={n} {sh:?}");
        assert_eq!(c.hst_perm, ins * (b1 - 1), "n={n} {sh:?}");
        assert_eq!(c.sc_mult, outs * c_n * ins * f, "n={n} {sh:?}");
        let h = ideal_counts(ConvMethod::Heliks, sh, n);
        assert_eq!(c.sc_mult, h.sc_mult);
        assert!(c.perm + c.hst_perm < h.perm, "{sh:?}: {c:?} vs {h:?}");
    }
    // On Bfv, a shape whose fold shares baby steps (b₁ > 1) reconstructs exactly.
    let params = Params::preset("n8192").unwrap();
    let sh = shape(40, 16, 16, 24, 1, 1, Padding::Same);
    let layout = ConvLayout::new(ConvMethod::Bsgs, sh, real(&params)).unwrap();
    assert!(kernels::conv::bsgs::baby(layout.geometry()) > 1);
    let (x, f) = problem(&sh, 77);
    let b = Bfv::keygen(&params, layout.galois()).unwrap();
    let bits = layout.flood_bits(&params).unwrap();
    assert_eq!(
        run(&b, &layout, &x, &f, bits),
        reference(&sh, &x, &f, params.p())
    );
}
