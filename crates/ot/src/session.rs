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
//! Cost with the default parameters: 2 × (4 128 B base OT + 70 400 B IKNP columns +
//! 147 217 B batch) plus framing ≈ 444 kB, once per session.
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

/// A run of consecutive COTs lent out of a pool without a copy
/// ([`OtSession::take_runs`]); the pool wipes them when the borrow ends.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CotRun<'a> {
    /// Sender side: `v_i` (the receiver holds `v_i ⊕ b_i·Δ`).
    Send {
        /// The offset.
        delta: u128,
        /// `v_i`.
        v: &'a [u128],
        /// Global index of `v[0]`.
        first: u64,
    },
    /// Receiver side: `w_i`, choice bit `b_i = lsb(w_i)`.
    Recv {
        /// `w_i`.
        w: &'a [u128],
        /// Global index of `w[0]`.
        first: u64,
    },
}

/// Regroups runs of COTs into runs of whole instances of `k` consecutive COTs: an
/// instance cut by the end of a run (the pool's carried COTs, a batch) is completed
/// from the next run in a scratch of at most 8 COTs, wiped after use.
struct Instances {
    k: usize,
    part: [u128; 8],
    len: usize,
    first: u64,
}

impl Instances {
    fn new(k: usize) -> Self {
        Self {
            k,
            part: [0; 8],
            len: 0,
            first: 0,
        }
    }

    /// Hands `run` (`first`: the global index of `run[0]`) on to `f` in runs of
    /// whole instances.
    fn push(&mut self, mut run: &[u128], mut first: u64, f: &mut impl FnMut(&[u128], u64)) {
        let k = self.k;
        if self.len > 0 {
            let t = (k - self.len).min(run.len());
            self.part[self.len..self.len + t].copy_from_slice(&run[..t]);
            self.len += t;
            run = &run[t..];
            first += t as u64;
            if self.len == k {
                f(&self.part[..k], self.first);
                self.part.zeroize();
                self.len = 0;
            }
        }
        let whole = run.len() / k * k;
        if whole > 0 {
            f(&run[..whole], first);
        }
        let rest = &run[whole..];
        if !rest.is_empty() {
            self.part[..rest.len()].copy_from_slice(rest);
            self.len = rest.len();
            self.first = first + whole as u64;
        }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Instances {
    fn drop(&mut self) {
        self.part.zeroize();
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

    fn pool_mut(&mut self, dir: Dir) -> &mut Pool {
        if dir.sender() == self.role {
            &mut self.send_pool
        } else {
            &mut self.recv_pool
        }
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

    /// `n` COTs of direction `dir`, lent to `f` straight out of the pool in runs of
    /// whole instances of `k` consecutive COTs (`k` in 1..=8 divides `n`): what the
    /// pool holds first, then each refill batch of that direction as it arrives (both
    /// parties take the same sequence of counts, so they refill at the same points,
    /// and [`crate::PoolModel`] counts the same rule). Nothing is copied: each run is
    /// wiped in the pool after `f` returns, and a take of many batches holds one batch
    /// at a time. The first refill round also carries a batch of the other direction
    /// if that pool is below half a batch: a round with both directions keeps both
    /// parties' cores busy (each side compresses its sender batch while it expands and
    /// compresses its receiver batch), so a paired batch costs less time than one run
    /// later on its own. At most one batch (plus half a batch in the other direction)
    /// is ever held.
    pub(crate) fn take_runs<C: Channel>(
        &mut self,
        ch: &mut C,
        dir: Dir,
        n: usize,
        k: usize,
        mut f: impl FnMut(CotRun<'_>),
    ) -> Result<()> {
        if !(1..=8).contains(&k) || !n.is_multiple_of(k) {
            return Err(OtError::Misuse(
                "COT runs need instances of 1..=8 COTs that divide the take",
            ));
        }
        let other = match dir {
            Dir::Sc => Dir::Cs,
            Dir::Cs => Dir::Sc,
        };
        let (rounds, pair) = refill_rounds(
            self.available(dir),
            self.available(other),
            n,
            self.params.usable(),
        );
        let send = dir.sender() == self.role;
        let delta = self.sender.delta();
        let mut inst = Instances::new(k);
        let mut lent = |run: &[u128], first: u64| {
            inst.push(run, first, &mut |run, first| {
                f(if send {
                    CotRun::Send {
                        delta,
                        v: run,
                        first,
                    }
                } else {
                    CotRun::Recv { w: run, first }
                })
            })
        };
        let mut left = n;
        left -= self.pool_mut(dir).lend(left, &mut lent);
        if rounds > 0 {
            let t0 = Instant::now();
            let c0 = ch.counters();
            for round in 0..rounds {
                let (this, that) = (1, (pair && round == 0) as usize);
                match dir {
                    Dir::Sc => self.run_batches(ch, this, that)?,
                    Dir::Cs => self.run_batches(ch, that, this)?,
                }
                left -= self.pool_mut(dir).lend(left, &mut lent);
            }
            self.stats.refill_bytes += bytes(ch.counters() - c0);
            self.stats.refill_ms += t0.elapsed().as_secs_f64() * 1e3;
        }
        if left > 0 || !inst.is_empty() {
            return Err(OtError::Internal("COT runs short of the take"));
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

    /// The takes of a layer sequence: direction, instances, COTs per instance. Small
    /// batches (depth 5: 4 400 usable COTs) so that takes span several batches, start
    /// in the carry and cut instances at batch ends.
    const TAKES: [(Dir, usize, usize); 6] = [
        (Dir::Sc, 3001, 3),
        (Dir::Cs, 2000, 5),
        (Dir::Sc, 9000, 1),
        (Dir::Sc, 1500, 8),
        (Dir::Cs, 7, 2),
        (Dir::Cs, 4000, 7),
    ];

    /// Everything one party was lent: per take, `(first, COTs)` of each run, and `Δ`.
    type Lent = Vec<Vec<(u64, Vec<u128>)>>;

    fn lend_all(ch: &mut MemChannel, role: Role) -> (Lent, u128) {
        let mut s = OtSession::new(ch, role, SilentParams::with_depth(5)).unwrap();
        let mut all = Vec::new();
        for (dir, inst, k) in TAKES {
            let mut runs = Vec::new();
            s.take_runs(ch, dir, inst * k, k, |run| {
                let (first, cots) = match run {
                    CotRun::Send { v, first, .. } => (first, v),
                    CotRun::Recv { w, first } => (first, w),
                };
                assert!(
                    !cots.is_empty() && cots.len().is_multiple_of(k),
                    "whole instances"
                );
                runs.push((first, cots.to_vec()));
            })
            .unwrap();
            all.push(runs);
        }
        (all, s.sender.delta())
    }

    #[test]
    fn runs_of_whole_instances_are_correlated_cots_in_global_order() {
        let (mut a, mut b) =
            MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE);
        let h = std::thread::spawn(move || lend_all(&mut a, Role::Server));
        let (client, delta_c) = lend_all(&mut b, Role::Client);
        let (server, delta_s) = h.join().unwrap();
        let mut next = [0u64; 2];
        for (t, (dir, inst, k)) in TAKES.into_iter().enumerate() {
            let (sender, receiver, delta) = match dir {
                Dir::Sc => (&server[t], &client[t], delta_s),
                Dir::Cs => (&client[t], &server[t], delta_c),
            };
            // the same runs on both sides, consecutive global indices from where the
            // direction's previous take ended
            let firsts = |r: &Vec<(u64, Vec<u128>)>| r.iter().map(|x| x.0).collect::<Vec<_>>();
            assert_eq!(firsts(sender), firsts(receiver), "take {t}");
            let d = (dir == Dir::Cs) as usize;
            let mut count = 0;
            for ((first, v), (_, w)) in sender.iter().zip(receiver) {
                assert_eq!(*first, next[d] + count as u64, "take {t}");
                assert_eq!(v.len(), w.len());
                for (v, w) in v.iter().zip(w) {
                    // w = v ⊕ b·Δ with b = lsb(w), lsb(v) = 0
                    assert_eq!(v & 1, 0);
                    assert_eq!(*w, if w & 1 == 1 { v ^ delta } else { *v });
                }
                count += v.len();
            }
            assert_eq!(count, inst * k, "take {t}");
            next[d] += count as u64;
            assert!(
                sender.len() > 1 || inst * k < 4400,
                "take {t} spans batches"
            );
        }
    }

    #[test]
    fn instances_complete_across_runs() {
        let mut inst = Instances::new(3);
        let mut seen = Vec::new();
        let mut f = |r: &[u128], first: u64| {
            assert_eq!(r.len() % 3, 0);
            seen.extend(r.iter().zip(first..).map(|(&x, g)| (g, x)));
        };
        let all: Vec<u128> = (100..121).collect();
        // runs of 4, 1, 1, 7, 8 COTs from global index 50
        let mut at = 0;
        for len in [4, 1, 1, 7, 8] {
            inst.push(&all[at..at + len], 50 + at as u64, &mut f);
            at += len;
        }
        assert!(inst.is_empty());
        let want: Vec<(u64, u128)> = (50..).zip(all.iter().copied()).collect();
        assert_eq!(seen, want);
    }
}
