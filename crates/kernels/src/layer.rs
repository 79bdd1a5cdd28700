//! One interface over every linear kernel (matvec and conv), so protocols and
//! benchmarks drive them the same way: offline encode, client query, server compute +
//! `share_output`, the cleartext finish both parties apply, client decrypt.

use he::{Backend, GaloisSpec, Params};

use crate::error::Result;
use crate::share::{share_output, FloodPool};

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
    /// Flooding bits on these parameters (or a noise-budget error).
    fn flood_bits(&self, params: &Params) -> Result<u32>;
    /// Offline: encode the weights.
    fn encode_weights<B: Backend>(&self, b: &B, w: &[i64]) -> Result<Self::Encoded<B>>;
    /// Client: pack and encrypt the input.
    fn query<B: Backend>(&self, b: &B, x: &[u64]) -> Result<Vec<B::Ct>>;
    /// Server: the HE computation before `share_output`.
    fn compute<B: Backend>(&self, b: &B, m: &Self::Encoded<B>, q: &[B::Ct]) -> Result<Vec<B::Ct>>;
    /// The cleartext finishing map from response slots to outputs (both parties).
    fn finish(&self, slots: &[Vec<u64>]) -> Result<Vec<u64>>;

    /// Server online: compute, share, finish the server's share.
    fn respond<B: Backend>(
        &self,
        b: &B,
        m: &Self::Encoded<B>,
        q: &[B::Ct],
        pool: &mut FloodPool<B>,
    ) -> Result<(Vec<B::Ct>, Vec<u64>)> {
        let out = self.compute(b, m, q)?;
        let shared = share_output(b, out, pool)?;
        let server = self.finish(&shared.server_slots)?;
        Ok((shared.response, server))
    }

    /// Client: decrypt and finish.
    fn decrypt<B: Backend>(&self, b: &B, resp: &[B::Ct]) -> Result<Vec<u64>> {
        use rayon::prelude::*;
        let slots = resp
            .par_iter()
            .map(|c| b.decrypt(c))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        self.finish(&slots)
    }
}

/// acc + x, or x when there is no accumulator yet.
pub(crate) fn accumulate<B: Backend>(b: &B, acc: Option<B::Ct>, x: B::Ct) -> Result<Option<B::Ct>> {
    Ok(Some(match acc {
        None => x,
        Some(a) => b.add(&a, &x)?,
    }))
}
