//! helina's HE layer: BFV parameter sets, the [`Backend`] trait every kernel is written
//! against, and its three implementations:
//!
//! - [`Bfv`]: fhe.rs 0.1.1 (`tfhe-ntt`) with hoisted rotations, NTT-form prepared plaintexts
//!   (transformed with tfhe-ntt 0.7's AVX-512 code where the CPU has it)
//!   and fused sums of products; the only code in helina that talks to fhe.rs.
//! - [`Sim`]: a cleartext simulator with identical semantics (slots, and polynomials in
//!   Z_p\[X\]/(X^n + 1) for coefficient encoding).
//! - [`Count`]: data-free, shapes only, for op-count tables of whole networks.
//!
//! [`Counting`] wraps any of them and counts every operation, so a kernel reports the same
//! counts on all three.
//!
//! Two plaintext encodings ([`Encoding`]): slots (`encode`, `prepare`, `dot`, rotations,
//! `decrypt`) and coefficients (`encode_coeffs`, `prepare_coeffs` with weights lifted
//! centred, `dot_coeffs` = negacyclic polynomial products, `decrypt_coeffs`, and
//! `select_coeffs`, which sends c0 only at the coefficients a client reads) for
//! Cheetah's rotation-free kernels. Ciphertexts are the same objects in both.
//!
//! What is secret from whom: the client's secret key never leaves a client [`Bfv`]; a
//! server [`Bfv`] (made by [`Bfv::server`]) holds only the public key and the Galois keys
//! the client declared.

mod backend;
mod bfv;
mod count;
mod error;
mod ntt;
mod params;
mod plain_ntt;
mod rounding;
mod sim;
mod wire;

pub use backend::{check_runs, Backend, Dir, Encoding, GaloisSpec, Layout, OpCounts, SlotInfo};
pub use bfv::{
    flood_noise_chunks, Bfv, BfvCt, BfvHoisted, BfvPrepared, BfvPt, PublicKeys,
    FLOOD_NOISE_CHUNK_BITS,
};
pub use count::{Count, Counting, Shape, ShapeCt};
pub use error::{HeError, Result};
pub use ntt::strided_transform_len;
pub use params::{
    batching_prime, max_log_q_128, Moduli, Params, ParamsBuilder, ParamsSpec, NTT_BACKEND, P32,
    PRESETS, SECRET_KEY_VARIANCE,
};
pub use plain_ntt::PlainNtt;
pub use rounding::{
    bound_log2 as rounding_bound_log2, candidates as rounding_candidates, Dropped, Rounding,
};
pub use sim::{random_slots, Sim, SimCt, SimPt};
