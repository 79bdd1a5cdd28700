//! Every HE operation's median time (`helina bench ops`), plain fhe.rs next to the
//! faster variant helina uses; the planner's per-op costs come from this table.

use std::collections::BTreeMap;

use he::{random_slots, Backend, Bfv, Dir, Encoding, GaloisSpec, Params};

use serde::Serialize;

use crate::{progress, Result};
use kernels::estimate::busy_median_us;

/// `bench ops`.
#[derive(Clone, Debug)]
pub struct OpsOptions {
    /// Parameter preset.
    pub params: String,
    /// Repetitions per operation (the median is reported).
    pub reps: usize,
    /// Save the kernels' per-op costs as this machine's planner cost model (the cache
    /// `helina plan`, `infer`, the server and `bench network` read).
    pub save: bool,
    /// Threads that run each operation at once (each timing its own copy; the figure is
    /// the mean of their medians): a layer runs its operations on every thread, and
    /// they share the caches and the memory bus, so the planner's costs are measured
    /// that way. 1 times each operation alone.
    pub threads: usize,
}

/// What `bench ops` measured.
#[derive(Clone, Debug, Serialize)]
pub struct OpsReport {
    /// The parameter set's name.
    pub params: String,
    /// Its ring dimension.
    pub n: usize,
    /// Its ciphertext modulus, bits.
    pub log_q: u32,
    /// Its plaintext modulus.
    pub p: u64,
    /// Repetitions per operation.
    pub reps: usize,
    /// Threads that ran each operation at once.
    pub threads: usize,
    /// Operation → median µs.
    pub medians: BTreeMap<&'static str, f64>,
    /// Bytes: a ciphertext, a seeded one, one at the last level, a Galois key, the
    /// public key.
    pub ct_bytes: usize,
    /// A seeded (symmetric) ciphertext.
    pub seeded_ct_bytes: usize,
    /// A ciphertext at the last level.
    pub last_level_ct_bytes: usize,
    /// One Galois key.
    pub galois_key_bytes: usize,
    /// The public key.
    pub public_key_bytes: usize,
    /// Where the cost model was saved (`save`).
    pub saved_to: Option<std::path::PathBuf>,
}

/// The size of the hoisted group `rotate_hoisted` is measured in.
pub const HOISTED_GROUP: usize = GROUP;
/// The number of terms of the per-term product figures.
pub const PRODUCT_TERMS: usize = TERMS;

/// Size of the hoisted group the `rotate_hoisted` figure is measured in.
const GROUP: usize = 8;
/// Number of terms for the per-term product figures.
const TERMS: usize = 16;

/// Times every operation `a.reps` times on `a.params`.
pub fn run(a: &OpsOptions) -> Result<OpsReport> {
    let params = Params::preset(&a.params)?;
    let steps: Vec<i64> = (1..=GROUP as i64).collect();
    let b = Bfv::keygen(&params, GaloisSpec::new(steps.clone()))?;
    let mut rng = rand::rng();
    let (n, p) = (params.n(), params.p());
    let x = random_slots(n, p, &mut rng);
    let w: Vec<Vec<u64>> = (0..TERMS).map(|_| random_slots(n, p, &mut rng)).collect();
    let pt = b.encode(&x)?;
    let ct = b.encrypt_pk(&pt)?;
    let cts: Vec<_> = (0..TERMS)
        .map(|_| b.encrypt_pk(&pt))
        .collect::<std::result::Result<_, _>>()?;
    let pws: Vec<_> = w
        .iter()
        .map(|v| b.prepare(v))
        .collect::<std::result::Result<_, _>>()?;
    let ews: Vec<_> = w
        .iter()
        .map(|v| b.encode(v))
        .collect::<std::result::Result<_, _>>()?;
    let sym = b.encrypt_sym(&pt)?;
    let last = b.switch_to_last(&ct)?;
    let bytes = b.serialize(&ct)?;
    let reps = a.reps;
    let threads = a.threads.max(1);

    let mut m: BTreeMap<&'static str, f64> = BTreeMap::new();
    let pb = progress(42, "bench ops");
    let mut put = |k: &'static str, v: f64| {
        m.insert(k, v);
        pb.inc(1);
    };
    put(
        "rotate",
        busy_median_us(threads, reps, || b.rotate_rows_fhe(&ct, 1)),
    );
    // Rotations cycle through the GROUP keys (0.9 MB each at n = 8192), as a layer's
    // do: one key used over and over stays in cache and under-prices a layer's
    // rotations.
    let next = std::sync::atomic::AtomicI64::new(0);
    let cycle = || next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % GROUP as i64 + 1;
    put(
        "rotate_single",
        busy_median_us(threads, reps, || b.rotate_rows(&ct, cycle())),
    );
    put(
        "hoist_precompute",
        busy_median_us(threads, reps, || b.hoist(&ct)),
    );
    let h = b.hoist(&ct)?;
    put(
        "rotate_hoisted_only",
        busy_median_us(threads, reps, || b.rotate_hoisted(&h, cycle())),
    );
    put(
        "rotate_hoisted",
        busy_median_us(threads, reps.div_ceil(4), || b.rotate_group(&ct, &steps)) / GROUP as f64,
    );
    put(
        "mul_plain",
        busy_median_us(threads, reps, || b.mul_plain_fhe(&ct, &ews[0])),
    );
    put(
        "mul_plain_shoup",
        busy_median_us(threads, reps, || b.mul_plain(&ct, &pws[0])),
    );
    put(
        "mul_add_term",
        busy_median_us(threads, reps.div_ceil(4), || -> he::Result<_> {
            let mut acc = b.mul_plain_fhe(&cts[0], &ews[0])?;
            for i in 1..TERMS {
                acc = b.add(&acc, &b.mul_plain_fhe(&cts[i], &ews[i])?)?;
            }
            Ok(acc)
        }) / TERMS as f64,
    );
    let cr: Vec<_> = cts.iter().collect();
    let pr: Vec<_> = pws.iter().collect();
    let dot_term = busy_median_us(threads, reps.div_ceil(4), || b.dot(&cr, &pr)) / TERMS as f64;
    put("dot_term", dot_term);
    // the scalar path's products: each plaintext one constant per row
    let rows: Vec<_> = w
        .iter()
        .map(|v| b.prepare_row_constants([v[0], v[1]]))
        .collect::<std::result::Result<_, _>>()?;
    let rr: Vec<_> = rows.iter().collect();
    put(
        "dot_term_rows",
        busy_median_us(threads, reps.div_ceil(4), || b.dot(&cr, &rr)) / TERMS as f64,
    );
    // products by plaintexts held as strided transforms (Cheetah's 1x1 filters)
    let strided: Vec<_> = w
        .iter()
        .map(|v| {
            b.prepare_coeffs_strided(
                &kernels::estimate::stride_sample(v),
                0,
                kernels::estimate::SAMPLE_STRIDE_LOG2,
            )
        })
        .collect::<std::result::Result<_, _>>()?;
    let sr: Vec<_> = strided.iter().collect();
    put(
        "dot_term_strided",
        busy_median_us(threads, reps.div_ceil(4), || b.dot(&cr, &sr)) / TERMS as f64,
    );
    // reading held plaintexts from memory inside a fused product, per MB, beyond the
    // same product with its plaintext in the cache
    let held_read = kernels::estimate::measure_held_read(&b, &x, reps.div_ceil(4), threads)?;
    put("held_read_per_mb", held_read);
    // weights encoded on the fly inside a fused product, per plaintext, less the same
    // product with held plaintexts
    let in_product = kernels::estimate::measure_encode_in_product(&b, &x, reps, threads)?;
    put("encode_in_product", in_product.slots);
    for (name, level) in [
        ("encode_in_product_coeffs", 0),
        ("encode_in_product_coeffs_level1", 1),
        ("encode_in_product_coeffs_level2", 2),
    ] {
        if let Some(us) = in_product.coeffs.get(level).copied().flatten() {
            put(name, us);
        }
    }
    // a plaintext in X^(2^a) against a whole one, at the deepest query level
    const STRIDES: [&str; kernels::estimate::STRIDE_RATIOS - 1] = [
        "encode_in_product_coeffs_stride1_ratio",
        "encode_in_product_coeffs_stride2_ratio",
        "encode_in_product_coeffs_stride3_ratio",
        "encode_in_product_coeffs_stride4_ratio",
        "encode_in_product_coeffs_stride5_ratio",
        "encode_in_product_coeffs_stride6_ratio",
        "encode_in_product_coeffs_stride7_ratio",
        "encode_in_product_coeffs_stride8_ratio",
        "encode_in_product_coeffs_stride9_ratio",
    ];
    for (name, r) in STRIDES.iter().zip(&in_product.stride_ratio[1..]) {
        put(name, *r);
    }
    put("add", busy_median_us(threads, reps, || b.add(&ct, &cts[1])));
    put(
        "add_plain",
        busy_median_us(threads, reps, || b.add_plain(&ct, &ews[1])),
    );
    put("encode", busy_median_us(threads, reps, || b.encode(&x)));
    put("prepare", busy_median_us(threads, reps, || b.prepare(&x)));
    put(
        "prepare_coeffs",
        busy_median_us(threads, reps, || b.prepare_coeffs(&x)),
    );
    put(
        "prepare_row_constants",
        busy_median_us(threads, reps, || b.prepare_row_constants([x[0], x[1]])),
    );
    put(
        "encrypt_pk",
        busy_median_us(threads, reps, || b.encrypt_pk(&pt)),
    );
    put(
        "encrypt_sym",
        busy_median_us(threads, reps, || b.encrypt_sym(&pt)),
    );
    put(
        "decrypt",
        busy_median_us(threads, reps, || b.decrypt(&last)),
    );
    put(
        "encrypt_zero_flood",
        busy_median_us(threads, reps, || b.encrypt_zero_flood(40)),
    );
    // as a session's flooding pool makes them (fresh memory for each), one chunk of noise
    // and each further chunk (the projection's offline model)
    let flood = kernels::estimate::measure_flood(&b, reps, threads);
    put("flood_fill", flood.one_chunk_us);
    if let Some(c) = flood.chunk_us {
        put("flood_fill_chunk", c);
    }
    put("flood_fill_last", flood.last_us);
    put(
        "switch_to_last",
        busy_median_us(threads, reps, || b.switch_to_last(&ct)),
    );
    // share_output's work per response ciphertext: mask, flood and switch in one pass,
    // then the rounding for the wire (the flooding zero is precomputed offline)
    let zero = b.encrypt_zero_flood(40)?;
    put(
        "share_step",
        busy_median_us(threads, reps, || -> he::Result<_> {
            b.round(
                &b.mask_and_switch(&ct, &x, Encoding::Slots, &zero)?,
                params.response_rounding(),
            )
        }),
    );
    put(
        "serialize",
        busy_median_us(threads, reps, || b.serialize(&ct)),
    );
    put(
        "deserialize",
        busy_median_us(threads, reps, || b.deserialize(&bytes)),
    );
    put(
        "transfer_seeded_query",
        busy_median_us(threads, reps, || b.transfer(Dir::Up, &sym)),
    );
    // The server's (de)serialisation and the client's work per query and per response
    // ciphertext (the planner's model).
    // Queries are rounded for the wire as the layers round them (`LinearLayer::query`).
    let rounding = kernels::estimate::typical_query_rounding(&params);
    // responses are rounded as share_output rounds them
    let last = b.round(&last, params.response_rounding())?;
    let last_bytes = b.serialize(&last)?;
    let query_bytes = b.serialize(&b.round(&sym, rounding)?)?;
    put(
        "deserialize_query",
        busy_median_us(threads, reps, || b.deserialize(&query_bytes)),
    );
    put(
        "serialize_response",
        busy_median_us(threads, reps, || b.serialize(&last)),
    );
    for (e, encrypt, decrypt) in [
        (Encoding::Slots, "client_encrypt", "client_decrypt"),
        (
            Encoding::Coeffs,
            "client_encrypt_coeffs",
            "client_decrypt_coeffs",
        ),
    ] {
        put(
            encrypt,
            busy_median_us(threads, reps, || -> he::Result<_> {
                b.serialize(&b.round(&b.encrypt_sym(&b.encode_as(&x, e)?)?, rounding)?)
            }),
        );
        put(
            decrypt,
            busy_median_us(threads, reps, || -> he::Result<_> {
                b.decrypt_as(&b.deserialize(&last_bytes)?, e)
            }),
        );
    }
    pb.finish_and_clear();

    let mut saved_to = None;
    if a.save {
        let model = kernels::CostModel {
            perm_us: m["rotate_single"],
            dec_perm_us: m["hoist_precompute"],
            hst_perm_us: m["rotate_hoisted_only"],
            sc_mult_us: m["dot_term"],
            add_us: m["add"],
            // share_output per ciphertext: mask, flood, switch, round
            share_us: m["share_step"],
            prepare_us: m["prepare"],
            prepare_coeffs_us: Some(m["prepare_coeffs"]),
            encode_in_product_us: Some(in_product.slots),
            encode_in_product_coeffs_us: in_product.coeffs,
            coeffs_stride_ratio: Some(in_product.stride_ratio),
            prepare_rows_us: Some(m["prepare_row_constants"]),
            sc_mult_rows_us: Some(m["dot_term_rows"]),
            sc_mult_strided_us: Some(m["dot_term_strided"]),
            held_read_us_per_mb: Some(m["held_read_per_mb"]),
            galois_key_bytes: (b.public_keys().galois_bytes() / GROUP) as u64,
            encrypt_us: Some(m["client_encrypt"]),
            encrypt_coeffs_us: Some(m["client_encrypt_coeffs"]),
            decrypt_us: Some(m["client_decrypt"]),
            decrypt_coeffs_us: Some(m["client_decrypt_coeffs"]),
            deserialize_us: Some(m["deserialize_query"]),
            serialize_us: Some(m["serialize_response"]),
            flood_us: Some(m["flood_fill"]),
            flood_chunk_us: m.get("flood_fill_chunk").copied(),
            flood_last_us: Some(m["flood_fill_last"]),
        };
        let path = helina::costs::cache_path(&params)?;
        model
            .save(&path)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        saved_to = Some(path);
    }

    Ok(OpsReport {
        params: params.name().to_string(),
        n,
        log_q: params.log_q(),
        p,
        reps,
        threads,
        medians: m,
        ct_bytes: b.wire_size(&ct),
        seeded_ct_bytes: b.wire_size(&sym),
        last_level_ct_bytes: b.wire_size(&last),
        galois_key_bytes: b.public_keys().galois_bytes() / GROUP,
        public_key_bytes: b.public_keys().public_key_bytes(),
        saved_to,
    })
}
