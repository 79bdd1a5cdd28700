//! Channels: TCP and in-memory, both with the same framing, limits, counters and link
//! emulation.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{NetError, Result};
use crate::link::Link;

/// Default maximum frame size: 256 MiB.
pub const DEFAULT_MAX_FRAME: usize = 256 << 20;

/// Bytes of the length prefix.
const HEADER: u64 = 4;

/// What went over a channel, from this side's point of view. Bytes include the 4-byte
/// length prefix of every frame. A round is a flight: a run of sends after a receive
/// (or at the start) counts one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Frames sent.
    pub frames_sent: u64,
    /// Frames received.
    pub frames_received: u64,
    /// Flights sent.
    pub flights: u64,
}

impl std::ops::Sub for Counters {
    type Output = Counters;
    /// The traffic between two snapshots (later − earlier).
    fn sub(self, o: Counters) -> Counters {
        Counters {
            bytes_sent: self.bytes_sent.saturating_sub(o.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(o.bytes_received),
            frames_sent: self.frames_sent.saturating_sub(o.frames_sent),
            frames_received: self.frames_received.saturating_sub(o.frames_received),
            flights: self.flights.saturating_sub(o.flights),
        }
    }
}

/// A framed, counted, bidirectional channel.
pub trait Channel {
    /// Sends one frame (after the link's delay).
    fn send(&mut self, frame: &[u8]) -> Result<()>;
    /// Receives one frame.
    fn recv(&mut self) -> Result<Vec<u8>>;
    /// The counters so far.
    fn counters(&self) -> Counters;
}

/// Shared bookkeeping of both channel kinds.
#[derive(Debug)]
struct State {
    max: usize,
    timeout: Duration,
    link: Link,
    counters: Counters,
    sending: bool,
}

impl State {
    fn new(max: usize, timeout: Duration, link: Link) -> Self {
        Self {
            max,
            timeout,
            link,
            counters: Counters::default(),
            sending: false,
        }
    }
    fn before_send(&mut self, len: usize) -> Result<()> {
        if len > self.max {
            return Err(NetError::Oversized {
                len: len as u64,
                max: self.max as u64,
            });
        }
        let delay = self.link.delay(len + HEADER as usize);
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        if !self.sending {
            self.counters.flights += 1;
            self.sending = true;
        }
        self.counters.bytes_sent += HEADER + len as u64;
        self.counters.frames_sent += 1;
        Ok(())
    }
    fn after_recv(&mut self, len: usize) {
        self.sending = false;
        self.counters.bytes_received += HEADER + len as u64;
        self.counters.frames_received += 1;
    }
    fn timeout_error(&self) -> NetError {
        NetError::Timeout {
            millis: self.timeout.as_millis() as u64,
        }
    }
}

/// Reads exactly `buf.len()` bytes; returns how many arrived before EOF. A read that
/// times out is `Timeout { millis: 0 }` (the caller knows its timeout).
fn fill<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => return Ok(at),
            Ok(k) => at += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(NetError::Timeout { millis: 0 })
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(at)
}

/// Reads one length-prefixed frame (4-byte big-endian length, then the bytes) from a
/// stream: the frame decoder of every channel over a byte stream. A length above `max`
/// is refused before anything is allocated.
pub fn read_frame<R: Read>(r: &mut R, max: usize) -> Result<Vec<u8>> {
    let mut header = [0u8; HEADER as usize];
    match fill(r, &mut header)? {
        0 => return Err(NetError::Disconnected),
        4 => {}
        k => {
            return Err(NetError::Truncated {
                expected: HEADER,
                actual: k as u64,
            })
        }
    }
    let len = u32::from_be_bytes(header) as usize;
    if len > max {
        return Err(NetError::Oversized {
            len: len as u64,
            max: max as u64,
        });
    }
    let mut frame = vec![0u8; len];
    let got = fill(r, &mut frame)?;
    if got < len {
        return Err(NetError::Truncated {
            expected: len as u64,
            actual: got as u64,
        });
    }
    Ok(frame)
}

/// A TCP channel.
#[derive(Debug)]
pub struct TcpChannel {
    stream: TcpStream,
    state: State,
}

impl TcpChannel {
    /// Wraps a connected stream: frames up to `max` bytes, reads time out after
    /// `timeout`, sends are delayed by `link`.
    pub fn new(stream: TcpStream, max: usize, timeout: Duration, link: Link) -> Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Self {
            stream,
            state: State::new(max, timeout, link),
        })
    }

    /// Connects to `addr`.
    pub fn connect(addr: &str, max: usize, timeout: Duration, link: Link) -> Result<Self> {
        Self::new(TcpStream::connect(addr)?, max, timeout, link)
    }
}

impl Channel for TcpChannel {
    fn send(&mut self, frame: &[u8]) -> Result<()> {
        self.state.before_send(frame.len())?;
        let len = u32::try_from(frame.len()).map_err(|_| NetError::Oversized {
            len: frame.len() as u64,
            max: u32::MAX as u64,
        })?;
        let mut buf = Vec::with_capacity(frame.len() + HEADER as usize);
        buf.extend_from_slice(&len.to_be_bytes());
        buf.extend_from_slice(frame);
        self.stream.write_all(&buf)?;
        self.stream.flush()?;
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        let frame = read_frame(&mut self.stream, self.state.max).map_err(|e| match e {
            NetError::Timeout { .. } => self.state.timeout_error(),
            e => e,
        })?;
        self.state.after_recv(frame.len());
        Ok(frame)
    }

    fn counters(&self) -> Counters {
        self.state.counters
    }
}

/// An in-memory channel (one end of a pair), for tests and single-process runs.
#[derive(Debug)]
pub struct MemChannel {
    tx: SyncSender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
    state: State,
}

impl MemChannel {
    /// Two connected ends.
    pub fn pair(max: usize, timeout: Duration, link: Link) -> (MemChannel, MemChannel) {
        let (ta, ra) = sync_channel(64);
        let (tb, rb) = sync_channel(64);
        (
            MemChannel {
                tx: ta,
                rx: rb,
                state: State::new(max, timeout, link),
            },
            MemChannel {
                tx: tb,
                rx: ra,
                state: State::new(max, timeout, link),
            },
        )
    }
}

impl Channel for MemChannel {
    fn send(&mut self, frame: &[u8]) -> Result<()> {
        self.state.before_send(frame.len())?;
        self.tx
            .send(frame.to_vec())
            .map_err(|_| NetError::Disconnected)
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        match self.rx.recv_timeout(self.state.timeout) {
            Ok(f) => {
                if f.len() > self.state.max {
                    return Err(NetError::Oversized {
                        len: f.len() as u64,
                        max: self.state.max as u64,
                    });
                }
                self.state.after_recv(f.len());
                Ok(f)
            }
            Err(RecvTimeoutError::Timeout) => Err(self.state.timeout_error()),
            Err(RecvTimeoutError::Disconnected) => Err(NetError::Disconnected),
        }
    }

    fn counters(&self) -> Counters {
        self.state.counters
    }
}
