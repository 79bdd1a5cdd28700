#![allow(clippy::unwrap_used)]
//! Shared fixtures: one n4096 client per test binary (key generation is the slow part).
#![allow(dead_code)]

use std::sync::OnceLock;

use he::{Bfv, GaloisSpec, Params, Sim};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Steps with keys in the shared fixture.
pub const STEPS: [i64; 6] = [1, 2, 3, -1, 5, 100];

pub fn params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Params::preset("n4096").expect("preset"))
}

pub fn spec() -> GaloisSpec {
    GaloisSpec::new(STEPS).with_column()
}

pub fn client() -> &'static Bfv {
    static B: OnceLock<Bfv> = OnceLock::new();
    B.get_or_init(|| Bfv::keygen(params(), spec()).expect("keygen"))
}

pub fn sim() -> Sim {
    Sim::new(params(), spec())
}

pub fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// Independent reference: rotate each row of a 2 x n/2 vector left by k.
pub fn rotate_rows_ref(v: &[u64], k: i64) -> Vec<u64> {
    let h = v.len() / 2;
    let k = k.rem_euclid(h as i64) as usize;
    let mut out = Vec::with_capacity(v.len());
    for row in 0..2 {
        for j in 0..h {
            out.push(v[row * h + (j + k) % h]);
        }
    }
    out
}
