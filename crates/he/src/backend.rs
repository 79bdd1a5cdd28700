//! The `Backend` trait every kernel is written against, the slot layouts, the Galois-key
//! declaration and the operation counters.
//!
//! Modelled on swanky's `Fancy` trait: few required primitives, composite operations as
//! provided methods, and counting as a wrapper ([`crate::Counting`]) that forwards to any
//! backend, so the same kernel reports the same counts on [`crate::Bfv`], [`crate::Sim`]
//! and the data-free [`crate::Count`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::{HeError, Result};
use crate::params::Params;

/// How the n slots of a plaintext are arranged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Layout {
    /// Real BFV batching: 2 rows of n/2 slots. A row rotation by k moves slot j of each
    /// row to j − k (left by k) within its row; the column rotation swaps the rows.
    /// Slot index i < n/2 is row 0, column i; i ≥ n/2 is row 1, column i − n/2.
    TwoRows,
    /// The papers' counting model: one cyclic vector of n slots (Sim and Count only).
    /// No column rotation exists.
    Cyclic,
}

/// How the n values of a plaintext are placed in the plaintext polynomial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Encoding {
    /// SIMD batching: n slots of Z_p ([`Layout`]); products are slot-wise and
    /// rotations permute slots.
    Slots,
    /// Coefficient encoding: the values are the coefficients of m(X) = Σ v_i X^i in
    /// Z_p\[X\]/(X^n + 1); a ciphertext × plaintext product is the negacyclic polynomial
    /// product (the same ring operation as in slot encoding), and there are no rotations.
    Coeffs,
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Encoding::Slots => "slot",
            Encoding::Coeffs => "coefficient",
        })
    }
}

/// Direction of a message, for byte accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Client → server (queries).
    Up,
    /// Server → client (responses).
    Down,
}

/// The rotations a party has Galois keys for. Steps are normalised (mod n/2 in
/// [`Layout::TwoRows`], mod n in [`Layout::Cyclic`]), so `-1` and `n/2 - 1` are one key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GaloisSpec {
    steps: BTreeSet<i64>,
    /// Whether the column rotation (row swap, Galois element 2n − 1) has a key.
    pub column: bool,
}

impl GaloisSpec {
    /// Keys for the given row-rotation steps (step 0 needs no key and is ignored).
    pub fn new(steps: impl IntoIterator<Item = i64>) -> Self {
        Self {
            steps: steps.into_iter().filter(|&s| s != 0).collect(),
            column: false,
        }
    }
    /// Also a key for the column rotation.
    pub fn with_column(mut self) -> Self {
        self.column = true;
        self
    }
    /// No keys at all.
    pub fn none() -> Self {
        Self::default()
    }
    /// The row-rotation steps as given.
    pub fn steps(&self) -> impl Iterator<Item = i64> + '_ {
        self.steps.iter().copied()
    }
    /// The normalised steps for a rotation span (n/2 or n), deduplicated.
    pub fn normalized(&self, span: usize) -> BTreeSet<usize> {
        self.steps
            .iter()
            .map(|&s| s.rem_euclid(span as i64) as usize)
            .filter(|&s| s != 0)
            .collect()
    }
    /// Number of Galois keys this spec needs for a rotation span.
    pub fn key_count(&self, span: usize) -> usize {
        self.normalized(span).len() + usize::from(self.column)
    }
    /// Adds the steps and column flag of another spec.
    pub fn union(mut self, other: &GaloisSpec) -> Self {
        self.steps.extend(other.steps.iter().copied());
        self.column |= other.column;
        self
    }
}

/// Checks coefficient runs (sorted, disjoint, non-empty, inside 0..n); returns the
/// number of kept coefficients.
pub fn check_runs(keep: &[std::ops::Range<usize>], n: usize) -> Result<usize> {
    let mut at = 0;
    let mut total = 0;
    for (index, r) in keep.iter().enumerate() {
        if r.start < at || r.start >= r.end || r.end > n {
            return Err(HeError::BadRuns {
                index,
                start: r.start,
                end: r.end,
                n,
            });
        }
        at = r.end;
        total += r.end - r.start;
    }
    Ok(total)
}

/// `level` if a chain of `levels` moduli has it, else [`HeError::WrongLevel`].
pub(crate) fn check_level(level: usize, levels: usize) -> Result<usize> {
    if level >= levels {
        return Err(HeError::WrongLevel {
            expected: levels - 1,
            actual: level,
        });
    }
    Ok(level)
}

/// Slot plaintexts are prepared at the top level only ([`Backend::prepare`]).
/// Every non-zero value at a multiple of 2^stride_log2.
pub(crate) fn check_stride(values: &[u64], stride_log2: u32) -> Result<()> {
    let off = (1usize << stride_log2.min(usize::BITS - 1)) - 1;
    match values
        .iter()
        .enumerate()
        .find(|(i, &v)| v != 0 && i & off != 0)
    {
        Some((index, _)) => Err(HeError::OffStride { index, stride_log2 }),
        None => Ok(()),
    }
}

/// A stride is declared for coefficient plaintexts only.
pub(crate) fn check_stride_encoding(encoding: Encoding, stride_log2: u32) -> Result<()> {
    if stride_log2 > 0 && encoding == Encoding::Slots {
        return Err(HeError::EncodingMismatch {
            operation: "a strided encoding",
            expected: Encoding::Coeffs,
            actual: Encoding::Slots,
        });
    }
    Ok(())
}

pub(crate) fn check_encoded_level(encoding: Encoding, level: usize) -> Result<()> {
    if encoding == Encoding::Slots && level != 0 {
        return Err(HeError::WrongLevel {
            expected: 0,
            actual: level,
        });
    }
    Ok(())
}

/// Checks a rotation step against the layout and the declared keys; returns the
/// normalised step (in (0, span)), or `None` for the identity.
pub(crate) fn check_step(
    step: i64,
    span: usize,
    keys: &BTreeSet<usize>,
    spec: &GaloisSpec,
) -> Result<Option<usize>> {
    if step.unsigned_abs() as usize >= span {
        return Err(HeError::RotationOutOfRange { step, half: span });
    }
    let s = step.rem_euclid(span as i64) as usize;
    if s == 0 {
        return Ok(None);
    }
    if !keys.contains(&s) {
        return Err(HeError::UndeclaredRotation {
            step,
            declared: spec.steps().collect(),
        });
    }
    Ok(Some(s))
}

/// Operation counts of a run; the papers' counting vocabulary (gala.txt §II-C) plus
/// HELiKs's NTT/iNTT and the traffic.
///
/// NTT / iNTT count full RNS polynomial transforms (all moduli of the level) that the
/// fhe.rs backend really performs, with ciphertexts resident in NTT form: a Perm or a
/// DecPerm = 1 iNTT (c1 to coefficients) + L NTTs (lifting the L RNS digits); a HstPerm
/// = 0; preparing or encoding a plaintext = 1 NTT; a decryption = 1 iNTT; each level a
/// mod switch drops = 2 iNTT + 2 NTT. ScMult and Add need none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCounts {
    /// Ciphertext additions, subtractions, plaintext additions and negations.
    pub add: u64,
    /// Ciphertext × plaintext products (a fused sum of k products counts k).
    pub sc_mult: u64,
    /// Of the additions, those fused into sums of products (k − 1 per sum of k): they
    /// cost nothing beyond the products' accumulation.
    pub fused_add: u64,
    /// Plain rotations (one full key switch each).
    pub perm: u64,
    /// Decompositions shared by a group of hoisted rotations.
    pub dec_perm: u64,
    /// Rotations reusing a decomposition.
    pub hst_perm: u64,
    /// Forward NTTs (see the type doc).
    pub ntt: u64,
    /// Inverse NTTs (see the type doc).
    pub intt: u64,
    /// Plaintexts prepared from one constant per row
    /// ([`Backend::prepare_row_constants`]): no NTT.
    #[serde(default)]
    pub row_constants: u64,
    /// Encryptions (public-key, symmetric, and flooding encryptions of zero).
    pub encrypt: u64,
    /// Decryptions.
    pub decrypt: u64,
    /// Levels dropped by modulus switching.
    pub mod_switch: u64,
    /// Ciphertext bytes sent client → server.
    pub bytes_up: u64,
    /// Ciphertext bytes sent server → client.
    pub bytes_down: u64,
}

impl OpCounts {
    /// All rotations, however performed (Perm + HstPerm).
    pub fn rotations(&self) -> u64 {
        self.perm + self.hst_perm
    }
}

impl std::ops::Add for OpCounts {
    type Output = OpCounts;
    fn add(self, o: OpCounts) -> OpCounts {
        OpCounts {
            add: self.add + o.add,
            sc_mult: self.sc_mult + o.sc_mult,
            fused_add: self.fused_add + o.fused_add,
            perm: self.perm + o.perm,
            dec_perm: self.dec_perm + o.dec_perm,
            hst_perm: self.hst_perm + o.hst_perm,
            ntt: self.ntt + o.ntt,
            intt: self.intt + o.intt,
            row_constants: self.row_constants + o.row_constants,
            encrypt: self.encrypt + o.encrypt,
            decrypt: self.decrypt + o.decrypt,
            mod_switch: self.mod_switch + o.mod_switch,
            bytes_up: self.bytes_up + o.bytes_up,
            bytes_down: self.bytes_down + o.bytes_down,
        }
    }
}

/// What every backend exposes about its slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    /// Number of slots = ring degree.
    pub n: usize,
    /// Plaintext (sharing) modulus.
    pub p: u64,
    /// Slot arrangement.
    pub layout: Layout,
}

impl SlotInfo {
    /// The length of the cyclic vector a row rotation acts on (n/2 or n).
    pub fn span(&self) -> usize {
        match self.layout {
            Layout::TwoRows => self.n / 2,
            Layout::Cyclic => self.n,
        }
    }
}

/// A homomorphic-encryption backend over Z_p slots.
///
/// Values are vectors of `n` elements of Z_p, always reduced. Kernels take `&B` where
/// `B: Backend` and never see which implementation runs.
pub trait Backend: Sync {
    /// A ciphertext.
    type Ct: Clone + Send + Sync;
    /// An encoded plaintext (for additions and encryption).
    type Pt: Clone + Send + Sync;
    /// A plaintext prepared once for repeated multiplication (NTT form in BFV).
    type PreparedPt: Send + Sync;
    /// The decomposition of a ciphertext shared by a group of hoisted rotations.
    type Hoisted: Send + Sync;

    /// Slot count, p and layout.
    fn slots(&self) -> SlotInfo;
    /// The parameter set, where the backend has one (the ideal-model Count has none).
    fn params(&self) -> Option<&Params>;
    /// The Galois keys this party can use.
    fn galois(&self) -> &GaloisSpec;

    /// Encodes n values of Z_p (fewer are padded with zeros) at the top level.
    fn encode(&self, values: &[u64]) -> Result<Self::Pt> {
        self.encode_at(values, 0)
    }
    /// [`Backend::encode`] at `level` (for additions to, and encryptions at, that
    /// level).
    fn encode_at(&self, values: &[u64], level: usize) -> Result<Self::Pt>;
    /// Encodes and prepares n values of Z_p for multiplication (offline work).
    fn prepare(&self, values: &[u64]) -> Result<Self::PreparedPt>;
    /// A prepared plaintext whose slots are `rows[0]` on row 0 and `rows[1]` on row 1
    /// (the cyclic layout's one row takes `rows[0]`): the scalar path for weights that
    /// are constant over a row. In coefficients it has three non-zero terms
    /// (1, X^{n/4}, X^{3n/4}), so its NTT form takes four values per modulus: the real
    /// backend builds and holds just those (no NTT, a few words), counted as
    /// `row_constants`, not `ntt`.
    fn prepare_row_constants(&self, rows: [u64; 2]) -> Result<Self::PreparedPt> {
        let info = self.slots();
        let span = info.span();
        let values: Vec<u64> = (0..info.n).map(|i| rows[(i / span).min(1)]).collect();
        self.prepare(&values)
    }
    /// Serialises a prepared plaintext (offline storage of encoded weights).
    fn prepared_to_bytes(&self, pt: &Self::PreparedPt) -> Result<Vec<u8>>;
    /// Deserialises and validates a prepared plaintext.
    fn prepared_from_bytes(&self, bytes: &[u8]) -> Result<Self::PreparedPt>;
    /// Symmetric-key encryption whose uniform half travels as a 32-byte seed (client).
    fn encrypt_sym(&self, pt: &Self::Pt) -> Result<Self::Ct>;
    /// Public-key encryption.
    fn encrypt_pk(&self, pt: &Self::Pt) -> Result<Self::Ct>;
    /// A public-key encryption of zero whose c0 carries extra uniform noise in
    /// [−2^bits, 2^bits] (response re-randomisation and flooding).
    fn encrypt_zero_flood(&self, bits: u32) -> Result<Self::Ct> {
        self.encrypt_zero_flood_at(bits, 0)
    }
    /// [`Backend::encrypt_zero_flood`] at `level` (for responses computed on queries
    /// encrypted below the top level).
    fn encrypt_zero_flood_at(&self, bits: u32, level: usize) -> Result<Self::Ct>;
    /// Decrypts and decodes the n slots (client).
    fn decrypt(&self, ct: &Self::Ct) -> Result<Vec<u64>>;
    /// Remaining noise budget in bits (client-side diagnostic; `None` where there is no
    /// noise, or for a selected ciphertext, whose dropped coefficients have none defined).
    fn noise_budget(&self, ct: &Self::Ct) -> Result<Option<u32>>;

    /// ct + ct.
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct>;
    /// ct − ct.
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct>;
    /// ct + pt.
    fn add_plain(&self, a: &Self::Ct, b: &Self::Pt) -> Result<Self::Ct>;
    /// ct − pt.
    fn sub_plain(&self, a: &Self::Ct, b: &Self::Pt) -> Result<Self::Ct>;
    /// −ct.
    fn negate(&self, a: &Self::Ct) -> Result<Self::Ct>;
    /// ct × pt (slot-wise).
    fn mul_plain(&self, a: &Self::Ct, b: &Self::PreparedPt) -> Result<Self::Ct>;
    /// Σ ct_i × pt_i with one reduction at the end.
    fn dot(&self, cts: &[&Self::Ct], pts: &[&Self::PreparedPt]) -> Result<Self::Ct>;

    /// Coefficient encoding of n values of Z_p (fewer are padded with zeros): the
    /// plaintext polynomial Σ values\[i\]·X^i, for encryption and additions.
    fn encode_coeffs(&self, values: &[u64]) -> Result<Self::Pt> {
        self.encode_coeffs_at(values, 0)
    }
    /// [`Backend::encode_coeffs`] at `level`: a query encrypted from it has the moduli
    /// of that level only (rotation-free kernels need less than the whole chain).
    fn encode_coeffs_at(&self, values: &[u64], level: usize) -> Result<Self::Pt>;
    /// A plaintext polynomial with these n coefficients of Z_p (fewer are padded with
    /// zeros), prepared for multiplication (offline work). Coefficients are lifted
    /// centred, into (−p/2, p/2]: a weight −1 given as p − 1 multiplies as −1, never as
    /// p − 1, so the product's noise grows with the weights' magnitudes only.
    fn prepare_coeffs(&self, values: &[u64]) -> Result<Self::PreparedPt> {
        self.prepare_coeffs_at(values, 0)
    }
    /// [`Backend::prepare_coeffs`] at `level`, for products with ciphertexts at that
    /// level (fewer moduli: less memory and encoding time).
    fn prepare_coeffs_at(&self, values: &[u64], level: usize) -> Result<Self::PreparedPt>;
    /// [`Backend::prepare_coeffs_at`] of a polynomial in X^(2^stride_log2): every
    /// non-zero value at a multiple of 2^stride_log2 ([`HeError::OffStride`] otherwise).
    /// The same plaintext, counted as one prepare; a backend may transform only the
    /// n/2^stride_log2 values there and hold only those (BFV:
    /// [`crate::strided_transform_len`] values per modulus; its products read each
    /// 2^stride_log2 times).
    fn prepare_coeffs_strided(
        &self,
        values: &[u64],
        level: usize,
        stride_log2: u32,
    ) -> Result<Self::PreparedPt> {
        check_stride(values, stride_log2)?;
        self.prepare_coeffs_at(values, level)
    }
    /// Σ ct_i × pt_i as negacyclic polynomial products (coefficient encoding), with
    /// one reduction at the end. The ciphertexts and plaintexts must be coefficient
    /// encoded.
    fn dot_coeffs(&self, cts: &[&Self::Ct], pts: &[&Self::PreparedPt]) -> Result<Self::Ct>;
    /// Weights encoded on the fly: for each output `t`, Σ_i cts\[t\]\[i\] × pt_i, where
    /// pt_i is plaintext `i` of `terms`, its n values of Z_p written by `fill(i, values)`
    /// into zeros, prepared in `encoding` (coefficient plaintexts at `level`; slot
    /// plaintexts at the top level, which `level` must then be) and dropped after use.
    /// By default exactly `terms` [`Backend::prepare_coeffs_at`] (or
    /// [`Backend::prepare`]) and one [`Backend::dot_coeffs`] (or [`Backend::dot`]) per
    /// output, and counted as those; a backend may fuse them with the same result (BFV:
    /// each plaintext transformed and multiplied into every output while it is in
    /// cache, none held).
    fn dot_encoded(
        &self,
        encoding: Encoding,
        level: usize,
        terms: usize,
        fill: &(dyn Fn(usize, &mut [u64]) + Sync),
        cts: &[Vec<&Self::Ct>],
    ) -> Result<Vec<Self::Ct>> {
        check_encoded_level(encoding, level)?;
        let n = self.slots().n;
        let pts = (0..terms)
            .map(|i| {
                let mut v = Vec::new();
                if self.carries_data() {
                    v.resize(n, 0);
                    fill(i, &mut v);
                }
                match encoding {
                    Encoding::Coeffs => self.prepare_coeffs_at(&v, level),
                    Encoding::Slots => self.prepare(&v),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let ps: Vec<&Self::PreparedPt> = pts.iter().collect();
        cts.iter()
            .map(|c| match encoding {
                Encoding::Coeffs => self.dot_coeffs(c, &ps),
                Encoding::Slots => self.dot(c, &ps),
            })
            .collect()
    }
    /// [`Backend::dot_encoded`] for `groups` sets of plaintexts with the same
    /// ciphertexts: group `g`'s plaintext `i` is written by `fill(g, i, values)`;
    /// returns each group's outputs, in group order. By default one
    /// [`Backend::dot_encoded`] per group, and counted as those; a backend may run the
    /// groups together with the same result (BFV: each ciphertext row is read once for
    /// all the groups while it is in cache).
    ///
    /// `stride_log2` > 0 (coefficient encoding only) declares every plaintext a
    /// polynomial in X^(2^stride_log2), as [`Backend::prepare_coeffs_strided`]: the same
    /// plaintexts and counts, which a backend may transform in fewer points.
    #[allow(clippy::too_many_arguments)]
    fn dot_encoded_groups(
        &self,
        encoding: Encoding,
        level: usize,
        stride_log2: u32,
        groups: usize,
        terms: usize,
        fill: &(dyn Fn(usize, usize, &mut [u64]) + Sync),
        cts: &[Vec<&Self::Ct>],
    ) -> Result<Vec<Vec<Self::Ct>>> {
        check_stride_encoding(encoding, stride_log2)?;
        if stride_log2 > 0 && self.carries_data() {
            let mut v = vec![0; self.slots().n];
            for g in 0..groups {
                for i in 0..terms {
                    v.fill(0);
                    fill(g, i, &mut v);
                    check_stride(&v, stride_log2)?;
                }
            }
        }
        (0..groups)
            .map(|g| {
                let one = |i: usize, v: &mut [u64]| fill(g, i, v);
                self.dot_encoded(encoding, level, terms, &one, cts)
            })
            .collect()
    }
    /// Decrypts to the n coefficients of the plaintext polynomial (client). For a
    /// selected ciphertext ([`Backend::select_coeffs`]) only the kept coefficients are
    /// meaningful.
    fn decrypt_coeffs(&self, ct: &Self::Ct) -> Result<Vec<u64>>;
    /// Reduces a coefficient-encoded ciphertext to the coefficients the client reads
    /// (`keep`: sorted, disjoint, non-empty ranges in 0..n): c0 travels at those
    /// coefficients only, c1 whole (Cheetah's "extract", sent as OpenCheetah does by
    /// dropping c0's other coefficients). A response whose client reads d of n
    /// coefficients shrinks from 2n to about n + d coefficients. The result is for
    /// the wire and [`Backend::decrypt_coeffs`] (correct at the kept coefficients) only;
    /// other operations refuse it ([`HeError::Selected`]).
    fn select_coeffs(&self, a: &Self::Ct, keep: &[std::ops::Range<usize>]) -> Result<Self::Ct>;
    /// Rounds a ciphertext's low-order precision away as its wire form will
    /// ([`crate::Rounding`]): the result holds what the receiver rebuilds, the rounding
    /// error added to its noise, and serializes to the smaller rounded form. c0 of a
    /// selected ciphertext is rounded at its kept coefficients; c1 of a seeded one cannot
    /// be rounded. The ideal-model simulator (no parameters) only records it.
    fn round(&self, a: &Self::Ct, r: crate::Rounding) -> Result<Self::Ct>;

    /// Rotates each row left by `step` (signed; |step| < span). Needs a declared key.
    fn rotate_rows(&self, a: &Self::Ct, step: i64) -> Result<Self::Ct>;
    /// Swaps the two rows. Needs the column key.
    fn rotate_columns(&self, a: &Self::Ct) -> Result<Self::Ct>;
    /// The shared decomposition for hoisted rotations of `a`.
    fn hoist(&self, a: &Self::Ct) -> Result<Self::Hoisted>;
    /// A rotation reusing a decomposition.
    fn rotate_hoisted(&self, h: &Self::Hoisted, step: i64) -> Result<Self::Ct>;

    /// Switches to the last level (one modulus): smaller responses.
    fn switch_to_last(&self, a: &Self::Ct) -> Result<Self::Ct>;
    /// `share_output`'s work on one response ciphertext: adds the mask (the n values
    /// `mask` in `encoding`, at the ciphertext's level) and `zero` (a flooding encryption
    /// of zero at that level), then switches to the last level. By default exactly
    /// [`Backend::encode_as_at`], [`Backend::add_plain`], [`Backend::add`] and
    /// [`Backend::switch_to_last`] (and counted as those); a backend may fuse them into
    /// one pass with the same result.
    fn mask_and_switch(
        &self,
        ct: &Self::Ct,
        mask: &[u64],
        encoding: Encoding,
        zero: &Self::Ct,
    ) -> Result<Self::Ct> {
        let masked = self.add_plain(ct, &self.encode_as_at(mask, encoding, self.level(ct))?)?;
        self.switch_to_last(&self.add(&masked, zero)?)
    }
    /// Level of a ciphertext (0 = top).
    fn level(&self, a: &Self::Ct) -> usize;
    /// Whether a ciphertext is still in seeded form (fresh symmetric encryption).
    fn is_seeded(&self, a: &Self::Ct) -> bool;

    /// Serialises a ciphertext for the wire.
    fn serialize(&self, a: &Self::Ct) -> Result<Vec<u8>>;
    /// Deserialises and validates a ciphertext from the wire.
    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Ct>;

    /// Exact wire size of a ciphertext (0 in the data-free ideal model).
    fn wire_size(&self, a: &Self::Ct) -> usize {
        match self.params() {
            Some(p) => p.ct_wire_size(self.level(a), self.is_seeded(a)),
            None => 0,
        }
    }

    /// Encodes n values of Z_p in the given encoding ([`Backend::encode`] or
    /// [`Backend::encode_coeffs`]).
    fn encode_as(&self, values: &[u64], encoding: Encoding) -> Result<Self::Pt> {
        self.encode_as_at(values, encoding, 0)
    }

    /// [`Backend::encode_as`] at `level`.
    fn encode_as_at(&self, values: &[u64], encoding: Encoding, level: usize) -> Result<Self::Pt> {
        match encoding {
            Encoding::Slots => self.encode_at(values, level),
            Encoding::Coeffs => self.encode_coeffs_at(values, level),
        }
    }

    /// Decrypts in the given encoding ([`Backend::decrypt`] or
    /// [`Backend::decrypt_coeffs`]).
    fn decrypt_as(&self, ct: &Self::Ct, encoding: Encoding) -> Result<Vec<u64>> {
        match encoding {
            Encoding::Slots => self.decrypt(ct),
            Encoding::Coeffs => self.decrypt_coeffs(ct),
        }
    }

    /// Rotates one ciphertext by several steps with one shared decomposition
    /// (1 DecPerm + one HstPerm per non-zero step; step 0 returns a copy).
    fn rotate_group(&self, a: &Self::Ct, steps: &[i64]) -> Result<Vec<Self::Ct>> {
        if steps.iter().all(|&s| s == 0) {
            return Ok(steps.iter().map(|_| a.clone()).collect());
        }
        let h = self.hoist(a)?;
        steps
            .iter()
            .map(|&s| {
                if s == 0 {
                    Ok(a.clone())
                } else {
                    self.rotate_hoisted(&h, s)
                }
            })
            .collect()
    }

    /// Sends a ciphertext over the (simulated) wire: serialise, count, deserialise.
    fn transfer(&self, _dir: Dir, a: &Self::Ct) -> Result<Self::Ct> {
        self.deserialize(&self.serialize(a)?)
    }

    /// Whether ciphertexts carry data (false for the shape-only backend, so callers may
    /// skip building plaintext values nobody reads).
    fn carries_data(&self) -> bool {
        true
    }

    /// Checks that `values` are n (or fewer) reduced elements of Z_p.
    fn check_values(&self, values: &[u64]) -> Result<()> {
        let s = self.slots();
        if values.len() > s.n {
            return Err(HeError::WrongLength {
                expected: s.n,
                actual: values.len(),
            });
        }
        // One vectorised pass first, the position only when a value is too large: bit 63
        // of v | (p − 1 − v) (wrapping) is set exactly when v ≥ p (p < 2^63), with
        // 64-bit subtractions and ORs only (no 64-bit compare before SSE4.2 / AVX-512).
        let p = s.p;
        if values
            .iter()
            .fold(0, |acc, &v| acc | v | (p - 1).wrapping_sub(v))
            >> 63
            == 0
        {
            return Ok(());
        }
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, &v)| v >= s.p) {
            return Err(HeError::NotReduced {
                index,
                value,
                p: s.p,
            });
        }
        Ok(())
    }
}
