//! Predicted cost of a planned layer without running any cryptography: the layer runs
//! on the counting backend ([`he::Count`]) with zero weights and input, and its
//! operation counts are priced with a [`CostModel`] (per-operation microseconds) and
//! a link (bytes / bandwidth + round trips). `helina server --method auto` picks the
//! cheapest method this way; `helina bench matvec|conv` prints measured next to
//! predicted times.
//!
//! The default model ([`CostModel::reference`]) holds figures measured at n = 8192 with
//! five moduli below 2^50 on this project's machine kind, each operation on both
//! threads at once: plain rotation 4.1 ms, hoisted rotation 1.1 ms after a 1.7 ms
//! decomposition, fused product 43 µs per term, addition 50 µs, the share step (mask,
//! flood and switch to the last level in one pass, rounding for the wire) 1.2 ms; the
//! server's deserialisation of a (rounded) query ciphertext 0.7 ms and serialisation of
//! a response 5 µs (rounding packed it); the client's encoding, encryption, rounding and
//! serialisation of a query ciphertext 1.5 ms and deserialisation and decryption of a
//! response 0.23 ms; encoding a weight plaintext 250 µs (slots), 190 µs (coefficients),
//! 17 µs (one constant per row), a product by a row-constant plaintext 1.6 times one by
//! a full plaintext; a held weight plaintext read from memory adds 100 µs per MB to its
//! product (96-118 µs on the IFMA machine kind, where the product itself took 33-91 µs
//! per 0.33 MB term in the same runs; priced for every held layer, also where a small
//! network's few MB of weights might stay in the cache: well under a millisecond).
//! Other sets scale linearly in n·L (fhe.rs's operations) or in n times the moduli
//! weighted by width (helina's transforms and products, which run on IFMA lanes below
//! 2^50).
//!
//! Measured costs ([`CostModel::measure`], `helina bench ops --save`) time each
//! operation on every thread of the pool at once ([`busy_median_us`]): a layer runs its
//! operations on all threads, which share the caches and the memory bus, and an
//! operation timed alone on an idle machine was priced up to 1.7 times below what it
//! costs there (weight encoding, encryption).

use he::{random_slots, Backend, Bfv, Count, Encoding, GaloisSpec, OpCounts, Params};
use serde::{Deserialize, Serialize};
use std::time::Instant;

use crate::error::Result;
use crate::layer::LinearLayer;
use crate::share::FloodPool;

/// The reference figures below are for n = 8192 with [`REFERENCE_MODULI`] moduli below
/// 2^50 (the n8192 presets' chains), each operation run on both threads of this
/// project's 2-core machine kind at once (`helina bench ops`), as a layer runs them.
/// fhe.rs's own operations (rotations, encryption, decryption, the share step,
/// flooding, (de)serialisation, additions) scale with the number of moduli; helina's
/// transforms and products (weight plaintexts, fused products) run on 52-bit IFMA lanes
/// for a modulus below 2^50 and on 64-bit lanes for a wider one, which costs
/// [`WIDE_MODULUS_WEIGHT`] times as much (`bench ops`: a fused product's term 38.5 µs
/// on five moduli below 2^50 against 56.6 µs on four of 54-55 bits).
pub const REFERENCE_MODULI: f64 = 5.0;
/// The price of a modulus of 50 bits or more in helina's transforms and products,
/// against one below 2^50.
pub const WIDE_MODULUS_WEIGHT: f64 = 1.8;
/// Reference encoding of one slot weight plaintext, µs.
const REFERENCE_PREPARE_US: f64 = 250.0;
/// Reference encoding of one coefficient weight plaintext, µs.
const REFERENCE_PREPARE_COEFFS_US: f64 = 190.0;
/// Reference encoding of one row-constant weight plaintext (the scalar path), µs.
const REFERENCE_PREPARE_ROWS_US: f64 = 17.0;
/// Reference product inside a fused sum (one term), µs.
const REFERENCE_SC_MULT_US: f64 = 43.0;
/// Reference time a fused product adds per MB of held weight plaintexts for reading
/// them from memory rather than from the cache, µs ([`measure_held_read`]).
pub const REFERENCE_HELD_READ_US_PER_MB: f64 = 100.0;
/// A product by a row-constant plaintext against one by a full plaintext (both per term
/// of a fused sum), as measured on this machine kind (`bench ops`: `dot_term_rows` /
/// `dot_term`; the row constants' sums stay 128-bit, the full plaintexts' run on IFMA).
const REFERENCE_ROWS_PRODUCT_RATIO: f64 = 1.6;
/// Reference encoding of one slot weight plaintext inside a fused product, at the top
/// level, beyond the product itself ([`CostModel::encode_in_product_us`]), µs.
const REFERENCE_ENCODE_IN_PRODUCT_US: f64 = 235.0;
/// The same for coefficient plaintexts at the top level and the two levels below it
/// (the query levels of coefficient-encoded kernels).
const REFERENCE_ENCODE_IN_PRODUCT_COEFFS_US: [f64; 3] = [160.0, 127.0, 100.0];
/// Reference client work per query ciphertext (encode, encrypt, round for the wire,
/// serialise), µs.
const ENCRYPT_US: f64 = 1460.0;
const ENCRYPT_COEFFS_US: f64 = 1470.0;
/// Reference client work per response ciphertext (deserialise, decrypt, decode), µs.
const DECRYPT_US: f64 = 230.0;
const DECRYPT_COEFFS_US: f64 = 190.0;
/// Reference server (de)serialisation of a query (seeded, rounded) and a response (last
/// level).
const DESERIALIZE_US: f64 = 700.0;
const SERIALIZE_US: f64 = 5.0;
/// Reference flooding encryption of zero (public key, top level, one chunk of noise), as
/// a pool fill makes them ([`measure_flood`]).
const FLOOD_US: f64 = 1530.0;
/// Reference cost of each further [`he::FLOOD_NOISE_CHUNK_BITS`]-bit chunk of flooding
/// noise (top level).
const FLOOD_CHUNK_US: f64 = 133.0;
/// Reference encryption of zero at the last level (one modulus) without flooding noise.
const FLOOD_LAST_US: f64 = 375.0;
/// Fresh ciphertexts per timed flooding fill ([`measure_flood`]).
const FLOOD_SAMPLE: usize = 64;
/// Flooding bits of [`measure_flood`]'s one-chunk fill.
const FLOOD_BITS_ONE_CHUNK: u32 = 40;
/// The most chunks of noise [`measure_flood`] fills with to price a further chunk: the
/// slope over several chunks, where the top level affords them (a difference of two
/// noisy timings one chunk apart once came out at zero).
const FLOOD_MOST_CHUNKS: u32 = 4;

/// Per-operation costs in microseconds at one parameter set, and the size of a Galois
/// key. [`CostModel::reference`] holds this machine kind's figures;
/// [`CostModel::measure`] re-measures them here (`helina bench ops --save` caches them).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// A plain rotation (Perm).
    pub perm_us: f64,
    /// A hoisting decomposition (DecPerm).
    pub dec_perm_us: f64,
    /// A hoisted rotation (HstPerm).
    pub hst_perm_us: f64,
    /// One ciphertext × plaintext product inside a fused sum.
    pub sc_mult_us: f64,
    /// One addition.
    pub add_us: f64,
    /// `share_output` per response ciphertext (mask, flood, switch to the last level).
    pub share_us: f64,
    /// Encoding one slot weight plaintext into NTT form (paid online when the weights
    /// are encoded on the fly).
    pub prepare_us: f64,
    /// Encoding one coefficient-encoded weight plaintext (NTT form, at its layer's
    /// query level). Absent in caches saved before it existed: then
    /// [`CostModel::reference`]'s ratio to `prepare_us` is assumed.
    #[serde(default)]
    pub prepare_coeffs_us: Option<f64>,
    /// Encoding one slot weight plaintext inside a fused product
    /// ([`he::Backend::dot_encoded`], how the streaming kernels encode weights on the
    /// fly, [`LinearLayer::encodes_in_products`]), at the top level: what a term adds to
    /// a fused product beyond what it adds with a held plaintext
    /// ([`measure_encode_in_product`]). Absent in older caches: `prepare_us`.
    #[serde(default)]
    pub encode_in_product_us: Option<f64>,
    /// As `encode_in_product_us`, coefficient encoding, per query level (index 0 the
    /// top, up to [`MEASURED_LEVELS`]): measured at each level, since a lower level
    /// drops the dearer moduli first and its products cost less than their share of the
    /// moduli. Absent (older caches, deeper levels): the coefficient prepare, scaled to
    /// the level's moduli.
    #[serde(default)]
    pub encode_in_product_coeffs_us: [Option<f64>; MEASURED_LEVELS],
    /// A coefficient plaintext in X^(2^a) encoded in n/2^a points and spread
    /// ([`he::Backend::prepare_coeffs_strided`]; Cheetah's 1x1 filters), priced against
    /// a whole plaintext's encoding: index a (index 0 is 1; strides beyond the last index
    /// take the last), measured inside fused products at the deepest coefficient query
    /// level, each against the same held product ([`measure_encode_in_product`]). Absent
    /// in older caches: the reference's.
    #[serde(default)]
    pub coeffs_stride_ratio: Option<[f64; STRIDE_RATIOS]>,
    /// Encoding one row-constant weight plaintext (the scalar path,
    /// [`he::Backend::prepare_row_constants`]). Absent in older caches: the reference's
    /// ratio to `prepare_us`.
    #[serde(default)]
    pub prepare_rows_us: Option<f64>,
    /// One product by a row-constant plaintext inside a fused sum (the scalar path's
    /// products, a 128-bit accumulation read through each position's row). Absent in
    /// older caches: the reference's ratio to `sc_mult_us`.
    #[serde(default)]
    pub sc_mult_rows_us: Option<f64>,
    /// One product by a coefficient plaintext held as its strided transform (a Cheetah
    /// 1x1 filter in X^(2^a), [`he::Backend::prepare_coeffs_strided`]) inside a fused
    /// sum, at the top level: such products run as 128-bit sums reading each held value
    /// 2^a times, also where the products by NTT-form plaintexts (`sc_mult_us`) run on
    /// IFMA lanes. Absent in older caches and in [`CostModel::reference`] (a machine
    /// without IFMA, where the two cost the same): `sc_mult_us`.
    #[serde(default)]
    pub sc_mult_strided_us: Option<f64>,
    /// What a product by a held weight plaintext adds, per MB of that plaintext, for
    /// reading it from memory: a held layer's plaintexts are read once per query, and a
    /// network's held weights (gigabytes for ResNet-50) are far beyond any cache, where
    /// `sc_mult_us` is measured with plaintexts in the cache ([`measure_held_read`]).
    /// Absent in older caches: [`REFERENCE_HELD_READ_US_PER_MB`].
    #[serde(default)]
    pub held_read_us_per_mb: Option<f64>,
    /// Bytes of one Galois key on the wire (uploaded once per session).
    pub galois_key_bytes: u64,
    /// The client's work per query ciphertext at the top level: encode, encrypt
    /// (symmetric), round for the wire ([`typical_query_rounding`]), serialise; slot
    /// encoding. Absent in caches saved before it
    /// existed: then [`CostModel::reference`]'s figure scaled by `prepare_us` is assumed.
    #[serde(default)]
    pub encrypt_us: Option<f64>,
    /// As `encrypt_us`, coefficient encoding.
    #[serde(default)]
    pub encrypt_coeffs_us: Option<f64>,
    /// The client's work per response ciphertext (last level): deserialise, decrypt,
    /// decode; slot encoding.
    #[serde(default)]
    pub decrypt_us: Option<f64>,
    /// As `decrypt_us`, coefficient encoding.
    #[serde(default)]
    pub decrypt_coeffs_us: Option<f64>,
    /// The server's deserialisation of one query ciphertext (seeded, top level).
    #[serde(default)]
    pub deserialize_us: Option<f64>,
    /// The server's serialisation of one response ciphertext (last level).
    #[serde(default)]
    pub serialize_us: Option<f64>,
    /// The server's offline work per response ciphertext: a public-key encryption of
    /// zero with one chunk of flooding noise ([`he::FLOOD_NOISE_CHUNK_BITS`]), at the top
    /// level, made as a pool fill makes them ([`measure_flood`]). Absent in older
    /// caches: the reference's ratio to `prepare_us`.
    #[serde(default)]
    pub flood_us: Option<f64>,
    /// Each further chunk of flooding noise (top level). Absent in older caches (or
    /// where the top level cannot afford two chunks): the reference's ratio to
    /// `prepare_us`.
    #[serde(default)]
    pub flood_chunk_us: Option<f64>,
    /// An encryption of zero at the last level (one modulus) without flooding noise:
    /// with [`CostModel::flood_us`], the two ends of the line a level's cost lies on
    /// ([`CostModel::flood_us_at`]). Absent in older caches: the reference's ratio to
    /// `prepare_us`.
    #[serde(default)]
    pub flood_last_us: Option<f64>,
}

impl CostModel {
    /// The reference figures, scaled for other sets: fhe.rs's operations by n·L
    /// against n = 8192 with [`REFERENCE_MODULI`] moduli, helina's transforms and
    /// products by n times the moduli weighted by their width ([`WIDE_MODULUS_WEIGHT`]),
    /// a Galois key at its exact size (L seeded polynomials of the top level).
    pub fn reference(params: &Params) -> Self {
        let n = params.n() as f64 / 8192.0;
        let s = n * params.levels() as f64 / REFERENCE_MODULI;
        let weight = |q: &u64| {
            if *q < 1 << 50 {
                1.0
            } else {
                WIDE_MODULUS_WEIGHT
            }
        };
        let w = n * params.moduli().iter().map(weight).sum::<f64>() / REFERENCE_MODULI;
        // per query level: the level's weighted moduli against the reference's there
        let mut in_product_coeffs = [None; MEASURED_LEVELS];
        for (level, us) in REFERENCE_ENCODE_IN_PRODUCT_COEFFS_US.iter().enumerate() {
            if level < params.last_level().max(1) {
                let kept = params.moduli_at(level).iter().map(weight).sum::<f64>();
                in_product_coeffs[level] = Some(us * n * kept / (REFERENCE_MODULI - level as f64));
            }
        }
        Self {
            perm_us: 4080.0 * s,
            dec_perm_us: 1720.0 * s,
            hst_perm_us: 1130.0 * s,
            sc_mult_us: REFERENCE_SC_MULT_US * w,
            add_us: 50.0 * s,
            share_us: 1190.0 * s,
            prepare_us: REFERENCE_PREPARE_US * w,
            prepare_coeffs_us: Some(REFERENCE_PREPARE_COEFFS_US * w),
            encode_in_product_us: Some(REFERENCE_ENCODE_IN_PRODUCT_US * w),
            encode_in_product_coeffs_us: in_product_coeffs,
            coeffs_stride_ratio: Some(REFERENCE_STRIDE_RATIO),
            prepare_rows_us: Some(REFERENCE_PREPARE_ROWS_US * w),
            sc_mult_rows_us: Some(REFERENCE_SC_MULT_US * REFERENCE_ROWS_PRODUCT_RATIO * w),
            sc_mult_strided_us: None,
            held_read_us_per_mb: Some(REFERENCE_HELD_READ_US_PER_MB),
            galois_key_bytes: (params.levels() * params.ct_wire_size(0, true)) as u64,
            encrypt_us: Some(ENCRYPT_US * s),
            encrypt_coeffs_us: Some(ENCRYPT_COEFFS_US * s),
            decrypt_us: Some(DECRYPT_US * s),
            decrypt_coeffs_us: Some(DECRYPT_COEFFS_US * s),
            deserialize_us: Some(DESERIALIZE_US * s),
            serialize_us: Some(SERIALIZE_US * s),
            flood_us: Some(FLOOD_US * s),
            flood_chunk_us: Some(FLOOD_CHUNK_US * s),
            flood_last_us: Some(FLOOD_LAST_US * n),
        }
    }

    /// Measures every per-op cost on this machine with real BFV at `params` (median of
    /// `reps`), with the same operations the kernels use, each run on `threads` threads
    /// at once as a layer runs them ([`busy_median_us`]).
    pub fn measure(params: &Params, reps: usize, threads: usize) -> Result<Self> {
        const TERMS: usize = 8;
        let b = Bfv::keygen(params, GaloisSpec::new(vec![1, 2, 3, 4]))?;
        let mut rng = rand::rng();
        let (n, p) = (params.n(), params.p());
        let v = random_slots(n, p, &mut rng);
        let ct = b.encrypt_pk(&b.encode(&v)?)?;
        let ct2 = b.encrypt_pk(&b.encode(&v)?)?;
        let pt = b.prepare(&v)?;
        let terms: Vec<&he::BfvCt> = vec![&ct; TERMS];
        let pts: Vec<&he::BfvPrepared> = vec![&pt; TERMS];
        let h = b.hoist(&ct)?;
        let keys = b.public_keys().galois_bytes() as u64 / 4;
        let shares = on_every_thread(threads, || {
            let mut pool = FloodPool::new(40);
            median_us(reps, || -> Result<_> {
                pool.fill(&b, 1)?;
                let shared = crate::share::share_output(&b, vec![ct.clone()], &mut pool)?;
                Ok(shared.response.len())
            })
        });
        let share_us = shares.iter().sum::<f64>() / shares.len() as f64;
        // share_output's figure above includes refilling its flooding zero (offline).
        let flood = measure_flood(&b, reps, threads);
        let one_flood_us =
            busy_median_us(threads, reps, || b.encrypt_zero_flood(FLOOD_BITS_ONE_CHUNK));
        let rounding = typical_query_rounding(params);
        let encrypt = |v: &[u64], e: Encoding| -> Result<Vec<u8>> {
            Ok(b.serialize(&b.round(&b.encrypt_sym(&b.encode_as(v, e)?)?, rounding)?)?)
        };
        let last = b.switch_to_last(&ct)?;
        let response = b.serialize(&last)?;
        let query = b.serialize(&b.round(&b.encrypt_sym(&b.encode(&v)?)?, rounding)?)?;
        let decrypt = |bytes: &[u8], e: Encoding| -> Result<Vec<u64>> {
            Ok(b.decrypt_as(&b.deserialize(bytes)?, e)?)
        };
        let sc_mult_us = busy_median_us(threads, reps, || b.dot(&terms, &pts)) / TERMS as f64;
        let in_product = measure_encode_in_product(&b, &v, reps, threads)?;
        let held_read_us_per_mb = measure_held_read(&b, &v, reps, threads)?;
        Ok(Self {
            perm_us: busy_median_us(threads, reps, || b.rotate_rows(&ct, 1)),
            dec_perm_us: busy_median_us(threads, reps, || b.hoist(&ct)),
            hst_perm_us: busy_median_us(threads, reps, || b.rotate_hoisted(&h, 3)),
            sc_mult_us,
            add_us: busy_median_us(threads, reps, || b.add(&ct, &ct2)),
            share_us: (share_us - one_flood_us).max(0.0),
            prepare_us: busy_median_us(threads, reps, || b.prepare(&v)),
            prepare_coeffs_us: Some(busy_median_us(threads, reps, || b.prepare_coeffs(&v))),
            encode_in_product_us: Some(in_product.slots),
            encode_in_product_coeffs_us: in_product.coeffs,
            coeffs_stride_ratio: Some(in_product.stride_ratio),
            prepare_rows_us: Some(busy_median_us(threads, reps, || {
                b.prepare_row_constants([v[0], v[1]])
            })),
            sc_mult_rows_us: {
                let row = b.prepare_row_constants([v[0], v[1]])?;
                let rows: Vec<&he::BfvPrepared> = vec![&row; TERMS];
                Some(busy_median_us(threads, reps, || b.dot(&terms, &rows)) / TERMS as f64)
            },
            sc_mult_strided_us: {
                let strided =
                    b.prepare_coeffs_strided(&stride_sample(&v), 0, SAMPLE_STRIDE_LOG2)?;
                let strided: Vec<&he::BfvPrepared> = vec![&strided; TERMS];
                Some(busy_median_us(threads, reps, || b.dot(&terms, &strided)) / TERMS as f64)
            },
            held_read_us_per_mb: Some(held_read_us_per_mb),
            galois_key_bytes: keys,
            encrypt_us: Some(busy_median_us(threads, reps, || {
                encrypt(&v, Encoding::Slots)
            })),
            encrypt_coeffs_us: Some(busy_median_us(threads, reps, || {
                encrypt(&v, Encoding::Coeffs)
            })),
            decrypt_us: Some(busy_median_us(threads, reps, || {
                decrypt(&response, Encoding::Slots)
            })),
            decrypt_coeffs_us: Some(busy_median_us(threads, reps, || {
                decrypt(&response, Encoding::Coeffs)
            })),
            deserialize_us: Some(busy_median_us(threads, reps, || b.deserialize(&query))),
            serialize_us: Some(busy_median_us(threads, reps, || b.serialize(&last))),
            flood_us: Some(flood.one_chunk_us),
            flood_chunk_us: flood.chunk_us,
            flood_last_us: Some(flood.last_us),
        })
    }

    /// A cost absent from an older cache: the reference figure, scaled by this
    /// machine's `prepare_us` against the reference's.
    fn or_reference(&self, v: Option<f64>, reference_us: f64) -> f64 {
        v.unwrap_or(self.prepare_us * reference_us / REFERENCE_PREPARE_US)
    }

    /// The server's (de)serialisation (µs) of one query (`Dir::Up`) or response
    /// ciphertext.
    pub fn wire_us_for(&self, dir: he::Dir) -> f64 {
        match dir {
            he::Dir::Up => self.or_reference(self.deserialize_us, DESERIALIZE_US),
            he::Dir::Down => self.or_reference(self.serialize_us, SERIALIZE_US),
        }
    }

    /// The server's offline work (µs) for one response ciphertext at the top level: its
    /// flooding encryption of zero, with one chunk of noise.
    pub fn flood_us(&self) -> f64 {
        self.or_reference(self.flood_us, FLOOD_US)
    }

    /// The flooding encryption of zero (µs) with `bits` of noise at `level`: the
    /// encryption itself on the line from the last level's cost (one modulus) to the top
    /// level's (its work is per modulus plus a fixed part), and one pass per chunk of
    /// noise ([`he::flood_noise_chunks`]), per modulus.
    pub fn flood_us_at(&self, bits: u32, level: usize, params: &Params) -> f64 {
        let chunk = self.or_reference(self.flood_chunk_us, FLOOD_CHUNK_US);
        let top = params.levels();
        let limbs = top.saturating_sub(level).max(1);
        let base_top = (self.flood_us() - chunk).max(0.0);
        let base = if top > 1 {
            let last = self.or_reference(self.flood_last_us, FLOOD_LAST_US);
            last + (base_top - last) * (limbs - 1) as f64 / (top - 1) as f64
        } else {
            base_top
        };
        base + he::flood_noise_chunks(bits) as f64 * chunk * limbs as f64 / top as f64
    }

    /// The client's work (µs) for one query ciphertext in `encoding` at the top level.
    pub fn encrypt_us_for(&self, encoding: Encoding) -> f64 {
        match encoding {
            Encoding::Slots => self.or_reference(self.encrypt_us, ENCRYPT_US),
            Encoding::Coeffs => self.or_reference(self.encrypt_coeffs_us, ENCRYPT_COEFFS_US),
        }
    }

    /// The client's work (µs) for one response ciphertext in `encoding`.
    pub fn decrypt_us_for(&self, encoding: Encoding) -> f64 {
        match encoding {
            Encoding::Slots => self.or_reference(self.decrypt_us, DECRYPT_US),
            Encoding::Coeffs => self.or_reference(self.decrypt_coeffs_us, DECRYPT_COEFFS_US),
        }
    }

    /// Encoding one weight plaintext in `encoding`, µs.
    pub fn prepare_us_for(&self, encoding: Encoding) -> f64 {
        match encoding {
            Encoding::Slots => self.prepare_us,
            Encoding::Coeffs => {
                self.or_reference(self.prepare_coeffs_us, REFERENCE_PREPARE_COEFFS_US)
            }
        }
    }

    /// Encoding one weight plaintext in `encoding` inside a fused product at `level`
    /// (weights encoded on the fly by a streaming kernel), µs; `limbs` is the share of
    /// the moduli the level keeps, which scales the figures measured at the top only.
    pub fn encode_in_product_us_at(&self, encoding: Encoding, level: usize, limbs: f64) -> f64 {
        match encoding {
            Encoding::Slots => self.encode_in_product_us.unwrap_or(self.prepare_us) * limbs,
            Encoding::Coeffs => self
                .encode_in_product_coeffs_us
                .get(level)
                .copied()
                .flatten()
                .unwrap_or_else(|| self.prepare_us_for(encoding) * limbs),
        }
    }

    /// The price of encoding a coefficient plaintext in X^(2^stride_log2) of a ring of
    /// degree n against a whole plaintext's ([`CostModel::coeffs_stride_ratio`], at the
    /// stride BFV transforms with, [`he::strided_transform_len`]).
    pub fn stride_ratio(&self, n: usize, stride_log2: u32) -> f64 {
        let a = (n / he::strided_transform_len(n, stride_log2).max(1)).trailing_zeros() as usize;
        if a == 0 {
            return 1.0;
        }
        let ratios = self.coeffs_stride_ratio.unwrap_or(REFERENCE_STRIDE_RATIO);
        ratios[a.min(STRIDE_RATIOS - 1)]
    }

    /// One product by a row-constant plaintext inside a fused sum, µs.
    pub fn sc_mult_rows_us(&self) -> f64 {
        self.sc_mult_rows_us
            .unwrap_or(self.sc_mult_us * REFERENCE_ROWS_PRODUCT_RATIO)
    }

    /// One product by a plaintext held as its strided transform inside a fused sum, µs
    /// ([`CostModel::sc_mult_strided_us`]).
    pub fn sc_mult_strided_us(&self) -> f64 {
        self.sc_mult_strided_us.unwrap_or(self.sc_mult_us)
    }

    /// Reading one MB of held weight plaintexts from memory inside fused products, µs
    /// ([`CostModel::held_read_us_per_mb`]).
    pub fn held_read_us_per_mb(&self) -> f64 {
        self.held_read_us_per_mb
            .unwrap_or(REFERENCE_HELD_READ_US_PER_MB)
    }

    /// Encoding one row-constant weight plaintext (the scalar path), µs.
    pub fn prepare_rows_us(&self) -> f64 {
        self.or_reference(self.prepare_rows_us, REFERENCE_PREPARE_ROWS_US)
    }

    /// Reads a model saved by [`CostModel::save`].
    pub fn load(path: &std::path::Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        serde_json::from_str(&text)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// Saves the model as JSON (creating the folder).
    pub fn save(&self, path: &std::path::Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        std::fs::write(path, text)
    }

    /// Predicted server time (ms) of a layer with these counts and response size.
    pub fn server_ms(&self, c: &OpCounts, output_cts: usize) -> f64 {
        (output_cts as f64 * self.share_us
            + c.perm as f64 * self.perm_us
            + c.dec_perm as f64 * self.dec_perm_us
            + c.hst_perm as f64 * self.hst_perm_us
            + c.sc_mult as f64 * self.sc_mult_us
            + c.add.saturating_sub(c.fused_add) as f64 * self.add_us)
            / 1e3
    }
}

/// What a layer is predicted to cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// The server's online operation counts (compute + `share_output`).
    pub counts: OpCounts,
    /// Predicted server time, ms.
    pub server_ms: f64,
    /// Query bytes (client → server).
    pub bytes_up: u64,
    /// Response bytes (server → client).
    pub bytes_down: u64,
    /// Galois keys the client uploads in setup.
    pub galois_keys: usize,
    /// Weight plaintexts the server encodes (NTT form).
    pub plaintexts: u64,
    /// Memory those plaintexts take when held: n·L coefficients of one word each (L the
    /// moduli of the level they are encoded at), four words per modulus for a
    /// row-constant plaintext (the scalar path).
    pub encoded_bytes: u64,
    /// Predicted time (ms) to encode them apart (the held weights' one-time encoding).
    pub encode_ms: f64,
    /// Predicted time (ms) to encode them on the fly, online: inside the fused products
    /// where the layer's kernel streams them ([`LinearLayer::encodes_in_products`],
    /// [`CostModel::encode_in_product_us_at`]), else as `encode_ms`.
    pub encode_on_the_fly_ms: f64,
    /// Predicted time (ms) the products add when the weights are held rather than
    /// encoded in them: held as strided transforms (Cheetah's 1x1 filters), a layer's
    /// products cost [`CostModel::sc_mult_strided_us`] instead of `sc_mult_us`; zero
    /// for any other layer.
    pub held_products_ms: f64,
    /// Predicted offline time (ms, one thread) per query: the flooding encryptions of
    /// zero for its responses.
    pub flood_ms: f64,
    /// Predicted client time (ms, one thread): encrypting and serialising the query,
    /// deserialising and decrypting the response.
    pub client_ms: f64,
}

impl Estimate {
    /// Predicted time (ms, one thread) with the transfer over a link of `bytes_per_s` and
    /// `rtt_ms` (one round trip per query; infinite bandwidth when `bytes_per_s` is 0):
    /// server, client and wire.
    pub fn total_ms(&self, bytes_per_s: f64, rtt_ms: f64) -> f64 {
        let wire = if bytes_per_s > 0.0 {
            (self.bytes_up + self.bytes_down) as f64 / bytes_per_s * 1e3
        } else {
            0.0
        };
        self.server_ms + self.client_ms + wire + rtt_ms
    }
}

/// Runs the layer on the counting backend and prices it. Fails like the real run would
/// (for example when the parameters cannot afford the flooding).
pub fn estimate<L: LinearLayer>(
    layout: &L,
    params: &Params,
    model: &CostModel,
) -> Result<Estimate> {
    let galois = layout.galois();
    let galois_keys = galois.key_count(params.n() / 2);
    let b = Count::real(params, galois);
    b.take();
    let m = layout.encode_weights(&b, &vec![0; layout.weight_len()])?;
    // Every encode or prepare counts one NTT on the counting backend, a row-constant
    // plaintext (the scalar path) a `row_constants`.
    let prepared = b.take();
    let plaintexts = prepared.ntt + prepared.row_constants;
    // A fused sum with a row-constant plaintext runs the scalar path's product (its
    // layer's plaintexts are all of one kind): priced at its own cost.
    let row_share = prepared.row_constants as f64 / plaintexts.max(1) as f64;
    let x = vec![0; layout.input_len()];
    let q = layout.query(&b, &x)?;
    let bytes_up = q.iter().map(|c| b.wire_size(c) as u64).sum();
    let mut pool = layout.flood_pool(params)?;
    // Below the top level, products and encodings touch fewer moduli.
    let level = layout.query_level(params);
    let limbs = (params.levels() - level) as f64 / params.levels() as f64;
    pool.fill(&b, layout.output_cts())?;
    b.take();
    // row-constant plaintexts (the scalar path) are prepared apart either way
    let rows_ms = prepared.row_constants as f64 * model.prepare_rows_us() * limbs;
    // plaintexts in X^(2^a) are transformed in n/2^a points
    let strided = model.stride_ratio(params.n(), layout.weight_stride_log2());
    let encode_ms =
        (prepared.ntt as f64 * model.prepare_us_for(layout.encoding()) * limbs * strided + rows_ms)
            / 1e3;
    // held plaintexts in X^(2^a) keep the n/2^a values of their small transforms
    let held_ratio = strided_held_ratio(params.n(), layout.weight_stride_log2());
    let encoded_bytes = prepared.ntt * prepared_bytes(params, level) / held_ratio
        + prepared.row_constants * row_constants_bytes(params);
    let (resp, _) = layout.respond(&b, &m, &q, &mut pool)?;
    let counts = b.take();
    let bytes_down = resp.iter().map(|c| b.wire_size(c) as u64).sum();
    // held: strided transforms' products at their own cost, and every held plaintext
    // read from memory once per query
    let strided_ms = if held_ratio > 1 {
        counts.sc_mult as f64
            * (1.0 - row_share)
            * (model.sc_mult_strided_us() - model.sc_mult_us)
            * limbs
            / 1e3
    } else {
        0.0
    };
    let read_ms = encoded_bytes as f64 / 1e6 * model.held_read_us_per_mb() / 1e3;
    Ok(Estimate {
        server_ms: (model.server_ms(&counts, 0)
            + counts.sc_mult as f64 * row_share * (model.sc_mult_rows_us() - model.sc_mult_us)
                / 1e3)
            * limbs
            + model.server_ms(&OpCounts::default(), layout.output_cts())
            + (q.len() as f64 * model.wire_us_for(he::Dir::Up) * limbs
                + resp.len() as f64 * model.wire_us_for(he::Dir::Down))
                / 1e3,
        counts,
        bytes_up,
        bytes_down,
        galois_keys,
        plaintexts,
        encoded_bytes,
        encode_ms,
        encode_on_the_fly_ms: if layout.encodes_in_products() {
            (prepared.ntt as f64
                * model.encode_in_product_us_at(layout.encoding(), level, limbs)
                * strided
                + rows_ms)
                / 1e3
        } else {
            encode_ms
        },
        held_products_ms: strided_ms + read_ms,
        flood_ms: layout.output_cts() as f64 * model.flood_us_at(pool.bits(), level, params) / 1e3,
        client_ms: (q.len() as f64 * model.encrypt_us_for(layout.encoding()) * limbs
            + resp.len() as f64 * model.decrypt_us_for(layout.encoding()))
            / 1e3,
    })
}

/// The stride (2^3) of the plaintexts [`CostModel::sc_mult_strided_us`] is measured
/// with: the product reads each held value 2^a times whatever a.
pub const SAMPLE_STRIDE_LOG2: u32 = 3;

/// `v` with every value off the stride 2^[`SAMPLE_STRIDE_LOG2`] set to zero: a
/// polynomial in X^8, as a strided plaintext must be.
pub fn stride_sample(v: &[u64]) -> Vec<u64> {
    v.iter()
        .enumerate()
        .map(|(i, &x)| {
            if i % (1 << SAMPLE_STRIDE_LOG2) == 0 {
                x
            } else {
                0
            }
        })
        .collect()
}

/// Query levels [`CostModel::encode_in_product_coeffs_us`] holds figures for.
pub const MEASURED_LEVELS: usize = 8;

/// Strides [`CostModel::coeffs_stride_ratio`] holds figures for (2^0 to 2^9: at n = 8192
/// down to the shortest transform, 16 points).
pub const STRIDE_RATIOS: usize = 10;

/// The reference [`CostModel::coeffs_stride_ratio`]: `bench ops --params n8192-p28`,
/// level 3 (two moduli), on this project's machine kind (an AMD EPYC with AVX2 and no
/// IFMA), middle of three runs on 2026-12-06. Measured against the same held product in
/// alternating rounds ([`measure_encode_in_product`]), four runs that evening gave these
/// figures within ±0.05 (0.73-0.80 at a = 1, 0.14-0.20 at a = 9); measured before as
/// one fused product of 8 terms less the top level's held product scaled to the level's
/// moduli, single runs gave 0.03 to 0.41 at a = 5.
const REFERENCE_STRIDE_RATIO: [f64; STRIDE_RATIOS] =
    [1.0, 0.70, 0.40, 0.27, 0.21, 0.19, 0.18, 0.17, 0.16, 0.16];

/// What [`measure_encode_in_product`] measures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncodeInProduct {
    /// A slot plaintext at the top level, µs ([`CostModel::encode_in_product_us`]).
    pub slots: f64,
    /// A coefficient plaintext per query level, µs
    /// ([`CostModel::encode_in_product_coeffs_us`]).
    pub coeffs: [Option<f64>; MEASURED_LEVELS],
    /// A coefficient plaintext in X^(2^a) against a whole one, per a
    /// ([`CostModel::coeffs_stride_ratio`]).
    pub stride_ratio: [f64; STRIDE_RATIOS],
}

/// Encoding one weight plaintext inside a fused product ([`he::Backend::dot_encoded`],
/// one output, run on `threads` threads at once): the time a further term adds to the
/// fused product less what it adds to the same product with held plaintexts prepared at
/// the same level ([`he::Backend::dot`], [`he::Backend::dot_coeffs`]). Each is the slope
/// between products of `FEW` and `MANY` terms, so a call's own cost (its scratch, the
/// output's reduction) cancels, as it does in a layer's products of many terms; and the
/// two products are timed in turn, `reps` rounds, the median of the rounds' differences
/// taken, so a machine whose speed drifts moves both alike. Slot encoding at the top level
/// (the slot kernels query there); coefficient encoding at every level a query may take
/// (all but the last), and at the deepest of them for plaintexts in X^(2^a), a = 1 to
/// [`STRIDE_RATIOS`] − 1 (the values of `v` at the multiples of 2^a), against the whole
/// plaintext's figure at that level, timed in the same rounds.
pub fn measure_encode_in_product(
    b: &Bfv,
    v: &[u64],
    reps: usize,
    threads: usize,
) -> Result<EncodeInProduct> {
    const FEW: usize = 4;
    const MANY: usize = 20;
    let params = b
        .params()
        .ok_or_else(|| he::HeError::Engine("no parameters".into()))?;
    // per configuration, the rounds' differences: a fused term less a held term (µs)
    let differences = |encoding: Encoding, level: usize, strides: &[u32]| -> Result<Vec<f64>> {
        let (pt, held) = match encoding {
            Encoding::Slots => (b.encode(v)?, b.prepare(v)?),
            Encoding::Coeffs => (
                b.encode_coeffs_at(v, level)?,
                b.prepare_coeffs_at(v, level)?,
            ),
        };
        let ct = b.encrypt_sym(&pt)?;
        let time = |f: &dyn Fn(usize) -> he::Result<()>| -> Result<f64> {
            let few = Instant::now();
            f(FEW)?;
            let few = few.elapsed().as_secs_f64();
            let many = Instant::now();
            f(MANY)?;
            let many = many.elapsed().as_secs_f64();
            Ok((many - few) * 1e6 / (MANY - FEW) as f64)
        };
        let held_product = |terms: usize| {
            let (cts, pts) = (vec![&ct; terms], vec![&held; terms]);
            match encoding {
                Encoding::Slots => b.dot(&cts, &pts),
                Encoding::Coeffs => b.dot_coeffs(&cts, &pts),
            }
            .map(drop)
        };
        let fused = |stride_log2: u32, terms: usize| {
            let off = (1usize << stride_log2) - 1;
            let fill = move |_: usize, _: usize, out: &mut [u64]| {
                for (k, (o, &x)) in out.iter_mut().zip(v).enumerate() {
                    *o = if k & off == 0 { x } else { 0 };
                }
            };
            let outputs = [vec![&ct; terms]];
            b.dot_encoded_groups(encoding, level, stride_log2, 1, terms, &fill, &outputs)
                .map(drop)
        };
        let round = || -> Result<Vec<f64>> {
            let held = time(&held_product)?;
            strides
                .iter()
                .map(|&a| Ok(time(&|terms| fused(a, terms))? - held))
                .collect()
        };
        round()?; // warm-up
        let mut per_stride: Vec<Vec<f64>> = vec![Vec::new(); strides.len()];
        for _ in 0..reps.max(1) {
            let runs = on_every_thread(threads, round)
                .into_iter()
                .collect::<Result<Vec<_>>>()?;
            for (i, d) in per_stride.iter_mut().enumerate() {
                d.push(runs.iter().map(|r| r[i]).sum::<f64>() / runs.len() as f64);
            }
        }
        Ok(per_stride
            .into_iter()
            .map(|mut d| {
                d.sort_by(|a, b| a.total_cmp(b));
                d[d.len() / 2].max(0.0)
            })
            .collect())
    };
    let slots = differences(Encoding::Slots, 0, &[0])?[0];
    let mut coeffs = [None; MEASURED_LEVELS];
    let deepest = (params.last_level().max(1) - 1).min(MEASURED_LEVELS - 1);
    for (level, c) in coeffs.iter_mut().enumerate().take(deepest) {
        *c = Some(differences(Encoding::Coeffs, level, &[0])?[0]);
    }
    let log_n = params.n().trailing_zeros();
    let strides: Vec<u32> = (0..STRIDE_RATIOS as u32).map(|a| a.min(log_n)).collect();
    let at_deepest = differences(Encoding::Coeffs, deepest, &strides)?;
    coeffs[deepest] = Some(at_deepest[0]);
    let mut stride_ratio = [1.0; STRIDE_RATIOS];
    if at_deepest[0] > 0.0 {
        for (r, d) in stride_ratio.iter_mut().zip(&at_deepest).skip(1) {
            *r = (d / at_deepest[0]).min(1.0);
        }
    }
    Ok(EncodeInProduct {
        slots,
        coeffs,
        stride_ratio,
    })
}

/// The query rounding the client's costs are measured with: one modulus's digit dropped
/// from c0 (eight bits where the chain has one modulus). The layers round their queries
/// as far as their noise affords ([`LinearLayer::query_rounding`]); the cost hardly
/// depends on how far (one mixed-radix conversion per coefficient either way).
pub fn typical_query_rounding(params: &Params) -> he::Rounding {
    let c0 = if params.moduli_at(0).len() > 1 {
        he::Dropped { limbs: 1, bits: 0 }
    } else {
        he::Dropped { limbs: 0, bits: 8 }
    };
    he::Rounding {
        c0,
        c1: he::Dropped::NONE,
    }
}

/// Runs `f` `reps` times (after one warm-up) and returns the median in microseconds.
pub fn median_us<T>(reps: usize, mut f: impl FnMut() -> T) -> f64 {
    std::hint::black_box(f());
    let mut t: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let s = Instant::now();
            std::hint::black_box(f());
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[t.len() / 2]
}

/// Runs `f` on `threads` threads at once (started together) and returns each result.
pub fn on_every_thread<R: Send>(threads: usize, f: impl Fn() -> R + Sync) -> Vec<R> {
    let start = std::sync::Barrier::new(threads.max(1));
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    f()
                })
            })
            .collect();
        start.wait();
        let mine = f();
        let mut all: Vec<R> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
        all.push(mine);
        all
    })
}

/// [`median_us`] of `f` on `threads` threads at once: the mean of their medians (µs).
pub fn busy_median_us<T>(threads: usize, reps: usize, f: impl Fn() -> T + Sync) -> f64 {
    let medians = on_every_thread(threads, || median_us(reps, &f));
    medians.iter().sum::<f64>() / medians.len() as f64
}

/// Plaintext bytes [`measure_held_read`] streams through: beyond the last-level cache of
/// any machine this runs on, as a network's held weights are, and the same whatever the
/// threads (the threads share them).
pub const HELD_READ_SAMPLE_BYTES: usize = 192 << 20;

/// What a fused product adds per MB of held weight plaintexts for reading them from
/// memory (µs): on `threads` threads at once, each thread's fused product over all of
/// [`HELD_READ_SAMPLE_BYTES`] of distinct NTT-form plaintexts (top level), each read once
/// per product as a held layer reads its plaintexts once per query, against the same
/// product over one plaintext repeated (in the cache), per MB. The threads share one set
/// of plaintexts, each starting at its own offset, so that between two threads' reads of
/// a plaintext the others stream the rest of the set through the cache. The median of
/// `reps` on each thread, the mean over the threads; never below zero.
pub fn measure_held_read(b: &Bfv, v: &[u64], reps: usize, threads: usize) -> Result<f64> {
    let params = b
        .params()
        .ok_or_else(|| he::HeError::Engine("no parameters".into()))?;
    let pt = b.prepare(v)?;
    let ct = b.encrypt_pk(&b.encode(v)?)?;
    let mb = prepared_bytes(params, 0) as f64 / 1e6;
    let terms = (HELD_READ_SAMPLE_BYTES as f64 / (mb * 1e6)).ceil().max(1.0) as usize;
    // distinct copies: distinct memory, written here once
    let held: Vec<he::BfvPrepared> = vec![pt.clone(); terms];
    let next = std::sync::atomic::AtomicUsize::new(0);
    let runs = on_every_thread(threads, || {
        let t = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let start = t * terms / threads.max(1);
        let cts: Vec<&he::BfvCt> = vec![&ct; terms];
        let streamed: Vec<&he::BfvPrepared> =
            (0..terms).map(|i| &held[(start + i) % terms]).collect();
        let cached: Vec<&he::BfvPrepared> = vec![&pt; terms];
        let read = median_us(reps, || b.dot(&cts, &streamed));
        let in_cache = median_us(reps, || b.dot(&cts, &cached));
        (read - in_cache) / terms as f64 / mb
    });
    Ok((runs.iter().sum::<f64>() / runs.len().max(1) as f64).max(0.0))
}

/// The flooding encryptions' costs (µs per ciphertext, one thread) that
/// [`CostModel::flood_us_at`] interpolates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloodCosts {
    /// Top level, one chunk of noise.
    pub one_chunk_us: f64,
    /// Each further chunk at the top level (`None` where the top level cannot afford
    /// two).
    pub chunk_us: Option<f64>,
    /// Last level, no flooding noise.
    pub last_us: f64,
}

/// Times flooding encryptions of zero the way a session makes them (median of `reps`,
/// on `threads` threads at once, the mean of their medians): 64 fresh ciphertexts per
/// fill, all kept until the last is made (as [`FloodPool`] keeps them), at the top level
/// with one chunk of noise and with the most chunks the top level affords (up to four;
/// the slope prices a further chunk), and at the last level without noise.
pub fn measure_flood(b: &Bfv, reps: usize, threads: usize) -> FloodCosts {
    let runs = on_every_thread(threads, || measure_flood_alone(b, reps));
    let mean = |f: &dyn Fn(&FloodCosts) -> Option<f64>| {
        let v: Vec<f64> = runs.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    FloodCosts {
        one_chunk_us: mean(&|f| Some(f.one_chunk_us)).unwrap_or(0.0),
        chunk_us: mean(&|f| f.chunk_us),
        last_us: mean(&|f| Some(f.last_us)).unwrap_or(0.0),
    }
}

/// [`measure_flood`] on this thread alone.
fn measure_flood_alone(b: &Bfv, reps: usize) -> FloodCosts {
    let last_level = b.params().map_or(0, |p| p.last_level());
    let fill = |bits: u32, level: usize| {
        median_us(reps, || {
            (0..FLOOD_SAMPLE)
                .map(|_| b.encrypt_zero_flood_at(bits, level))
                .collect::<he::Result<Vec<_>>>()
        }) / FLOOD_SAMPLE as f64
    };
    let one_chunk_us = fill(FLOOD_BITS_ONE_CHUNK, 0);
    // k chunks take bits in (60·(k − 1), 60·k − 1]: 60·k − 20 is safely inside
    let chunk_us = (2..=FLOOD_MOST_CHUNKS).rev().find_map(|k| {
        let bits = k * he::FLOOD_NOISE_CHUNK_BITS - 20;
        b.encrypt_zero_flood(bits)
            .is_ok()
            .then(|| (fill(bits, 0) - one_chunk_us).max(0.0) / (k - 1) as f64)
    });
    FloodCosts {
        one_chunk_us,
        chunk_us,
        last_us: fill(0, last_level),
    }
}

/// Bytes of one row-constant plaintext held in memory (the scalar path): four words
/// per modulus of the top level.
pub fn row_constants_bytes(params: &Params) -> u64 {
    (params.levels() * 4 * 8) as u64
}

/// How many times smaller a held plaintext in X^(2^stride_log2) is than one in NTT form:
/// BFV holds the n/2^a values of its small transform
/// ([`he::Backend::prepare_coeffs_strided`]; 1 without a stride).
pub fn strided_held_ratio(n: usize, stride_log2: u32) -> u64 {
    (n / he::strided_transform_len(n, stride_log2).max(1)).max(1) as u64
}

/// Bytes of one prepared plaintext held in memory: NTT form with the moduli of `level`
/// (slot plaintexts at the top level, coefficient plaintexts at their query level).
pub fn prepared_bytes(params: &Params, level: usize) -> u64 {
    (params.n() * (params.levels() - level.min(params.levels() - 1)) * 8) as u64
}
