//! `Bfv`: the real backend, fhe.rs 0.1.1 (feature `tfhe-ntt`) plus the speed-ups fhe.rs
//! leaves on the table, built on fhe-math's public API:
//!
//! - **Hoisted rotations.** fhe.rs key-switches with one digit per RNS prime and no
//!   special modulus. The automorphism commutes with that digit split, so the inverse NTT
//!   of c1 and the L² NTTs that lift its L digits are done once per ciphertext
//!   ([`Backend::hoist`]); each rotation of it then costs L slot permutations of the
//!   lifted digits ([`fhe_math::rq::Poly::substitute`] in NTT form) and two length-L
//!   inner products with the key (`fhe_math::rq::dot_product`). The key polynomials come
//!   from `EvaluationKey::to_bytes()` and the public `fhe::proto::bfv` types, the c1
//!   halves re-expanded from their seeds exactly as fhe.rs 0.1.1 does it (step j ↔ Galois
//!   exponent 3^j mod 2n, row swap 2n − 1). This mirrors private fhe.rs behaviour: the
//!   `=0.1.1` pin and the equality tests against fhe.rs's own rotation guard it.
//! - **Prepared plaintexts** ([`BfvPrepared`]): centred coefficients (one bit less
//!   noise) in NTT form, encoded from slots directly (the slot permutation and one
//!   inverse NTT mod p, then one forward NTT per modulus), no Shoup companions: every
//!   kernel multiplies through fused products, which never read them. A plaintext
//!   constant on each row (the conv scalar path) is held as its NTT form's four
//!   distinct values per modulus and read through each position's class.
//! - **Its own transforms on AVX-512** ([`crate::ntt`]): the prepares' forward NTTs, the
//!   slot encoding's inverse NTT mod p and the row-constant basis run on tfhe-ntt 0.7,
//!   which has AVX-512 code on stable Rust (fhe-math's tfhe-ntt 0.6 needs nightly for
//!   it), checked equal to fhe-math's transform when the backend is made.
//! - **Fused sums of products** with lazy 128-bit accumulation and one reduction.
//! - **The per-ciphertext path of queries and responses** without NTT round trips:
//!   fhe.rs's symmetric encryption and decryption re-done with the secret key kept in
//!   NTT form per level, plaintexts scaled by Δ in the power basis (fhe.rs's exact
//!   ⌊q·m/p⌋, bit for bit), each polynomial kept in the form its operation made it
//!   ([`Slot`]: a fresh query's c0 and a switched response stay in the power basis,
//!   which rounding and the wire read; the NTT form is computed only if an operation
//!   needs it), the share step's mask, flood and switch in one power-basis pass
//!   ([`Backend::mask_and_switch`]), rounding that packs the wire digits as it rounds,
//!   and no fhe.rs `Ciphertext` on these paths (its constructor clones the top context,
//!   NTT tables included, for every ciphertext below the top level). The equality tests
//!   against fhe.rs's encryption, decryption, `ct + pt` and switch guard them.
//!
//! Every rotation of this backend, single or grouped, goes through the hoisted path;
//! [`Bfv::rotate_rows_fhe`] keeps fhe.rs's own rotation for comparison.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use fhe::bfv::{
    BfvParameters, Ciphertext, Encoding, EvaluationKey, EvaluationKeyBuilder, Plaintext, PublicKey,
    SecretKey,
};
use fhe::proto::bfv::{EvaluationKey as EkProto, PublicKey as PkProto};
use fhe_math::rq::{
    dot_product, traits::TryConvertFrom, Context, Poly, Representation, SubstitutionExponent,
};
use fhe_math::zq::Modulus;
use fhe_traits::{
    DeserializeParametrized, FheDecoder, FheDecrypter, FheEncoder, FheEncrypter, Serialize,
};
use prost::Message;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zeroize::Zeroize;

use crate::backend::{check_runs, check_step, Backend, GaloisSpec, Layout, SlotInfo};
use crate::error::{HeError, Result};
use crate::ntt::{NttPlan, StridedNtt};
use crate::params::Params;
use crate::rounding::{self, Rounding};

/// One polynomial of a ciphertext, in the form the operation that made it had at hand.
#[derive(Clone, Debug)]
enum Slot {
    /// NTT form (what the arithmetic reads).
    Ntt(Poly),
    /// Power basis only (what rounding, the wire form and decryption read); the NTT
    /// form is computed on first use. Fresh queries on the client and responses on the
    /// server go to the wire without ever needing it.
    Power(Arc<Poly>, OnceLock<Poly>),
}

impl Slot {
    fn power_only(p: Poly) -> Self {
        Slot::Power(Arc::new(p), OnceLock::new())
    }

    fn ntt(&self) -> &Poly {
        match self {
            Slot::Ntt(p) => p,
            Slot::Power(p, ntt) => ntt.get_or_init(|| {
                // ciphertext data: public
                crate::ntt::poly::forward(p, true).unwrap_or_else(|_| {
                    let mut q = Poly::clone(p);
                    q.change_representation(Representation::Ntt);
                    q
                })
            }),
        }
    }

    fn power(&self) -> Cow<'_, Poly> {
        match self {
            Slot::Power(p, _) => Cow::Borrowed(p.as_ref()),
            Slot::Ntt(p) => Cow::Owned(crate::ntt::poly::backward(p, true).unwrap_or_else(|_| {
                let mut q = p.clone();
                q.change_representation(Representation::PowerBasis);
                q
            })),
        }
    }

    fn ctx(&self) -> &Arc<Context> {
        match self {
            Slot::Ntt(p) => p.ctx(),
            Slot::Power(p, _) => p.ctx(),
        }
    }
}

/// A ciphertext's two polynomials and its level: what fhe.rs's `Ciphertext` holds,
/// without its constructor's cost (fhe.rs finds the level by cloning the top context,
/// NTT tables included, for every ciphertext below the top level) and with each
/// polynomial's form kept as made (`Slot`). Indexing gives the NTT form. fhe.rs's own
/// operations get a `Ciphertext` from [`Bfv::fhe_ct`].
#[derive(Clone, Debug)]
struct Polys {
    c: [Slot; 2],
    level: usize,
}

impl std::ops::Index<usize> for Polys {
    type Output = Poly;
    fn index(&self, i: usize) -> &Poly {
        self.c[i].ntt()
    }
}

impl Polys {
    fn ntt(a: Poly, b: Poly, level: usize) -> Self {
        Self {
            c: [Slot::Ntt(a), Slot::Ntt(b)],
            level,
        }
    }
    fn ctx(&self) -> &Arc<Context> {
        self.c[0].ctx()
    }
    fn to_vec(&self) -> Vec<Poly> {
        vec![self[0].clone(), self[1].clone()]
    }
}

/// A BFV ciphertext: c0 and c1, each in NTT form or in the power basis (`Slot`).
#[derive(Clone, Debug)]
pub struct BfvCt {
    ct: Polys,
    /// The seed of c1 for a fresh symmetric encryption (its c1 travels as the seed).
    seed: Option<[u8; 32]>,
    /// For a selected ciphertext ([`Backend::select_coeffs`]): the kept coefficient
    /// runs (c0 is zero elsewhere).
    keep: Option<Arc<Vec<Range<usize>>>>,
    /// How its wire form is rounded ([`Backend::round`]); the polynomials already hold
    /// what the receiver rebuilds.
    rounding: Rounding,
    /// The rounded wire bytes of c0 and c1 where [`Backend::round`] packed them (the
    /// digits it computed once for both).
    packed: [Option<Arc<Vec<u8>>>; 2],
    /// fhe.rs's ciphertext of it, made on first use by fhe.rs's own operations.
    fhe: OnceLock<Ciphertext>,
}

impl BfvCt {
    /// A ciphertext with nothing kept beside its polynomials.
    fn new(ct: Polys) -> Self {
        Self {
            ct,
            seed: None,
            keep: None,
            rounding: Rounding::NONE,
            packed: [None, None],
            fhe: OnceLock::new(),
        }
    }

    /// Polynomial `i` in the power basis: the kept copy, or converted.
    fn power_basis(&self, i: usize) -> Cow<'_, Poly> {
        self.ct.c[i].power()
    }
}

/// An encoded plaintext: the plaintext polynomial's n coefficients mod p at a level
/// (slot values are placed at their evaluation points and transformed once mod p; the
/// scaling by Δ = ⌊q/p⌋ happens where the plaintext is used, in the power basis).
#[derive(Clone, Debug)]
pub struct BfvPt {
    coeffs: Arc<Vec<u64>>,
    level: usize,
    /// fhe.rs's plaintext of it, made on first use by fhe.rs's own operations.
    fhe: OnceLock<Plaintext>,
}

/// A plaintext prepared for multiplication: centred coefficients, NTT form; or, for a
/// plaintext constant on each row (the conv scalar path), its NTT form's four distinct
/// values per modulus (`RowBasis`): 128 bytes at n = 8192 instead of 256 KiB; or, for a
/// polynomial in X^(2^a) (a Cheetah 1x1 filter, [`Backend::prepare_coeffs_strided`]),
/// the n/2^a values of its small transform per modulus, each of which its NTT form
/// repeats 2^a times in a row: 2^a times smaller.
#[derive(Clone, Debug)]
pub struct BfvPrepared(PreparedForm);

#[derive(Clone, Debug)]
enum PreparedForm {
    Ntt(Poly),
    /// Per modulus of the top level, the value at each class of NTT position.
    Rows(Vec<[u64; 4]>),
    /// Per modulus of its level, the n/2^log2 values of the NTT form, each filling
    /// 2^log2 neighbouring positions.
    Strided {
        log2: u32,
        limbs: Vec<Vec<u64>>,
    },
}

/// The shared decomposition of a ciphertext for hoisted rotations: the ciphertext, and the L RNS
/// digits of c1 lifted to the whole modulus, in NTT form.
#[derive(Debug)]
pub struct BfvHoisted {
    ct: Polys,
    digits: Vec<Poly>,
}

/// A Galois key in the form the fused hoisted key switch uses: the slot permutation of
/// its automorphism in NTT form, and the key polynomials as flat coefficient arrays
/// (index (digit · L + modulus) · n + slot).
#[derive(Debug)]
struct RotKey {
    inv: Vec<u32>,
    k0: Vec<u64>,
    k1: Vec<u64>,
}

impl RotKey {
    fn new(
        ctx: &Arc<Context>,
        n: usize,
        exponent: usize,
        c0: &[Poly],
        c1: &[Poly],
    ) -> Result<Self> {
        let exp = SubstitutionExponent::new(ctx, exponent)?;
        let l = ctx.moduli().len();
        // The permutation fhe-math's NTT-form substitution applies, read off an index poly.
        let idx: Vec<u64> = (0..l).flat_map(|_| 0..n as u64).collect();
        let probe =
            Poly::try_convert_from(idx, ctx, true, Representation::Ntt)?.substitute(&exp)?;
        let perm: Vec<u32> = probe
            .coefficients()
            .row(0)
            .iter()
            .map(|&v| v as u32)
            .collect();
        // Keys are stored pre-permuted by σ⁻¹, so the online inner loop streams:
        // (Σ_i σ(D_i)·k_i)[t] = (Σ_i D_i·σ⁻¹(k_i))[σ(t)].
        let mut inv = vec![0u32; n];
        for (t, &s) in perm.iter().enumerate() {
            inv[s as usize] = t as u32;
        }
        let flat = |polys: &[Poly]| -> Vec<u64> {
            let mut k = Vec::with_capacity(l * l * n);
            for poly in polys {
                for row in poly.coefficients().outer_iter() {
                    k.extend(inv.iter().map(|&t| row[t as usize]));
                }
            }
            k
        };
        Ok(Self {
            k0: flat(c0),
            k1: flat(c1),
            inv,
        })
    }
}

/// The public material a client uploads in setup: its public key (for response
/// re-randomisation) and the Galois keys it declared, in fhe.rs's seeded wire form.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PublicKeys {
    /// The declared rotations.
    pub galois: GaloisSpec,
    /// fhe.rs `PublicKey::to_bytes()`.
    pub public_key: Vec<u8>,
    /// fhe.rs `EvaluationKey::to_bytes()` (seeded key-switching keys).
    pub galois_keys: Vec<u8>,
}

impl PublicKeys {
    /// Bytes of the Galois keys on the wire.
    pub fn galois_bytes(&self) -> usize {
        self.galois_keys.len()
    }
    /// Bytes of the public key on the wire.
    pub fn public_key_bytes(&self) -> usize {
        self.public_key.len()
    }
}

/// The fhe.rs backend. A client instance holds the secret key; a server instance
/// ([`Bfv::server`]) holds only the public key and Galois keys.
pub struct Bfv {
    params: Params,
    info: SlotInfo,
    sk: Option<SecretKey>,
    pk: Option<PublicKey>,
    galois: GaloisSpec,
    normalized: BTreeSet<usize>,
    rot_keys: BTreeMap<usize, RotKey>,
    column_key: Option<RotKey>,
    fhe_ek: Option<EvaluationKey>,
    public: PublicKeys,
    /// Forward NTT operators of the level-0 moduli (for lifting digits in `hoist`).
    ntt_ops: Vec<NttPlan>,
    /// The NTT mod p, and where slot i sits among its evaluation points (SEAL's and
    /// fhe.rs's batching order), for encoding slots without fhe.rs's `Plaintext`.
    slot_ntt: NttPlan,
    slot_index: Vec<usize>,
    /// The scalar path's basis ([`Backend::prepare_row_constants`]); `None` where the
    /// row indicator is not three-term (then the slot path is used).
    row_basis: Option<RowBasis>,
    /// Per level, Δ·m in the power basis ([`Bfv::scaled`]).
    plain_scale: Vec<PlainScale>,
    /// The client's secret key in NTT form at every level (encryption, decryption).
    secret_ntt: Option<SecretNtt>,
    /// The public key (c0, c1) in NTT form at every level (flooding encryptions of zero).
    pk_levels: Vec<[Poly; 2]>,
}

/// The error variance of fresh encryptions: fhe.rs's `BfvParameters` variance (its
/// builder's default, which helina keeps; the secret key's too).
const ERROR_VARIANCE: usize = 10;

/// fhe.rs's plaintext scaling at one level, per coefficient and modulus:
/// ⌊Q·m/p⌋ = m'·(−p)^{-1} mod Q with m' = (Q mod p)·m mod p (fhe.rs `to_poly` does the
/// same product in the NTT domain: the same polynomial, bit for bit).
#[derive(Debug)]
struct PlainScale {
    q_mod_p: u64,
    /// (−p)^{-1} mod q_i and its Shoup companion, per modulus of the level.
    delta: Vec<(u64, u64)>,
}

/// The secret key in NTT form, one polynomial per level; wiped on drop.
struct SecretNtt(Vec<Poly>);

impl Drop for SecretNtt {
    fn drop(&mut self) {
        self.0.iter_mut().for_each(|p| p.zeroize());
    }
}

impl std::fmt::Debug for SecretNtt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretNtt(..)")
    }
}

/// Plaintexts constant on each row. The polynomial E whose slots are 1 on row 0 and 0
/// on row 1 has non-zero coefficients only at 0, n/4 and 3n/4 (row 0 holds the
/// evaluations at ζ^(3^j), exponents ≡ 1, 3 mod 8; row 1 those ≡ 5, 7 mod 8, told
/// apart by X^{n/4} + X^{3n/4}), so rows (a, b) is m = b + (a − b)·E: three
/// coefficients, and per modulus its NTT form takes one value per class of evaluation
/// point (four classes: the values of X^{n/4} and X^{3n/4} there).
#[derive(Clone, Debug)]
struct RowBasis {
    /// E's coefficients at 0, n/4, 3n/4 (mod p).
    e: [u64; 3],
    /// Per modulus of the top level: each NTT position's class, and per class the NTT
    /// values of X^{n/4} and X^{3n/4}.
    limbs: Vec<(Vec<u8>, Vec<[u64; 2]>)>,
}

impl RowBasis {
    /// Derives the basis (checking the three-term form), or `None`.
    fn new(
        n: usize,
        slot_ntt: &NttPlan,
        slot_index: &[usize],
        ntt_ops: &[NttPlan],
    ) -> Option<Self> {
        if n < 8 {
            return None;
        }
        let at = [0, n / 4, 3 * n / 4];
        let mut e = vec![0u64; n];
        for &i in slot_index.get(..n / 2)? {
            *e.get_mut(i)? = 1;
        }
        slot_ntt.backward(&mut e);
        if e.iter()
            .enumerate()
            .any(|(i, &v)| v != 0 && !at.contains(&i))
        {
            return None;
        }
        let mut limbs = Vec::with_capacity(ntt_ops.len());
        for op in ntt_ops {
            let monomial = |k: usize| {
                let mut v = vec![0u64; n];
                v[k] = 1;
                op.forward(&mut v);
                v
            };
            let (t1, t3) = (monomial(at[1]), monomial(at[2]));
            let mut classes: Vec<[u64; 2]> = Vec::with_capacity(4);
            let mut class = Vec::with_capacity(n);
            for (&a, &b) in t1.iter().zip(&t3) {
                let c = match classes.iter().position(|x| *x == [a, b]) {
                    Some(c) => c,
                    None if classes.len() < 4 => {
                        classes.push([a, b]);
                        classes.len() - 1
                    }
                    None => return None,
                };
                class.push(c as u8);
            }
            limbs.push((class, classes));
        }
        Some(Self {
            e: [e[at[0]], e[at[1]], e[at[2]]],
            limbs,
        })
    }
}

/// The secret key in NTT form at every level (fhe.rs keeps its coefficients private
/// and converts them per encryption and decryption; its wire form carries them).
fn secret_ntt(sk: &SecretKey, params: &Params) -> Result<SecretNtt> {
    let mut bytes = sk.to_bytes();
    let mut proto = fhe::proto::bfv::SecretKey::decode(bytes.as_slice())
        .map_err(|e| HeError::Engine(e.to_string()))?;
    bytes.zeroize();
    let polys = (0..params.levels())
        .map(|level| -> Result<Poly> {
            let ctx = params.fhe.context_at_level(level)?;
            let mut s = Poly::try_convert_from(
                proto.coeffs.as_slice(),
                ctx,
                false,
                Representation::PowerBasis,
            )?;
            s.change_representation(Representation::Ntt);
            Ok(s)
        })
        .collect::<Result<Vec<_>>>();
    proto.coeffs.zeroize();
    Ok(SecretNtt(polys?))
}

/// Signed values as a polynomial in the power basis, each value lifted into every
/// modulus of `ctx` by `lift` (one pass per modulus, so the loop vectorises).
fn lifted_poly(
    ctx: &Arc<Context>,
    values: &[i64],
    lift: impl Fn(&Modulus, i64) -> u64,
) -> Result<Poly> {
    let ops = ctx.moduli_operators();
    let mut rows = ndarray::Array2::<u64>::zeros((ops.len(), values.len()));
    for (mut row, q) in rows.outer_iter_mut().zip(ops) {
        for (r, &v) in row.iter_mut().zip(values) {
            *r = lift(q, v);
        }
    }
    Ok(Poly::try_convert_from(
        rows,
        ctx,
        false,
        Representation::PowerBasis,
    )?)
}

/// Signed values of magnitude below every modulus of `ctx` as a polynomial in the power
/// basis: v lifted to v + q·[v < 0] per modulus, branch-free (fhe-math's conversion
/// reduces each value through a 128-bit Barrett step, several times the cost for the
/// small errors of an encryption).
fn small_poly(ctx: &Arc<Context>, values: &[i64]) -> Result<Poly> {
    lifted_poly(ctx, values, |q, v| {
        (v as u64).wrapping_add(**q & ((v >> 63) as u64))
    })
}

/// Any signed values as a polynomial in the power basis: |v| reduced by each modulus's
/// 64-bit Barrett step and negated where v < 0 (the same residues as fhe-math's
/// conversion, which goes through a 128-bit step per value).
fn signed_poly(ctx: &Arc<Context>, values: &[i64]) -> Result<Poly> {
    lifted_poly(ctx, values, |q, v| {
        let m = q.reduce(v.unsigned_abs());
        if v < 0 {
            q.neg(m)
        } else {
            m
        }
    })
}

/// fhe.rs's error distribution (`Poly::small`: a centred binomial of variance
/// [`ERROR_VARIANCE`]) in the power basis, lifted by [`small_poly`].
fn sample_small<R: rand::RngCore + rand::CryptoRng>(
    ctx: &Arc<Context>,
    n: usize,
    rng: &mut R,
) -> Result<Poly> {
    let mut values = fhe_util::sample_vec_cbd(n, ERROR_VARIANCE, rng)
        .map_err(|e| HeError::Engine(e.to_string()))?;
    let p = small_poly(ctx, &values);
    values.zeroize();
    p
}

/// Bits of flooding noise sampled per pass (one random word per coefficient, lifted to
/// every modulus of the level and shifted into place): a flooding encryption of zero
/// with `bits` of noise takes [`flood_noise_chunks`] passes.
pub const FLOOD_NOISE_CHUNK_BITS: u32 = 60;

/// Passes of [`FLOOD_NOISE_CHUNK_BITS`] that `bits` of flooding noise take (the noise
/// spans `[−2^bits, 2^bits)`, `bits + 1` bits; none for `bits = 0`).
pub fn flood_noise_chunks(bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        (bits + 1).div_ceil(FLOOD_NOISE_CHUNK_BITS)
    }
}

/// c ∈ Z_p lifted centred into Z_q. p < q (Params keeps p 8 bits below every modulus):
/// c and c + (q − p) = q − (p − c) are already reduced. Branch-free and without a 64-bit
/// compare (bit 63 of p/2 − c, wrapping, is set exactly when c > p/2, as c < p < 2^63),
/// so loops over it vectorise with SSE2's 64-bit subtractions, shifts and ANDs.
fn lift_centred(c: u64, p: u64, q: u64) -> u64 {
    c + ((q - p) & ((p / 2).wrapping_sub(c) >> 63).wrapping_neg())
}

/// `row` (n values) = the transform mod q of the polynomial `coeffs` (n values of Z_p,
/// lifted centred) in X^(2^a), by `plan`'s transform of its values at the multiples of
/// 2^a (`small`: scratch of at least n/2^a values).
fn lift_strided(
    coeffs: &[u64],
    plan: &StridedNtt,
    p: u64,
    q: u64,
    small: &mut [u64],
    row: &mut [u64],
) {
    let small = &mut small[..plan.small_len()];
    lift_at_stride(coeffs, p, q, small);
    plan.forward(small, row);
}

/// `small` = the values of `coeffs` (n values of Z_p) at the multiples of
/// n/`small.len()`, lifted centred mod q: the coefficients of V for V(X^(2^a)).
fn lift_at_stride(coeffs: &[u64], p: u64, q: u64, small: &mut [u64]) {
    let stride = coeffs.len() / small.len().max(1);
    for (s, &c) in small.iter_mut().zip(coeffs.iter().step_by(stride.max(1))) {
        *s = lift_centred(c, p, q);
    }
}

/// Products of residues mod `q` a 128-bit sum takes between two reductions:
/// 2^(126 − 2·bits(q)) (at most 2^16), so that the sum stays below 2^127.
fn products_between_reductions(q: u64) -> usize {
    1usize << 126u32.saturating_sub(2 * (64 - q.leading_zeros())).min(16)
}

/// Plaintexts [`Bfv::dot_encoded_fused`] encodes before it runs through the moduli.
const FUSED_BLOCK: usize = 4;

/// [`Bfv::dot_encoded_fused`]'s buffers, kept per thread: the sums of one call are
/// ~0.5-1 MB, and a fresh allocation of that size comes from the kernel as new pages
/// (a page fault and a cleared page each) on every call.
#[derive(Default)]
struct FusedScratch {
    acc: Vec<u128>,
    acc64: Vec<u64>,
    values: Vec<u64>,
    placed: Vec<u64>,
    rows: Vec<u64>,
    /// One plaintext's values at the stride, lifted ([`StridedNtt`]).
    small: Vec<u64>,
}

thread_local! {
    static FUSED_SCRATCH: std::cell::RefCell<FusedScratch> =
        std::cell::RefCell::new(FusedScratch::default());
}

/// One plaintext's row for one modulus in [`Bfv::dot_rows`], by its prepared form.
#[derive(Clone, Copy)]
enum Term<'a> {
    Ntt(&'a [u64]),
    Rows(&'a [u64]),
    Strided(&'a [u64], u32),
}

impl<'a> Term<'a> {
    fn ntt(&self) -> Option<&'a [u64]> {
        match *self {
            Term::Ntt(y) => Some(y),
            _ => None,
        }
    }
    fn rows(&self) -> Option<&'a [u64]> {
        match *self {
            Term::Rows(v) => Some(v),
            _ => None,
        }
    }
    /// A strided row of run length 2^`log2`.
    fn strided(&self, log2: Option<u32>) -> Option<&'a [u64]> {
        match *self {
            Term::Strided(v, a) if Some(a) == log2 => Some(v),
            _ => None,
        }
    }
}

/// acc\[k\] += Σ_g xs\[g\]\[k\]·vs\[g\]\[k >> log2\] (128-bit, no reduction): products
/// with plaintexts held as their strided transforms ([`PreparedForm::Strided`]), four
/// terms per pass as [`multiply_accumulate_block`] does.
fn multiply_accumulate_strided(acc: &mut [u128], xs: &[&[u64]], vs: &[&[u64]], log2: u32) {
    fn fixed<const G: usize>(acc: &mut [u128], xs: &[&[u64]], vs: &[&[u64]], log2: u32) {
        let run = 1usize << log2;
        let len = xs
            .iter()
            .map(|v| v.len())
            .chain(vs.iter().map(|v| v.len() << log2))
            .fold(acc.len(), usize::min);
        let x: [&[u64]; G] = std::array::from_fn(|g| &xs[g][..len]);
        for (r, a_run) in acc[..len].chunks_exact_mut(run).enumerate() {
            let y: [u128; G] = std::array::from_fn(|g| vs[g][r] as u128);
            let at = r * run;
            for (k, a) in a_run.iter_mut().enumerate() {
                let mut s = *a;
                for g in 0..G {
                    s += x[g][at + k] as u128 * y[g];
                }
                *a = s;
            }
        }
    }
    let mut start = 0;
    let terms = xs.len().min(vs.len());
    while start < terms {
        let (x, v) = (&xs[start..], &vs[start..]);
        match terms - start {
            1 => fixed::<1>(acc, x, v, log2),
            2 => fixed::<2>(acc, x, v, log2),
            3 => fixed::<3>(acc, x, v, log2),
            _ => fixed::<4>(acc, x, v, log2),
        }
        start += 4;
    }
}

/// acc\[k\] += Σ_g xs\[g\]\[k\]·ys\[g\]\[k\] (128-bit, no reduction), four terms per
/// pass: each sum is read and written once per four terms, not once per term.
fn multiply_accumulate_block(acc: &mut [u128], xs: &[&[u64]], ys: &[&[u64]]) {
    fn fixed<const G: usize>(acc: &mut [u128], xs: &[&[u64]], ys: &[&[u64]]) {
        let len = xs
            .iter()
            .chain(ys)
            .map(|v| v.len())
            .fold(acc.len(), usize::min);
        let x: [&[u64]; G] = std::array::from_fn(|g| &xs[g][..len]);
        let y: [&[u64]; G] = std::array::from_fn(|g| &ys[g][..len]);
        for (k, a) in acc[..len].iter_mut().enumerate() {
            let mut s = *a;
            for g in 0..G {
                s += x[g][k] as u128 * y[g][k] as u128;
            }
            *a = s;
        }
    }
    match xs.len().min(ys.len()) {
        0 => {}
        1 => fixed::<1>(acc, xs, ys),
        2 => fixed::<2>(acc, xs, ys),
        3 => fixed::<3>(acc, xs, ys),
        4 => fixed::<4>(acc, xs, ys),
        _ => {
            for (x, y) in xs.chunks(4).zip(ys.chunks(4)) {
                multiply_accumulate_block(acc, x, y);
            }
        }
    }
}

/// acc\[k\] += Σ_g xs\[g\]\[k\]·vs\[g\]\[class\[k\]\] (128-bit, no reduction) for
/// row-constant terms, four per pass, which share the positions' classes.
fn multiply_accumulate_rows(acc: &mut [u128], xs: &[&[u64]], vs: &[&[u64]], class: &[u8]) {
    fn fixed<const G: usize>(acc: &mut [u128], xs: &[&[u64]], vs: &[&[u64]], class: &[u8]) {
        let len = xs
            .iter()
            .map(|v| v.len())
            .fold(acc.len().min(class.len()), usize::min);
        let x: [&[u64]; G] = std::array::from_fn(|g| &xs[g][..len]);
        let v: [&[u64]; G] = std::array::from_fn(|g| vs[g]);
        for (k, (a, &c)) in acc[..len].iter_mut().zip(&class[..len]).enumerate() {
            let (c, mut s) = (c as usize, *a);
            for g in 0..G {
                s += x[g][k] as u128 * v[g][c] as u128;
            }
            *a = s;
        }
    }
    match xs.len().min(vs.len()) {
        0 => {}
        1 => fixed::<1>(acc, xs, vs, class),
        2 => fixed::<2>(acc, xs, vs, class),
        3 => fixed::<3>(acc, xs, vs, class),
        4 => fixed::<4>(acc, xs, vs, class),
        _ => {
            for (x, v) in xs.chunks(4).zip(vs.chunks(4)) {
                multiply_accumulate_rows(acc, x, v, class);
            }
        }
    }
}

/// a·b mod m.
fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    ((a as u128 * b as u128) % m as u128) as u64
}

/// Where slot i of the two-row batching layout sits in the bit-reversed evaluation order
/// of the NTT mod p: row 0 holds the evaluations at ζ^(3^j), row 1 at ζ^(−3^j) (ζ a
/// primitive 2n-th root of unity mod p), as in SEAL's and fhe.rs's batch encoders.
fn slot_index(n: usize) -> Vec<usize> {
    let (half, m) = (n / 2, 2 * n);
    let bits = n.trailing_zeros();
    let rev = |i: usize| i.reverse_bits() >> (usize::BITS - bits);
    let mut index = vec![0usize; n];
    let mut pos = 1usize;
    for i in 0..half {
        index[i] = rev((pos - 1) >> 1);
        index[half + i] = rev((m - pos - 1) >> 1);
        pos = pos * 3 % m;
    }
    index
}

impl std::fmt::Debug for Bfv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bfv")
            .field("params", &self.params)
            .field("galois", &self.galois)
            .field("has_secret_key", &self.sk.is_some())
            .finish()
    }
}

fn galois_exponent(step: usize, n: usize) -> usize {
    let m = 2 * n as u128;
    let mut r = 1u128;
    for _ in 0..step {
        r = r * 3 % m;
    }
    r as usize
}

fn malformed(what: &'static str, detail: impl Into<String>) -> HeError {
    HeError::Malformed {
        what,
        detail: detail.into(),
    }
}

use crate::wire::{CtWire, RqWire, REPR_NTT, REPR_NTT_SHOUP, REPR_POWER_BASIS};

/// Decodes a serialized polynomial of `ctx` in representation `repr`, checking its
/// degree, byte length and that every coefficient is reduced.
fn decode_poly(
    bytes: &[u8],
    ctx: &Arc<Context>,
    n: usize,
    repr: i32,
    what: &'static str,
) -> Result<Poly> {
    let rq = RqWire::decode(bytes).map_err(|e| malformed(what, e.to_string()))?;
    if rq.representation != repr {
        return Err(malformed(
            what,
            format!(
                "polynomial representation {} instead of {repr}",
                rq.representation
            ),
        ));
    }
    if rq.degree as usize != n {
        return Err(malformed(
            what,
            format!("polynomial degree {} instead of {n}", rq.degree),
        ));
    }
    let ops: &[Modulus] = ctx.moduli_operators();
    let expected: usize = ops.iter().map(|q| q.serialization_length(n)).sum();
    if rq.coefficients.len() != expected {
        return Err(malformed(
            what,
            format!(
                "{} coefficient bytes instead of {expected}",
                rq.coefficients.len()
            ),
        ));
    }
    let mut coeffs = Vec::with_capacity(n * ops.len());
    let mut at = 0;
    for (qi, &q) in ops.iter().zip(ctx.moduli()) {
        let len = qi.serialization_length(n);
        let v = qi.deserialize_vec(&rq.coefficients[at..at + len]);
        at += len;
        if v.len() != n || v.iter().any(|&c| c >= q) {
            return Err(malformed(what, "coefficient not reduced modulo q"));
        }
        coeffs.extend(v);
    }
    let p = Poly::try_convert_from(coeffs, ctx, true, Representation::PowerBasis)?;
    crate::ntt::poly::forward_as(
        &p,
        if repr == REPR_NTT_SHOUP {
            Representation::NttShoup
        } else {
            Representation::Ntt
        },
        true,
    )
}

/// Decodes and validates a client's public key as the border checks every key: one
/// ciphertext at level 0 of exactly two NTT-form polynomials (or one and a 32-byte seed),
/// degree n, every coefficient reduced, and neither polynomial degenerate — each RNS row
/// of its coefficients must hold at least n/2 distinct values, as a uniformly random
/// polynomial does (this rejects the zero key, which would disable re-randomisation,
/// and constant, periodic or sparse ones).
fn decode_public_key(bytes: &[u8], params: &Params) -> Result<PublicKey> {
    const WHAT: &str = "public key";
    let proto = PkProto::decode(bytes).map_err(|e| malformed(WHAT, e.to_string()))?;
    let ct = proto
        .c
        .as_ref()
        .ok_or_else(|| malformed(WHAT, "no ciphertext"))?;
    if ct.level != 0 {
        return Err(malformed(WHAT, format!("level {} instead of 0", ct.level)));
    }
    let seeded = !ct.seed.is_empty();
    match (ct.c.len(), seeded) {
        (2, false) | (1, true) => {}
        (k, _) => {
            return Err(malformed(
                WHAT,
                format!("{k} polynomials (seeded: {seeded}); expected 2, or 1 and a seed"),
            ))
        }
    }
    if seeded && ct.seed.len() != 32 {
        return Err(malformed(WHAT, "seed is not 32 bytes"));
    }
    let n = params.n();
    let ctx = params.fhe.context_at_level(0)?.clone();
    for b in &ct.c {
        // the distinct-values test runs on the power-basis coefficients (the wire form):
        // the NTT of a constant polynomial looks as spread out as a random one
        let mut poly = decode_poly(b, &ctx, n, REPR_NTT, WHAT)?;
        poly.change_representation(Representation::PowerBasis);
        for row in poly.coefficients().outer_iter() {
            let mut v: Vec<u64> = row.to_vec();
            v.sort_unstable();
            v.dedup();
            if v.len() < n / 2 {
                return Err(malformed(
                    WHAT,
                    format!(
                        "a degenerate polynomial: {} distinct coefficients of {n} in an RNS row",
                        v.len()
                    ),
                ));
            }
        }
    }
    // The polynomials are well-formed: fhe.rs's own decoder now cannot fail or panic.
    PublicKey::from_bytes(bytes, &params.fhe).map_err(|e| malformed(WHAT, e.to_string()))
}

/// The public key's two polynomials in NTT form at every level (from its wire form,
/// already validated: c1 regenerated from its seed as fhe.rs does; lower levels by
/// fhe.rs's divide-and-round switch in the power basis).
fn public_key_levels(bytes: &[u8], params: &Params) -> Result<Vec<[Poly; 2]>> {
    const WHAT: &str = "public key";
    let proto = PkProto::decode(bytes).map_err(|e| malformed(WHAT, e.to_string()))?;
    let ct = proto
        .c
        .as_ref()
        .ok_or_else(|| malformed(WHAT, "no ciphertext"))?;
    let ctx = params.fhe.context_at_level(0)?.clone();
    let n = params.n();
    let c0 = decode_poly(
        ct.c.first()
            .ok_or_else(|| malformed(WHAT, "no polynomial"))?,
        &ctx,
        n,
        REPR_NTT,
        WHAT,
    )?;
    let c1 = match (ct.c.get(1), <[u8; 32]>::try_from(ct.seed.as_slice())) {
        (Some(b), _) => decode_poly(b, &ctx, n, REPR_NTT, WHAT)?,
        (None, Ok(seed)) => Poly::random_from_seed(&ctx, Representation::Ntt, seed),
        (None, Err(_)) => return Err(malformed(WHAT, "neither c1 nor a 32-byte seed")),
    };
    let mut out = vec![[c0.clone(), c1.clone()]];
    let mut power = [c0, c1].map(|mut p| {
        p.change_representation(Representation::PowerBasis);
        p
    });
    for _ in 1..params.levels() {
        for p in &mut power {
            p.switch_down()?;
        }
        out.push(power.clone().map(|mut p| {
            p.change_representation(Representation::Ntt);
            p
        }));
    }
    Ok(out)
}

impl Bfv {
    /// An instance without keys, for encoding and preparing plaintexts only (weights
    /// encoded once per server and shared by every session); anything that needs a key
    /// is [`HeError::MissingKey`].
    pub fn encoder(params: &Params) -> Result<Self> {
        let public = PublicKeys {
            galois: GaloisSpec::none(),
            public_key: Vec::new(),
            galois_keys: Vec::new(),
        };
        Self::from_public(params, public, None)
    }

    /// A client: fresh secret key, public key and the declared Galois keys (from a CSPRNG).
    pub fn keygen(params: &Params, galois: GaloisSpec) -> Result<Self> {
        let mut rng = rand::rng();
        let par = &params.fhe;
        let sk = SecretKey::random(par, &mut rng);
        let pk = PublicKey::new(&sk, &mut rng);
        let half = params.n() / 2;
        let mut builder = EvaluationKeyBuilder::new(&sk)?;
        for s in galois.normalized(half) {
            builder.enable_column_rotation(s)?;
        }
        if galois.column {
            builder.enable_row_rotation()?;
        }
        let ek = builder.build(&mut rng)?;
        let public = PublicKeys {
            galois: galois.clone(),
            public_key: pk.to_bytes(),
            galois_keys: ek.to_bytes(),
        };
        let mut me = Self::from_public(params, public, Some(pk))?;
        me.secret_ntt = Some(secret_ntt(&sk, params)?);
        me.sk = Some(sk);
        me.fhe_ek = Some(ek);
        Ok(me)
    }

    /// A server: the client's public material, validated (public key as in
    /// `decode_public_key`, every Galois key decoded and checked, exactly the declared
    /// ones).
    pub fn server(params: &Params, public: &PublicKeys) -> Result<Self> {
        let pk = decode_public_key(&public.public_key, params)?;
        Self::from_public(params, public.clone(), Some(pk))
    }

    fn from_public(params: &Params, public: PublicKeys, pk: Option<PublicKey>) -> Result<Self> {
        let n = params.n();
        let galois = public.galois.clone();
        let normalized = galois.normalized(n / 2);
        let ctx = params.fhe.context_at_level(0)?.clone();
        let ek = EkProto::decode(public.galois_keys.as_slice())
            .map_err(|e| malformed("Galois keys", e.to_string()))?;
        let mut by_exp: BTreeMap<usize, RotKey> = BTreeMap::new();
        for gk in &ek.gk {
            let ksk = gk
                .ksk
                .as_ref()
                .ok_or_else(|| malformed("Galois keys", "missing key-switching key"))?;
            if ksk.ciphertext_level != 0 || ksk.ksk_level != 0 || ksk.log_base != 0 {
                return Err(malformed("Galois keys", "key not at level 0"));
            }
            let l = ctx.moduli().len();
            if ksk.c0.len() != l {
                return Err(malformed(
                    "Galois keys",
                    format!("{} key parts instead of {l}", ksk.c0.len()),
                ));
            }
            let c0 = ksk
                .c0
                .iter()
                .map(|b| decode_poly(b, &ctx, n, REPR_NTT_SHOUP, "Galois keys"))
                .collect::<Result<Vec<_>>>()?;
            let c1 = if ksk.seed.is_empty() {
                if ksk.c1.len() != l {
                    return Err(malformed("Galois keys", "missing c1 parts"));
                }
                ksk.c1
                    .iter()
                    .map(|b| decode_poly(b, &ctx, n, REPR_NTT_SHOUP, "Galois keys"))
                    .collect::<Result<Vec<_>>>()?
            } else {
                let seed: [u8; 32] = ksk
                    .seed
                    .as_slice()
                    .try_into()
                    .map_err(|_| malformed("Galois keys", "seed is not 32 bytes"))?;
                // fhe.rs 0.1.1 KeySwitchingKey::generate_c1, re-done with its public parts.
                let mut rng = ChaCha8Rng::from_seed(seed);
                (0..l)
                    .map(|_| {
                        let mut seed_i = [0u8; 32];
                        rng.fill(&mut seed_i);
                        Poly::random_from_seed(&ctx, Representation::NttShoup, seed_i)
                    })
                    .collect()
            };
            by_exp.insert(
                gk.exponent as usize,
                RotKey::new(&ctx, n, gk.exponent as usize, &c0, &c1)?,
            );
        }
        let mut rot_keys = BTreeMap::new();
        for &s in &normalized {
            let key = by_exp
                .remove(&galois_exponent(s, n))
                .ok_or_else(|| malformed("Galois keys", format!("no key for step {s}")))?;
            rot_keys.insert(s, key);
        }
        let column_key = if galois.column {
            Some(
                by_exp
                    .remove(&(2 * n - 1))
                    .ok_or_else(|| malformed("Galois keys", "no key for the column rotation"))?,
            )
        } else {
            None
        };
        if !by_exp.is_empty() {
            return Err(malformed(
                "Galois keys",
                format!("{} keys that were not declared", by_exp.len()),
            ));
        }
        let ntt_ops: Vec<NttPlan> = ctx
            .moduli_operators()
            .iter()
            .map(|q| {
                NttPlan::new(q, n).ok_or_else(|| HeError::Engine("no NTT for a modulus".into()))
            })
            .collect::<Result<_>>()?;
        let slot_ntt = Modulus::new(params.p())
            .ok()
            .and_then(|p| NttPlan::new(&p, n))
            .ok_or_else(|| HeError::Engine("no NTT for the plaintext modulus".into()))?;
        let slot_index = slot_index(n);
        let row_basis = RowBasis::new(n, &slot_ntt, &slot_index, &ntt_ops);
        let plain_scale = (0..params.levels())
            .map(|level| -> Result<PlainScale> {
                let p = params.p();
                let ctx = params.fhe.context_at_level(level)?;
                let q_mod_p = ctx.moduli().iter().fold(1u64, |acc, &q| {
                    ((acc as u128 * (q % p) as u128) % p as u128) as u64
                });
                let delta = ctx
                    .moduli_operators()
                    .iter()
                    .map(|q| {
                        let d = q
                            .inv(q.neg(q.reduce(p)))
                            .ok_or_else(|| HeError::Engine("p not invertible mod q".into()))?;
                        Ok((d, q.shoup(d)))
                    })
                    .collect::<Result<_>>()?;
                Ok(PlainScale { q_mod_p, delta })
            })
            .collect::<Result<_>>()?;
        let pk_levels = match pk {
            Some(_) => public_key_levels(&public.public_key, params)?,
            None => Vec::new(),
        };
        Ok(Self {
            info: SlotInfo {
                n,
                p: params.p(),
                layout: Layout::TwoRows,
            },
            params: params.clone(),
            sk: None,
            pk,
            galois,
            normalized,
            rot_keys,
            column_key,
            fhe_ek: None,
            public,
            ntt_ops,
            slot_ntt,
            slot_index,
            row_basis,
            plain_scale,
            secret_ntt: None,
            pk_levels,
        })
    }

    /// The public material to upload (public key and Galois keys).
    pub fn public_keys(&self) -> &PublicKeys {
        &self.public
    }

    /// The parameter set.
    pub fn bfv_params(&self) -> &Params {
        &self.params
    }

    fn par(&self) -> &Arc<BfvParameters> {
        &self.params.fhe
    }

    fn sk(&self) -> Result<&SecretKey> {
        self.sk
            .as_ref()
            .ok_or(HeError::MissingKey { key: "secret key" })
    }

    fn pk(&self) -> Result<&PublicKey> {
        self.pk
            .as_ref()
            .ok_or(HeError::MissingKey { key: "public key" })
    }

    fn wrap(&self, c: Vec<Poly>) -> Result<BfvCt> {
        let level = self.level_of(&c)?;
        let mut it = c.into_iter();
        match (it.next(), it.next()) {
            (Some(c0), Some(c1)) => Ok(BfvCt::new(Polys::ntt(c0, c1, level))),
            _ => Err(HeError::Empty { what: "ciphertext" }),
        }
    }

    /// The level of a ciphertext's polynomials (two, in NTT form, at one level); an
    /// error otherwise.
    fn level_of(&self, c: &[Poly]) -> Result<usize> {
        let moduli = c.first().map_or(0, |p| p.ctx().moduli().len());
        if c.len() != 2
            || c.iter().any(|p| {
                p.representation() != &Representation::Ntt || p.ctx().moduli().len() != moduli
            })
            || moduli == 0
            || moduli > self.params.levels()
        {
            return Err(HeError::Engine(
                "a ciphertext is two NTT-form polynomials of one level".into(),
            ));
        }
        Ok(self.params.levels() - moduli)
    }

    fn top(a: &BfvCt) -> Result<()> {
        Self::whole(a, "an operation at the top level")?;
        let l = a.ct.level;
        if l != 0 {
            return Err(HeError::WrongLevel {
                expected: 0,
                actual: l,
            });
        }
        Ok(())
    }

    /// A whole ciphertext and a plaintext at the same level (fhe.rs would panic).
    fn same_level_pt(a: &BfvCt, b: &BfvPt) -> Result<()> {
        Self::whole(a, "a plaintext addition")?;
        let (l, r) = (a.ct.level, b.level);
        if l != r {
            return Err(HeError::LevelMismatch { left: l, right: r });
        }
        Ok(())
    }

    /// Whole ciphertexts, all at one level, and prepared plaintexts with that level's
    /// moduli (a fused product's operands).
    fn same_level_dot(&self, cts: &[&BfvCt], pts: &[&BfvPrepared]) -> Result<()> {
        let Some(first) = cts.first() else {
            return Ok(());
        };
        let level = first.ct.level;
        let moduli = first.ct.ctx().moduli().len();
        for c in cts {
            Self::whole(c, "a fused product")?;
            let l = c.ct.level;
            if l != level {
                return Err(HeError::LevelMismatch {
                    left: level,
                    right: l,
                });
            }
        }
        for p in pts {
            let m = match &p.0 {
                PreparedForm::Ntt(w) => w.ctx().moduli().len(),
                PreparedForm::Rows(limbs) => limbs.len(),
                PreparedForm::Strided { limbs, .. } => limbs.len(),
            };
            if m != moduli {
                return Err(HeError::LevelMismatch {
                    left: level,
                    right: self.params.levels().saturating_sub(m),
                });
            }
        }
        Ok(())
    }

    fn check_level(&self, level: usize) -> Result<usize> {
        crate::backend::check_level(level, self.params.levels())
    }

    fn whole(a: &BfvCt, operation: &'static str) -> Result<()> {
        match a.keep {
            Some(_) => Err(HeError::Selected { operation }),
            None => Ok(()),
        }
    }

    fn padded(&self, values: &[u64]) -> Result<Vec<u64>> {
        self.check_values(values)?;
        let mut v = values.to_vec();
        v.resize(self.info.n, 0);
        Ok(v)
    }

    /// The plaintext polynomial of n slot values: each at its evaluation point, one
    /// inverse NTT mod p (the polynomial fhe.rs's SIMD encoder makes).
    fn slot_coeffs(&self, values: &[u64]) -> Result<Vec<u64>> {
        self.check_values(values)?;
        let mut coeffs = vec![0u64; self.info.n];
        self.place_slots(values, &mut coeffs);
        Ok(coeffs)
    }

    /// Writes the plaintext polynomial of checked slot values into `coeffs` (n zeros or
    /// a previous polynomial: every position is written): each value at its evaluation
    /// point, one inverse NTT mod p.
    fn place_slots(&self, values: &[u64], coeffs: &mut [u64]) {
        coeffs.fill(0);
        for (&v, &at) in values.iter().zip(&self.slot_index) {
            coeffs[at] = v;
        }
        self.slot_ntt.backward(coeffs);
    }

    /// The slot values of a plaintext polynomial (the inverse of [`Bfv::slot_coeffs`]).
    fn coeffs_to_slots(&self, mut coeffs: Vec<u64>) -> Vec<u64> {
        self.slot_ntt.forward(&mut coeffs);
        self.slot_index.iter().map(|&at| coeffs[at]).collect()
    }

    /// A ciphertext from c0 and c1 in the power basis, switched down `drop` levels (the
    /// divide-and-round steps of fhe.rs's switch, in the power basis), keeping the
    /// power basis.
    fn switched(&self, polys: [Poly; 2], drop: usize) -> Result<BfvCt> {
        let mut power = polys;
        for p in &mut power {
            for _ in 0..drop {
                p.switch_down()?;
            }
        }
        let level = self.params.levels() - power[0].ctx().moduli().len();
        Ok(BfvCt::new(Polys {
            c: power.map(Slot::power_only),
            level,
        }))
    }

    /// Δ·m (⌊Q·m/p⌋ mod Q) of a plaintext in the power basis at its level.
    fn scaled(&self, pt: &BfvPt) -> Result<Poly> {
        let level = self.check_level(pt.level)?;
        let ctx = self.par().context_at_level(level)?;
        let scale = &self.plain_scale[level];
        let p = self.info.p;
        let m: Vec<u64> = pt
            .coeffs
            .iter()
            .map(|&c| ((c as u128 * scale.q_mod_p as u128) % p as u128) as u64)
            .collect();
        let mut rows = ndarray::Array2::<u64>::zeros((scale.delta.len(), self.info.n));
        for ((mut row, q), &(d, d_shoup)) in rows
            .outer_iter_mut()
            .zip(ctx.moduli_operators())
            .zip(&scale.delta)
        {
            for (r, &c) in row.iter_mut().zip(&m) {
                *r = q.mul_shoup(c, d, d_shoup);
            }
        }
        Ok(Poly::try_convert_from(
            rows,
            ctx,
            false,
            Representation::PowerBasis,
        )?)
    }

    /// fhe.rs's ciphertext of the same polynomials (for fhe.rs's own operations).
    fn fhe_ct<'a>(&self, a: &'a BfvCt) -> Result<&'a Ciphertext> {
        if let Some(ct) = a.fhe.get() {
            return Ok(ct);
        }
        let ct = Ciphertext::new(a.ct.to_vec(), self.par())?;
        Ok(a.fhe.get_or_init(|| ct))
    }

    /// A ciphertext from fhe.rs's.
    fn wrap_fhe(&self, ct: Ciphertext) -> Result<BfvCt> {
        self.wrap(ct.to_vec())
    }

    /// fhe.rs's plaintext of the same polynomial (for fhe.rs's own operations).
    fn fhe_plaintext<'a>(&self, pt: &'a BfvPt) -> Result<&'a Plaintext> {
        if let Some(p) = pt.fhe.get() {
            return Ok(p);
        }
        let p = Plaintext::try_encode(
            pt.coeffs.as_slice(),
            Encoding::poly_at_level(pt.level),
            self.par(),
        )?;
        Ok(pt.fhe.get_or_init(|| p))
    }

    /// `a` with Δ·m added to c0 (subtracted when `subtract`).
    fn with_scaled(&self, a: &BfvCt, b: &BfvPt, subtract: bool) -> Result<BfvCt> {
        Self::same_level_pt(a, b)?;
        let m = crate::ntt::poly::forward(&self.scaled(b)?, false)?;
        let c0 = if subtract {
            &a.ct[0] - &m
        } else {
            &a.ct[0] + &m
        };
        self.wrap(vec![c0, a.ct[1].clone()])
    }

    /// Decrypts to the plaintext polynomial's coefficients mod p: phase c0 + c1·s
    /// (s kept in NTT form), then ⌊p·x/q⌉ mod p. One modulus (responses are at the last
    /// level) is scaled here exactly as fhe.rs's scaler does; more go through fhe.rs.
    fn decrypt_coeffs_raw(&self, ct: &BfvCt) -> Result<Vec<u64>> {
        let level = ct.ct.level;
        let ctx = ct.ct.ctx();
        let secret = self
            .secret_ntt
            .as_ref()
            .ok_or(HeError::MissingKey { key: "secret key" })?;
        if ctx.moduli().len() != 1 || level >= secret.0.len() {
            let pt = self.sk()?.try_decrypt(self.fhe_ct(ct)?)?;
            return Ok(Vec::<u64>::try_decode(&pt, Encoding::poly())?);
        }
        let mut phase = ct.ct[1].clone();
        phase.disallow_variable_time_computations();
        phase *= &secret.0[level];
        let mut phase = crate::ntt::poly::backward(&phase, false)?;
        phase += ct.power_basis(0).as_ref();
        let q = &ctx.moduli_operators()[0];
        let (p, half) = (self.info.p, (**q / 2) as u128);
        // ⌊(p·x + ⌊q/2⌋)/q⌋ for x in [0, q) (no ties: q is an odd prime above p), in
        // constant time: the remainder by Barrett, the quotient by exact division (times
        // q^{-1} mod 2^128); it is at most p.
        let q_inv = (0..7).fold(**q as u128, |inv, _| {
            inv.wrapping_mul(2u128.wrapping_sub((**q as u128).wrapping_mul(inv)))
        });
        let out = phase
            .coefficients()
            .row(0)
            .iter()
            .map(|&x| {
                let num = p as u128 * x as u128 + half;
                let quotient = (num - q.reduce_u128(num) as u128).wrapping_mul(q_inv) as u64;
                quotient - p * u64::from(quotient >= p)
            })
            .collect();
        Ok(out)
    }

    /// A prepared plaintext's NTT form (row constants expanded).
    fn prepared_ntt<'a>(&self, pt: &'a BfvPrepared) -> Result<Cow<'a, Poly>> {
        match &pt.0 {
            PreparedForm::Ntt(w) => Ok(Cow::Borrowed(w)),
            PreparedForm::Rows(limbs) => {
                let basis = self
                    .row_basis
                    .as_ref()
                    .ok_or_else(|| HeError::Engine("row constants without a row basis".into()))?;
                Ok(Cow::Owned(self.ntt_rows(0, |row, _, limb| {
                    let (class, _) = &basis.limbs[limb];
                    for (r, &c) in row.iter_mut().zip(class) {
                        *r = limbs[limb][c as usize];
                    }
                })?))
            }
            PreparedForm::Strided { log2, limbs } => {
                let level = self.params.levels().saturating_sub(limbs.len());
                Ok(Cow::Owned(self.ntt_rows(level, |row, _, limb| {
                    for (run, &v) in row.chunks_exact_mut(1 << log2).zip(&limbs[limb]) {
                        run.fill(v);
                    }
                })?))
            }
        }
    }

    /// Polynomial `i` of Σ_k cts[k]·ws[k] (NTT-form plaintexts) on IFMA lanes, each
    /// product reduced as it is added ([`NttPlan::mul_accumulate_ifma`]); `None` where
    /// a modulus of the level has no IFMA plan (the caller's 128-bit sums are faster
    /// there).
    fn dot_ifma(&self, cts: &[&BfvCt], ws: &[&Poly], i: usize) -> Result<Option<Poly>> {
        let ctx = cts[0].ct.ctx().clone();
        let (limbs, n) = (ctx.moduli().len(), self.info.n);
        if limbs > self.ntt_ops.len() || !self.ntt_ops[..limbs].iter().all(NttPlan::has_ifma) {
            return Ok(None);
        }
        let not_contiguous = || HeError::Engine("polynomial rows not contiguous".into());
        let mut arr = ndarray::Array2::<u64>::zeros((limbs, n));
        for (c, w) in cts.iter().zip(ws) {
            let x = c.ct[i]
                .coefficients()
                .to_slice()
                .ok_or_else(not_contiguous)?;
            let y = w.coefficients().to_slice().ok_or_else(not_contiguous)?;
            if x.len() < limbs * n || y.len() < limbs * n {
                return Err(not_contiguous());
            }
            for (j, mut out) in arr.outer_iter_mut().enumerate() {
                let out = out.as_slice_mut().ok_or_else(not_contiguous)?;
                self.ntt_ops[j].mul_accumulate_ifma(
                    out,
                    &x[j * n..(j + 1) * n],
                    &y[j * n..(j + 1) * n],
                );
            }
        }
        Ok(Some(Poly::try_convert_from(
            arr,
            &ctx,
            true,
            Representation::Ntt,
        )?))
    }

    /// Polynomial `i` of Σ_k cts[k]·pts[k] where some plaintexts are row constants:
    /// per modulus and NTT position, 128-bit products accumulated and reduced every
    /// 2^(126 − 2·bits(q)) terms (so the sum stays below 2^127), a row constant read
    /// through its position's class. Terms go in blocks of up to [`FUSED_BLOCK`] of one
    /// kind, each sum read and written once per block.
    fn dot_rows(&self, cts: &[&BfvCt], pts: &[&BfvPrepared], i: usize) -> Result<Poly> {
        let rows = pts.iter().any(|p| matches!(p.0, PreparedForm::Rows(_)));
        let basis = match &self.row_basis {
            Some(b) => Some(b),
            None if rows => {
                return Err(HeError::Engine("row constants without a row basis".into()));
            }
            None => None,
        };
        let ctx = cts[0].ct.ctx().clone();
        let n = self.info.n;
        let not_contiguous = || HeError::Engine("polynomial rows not contiguous".into());
        let mut arr = ndarray::Array2::<u64>::zeros((ctx.moduli().len(), n));
        let mut acc = vec![0u128; n];
        for (j, (mut out, q)) in arr.outer_iter_mut().zip(ctx.moduli_operators()).enumerate() {
            let class = basis.map_or(&[][..], |b| &b.limbs[j].0[..]);
            let batch = products_between_reductions(**q);
            let per_block = FUSED_BLOCK.min(batch);
            acc.fill(0);
            let mut since_reduced = 0;
            let terms = cts.len().min(pts.len());
            for start in (0..terms).step_by(per_block) {
                let end = (start + per_block).min(terms);
                if since_reduced + (end - start) > batch {
                    acc.iter_mut().for_each(|a| *a = q.reduce_u128(*a) as u128);
                    since_reduced = 0;
                }
                since_reduced += end - start;
                let xs = cts[start..end]
                    .iter()
                    .map(|c| {
                        let x = c.ct[i]
                            .coefficients()
                            .to_slice()
                            .ok_or_else(not_contiguous)?;
                        x.get(j * n..(j + 1) * n).ok_or_else(not_contiguous)
                    })
                    .collect::<Result<Vec<&[u64]>>>()?;
                // each plaintext's row for this modulus, of its kind
                let terms_j = pts[start..end]
                    .iter()
                    .map(|p| match &p.0 {
                        PreparedForm::Ntt(w) => w
                            .coefficients()
                            .to_slice()
                            .and_then(|w| w.get(j * n..(j + 1) * n))
                            .map(Term::Ntt)
                            .ok_or_else(not_contiguous),
                        PreparedForm::Rows(limbs) => limbs
                            .get(j)
                            .map(|v| Term::Rows(v.as_slice()))
                            .ok_or_else(not_contiguous),
                        PreparedForm::Strided { log2, limbs } => limbs
                            .get(j)
                            .filter(|v| v.len() << log2 == n)
                            .map(|v| Term::Strided(v.as_slice(), *log2))
                            .ok_or_else(not_contiguous),
                    })
                    .collect::<Result<Vec<Term>>>()?;
                let ntt: Option<Vec<&[u64]>> = terms_j.iter().map(Term::ntt).collect();
                let rows: Option<Vec<&[u64]>> = terms_j.iter().map(Term::rows).collect();
                let log2 = match terms_j.first() {
                    Some(Term::Strided(_, a)) => Some(*a),
                    _ => None,
                };
                let strided: Option<Vec<&[u64]>> =
                    terms_j.iter().map(|t| t.strided(log2)).collect();
                match (ntt, rows, strided, log2) {
                    (Some(ys), _, _, _) => multiply_accumulate_block(&mut acc, &xs, &ys),
                    (_, Some(vs), _, _) => multiply_accumulate_rows(&mut acc, &xs, &vs, class),
                    (_, _, Some(vs), Some(a)) => multiply_accumulate_strided(&mut acc, &xs, &vs, a),
                    // a block mixing kinds: term by term
                    _ => {
                        for (x, t) in xs.iter().zip(&terms_j) {
                            match *t {
                                Term::Ntt(y) => multiply_accumulate_block(&mut acc, &[x], &[y]),
                                Term::Rows(v) => {
                                    multiply_accumulate_rows(&mut acc, &[x], &[v], class)
                                }
                                Term::Strided(v, a) => {
                                    multiply_accumulate_strided(&mut acc, &[x], &[v], a)
                                }
                            }
                        }
                    }
                }
            }
            for (o, &a) in out.iter_mut().zip(&acc) {
                *o = q.reduce_u128(a);
            }
        }
        Ok(Poly::try_convert_from(
            arr,
            &ctx,
            true,
            Representation::Ntt,
        )?)
    }

    /// [`Backend::dot_encoded_groups`] (and, with one group, [`Backend::dot_encoded`]),
    /// fused: the plaintexts go in blocks of [`FUSED_BLOCK`] terms, every group's at
    /// once. A block's values are checked (slot values placed and transformed mod p, as
    /// [`Bfv::slot_coeffs`]); then, per modulus, each is lifted centred and transformed
    /// once (one NTT of one row), and the block's products with every output's
    /// ciphertexts are added into that modulus's 128-bit sums in one pass, so each sum
    /// is read and written once per block rather than once per plaintext (sums reduced
    /// every 2^(126 − 2·bits(q)) terms, as [`Bfv::dot_rows`]). The groups share the
    /// ciphertexts: each ciphertext row is read from memory once per block for all of
    /// them (a layer's query ciphertexts are tens of MB, more than the caches hold, and
    /// a group at a time streamed them from memory once per group). No more than a
    /// block of plaintexts per group is held, and the sums live in a per-thread buffer
    /// (a fresh one would fault in new pages on every call). The same sums as
    /// [`Bfv::prepare_centred`] per plaintext and one `dot` per group and output.
    ///
    /// With `stride_log2` > 0 each plaintext is a polynomial in X^(2^stride_log2) (checked):
    /// its values there are lifted and transformed in n/2^stride_log2 points and spread
    /// ([`StridedNtt`]), the same rows.
    #[allow(clippy::too_many_arguments)]
    fn dot_encoded_fused(
        &self,
        encoding: crate::backend::Encoding,
        level: usize,
        stride_log2: u32,
        groups: usize,
        terms: usize,
        fill: &(dyn Fn(usize, usize, &mut [u64]) + Sync),
        cts: &[Vec<&BfvCt>],
    ) -> Result<Vec<Vec<BfvCt>>> {
        crate::backend::check_encoded_level(encoding, level)?;
        crate::backend::check_stride_encoding(encoding, stride_log2)?;
        self.check_level(level)?;
        let first = match cts.first().and_then(|c| c.first()) {
            Some(c) if terms > 0 && groups > 0 => *c,
            _ => {
                return Err(HeError::Empty {
                    what: "dot_encoded",
                })
            }
        };
        for c in cts {
            if c.len() != terms {
                return Err(HeError::WrongLength {
                    expected: terms,
                    actual: c.len(),
                });
            }
            for ct in c {
                Self::whole(ct, "a fused product")?;
                if ct.ct.level != level {
                    return Err(HeError::LevelMismatch {
                        left: level,
                        right: ct.ct.level,
                    });
                }
            }
        }
        let ctx = first.ct.ctx().clone();
        let ops = ctx.moduli_operators();
        let (limbs, n, p) = (ops.len(), self.info.n, self.info.p);
        let outs = cts.len();
        let not_contiguous = || HeError::Engine("polynomial rows not contiguous".into());
        // The ciphertexts' rows, checked once: index ((output · terms + term) · 2 + poly).
        let mut xs: Vec<&[u64]> = Vec::with_capacity(outs * terms * 2);
        for c in cts {
            for ct in c {
                for poly in 0..2 {
                    let x = ct.ct[poly]
                        .coefficients()
                        .to_slice()
                        .ok_or_else(not_contiguous)?;
                    xs.push(x.get(..limbs * n).ok_or_else(not_contiguous)?);
                }
            }
        }
        let batch: Vec<usize> = ops
            .iter()
            .map(|q| products_between_reductions(**q))
            .collect();
        let strided = self.strided_plans(ops, stride_log2);
        // Taken out for the call (a nested call on this thread would find it empty and
        // allocate its own) and put back after it.
        let mut scratch = FUSED_SCRATCH.with_borrow_mut(std::mem::take);
        let out = (|| -> Result<Vec<Vec<BfvCt>>> {
            // The sums: index (((group · outs + output) · 2 + polynomial) · limbs
            // + modulus) · n + position. Per modulus, the sums are reduced 64-bit words
            // where its products run on IFMA lanes (each product reduced as it is
            // added), else 128-bit words.
            let ifma: Vec<bool> = (0..limbs).map(|j| self.ntt_ops[j].has_ifma()).collect();
            let sums = groups * outs * 2 * limbs * n;
            let wide = if ifma.iter().all(|&f| f) { 0 } else { sums };
            let narrow = if ifma.iter().any(|&f| f) { sums } else { 0 };
            let at = |g: usize, t: usize, poly: usize, j: usize| {
                (((g * outs + t) * 2 + poly) * limbs + j) * n
            };
            scratch.acc.clear();
            scratch.acc.resize(wide, 0);
            scratch.acc64.clear();
            scratch.acc64.resize(narrow, 0);
            // values and rows: index (group · FUSED_BLOCK + term in the block) · n
            scratch.values.clear();
            scratch.values.resize(groups * FUSED_BLOCK * n, 0);
            scratch.placed.clear();
            scratch.placed.resize(n, 0);
            scratch.rows.clear();
            scratch.rows.resize(groups * FUSED_BLOCK * n, 0);
            scratch.small.clear();
            scratch.small.resize(n, 0);
            let FusedScratch {
                acc,
                acc64,
                values,
                placed,
                rows,
                small,
            } = &mut scratch;
            // Terms per block: at most FUSED_BLOCK, and never more than a modulus's 128-bit
            // sums take between two reductions.
            let per_block = batch.iter().copied().fold(FUSED_BLOCK, usize::min).max(1);
            let mut since_reduced = vec![0usize; limbs];
            for start in (0..terms).step_by(per_block) {
                let block = per_block.min(terms - start);
                // A block of plaintexts per group, checked and in the coefficient basis
                // mod p.
                for g in 0..groups {
                    let vs = values[g * FUSED_BLOCK * n..].chunks_exact_mut(n);
                    for (k, v) in vs.take(block).enumerate() {
                        v.fill(0);
                        fill(g, start + k, v);
                        self.check_values(v)?;
                        crate::backend::check_stride(v, stride_log2)?;
                        if encoding == crate::backend::Encoding::Slots {
                            self.place_slots(v, placed);
                            v.copy_from_slice(placed);
                        }
                    }
                }
                // Per modulus: the block's rows lifted centred and transformed, then each
                // output polynomial's sums read and written once for the whole block.
                for (j, q) in ops.iter().enumerate() {
                    if !ifma[j] && since_reduced[j] + block > batch[j] {
                        since_reduced[j] = 0;
                        for g in 0..groups {
                            for t in 0..outs {
                                for poly in 0..2 {
                                    acc[at(g, t, poly, j)..][..n]
                                        .iter_mut()
                                        .for_each(|a| *a = q.reduce_u128(*a) as u128);
                                }
                            }
                        }
                    }
                    since_reduced[j] += block;
                    for g in 0..groups {
                        let vs = values[g * FUSED_BLOCK * n..].chunks_exact(n);
                        let rs = rows[g * FUSED_BLOCK * n..].chunks_exact_mut(n);
                        for (coeffs, r) in vs.zip(rs).take(block) {
                            match &strided {
                                Some(plans) => {
                                    lift_strided(coeffs, &plans[j], p, **q, small, r);
                                }
                                None => {
                                    for (r, &c) in r.iter_mut().zip(coeffs) {
                                        *r = lift_centred(c, p, **q);
                                    }
                                    self.ntt_ops[j].forward(r);
                                }
                            }
                        }
                    }
                    // each group's transformed block
                    let ys: Vec<Vec<&[u64]>> = (0..groups)
                        .map(|g| {
                            rows[g * FUSED_BLOCK * n..]
                                .chunks_exact(n)
                                .take(block)
                                .collect()
                        })
                        .collect();
                    for t in 0..outs {
                        for poly in 0..2 {
                            let x: Vec<&[u64]> = (start..start + block)
                                .map(|i| &xs[(t * terms + i) * 2 + poly][j * n..(j + 1) * n])
                                .collect();
                            // every group's sums with the same rows while they are in cache
                            for (g, ys) in ys.iter().enumerate() {
                                let a = at(g, t, poly, j);
                                if ifma[j] {
                                    let a = &mut acc64[a..a + n];
                                    for (x, y) in x.iter().zip(ys) {
                                        self.ntt_ops[j].mul_accumulate_ifma(a, x, y);
                                    }
                                } else {
                                    multiply_accumulate_block(&mut acc[a..a + n], &x, ys);
                                }
                            }
                        }
                    }
                }
            }
            (0..groups)
                .map(|g| {
                    (0..outs)
                        .map(|t| {
                            let polys = (0..2)
                                .map(|poly| {
                                    let mut arr = ndarray::Array2::<u64>::zeros((limbs, n));
                                    for (j, (mut out, q)) in
                                        arr.outer_iter_mut().zip(ops).enumerate()
                                    {
                                        let a = at(g, t, poly, j);
                                        if ifma[j] {
                                            for (o, &s) in out.iter_mut().zip(&acc64[a..a + n]) {
                                                *o = s;
                                            }
                                        } else {
                                            for (o, &s) in out.iter_mut().zip(&acc[a..a + n]) {
                                                *o = q.reduce_u128(s);
                                            }
                                        }
                                    }
                                    Ok(Poly::try_convert_from(
                                        arr,
                                        &ctx,
                                        true,
                                        Representation::Ntt,
                                    )?)
                                })
                                .collect::<Result<Vec<_>>>()?;
                            self.wrap(polys)
                        })
                        .collect()
                })
                .collect()
        })();
        FUSED_SCRATCH.with_borrow_mut(|s| *s = scratch);
        out
    }

    /// A prepared plaintext from n reduced plaintext coefficients, lifted centred into
    /// (−p/2, p/2] (never the unsigned lift of p − 1), in NTT form at `level`. Each RNS
    /// row is lifted and transformed directly with the context's own NTT operators.
    fn prepare_centred(&self, coeffs: &[u64], level: usize) -> Result<BfvPrepared> {
        self.check_level(level)?;
        let p = self.info.p;
        let w = self.ntt_rows(level, |row, q, limb| {
            for (r, &c) in row.iter_mut().zip(coeffs) {
                *r = lift_centred(c, p, q);
            }
            self.ntt_ops[limb].forward(row);
        })?;
        Ok(BfvPrepared(PreparedForm::Ntt(w)))
    }

    /// [`Bfv::prepare_centred`] of a polynomial in X^(2^stride_log2) (checked), each row
    /// transformed in n/2^stride_log2 points ([`StridedNtt`]) where the moduli allow.
    fn prepare_centred_strided(
        &self,
        coeffs: &[u64],
        level: usize,
        stride_log2: u32,
    ) -> Result<BfvPrepared> {
        crate::backend::check_stride(coeffs, stride_log2)?;
        let ctx = self.par().context_at_level(level)?;
        let Some(plans) = self.strided_plans(ctx.moduli_operators(), stride_log2) else {
            return self.prepare_centred(coeffs, level);
        };
        let p = self.info.p;
        if plans.iter().all(|plan| plan.runs()) {
            // held compact: the small transforms only, spread as products read them
            let log2 = plans.first().map_or(0, |plan| plan.log2());
            let limbs = plans
                .iter()
                .zip(ctx.moduli())
                .map(|(plan, &q)| {
                    let mut small = vec![0u64; plan.small_len()];
                    lift_at_stride(coeffs, p, q, &mut small);
                    plan.forward_small(&mut small);
                    small
                })
                .collect();
            return Ok(BfvPrepared(PreparedForm::Strided { log2, limbs }));
        }
        let mut small = vec![0u64; self.info.n];
        let w = self.ntt_rows(level, |row, q, limb| {
            lift_strided(coeffs, &plans[limb], p, q, &mut small, row);
        })?;
        Ok(BfvPrepared(PreparedForm::Ntt(w)))
    }

    /// The [`StridedNtt`]s of these moduli (the first of the chain) for polynomials in
    /// X^(2^stride_log2), at the largest stride the ring affords
    /// ([`crate::strided_transform_len`]); `None` for no stride or where a modulus has none.
    fn strided_plans(&self, moduli: &[Modulus], stride_log2: u32) -> Option<Vec<Arc<StridedNtt>>> {
        let n = self.info.n;
        let a = (n / crate::ntt::strided_transform_len(n, stride_log2)).trailing_zeros();
        if a == 0 {
            return None;
        }
        crate::ntt::strided(moduli, n, a, self.ntt_ops.get(..moduli.len())?)
    }

    /// The NTT-form polynomial at `level` whose row of each modulus q (limb i)
    /// `fill(row, q, i)` writes.
    fn ntt_rows(&self, level: usize, mut fill: impl FnMut(&mut [u64], u64, usize)) -> Result<Poly> {
        let ctx = self.par().context_at_level(level)?;
        let n = self.info.n;
        let ops = ctx.moduli();
        let mut arr = ndarray::Array2::<u64>::zeros((ops.len(), n));
        let rows = arr
            .as_slice_mut()
            .ok_or_else(|| HeError::Engine("polynomial rows not contiguous".into()))?;
        for (limb, (row, &q)) in rows.chunks_exact_mut(n).zip(ops).enumerate() {
            fill(row, q, limb);
        }
        Ok(Poly::try_convert_from(
            arr,
            ctx,
            false,
            Representation::Ntt,
        )?)
    }

    /// A rounded ciphertext on the wire ([`crate::rounding`]): c0 (at the kept
    /// coefficients when selected) and c1 (or the seed) as bit-packed digits.
    fn serialize_rounded(&self, a: &BfvCt) -> Result<Vec<u8>> {
        let level = a.ct.level;
        let q = self.params.moduli_at(level);
        let n = self.info.n;
        let at: Vec<usize> = match &a.keep {
            Some(k) => k.iter().flat_map(|r| r.clone()).collect(),
            None => (0..n).collect(),
        };
        let rows = |i: usize| a.power_basis(i);
        let packed = |i: usize, d, at: &[usize]| -> Result<Vec<u8>> {
            match &a.packed[i] {
                Some(bytes) => Ok(bytes.to_vec()),
                None => rounding::pack(q, rows(i).coefficients(), d, at),
            }
        };
        let mut c = vec![packed(0, a.rounding.c0, &at)?];
        let seed = if let Some(seed) = a.seed {
            seed.to_vec()
        } else {
            let all: Vec<usize> = (0..n).collect();
            c.push(packed(1, a.rounding.c1, &all)?);
            vec![]
        };
        Ok(CtWire {
            c,
            seed,
            level: level as u32,
            keep: a
                .keep
                .iter()
                .flat_map(|k| k.iter().flat_map(|r| [r.start as u32, r.end as u32]))
                .collect(),
            c0_limbs: a.rounding.c0.limbs,
            c0_bits: a.rounding.c0.bits,
            c1_limbs: a.rounding.c1.limbs,
            c1_bits: a.rounding.c1.bits,
        }
        .encode_to_vec())
    }

    /// Decodes and validates a rounded ciphertext (the rounding in range for its level,
    /// runs sorted and disjoint, exact byte lengths, every digit in range).
    fn deserialize_rounded(&self, proto: &CtWire) -> Result<BfvCt> {
        const WHAT: &str = "rounded ciphertext";
        let n = self.info.n;
        let level = proto.level as usize;
        let q = self.params.moduli_at(level);
        let r = Rounding {
            c0: rounding::Dropped {
                limbs: proto.c0_limbs,
                bits: proto.c0_bits,
            },
            c1: rounding::Dropped {
                limbs: proto.c1_limbs,
                bits: proto.c1_bits,
            },
        };
        let seeded = !proto.seed.is_empty();
        if proto.c.len() != if seeded { 1 } else { 2 } || (seeded && !r.c1.is_none()) {
            return Err(malformed(
                WHAT,
                "expected two polynomials, or c0, a seed and c1 not rounded",
            ));
        }
        if proto.keep.len() & 1 == 1 || proto.keep.len() > 2 * n {
            return Err(malformed(WHAT, format!("{} run bounds", proto.keep.len())));
        }
        let keep: Vec<Range<usize>> = proto
            .keep
            .chunks_exact(2)
            .map(|r| r[0] as usize..r[1] as usize)
            .collect();
        if !keep.is_empty() {
            check_runs(&keep, n).map_err(|e| malformed(WHAT, e.to_string()))?;
        }
        let at: Vec<usize> = if keep.is_empty() {
            (0..n).collect()
        } else {
            keep.iter().flat_map(|r| r.clone()).collect()
        };
        let ctx = self.par().context_at_level(level)?.clone();
        // Responses (last level) keep their power basis for decryption; queries do not
        // (the server never reads it, and holds many).
        let keep_power = level == self.params.last_level();
        let poly = |rows| -> Result<Slot> {
            let p = Poly::try_convert_from(rows, &ctx, true, Representation::PowerBasis)?;
            if keep_power {
                return Ok(Slot::power_only(p));
            }
            Ok(Slot::Ntt(crate::ntt::poly::forward(&p, true)?))
        };
        let c0 = poly(rounding::unpack(q, &proto.c[0], r.c0, &at, n, WHAT)?)?;
        let c1 = if seeded {
            let seed: [u8; 32] = proto
                .seed
                .as_slice()
                .try_into()
                .map_err(|_| malformed(WHAT, "seed is not 32 bytes"))?;
            Slot::Ntt(Poly::random_from_seed(&ctx, Representation::Ntt, seed))
        } else {
            let all: Vec<usize> = (0..n).collect();
            poly(rounding::unpack(q, &proto.c[1], r.c1, &all, n, WHAT)?)?
        };
        let mut out = BfvCt::new(Polys { c: [c0, c1], level });
        if !keep.is_empty() {
            out.keep = Some(Arc::new(keep));
        }
        out.rounding = r;
        Ok(out)
    }

    /// A selected ciphertext on the wire: fhe.rs's ciphertext message with c0 in power
    /// basis at the kept coefficients only (each modulus's values padded to a multiple
    /// of 8 and bit-packed as fhe-math does) and the runs in field 4.
    fn serialize_selected(&self, a: &BfvCt, keep: &[Range<usize>]) -> Result<Vec<u8>> {
        let c0 = crate::ntt::poly::backward(&a.ct[0], true)?;
        let ctx = c0.ctx().clone();
        let kept: usize = keep.iter().map(|r| r.len()).sum();
        let mut coefficients = Vec::new();
        for (row, q) in c0.coefficients().outer_iter().zip(ctx.moduli_operators()) {
            let mut v: Vec<u64> = keep
                .iter()
                .flat_map(|r| r.clone().map(|i| row[i]))
                .collect();
            v.resize(kept.div_ceil(8) * 8, 0);
            coefficients.extend(q.serialize_vec(&v));
        }
        let c0 = RqWire {
            representation: REPR_POWER_BASIS,
            degree: self.info.n as u32,
            coefficients,
            allow_variable_time: false,
        };
        Ok(CtWire {
            c: vec![c0.encode_to_vec(), a.ct[1].to_bytes()],
            seed: vec![],
            level: a.ct.level as u32,
            keep: keep
                .iter()
                .flat_map(|r| [r.start as u32, r.end as u32])
                .collect(),
            ..Default::default()
        }
        .encode_to_vec())
    }

    /// Decodes and validates a selected ciphertext (runs sorted, disjoint and inside
    /// 0..n, exact byte lengths, every value reduced).
    fn deserialize_selected(&self, proto: &CtWire) -> Result<BfvCt> {
        const WHAT: &str = "selected ciphertext";
        let n = self.info.n;
        if proto.keep.len() & 1 == 1 || proto.keep.len() > 2 * n {
            return Err(malformed(WHAT, format!("{} run bounds", proto.keep.len())));
        }
        if proto.c.len() != 2 || !proto.seed.is_empty() {
            return Err(malformed(WHAT, "expected two polynomials and no seed"));
        }
        let keep: Vec<Range<usize>> = proto
            .keep
            .chunks_exact(2)
            .map(|r| r[0] as usize..r[1] as usize)
            .collect();
        let kept = check_runs(&keep, n).map_err(|e| malformed(WHAT, e.to_string()))?;
        let level = proto.level as usize;
        let ctx = self.par().context_at_level(level)?.clone();
        let rq =
            RqWire::decode(proto.c[0].as_slice()).map_err(|e| malformed(WHAT, e.to_string()))?;
        if rq.representation != REPR_POWER_BASIS || rq.degree as usize != n {
            return Err(malformed(
                WHAT,
                "c0 is not a power-basis polynomial of degree n",
            ));
        }
        let padded = kept.div_ceil(8) * 8;
        let ops: &[Modulus] = ctx.moduli_operators();
        let expected: usize = ops.iter().map(|q| q.serialization_length(padded)).sum();
        if rq.coefficients.len() != expected {
            return Err(malformed(
                WHAT,
                format!("{} c0 bytes instead of {expected}", rq.coefficients.len()),
            ));
        }
        let mut arr = ndarray::Array2::<u64>::zeros((ops.len(), n));
        let mut at = 0;
        for (j, (qi, &q)) in ops.iter().zip(ctx.moduli()).enumerate() {
            let len = qi.serialization_length(padded);
            let v = qi.deserialize_vec(&rq.coefficients[at..at + len]);
            at += len;
            if v.len() != padded || v.iter().any(|&c| c >= q) {
                return Err(malformed(WHAT, "coefficient not reduced modulo q"));
            }
            let mut it = v.into_iter();
            for r in &keep {
                for i in r.clone() {
                    arr[[j, i]] = it.next().unwrap_or(0);
                }
            }
        }
        let c0 = Poly::try_convert_from(arr, &ctx, true, Representation::PowerBasis)?;
        let c0 = crate::ntt::poly::forward(&c0, true)?;
        let c1 = decode_poly(&proto.c[1], &ctx, n, REPR_NTT, WHAT)?;
        let mut out = self.wrap(vec![c0, c1])?;
        out.keep = Some(Arc::new(keep));
        Ok(out)
    }

    /// The hoisted key switch, fused: for every modulus j and slot t,
    /// c0'[t] = σ(c0)[t] + Σ_i σ(D_i)[t]·k0_i[t] and c1'[t] = Σ_i σ(D_i)[t]·k1_i[t], where
    /// σ is a slot permutation in NTT form: 128-bit accumulation, one reduction per slot,
    /// no intermediate polynomials.
    fn apply(&self, h: &BfvHoisted, key: &RotKey) -> Result<BfvCt> {
        let c0 = h.ct[0].coefficients();
        let ctx = h.ct[0].ctx().clone();
        let ops = ctx.moduli_operators();
        let (l, n) = (ops.len(), self.info.n);
        let views: Vec<_> = h.digits.iter().map(|d| d.coefficients()).collect();
        let mut out0 = ndarray::Array2::<u64>::zeros((l, n));
        let mut out1 = ndarray::Array2::<u64>::zeros((l, n));
        // the IFMA path's sums in slot order, one modulus at a time
        let (mut a0, mut a1) = (Vec::new(), Vec::new());
        for (j, q) in ops.iter().enumerate() {
            let rows: Vec<_> = views.iter().map(|v| v.row(j)).collect();
            let d: Vec<&[u64]> = rows
                .iter()
                .map(|r| {
                    r.as_slice()
                        .ok_or_else(|| HeError::Engine("digit layout".into()))
                })
                .collect::<Result<_>>()?;
            let k0: Vec<&[u64]> = (0..l)
                .map(|i| &key.k0[(i * l + j) * n..(i * l + j + 1) * n])
                .collect();
            let k1: Vec<&[u64]> = (0..l)
                .map(|i| &key.k1[(i * l + j) * n..(i * l + j + 1) * n])
                .collect();
            let c0j = c0.row(j);
            let mut o0 = out0.row_mut(j);
            let mut o1 = out1.row_mut(j);
            if let (true, Some(c0s)) = (self.ntt_ops[j].has_ifma(), c0j.as_slice()) {
                // on IFMA lanes: the sums in slot order (each product reduced as it is
                // added), then placed through the permutation
                a0.clear();
                a0.extend_from_slice(c0s);
                a1.clear();
                a1.resize(n, 0);
                for i in 0..l {
                    self.ntt_ops[j].mul_accumulate_ifma(&mut a0, d[i], k0[i]);
                    self.ntt_ops[j].mul_accumulate_ifma(&mut a1, d[i], k1[i]);
                }
                for (s, &dst) in key.inv.iter().enumerate() {
                    o0[dst as usize] = a0[s];
                    o1[dst as usize] = a1[s];
                }
                continue;
            }
            for (s, (&dst, &c)) in key.inv.iter().zip(c0j.iter()).enumerate() {
                let (mut a0, mut a1) = (0u128, 0u128);
                for i in 0..l {
                    let x = d[i][s] as u128;
                    a0 += x * k0[i][s] as u128;
                    a1 += x * k1[i][s] as u128;
                    // Each product is below 2^124: reduce before 16 could overflow.
                    if i % 15 == 14 {
                        a0 = q.reduce_u128(a0) as u128;
                        a1 = q.reduce_u128(a1) as u128;
                    }
                }
                o0[dst as usize] = q.add(q.reduce_u128(a0), c);
                o1[dst as usize] = q.reduce_u128(a1);
            }
        }
        let p0 = Poly::try_convert_from(out0, &ctx, true, Representation::Ntt)?;
        let p1 = Poly::try_convert_from(out1, &ctx, true, Representation::Ntt)?;
        self.wrap(vec![p0, p1])
    }

    /// A polynomial with coefficients uniform in [−2^bits, 2^bits), in NTT form, drawn
    /// in 60-bit chunks (e = Σ_k c_k · 2^(60k), the top chunk signed) so that flooding
    /// noise can exceed 64 bits.
    fn flood_noise<R: Rng>(&self, bits: u32, level: usize, rng: &mut R) -> Result<Poly> {
        const CHUNK: u32 = FLOOD_NOISE_CHUNK_BITS;
        let ctx = self.par().context_at_level(level)?;
        let n = self.info.n;
        let mut total = Poly::zero(ctx, Representation::PowerBasis);
        let mut shift = 0u32;
        let mut left = bits + 1; // [−2^bits, 2^bits) spans bits + 1 bits
        while left > 0 {
            let w = left.min(CHUNK);
            let top = left <= CHUNK;
            let vals: Vec<i64> = (0..n)
                .map(|_| {
                    if top {
                        rng.random_range(-(1i64 << (w - 1))..(1i64 << (w - 1)))
                    } else {
                        rng.random_range(0..(1i64 << w))
                    }
                })
                .collect();
            let mut e = signed_poly(ctx, &vals)?;
            if shift > 0 {
                e *= &(num_bigint::BigUint::from(1u8) << shift);
            }
            total += &e;
            shift += w;
            left -= w;
        }
        Ok(total)
    }

    /// fhe.rs's own row rotation (no hoisting), for comparison in tests and `bench ops`.
    /// Available on a client instance (it holds fhe.rs's evaluation key object).
    pub fn rotate_rows_fhe(&self, a: &BfvCt, step: i64) -> Result<BfvCt> {
        let ek = self.fhe_ek.as_ref().ok_or(HeError::MissingKey {
            key: "fhe.rs evaluation key",
        })?;
        let s = check_step(step, self.info.n / 2, &self.normalized, &self.galois)?;
        match s {
            None => Ok(a.clone()),
            Some(s) => self.wrap_fhe(ek.rotates_columns_by(self.fhe_ct(a)?, s)?),
        }
    }

    /// The serialized bytes of one polynomial of a ciphertext (0 = c0, 1 = c1): a
    /// diagnostic for tests of re-randomisation.
    pub fn component_bytes(&self, a: &BfvCt, i: usize) -> Result<Vec<u8>> {
        a.ct.c
            .get(i)
            .map(|p| p.ntt().to_bytes())
            .ok_or(HeError::WrongLength {
                expected: 2,
                actual: i,
            })
    }

    /// fhe.rs's own ct × pt (no Shoup form), for comparison in `bench ops`.
    pub fn mul_plain_fhe(&self, a: &BfvCt, b: &BfvPt) -> Result<BfvCt> {
        Self::top(a)?;
        self.wrap_fhe(self.fhe_ct(a)? * self.fhe_plaintext(b)?)
    }
}

impl Backend for Bfv {
    type Ct = BfvCt;
    type Pt = BfvPt;
    type PreparedPt = BfvPrepared;
    type Hoisted = BfvHoisted;

    fn slots(&self) -> SlotInfo {
        self.info
    }
    fn params(&self) -> Option<&Params> {
        Some(&self.params)
    }
    fn galois(&self) -> &GaloisSpec {
        &self.galois
    }

    fn encode_at(&self, values: &[u64], level: usize) -> Result<BfvPt> {
        self.check_level(level)?;
        Ok(BfvPt {
            coeffs: Arc::new(self.slot_coeffs(values)?),
            level,
            fhe: OnceLock::new(),
        })
    }

    fn prepare(&self, values: &[u64]) -> Result<BfvPrepared> {
        self.prepare_centred(&self.slot_coeffs(values)?, 0)
    }

    fn prepare_row_constants(&self, rows: [u64; 2]) -> Result<BfvPrepared> {
        self.check_values(&rows)?;
        let Some(basis) = &self.row_basis else {
            let span = self.info.span();
            let values: Vec<u64> = (0..self.info.n).map(|i| rows[(i / span).min(1)]).collect();
            return self.prepare(&values);
        };
        let p = self.info.p;
        // m = b + (a − b)·E, three coefficients mod p.
        let d = (rows[0] + p - rows[1]) % p;
        let m = [
            (rows[1] + mul_mod(d, basis.e[0], p)) % p,
            mul_mod(d, basis.e[1], p),
            mul_mod(d, basis.e[2], p),
        ];
        let per_limb = basis
            .limbs
            .iter()
            .zip(self.params.moduli_at(0))
            .map(|((_, values), &q)| {
                let [m0, m1, m3] = m.map(|c| lift_centred(c, p, q));
                let mut per_class = [0u64; 4];
                for (v, &[t1, t3]) in per_class.iter_mut().zip(values) {
                    *v = (m0 + mul_mod(m1, t1, q) + mul_mod(m3, t3, q)) % q;
                }
                per_class
            })
            .collect();
        Ok(BfvPrepared(PreparedForm::Rows(per_limb)))
    }

    fn prepared_to_bytes(&self, pt: &BfvPrepared) -> Result<Vec<u8>> {
        // row constants are written in full (the one file format)
        Ok(self.prepared_ntt(pt)?.to_bytes())
    }

    fn prepared_from_bytes(&self, bytes: &[u8]) -> Result<BfvPrepared> {
        const WHAT: &str = "prepared plaintext";
        // NTT form (NTT + Shoup in files written before slot plaintexts dropped the
        // Shoup half), at the level its length gives.
        let rq = RqWire::decode(bytes).map_err(|e| malformed(WHAT, e.to_string()))?;
        let repr = match rq.representation {
            r @ (REPR_NTT_SHOUP | REPR_NTT) => r,
            r => return Err(malformed(WHAT, format!("polynomial representation {r}"))),
        };
        for level in 0..=self.params.last_level() {
            let ctx = self.par().context_at_level(level)?;
            let len: usize = ctx
                .moduli_operators()
                .iter()
                .map(|q| q.serialization_length(self.info.n))
                .sum();
            if len == rq.coefficients.len() {
                return Ok(BfvPrepared(PreparedForm::Ntt(decode_poly(
                    bytes,
                    ctx,
                    self.info.n,
                    repr,
                    WHAT,
                )?)));
            }
        }
        Err(malformed(
            WHAT,
            format!("{} coefficient bytes fit no level", rq.coefficients.len()),
        ))
    }

    #[allow(unsafe_code)]
    fn encrypt_sym(&self, pt: &BfvPt) -> Result<BfvCt> {
        // fhe.rs's symmetric encryption (c1 = a drawn from a fresh seed as fhe.rs draws
        // it, c0 = −a·s + e + Δ·m), with the secret key kept in NTT form and c0 put
        // together in the power basis, where rounding and the wire form read it.
        let level = self.check_level(pt.level)?;
        let secret = self
            .secret_ntt
            .as_ref()
            .ok_or(HeError::MissingKey { key: "secret key" })?;
        let ctx = self.par().context_at_level(level)?;
        let mut rng = rand::rng();
        let mut seed = [0u8; 32];
        rng.fill(&mut seed);
        let mut a = Poly::random_from_seed(ctx, Representation::Ntt, seed);
        let mut a_s = &a * &secret.0[level];
        let mut a_s = {
            let power = crate::ntt::poly::backward(&a_s, false)?;
            a_s.zeroize();
            power
        };
        let mut c0 = sample_small(ctx, self.info.n, &mut rng)?;
        c0 -= &a_s;
        a_s.zeroize();
        c0 += &self.scaled(pt)?;
        // SAFETY: as in fhe.rs's own encryption, the finished ciphertext is public data.
        unsafe {
            a.allow_variable_time_computations();
            c0.allow_variable_time_computations();
        }
        let mut out = BfvCt::new(Polys {
            c: [Slot::power_only(c0), Slot::Ntt(a)],
            level,
        });
        out.seed = Some(seed);
        Ok(out)
    }

    fn encrypt_pk(&self, pt: &BfvPt) -> Result<BfvCt> {
        let ct = self
            .pk()?
            .try_encrypt(self.fhe_plaintext(pt)?, &mut rand::rng())?;
        self.wrap_fhe(ct)
    }

    fn encrypt_zero_flood_at(&self, bits: u32, level: usize) -> Result<BfvCt> {
        self.check_level(level)?;
        // The kernels' noise model keeps flood + log2 p + 3 bits within log2 q (one bit
        // for rounding, two of margin): the noise stays below q/(8p), and a response
        // rounded for the wire (`Params::response_rounding`) still decrypts.
        let max = (self.params.log_q_at(level).floor() as u32)
            .saturating_sub(self.params.p_bits())
            .saturating_sub(3);
        if bits > max {
            return Err(HeError::FloodTooLarge { bits, max });
        }
        // fhe.rs's public-key encryption of zero (u·pk + (e1, e2), u and e from the
        // same centred binomial), with the public key kept in NTT form per level and
        // the errors and the flooding noise added in the power basis, where the
        // ciphertext stays (mask_and_switch reads it there).
        let [pk0, pk1] = self
            .pk_levels
            .get(level)
            .ok_or(HeError::MissingKey { key: "public key" })?;
        let ctx = self.par().context_at_level(level)?;
        let mut rng = rand::rng();
        let mut u = {
            let mut small = sample_small(ctx, self.info.n, &mut rng)?;
            let u = crate::ntt::poly::forward(&small, false)?;
            small.zeroize();
            u
        };
        let power = |k: &Poly| {
            let mut c = &u * k;
            let power = crate::ntt::poly::backward(&c, false);
            c.zeroize();
            power
        };
        let mut c = [power(pk0)?, power(pk1)?];
        u.zeroize();
        for c in &mut c {
            *c += &sample_small(ctx, self.info.n, &mut rng)?;
        }
        if bits > 0 {
            c[0] += &self.flood_noise(bits, level, &mut rng)?;
        }
        Ok(BfvCt::new(Polys {
            c: c.map(Slot::power_only),
            level,
        }))
    }

    fn decrypt(&self, ct: &BfvCt) -> Result<Vec<u64>> {
        Self::whole(ct, "slot decryption")?;
        Ok(self.coeffs_to_slots(self.decrypt_coeffs_raw(ct)?))
    }

    #[allow(unsafe_code)]
    fn noise_budget(&self, ct: &BfvCt) -> Result<Option<u32>> {
        if ct.keep.is_some() {
            // c0 travels at the kept coefficients only: the noise of the others is
            // not defined, so the budget is not measured.
            return Ok(None);
        }
        let sk = self.sk()?;
        // SAFETY: `measure_noise` is `unsafe` in fhe.rs only because it runs in variable
        // time in the noise; it is a client-side diagnostic on the client's own data.
        let noise = unsafe { sk.measure_noise(self.fhe_ct(ct)?)? } as f64;
        let level = ct.ct.level;
        let budget = self.params.log_q_at(level) - (self.info.p as f64).log2() - noise - 1.0;
        Ok(Some(budget.max(0.0).floor() as u32))
    }

    fn add(&self, a: &BfvCt, b: &BfvCt) -> Result<BfvCt> {
        Self::whole(a, "add")?;
        Self::whole(b, "add")?;
        let (la, lb) = (a.ct.level, b.ct.level);
        if la != lb {
            return Err(HeError::LevelMismatch {
                left: la,
                right: lb,
            });
        }
        self.wrap(vec![&a.ct[0] + &b.ct[0], &a.ct[1] + &b.ct[1]])
    }

    fn sub(&self, a: &BfvCt, b: &BfvCt) -> Result<BfvCt> {
        Self::whole(a, "sub")?;
        Self::whole(b, "sub")?;
        let (la, lb) = (a.ct.level, b.ct.level);
        if la != lb {
            return Err(HeError::LevelMismatch {
                left: la,
                right: lb,
            });
        }
        self.wrap(vec![&a.ct[0] - &b.ct[0], &a.ct[1] - &b.ct[1]])
    }

    fn add_plain(&self, a: &BfvCt, b: &BfvPt) -> Result<BfvCt> {
        self.with_scaled(a, b, false)
    }

    fn sub_plain(&self, a: &BfvCt, b: &BfvPt) -> Result<BfvCt> {
        self.with_scaled(a, b, true)
    }

    fn negate(&self, a: &BfvCt) -> Result<BfvCt> {
        Self::whole(a, "negate")?;
        self.wrap(vec![-&a.ct[0], -&a.ct[1]])
    }

    fn mul_plain(&self, a: &BfvCt, b: &BfvPrepared) -> Result<BfvCt> {
        self.same_level_dot(&[a], &[b])?;
        let PreparedForm::Ntt(w) = &b.0 else {
            return self.dot(&[a], &[b]);
        };
        let mut c0 = a.ct[0].clone();
        let mut c1 = a.ct[1].clone();
        c0 *= w;
        c1 *= w;
        self.wrap(vec![c0, c1])
    }

    fn dot(&self, cts: &[&BfvCt], pts: &[&BfvPrepared]) -> Result<BfvCt> {
        if cts.is_empty() || pts.is_empty() {
            return Err(HeError::Empty { what: "dot" });
        }
        if cts.len() != pts.len() {
            return Err(HeError::WrongLength {
                expected: cts.len(),
                actual: pts.len(),
            });
        }
        self.same_level_dot(cts, pts)?;
        let full: Option<Vec<&Poly>> = pts
            .iter()
            .map(|p| match &p.0 {
                PreparedForm::Ntt(w) => Some(w),
                PreparedForm::Rows(_) | PreparedForm::Strided { .. } => None,
            })
            .collect();
        let (c0, c1) = match full {
            Some(w) => match (self.dot_ifma(cts, &w, 0)?, self.dot_ifma(cts, &w, 1)?) {
                (Some(c0), Some(c1)) => (c0, c1),
                _ => (
                    dot_product(cts.iter().map(|c| &c.ct[0]), w.iter().copied())?,
                    dot_product(cts.iter().map(|c| &c.ct[1]), w.iter().copied())?,
                ),
            },
            None => (self.dot_rows(cts, pts, 0)?, self.dot_rows(cts, pts, 1)?),
        };
        self.wrap(vec![c0, c1])
    }

    fn encode_coeffs_at(&self, values: &[u64], level: usize) -> Result<BfvPt> {
        self.check_level(level)?;
        // Scaled exactly on use (⌊q·m/p⌋, [`Bfv::scaled`]) in either encoding, so the
        // message can be any element of Z_p.
        Ok(BfvPt {
            coeffs: Arc::new(self.padded(values)?),
            level,
            fhe: OnceLock::new(),
        })
    }

    fn prepare_coeffs_at(&self, values: &[u64], level: usize) -> Result<BfvPrepared> {
        let v = self.padded(values)?;
        self.prepare_centred(&v, level)
    }

    fn prepare_coeffs_strided(
        &self,
        values: &[u64],
        level: usize,
        stride_log2: u32,
    ) -> Result<BfvPrepared> {
        let v = self.padded(values)?;
        self.prepare_centred_strided(&v, level, stride_log2)
    }

    fn dot_coeffs(&self, cts: &[&BfvCt], pts: &[&BfvPrepared]) -> Result<BfvCt> {
        // A ciphertext × plaintext product multiplies polynomials in R_q whatever the
        // encoding: the slot path is the same operation.
        self.dot(cts, pts)
    }

    fn dot_encoded(
        &self,
        encoding: crate::backend::Encoding,
        level: usize,
        terms: usize,
        fill: &(dyn Fn(usize, &mut [u64]) + Sync),
        cts: &[Vec<&BfvCt>],
    ) -> Result<Vec<BfvCt>> {
        let one = |_: usize, i: usize, v: &mut [u64]| fill(i, v);
        self.dot_encoded_fused(encoding, level, 0, 1, terms, &one, cts)?
            .pop()
            .ok_or(HeError::Empty {
                what: "dot_encoded",
            })
    }

    fn dot_encoded_groups(
        &self,
        encoding: crate::backend::Encoding,
        level: usize,
        stride_log2: u32,
        groups: usize,
        terms: usize,
        fill: &(dyn Fn(usize, usize, &mut [u64]) + Sync),
        cts: &[Vec<&BfvCt>],
    ) -> Result<Vec<Vec<BfvCt>>> {
        self.dot_encoded_fused(encoding, level, stride_log2, groups, terms, fill, cts)
    }

    fn decrypt_coeffs(&self, ct: &BfvCt) -> Result<Vec<u64>> {
        self.decrypt_coeffs_raw(ct)
    }

    fn select_coeffs(&self, a: &BfvCt, keep: &[Range<usize>]) -> Result<BfvCt> {
        Self::whole(a, "select_coeffs")?;
        check_runs(keep, self.info.n)?;
        // c0 in the power basis, zero outside the runs (what the client will receive);
        // decryption reads the kept coefficients unchanged.
        let c0 = a.power_basis(0);
        let mut arr = c0.coefficients().to_owned();
        let mut mask = vec![false; self.info.n];
        for r in keep {
            mask[r.clone()].iter_mut().for_each(|m| *m = true);
        }
        for mut row in arr.outer_iter_mut() {
            for (v, &m) in row.iter_mut().zip(&mask) {
                if !m {
                    *v = 0;
                }
            }
        }
        let c0 = Poly::try_convert_from(arr, c0.ctx(), true, Representation::PowerBasis)?;
        let mut out = BfvCt::new(Polys {
            c: [Slot::power_only(c0), a.ct.c[1].clone()],
            level: a.ct.level,
        });
        out.keep = Some(Arc::new(keep.to_vec()));
        out.rounding = a.rounding;
        Ok(out)
    }

    fn rotate_rows(&self, a: &BfvCt, step: i64) -> Result<BfvCt> {
        match check_step(step, self.info.n / 2, &self.normalized, &self.galois)? {
            None => Ok(a.clone()),
            Some(s) => {
                let key = self.rot_keys.get(&s).ok_or(HeError::UndeclaredRotation {
                    step,
                    declared: self.galois.steps().collect(),
                })?;
                let h = self.hoist(a)?;
                self.apply(&h, key)
            }
        }
    }

    fn rotate_columns(&self, a: &BfvCt) -> Result<BfvCt> {
        let key = self
            .column_key
            .as_ref()
            .ok_or(HeError::UndeclaredColumnRotation)?;
        let h = self.hoist(a)?;
        self.apply(&h, key)
    }

    fn hoist(&self, a: &BfvCt) -> Result<BfvHoisted> {
        Self::top(a)?;
        let c1 = crate::ntt::poly::backward(&a.ct[1], true)?;
        let ctx = c1.ctx().clone();
        let coeffs = c1.coefficients();
        let ntt_rows = a.ct[1].coefficients();
        let ops = ctx.moduli_operators();
        let l = ops.len();
        // Digit i lifted to modulus j is (c1 mod q_i) mod q_j; for j = i that is c1's own
        // NTT row i, so only L(L − 1) forward NTTs are needed.
        let digits = (0..l)
            .map(|i| {
                let mut arr = ndarray::Array2::<u64>::zeros((l, self.info.n));
                for (j, (q, op)) in ops.iter().zip(&self.ntt_ops).enumerate() {
                    if j == i {
                        arr.row_mut(j).assign(&ntt_rows.row(i));
                    } else {
                        let mut v = coeffs.row(i).to_vec();
                        q.reduce_vec(&mut v);
                        op.forward(&mut v);
                        arr.row_mut(j).assign(&ndarray::ArrayView1::from(&v));
                    }
                }
                Ok(Poly::try_convert_from(
                    arr,
                    &ctx,
                    true,
                    Representation::Ntt,
                )?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BfvHoisted {
            ct: a.ct.clone(),
            digits,
        })
    }

    fn rotate_hoisted(&self, h: &BfvHoisted, step: i64) -> Result<BfvCt> {
        match check_step(step, self.info.n / 2, &self.normalized, &self.galois)? {
            None => Ok(BfvCt::new(h.ct.clone())),
            Some(s) => {
                let key = self.rot_keys.get(&s).ok_or(HeError::UndeclaredRotation {
                    step,
                    declared: self.galois.steps().collect(),
                })?;
                self.apply(h, key)
            }
        }
    }

    fn switch_to_last(&self, a: &BfvCt) -> Result<BfvCt> {
        Self::whole(a, "switch_to_last")?;
        // fhe.rs switches one level at a time, each time leaving and re-entering the NTT
        // domain (for 4 moduli: 9 inverse and 6 forward NTTs per polynomial); the same
        // divide-and-round steps in the power basis need 4 inverse NTTs, and the result
        // stays in the power basis (the forward NTT only if an operation needs it).
        // Same result, bit for bit.
        let drop = self.params.last_level().saturating_sub(a.ct.level);
        if drop == 0 {
            return Ok(BfvCt::new(a.ct.clone()));
        }
        self.switched(
            [a.power_basis(0).into_owned(), a.power_basis(1).into_owned()],
            drop,
        )
    }

    fn mask_and_switch(
        &self,
        ct: &BfvCt,
        mask: &[u64],
        encoding: crate::Encoding,
        zero: &BfvCt,
    ) -> Result<BfvCt> {
        // One pass in the power basis: ct leaves the NTT domain once, the flooding zero
        // (made in the power basis) and Δ·r are added there (no NTT for either), and
        // the switch and later the rounding and the wire form read the power basis.
        // The same polynomials as add_plain, add and switch_to_last one after the
        // other, bit for bit.
        let level = ct.ct.level;
        let pt = self.encode_as_at(mask, encoding, level)?;
        Self::same_level_pt(ct, &pt)?;
        Self::whole(zero, "mask_and_switch")?;
        if zero.ct.level != level {
            return Err(HeError::LevelMismatch {
                left: level,
                right: zero.ct.level,
            });
        }
        let drop = self.params.last_level().saturating_sub(level);
        let [mut c0, c1] = [0, 1].map(|i| {
            let mut c = ct.power_basis(i).into_owned();
            c += zero.power_basis(i).as_ref();
            c
        });
        c0 += &self.scaled(&pt)?;
        self.switched([c0, c1], drop)
    }

    fn level(&self, a: &BfvCt) -> usize {
        a.ct.level
    }

    fn is_seeded(&self, a: &BfvCt) -> bool {
        a.seed.is_some()
    }

    fn serialize(&self, a: &BfvCt) -> Result<Vec<u8>> {
        if !a.rounding.is_none() {
            return self.serialize_rounded(a);
        }
        match (&a.keep, a.seed) {
            // fhe.rs's wire form of a seeded ciphertext: c0 and the seed of c1 (helina
            // encrypts itself, so the seed is kept here rather than in fhe.rs's object)
            (None, Some(seed)) => Ok(CtWire {
                c: vec![a.ct[0].to_bytes()],
                seed: seed.to_vec(),
                level: a.ct.level as u32,
                ..Default::default()
            }
            .encode_to_vec()),
            // fhe.rs's wire form
            (None, None) => Ok(CtWire {
                c: a.ct.c.iter().map(|p| p.ntt().to_bytes()).collect(),
                level: a.ct.level as u32,
                ..Default::default()
            }
            .encode_to_vec()),
            (Some(keep), _) => self.serialize_selected(a, keep),
        }
    }

    fn wire_size(&self, a: &BfvCt) -> usize {
        self.params.rounded_ct_wire_size(
            a.ct.level,
            a.seed.is_some(),
            a.keep
                .as_ref()
                .map(|k| (k.len(), k.iter().map(|r| r.len()).sum())),
            a.rounding,
        )
    }

    fn round(&self, a: &BfvCt, r: Rounding) -> Result<BfvCt> {
        rounding::check_ct(&self.params, a.ct.level, a.seed.is_some(), a.rounding, r)?;
        let q = self.params.moduli_at(a.ct.level).to_vec();
        let kept: Option<Vec<usize>> = a
            .keep
            .as_ref()
            .map(|k| k.iter().flat_map(|r| r.clone()).collect());
        let mut c = a.ct.c.clone();
        let mut packed = a.packed.clone();
        for (i, d) in [(0, r.c0), (1, r.c1)] {
            if d.is_none() {
                continue;
            }
            let mut rows = a.power_basis(i).coefficients().to_owned();
            let at = if i == 0 { kept.as_deref() } else { None };
            packed[i] = Some(Arc::new(rounding::round_rows(&q, &mut rows, d, at)?));
            c[i] = Slot::power_only(Poly::try_convert_from(
                rows,
                a.ct.ctx(),
                false,
                Representation::PowerBasis,
            )?);
        }
        Ok(BfvCt {
            ct: Polys {
                c,
                level: a.ct.level,
            },
            seed: a.seed,
            keep: a.keep.clone(),
            rounding: r,
            packed,
            fhe: OnceLock::new(),
        })
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<BfvCt> {
        const WHAT: &str = "ciphertext";
        let proto = CtWire::decode(bytes).map_err(|e| malformed(WHAT, e.to_string()))?;
        let level = proto.level as usize;
        if level > self.params.last_level() {
            return Err(malformed(WHAT, format!("level {level} out of range")));
        }
        if proto.c0_limbs | proto.c0_bits | proto.c1_limbs | proto.c1_bits != 0 {
            return self.deserialize_rounded(&proto);
        }
        if !proto.keep.is_empty() {
            return self.deserialize_selected(&proto);
        }
        let ctx = self.par().context_at_level(level)?.clone();
        let seeded = !proto.seed.is_empty();
        let parts = match (proto.c.len(), seeded) {
            (2, false) | (1, true) => proto.c.len(),
            (k, _) => {
                return Err(malformed(
                    WHAT,
                    format!("{k} polynomials (seeded: {seeded}); expected 2, or 1 and a seed"),
                ))
            }
        };
        let mut c = proto.c[..parts]
            .iter()
            .map(|b| decode_poly(b, &ctx, self.info.n, REPR_NTT, WHAT))
            .collect::<Result<Vec<_>>>()?;
        if seeded {
            let seed: [u8; 32] = proto
                .seed
                .as_slice()
                .try_into()
                .map_err(|_| malformed(WHAT, "seed is not 32 bytes"))?;
            c.push(Poly::random_from_seed(&ctx, Representation::Ntt, seed));
        }
        // A seeded ciphertext re-serialises with its c1 expanded (fhe.rs keeps the seed
        // only in the object that drew it): seeded form is for the first hop only.
        self.wrap(c)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The lifts of signed values equal fhe-math's conversion residue for residue:
    /// small values (the errors of an encryption, ±20 and the extremes below every
    /// modulus) and any i64 (flooding chunks, i64::MIN and MAX included), on a chain
    /// below 2^50 and one above.
    #[test]
    fn signed_lifts_equal_fhe_math() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for name in ["n8192-p28", "n8192-p40"] {
            let params = Params::preset(name).unwrap();
            let ctx = params.fhe.context_at_level(0).unwrap();
            let n = params.n();
            let q_min = *params.moduli().iter().min().unwrap() as i64;
            let mut small: Vec<i64> = (0..n).map(|_| rng.random_range(-20..=20)).collect();
            small[..4].copy_from_slice(&[q_min - 1, 1 - q_min, 0, -1]);
            let mut any: Vec<i64> = (0..n).map(|_| rng.random()).collect();
            any[..3].copy_from_slice(&[i64::MIN, i64::MAX, -(1 << 60)]);
            for (got, values) in [
                (small_poly(ctx, &small).unwrap(), &small),
                (signed_poly(ctx, &small).unwrap(), &small),
                (signed_poly(ctx, &any).unwrap(), &any),
            ] {
                let want = Poly::try_convert_from(
                    values.as_slice(),
                    ctx,
                    false,
                    Representation::PowerBasis,
                )
                .unwrap();
                assert_eq!(got.coefficients(), want.coefficients(), "{name}");
            }
        }
    }

    /// `switch_to_last` (all divide-and-round steps in the power basis) equals fhe.rs's
    /// level-by-level switch, polynomial for polynomial, from every level.
    #[test]
    fn switch_to_last_equals_fhe_level_by_level() {
        let params = Params::preset("n8192").unwrap();
        let b = Bfv::keygen(&params, GaloisSpec::new(vec![])).unwrap();
        let v = crate::random_slots(params.n(), params.p(), &mut rand::rng());
        for level in 0..params.levels() {
            let ct = b.encrypt_pk(&b.encode_at(&v, level).unwrap()).unwrap();
            let ours = b.switch_to_last(&ct).unwrap();
            let mut theirs = b.fhe_ct(&ct).unwrap().clone();
            theirs.switch_to_level(params.last_level()).unwrap();
            assert_eq!(ours.ct.level, params.last_level());
            assert_eq!(ours.ct.c.len(), theirs.len());
            for i in 0..theirs.len() {
                assert_eq!(ours.ct[i], theirs[i], "level {level} polynomial {i}");
            }
            assert_eq!(b.decrypt(&ours).unwrap(), v);
        }
    }

    /// helina's own encryption, plaintext scaling and decryption against fhe.rs's: the
    /// seed regenerates c1, fhe.rs decrypts the ciphertext, Δ·m added in the power basis
    /// equals fhe.rs's `ct + pt` bit for bit (both encodings, every level), and
    /// decryption equals fhe.rs's on the response path (switched, rounded, selected).
    #[test]
    fn own_encryption_scaling_and_decryption_match_fhe() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for name in ["n8192", "n8192-q164", "n4096"] {
            let params = Params::preset(name).unwrap();
            let b = Bfv::keygen(&params, GaloisSpec::new(vec![])).unwrap();
            let sk = b.sk().unwrap();
            for level in 0..params.levels() {
                for e in [crate::Encoding::Slots, crate::Encoding::Coeffs] {
                    let v = crate::random_slots(params.n(), params.p(), &mut rng);
                    let pt = b.encode_as_at(&v, e, level).unwrap();
                    let ct = b.encrypt_sym(&pt).unwrap();
                    let ctx = params.fhe.context_at_level(level).unwrap();
                    let seed = ct.seed.unwrap();
                    assert_eq!(
                        ct.ct[1].coefficients(),
                        Poly::random_from_seed(ctx, Representation::Ntt, seed).coefficients()
                    );
                    let fhe_pt = sk.try_decrypt(b.fhe_ct(&ct).unwrap()).unwrap();
                    let fhe_encoding = match e {
                        crate::Encoding::Slots => Encoding::simd_at_level(level),
                        crate::Encoding::Coeffs => Encoding::poly_at_level(level),
                    };
                    assert_eq!(
                        Vec::<u64>::try_decode(&fhe_pt, fhe_encoding.clone()).unwrap(),
                        v
                    );
                    assert_eq!(b.decrypt_as(&ct, e).unwrap(), v, "{name} level {level}");
                    let w = crate::random_slots(params.n(), params.p(), &mut rng);
                    let theirs = b.fhe_ct(&ct).unwrap()
                        + &Plaintext::try_encode(w.as_slice(), fhe_encoding, b.par()).unwrap();
                    let ours = b
                        .add_plain(&ct, &b.encode_as_at(&w, e, level).unwrap())
                        .unwrap();
                    for i in 0..2 {
                        assert_eq!(
                            ours.ct[i].coefficients(),
                            theirs[i].coefficients(),
                            "{name} level {level}"
                        );
                    }
                    let last = b.switch_to_last(&ours).unwrap();
                    let rounded = b.round(&last, params.response_rounding()).unwrap();
                    let wire = b.deserialize(&b.serialize(&rounded).unwrap()).unwrap();
                    let fhe_last = sk.try_decrypt(b.fhe_ct(&wire).unwrap()).unwrap();
                    let fhe_values = Vec::<u64>::try_decode(
                        &fhe_last,
                        match e {
                            crate::Encoding::Slots => Encoding::simd(),
                            crate::Encoding::Coeffs => Encoding::poly(),
                        },
                    )
                    .unwrap();
                    assert_eq!(b.decrypt_as(&wire, e).unwrap(), fhe_values);
                    let sum: Vec<u64> = v
                        .iter()
                        .zip(&w)
                        .map(|(x, y)| (x + y) % params.p())
                        .collect();
                    assert_eq!(fhe_values, sum);
                }
            }
        }
    }

    /// n random values of Z_p at the multiples of 2^a, zero elsewhere: a polynomial in
    /// X^(2^a).
    fn strided_values(n: usize, p: u64, a: u32, rng: &mut ChaCha8Rng) -> Vec<u64> {
        let mut v = vec![0u64; n];
        for x in v.iter_mut().step_by(1 << a) {
            *x = rng.random_range(0..p);
        }
        v
    }

    /// A plaintext in X^(2^a) is held as its small transform on every preset, at every
    /// stride a coefficient layer uses, and expands to the NTT form of the same
    /// polynomial prepared without a stride (`tests/coeffs.rs` checks its products).
    #[test]
    fn strided_plaintexts_are_held_small() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for name in crate::params::PRESETS {
            let params = Params::preset(name).unwrap();
            let b = Bfv::keygen(&params, GaloisSpec::new(vec![])).unwrap();
            let (n, p) = (params.n(), params.p());
            for level in 0..params.levels() {
                for a in [3u32, 6, 8] {
                    let v = strided_values(n, p, a, &mut rng);
                    let held = b.prepare_centred_strided(&v, level, a).unwrap();
                    let PreparedForm::Strided { log2, limbs } = &held.0 else {
                        panic!("{name} level {level} stride 2^{a}: not held small");
                    };
                    assert_eq!(*log2, a, "{name}");
                    assert_eq!(limbs.len(), params.levels() - level, "{name}");
                    assert!(limbs.iter().all(|l| l.len() == n >> a), "{name}");
                    let full = b.prepare_centred(&v, level).unwrap();
                    assert_eq!(
                        b.prepared_ntt(&held).unwrap().coefficients(),
                        b.prepared_ntt(&full).unwrap().coefficients(),
                        "{name} level {level} stride 2^{a}"
                    );
                }
            }
        }
    }

    /// A product with plaintexts held as their strided transforms, alone or in a block
    /// mixed with an NTT-form one, equals the product with their NTT forms word for word,
    /// on every preset and level.
    #[test]
    fn strided_products_equal_their_ntt_forms() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for name in crate::params::PRESETS {
            let params = Params::preset(name).unwrap();
            let b = Bfv::keygen(&params, GaloisSpec::new(vec![])).unwrap();
            let (n, p) = (params.n(), params.p());
            for level in 0..params.levels() {
                let terms = 6;
                let cts: Vec<BfvCt> = (0..terms)
                    .map(|_| {
                        let x = crate::random_slots(n, p, &mut rng);
                        b.encrypt_sym(&b.encode_coeffs_at(&x, level).unwrap())
                            .unwrap()
                    })
                    .collect();
                let cts: Vec<&BfvCt> = cts.iter().collect();
                for a in [3u32, 5] {
                    let held: Vec<BfvPrepared> = (0..terms)
                        .map(|k| {
                            let v = strided_values(n, p, a, &mut rng);
                            // the last term in NTT form: a block mixing kinds
                            if k + 1 == terms {
                                b.prepare_centred(&v, level).unwrap()
                            } else {
                                b.prepare_centred_strided(&v, level, a).unwrap()
                            }
                        })
                        .collect();
                    assert!(matches!(held[0].0, PreparedForm::Strided { .. }), "{name}");
                    let full: Vec<BfvPrepared> = held
                        .iter()
                        .map(|h| {
                            BfvPrepared(PreparedForm::Ntt(b.prepared_ntt(h).unwrap().into_owned()))
                        })
                        .collect();
                    for k in [1, terms - 1, terms] {
                        let h: Vec<&BfvPrepared> = held[..k].iter().collect();
                        let f: Vec<&BfvPrepared> = full[..k].iter().collect();
                        let ours = b.dot(&cts[..k], &h).unwrap();
                        let want = b.dot(&cts[..k], &f).unwrap();
                        for i in 0..2 {
                            assert_eq!(
                                ours.ct[i].coefficients(),
                                want.ct[i].coefficients(),
                                "{name} level {level} stride 2^{a}, {k} terms"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The scalar path's plaintext equals the slot path's, word for word, on every
    /// preset (so products and noise are the same), and multiplies like it.
    #[test]
    fn row_constants_equal_the_slot_encoding() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for name in crate::params::PRESETS {
            let params = Params::preset(name).unwrap();
            let b = Bfv::keygen(&params, GaloisSpec::new(vec![])).unwrap();
            assert!(b.row_basis.is_some(), "{name}: no three-term row basis");
            let (n, p) = (params.n(), params.p());
            let span = b.slots().span();
            let mut cases = vec![[0, 0], [1, 0], [0, 1], [p - 1, 1], [p / 2, p / 2 + 1]];
            cases.extend((0..4).map(|_| [rng.random_range(0..p), rng.random_range(0..p)]));
            for rows in cases {
                let slots: Vec<u64> = (0..n).map(|i| rows[i / span]).collect();
                let ours = b.prepare_row_constants(rows).unwrap();
                assert!(
                    matches!(ours.0, PreparedForm::Rows(_)),
                    "{name}: not compact"
                );
                let slot = b.prepare(&slots).unwrap();
                assert_eq!(
                    b.prepared_ntt(&ours).unwrap().coefficients(),
                    b.prepared_ntt(&slot).unwrap().coefficients(),
                    "{name} {rows:?}"
                );
            }
            let x = crate::random_slots(n, p, &mut rng);
            let ct = b.encrypt_sym(&b.encode(&x).unwrap()).unwrap();
            let rows = [5, p - 7];
            let got = b
                .decrypt(
                    &b.mul_plain(&ct, &b.prepare_row_constants(rows).unwrap())
                        .unwrap(),
                )
                .unwrap();
            let want: Vec<u64> = (0..n).map(|i| mul_mod(x[i], rows[i / span], p)).collect();
            assert_eq!(got, want, "{name}");
            // a fused product mixing both forms, longer than one reduction batch, equals
            // the product with every plaintext in full, bit for bit
            let compact = b.prepare_row_constants(rows).unwrap();
            let full = b.prepare(&x).unwrap();
            let terms = 70;
            let cts: Vec<&BfvCt> = vec![&ct; terms];
            let mixed: Vec<&BfvPrepared> = (0..terms)
                .map(|k| if k % 3 == 0 { &full } else { &compact })
                .collect();
            let expanded = BfvPrepared(PreparedForm::Ntt(
                b.prepared_ntt(&compact).unwrap().into_owned(),
            ));
            let reference: Vec<&BfvPrepared> = (0..terms)
                .map(|k| if k % 3 == 0 { &full } else { &expanded })
                .collect();
            let (ours, theirs) = (
                b.dot(&cts, &mixed).unwrap(),
                b.dot(&cts, &reference).unwrap(),
            );
            for i in 0..2 {
                assert_eq!(
                    ours.ct[i].coefficients(),
                    theirs.ct[i].coefficients(),
                    "{name}"
                );
            }
        }
        assert!(matches!(
            Bfv::keygen(&Params::preset("n8192").unwrap(), GaloisSpec::new(vec![]))
                .unwrap()
                .prepare_row_constants([0, 1 << 62]),
            Err(HeError::NotReduced { .. })
        ));
    }
}
