//! OT flavours on top of the session's silent COTs, over a [`net::Channel`]: correlated,
//! random, chosen-message 1-of-2 and chosen-message 1-of-2^k (k ≤ 8).
//!
//! The party that calls a `*_send` method is the OT sender and uses the pool of the
//! direction it sends in; the peer calls the matching `*_receive`. Each call first
//! reserves the COTs (a refill flight when the pool is short; both sides agree on
//! that from the count alone).
//!
//! * correlated: the COTs themselves (`w = v ⊕ b·Δ`), no traffic;
//! * random: `(H(v), H(v ⊕ Δ))` / `(b, H(w))` (IKNP-style hashing, [`crate::hash`]);
//! * chosen 1-of-2^k: `k` COTs per instance ([`crate::kot`]); the receiver sends
//!   `δ = x ⊕ c` (`k` bits), the sender `m_j ⊕ pad(j ⊕ δ)` for all `j` (`2^k` blocks),
//!   the receiver unmasks `m_x` with `pad(c)`: `k` bits + `2^k·128` bits, one round
//!   trip, `k` COTs. Chosen 1-of-2 is the case `k = 1`.

use net::Channel;

use crate::bits::{BitReader, BitWriter};
use crate::error::{expect_len, OtError, Result};
use crate::hash::Tccr;
use crate::kot;
use crate::session::{Cots, Dir, OtSession};
use crate::silent::bytes_to_blocks;

impl OtSession {
    fn reserve_dir<C: Channel>(&mut self, ch: &mut C, dir: Dir, n: usize) -> Result<()> {
        match dir {
            Dir::Sc => self.reserve(ch, n, 0),
            Dir::Cs => self.reserve(ch, 0, n),
        }
    }

    fn take_sent<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(u128, Vec<u128>, u64)> {
        let dir = Dir::sent_by(self.role());
        self.reserve_dir(ch, dir, n)?;
        match &mut self.take(dir, n)? {
            Cots::Send { delta, v, first } => Ok((*delta, std::mem::take(v), *first)),
            Cots::Recv { .. } => Err(OtError::Internal("sender pool returned receiver COTs")),
        }
    }

    fn take_received<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(Vec<u128>, u64)> {
        let dir = Dir::sent_by(self.role().other());
        self.reserve_dir(ch, dir, n)?;
        match &mut self.take(dir, n)? {
            Cots::Recv { w, first } => Ok((std::mem::take(w), *first)),
            Cots::Send { .. } => Err(OtError::Internal("receiver pool returned sender COTs")),
        }
    }

    /// `n` correlated OTs as sender: `(Δ, v)`; the receiver holds `v_i ⊕ b_i·Δ`.
    pub fn cot_send<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(u128, Vec<u128>)> {
        let (d, v, _) = self.take_sent(ch, n)?;
        Ok((d, v))
    }

    /// `n` correlated OTs as receiver: choice bits `b` and `w = v ⊕ b·Δ`.
    pub fn cot_receive<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
    ) -> Result<(Vec<bool>, Vec<u128>)> {
        let (w, _) = self.take_received(ch, n)?;
        Ok((w.iter().map(|x| x & 1 == 1).collect(), w))
    }

    /// `n` random OTs as sender: the pairs `(m₀, m₁)`.
    pub fn rot_send<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<Vec<[u128; 2]>> {
        let (d, v, first) = self.take_sent(ch, n)?;
        let dir = Dir::sent_by(self.role()).id();
        let pads = kot::sender_pads(d, &v, first, dir, 1, &mut Tccr::new());
        Ok(pads.chunks_exact(2).map(|p| [p[0], p[1]]).collect())
    }

    /// `n` random OTs as receiver: random choices `b` and `m_b`.
    pub fn rot_receive<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
    ) -> Result<(Vec<bool>, Vec<u128>)> {
        let (w, first) = self.take_received(ch, n)?;
        let dir = Dir::sent_by(self.role().other()).id();
        let (c, p) = kot::receiver_pads(&w, first, dir, 1, &mut Tccr::new());
        Ok((c.into_iter().map(|c| c == 1).collect(), p))
    }

    /// Chosen-message 1-of-2 OT as sender.
    pub fn ot_send<C: Channel>(&mut self, ch: &mut C, msgs: &[[u128; 2]]) -> Result<()> {
        let m: Vec<Vec<u128>> = msgs.iter().map(|m| m.to_vec()).collect();
        self.kot_send(ch, 1, &m)
    }

    /// Chosen-message 1-of-2 OT as receiver: `msgs[i][choices[i]]`.
    pub fn ot_receive<C: Channel>(&mut self, ch: &mut C, choices: &[bool]) -> Result<Vec<u128>> {
        let c: Vec<u8> = choices.iter().map(|&b| b as u8).collect();
        self.kot_receive(ch, 1, &c)
    }

    /// Chosen-message 1-of-2^k OT as sender (`1 ≤ k ≤ 8`): `msgs[i]` holds the `2^k`
    /// messages of instance `i`.
    pub fn kot_send<C: Channel>(&mut self, ch: &mut C, k: usize, msgs: &[Vec<u128>]) -> Result<()> {
        check_k(k)?;
        let n = 1usize << k;
        if let Some(bad) = msgs.iter().position(|m| m.len() != n) {
            return Err(OtError::InvalidSpec(format!(
                "instance {bad} has {} messages, 1-of-2^{k} needs {n}",
                msgs[bad].len()
            )));
        }
        let inst = msgs.len();
        let (d, v, first) = self.take_sent(ch, inst * k)?;
        let dir = Dir::sent_by(self.role()).id();
        let pads = kot::sender_pads(d, &v, first, dir, k, &mut Tccr::new());
        let derand = ch.recv_at_most((inst * k).div_ceil(8))?;
        expect_len(
            "1-of-2^k derandomisation bits",
            (inst * k).div_ceil(8),
            derand.len(),
        )?;
        let mut r = BitReader::new(&derand);
        let mut out = Vec::with_capacity(16 * n * inst);
        for (i, m) in msgs.iter().enumerate() {
            let delta = r.read(k as u32) as usize;
            for (j, mj) in m.iter().enumerate() {
                out.extend_from_slice(&(mj ^ pads[i * n + (j ^ delta)]).to_le_bytes());
            }
        }
        ch.send(&out)?;
        Ok(())
    }

    /// Chosen-message 1-of-2^k OT as receiver: `choices[i] < 2^k`; returns the chosen
    /// messages.
    pub fn kot_receive<C: Channel>(
        &mut self,
        ch: &mut C,
        k: usize,
        choices: &[u8],
    ) -> Result<Vec<u128>> {
        check_k(k)?;
        let n = 1usize << k;
        if let Some(bad) = choices.iter().position(|&c| c as usize >= n) {
            return Err(OtError::InvalidSpec(format!(
                "choice {bad} = {} is not below 2^{k}",
                choices[bad]
            )));
        }
        let inst = choices.len();
        let (w, first) = self.take_received(ch, inst * k)?;
        let dir = Dir::sent_by(self.role().other()).id();
        let (c, pads) = kot::receiver_pads(&w, first, dir, k, &mut Tccr::new());
        let mut bw = BitWriter::with_capacity(inst * k);
        for (x, ci) in choices.iter().zip(&c) {
            bw.push((x ^ ci) as u64, k as u32);
        }
        ch.send(&bw.finish())?;
        let y = ch.recv_at_most(16 * n * inst)?;
        expect_len("1-of-2^k messages", 16 * n * inst, y.len())?;
        let y = bytes_to_blocks(&y);
        Ok((0..inst)
            .map(|i| y[i * n + choices[i] as usize] ^ pads[i])
            .collect())
    }
}

fn check_k(k: usize) -> Result<()> {
    if (1..=8).contains(&k) {
        Ok(())
    } else {
        Err(OtError::InvalidSpec(format!(
            "1-of-2^k OT needs 1 ≤ k ≤ 8, not {k}"
        )))
    }
}
