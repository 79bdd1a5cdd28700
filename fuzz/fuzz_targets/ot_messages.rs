//! Every message the OT crate reads from its peer: both roles, session setup (base OT,
//! IKNP, silent batches), layer offline (hello, refills) and online (millionaire
//! tables, AND openings, OT messages), and the session-level 1-of-2^k OT, fed with
//! frames cut from the fuzzer's bytes (a 2-byte length before each). In the deeper
//! modes an honest peer runs the setup and offline phase first, so the scripted frames
//! reach the online parser. Nothing may panic; every bad frame is an `OtError`.
#![no_main]

use std::time::Duration;

use gc::{NonlinSpec, Nonlinear};
use libfuzzer_sys::fuzz_target;
use net::{Channel, Counters, Link, MemChannel, NetError};
use ot::{OtSession, OtSpec, Role, SilentParams, Truncation};

/// A peer that answers with the fuzzer's frames and swallows what it is sent.
struct Scripted<'a> {
    data: &'a [u8],
}

impl Channel for Scripted<'_> {
    fn send(&mut self, _frame: &[u8]) -> net::Result<()> {
        Ok(())
    }
    fn recv(&mut self) -> net::Result<Vec<u8>> {
        if self.data.len() < 2 {
            return Err(NetError::Disconnected);
        }
        let len =
            (u16::from_le_bytes([self.data[0], self.data[1]]) as usize).min(self.data.len() - 2);
        let frame = self.data[2..2 + len].to_vec();
        self.data = &self.data[2 + len..];
        Ok(frame)
    }
    fn counters(&self) -> Counters {
        Counters::default()
    }
}

const PARAMS: SilentParams = SilentParams::with_depth(5);

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let op = match which % 4 {
        0 => Nonlinear::Relu,
        1 => Nonlinear::MaxPool { window: 2 },
        2 => Nonlinear::Identity,
        _ => Nonlinear::Max { window: 3 },
    };
    let spec = OtSpec {
        spec: NonlinSpec {
            p: 1032193,
            op,
            trunc_bits: u32::from(which / 4 % 3) * 2,
            count: 3,
        },
        trunc: if which & 0x20 == 0 {
            Truncation::Faithful
        } else {
            Truncation::Approximate
        },
    };
    let role = if which & 0x80 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let shares = vec![5u64; spec.spec.inputs()];
    match (which >> 4) & 0x3 {
        // everything scripted
        0 | 1 => {
            let mut ch = Scripted { data: rest };
            if let Ok(mut s) = OtSession::new(&mut ch, role, PARAMS) {
                match role {
                    Role::Server => {
                        if let Ok(pre) = s.server_offline(&mut ch, &spec) {
                            let _ = ot::server_online(&mut ch, pre, &shares);
                        }
                    }
                    Role::Client => {
                        if let Ok(pre) = s.client_offline(&mut ch, &spec) {
                            let _ = ot::client_online(&mut ch, pre, &shares);
                        }
                    }
                }
            }
        }
        // honest setup and offline, scripted online
        2 => {
            let (mut a, mut b) =
                MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(10), Link::NONE);
            let peer_spec = spec;
            let peer = std::thread::spawn(move || {
                if let Ok(mut s) = OtSession::new(&mut b, role.other(), PARAMS) {
                    match role.other() {
                        Role::Server => drop(s.server_offline(&mut b, &peer_spec)),
                        Role::Client => drop(s.client_offline(&mut b, &peer_spec)),
                    }
                }
            });
            if let Ok(mut s) = OtSession::new(&mut a, role, PARAMS) {
                let mut on = Scripted { data: rest };
                match role {
                    Role::Server => {
                        if let Ok(pre) = s.server_offline(&mut a, &spec) {
                            let _ = ot::server_online(&mut on, pre, &shares);
                        }
                    }
                    Role::Client => {
                        if let Ok(pre) = s.client_offline(&mut a, &spec) {
                            let _ = ot::client_online(&mut on, pre, &shares);
                        }
                    }
                }
            }
            let _ = peer.join();
        }
        // honest setup, scripted 1-of-2^k OT
        _ => {
            let (mut a, mut b) =
                MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(10), Link::NONE);
            let peer =
                std::thread::spawn(move || OtSession::new(&mut b, role.other(), PARAMS).map(drop));
            if let Ok(mut s) = OtSession::new(&mut a, role, PARAMS) {
                let _ = peer.join();
                let k = usize::from(which % 8) + 1;
                let mut on = Scripted { data: rest };
                if which & 0x08 == 0 {
                    let msgs = vec![vec![1u128; 1 << k]; 4];
                    let _ = s.kot_send(&mut on, k, &msgs);
                } else {
                    let _ = s.kot_receive(&mut on, k, &[0, 1, 0, 1]);
                }
            }
        }
    }
});
