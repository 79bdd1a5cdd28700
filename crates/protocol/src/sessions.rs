//! The TCP accept loop of every server mode (one linear layer, a whole network): each
//! connection is one session on its own thread, at most `max_concurrent` at once (the
//! rest are told `Busy`), each with a deadline per frame and per session, and each
//! contained: a session that fails — or panics — is logged, answered with a coarse
//! `Abort` and reported, its slot is released whatever happened, and the server keeps
//! serving.

use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use net::{Channel, Counters, Link, TcpChannel};
use tracing::{info, warn};

use crate::msg::{send, AbortReason, Msg, ProtocolError, Result};

/// How long a refused or failed session's socket keeps reading what the peer still
/// sends before it closes (so the peer reads the `Abort` instead of a reset).
const CLOSE_LINGER: Duration = Duration::from_millis(50);

/// How a TCP server runs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Frame size limit.
    pub max_frame: usize,
    /// Every frame must be sent or received within this time of its start.
    pub timeout: Duration,
    /// A whole session must end within this time (`None`: no limit).
    pub session_timeout: Option<Duration>,
    /// Memory a session may allocate (its flooding zeros, ciphertexts, garbled tables
    /// and OT material), checked before it allocates; `None`: no limit.
    pub session_memory: Option<u64>,
    /// Emulated link.
    pub link: Link,
    /// Sessions that may run at once; a connection beyond them waits up to
    /// `busy_wait` for a slot, then is refused with `Abort(Busy)`.
    pub max_concurrent: usize,
    /// How long a connection waits for a session slot before it is told `Busy` (a
    /// client that starts its next session right after its last one would otherwise
    /// race the last one's slot).
    pub busy_wait: Duration,
    /// Stop accepting after this many connections (`None`: serve forever).
    pub stop_after: Option<usize>,
}

impl ServeOptions {
    /// Frames up to `max_frame`, a 60 s frame timeout, the session deadline derived
    /// from each session's plan and no memory limit, no link emulation, 4 concurrent
    /// sessions (a fifth waits up to 2 s for a slot), serving forever.
    pub fn new(max_frame: usize) -> Self {
        Self {
            max_frame,
            timeout: Duration::from_secs(60),
            session_timeout: None,
            session_memory: None,
            link: Link::NONE,
            max_concurrent: 4,
            busy_wait: Duration::from_secs(2),
            stop_after: None,
        }
    }
}

/// The memory a session may use when none is given: the machine's available memory
/// divided among the sessions that may run at once (4 GiB each where it cannot be read).
pub fn default_session_memory(max_concurrent: usize) -> u64 {
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024);
    match available {
        Some(b) => b / max_concurrent.max(1) as u64,
        None => 4 << 30,
    }
}

/// One finished session.
#[derive(Clone, Debug)]
pub struct SessionReport<T> {
    /// The peer's address.
    pub peer: String,
    /// The outcome.
    pub result: Result<T>,
    /// Wall-clock time, ms.
    pub elapsed_ms: f64,
    /// Everything the socket carried.
    pub counters: Counters,
}

/// The sessions running, and a signal when one ends.
#[derive(Default)]
struct Running {
    count: Mutex<usize>,
    ended: Condvar,
}

impl Running {
    /// Takes a slot if fewer than `max` are taken within `wait`.
    fn take(self: &Arc<Self>, max: usize, wait: Duration) -> Option<Slot> {
        let deadline = Instant::now() + wait;
        let mut n = self.count.lock().unwrap_or_else(|p| p.into_inner());
        while *n >= max {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            n = self
                .ended
                .wait_timeout(n, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *n += 1;
        Some(Slot(self.clone()))
    }
}

/// A taken session slot, given back when dropped (also when the session panicked).
struct Slot(Arc<Running>);

impl Drop for Slot {
    fn drop(&mut self) {
        let mut n = self.0.count.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        self.0.ended.notify_all();
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Accepts connections and runs `session` for each on its own thread (at most
/// `opts.max_concurrent` at once), with `opts`'s frame and session deadlines.
/// `on_session` is called from the session's thread when it ends, with its report.
/// Returns after `opts.stop_after` connections have been served (all of them joined),
/// or never.
pub fn serve_sessions<T, S, F>(
    listener: TcpListener,
    opts: &ServeOptions,
    session: S,
    on_session: F,
) -> Result<()>
where
    T: Send + 'static,
    S: Fn(&mut TcpChannel) -> Result<T> + Send + Sync + 'static,
    F: Fn(SessionReport<T>) + Send + Sync + 'static,
{
    let session = Arc::new(session);
    let on_session = Arc::new(on_session);
    let running = Arc::new(Running::default());
    let mut handles = Vec::new();
    let mut accepted = 0usize;
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "accept failed");
                continue;
            }
        };
        accepted += 1;
        let peer = stream
            .peer_addr()
            .map(|p| p.to_string())
            .unwrap_or_else(|_| "?".into());
        let mut ch = match TcpChannel::new(stream, opts.max_frame, opts.timeout, opts.link) {
            Ok(c) => c,
            Err(e) => {
                warn!(%peer, error = %e, "connection setup failed");
                continue;
            }
        };
        match running.take(opts.max_concurrent, opts.busy_wait) {
            None => {
                warn!(%peer, "busy: refusing the session");
                let _ = send(&mut ch, &Msg::Abort(AbortReason::Busy));
                let counters = ch.counters();
                ch.close(CLOSE_LINGER);
                on_session(SessionReport {
                    peer,
                    result: Err(ProtocolError::PeerAborted(AbortReason::Busy)),
                    elapsed_ms: 0.0,
                    counters,
                });
            }
            Some(slot) => {
                let (session, on_session) = (session.clone(), on_session.clone());
                let session_timeout = opts.session_timeout;
                handles.push(thread::spawn(move || {
                    info!(%peer, "session started");
                    let t = Instant::now();
                    ch.set_deadline(session_timeout.map(|d| t + d));
                    let result = match catch_unwind(AssertUnwindSafe(|| session(&mut ch))) {
                        Ok(r) => r,
                        Err(p) => {
                            let detail = panic_text(p.as_ref());
                            let _ = send(&mut ch, &Msg::Abort(AbortReason::Internal));
                            Err(ProtocolError::Internal { detail })
                        }
                    };
                    // the session is over: its slot is free before anyone hears of it
                    drop(slot);
                    match &result {
                        Ok(_) => info!(%peer, ms = t.elapsed().as_secs_f64() * 1e3, "session done"),
                        Err(e) => tracing::error!(%peer, error = %e, "session failed"),
                    }
                    let (elapsed_ms, counters) = (t.elapsed().as_secs_f64() * 1e3, ch.counters());
                    if result.is_err() {
                        ch.close(CLOSE_LINGER);
                    }
                    on_session(SessionReport {
                        peer,
                        result,
                        elapsed_ms,
                        counters,
                    });
                }));
            }
        }
        handles.retain(|h| !h.is_finished());
        if opts.stop_after.is_some_and(|n| accepted >= n) {
            break;
        }
    }
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}
