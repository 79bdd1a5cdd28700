//! helina's HE layer: BFV parameter sets, the [`Backend`] trait every kernel is written
//! against, and its three implementations:
//!
//! - [`Bfv`]: fhe.rs 0.1.1 (`tfhe-ntt`) with hoisted rotations, Shoup-form plaintexts
//!   and fused sums of products; the only code in helina that talks to fhe.rs.
//! - [`Sim`]: a cleartext slot simulator with identical semantics.
//! - [`Count`]: data-free, shapes only, for op-count tables of whole networks.
//!
//! [`Counting`] wraps any of them and counts every operation, so a kernel reports the same
//! counts on all three.
//!
//! What is secret from whom: the client's secret key never leaves a client [`Bfv`]; a
//! server [`Bfv`] (made by [`Bfv::server`]) holds only the public key and the Galois keys
//! the client declared.

mod backend;
mod bfv;
mod count;
mod error;
mod params;
mod plain_ntt;
mod sim;
mod wire;

pub use backend::{Backend, Dir, GaloisSpec, Layout, OpCounts, SlotInfo};
pub use bfv::{Bfv, BfvCt, BfvHoisted, BfvPrepared, BfvPt, PublicKeys};
pub use count::{Count, Counting, Shape, ShapeCt};
pub use error::{HeError, Result};
pub use params::{
    batching_prime, max_log_q_128, Moduli, Params, ParamsBuilder, ParamsSpec, NTT_BACKEND, P32,
    PRESETS,
};
pub use plain_ntt::PlainNtt;
pub use sim::{random_slots, Sim, SimCt};
