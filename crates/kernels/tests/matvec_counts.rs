//! Op counts of the matvec kernels in the papers' ideal model (one cyclic n-slot vector,
//! one Galois key per step) against GALA Table II's formulas, GALA Table V's cells and
//! GAZELLE Table 8's N and H columns; and identical counts on Sim and Count.
#![allow(clippy::unwrap_used)]

use he::{Backend, Count, Counting, GaloisSpec, Layout, OpCounts, Sim, SlotInfo};
use kernels::{LinearLayer, MatvecLayout, Method};

const P: u64 = 12289; // ≡ 1 mod 4096; the ideal model needs no security

fn slots(n: usize) -> SlotInfo {
    SlotInfo {
        n,
        p: P,
        layout: Layout::Cyclic,
    }
}

/// Counts of the kernel alone (after the query arrived, before share_output).
fn kernel_counts<B: Backend>(b: &Counting<B>, layout: &MatvecLayout) -> OpCounts {
    let g = layout.geometry();
    let w = vec![1i64; g.n_o * g.n_i];
    let x = vec![1u64; g.n_i];
    let m = layout.encode(b, &w).unwrap();
    let q = layout.query(b, &x).unwrap();
    b.take();
    layout.compute(b, &m, &q).unwrap();
    b.take()
}

fn ideal(method: Method, n: usize, n_o: usize, n_i: usize) -> OpCounts {
    let layout = MatvecLayout::with_key_budget(method, n_o, n_i, slots(n), None).unwrap();
    kernel_counts(&Count::ideal(n, P, layout.galois()), &layout)
}

/// (Perm, HstPerm, ScMult, Add)
fn cells(c: OpCounts) -> (u64, u64, u64, u64) {
    (c.perm, c.hst_perm, c.sc_mult, c.add)
}

fn log2(x: usize) -> u64 {
    x.trailing_zeros() as u64
}

#[test]
fn gala_table_ii_formulas_on_a_grid() {
    for n in [2048usize, 4096] {
        let mut n_i = 2;
        while n_i < n {
            let mut n_o = 1;
            while n_o <= n_i {
                let (ni, no) = (n_i as u64, n_o as u64);
                // Naive: n_o ScMult, n_o·log2 n_i Perm and Add.
                assert_eq!(
                    cells(ideal(Method::Naive, n, n_o, n_i)),
                    (no * log2(n_i), 0, no, no * log2(n_i)),
                    "naive n={n} {n_o}x{n_i}"
                );
                if n_i * n_o >= n {
                    let k = ni * no / n as u64;
                    let ras = log2(n / n_o);
                    let h = ideal(Method::Hybrid, n, n_o, n_i);
                    assert_eq!(
                        cells(h),
                        (ras, k - 1, k, k + ras - 1),
                        "hybrid n={n} {n_o}x{n_i}"
                    );
                    assert_eq!(h.dec_perm, u64::from(k > 1));
                    assert_eq!(
                        cells(ideal(Method::Gala, n, n_o, n_i)),
                        (k - 1, 0, k, k - 1),
                        "gala n={n} {n_o}x{n_i}"
                    );
                    // HELiKs: the same products and rotations as GALA, one key.
                    let layout =
                        MatvecLayout::with_key_budget(Method::Heliks, n_o, n_i, slots(n), None)
                            .unwrap();
                    assert_eq!(layout.galois().key_count(n), usize::from(k > 1));
                    assert_eq!(
                        cells(ideal(Method::Heliks, n, n_o, n_i)),
                        (k - 1, 0, k, k - 1),
                        "heliks n={n} {n_o}x{n_i}"
                    );
                } else {
                    // GALA fn. 7: one ScMult, nothing else.
                    assert_eq!(cells(ideal(Method::Gala, n, n_o, n_i)), (0, 0, 1, 0));
                }
                n_o *= 4;
            }
            n_i *= 4;
        }
    }
}

#[test]
fn gala_table_v_cells() {
    // GALA Table V, n = 2048, n_o x n_i: Perm / HstPerm / ScMult / Add.
    let rows = [
        (
            (1, 2048),
            (0, 2047, 2048, 2047),
            (11, 0, 1, 11),
            (0, 0, 1, 0),
        ),
        (
            (2, 1024),
            (0, 1023, 1024, 1023),
            (10, 0, 1, 10),
            (0, 0, 1, 0),
        ),
        ((16, 128), (0, 127, 128, 127), (7, 0, 1, 7), (0, 0, 1, 0)),
    ];
    for ((n_o, n_i), diagonal, gazelle, gala) in rows {
        assert_eq!(cells(ideal(Method::Diagonal, 2048, n_o, n_i)), diagonal);
        assert_eq!(cells(ideal(Method::Hybrid, 2048, n_o, n_i)), gazelle);
        assert_eq!(cells(ideal(Method::Gala, 2048, n_o, n_i)), gala);
    }
}

#[test]
fn gazelle_table_8_naive_and_hybrid_columns() {
    // GAZELLE Table 8 (n = 2048), sizes n_i x n_o: #in rot / #out rot / #mac.
    let rows = [
        ((2048, 1), (0, 11, 1), (0, 11, 1)),
        ((1024, 128), (0, 1280, 128), (63, 4, 64)),
        ((1024, 16), (0, 160, 16), (7, 7, 8)),
        ((128, 16), (0, 112, 16), (0, 7, 1)),
    ];
    for ((n_i, n_o), naive, hybrid) in rows {
        for (method, want) in [(Method::Naive, naive), (Method::Hybrid, hybrid)] {
            let c = ideal(method, 2048, n_o, n_i);
            assert_eq!(
                (c.hst_perm, c.perm, c.sc_mult),
                want,
                "{method} {n_i}x{n_o}"
            );
        }
    }
}

#[test]
fn bsgs_uses_about_two_sqrt_d_rotations() {
    // d = 4096 diagonals in the ideal n = 8192 model: b = 128 baby steps (≈ √(2d)),
    // 32 giant steps in Horner form (one key), b keys in all.
    let layout =
        MatvecLayout::with_key_budget(Method::Bsgs, 4096, 4096, slots(8192), None).unwrap();
    assert_eq!(layout.geometry().baby, 128);
    assert_eq!(layout.galois().key_count(8192), 128);
    let c = ideal(Method::Bsgs, 8192, 4096, 4096);
    assert_eq!(
        (c.hst_perm, c.perm, c.sc_mult, c.add),
        (127, 31, 4096, 4095)
    );
    // Under a 64-key budget b shrinks to 64: 63 + 63 rotations.
    let layout =
        MatvecLayout::with_key_budget(Method::Bsgs, 4096, 4096, slots(8192), Some(64)).unwrap();
    assert_eq!(layout.geometry().baby, 64);
    assert!(layout.galois().key_count(8192) <= 64);
}

#[test]
fn identical_counts_on_sim_and_count() {
    for method in Method::ALL {
        for (n_o, n_i) in [(16, 128), (100, 300), (3, 5000)] {
            let layout = MatvecLayout::new(method, n_o, n_i, slots(4096)).unwrap();
            let spec: GaloisSpec = layout.galois();
            let sim = Counting::new(Sim::ideal(4096, P, spec.clone()));
            let cnt = Count::ideal(4096, P, spec);
            assert_eq!(
                kernel_counts(&sim, &layout),
                kernel_counts(&cnt, &layout),
                "{method} {n_o}x{n_i}"
            );
        }
    }
}
