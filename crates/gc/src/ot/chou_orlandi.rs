//! Chou-Orlandi "simplest OT" (LATINCRYPT 2015) over the Ristretto group, batched:
//! one sender point `A = a·G` for all instances; receiver `j` with choice `c_j`
//! sends `B_j = b_j·G + c_j·A`. Keys are hashed with the whole transcript, the
//! published fix of the original (which hashed only the point):
//! `k_c = SHA-256("helina-co" ‖ j ‖ A ‖ B_j ‖ P)` truncated to 128 bits, with
//! `P = a·B_j` (key 0), `a·(B_j − A)` (key 1) for the sender and `b_j·A` for the receiver.
//! Semi-honest security; one round trip for any number of instances.

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use net::Channel;
use rand::{CryptoRng, RngCore};
use sha2::{Digest, Sha256};

use super::BaseOt;
use crate::error::{GcError, Result};
use crate::label::Block;

/// The Chou-Orlandi base OT.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChouOrlandi;

fn random_scalar<R: RngCore>(rng: &mut R) -> Scalar {
    let mut w = [0u8; 64];
    rng.fill_bytes(&mut w);
    Scalar::from_bytes_mod_order_wide(&w)
}

fn kdf(j: usize, a: &[u8; 32], b: &[u8; 32], p: &RistrettoPoint) -> Block {
    let mut h = Sha256::new();
    h.update(b"helina-co");
    h.update((j as u64).to_le_bytes());
    h.update(a);
    h.update(b);
    h.update(p.compress().as_bytes());
    let d = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    u128::from_le_bytes(k)
}

fn decode_point(bytes: &[u8], index: usize) -> Result<([u8; 32], RistrettoPoint)> {
    let mut a = [0u8; 32];
    if bytes.len() != 32 {
        return Err(GcError::Length {
            what: "base OT point",
            expected: 32,
            actual: bytes.len() as u64,
        });
    }
    a.copy_from_slice(bytes);
    let p = CompressedRistretto(a)
        .decompress()
        .ok_or(GcError::InvalidPoint { index })?;
    Ok((a, p))
}

impl BaseOt for ChouOrlandi {
    fn send<C: Channel, R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut C,
        rng: &mut R,
        n: usize,
    ) -> Result<Vec<[Block; 2]>> {
        let a = random_scalar(rng);
        let big_a = RistrettoPoint::mul_base(&a);
        let a_bytes = big_a.compress().to_bytes();
        ch.send(&a_bytes)?;
        let msg = ch.recv_at_most(32 * n)?;
        if msg.len() != 32 * n {
            return Err(GcError::Length {
                what: "base OT receiver points (bytes)",
                expected: 32 * n as u64,
                actual: msg.len() as u64,
            });
        }
        let a_times_a = a * big_a;
        msg.chunks_exact(32)
            .enumerate()
            .map(|(j, c)| {
                let (b_bytes, b) = decode_point(c, j)?;
                let ab = a * b;
                Ok([
                    kdf(j, &a_bytes, &b_bytes, &ab),
                    kdf(j, &a_bytes, &b_bytes, &(ab - a_times_a)),
                ])
            })
            .collect()
    }

    fn receive<C: Channel, R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut C,
        rng: &mut R,
        choices: &[bool],
    ) -> Result<Vec<Block>> {
        let (a_bytes, big_a) = decode_point(&ch.recv_at_most(32)?, 0)?;
        let mut out = Vec::with_capacity(choices.len());
        let mut msg = Vec::with_capacity(32 * choices.len());
        let mut bs = Vec::with_capacity(choices.len());
        for &c in choices {
            let b = random_scalar(rng);
            let mut big_b = RistrettoPoint::mul_base(&b);
            if c {
                big_b += big_a;
            }
            let bb = big_b.compress().to_bytes();
            msg.extend_from_slice(&bb);
            bs.push((b, bb));
        }
        ch.send(&msg)?;
        for (j, (b, bb)) in bs.iter().enumerate() {
            out.push(kdf(j, &a_bytes, bb, &(b * big_a)));
        }
        Ok(out)
    }
}
