//! Every message the garbled-circuit step reads from its peer: both parties, both
//! garbler roles, offline and online, fed with frames cut from the fuzzer's bytes (a
//! 2-byte length before each). Nothing may panic; every bad frame is a `GcError`.
#![no_main]

use gc::{Garbler, NonlinSpec, Nonlinear};
use libfuzzer_sys::fuzz_target;
use net::{Channel, Counters, NetError};

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
        let len = (u16::from_le_bytes([self.data[0], self.data[1]]) as usize).min(self.data.len() - 2);
        let frame = self.data[2..2 + len].to_vec();
        self.data = &self.data[2 + len..];
        Ok(frame)
    }
    fn counters(&self) -> Counters {
        Counters::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let op = match which % 3 {
        0 => Nonlinear::Relu,
        1 => Nonlinear::MaxPool { window: 2 },
        _ => Nonlinear::Identity,
    };
    let spec = NonlinSpec {
        p: 1032193,
        op,
        trunc_bits: u32::from(which / 3 % 4),
        count: 3,
    };
    let garbler = if which & 0x80 == 0 { Garbler::Server } else { Garbler::Client };
    let shares = vec![5u64; spec.inputs()];
    let mut ch = Scripted { data: rest };
    if which & 0x40 == 0 {
        if let Ok(pre) = gc::client_offline(&mut ch, &spec, garbler) {
            let _ = gc::client_online(&mut ch, pre, &shares);
        }
    } else if let Ok(pre) = gc::server_offline(&mut ch, &spec, garbler) {
        let _ = gc::server_online(&mut ch, pre, &shares);
    }
});
