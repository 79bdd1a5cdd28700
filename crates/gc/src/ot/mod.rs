//! Oblivious transfer, layered: a base OT ([`BaseOt`], implemented by
//! [`ChouOrlandi`]) seeds IKNP OT extension ([`IknpSender`], [`IknpReceiver`]),
//! which is generic over the base OT.
//!
//! IKNP gives correlated OT (`q_i = t_i ⊕ c_i·Δ`, the form garbled-circuit input
//! labels need, with `Δ` the garbler's free-XOR offset, as in emp-toolkit), random
//! OT (hashed with a tweakable correlation-robust hash) and chosen-message OT on top.

pub mod chou_orlandi;
pub mod iknp;

pub use chou_orlandi::ChouOrlandi;
pub use iknp::{IknpReceiver, IknpSender, KAPPA};

use crate::error::Result;
use crate::label::Block;
use net::Channel;
use rand::{CryptoRng, RngCore};

/// A base OT producing random 128-bit keys: the sender gets `n` key pairs, the
/// receiver the key of its choice in each pair.
pub trait BaseOt {
    /// Sender side: `n` random key pairs.
    fn send<C: Channel, R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut C,
        rng: &mut R,
        n: usize,
    ) -> Result<Vec<[Block; 2]>>;
    /// Receiver side: the chosen key of each pair.
    fn receive<C: Channel, R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut C,
        rng: &mut R,
        choices: &[bool],
    ) -> Result<Vec<Block>>;
}
