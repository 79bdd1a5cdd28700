//! Peer garbage: scripted frames and a channel that corrupts one honest frame in
//! flight. Nothing may panic; every bad frame is an `OtError` (or, where the damage
//! stays within range, a wrong but well-formed result).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use gc::{NonlinSpec, Nonlinear};
use net::{Channel, Counters, Link, MemChannel, NetError};
use ot::{client_online, server_online, OtError, OtSession, OtSpec, Role, SilentParams};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const P: u64 = 4293918721;

/// A peer that answers with scripted frames and swallows what it is sent.
struct Scripted {
    frames: Vec<Vec<u8>>,
}

impl Channel for Scripted {
    fn send(&mut self, _frame: &[u8]) -> net::Result<()> {
        Ok(())
    }
    fn recv(&mut self) -> net::Result<Vec<u8>> {
        if self.frames.is_empty() {
            return Err(NetError::Disconnected);
        }
        Ok(self.frames.remove(0))
    }
    fn counters(&self) -> Counters {
        Counters::default()
    }
}

#[test]
fn scripted_garbage_during_setup() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for it in 0..200 {
        let n = rng.random_range(0..12);
        let frames = (0..n)
            .map(|_| {
                // sometimes the lengths the setup expects (32-byte points, 128 of them)
                let len = match rng.random_range(0..4) {
                    0 => 32,
                    1 => 32 * 128,
                    _ => rng.random_range(0..400),
                };
                (0..len).map(|_| rng.random()).collect()
            })
            .collect();
        let role = if it % 2 == 0 {
            Role::Server
        } else {
            Role::Client
        };
        let mut ch = Scripted { frames };
        let r = OtSession::new(&mut ch, role, SilentParams::with_depth(5));
        assert!(r.is_err(), "iteration {it} accepted garbage");
    }
}

/// Corrupts the `at`-th frame this end receives.
struct Corrupt {
    inner: MemChannel,
    seen: usize,
    at: usize,
    how: u8,
}

impl Channel for Corrupt {
    fn send(&mut self, frame: &[u8]) -> net::Result<()> {
        self.inner.send(frame)
    }
    fn recv(&mut self) -> net::Result<Vec<u8>> {
        let mut f = self.inner.recv()?;
        if self.seen == self.at {
            match self.how {
                0 if !f.is_empty() => {
                    let i = f.len() / 2;
                    f[i] ^= 0x5a;
                }
                1 => {
                    f.pop();
                }
                2 => f.push(7),
                _ => {
                    for b in f.iter_mut() {
                        *b = 0xff;
                    }
                }
            }
        }
        self.seen += 1;
        Ok(f)
    }
    fn counters(&self) -> Counters {
        self.inner.counters()
    }
}

struct Dyn<'a>(&'a mut (dyn Channel + Send));

impl Channel for Dyn<'_> {
    fn send(&mut self, f: &[u8]) -> net::Result<()> {
        self.0.send(f)
    }
    fn recv(&mut self) -> net::Result<Vec<u8>> {
        self.0.recv()
    }
    fn counters(&self) -> Counters {
        self.0.counters()
    }
}

/// A session and two layers (MaxPool with truncation, then ReLU with truncation).
fn party(role: Role, ch: &mut (dyn Channel + Send)) -> Result<Vec<u64>, OtError> {
    let mut ch = Dyn(ch);
    let params = SilentParams::with_depth(5);
    let specs = [
        OtSpec::faithful(NonlinSpec {
            p: P,
            op: Nonlinear::MaxPool { window: 2 },
            trunc_bits: 4,
            count: 8,
        }),
        OtSpec::approximate(NonlinSpec {
            p: P,
            op: Nonlinear::Relu,
            trunc_bits: 4,
            count: 16,
        }),
    ];
    let x = [5u64; 16];
    let mut s = OtSession::new(&mut ch, role, params)?;
    let mut out = Vec::new();
    for sp in specs {
        let inp = &x[..sp.spec.inputs()];
        out = match role {
            Role::Server => {
                let pre = s.server_offline(&mut ch, &sp)?;
                server_online(&mut ch, pre, inp)?
            }
            Role::Client => {
                let pre = s.client_offline(&mut ch, &sp)?;
                client_online(&mut ch, pre, inp)?
            }
        };
    }
    Ok(out)
}

type Both = (Result<Vec<u64>, OtError>, Result<Vec<u64>, OtError>, usize);

/// Both parties; the victim's `at`-th received frame is damaged. Returns both results
/// and the frames the victim received.
fn honest_run(victim: Role, at: usize, how: u8) -> Both {
    let (a, b) = MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(20), Link::NONE);
    let corrupt = |inner| Corrupt {
        inner,
        seen: 0,
        at,
        how,
    };
    let (mut sa, mut cb): (Box<dyn Channel + Send>, Box<dyn Channel + Send>) = match victim {
        Role::Server => (Box::new(corrupt(a)), Box::new(b)),
        Role::Client => (Box::new(a), Box::new(corrupt(b))),
    };
    let h = std::thread::spawn(move || {
        let r = party(Role::Server, &mut *sa);
        (r, sa.counters().frames_received as usize)
    });
    let rc = party(Role::Client, &mut *cb);
    let fc = cb.counters().frames_received as usize;
    // hang up, so that a server still waiting sees a disconnect at once
    drop(cb);
    let (rs, fs) = h.join().unwrap();
    (rs, rc, if victim == Role::Server { fs } else { fc })
}

#[test]
fn corrupted_frames_never_panic() {
    for victim in [Role::Server, Role::Client] {
        let (rs, rc, frames) = honest_run(victim, usize::MAX, 0);
        rs.unwrap();
        rc.unwrap();
        assert!(frames > 10);
        let mut errors = 0;
        for at in 0..frames {
            for how in 0..4 {
                let (rs, rc, _) = honest_run(victim, at, how);
                let v = if victim == Role::Server { &rs } else { &rc };
                // a frame of the wrong length is always caught by the victim
                if how == 1 || how == 2 {
                    assert!(
                        v.is_err(),
                        "{victim:?} frame {at}/{frames} mutation {how} went unnoticed"
                    );
                }
                errors += v.is_err() as usize;
            }
        }
        assert!(errors >= 2 * frames, "{victim:?}: {errors} errors");
    }
}
