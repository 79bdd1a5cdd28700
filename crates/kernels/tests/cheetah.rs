//! Cheetah's coefficient-encoding kernels (matvec HomFC, conv HomConv): shares
//! reconstruct the plaintext reference mod p on the simulator and on real BFV, at odd
//! shapes (non-powers of two, n_i > n, n_o > n, c_i·h·w > n, 1x1 / 3x3 / 5x5, same and
//! valid, strides, spatial tiles); no rotation and no Galois key; identical op counts
//! on Bfv, Sim and Count; responses flooded and at the last level like every method's;
//! typed errors.
#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;

use he::{
    Backend, Bfv, Count, Counting, Dropped, GaloisSpec, Layout, OpCounts, Params, Rounding, Sim,
    SlotInfo,
};
use kernels::{
    estimate, ConvLayout, ConvMethod, ConvShape, CostModel, FloodPool, KernelError, LinearLayer,
    MatvecLayout, Method, Padding,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// The smallest preset whose noise budget affords Cheetah's flooding (n = 8192, 164 bits).
fn params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Params::preset("n8192-q164").unwrap())
}

/// One client for every Bfv test: Cheetah needs no Galois key.
fn client() -> &'static Bfv {
    static B: OnceLock<Bfv> = OnceLock::new();
    B.get_or_init(|| Bfv::keygen(params(), GaloisSpec::none()).unwrap())
}

/// Wire bytes of one of the layout's queries: seeded, c0 rounded as the layout's noise
/// affords, at its query level.
fn query_bytes<L: LinearLayer>(p: &Params, layout: &L) -> usize {
    let r = Rounding {
        c0: layout.query_rounding(p),
        c1: Dropped::NONE,
    };
    p.rounded_ct_wire_size(layout.query_level(p), true, None, r)
}

/// Wire bytes of a response keeping `kept` coefficients of c0 in `runs` runs, rounded
/// to what decryption needs.
fn response_bytes(p: &Params, runs: usize, kept: usize) -> usize {
    p.rounded_ct_wire_size(
        p.last_level(),
        false,
        Some((runs, kept)),
        p.response_rounding(),
    )
}

fn real(p: &Params) -> SlotInfo {
    SlotInfo {
        n: p.n(),
        p: p.p(),
        layout: Layout::TwoRows,
    }
}

fn ideal(n: usize) -> SlotInfo {
    SlotInfo {
        n,
        p: he::batching_prime(20, n).unwrap(),
        layout: Layout::Cyclic,
    }
}

fn random(len: usize, bound: i64, rng: &mut ChaCha20Rng) -> Vec<i64> {
    (0..len).map(|_| rng.random_range(-bound..=bound)).collect()
}

/// The whole protocol on one backend (client = server): (client share, server share).
fn run<L: LinearLayer, B: Backend>(
    b: &B,
    layout: &L,
    w: &[i64],
    x: &[i64],
    bits: u32,
) -> (Vec<u64>, Vec<u64>) {
    let p = b.slots().p;
    let xr: Vec<u64> = x.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect();
    let m = layout.encode_weights(b, w).unwrap();
    let q = layout.query(b, &xr).unwrap();
    let mut pool = FloodPool::at_level(bits, b.level(&q[0]));
    pool.fill(b, layout.output_cts()).unwrap();
    let (resp, server) = layout.respond(b, &m, &q, &mut pool).unwrap();
    (layout.decrypt(b, &resp).unwrap(), server)
}

fn reconstruct(a: &[u64], b: &[u64], p: u64) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| (x + y) % p).collect()
}

fn matvec_ref(w: &[i64], x: &[i64], n_o: usize, n_i: usize, p: u64) -> Vec<u64> {
    kernels::reference::reduce(&kernels::reference::matvec(w, x, n_o, n_i), p)
}

fn conv_ref(sh: &ConvShape, x: &[i64], f: &[i64], p: u64) -> Vec<u64> {
    kernels::reference::reduce(&kernels::reference::conv(sh, x, f), p)
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

fn conv_problem(sh: &ConvShape, seed: u64) -> (Vec<i64>, Vec<i64>) {
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let x = random(sh.c_i * sh.h * sh.w, 200, &mut r);
    let f = random(sh.c_o * sh.c_i * sh.k_h * sh.k_w, 200, &mut r);
    (x, f)
}

#[test]
fn matvec_reconstructs_on_sim() {
    let p = params();
    for (i, &(n_o, n_i)) in [
        (1, 1),
        (7, 13),
        (100, 300),
        (33, 8193),  // n_i > n
        (9001, 19),  // n_o > n
        (257, 8500), // both chunked
    ]
    .iter()
    .enumerate()
    {
        let mut r = ChaCha20Rng::seed_from_u64(i as u64);
        let (w, x) = (random(n_o * n_i, 1000, &mut r), random(n_i, 1000, &mut r));
        let layout = MatvecLayout::new(Method::Cheetah, n_o, n_i, real(p)).unwrap();
        let g = layout.geometry();
        assert!(g.block_rows * g.tile <= g.n, "{n_o}x{n_i}: {g:?}");
        if n_i > g.n {
            assert!(layout.query_cts() > 1);
        }
        let sim = Sim::new(p, layout.galois());
        let (c, s) = run(&sim, &layout, &w, &x, 0);
        assert_eq!(
            reconstruct(&c, &s, p.p()),
            matvec_ref(&w, &x, n_o, n_i, p.p()),
            "{n_o}x{n_i}"
        );
    }
}

#[test]
fn matvec_reconstructs_in_small_ideal_rings() {
    // n = 1024 makes n_i > n and n_o > n cheap: several chunks and blocks at once.
    let slots = ideal(1024);
    for (i, &(n_o, n_i)) in [(1500, 1100), (2100, 50), (3, 2500), (1025, 1025), (31, 33)]
        .iter()
        .enumerate()
    {
        let mut r = ChaCha20Rng::seed_from_u64(10 + i as u64);
        let (w, x) = (random(n_o * n_i, 50, &mut r), random(n_i, 50, &mut r));
        let layout = MatvecLayout::with_key_budget(Method::Cheetah, n_o, n_i, slots, None).unwrap();
        let sim = Sim::ideal(1024, slots.p, layout.galois());
        let (c, s) = run(&sim, &layout, &w, &x, 0);
        assert_eq!(
            reconstruct(&c, &s, slots.p),
            matvec_ref(&w, &x, n_o, n_i, slots.p),
            "{n_o}x{n_i}"
        );
    }
}

/// The split: d0·d1 ≤ n, and the 2·queries + responses it minimises.
#[test]
fn matvec_split() {
    let layout = MatvecLayout::new(Method::Cheetah, 512, 512, real(params())).unwrap();
    let g = layout.geometry();
    // d1 = 128: 4 query chunks; d0 = 64 rows per block: 8 responses (2·4 + 8 = 16).
    assert_eq!((g.tile, g.block_rows), (128, 64));
    assert_eq!((layout.query_cts(), layout.output_cts()), (4, 8));
    for (n_o, n_i) in [(1, 1), (10, 100000), (100000, 10), (777, 3333)] {
        let layout = MatvecLayout::new(Method::Cheetah, n_o, n_i, real(params())).unwrap();
        let g = layout.geometry();
        assert!(g.block_rows * g.tile <= 8192 && g.block_rows <= n_o && g.tile <= n_i);
        assert_eq!(layout.query_cts(), n_i.div_ceil(g.tile));
        assert_eq!(layout.output_cts(), n_o.div_ceil(g.block_rows));
    }
}

/// Full protocol on real BFV: the query and the response cross the wire (serialised,
/// validated), the response is at the last level with budget left, the shares
/// reconstruct W·x; no rotation; the same counts on Sim and Count.
fn bfv_matvec(n_o: usize, n_i: usize, seed: u64) {
    let p = params();
    let layout = MatvecLayout::new(Method::Cheetah, n_o, n_i, real(p)).unwrap();
    assert_eq!(layout.galois(), GaloisSpec::none());
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let w = random(n_o * n_i, (p.p() / 2) as i64, &mut r); // the whole centred range
    let x = random(n_i, 1000, &mut r);
    let (c, s, counts) = bfv_run(&layout, &w, &x);
    assert_eq!(
        reconstruct(&c, &s, p.p()),
        matvec_ref(&w, &x, n_o, n_i, p.p()),
        "{n_o}x{n_i} on Bfv"
    );
    let products = layout.query_cts() * layout.output_cts();
    same_counts_everywhere(&layout, &w, &x, counts, products, &format!("{n_o}x{n_i}"));
}

fn bfv_run<L: LinearLayer>(layout: &L, w: &[i64], x: &[i64]) -> (Vec<u64>, Vec<u64>, OpCounts) {
    let p = params();
    let bits = layout.flood_bits(p).unwrap();
    let client = client();
    let server = Counting::new(Bfv::server(p, client.public_keys()).unwrap());
    let xr: Vec<u64> = x.iter().map(|&v| p.reduce(v)).collect();
    let m = layout.encode_weights(&server, w).unwrap();
    let q: Vec<_> = layout
        .query(client, &xr)
        .unwrap()
        .iter()
        .map(|c| server.deserialize(&client.serialize(c).unwrap()).unwrap())
        .collect();
    let mut pool = FloodPool::at_level(bits, server.level(&q[0]));
    pool.fill(&server, layout.output_cts()).unwrap();
    server.take();
    let (resp, s) = layout.respond(&server, &m, &q, &mut pool).unwrap();
    let counts = server.take();
    let resp: Vec<_> = resp
        .iter()
        .map(|c| client.deserialize(&server.serialize(c).unwrap()).unwrap())
        .collect();
    for (i, ct) in resp.iter().enumerate() {
        assert_eq!(client.level(ct), p.last_level());
        // Only the coefficients `finish` reads travel in c0.
        let keep = layout.response_coeffs(i).unwrap();
        let kept: usize = keep.iter().map(|r| r.len()).sum();
        assert_eq!(
            server.serialize(ct).unwrap().len(),
            response_bytes(p, keep.len(), kept)
        );
        assert_eq!(client.noise_budget(ct).unwrap(), None);
    }
    (layout.decrypt(client, &resp).unwrap(), s, counts)
}

/// The server's counts of `respond` (kernel + share_output) on Sim and Count equal
/// those on Bfv, field by field; none of them is a rotation.
fn same_counts_everywhere<L: LinearLayer>(
    layout: &L,
    w: &[i64],
    x: &[i64],
    bfv: OpCounts,
    products: usize,
    what: &str,
) {
    fn respond_counts<L: LinearLayer, B: Backend>(
        b: &Counting<B>,
        layout: &L,
        w: &[i64],
        x: &[i64],
    ) -> OpCounts {
        let p = b.slots().p;
        let xr: Vec<u64> = x.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect();
        let m = layout.encode_weights(b, w).unwrap();
        let q = layout.query(b, &xr).unwrap();
        let mut pool = FloodPool::at_level(0, b.level(&q[0]));
        pool.fill(b, layout.output_cts()).unwrap();
        b.take();
        layout.respond(b, &m, &q, &mut pool).unwrap();
        b.take()
    }
    let p = params();
    let sim = Counting::new(Sim::new(p, layout.galois()));
    let cnt = Count::real(p, layout.galois());
    assert_eq!(respond_counts(&sim, layout, w, x), bfv, "{what}: sim");
    assert_eq!(respond_counts(&cnt, layout, w, x), bfv, "{what}: count");
    assert_eq!(
        (bfv.perm, bfv.hst_perm, bfv.dec_perm),
        (0, 0, 0),
        "{what}: rotations"
    );
    assert_eq!(bfv.sc_mult as usize, products, "{what}: products");
    assert_eq!(
        bfv.mod_switch as usize,
        layout.output_cts() * (p.last_level() - layout.query_level(p))
    );
}

#[test]
fn matvec_on_bfv() {
    bfv_matvec(7, 13, 20);
    bfv_matvec(100, 300, 21);
    bfv_matvec(20, 9000, 22); // n_i > n
    bfv_matvec(9000, 20, 23); // n_o > n
}

#[test]
fn conv_reconstructs_on_sim() {
    let p = params();
    let shapes = [
        shape(1, 5, 5, 2, 3, 1, Padding::Same),
        shape(3, 8, 8, 4, 3, 1, Padding::Same),
        shape(1, 28, 28, 5, 5, 2, Padding::Valid),
        shape(16, 16, 16, 16, 1, 1, Padding::Same),
        shape(40, 16, 16, 24, 3, 1, Padding::Same), // c_i·h·w > n
        shape(3, 9, 7, 5, 3, 2, Padding::Same),
        shape(5, 11, 13, 7, 5, 1, Padding::Valid),
        shape(7, 12, 10, 3, 5, 1, Padding::Same),
        shape(4, 20, 20, 6, 1, 2, Padding::Valid), // 1x1 strided: subsampled input
        shape(6, 15, 15, 4, 1, 3, Padding::Same),
        shape(2, 9, 9, 3, 5, 3, Padding::Same),
        shape(2, 100, 90, 3, 3, 1, Padding::Same), // spatial tiles
        shape(1, 3, 5000, 2, 3, 1, Padding::Same), // a row wider than n/2 slots
        shape(130, 6, 6, 70, 3, 1, Padding::Valid),
    ];
    for (i, sh) in shapes.iter().enumerate() {
        let (x, f) = conv_problem(sh, 30 + i as u64);
        let layout = ConvLayout::new(ConvMethod::Cheetah, *sh, real(p)).unwrap();
        assert_eq!(layout.galois().key_count(p.n() / 2), 0);
        let sim = Sim::new(p, layout.galois());
        let (c, s) = run(&sim, &layout, &f, &x, 0);
        assert_eq!(
            reconstruct(&c, &s, p.p()),
            conv_ref(sh, &x, &f, p.p()),
            "{sh:?}"
        );
    }
    // The slot methods cannot lay out the wide row; Cheetah tiles it.
    assert!(ConvLayout::new(
        ConvMethod::Gala,
        shape(1, 3, 5000, 2, 3, 1, Padding::Same),
        real(p)
    )
    .is_err());
}

/// Padded tiles (`cheetah-padded`): for filters one column wide, the tile's area (1x1)
/// or width (k x 1) is a multiple of 8, so the filter plaintexts are polynomials in
/// X^8 or finer; the shares reconstruct the reference on Sim (odd feature maps, strides,
/// spatial tiles, 'valid' padding), the layout sends no fewer bytes than Cheetah's own,
/// and wider filters are refused.
#[test]
fn padded_tiles_reconstruct_on_sim() {
    let p = params();
    let k_h = |c_i, h, w, c_o, k, s, pad| ConvShape {
        k_w: 1,
        ..shape(c_i, h, w, c_o, k, s, pad)
    };
    let shapes = [
        shape(9, 7, 7, 300, 1, 1, Padding::Same),
        shape(40, 14, 14, 24, 1, 1, Padding::Same),
        shape(16, 28, 28, 8, 1, 2, Padding::Same), // subsampled to 14x14
        shape(6, 15, 15, 4, 1, 3, Padding::Same),
        shape(3, 100, 90, 2, 1, 1, Padding::Same), // spatial tiles
        shape(130, 5, 5, 70, 1, 1, Padding::Valid),
        k_h(5, 11, 13, 7, 3, 1, Padding::Valid),
        k_h(4, 9, 7, 3, 5, 2, Padding::Same),
    ];
    for (i, sh) in shapes.iter().enumerate() {
        let (x, f) = conv_problem(sh, 60 + i as u64);
        let layout = ConvLayout::new(ConvMethod::CheetahPadded, *sh, real(p)).unwrap();
        let own = ConvLayout::new(ConvMethod::Cheetah, *sh, real(p)).unwrap();
        let e = layout.cheetah_geometry().unwrap();
        let twos = if sh.k_h == 1 {
            (e.th * e.tw).trailing_zeros()
        } else {
            e.tw.trailing_zeros()
        };
        assert!(
            twos >= kernels::conv::cheetah::PADDED_TILE_TWOS,
            "{sh:?}: {e:?}"
        );
        assert_eq!(layout.weight_stride_log2(), twos, "{sh:?}");
        // Cheetah's own tiling has the fewest wire bytes
        let wire = |l: &ConvLayout| {
            let e = estimate(l, p, &CostModel::reference(p)).unwrap();
            e.bytes_up + e.bytes_down
        };
        assert!(wire(&layout) >= wire(&own), "{sh:?}");
        let sim = Sim::new(p, layout.galois());
        let (c, s) = run(&sim, &layout, &f, &x, 0);
        assert_eq!(
            reconstruct(&c, &s, p.p()),
            conv_ref(sh, &x, &f, p.p()),
            "{sh:?}"
        );
    }
    for sh in [
        shape(3, 8, 8, 4, 3, 1, Padding::Same),
        ConvShape {
            k_h: 1,
            ..shape(3, 8, 8, 4, 3, 1, Padding::Same)
        },
    ] {
        assert!(ConvLayout::new(ConvMethod::CheetahPadded, sh, real(p)).is_err());
    }
}

#[test]
fn conv_reconstructs_in_small_ideal_rings() {
    // n = 1024: channels, tiles and output groups all split.
    let slots = ideal(1024);
    for (i, sh) in [
        shape(9, 20, 17, 11, 3, 1, Padding::Same),
        shape(3, 40, 40, 2, 5, 2, Padding::Same),
        shape(50, 4, 4, 60, 1, 1, Padding::Valid),
        shape(2, 31, 33, 3, 3, 1, Padding::Valid),
    ]
    .iter()
    .enumerate()
    {
        let (x, f) = conv_problem(sh, 50 + i as u64);
        let layout = ConvLayout::with_key_budget(ConvMethod::Cheetah, *sh, slots, None).unwrap();
        let sim = Sim::ideal(1024, slots.p, layout.galois());
        let (c, s) = run(&sim, &layout, &f, &x, 0);
        assert_eq!(
            reconstruct(&c, &s, slots.p),
            conv_ref(sh, &x, &f, slots.p),
            "{sh:?}"
        );
    }
}

/// 16x16x128 → 128 3x3 same at n = 8192: one 18x18 tile, 8 input channels and 3 output
/// channels per ciphertext (8·3·324 ≤ 8192): 16 queries, 43 responses, 688 ScMult.
#[test]
fn conv_packing_of_the_benchmark_shape() {
    let p = params();
    let sh = shape(128, 16, 16, 128, 3, 1, Padding::Same);
    let layout = ConvLayout::new(ConvMethod::Cheetah, sh, real(p)).unwrap();
    assert_eq!((layout.query_cts(), layout.output_cts()), (16, 43));
    assert_eq!(layout.encoded_plaintexts(), 16 * 43);
    let e = estimate(&layout, p, &CostModel::reference(p)).unwrap();
    assert_eq!(e.counts.sc_mult, 688);
    assert_eq!(
        (e.counts.rotations(), e.counts.dec_perm, e.galois_keys),
        (0, 0, 0)
    );
    assert_eq!(e.bytes_up, 16 * query_bytes(p, &layout) as u64);
    // rounded to the bits the noise needs: at most 70% of a seeded query
    assert!(query_bytes(p, &layout) * 10 <= p.ct_wire_size(0, true) * 7);
    // Each response keeps 3 channels x 16 rows of 16 coefficients (the last one 2
    // channels): c1 whole, c0 at 768 (512) coefficients, both rounded (at most 80% of
    // the unrounded selection).
    let last = p.last_level();
    assert_eq!(
        e.bytes_down,
        (42 * response_bytes(p, 48, 768) + response_bytes(p, 32, 512)) as u64
    );
    assert!(response_bytes(p, 48, 768) * 10 <= p.selected_ct_wire_size(last, 48, 768) * 8);
    assert!(e.bytes_down * 10 < 43 * p.ct_wire_size(last, false) as u64 * 6);
}

fn bfv_conv(sh: ConvShape, seed: u64) {
    let p = params();
    let layout = ConvLayout::new(ConvMethod::Cheetah, sh, real(p)).unwrap();
    assert_eq!(layout.galois(), GaloisSpec::none());
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let x = random(sh.c_i * sh.h * sh.w, 1000, &mut r);
    let f = random(
        sh.c_o * sh.c_i * sh.k_h * sh.k_w,
        (p.p() / 2) as i64,
        &mut r,
    );
    let (c, s, counts) = bfv_run(&layout, &f, &x);
    assert_eq!(
        reconstruct(&c, &s, p.p()),
        conv_ref(&sh, &x, &f, p.p()),
        "{sh:?} on Bfv"
    );
    // ScMult = tiles · input groups · output groups.
    let e = layout.cheetah_geometry().unwrap();
    assert_eq!(layout.query_cts(), e.tiles() * e.in_groups);
    assert_eq!(layout.output_cts(), e.tiles() * e.out_groups);
    assert!(e.c_w * e.m_w * e.th * e.tw <= p.n());
    let products = e.tiles() * e.in_groups * e.out_groups;
    same_counts_everywhere(&layout, &f, &x, counts, products, &format!("{sh:?}"));
}

#[test]
fn conv_on_bfv() {
    bfv_conv(shape(40, 16, 16, 24, 3, 1, Padding::Same), 60); // c_i·h·w > n
    bfv_conv(shape(1, 28, 28, 5, 5, 2, Padding::Valid), 61);
    bfv_conv(shape(16, 10, 10, 20, 1, 2, Padding::Same), 62);
    bfv_conv(shape(2, 100, 90, 3, 3, 1, Padding::Same), 63); // spatial tiles
}

/// The client's wire path (`query_wire`, `decrypt_wire`: each ciphertext encrypted,
/// rounded and serialised in one pass; deserialised and decrypted in one pass), for a
/// coefficient-encoded and a slot-encoded convolution: each query ciphertext is as many
/// bytes as a rounded, seeded one at the query level and decrypts to its packed values,
/// and the shares of the round trip over bytes reconstruct the plaintext convolution.
#[test]
fn wire_queries_decrypt_to_their_values_and_reconstruct() {
    let sh = shape(40, 16, 16, 24, 3, 1, Padding::Same);
    let (x, f) = conv_problem(&sh, 64);
    // Cheetah on the smallest preset that affords it, with the shared client; the slot
    // method on the full chain its flooding needs, with its Galois keys (one backend
    // plays both parties)
    let full = Params::preset("n8192").unwrap();
    for (method, p) in [(ConvMethod::Cheetah, params()), (ConvMethod::Bsgs, &full)] {
        let layout = ConvLayout::new(method, sh, real(p)).unwrap();
        let keyed;
        let b: &Bfv = if layout.galois() == GaloisSpec::none() {
            client()
        } else {
            keyed = Bfv::keygen(p, layout.galois()).unwrap();
            &keyed
        };
        let xr: Vec<u64> = x.iter().map(|&v| p.reduce(v)).collect();
        let values = layout.query_values(&xr).unwrap();
        let wire = layout.query_wire(b, &xr).unwrap();
        assert_eq!(values.len(), layout.query_cts(), "{method:?}");
        assert_eq!(wire.len(), layout.query_cts(), "{method:?}");
        for (v, bytes) in values.iter().zip(&wire) {
            assert_eq!(bytes.len(), query_bytes(p, &layout), "{method:?}");
            let ct = b.deserialize(bytes).unwrap();
            assert_eq!(b.level(&ct), layout.query_level(p), "{method:?}");
            assert_eq!(
                &b.decrypt_as(&ct, layout.encoding()).unwrap(),
                v,
                "{method:?}"
            );
        }
        let q: Vec<_> = wire.iter().map(|c| b.deserialize(c).unwrap()).collect();
        let m = layout.encode_weights(b, &f).unwrap();
        let mut pool = FloodPool::at_level(layout.flood_bits(p).unwrap(), b.level(&q[0]));
        pool.fill(b, layout.output_cts()).unwrap();
        let (resp, s) = layout.respond(b, &m, &q, &mut pool).unwrap();
        let resp: Vec<Vec<u8>> = resp.iter().map(|c| b.serialize(c).unwrap()).collect();
        assert_eq!(
            reconstruct(&layout.decrypt_wire(b, &resp).unwrap().0, &s, p.p()),
            conv_ref(&sh, &x, &f, p.p()),
            "{method:?}"
        );
    }
}

/// Flooding as for every method: each pool zero decrypts to noise of the flooding
/// size, and a response keeps the budget of the unflooded result switched down.
#[test]
fn responses_are_flooded_rerandomised_and_at_the_last_level() {
    let p = params();
    let layout = MatvecLayout::new(Method::Cheetah, 30, 200, real(p)).unwrap();
    let bits = layout.flood_bits(p).unwrap();
    let client = client();
    let server = Bfv::server(p, client.public_keys()).unwrap();
    let expected = p.log_q_at(0) - (p.p() as f64).log2() - bits as f64 - 1.0;
    let budget = |c: &he::BfvCt| {
        let c = client.deserialize(&server.serialize(c).unwrap()).unwrap();
        client.noise_budget(&c).unwrap().unwrap() as f64
    };
    let flooded = budget(&server.encrypt_zero_flood(bits).unwrap());
    assert!(
        (flooded - expected).abs() <= 3.0,
        "a pool zero leaves {flooded} bits, {bits}-bit flooding predicts {expected:.1}"
    );
    assert!(budget(&server.encrypt_zero_flood(0).unwrap()) > flooded + 60.0);
    let mut r = ChaCha20Rng::seed_from_u64(70);
    let (w, x) = (random(30 * 200, 500, &mut r), random(200, 500, &mut r));
    let xr: Vec<u64> = x.iter().map(|&v| p.reduce(v)).collect();
    let m = layout.encode(&server, &w).unwrap();
    let q: Vec<_> = layout
        .query(client, &xr)
        .unwrap()
        .iter()
        .map(|c| server.deserialize(&client.serialize(c).unwrap()).unwrap())
        .collect();
    let mut pool = FloodPool::at_level(bits, server.level(&q[0]));
    pool.fill(&server, 3 * layout.output_cts()).unwrap();
    let (r1, s1) = layout.respond(&server, &m, &q, &mut pool).unwrap();
    let (r2, _) = layout.respond(&server, &m, &q, &mut pool).unwrap();
    let raw = server
        .switch_to_last(&layout.compute(&server, &m, &q).unwrap()[0])
        .unwrap();
    let c1 = |ct: &he::BfvCt| server.component_bytes(ct, 1).unwrap();
    assert_ne!(c1(&r1[0]), c1(&r2[0]));
    assert_ne!(c1(&r1[0]), c1(&raw));
    // The privacy step alone (before the coefficient selection): every response at the
    // last level, rounded for the wire: the rounding spends most of the budget the
    // unflooded result has there, and the response still decrypts (the rounding may take
    // the noise to 3/4 of the decryption bound, `he::Params::response_rounding`, so the
    // budget left, floored to whole bits, may be 0).
    let out = layout.compute(&server, &m, &q).unwrap();
    let shared =
        kernels::share_output_encoded(&server, out, &mut pool, he::Encoding::Coeffs).unwrap();
    for ct in &shared.response {
        assert_eq!(server.level(ct), p.last_level());
        let (left, unrounded) = (budget(ct), budget(&raw));
        assert!(left + 10.0 <= unrounded, "{left} of {unrounded}");
    }
    for ct in &r1 {
        assert_eq!(server.level(ct), p.last_level());
    }
    // The mask is uniform on every coefficient, not only the read ones: the server's
    // share has no run of zeros.
    assert!(s1.iter().filter(|&&v| v == 0).count() < 3);
    let resp: Vec<_> = r1
        .iter()
        .map(|c| client.deserialize(&server.serialize(c).unwrap()).unwrap())
        .collect();
    assert_eq!(
        reconstruct(&layout.decrypt(client, &resp).unwrap(), &s1, p.p()),
        matvec_ref(&w, &x, 30, 200, p.p())
    );
    assert!(matches!(
        layout.respond(&server, &m, &q, &mut pool),
        Err(KernelError::PoolEmpty { .. })
    ));
}

#[test]
fn mask_covers_every_coefficient_and_only_read_ones_are_sent() {
    // share_output masks all n coefficients: the decrypted coefficients are
    // uniform-looking everywhere, including the ones the finish map never reads.
    let p = params();
    let layout = MatvecLayout::new(Method::Cheetah, 4, 5, real(p)).unwrap();
    let sim = Sim::new(p, layout.galois());
    let m = layout.encode(&sim, &[1; 20]).unwrap();
    let q = layout.query(&sim, &[1; 5]).unwrap();
    let mut pool = FloodPool::at_level(0, sim.level(&q[0]));
    pool.fill(&sim, 2).unwrap();
    let out = layout.compute(&sim, &m, &q).unwrap();
    let shared = kernels::share_output_encoded(&sim, out, &mut pool, he::Encoding::Coeffs).unwrap();
    let coeffs = sim.decrypt_coeffs(&shared.response[0]).unwrap();
    assert!(coeffs.iter().filter(|&&v| v == 0).count() < 3);
    assert!(shared.server_slots[0].iter().filter(|&&v| v == 0).count() < 3);
    // The response then keeps the 4 coefficients finish reads (0, 5, 10, 15: d1 = 5).
    assert_eq!(layout.geometry().tile, 5);
    let keep = layout.response_coeffs(0).unwrap();
    assert_eq!(keep, vec![0..1, 5..6, 10..11, 15..16]);
    let (resp, _) = layout.respond(&sim, &m, &q, &mut pool).unwrap();
    let seen = sim.decrypt_coeffs(&resp[0]).unwrap();
    for (i, &v) in seen.iter().enumerate() {
        if !keep.iter().any(|r| r.contains(&i)) {
            assert_eq!(v, 0, "coefficient {i} was sent");
        }
    }
    let full = p.ct_wire_size(p.last_level(), false);
    let sent = sim.wire_size(&resp[0]);
    assert_eq!(sent, response_bytes(p, 4, 4));
    assert!(sent * 2 < full + 200, "{sent} of {full} bytes");
}

#[test]
fn flooding_budget_errors_are_typed() {
    // n = 4096 with 72 bits cannot afford the flooding; the error names a preset.
    let small = he::ParamsBuilder::new()
        .degree(4096)
        .plaintext(he::batching_prime(20, 4096).unwrap())
        .moduli(he::Moduli::Bits(vec![36, 36]))
        .build()
        .unwrap();
    let layout = MatvecLayout::new(Method::Cheetah, 16, 128, real(&small)).unwrap();
    match layout.flood_bits(&small) {
        Err(KernelError::NoiseBudget { suggestion, .. }) => {
            // the preset it names affords the layer
            let name = suggestion.trim_start_matches("preset ");
            let named = Params::preset(name).unwrap();
            let layout = MatvecLayout::new(Method::Cheetah, 16, 128, real(&named)).unwrap();
            assert!(layout.flood_bits(&named).is_ok(), "{suggestion}");
        }
        other => panic!("expected a noise-budget error, got {other:?}"),
    }
    let conv = ConvLayout::new(
        ConvMethod::Cheetah,
        shape(4, 8, 8, 4, 3, 1, Padding::Same),
        real(&small),
    )
    .unwrap();
    assert!(matches!(
        conv.flood_bits(&small),
        Err(KernelError::NoiseBudget { .. })
    ));
    assert!(layout.flood_bits(params()).is_ok() && conv.flood_bits(params()).is_ok());
}

#[test]
fn bad_inputs_are_typed_errors() {
    let p = params();
    let s = real(p);
    assert!(matches!(
        MatvecLayout::new(Method::Cheetah, 0, 4, s),
        Err(KernelError::EmptyDimension { .. })
    ));
    let layout = MatvecLayout::new(Method::Cheetah, 2, 3, s).unwrap();
    let sim = Sim::new(p, layout.galois());
    assert!(matches!(
        layout.encode(&sim, &[1, 2, 3]),
        Err(KernelError::Shape {
            expected: 6,
            actual: 3,
            ..
        })
    ));
    assert!(matches!(
        layout.encode(&sim, &[1, 2, 3, 4, 5, p.p() as i64]),
        Err(KernelError::WeightRange { index: 5, .. })
    ));
    assert!(matches!(
        layout.query(&sim, &[1, 2]),
        Err(KernelError::Shape { .. })
    ));
    assert!(matches!(
        layout.query(&sim, &[1, 2, p.p()]),
        Err(KernelError::He(he::HeError::NotReduced { .. }))
    ));
    let m = layout.encode(&sim, &[1; 6]).unwrap();
    assert!(matches!(
        layout.compute(&sim, &m, &[]),
        Err(KernelError::CiphertextCount { .. })
    ));
    let other = MatvecLayout::new(Method::Gala, 2, 3, s).unwrap();
    let q_slots = other.query(&sim, &[1, 2, 3]).unwrap();
    // A slot-encoded query is refused by the simulator (and would decrypt to garbage).
    // (a slot query sits at the top level, the cheetah layout's below it)
    assert!(matches!(
        layout.compute(&sim, &m, &q_slots),
        Err(KernelError::He(
            he::HeError::EncodingMismatch { .. } | he::HeError::LevelMismatch { .. }
        ))
    ));
    let m_other = other.encode(&sim, &[1; 6]).unwrap();
    let q = layout.query(&sim, &[1, 2, 3]).unwrap();
    assert!(matches!(
        layout.compute(&sim, &m_other, &q),
        Err(KernelError::PlanMismatch { .. })
    ));
    assert!(matches!(
        layout.finish(&[]),
        Err(KernelError::CiphertextCount { .. })
    ));
    assert!(matches!(
        layout.finish(&[vec![0; 3]]),
        Err(KernelError::Shape { .. })
    ));

    // Conv: a filter larger than a ciphertext, bad lengths, short responses.
    let tiny = ideal(1024);
    assert!(matches!(
        ConvLayout::with_key_budget(
            ConvMethod::Cheetah,
            shape(1, 40, 40, 1, 33, 1, Padding::Same),
            tiny,
            None
        ),
        Err(KernelError::Shape { .. })
    ));
    let conv = ConvLayout::new(
        ConvMethod::Cheetah,
        shape(2, 4, 4, 2, 3, 1, Padding::Same),
        s,
    )
    .unwrap();
    assert!(matches!(
        conv.encode(&sim, &[1; 5]),
        Err(KernelError::Shape { .. })
    ));
    assert!(matches!(
        conv.query(&sim, &[1; 5]),
        Err(KernelError::Shape { .. })
    ));
    assert!(matches!(
        conv.finish(&[]),
        Err(KernelError::CiphertextCount { .. })
    ));
    assert!(matches!(
        conv.finish(&[vec![0; 10]]),
        Err(KernelError::Shape { .. })
    ));
}

#[test]
fn encoded_cheetah_matrices_save_and_load() {
    let p = params();
    let layout = MatvecLayout::new(Method::Cheetah, 10, 300, real(p)).unwrap();
    let b = client();
    let mut r = ChaCha20Rng::seed_from_u64(80);
    let (w, x) = (random(3000, 900, &mut r), random(300, 900, &mut r));
    let bytes = layout.encode(b, &w).unwrap().save(b).unwrap();
    let loaded = kernels::EncodedMatrix::load(b, &layout, &bytes).unwrap();
    let xr: Vec<u64> = x.iter().map(|&v| p.reduce(v)).collect();
    let q = layout.query(b, &xr).unwrap();
    let mut pool = FloodPool::at_level(layout.flood_bits(p).unwrap(), b.level(&q[0]));
    pool.fill(b, layout.output_cts()).unwrap();
    let (resp, s) = layout.respond(b, &loaded, &q, &mut pool).unwrap();
    assert_eq!(
        reconstruct(&layout.decrypt(b, &resp).unwrap(), &s, p.p()),
        matvec_ref(&w, &x, 10, 300, p.p())
    );
    let other = MatvecLayout::new(Method::Heliks, 10, 300, real(p)).unwrap();
    assert!(matches!(
        kernels::EncodedMatrix::<Bfv>::load(b, &other, &bytes),
        Err(KernelError::PlanMismatch { .. })
    ));
}

#[test]
fn estimates_have_no_rotation_and_exact_bytes() {
    let p = params();
    let model = CostModel::reference(p);
    let layout = MatvecLayout::new(Method::Cheetah, 512, 512, real(p)).unwrap();
    let e = estimate(&layout, p, &model).unwrap();
    assert_eq!((e.counts.rotations(), e.galois_keys), (0, 0));
    assert_eq!(e.counts.sc_mult, 4 * 8);
    assert_eq!(e.plaintexts, 32);
    assert_eq!(e.bytes_up, 4 * query_bytes(p, &layout) as u64);
    // 64 rows per response, one coefficient each (stride d1 = 128).
    assert_eq!(e.bytes_down, 8 * response_bytes(p, 64, 64) as u64);
    // 4 queries deserialised, 8 responses serialised; the client encrypts the 4 and
    // decrypts the 8 (coefficient encoding).
    let want = (32.0 * model.sc_mult_us
        + 8.0 * model.share_us
        + (e.counts.add - e.counts.fused_add) as f64 * model.add_us
        + 4.0 * model.wire_us_for(he::Dir::Up)
        + 8.0 * model.wire_us_for(he::Dir::Down))
        / 1e3;
    assert!((e.server_ms - want).abs() < 1e-9);
    let client = 4.0 * model.encrypt_us_for(he::Encoding::Coeffs)
        + 8.0 * model.decrypt_us_for(he::Encoding::Coeffs);
    assert!((e.client_ms - client / 1e3).abs() < 1e-9);
}

#[test]
fn methods_are_registered() {
    assert_eq!(Method::parse("cheetah"), Some(Method::Cheetah));
    assert!(Method::ALL.contains(&Method::Cheetah));
    assert_eq!(ConvMethod::parse("cheetah"), Some(ConvMethod::Cheetah));
    assert!(ConvMethod::ALL.contains(&ConvMethod::Cheetah));
    assert_eq!(
        ConvMethod::parse("cheetah-padded"),
        Some(ConvMethod::CheetahPadded)
    );
    assert!(ConvMethod::ALL.contains(&ConvMethod::CheetahPadded));
    assert!(ConvMethod::CheetahPadded.is_cheetah());
    assert_eq!(Method::Cheetah.to_string(), "cheetah");
    let layout = MatvecLayout::new(Method::Cheetah, 3, 3, real(params())).unwrap();
    assert_eq!(layout.encoding(), he::Encoding::Coeffs);
}

/// On the whole n8192 chain (38 + 4 x 45 bits) a Cheetah layer needs no key
/// switching and its noise with flooding fits the 128 bits of level 2: the client
/// encrypts there (two fifths fewer query bytes), the weights are prepared there, the
/// response is flooded there and then switched to the last level; the shares still
/// reconstruct the reference, and a slot method stays at the top.
#[test]
fn queries_below_the_top_level_on_the_full_chain() {
    let p = Params::preset("n8192").unwrap();
    let sh = shape(20, 12, 12, 6, 3, 1, Padding::Same);
    let layout = ConvLayout::new(ConvMethod::Cheetah, sh, real(&p)).unwrap();
    assert_eq!(layout.query_level(&p), 2);
    let gazelle = ConvLayout::new(ConvMethod::GazelleOut, sh, real(&p)).unwrap();
    assert_eq!(gazelle.query_level(&p), 0);
    let mv = MatvecLayout::new(Method::Cheetah, 30, 50, real(&p)).unwrap();
    assert_eq!(mv.query_level(&p), 2);
    // the lower level affords the flooding, the one below it does not
    let model = kernels::noise::NoiseModel::new(&p);
    let k = layout.kernel_noise(&model);
    assert!(kernels::noise::NoiseModel::at_level(&p, 2).affords(k));
    assert!(!kernels::noise::NoiseModel::at_level(&p, 3).affords(k));

    let (x, f) = conv_problem(&sh, 77);
    let client = Bfv::keygen(&p, GaloisSpec::none()).unwrap();
    let server = Bfv::server(&p, client.public_keys()).unwrap();
    let xr: Vec<u64> = x.iter().map(|&v| p.reduce(v)).collect();
    let m = layout.encode_weights(&server, &f).unwrap();
    let q = layout.query(&client, &xr).unwrap();
    for c in &q {
        assert_eq!(client.level(c), 2);
        assert_eq!(client.serialize(c).unwrap().len(), query_bytes(&p, &layout));
    }
    assert!(p.ct_wire_size(2, true) * 5 <= p.ct_wire_size(0, true) * 3 + 4096);
    let q: Vec<_> = q
        .iter()
        .map(|c| server.deserialize(&client.serialize(c).unwrap()).unwrap())
        .collect();
    let mut pool = layout.flood_pool(&p).unwrap();
    assert_eq!(pool.level(), 2);
    pool.fill(&server, layout.output_cts()).unwrap();
    let (resp, s) = layout.respond(&server, &m, &q, &mut pool).unwrap();
    let resp: Vec<_> = resp
        .iter()
        .map(|c| client.deserialize(&server.serialize(c).unwrap()).unwrap())
        .collect();
    assert!(resp.iter().all(|c| client.level(c) == p.last_level()));
    let c = layout.decrypt(&client, &resp).unwrap();
    assert_eq!(reconstruct(&c, &s, p.p()), conv_ref(&sh, &x, &f, p.p()));
    // a top-level pool does not fit these responses
    let mut top = FloodPool::new(layout.flood_bits(&p).unwrap());
    top.fill(&server, layout.output_cts()).unwrap();
    assert!(layout.respond(&server, &m, &q, &mut top).is_err());
}

/// A public weight bound (a fixed point's |w| ≤ 2^s) sizes the coefficient kernels'
/// noise by it instead of p/2: the same layout's queries drop at least 8 more bits per
/// coefficient (the client rounds them down to the level's budget, so the flooding is no
/// larger), and weights at the bound (the worst case
/// the model allows) still reconstruct the reference bit for bit on real BFV.
#[test]
fn a_public_weight_bound_shrinks_queries_and_weights_at_it_reconstruct() {
    let p = Params::preset("n8192").unwrap();
    let bits = 8;
    let pb = p.with_weight_bound(Some(bits));
    assert_eq!(pb, p); // the same parameter set
    assert_eq!(pb.weight_bound_log2(), 8.0);
    assert_eq!(p.weight_bound_log2(), (p.p() as f64 / 2.0).log2());
    let sh = shape(48, 14, 14, 40, 1, 1, Padding::Same);
    let layout = ConvLayout::new(ConvMethod::Cheetah, sh, real(&p)).unwrap();
    let n = p.n();
    assert!(query_bytes(&pb, &layout) + n <= query_bytes(&p, &layout));
    assert!(layout.flood_bits(&pb).unwrap() <= layout.flood_bits(&p).unwrap());
    let mv = MatvecLayout::new(Method::Cheetah, 30, 500, real(&p)).unwrap();
    assert!(query_bytes(&pb, &mv) + n <= query_bytes(&p, &mv));
    // tiles chosen again for the smaller queries: no more wire bytes than before
    let bounded = layout
        .clone()
        .with_weight_bound(pb.weight_bound_log2())
        .unwrap();
    let model = CostModel::reference(&pb);
    let wire = |pl: &ConvLayout| {
        let e = estimate(pl, &pb, &model).unwrap();
        e.bytes_up + e.bytes_down
    };
    assert!(wire(&bounded) <= wire(&layout));

    let mut r = ChaCha20Rng::seed_from_u64(81);
    let x: Vec<i64> = random(sh.c_i * sh.h * sh.w, (p.p() / 2) as i64, &mut r);
    let f: Vec<i64> = (0..sh.c_o * sh.c_i)
        .map(|_| {
            if r.random::<bool>() {
                1 << bits
            } else {
                -(1 << bits)
            }
        })
        .collect();
    let client = Bfv::keygen(&pb, GaloisSpec::none()).unwrap();
    let server = Bfv::server(&pb, client.public_keys()).unwrap();
    let xr: Vec<u64> = x.iter().map(|&v| pb.reduce(v)).collect();
    let m = bounded.encode_weights(&server, &f).unwrap();
    let q: Vec<_> = bounded
        .query(&client, &xr)
        .unwrap()
        .iter()
        .map(|c| server.deserialize(&client.serialize(c).unwrap()).unwrap())
        .collect();
    let mut pool = bounded.flood_pool(&pb).unwrap();
    pool.fill(&server, bounded.output_cts()).unwrap();
    let (resp, s) = bounded.respond(&server, &m, &q, &mut pool).unwrap();
    let resp: Vec<_> = resp
        .iter()
        .map(|c| client.deserialize(&server.serialize(c).unwrap()).unwrap())
        .collect();
    let c = bounded.decrypt(&client, &resp).unwrap();
    assert_eq!(reconstruct(&c, &s, p.p()), conv_ref(&sh, &x, &f, p.p()));
}

/// Weights encoded on the fly (`respond_on_the_fly`: Cheetah's convolution encodes one
/// output group at a time, `bsgs` and HELiKs one fused product of one output
/// ciphertext at a time, across strips, GAZELLE's and GALA's one output ciphertext's
/// plaintexts) give the reference's shares and the same server op counts (prepares
/// included) as `encode_weights` + `respond`, on Sim and on real BFV.
#[test]
fn conv_on_the_fly_equals_encoded_weights() {
    fn counts_of<L: LinearLayer, B: Backend>(
        b: &Counting<B>,
        layout: &L,
        w: &[i64],
        x: &[i64],
        on_the_fly: bool,
    ) -> (Vec<u64>, OpCounts) {
        let p = b.slots().p;
        let xr: Vec<u64> = x.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect();
        let q = layout.query(b, &xr).unwrap();
        let mut pool = FloodPool::at_level(0, b.level(&q[0]));
        pool.fill(b, layout.output_cts()).unwrap();
        b.take();
        let (resp, server) = if on_the_fly {
            layout.respond_on_the_fly(b, w, &q, &mut pool).unwrap()
        } else {
            let m = layout.encode_weights(b, w).unwrap();
            layout.respond(b, &m, &q, &mut pool).unwrap()
        };
        let counts = b.take();
        let client = layout.decrypt(b, &resp).unwrap();
        (reconstruct(&client, &server, p), counts)
    }
    let p = params();
    let shapes = [
        shape(2, 100, 90, 3, 3, 1, Padding::Same),  // spatial tiles
        shape(130, 6, 6, 70, 3, 1, Padding::Valid), // input and output groups
        shape(40, 16, 16, 24, 1, 1, Padding::Same),
        shape(3, 9, 7, 5, 3, 2, Padding::Same),
    ];
    let methods = [
        ConvMethod::Cheetah,
        ConvMethod::Bsgs,
        ConvMethod::Heliks,
        ConvMethod::GazelleIn,
        ConvMethod::GazelleOut,
        ConvMethod::Gala,
    ];
    let mut ran = [0; 6];
    for (i, sh) in shapes.iter().enumerate() {
        let (x, f) = conv_problem(sh, 90 + i as u64);
        let want = conv_ref(sh, &x, &f, p.p());
        for (m, method) in methods.into_iter().enumerate() {
            // The slot layout cannot hold every shape (a row wider than n/2 slots).
            let Ok(layout) = ConvLayout::new(method, *sh, real(p)) else {
                continue;
            };
            ran[m] += 1;
            let sim = Counting::new(Sim::new(p, layout.galois()));
            let (held, held_counts) = counts_of(&sim, &layout, &f, &x, false);
            let (fly, fly_counts) = counts_of(&sim, &layout, &f, &x, true);
            assert_eq!(held, want, "{method} {sh:?} encoded");
            assert_eq!(fly, want, "{method} {sh:?} on the fly");
            assert_eq!(fly_counts, held_counts, "{method} {sh:?} counts");
            assert!(
                fly_counts.ntt > 0,
                "{method} {sh:?}: the prepares are counted"
            );
        }
    }
    assert_eq!(ran[0], shapes.len());
    assert!(
        ran[1..].iter().all(|&r| r >= 3),
        "slot methods ran on {ran:?} shapes"
    );
    // Real BFV: the on-the-fly responses decrypt to the reference's shares.
    let sh = shape(130, 6, 6, 70, 3, 1, Padding::Valid);
    let (x, f) = conv_problem(&sh, 99);
    let layout = ConvLayout::new(ConvMethod::Cheetah, sh, real(p)).unwrap();
    let client = client();
    let server = Bfv::server(p, client.public_keys()).unwrap();
    let xr: Vec<u64> = x.iter().map(|&v| p.reduce(v)).collect();
    let q = layout.query(client, &xr).unwrap();
    let mut pool = FloodPool::at_level(layout.flood_bits(p).unwrap(), server.level(&q[0]));
    pool.fill(&server, layout.output_cts()).unwrap();
    let (resp, s) = layout
        .respond_on_the_fly(&server, &f, &q, &mut pool)
        .unwrap();
    let c = layout.decrypt(client, &resp).unwrap();
    assert_eq!(reconstruct(&c, &s, p.p()), conv_ref(&sh, &x, &f, p.p()));
    // Real BFV, 1x1 filters whose plaintexts are polynomials in X^(2^a) (transformed in
    // n/2^a points, `prepare_coeffs_strided`), held and on the fly, with and without
    // output-channel packing, at n8192-q164 and at the Cheetah layers' query level of
    // n8192-p28, Cheetah's tiles and padded ones: the reference's shares.
    let p28 = Params::preset("n8192-p28").unwrap();
    let p28_client = Bfv::keygen(&p28, GaloisSpec::none()).unwrap();
    for (pp, client, sh, stride) in [
        (p, client, shape(40, 16, 16, 24, 1, 1, Padding::Same), 8),
        (p, client, shape(70, 14, 14, 20, 1, 1, Padding::Same), 2),
        (p, client, shape(9, 7, 7, 300, 1, 1, Padding::Same), 0),
        (
            &p28,
            &p28_client,
            shape(64, 14, 14, 48, 1, 1, Padding::Same),
            2,
        ),
        (
            &p28,
            &p28_client,
            shape(16, 28, 28, 8, 1, 2, Padding::Same),
            2,
        ),
        (
            &p28,
            &p28_client,
            shape(64, 7, 7, 200, 1, 1, Padding::Same),
            3,
        ),
    ] {
        let (x, f) = conv_problem(&sh, 97);
        let want = conv_ref(&sh, &x, &f, pp.p());
        // a 7x7 map at p28: Cheetah's own 7x7 tiles have no stride, padded 7x8 ones 2^3
        let method = if sh.h == 7 && pp.name() == "n8192-p28" {
            ConvMethod::CheetahPadded
        } else {
            ConvMethod::Cheetah
        };
        let layout = ConvLayout::new(method, sh, real(pp)).unwrap();
        assert_eq!(layout.weight_stride_log2(), stride, "{sh:?}");
        // held, each plaintext takes its small transform's n/2^a words per modulus
        let est =
            kernels::estimate::estimate(&layout, pp, &kernels::CostModel::reference(pp)).unwrap();
        let limbs = pp.levels() - layout.query_level(pp);
        let words = he::strided_transform_len(pp.n(), stride) * limbs;
        assert_eq!(
            est.encoded_bytes,
            (layout.encoded_plaintexts() * words * 8) as u64,
            "{sh:?}"
        );
        let server = Bfv::server(pp, client.public_keys()).unwrap();
        let xr: Vec<u64> = x.iter().map(|&v| pp.reduce(v)).collect();
        for on_the_fly in [false, true] {
            let q = layout.query(client, &xr).unwrap();
            let mut pool = FloodPool::at_level(layout.flood_bits(pp).unwrap(), server.level(&q[0]));
            pool.fill(&server, layout.output_cts()).unwrap();
            let (resp, s) = if on_the_fly {
                layout
                    .respond_on_the_fly(&server, &f, &q, &mut pool)
                    .unwrap()
            } else {
                let m = layout.encode_weights(&server, &f).unwrap();
                layout.respond(&server, &m, &q, &mut pool).unwrap()
            };
            let c = layout.decrypt(client, &resp).unwrap();
            assert_eq!(
                reconstruct(&c, &s, pp.p()),
                want,
                "{sh:?} at {}, on the fly: {on_the_fly}",
                pp.name()
            );
        }
    }
    // Real BFV, slot methods at n8192 (`bsgs` and HELiKs encode their plaintexts inside
    // the products, GAZELLE's input rotation prepares one output's; several channels per
    // row): the reference's shares.
    let p = Params::preset("n8192").unwrap();
    let sh = shape(40, 16, 16, 24, 3, 1, Padding::Same);
    let (x, f) = conv_problem(&sh, 98);
    let want = conv_ref(&sh, &x, &f, p.p());
    for method in [ConvMethod::Bsgs, ConvMethod::Heliks, ConvMethod::GazelleIn] {
        let layout = ConvLayout::new(method, sh, real(&p)).unwrap();
        assert!(!layout.geometry().scalar_path());
        let client = Bfv::keygen(&p, layout.galois()).unwrap();
        let server = Bfv::server(&p, client.public_keys()).unwrap();
        let xr: Vec<u64> = x.iter().map(|&v| p.reduce(v)).collect();
        let q = layout.query(&client, &xr).unwrap();
        let mut pool = FloodPool::at_level(layout.flood_bits(&p).unwrap(), server.level(&q[0]));
        pool.fill(&server, layout.output_cts()).unwrap();
        let (resp, s) = layout
            .respond_on_the_fly(&server, &f, &q, &mut pool)
            .unwrap();
        let c = layout.decrypt(&client, &resp).unwrap();
        assert_eq!(
            reconstruct(&c, &s, p.p()),
            want,
            "{method} on the fly on Bfv"
        );
    }
}
