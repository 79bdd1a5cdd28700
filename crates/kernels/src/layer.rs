//! One interface over every linear kernel (matvec and conv), so protocols and
//! benchmarks drive them the same way: offline encode, client query, server compute +
//! `share_output`, the cleartext finish both parties apply, client decrypt.

use std::ops::Range;

use he::{Backend, Dropped, Encoding, GaloisSpec, Params, Rounding};

use crate::noise::NoiseModel;

use crate::error::Result;
use crate::share::{share_output_encoded, FloodPool};

/// A planned linear layer.
pub trait LinearLayer {
    /// The server's encoded weights for a backend.
    type Encoded<B: Backend>;
    /// Method name.
    fn method_name(&self) -> String;
    /// Galois keys the client must generate.
    fn galois(&self) -> GaloisSpec;
    /// Query ciphertexts per input.
    fn query_cts(&self) -> usize;
    /// Response ciphertexts.
    fn output_cts(&self) -> usize;
    /// Length of the input vector (reduced mod p).
    fn input_len(&self) -> usize;
    /// Number of signed weights.
    fn weight_len(&self) -> usize;
    /// Flooding bits on these parameters (or a noise-budget error), for the noise of
    /// [`LinearLayer::query_model`].
    fn flood_bits(&self, params: &Params) -> Result<u32>;
    /// Worst-case kernel noise (log2 σ of the response before flooding) under a model.
    fn kernel_noise(&self, m: &NoiseModel) -> f64;
    /// How the client rounds its query ciphertexts' c0 for the wire: the largest
    /// rounding whose error, added to the fresh noise, the noise budget at the query
    /// level still affords with the flooding ([`he::Rounding`]; c1 comes from a seed).
    /// A query then costs about as many bits per coefficient as the layer's noise needs,
    /// whatever the level's modulus.
    fn query_rounding(&self, params: &Params) -> Dropped {
        let level = self.query_level(params);
        let base = NoiseModel::at_level(params, level);
        let q = params.moduli_at(level);
        let cands = he::rounding_candidates(q);
        let ok = |d: &Dropped| {
            let m = base.with_query_rounding(he::rounding_bound_log2(q, *d));
            m.affords(self.kernel_noise(&m))
        };
        // Affordable roundings are a prefix of the candidates (by increasing error).
        let k = cands.partition_point(ok);
        k.checked_sub(1).map_or(Dropped::NONE, |i| cands[i])
    }
    /// The noise model of the layer's queries: at its query level, with its rounding.
    fn query_model(&self, params: &Params) -> NoiseModel {
        let level = self.query_level(params);
        let bound = he::rounding_bound_log2(params.moduli_at(level), self.query_rounding(params));
        NoiseModel::at_level(params, level).with_query_rounding(bound)
    }
    /// The level the client encrypts its queries at, the weights are prepared at and
    /// the response is flooded at: 0 (the whole modulus chain) unless the kernel needs
    /// no key switching and a shorter chain affords its noise and flooding
    /// ([`crate::noise::NoiseModel::lowest_level`]; coefficient-encoded kernels).
    fn query_level(&self, params: &Params) -> usize {
        let _ = params;
        0
    }
    /// [`LinearLayer::query_level`] on the backend's parameters (0 on a backend without
    /// any, such as the ideal-model simulator).
    fn query_level_on<B: Backend>(&self, b: &B) -> usize {
        b.params().map_or(0, |p| self.query_level(p))
    }
    /// An empty flooding pool for this layer's responses (bits and level).
    fn flood_pool<B: Backend>(&self, params: &Params) -> Result<FloodPool<B>> {
        Ok(FloodPool::at_level(
            self.flood_bits(params)?,
            self.query_level(params),
        ))
    }
    /// Whether [`LinearLayer::compute_on_the_fly`] encodes each weight plaintext inside
    /// its fused products ([`Backend::dot_encoded`]) rather than preparing it apart; the
    /// planner prices on-the-fly encoding by it
    /// ([`crate::CostModel::encode_in_product_us_at`]).
    fn encodes_in_products(&self) -> bool {
        false
    }
    /// The weight plaintexts are coefficient polynomials in X^(2^k) for this k
    /// ([`he::Backend::prepare_coeffs_strided`]; 0: no such structure): the planner
    /// prices their encoding by it ([`crate::CostModel::stride_ratio`]).
    fn weight_stride_log2(&self) -> u32 {
        0
    }
    /// Offline: encode the weights.
    fn encode_weights<B: Backend>(&self, b: &B, w: &[i64]) -> Result<Self::Encoded<B>>;
    /// Client: the input packed into the values of each query ciphertext, in the
    /// layer's [`LinearLayer::encoding`] (checked: its length, and every value reduced
    /// mod p).
    fn query_values(&self, x: &[u64]) -> Result<Vec<Vec<u64>>>;
    /// Client: pack, encrypt and round the input for the wire
    /// ([`LinearLayer::query_rounding`]), each ciphertext encrypted and rounded in one
    /// pass.
    fn query<B: Backend>(&self, b: &B, x: &[u64]) -> Result<Vec<B::Ct>> {
        self.query_each(b, x, Ok)
    }
    /// Client: [`LinearLayer::query`] serialised for the wire, each ciphertext
    /// encrypted, rounded and serialised in one pass (while it is in the cache).
    fn query_wire<B: Backend>(&self, b: &B, x: &[u64]) -> Result<Vec<Vec<u8>>> {
        self.query_each(b, x, |c| Ok(b.serialize(&c)?))
    }
    /// Client: each query ciphertext encrypted, rounded for the wire and mapped by `f`,
    /// in parallel, one ciphertext at a time.
    fn query_each<B: Backend, T: Send>(
        &self,
        b: &B,
        x: &[u64],
        f: impl Fn(B::Ct) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        use rayon::prelude::*;
        let (encoding, level) = (self.encoding(), self.query_level_on(b));
        let rounding = b
            .params()
            .map(|params| Rounding {
                c0: self.query_rounding(params),
                c1: Dropped::NONE,
            })
            .filter(|r| !r.is_none());
        self.query_values(x)?
            .par_iter()
            .map(|v| {
                let c = b.encrypt_sym(&b.encode_as_at(v, encoding, level)?)?;
                match rounding {
                    Some(r) => f(b.round(&c, r)?),
                    None => f(c),
                }
            })
            .collect()
    }
    /// Server: the HE computation before `share_output`.
    fn compute<B: Backend>(&self, b: &B, m: &Self::Encoded<B>, q: &[B::Ct]) -> Result<Vec<B::Ct>>;
    /// Server, weights encoded on the fly (beyond the memory budget): the same prepares
    /// and products as `encode_weights` + `compute`, the same responses. The default
    /// encodes every plaintext first; a method may interleave encoding and products so
    /// that only a few plaintexts are held at a time (every convolution but ENSEI does:
    /// Cheetah one output group at a time, `bsgs` and HELiKs one fused product, GAZELLE's
    /// and GALA's one output ciphertext's plaintexts per thread).
    fn compute_on_the_fly<B: Backend>(&self, b: &B, w: &[i64], q: &[B::Ct]) -> Result<Vec<B::Ct>> {
        self.compute(b, &self.encode_weights(b, w)?, q)
    }
    /// The cleartext finishing map from response slots (or coefficients) to outputs
    /// (both parties).
    fn finish(&self, slots: &[Vec<u64>]) -> Result<Vec<u64>>;
    /// How queries and responses are encoded: slots (default) or coefficients
    /// (Cheetah); `share_output` masks and the client decrypts in this encoding.
    fn encoding(&self) -> Encoding {
        Encoding::Slots
    }
    /// For coefficient-encoded responses: the coefficients of response `index` that
    /// `finish` reads, as sorted runs; `respond` then sends only those of c0
    /// ([`Backend::select_coeffs`]). `None` (the default): whole ciphertexts.
    fn response_coeffs(&self, index: usize) -> Option<Vec<Range<usize>>> {
        let _ = index;
        None
    }

    /// Server online: compute, share, finish the server's share.
    fn respond<B: Backend>(
        &self,
        b: &B,
        m: &Self::Encoded<B>,
        q: &[B::Ct],
        pool: &mut FloodPool<B>,
    ) -> Result<(Vec<B::Ct>, Vec<u64>)> {
        let out = self.compute(b, m, q)?;
        self.share_response(b, out, pool)
    }

    /// Server online with the weights encoded on the fly: compute, share, finish.
    fn respond_on_the_fly<B: Backend>(
        &self,
        b: &B,
        w: &[i64],
        q: &[B::Ct],
        pool: &mut FloodPool<B>,
    ) -> Result<(Vec<B::Ct>, Vec<u64>)> {
        let out = self.compute_on_the_fly(b, w, q)?;
        self.share_response(b, out, pool)
    }

    /// Server online, after `compute`: `share_output` in the layer's encoding, the
    /// server's share finished, and (coefficient encoding) the response reduced to the
    /// coefficients the client reads.
    fn share_response<B: Backend>(
        &self,
        b: &B,
        out: Vec<B::Ct>,
        pool: &mut FloodPool<B>,
    ) -> Result<(Vec<B::Ct>, Vec<u64>)> {
        use rayon::prelude::*;
        let shared = share_output_encoded(b, out, pool, self.encoding())?;
        let server = self.finish(&shared.server_slots)?;
        // After the privacy step: only what the client reads of c0 goes on the wire.
        let keeps: Vec<Option<Vec<Range<usize>>>> = (0..shared.response.len())
            .map(|i| self.response_coeffs(i))
            .collect();
        let response = shared
            .response
            .into_par_iter()
            .zip(keeps)
            .map(|(ct, keep)| match keep {
                Some(keep) if !keep.is_empty() => Ok(b.select_coeffs(&ct, &keep)?),
                _ => Ok(ct),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((response, server))
    }

    /// Client: decrypt and finish.
    fn decrypt<B: Backend>(&self, b: &B, resp: &[B::Ct]) -> Result<Vec<u64>> {
        use rayon::prelude::*;
        let encoding = self.encoding();
        let slots = resp
            .par_iter()
            .map(|c| b.decrypt_as(c, encoding))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        self.finish(&slots)
    }

    /// Client: [`LinearLayer::decrypt`] of the response as it came off the wire, each
    /// ciphertext deserialised and decrypted in one pass; with it, the noise budget left
    /// in the first response (a diagnostic: a step's responses are flooded alike, so the
    /// first stands for the others; `None` on a backend without one).
    fn decrypt_wire<B: Backend>(&self, b: &B, resp: &[Vec<u8>]) -> Result<(Vec<u64>, Option<u32>)> {
        use rayon::prelude::*;
        let encoding = self.encoding();
        let decrypted = resp
            .par_iter()
            .enumerate()
            .map(|(i, bytes)| {
                let ct = b.deserialize(bytes)?;
                let budget = if i == 0 { b.noise_budget(&ct)? } else { None };
                Ok((b.decrypt_as(&ct, encoding)?, budget))
            })
            .collect::<Result<Vec<_>>>()?;
        let budget = decrypted.first().and_then(|(_, bits)| *bits);
        let slots: Vec<Vec<u64>> = decrypted.into_iter().map(|(s, _)| s).collect();
        Ok((self.finish(&slots)?, budget))
    }
}

/// Sorted coefficient indices as runs, bridging gaps of one coefficient (a run costs
/// 8 bytes on the wire, a coefficient at most 8).
pub(crate) fn runs(mut indices: Vec<usize>) -> Vec<Range<usize>> {
    indices.sort_unstable();
    indices.dedup();
    let mut out: Vec<Range<usize>> = Vec::new();
    for i in indices {
        match out.last_mut() {
            Some(r) if i <= r.end + 1 => r.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// acc + x, or x when there is no accumulator yet.
pub(crate) fn accumulate<B: Backend>(b: &B, acc: Option<B::Ct>, x: B::Ct) -> Result<Option<B::Ct>> {
    Ok(Some(match acc {
        None => x,
        Some(a) => b.add(&a, &x)?,
    }))
}
