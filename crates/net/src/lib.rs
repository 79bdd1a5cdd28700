//! helina's transport layer: length-prefixed frames with a maximum size over TCP (plain
//! or TLS, [`ServerTls`]/[`ClientTls`]) or an in-memory channel, byte/frame/round counters per direction, and optional link
//! emulation (bandwidth and round-trip time) done in the transport itself.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes. A frame longer
//! than the limit, a stream that ends inside a frame, a peer that disconnects and a
//! peer that stalls past the timeout are each a typed [`NetError`]; nothing panics on
//! peer data.

mod error;
mod link;
mod tls;
mod transport;

pub use error::{NetError, Result};
pub use link::Link;
pub use tls::{ClientTls, ServerTls};
pub use transport::{
    read_frame, Channel, Counters, MemChannel, TcpChannel, DEFAULT_MAX_FRAME, FRAME_HEADER_BYTES,
};
