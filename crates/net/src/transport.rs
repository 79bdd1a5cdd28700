//! Channels: TCP and in-memory, both with the same framing, limits, counters and link
//! emulation.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{NetError, Result};
use crate::link::Link;

/// Default maximum frame size: 256 MiB.
pub const DEFAULT_MAX_FRAME: usize = 256 << 20;

/// Bytes of a frame's length prefix, counted with every frame.
pub const FRAME_HEADER_BYTES: u64 = 4;

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

impl std::ops::Add for Counters {
    type Output = Counters;
    /// The traffic of two spans together.
    fn add(self, o: Counters) -> Counters {
        Counters {
            bytes_sent: self.bytes_sent + o.bytes_sent,
            bytes_received: self.bytes_received + o.bytes_received,
            frames_sent: self.frames_sent + o.frames_sent,
            frames_received: self.frames_received + o.frames_received,
            flights: self.flights + o.flights,
        }
    }
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
    /// Receives one frame (at most the channel's receive limit).
    fn recv(&mut self) -> Result<Vec<u8>>;
    /// Receives one frame of at most `max` bytes (and at most the receive limit): a
    /// longer one is refused from its length prefix, before its bytes are read, with
    /// [`NetError::Oversized`]. A protocol whose next message has a known size bound
    /// reads it with this. Channels that cannot check the prefix read the frame and
    /// then refuse it.
    fn recv_at_most(&mut self, max: usize) -> Result<Vec<u8>> {
        let f = self.recv()?;
        if f.len() > max {
            return Err(NetError::Oversized {
                len: f.len() as u64,
                max: max as u64,
            });
        }
        Ok(f)
    }
    /// Lowers (or restores, up to the channel's maximum) the size of the largest frame
    /// [`Channel::recv`] accepts: a session sets it to the largest frame its plan
    /// allows once the plan is known. Channels without limits ignore it.
    fn set_recv_limit(&mut self, _max: usize) {}
    /// The counters so far.
    fn counters(&self) -> Counters;
    /// A deadline for everything that follows (a session's time limit): a send or
    /// receive that would end after it fails with [`NetError::Deadline`]. `None` lifts
    /// it. Channels without time limits ignore it.
    fn set_deadline(&mut self, _deadline: Option<Instant>) {}
    /// The deadline set by [`Channel::set_deadline`], if any.
    fn deadline(&self) -> Option<Instant> {
        None
    }
}

/// Shared bookkeeping of both channel kinds.
#[derive(Debug)]
struct State {
    max: usize,
    /// The largest frame received (≤ `max`).
    recv_limit: usize,
    timeout: Duration,
    link: Link,
    counters: Counters,
    sending: bool,
    /// The session deadline, and when it was set (for the error's duration).
    deadline: Option<(Instant, Instant)>,
}

impl State {
    fn new(max: usize, timeout: Duration, link: Link) -> Self {
        Self {
            max,
            recv_limit: max,
            timeout,
            link,
            counters: Counters::default(),
            sending: false,
            deadline: None,
        }
    }
    /// When the frame that starts now must be done: `timeout` from now, or the session
    /// deadline if that comes first (`true`: the session deadline rules).
    fn frame_deadline(&self) -> (Instant, bool) {
        let frame = Instant::now() + self.timeout;
        match self.deadline {
            Some((d, _)) if d < frame => (d, true),
            _ => (frame, false),
        }
    }
    /// The error for a frame that missed its deadline.
    fn late(&self, session: bool) -> NetError {
        match (session, self.deadline) {
            (true, Some((d, set))) => NetError::Deadline {
                millis: d.saturating_duration_since(set).as_millis() as u64,
            },
            _ => self.timeout_error(),
        }
    }
    fn before_send(&mut self, len: usize) -> Result<()> {
        if len > self.max {
            return Err(NetError::Oversized {
                len: len as u64,
                max: self.max as u64,
            });
        }
        let delay = self.link.delay(len + FRAME_HEADER_BYTES as usize);
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        if !self.sending {
            self.counters.flights += 1;
            self.sending = true;
        }
        self.counters.bytes_sent += FRAME_HEADER_BYTES + len as u64;
        self.counters.frames_sent += 1;
        Ok(())
    }
    fn after_recv(&mut self, len: usize) {
        self.sending = false;
        self.counters.bytes_received += FRAME_HEADER_BYTES + len as u64;
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
fn fill<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> Result<usize> {
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
/// is refused before anything is allocated, and the buffer grows with the bytes that
/// actually arrive (a peer that announces a large frame and sends little makes the
/// reader allocate little).
pub fn read_frame<R: Read + ?Sized>(r: &mut R, max: usize) -> Result<Vec<u8>> {
    let mut header = [0u8; FRAME_HEADER_BYTES as usize];
    match fill(r, &mut header)? {
        0 => return Err(NetError::Disconnected),
        4 => {}
        k => {
            return Err(NetError::Truncated {
                expected: FRAME_HEADER_BYTES,
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
    let mut frame = Vec::with_capacity(len.min(64 << 10));
    let got = match r.take(len as u64).read_to_end(&mut frame) {
        Ok(k) => k,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return Err(NetError::Timeout { millis: 0 })
        }
        Err(e) => return Err(e.into()),
    };
    if got < len {
        return Err(NetError::Truncated {
            expected: len as u64,
            actual: got as u64,
        });
    }
    Ok(frame)
}

/// A TCP channel, plain or TLS. Every frame, sent or received, must be done within
/// `timeout` of its start (a peer that drips bytes cannot hold a frame open), and within
/// the session deadline if one is set ([`Channel::set_deadline`]). The counters count
/// the frames (payload and length prefix) either way: TLS's own record framing,
/// handshake and encryption overhead are not in them.
pub struct TcpChannel {
    stream: TcpStream,
    tls: Option<Tls>,
    state: State,
}

impl std::fmt::Debug for TcpChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpChannel")
            .field("stream", &self.stream)
            .field("tls", &self.tls.is_some())
            .field("state", &self.state)
            .finish()
    }
}

/// A TLS connection of either side.
enum Tls {
    Server(Box<rustls::ServerConnection>),
    Client(Box<rustls::ClientConnection>),
}

/// A byte stream (plain, or TLS over the socket).
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// The socket, each read and write bounded by what is left until a deadline.
struct DeadlineIo<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl DeadlineIo<'_> {
    fn left(&self) -> std::io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        Ok(left)
    }
}

impl Read for DeadlineIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        (&*self.stream).read(buf)
    }
}

impl Write for DeadlineIo<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        (&*self.stream).write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        (&*self.stream).flush()
    }
}

/// Runs `f` on the channel's byte stream: the socket itself, or TLS over it.
fn with_stream<R>(
    tls: &mut Option<Tls>,
    io: &mut DeadlineIo<'_>,
    f: impl FnOnce(&mut dyn ReadWrite) -> R,
) -> R {
    match tls {
        None => f(io),
        Some(Tls::Server(c)) => f(&mut rustls::Stream::new(&mut **c, io)),
        Some(Tls::Client(c)) => f(&mut rustls::Stream::new(&mut **c, io)),
    }
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
            tls: None,
            state: State::new(max, timeout, link),
        })
    }

    /// Wraps an accepted stream as the server's end of a TLS session. The handshake
    /// runs with the first frame sent or received (on the session's thread, within that
    /// frame's deadline); a client that fails it ends there with [`NetError::Tls`].
    pub fn accept_tls(
        stream: TcpStream,
        tls: &crate::ServerTls,
        max: usize,
        timeout: Duration,
        link: Link,
    ) -> Result<Self> {
        let conn =
            rustls::ServerConnection::new(tls.config.clone()).map_err(|e| NetError::Tls {
                detail: e.to_string(),
            })?;
        let mut ch = Self::new(stream, max, timeout, link)?;
        ch.tls = Some(Tls::Server(Box::new(conn)));
        Ok(ch)
    }

    /// Connects to `addr`.
    pub fn connect(addr: &str, max: usize, timeout: Duration, link: Link) -> Result<Self> {
        Self::new(TcpStream::connect(addr)?, max, timeout, link)
    }

    /// Connects to `addr` over TLS and completes the handshake (within `timeout`): a
    /// server whose certificate does not chain to the trusted CA, or does not carry the
    /// expected name, is refused here with [`NetError::Tls`].
    pub fn connect_tls(
        addr: &str,
        tls: &crate::ClientTls,
        max: usize,
        timeout: Duration,
        link: Link,
    ) -> Result<Self> {
        let name = tls.name_for(addr)?;
        let mut conn =
            rustls::ClientConnection::new(tls.config.clone(), name).map_err(|e| NetError::Tls {
                detail: e.to_string(),
            })?;
        let mut ch = Self::connect(addr, max, timeout, link)?;
        let mut io = DeadlineIo {
            stream: &ch.stream,
            deadline: Instant::now() + timeout,
        };
        while conn.is_handshaking() {
            conn.complete_io(&mut io)?;
        }
        ch.tls = Some(Tls::Client(Box::new(conn)));
        Ok(ch)
    }

    /// Whether the channel runs over TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Closes gracefully: no more sends (over TLS, a `close_notify` first), then
    /// whatever the peer still sends is read and dropped for up to `linger` (at most
    /// 1 MiB) before the socket closes. A socket closed with unread bytes resets the
    /// connection, and the peer may then lose the last frame it was sent (an `Abort` it
    /// should read).
    pub fn close(mut self, linger: Duration) {
        let deadline = Instant::now() + linger;
        let mut io = DeadlineIo {
            stream: &self.stream,
            deadline,
        };
        match &mut self.tls {
            Some(Tls::Server(c)) if !c.is_handshaking() => {
                c.send_close_notify();
                let _ = c.write_tls(&mut io);
            }
            Some(Tls::Client(c)) => {
                c.send_close_notify();
                let _ = c.write_tls(&mut io);
            }
            _ => {}
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        let _ = std::io::copy(&mut (&mut io).take(1 << 20), &mut std::io::sink());
    }

    /// The error for an I/O failure of a frame with `session` deadline.
    fn failed(&self, e: std::io::Error, session: bool) -> NetError {
        match NetError::from(e) {
            NetError::Timeout { .. } => self.state.late(session),
            e => e,
        }
    }
}

impl Channel for TcpChannel {
    fn send(&mut self, frame: &[u8]) -> Result<()> {
        self.state.before_send(frame.len())?;
        let len = u32::try_from(frame.len()).map_err(|_| NetError::Oversized {
            len: frame.len() as u64,
            max: u32::MAX as u64,
        })?;
        let (deadline, session) = self.state.frame_deadline();
        let mut io = DeadlineIo {
            stream: &self.stream,
            deadline,
        };
        let header = len.to_be_bytes();
        let sent = with_stream(&mut self.tls, &mut io, |w| {
            w.write_all(&header)?;
            w.write_all(frame)?;
            w.flush()
        });
        sent.map_err(|e| self.failed(e, session))
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        self.recv_at_most(usize::MAX)
    }

    fn recv_at_most(&mut self, max: usize) -> Result<Vec<u8>> {
        let (deadline, session) = self.state.frame_deadline();
        let mut io = DeadlineIo {
            stream: &self.stream,
            deadline,
        };
        let limit = max.min(self.state.recv_limit);
        let frame =
            with_stream(&mut self.tls, &mut io, |r| read_frame(r, limit)).map_err(|e| match e {
                NetError::Timeout { .. } => self.state.late(session),
                e => e,
            })?;
        self.state.after_recv(frame.len());
        Ok(frame)
    }

    fn counters(&self) -> Counters {
        self.state.counters
    }

    fn set_recv_limit(&mut self, max: usize) {
        self.state.recv_limit = max.min(self.state.max);
    }

    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.state.deadline = deadline.map(|d| (d, Instant::now()));
    }

    fn deadline(&self) -> Option<Instant> {
        self.state.deadline.map(|(d, _)| d)
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
        self.recv_at_most(usize::MAX)
    }

    fn recv_at_most(&mut self, max: usize) -> Result<Vec<u8>> {
        let (deadline, session) = self.state.frame_deadline();
        let limit = max.min(self.state.recv_limit);
        match self
            .rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(f) => {
                if f.len() > limit {
                    return Err(NetError::Oversized {
                        len: f.len() as u64,
                        max: limit as u64,
                    });
                }
                self.state.after_recv(f.len());
                Ok(f)
            }
            Err(RecvTimeoutError::Timeout) => Err(self.state.late(session)),
            Err(RecvTimeoutError::Disconnected) => Err(NetError::Disconnected),
        }
    }

    fn counters(&self) -> Counters {
        self.state.counters
    }

    fn set_recv_limit(&mut self, max: usize) {
        self.state.recv_limit = max.min(self.state.max);
    }

    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.state.deadline = deadline.map(|d| (d, Instant::now()));
    }

    fn deadline(&self) -> Option<Instant> {
        self.state.deadline.map(|(d, _)| d)
    }
}
