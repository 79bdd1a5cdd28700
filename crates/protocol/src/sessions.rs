//! The TCP accept loop of every server mode (one linear layer, a whole network): each
//! connection is one session on its own thread, at most `max_concurrent` at once (the
//! rest are told `Busy`), each with a deadline per frame and per session, and each
//! contained: a session that fails — or panics — is logged, answered with a coarse
//! `Abort` and reported, its slot is released whatever happened, and the server keeps
//! serving. Over TLS when [`ServeOptions::tls`] is set (the handshake runs on the
//! session's thread); counted in [`ServeOptions::metrics`]; drained on
//! [`Shutdown::request`]: no new session, running ones finish within
//! [`ServeOptions::drain_timeout`], new connections meanwhile told `ShuttingDown`.

use std::net::{TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use net::{Channel, Counters, Link, ServerTls, TcpChannel};
use tracing::{info, warn};

use crate::metrics::{outcome_label, Metrics};
use crate::msg::{send, AbortReason, Msg, ProtocolError, Result};

/// How often the accept loop looks for a drain request while no one connects.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

/// Refusals (busy, shutting down) answered at once, each on a short thread of its own;
/// connections beyond them are closed unanswered.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;

/// A request to drain a server: shared between the accept loop and whoever asks (a
/// signal handler, a test). Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct Shutdown(Arc<AtomicBool>);

impl Shutdown {
    /// Not requested yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Asks the server to drain: it takes no new session, lets the running ones finish
    /// (within its drain timeout) and returns.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether a drain was asked for.
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

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
    /// TLS (`None`: plain TCP, for loopback, benchmarks, or behind a TLS terminator).
    pub tls: Option<ServerTls>,
    /// Counters of sessions, inferences, bytes and time (`None`: none kept).
    pub metrics: Option<Arc<Metrics>>,
    /// Drains the server when requested.
    pub shutdown: Shutdown,
    /// How long running sessions may take to finish once a drain began; after it the
    /// serve loop returns with them cut.
    pub drain_timeout: Duration,
}

impl ServeOptions {
    /// Frames up to `max_frame`, a 60 s frame timeout, the session deadline derived
    /// from each session's plan and no memory limit, no link emulation, 4 concurrent
    /// sessions (a fifth waits up to 2 s for a slot), serving forever, plain TCP, no
    /// metrics, a drain timeout of 60 s.
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
            tls: None,
            metrics: None,
            shutdown: Shutdown::new(),
            drain_timeout: Duration::from_secs(60),
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
    fn count(&self) -> usize {
        *self.count.lock().unwrap_or_else(|p| p.into_inner())
    }
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

/// Tells a connection that gets no session why (`Busy`, `ShuttingDown`) and closes it,
/// on a thread of its own (a TLS handshake must not hold up the accept loop); its
/// handle, if it got one.
fn refuse<T, F>(
    ch: TcpChannel,
    peer: String,
    reason: AbortReason,
    refusing: &Arc<AtomicUsize>,
    metrics: Option<Arc<Metrics>>,
    on_session: Arc<F>,
) -> Option<thread::JoinHandle<()>>
where
    T: Send + 'static,
    F: Fn(SessionReport<T>) + Send + Sync + 'static,
{
    if refusing.fetch_add(1, Ordering::SeqCst) >= MAX_REFUSALS_IN_FLIGHT {
        refusing.fetch_sub(1, Ordering::SeqCst);
        return None;
    }
    let refusing = refusing.clone();
    Some(thread::spawn(move || {
        let mut ch = ch;
        let _ = send(&mut ch, &Msg::Abort(reason));
        let counters = ch.counters();
        ch.close(CLOSE_LINGER);
        refusing.fetch_sub(1, Ordering::SeqCst);
        let result = Err(ProtocolError::PeerAborted(reason));
        if let Some(m) = &metrics {
            m.connection_refused(outcome_label(result.as_ref().err()), counters);
        }
        on_session(SessionReport {
            peer,
            result,
            elapsed_ms: 0.0,
            counters,
        });
    }))
}

/// The channel of an accepted connection: TLS when the options say so.
fn channel(stream: TcpStream, opts: &ServeOptions) -> net::Result<TcpChannel> {
    stream.set_nonblocking(false)?;
    match &opts.tls {
        Some(tls) => TcpChannel::accept_tls(stream, tls, opts.max_frame, opts.timeout, opts.link),
        None => TcpChannel::new(stream, opts.max_frame, opts.timeout, opts.link),
    }
}

/// Accepts connections and runs `session` for each on its own thread (at most
/// `opts.max_concurrent` at once), with `opts`'s frame and session deadlines, over TLS
/// when `opts.tls` is set. `on_session` is called from the session's thread when it
/// ends, with its report. Returns after `opts.stop_after` connections have been served
/// (all of them joined), once a drain requested by `opts.shutdown` is over (the
/// running sessions finished, or `opts.drain_timeout` passed), or never.
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
    let refusing = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    let mut accepted = 0usize;
    let mut drain_until: Option<Instant> = None;
    listener
        .set_nonblocking(true)
        .map_err(net::NetError::from)?;
    loop {
        if drain_until.is_none() && opts.shutdown.requested() {
            let until = Instant::now() + opts.drain_timeout;
            drain_until = Some(until);
            if let Some(m) = &opts.metrics {
                m.set_draining();
            }
            info!(
                running = running.count(),
                timeout_s = opts.drain_timeout.as_secs_f64(),
                "draining: no new sessions, waiting for the running ones"
            );
        }
        if let Some(until) = drain_until {
            let left = running.count();
            if left == 0 {
                info!("drained: every session finished");
                break;
            }
            if Instant::now() >= until {
                warn!(
                    cut = left,
                    "drain timeout: stopping with sessions still running"
                );
                return Ok(());
            }
        }
        let (stream, peer) = match listener.accept() {
            Ok((s, a)) => (s, a.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(ACCEPT_POLL);
                continue;
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        let ch = match channel(stream, opts) {
            Ok(c) => c,
            Err(e) => {
                warn!(%peer, error = %e, "connection setup failed");
                continue;
            }
        };
        if drain_until.is_some() {
            info!(%peer, "draining: refusing the session");
            handles.extend(refuse(
                ch,
                peer,
                AbortReason::ShuttingDown,
                &refusing,
                opts.metrics.clone(),
                on_session.clone(),
            ));
            handles.retain(|h| !h.is_finished());
            continue;
        }
        accepted += 1;
        let mut ch = ch;
        match running.take(opts.max_concurrent, opts.busy_wait) {
            None => {
                warn!(%peer, "busy: refusing the session");
                handles.extend(refuse(
                    ch,
                    peer,
                    AbortReason::Busy,
                    &refusing,
                    opts.metrics.clone(),
                    on_session.clone(),
                ));
            }
            Some(slot) => {
                let (session, on_session) = (session.clone(), on_session.clone());
                let session_timeout = opts.session_timeout;
                let metrics = opts.metrics.clone();
                if let Some(m) = &metrics {
                    m.session_started();
                }
                handles.push(thread::spawn(move || {
                    info!(%peer, tls = ch.is_tls(), "session started");
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
                    if let Some(m) = &metrics {
                        m.session_ended(outcome_label(result.as_ref().err()), counters);
                    }
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
