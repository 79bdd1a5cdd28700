//! GAZELLE's interactive Square (x² activation; gazelle-excerpt.txt §7.3, networks A and
//! B of Table 11): with additive shares a (client) and b (server) of y ∈ Z_p,
//! y² = a² + 2ab + b² (mod p). The client sends Enc(a) (all n slots used, seeded
//! symmetric); the server multiplies by the plaintext 2b (one ScMult per ciphertext,
//! no rotation) and returns it through [`share_output`](crate::share_output) like
//! every linear kernel, so the response is masked with fresh r, flooded and switched
//! to the last level: the client decrypts c = 2ab + r, the server keeps −r. Each then
//! adds its own square locally: client z_C = a² + c, server z_S = b² − r, and
//! z_C + z_S ≡ y² (mod p), each share uniform on its own.
//!
//! As a [`LinearLayer`] the server's share b plays the part of the weights (encoded
//! when it is known, i.e. online; values in [0, p)), so the protocol, op counts and the
//! flooding rule are those of the linear layers: ⌈count / n⌉ ciphertexts each way,
//! ⌈count / n⌉ ScMult, no Galois key. Truncation after a Square (fixed point) is the
//! GC step's job (`gc::Nonlinear::Identity` with `trunc_bits`).

use he::{Backend, GaloisSpec, Params, SlotInfo};

use crate::error::{KernelError, Result};
use crate::layer::LinearLayer;
use crate::noise::NoiseModel;

/// A planned Square of `count` shared values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SquareLayout {
    count: usize,
    slots: SlotInfo,
}

impl SquareLayout {
    /// Squares `count` values with the slots of a parameter set.
    pub fn new(count: usize, slots: SlotInfo) -> Result<Self> {
        if count == 0 {
            return Err(KernelError::EmptyDimension {
                what: "square count",
            });
        }
        Ok(Self { count, slots })
    }

    /// Number of values.
    pub fn count(&self) -> usize {
        self.count
    }

    fn cts(&self) -> usize {
        self.count.div_ceil(self.slots.n)
    }

    fn check(&self, what: &'static str, v: &[u64]) -> Result<()> {
        if v.len() != self.count {
            return Err(KernelError::Shape {
                what,
                expected: self.count,
                actual: v.len(),
            });
        }
        let p = self.slots.p;
        if let Some((index, &value)) = v.iter().enumerate().find(|(_, &x)| x >= p) {
            return Err(he::HeError::NotReduced { index, value, p }.into());
        }
        Ok(())
    }

    /// The client's output share a² + c mod p, from its input share a and its
    /// decrypted cross-term share c.
    pub fn client_output(&self, a: &[u64], c: &[u64]) -> Result<Vec<u64>> {
        self.combine("client share", a, c)
    }

    /// The server's output share b² + s mod p, from its input share b and its
    /// cross-term share s (= −r).
    pub fn server_output(&self, b: &[u64], s: &[u64]) -> Result<Vec<u64>> {
        self.combine("server share", b, s)
    }

    fn combine(&self, what: &'static str, x: &[u64], cross: &[u64]) -> Result<Vec<u64>> {
        self.check(what, x)?;
        self.check(what, cross)?;
        let p = self.slots.p as u128;
        Ok(x.iter()
            .zip(cross)
            .map(|(&v, &c)| ((v as u128 * v as u128 + c as u128) % p) as u64)
            .collect())
    }

    /// The noise (log2 σ) of the response before flooding: a fresh encryption times
    /// a plaintext with arbitrary coefficients.
    pub fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        m.mult(m.fresh)
    }
}

impl LinearLayer for SquareLayout {
    type Encoded<B: Backend> = Vec<B::PreparedPt>;
    fn method_name(&self) -> String {
        "square".into()
    }
    fn galois(&self) -> GaloisSpec {
        GaloisSpec::none()
    }
    fn query_cts(&self) -> usize {
        self.cts()
    }
    fn output_cts(&self) -> usize {
        self.cts()
    }
    fn input_len(&self) -> usize {
        self.count
    }
    fn weight_len(&self) -> usize {
        self.count
    }
    fn kernel_noise(&self, m: &NoiseModel) -> f64 {
        SquareLayout::kernel_noise(self, m)
    }
    fn flood_bits(&self, params: &Params) -> Result<u32> {
        let model = self.query_model(params);
        let kernel = self.kernel_noise(&model);
        if model.affords(kernel) {
            Ok(model.flood_bits(kernel))
        } else {
            Err(KernelError::NoiseBudget {
                method: "square".into(),
                params: params.name().to_string(),
                needed: model.needed_bits(kernel),
                available: model.log_q.floor() as u32,
                suggestion: "preset n8192".into(),
            })
        }
    }
    /// `w` is the server's share b (values in [0, p)); encodes 2b.
    fn encode_weights<B: Backend>(&self, b: &B, w: &[i64]) -> Result<Vec<B::PreparedPt>> {
        let p = self.slots.p;
        let share: Vec<u64> = w.iter().map(|&v| v.rem_euclid(p as i64) as u64).collect();
        if let Some((index, &value)) = w.iter().enumerate().find(|(_, &v)| v < 0 || v as u64 >= p) {
            return Err(KernelError::WeightRange { index, value, p });
        }
        self.check("server share", &share)?;
        share
            .chunks(self.slots.n)
            .map(|chunk| {
                let mut v: Vec<u64> = chunk
                    .iter()
                    .map(|&x| (2 * x as u128 % p as u128) as u64)
                    .collect();
                v.resize(self.slots.n, 0);
                Ok(b.prepare(&v)?)
            })
            .collect()
    }
    fn query_values(&self, x: &[u64]) -> Result<Vec<Vec<u64>>> {
        self.check("client share", x)?;
        Ok(x.chunks(self.slots.n)
            .map(|chunk| {
                let mut v = chunk.to_vec();
                v.resize(self.slots.n, 0);
                v
            })
            .collect())
    }
    fn compute<B: Backend>(
        &self,
        b: &B,
        m: &Vec<B::PreparedPt>,
        q: &[B::Ct],
    ) -> Result<Vec<B::Ct>> {
        if q.len() != self.cts() || m.len() != self.cts() {
            return Err(KernelError::CiphertextCount {
                what: "query",
                expected: self.cts(),
                actual: q.len(),
            });
        }
        q.iter()
            .zip(m)
            .map(|(c, pt)| Ok(b.mul_plain(c, pt)?))
            .collect()
    }
    fn finish(&self, slots: &[Vec<u64>]) -> Result<Vec<u64>> {
        if slots.len() != self.cts() {
            return Err(KernelError::CiphertextCount {
                what: "response",
                expected: self.cts(),
                actual: slots.len(),
            });
        }
        Ok(slots.iter().flatten().take(self.count).copied().collect())
    }
}
