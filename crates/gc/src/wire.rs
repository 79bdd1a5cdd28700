//! Wire format of the GC step (all integers little-endian).
//!
//! Small messages are bincode-encoded serde types ([`Hello`], [`GarbledHeader`],
//! [`Choice`]); bulk arrays of 128-bit blocks (garbled tables, online labels) are
//! raw frames of `16·k` bytes with at most [`FRAME_BLOCKS`] blocks per frame, so a
//! layer of any size stays under the channel's frame limit; the receiver knows the
//! total from the layer description and checks every frame's length. Base-OT points
//! (32 bytes each) and IKNP columns are raw frames too (see [`crate::ot`]).
//!
//! Offline: both → `Hello`; Chou-Orlandi (E → `A`, G → `B_0..B_127`); IKNP
//! (E → columns); G → `GarbledHeader`, table frames. Online: E → `Choice`;
//! G → label frames (evaluator-input labels, then garbler-share labels).
//! (G = garbler, E = evaluator.)

use serde::{Deserialize, Serialize};

use crate::error::{GcError, Result};
use crate::label::{blocks_to_bytes, bytes_to_blocks_exact, Block};
use net::Channel;

/// Wire-format version.
pub const VERSION: u32 = 1;
/// Blocks per bulk frame (8 MiB).
pub const FRAME_BLOCKS: usize = 1 << 19;

/// The layer description each party sends first; any difference is a
/// [`GcError::SpecMismatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// [`VERSION`].
    pub version: u32,
    /// Plaintext modulus.
    pub p: u64,
    /// 0 = ReLU, 1 = MaxPool (ReLU of the max), 2 = Identity, 3 = Max (no ReLU).
    pub op: u8,
    /// Window (1 unless MaxPool).
    pub window: u64,
    /// Truncation bits.
    pub trunc_bits: u32,
    /// Outputs.
    pub count: u64,
    /// 0 = server garbles, 1 = client garbles.
    pub garbler: u8,
}

/// Sent by the garbler offline before the table frames.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GarbledHeader {
    /// Table blocks that follow (2 per AND gate per element).
    pub table_blocks: u64,
    /// Output decoding bits, packed LSB first (`count·ℓ` bits).
    pub decode: Vec<u8>,
    /// Labels of the garbler's mask bits `r` (`count·ℓ` blocks, raw).
    pub mask_labels: Vec<u8>,
}

/// Online, evaluator → garbler: `e = b ⊕ c` (input bits ⊕ random-OT choice bits), packed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// Packed bits, LSB first.
    pub e: Vec<u8>,
}

/// bincode-encodes a message.
pub fn encode<T: Serialize>(m: &T) -> Result<Vec<u8>> {
    bincode::serialize(m).map_err(|e| GcError::Decode {
        what: "outgoing message",
        reason: e.to_string(),
    })
}

/// bincode-decodes a message, rejecting trailing bytes.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &'static str) -> Result<T> {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes()
        .with_limit(bytes.len() as u64)
        .deserialize(bytes)
        .map_err(|e| GcError::Decode {
            what,
            reason: e.to_string(),
        })
}

/// Sends blocks in frames of at most [`FRAME_BLOCKS`].
pub fn send_blocks<C: Channel>(ch: &mut C, blocks: &[Block]) -> Result<()> {
    for c in blocks.chunks(FRAME_BLOCKS) {
        ch.send(&blocks_to_bytes(c))?;
    }
    Ok(())
}

/// Receives exactly `n` blocks sent by [`send_blocks`].
pub fn recv_blocks<C: Channel>(ch: &mut C, n: usize, what: &'static str) -> Result<Vec<Block>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let want = FRAME_BLOCKS.min(n - out.len());
        let f = ch.recv_at_most(16 * want)?;
        if f.len() != 16 * want {
            return Err(GcError::Length {
                what,
                expected: 16 * want as u64,
                actual: f.len() as u64,
            });
        }
        out.extend(bytes_to_blocks_exact(&f));
    }
    Ok(out)
}
