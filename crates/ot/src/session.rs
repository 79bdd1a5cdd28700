//! The OT session: base OTs, IKNP and the first silent batch once, then a pool of
//! COTs in each direction that serves every later layer, refilled one silent batch
//! (one flight) at a time.
//!
//! Two directions, each with its own `Δ` (random, least significant bit 1):
//! **SC** (server = COT sender, client = receiver) and **CS** (the reverse). Both are
//! needed because the nonlinear layers multiply a bit of one party with a value of the
//! other in both orientations (bit triples, multiplexers).
//!
//! Setup, in order ([`OtSession::server`] / [`OtSession::client`], 7 flights):
//! 1. SC: Chou-Orlandi (client = base-OT sender, 128 OTs) seeds IKNP with the
//!    server's `Δ_S`; IKNP extends `t·h` COTs, the base COTs of the first SC batch.
//! 2. CS: the same with the roles swapped (`Δ_C`).
//! 3. The server sends a 32-byte seed for the common re-sharing masks and the first SC
//!    batch message; the client answers with the first CS batch message.
//!
//! Cost with the default parameters: 2 × (4 128 B base OT + 81 920 B IKNP columns +
//! 81 937 B batch) plus framing ≈ 336 kB, once per session.
//!
//! **Lockstep by construction.** A refill is a flight both parties must run at the
//! same point. Whether one runs depends only on the pools' sizes and the request, so
//! both parties take the same sequence of requests: a step's takes are a function of
//! its shape alone (`program::Shape::cot_takes`, [`Dir::CANONICAL`] order where a step
//! needs both directions, whichever party sends), checked take by take. Every batch
//! message carries its direction, batch index and first COT position, checked by the
//! receiver before it expands anything, and each layer's hello carries both pools'
//! positions: any difference is an [`OtError::SpecMismatch`] where it arises.

use std::time::Instant;

use gc::ot::{ChouOrlandi, IknpReceiver, IknpSender};
use net::Channel;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

use crate::error::{expect_len, OtError, Result};
use crate::silent::{Pool, SilentParams, SilentReceiver, SilentSender};

/// Which party this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Holds the model; COT sender of direction SC.
    Server,
    /// Holds the input; COT sender of direction CS.
    Client,
}

impl Role {
    /// The other party.
    pub fn other(self) -> Role {
        match self {
            Role::Server => Role::Client,
            Role::Client => Role::Server,
        }
    }
}

/// A COT direction, named by its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dir {
    /// Server sends (holds `Δ_S`), client receives.
    Sc,
    /// Client sends (holds `Δ_C`), server receives.
    Cs,
}

impl Dir {
    /// The direction in which `role` is the sender.
    pub fn sent_by(role: Role) -> Dir {
        match role {
            Role::Server => Dir::Sc,
            Role::Client => Dir::Cs,
        }
    }
    /// The sender.
    pub fn sender(self) -> Role {
        match self {
            Dir::Sc => Role::Server,
            Dir::Cs => Role::Client,
        }
    }
    /// The order in which both parties take COTs of the two directions whenever one
    /// step needs both (whichever party sends): the pools' refills follow the
    /// sequence of takes, so it must not depend on the role.
    pub const CANONICAL: [Dir; 2] = [Dir::Sc, Dir::Cs];

    pub(crate) fn id(self) -> u8 {
        match self {
            Dir::Sc => 0,
            Dir::Cs => 1,
        }
    }
}

/// Traffic and time of the session's own work (setup and refills).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStats {
    /// Bytes of the setup (both directions, frame headers included).
    pub setup_bytes: u64,
    /// Wall time of the setup on this side.
    pub setup_ms: f64,
    /// Silent batches generated in direction SC (the first included).
    pub batches_sc: u64,
    /// Silent batches generated in direction CS.
    pub batches_cs: u64,
    /// Bytes of all refills after the setup (both directions, headers included).
    pub refill_bytes: u64,
    /// Wall time spent in refills after the setup on this side.
    pub refill_ms: f64,
}

/// The most COTs [`OtSession::take_each`] hands out at once: about one batch, so that
/// a window is consumed while it is in the cache.
pub(crate) const TAKE_WINDOW: usize = 1 << 18;

/// COTs handed out of a pool.
#[derive(Debug)]
pub(crate) enum Cots {
    /// Sender side: `v_i` (the receiver holds `v_i ⊕ b_i·Δ`).
    Send {
        /// The offset.
        delta: u128,
        /// `v_i`.
        v: Vec<u128>,
        /// Global index of `v[0]`.
        first: u64,
    },
    /// Receiver side: `w_i`, choice bit `b_i = lsb(w_i)`.
    Recv {
        /// `w_i`.
        w: Vec<u128>,
        /// Global index of `w[0]`.
        first: u64,
    },
}

impl Drop for Cots {
    fn drop(&mut self) {
        match self {
            Cots::Send { delta, v, .. } => {
                delta.zeroize();
                v.zeroize();
            }
            Cots::Recv { w, .. } => w.zeroize(),
        }
    }
}

/// A session between one server and one client: pools of silent COTs in both
/// directions, set up once and shared by every layer.
pub struct OtSession {
    role: Role,
    params: SilentParams,
    sender: SilentSender,
    receiver: SilentReceiver,
    send_pool: Pool,
    recv_pool: Pool,
    mask_seed: [u8; 32],
    layer: u64,
    stats: SessionStats,
}

impl std::fmt::Debug for OtSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtSession")
            .field("role", &self.role)
            .field("params", &self.params)
            .field("send_pool", &self.send_pool)
            .field("recv_pool", &self.recv_pool)
            .field("layer", &self.layer)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Drop for OtSession {
    fn drop(&mut self) {
        self.mask_seed.zeroize();
    }
}

/// The refill rule of a take of `n` COTs from a direction holding `available`, the
/// other holding `other`: the rounds to run (one batch of the direction each) and
/// whether the first also carries a batch of the other direction (when that pool is
/// below half a batch). [`OtSession`]'s takes run it; [`crate::PoolModel`] counts it.
pub(crate) fn refill_rounds(
    available: usize,
    other: usize,
    n: usize,
    usable: usize,
) -> (usize, bool) {
    let rounds = n.saturating_sub(available).div_ceil(usable);
    (rounds, rounds > 0 && other < usable / 2)
}

fn bytes(c: net::Counters) -> u64 {
    c.bytes_sent + c.bytes_received
}

impl OtSession {
    /// The server's side of the setup with the default parameters.
    pub fn server<C: Channel>(ch: &mut C) -> Result<Self> {
        Self::new(ch, Role::Server, SilentParams::DEFAULT)
    }

    /// The client's side of the setup with the default parameters.
    pub fn client<C: Channel>(ch: &mut C) -> Result<Self> {
        Self::new(ch, Role::Client, SilentParams::DEFAULT)
    }

    /// Either side with explicit parameters (both parties must pass the same; a
    /// difference shows as a length error in the first batch).
    pub fn new<C: Channel>(ch: &mut C, role: Role, params: SilentParams) -> Result<Self> {
        params.validate()?;
        let t0 = Instant::now();
        let c0 = ch.counters();
        let mut rng = ChaCha20Rng::from_rng(&mut rand::rng());
        let n = params.reserve();
        let fresh_delta = |rng: &mut ChaCha20Rng| rng.random::<u128>() | 1;
        let mut choices: Vec<bool> = (0..n).map(|_| rng.random()).collect();
        // SC then CS: each direction's silent sender is IKNP's sender.
        let (sender, receiver) = match role {
            Role::Server => {
                let delta = fresh_delta(&mut rng);
                let mut iknp = IknpSender::setup(&mut ChouOrlandi, ch, &mut rng, Some(delta))?;
                let v = iknp.extend_cot(ch, n)?;
                let sender = SilentSender::new(params, delta, v, Dir::Sc.id());
                let mut iknp = IknpReceiver::setup(&mut ChouOrlandi, ch, &mut rng)?;
                let w = iknp.extend_cot(ch, &choices)?;
                let receiver =
                    SilentReceiver::new(params, w, std::mem::take(&mut choices), Dir::Cs.id());
                (sender, receiver)
            }
            Role::Client => {
                let mut iknp = IknpReceiver::setup(&mut ChouOrlandi, ch, &mut rng)?;
                let w = iknp.extend_cot(ch, &choices)?;
                let receiver =
                    SilentReceiver::new(params, w, std::mem::take(&mut choices), Dir::Sc.id());
                let delta = fresh_delta(&mut rng);
                let mut iknp = IknpSender::setup(&mut ChouOrlandi, ch, &mut rng, Some(delta))?;
                let v = iknp.extend_cot(ch, n)?;
                let sender = SilentSender::new(params, delta, v, Dir::Cs.id());
                (sender, receiver)
            }
        };
        let mut s = OtSession {
            role,
            params,
            sender,
            receiver,
            send_pool: Pool::default(),
            recv_pool: Pool::default(),
            mask_seed: [0; 32],
            layer: 0,
            stats: SessionStats::default(),
        };
        match role {
            Role::Server => {
                rng.fill_bytes(&mut s.mask_seed);
                ch.send(&s.mask_seed)?;
                s.run_batches(ch, 1, 1)?;
            }
            Role::Client => {
                let seed = ch.recv_at_most(32)?;
                expect_len("mask seed", 32, seed.len())?;
                s.mask_seed.copy_from_slice(&seed);
                s.run_batches(ch, 1, 1)?;
            }
        }
        s.stats.setup_bytes = bytes(ch.counters() - c0);
        s.stats.setup_ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok(s)
    }

    /// This party.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The silent-OT parameters.
    pub fn params(&self) -> SilentParams {
        self.params
    }

    /// Setup and refill traffic so far.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Layers run so far (the next layer's index).
    pub fn layers(&self) -> u64 {
        self.layer
    }

    /// COTs left in the pool of direction `dir`.
    pub fn available(&self, dir: Dir) -> usize {
        self.pool(dir).available()
    }

    /// Global index of the next COT of direction `dir` (equal on both sides).
    pub fn position(&self, dir: Dir) -> u64 {
        self.pool(dir).next_index()
    }

    /// Amortised bytes of silent OT per usable COT (one batch message and its frame
    /// header over the COTs it yields).
    pub fn bytes_per_cot(&self) -> f64 {
        (self.params.message_bytes() as u64 + net::FRAME_HEADER_BYTES) as f64
            / self.params.usable() as f64
    }

    fn pool(&self, dir: Dir) -> &Pool {
        if dir.sender() == self.role {
            &self.send_pool
        } else {
            &self.recv_pool
        }
    }

    /// Runs `sc` batches in direction SC and `cs` in direction CS (the same numbers
    /// on both sides). Round `r` carries batch `r` of each direction that still needs
    /// one, in two alternating flights: the server's message, then the client's. Each
    /// side expands its sender trees first (the client before it even reads the
    /// server's message), sends, and compresses them in a second thread while it reads
    /// and expands the peer's message and compresses that; the next round waits for
    /// both, since a direction's next batch needs the previous one's reserve.
    fn run_batches<C: Channel>(&mut self, ch: &mut C, sc: usize, cs: usize) -> Result<()> {
        let (mine, theirs) = match self.role {
            Role::Server => (sc, cs),
            Role::Client => (cs, sc),
        };
        let role = self.role;
        let msg_len = self.params.message_bytes();
        for r in 0..mine.max(theirs) {
            let (send, recv) = (r < mine, r < theirs);
            let (snd, rcv) = (&mut self.sender, &mut self.receiver);
            let (sp, rp) = (&mut self.send_pool, &mut self.recv_pool);
            std::thread::scope(|scope| -> Result<()> {
                let msg = send.then(|| snd.expand(sp));
                let mut worker = None;
                let send_and_compress = |ch: &mut C| -> Result<()> {
                    if let Some(msg) = &msg {
                        ch.send(msg)?;
                        worker = Some(scope.spawn(move || snd.finish(sp)));
                    }
                    Ok(())
                };
                let theirs = match role {
                    Role::Server => {
                        send_and_compress(ch)?;
                        recv.then(|| ch.recv_at_most(msg_len)).transpose()?
                    }
                    Role::Client => {
                        let m = recv.then(|| ch.recv_at_most(msg_len)).transpose()?;
                        send_and_compress(ch)?;
                        m
                    }
                };
                if let Some(m) = theirs {
                    rcv.expand(&m, rp)?;
                    rcv.finish(rp);
                }
                worker
                    .map_or(Ok(()), |h| h.join())
                    .map_err(|_| OtError::Internal("silent OT worker panicked"))
            })?;
        }
        self.stats.batches_sc += sc as u64;
        self.stats.batches_cs += cs as u64;
        Ok(())
    }

    /// Makes sure `sc` COTs of direction SC and `cs` of direction CS are available,
    /// running refills as needed (both parties call this with the same numbers).
    pub fn reserve<C: Channel>(&mut self, ch: &mut C, sc: usize, cs: usize) -> Result<()> {
        let per = self.params.usable();
        let short = |have: usize, need: usize| need.saturating_sub(have).div_ceil(per);
        let b_sc = short(self.available(Dir::Sc), sc);
        let b_cs = short(self.available(Dir::Cs), cs);
        if b_sc + b_cs == 0 {
            return Ok(());
        }
        let t0 = Instant::now();
        let c0 = ch.counters();
        self.run_batches(ch, b_sc, b_cs)?;
        self.stats.refill_bytes += bytes(ch.counters() - c0);
        self.stats.refill_ms += t0.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }

    /// `n` COTs of direction `dir` (a multiple of `unit`), handed to `consume` in
    /// windows of whole `unit`s in order (at most [`TAKE_WINDOW`] COTs each), refilling
    /// that direction while its pool is short: both parties take the same sequence of
    /// counts, so they refill at the same points. The refills are the ones
    /// [`refill_rounds`] counts for the whole take (the first round also carries a
    /// batch of the other direction if that pool is below half a batch: a round with
    /// both directions keeps both parties' cores busy, since each side compresses its
    /// sender batch while it expands and compresses its receiver batch), run as the
    /// pool runs dry, so that each batch is consumed while it is in the cache and no
    /// take is held whole: at most one batch (plus half a batch in the other
    /// direction) and one window are held, whatever `n`.
    pub(crate) fn take_each<C: Channel>(
        &mut self,
        ch: &mut C,
        dir: Dir,
        n: usize,
        unit: usize,
        mut consume: impl FnMut(&Cots),
    ) -> Result<()> {
        if unit == 0 || !n.is_multiple_of(unit) {
            return Err(OtError::Internal("COT take not a multiple of its unit"));
        }
        let other = match dir {
            Dir::Sc => Dir::Cs,
            Dir::Cs => Dir::Sc,
        };
        let (mut rounds, pair) = refill_rounds(
            self.available(dir),
            self.available(other),
            n,
            self.params.usable(),
        );
        let mut first_round = true;
        let window = (TAKE_WINDOW / unit).max(1) * unit;
        let mut left = n;
        while left > 0 {
            let now = left.min(self.available(dir)).min(window) / unit * unit;
            if now > 0 {
                consume(&self.take(dir, now)?);
                left -= now;
                continue;
            }
            if rounds == 0 {
                return Err(OtError::Internal("COT take ran past its refills"));
            }
            let t0 = Instant::now();
            let c0 = ch.counters();
            let that = (pair && first_round) as usize;
            match dir {
                Dir::Sc => self.run_batches(ch, 1, that)?,
                Dir::Cs => self.run_batches(ch, that, 1)?,
            }
            self.stats.refill_bytes += bytes(ch.counters() - c0);
            self.stats.refill_ms += t0.elapsed().as_secs_f64() * 1e3;
            rounds -= 1;
            first_round = false;
        }
        // the rounds `refill_rounds` counted are all run (`PoolModel` counts them)
        if rounds > 0 {
            return Err(OtError::Internal("COT take left refills unrun"));
        }
        Ok(())
    }

    /// `n` COTs of direction `dir` (after [`OtSession::reserve`]).
    pub(crate) fn take(&mut self, dir: Dir, n: usize) -> Result<Cots> {
        if dir.sender() == self.role {
            let (v, first) = self
                .send_pool
                .take(n)
                .ok_or(OtError::Misuse("COT pool exhausted (reserve first)"))?;
            Ok(Cots::Send {
                delta: self.sender.delta(),
                v,
                first,
            })
        } else {
            let (w, first) = self
                .recv_pool
                .take(n)
                .ok_or(OtError::Misuse("COT pool exhausted (reserve first)"))?;
            Ok(Cots::Recv { w, first })
        }
    }

    /// Starts the next layer: returns its index and a generator of the common masks
    /// (the same stream on both sides).
    pub(crate) fn next_layer(&mut self) -> (u64, ChaCha20Rng) {
        let l = self.layer;
        self.layer += 1;
        let mut rng = ChaCha20Rng::from_seed(self.mask_seed);
        rng.set_stream(l);
        (l, rng)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use net::{Link, MemChannel};

    use super::*;

    /// What one side saw of a take: the windows (first index, COTs), `Δ` on the
    /// sender's side, and the session's statistics after it.
    type Seen = (Vec<(u64, Vec<u128>)>, Option<u128>, SessionStats);

    /// One take of `n` COTs in `unit`s on both sides, from a fresh session, after a
    /// take of `warm`.
    fn both_take(params: SilentParams, warm: usize, n: usize, unit: usize) -> [Seen; 2] {
        let (mut cch, mut sch) =
            MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE);
        let go = move |ch: &mut MemChannel, role: Role| {
            let mut s = OtSession::new(ch, role, params).unwrap();
            // a take that is not whole units is refused before anything is exchanged
            assert!(matches!(
                s.take_each(ch, Dir::Sc, unit + 1, unit, |_| {}),
                Err(OtError::Internal(_))
            ));
            // a take before, so that the measured one starts mid-batch
            s.take_each(ch, Dir::Sc, warm, 1, |_| {}).unwrap();
            let (mut seen, mut delta) = (Vec::new(), None);
            s.take_each(ch, Dir::Sc, n, unit, |c| match c {
                Cots::Send { delta: d, v, first } => {
                    delta = Some(*d);
                    seen.push((*first, v.clone()));
                }
                Cots::Recv { w, first } => seen.push((*first, w.clone())),
            })
            .unwrap();
            (seen, delta, s.stats())
        };
        let h = std::thread::spawn(move || go(&mut sch, Role::Server));
        let c = go(&mut cch, Role::Client);
        [h.join().unwrap(), c]
    }

    #[test]
    fn a_take_is_handed_out_in_order_in_whole_units_batch_by_batch() {
        let params = SilentParams::with_depth(5);
        let usable = params.usable();
        let (warm, unit) = (usable / 3, 3);
        let n = unit * (3 * usable / unit + 5); // more than three batches
        let [(sv, delta, sstats), (cw, _, cstats)] = both_take(params, warm, n, unit);
        let delta = delta.unwrap();
        for seen in [&sv, &cw] {
            // contiguous global indices from where the first take ended, whole units
            let mut at = seen[0].0;
            for (first, v) in seen.iter() {
                assert_eq!(*first, at);
                assert!(v.len().is_multiple_of(unit) && !v.is_empty());
                assert!(v.len() <= TAKE_WINDOW + unit);
                at += v.len() as u64;
            }
            assert_eq!(at - seen[0].0, n as u64);
            // more than one window: the take was not held whole
            assert!(seen.len() > 3);
        }
        // the windows are the same COTs on both sides: w = v ⊕ lsb(w)·Δ
        let v: Vec<u128> = sv.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        let w: Vec<u128> = cw.iter().flat_map(|(_, w)| w.iter().copied()).collect();
        assert_eq!(v.len(), w.len());
        for (v, w) in v.iter().zip(&w) {
            assert_eq!(*w, if w & 1 == 1 { v ^ delta } else { *v });
        }
        // the batches run are those `refill_rounds` counts (as `PoolModel` does), after
        // the setup's first batch of each direction; the warm-up take needs none
        let left = usable - warm;
        let (rounds, pair) = refill_rounds(left, usable, n, usable);
        assert!(rounds >= 3 && !pair);
        for st in [sstats, cstats] {
            assert_eq!((st.batches_sc, st.batches_cs), (1 + rounds as u64, 1));
        }
    }
}
