//! A server's metrics in the Prometheus text format (the `prometheus-client` crate),
//! served over HTTP by [`Metrics::serve_http`] (`helina server --metrics ADDR`):
//! `GET /metrics` for Prometheus, `GET /healthz` for a load balancer (200 while serving,
//! 503 once draining).
//!
//! | metric | kind | what |
//! |---|---|---|
//! | `helina_sessions_started_total` | counter | sessions given a slot |
//! | `helina_sessions_finished_total{outcome}` | counter | sessions ended, by outcome (`ok`, `busy`, `shutting_down`, `timeout`, `disconnected`, `tls`, `malformed`, `input`, `unservable`, `memory`, `peer_aborted`, `internal`) |
//! | `helina_sessions_running` | gauge | sessions running now |
//! | `helina_inferences_total` | counter | inferences served |
//! | `helina_inference_seconds` | histogram | the server's time per inference (offline + online) |
//! | `helina_offline_seconds_total`, `helina_online_seconds_total` | counter | the server's time in each phase |
//! | `helina_bytes_sent_total`, `helina_bytes_received_total` | counter | frames of ended sessions (TLS framing not included) |
//! | `helina_resident_memory_bytes` | gauge | the process's RSS, read at each scrape |
//! | `helina_encoded_weight_bytes` | gauge | weights encoded once for every session |
//! | `helina_draining` | gauge | 1 once a drain began |

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread;

use net::{Counters, NetError};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::msg::{AbortReason, ProtocolError};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

/// The counters of one server (cheap to update from every session's thread).
pub struct Metrics {
    registry: Registry,
    started: Counter,
    finished: Family<Outcome, Counter>,
    running: Gauge,
    inferences: Counter,
    inference_seconds: Histogram,
    offline_seconds: Counter<f64, AtomicU64>,
    online_seconds: Counter<f64, AtomicU64>,
    bytes_sent: Counter,
    bytes_received: Counter,
    rss: Gauge,
    encoded_weights: Gauge,
    draining: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The outcome label of a session's end (`None`: it succeeded).
pub fn outcome_label(error: Option<&ProtocolError>) -> &'static str {
    let Some(e) = error else {
        return "ok";
    };
    match e {
        ProtocolError::PeerAborted(AbortReason::Busy) => "busy",
        ProtocolError::PeerAborted(AbortReason::ShuttingDown) => "shutting_down",
        ProtocolError::PeerAborted(_) => "peer_aborted",
        ProtocolError::Net(NetError::Timeout { .. } | NetError::Deadline { .. }) => "timeout",
        ProtocolError::Net(NetError::Disconnected | NetError::Truncated { .. }) => "disconnected",
        ProtocolError::Net(NetError::Tls { .. }) => "tls",
        e if e.is_malformed() => "malformed",
        e if e.is_input() => "input",
        e if e.is_unservable() => "unservable",
        ProtocolError::Version { .. }
        | ProtocolError::Params { .. }
        | ProtocolError::RevealRefused => "unservable",
        ProtocolError::SessionMemory { .. } => "memory",
        _ => "internal",
    }
}

/// The resident set size of this process (Linux; `None` elsewhere).
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

impl Metrics {
    /// A fresh set, all zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("helina");
        let m = Metrics {
            started: Counter::default(),
            finished: Family::default(),
            running: Gauge::default(),
            inferences: Counter::default(),
            // 1 ms .. ~4.4 min
            inference_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 19)),
            offline_seconds: Counter::default(),
            online_seconds: Counter::default(),
            bytes_sent: Counter::default(),
            bytes_received: Counter::default(),
            rss: Gauge::default(),
            encoded_weights: Gauge::default(),
            draining: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "sessions_started",
            "Sessions given a slot",
            m.started.clone(),
        );
        registry.register(
            "sessions_finished",
            "Sessions ended, by outcome",
            m.finished.clone(),
        );
        registry.register(
            "sessions_running",
            "Sessions running now",
            m.running.clone(),
        );
        registry.register("inferences", "Inferences served", m.inferences.clone());
        registry.register(
            "inference_seconds",
            "The server's time per inference (offline + online)",
            m.inference_seconds.clone(),
        );
        registry.register(
            "offline_seconds",
            "The server's time in offline work",
            m.offline_seconds.clone(),
        );
        registry.register(
            "online_seconds",
            "The server's time in online work",
            m.online_seconds.clone(),
        );
        registry.register(
            "bytes_sent",
            "Bytes sent in frames of ended sessions (TLS framing not included)",
            m.bytes_sent.clone(),
        );
        registry.register(
            "bytes_received",
            "Bytes received in frames of ended sessions (TLS framing not included)",
            m.bytes_received.clone(),
        );
        registry.register(
            "resident_memory_bytes",
            "Resident set size of the server process",
            m.rss.clone(),
        );
        registry.register(
            "encoded_weight_bytes",
            "Weights encoded once for every session",
            m.encoded_weights.clone(),
        );
        registry.register("draining", "1 once a drain began", m.draining.clone());
        Metrics { registry, ..m }
    }

    /// A session got a slot.
    pub fn session_started(&self) {
        self.started.inc();
        self.running.inc();
    }

    /// A session that had a slot ended.
    pub fn session_ended(&self, outcome: &'static str, counters: Counters) {
        self.running.dec();
        self.connection_refused(outcome, counters);
    }

    /// A connection that never had a slot (busy, shutting down) ended.
    pub fn connection_refused(&self, outcome: &'static str, counters: Counters) {
        self.finished.get_or_create(&Outcome { outcome }).inc();
        self.bytes_sent.inc_by(counters.bytes_sent);
        self.bytes_received.inc_by(counters.bytes_received);
    }

    /// One inference served: the server's offline and online time, ms.
    pub fn inference(&self, offline_ms: f64, online_ms: f64) {
        self.inferences.inc();
        self.inference_seconds
            .observe((offline_ms + online_ms) / 1e3);
        self.offline_seconds.inc_by(offline_ms / 1e3);
        self.online_seconds.inc_by(online_ms / 1e3);
    }

    /// The bytes of weights encoded for every session.
    pub fn set_encoded_weight_bytes(&self, bytes: u64) {
        self.encoded_weights.set(bytes as i64);
    }

    /// A drain began.
    pub fn set_draining(&self) {
        self.draining.set(1);
    }

    /// Whether a drain began.
    pub fn draining(&self) -> bool {
        self.draining.get() != 0
    }

    /// Sessions running now.
    pub fn sessions_running(&self) -> i64 {
        self.running.get()
    }

    /// The text exposition (RSS read now).
    pub fn render(&self) -> String {
        if let Some(b) = rss_bytes() {
            self.rss.set(b as i64);
        }
        let mut out = String::new();
        // writing into a String cannot fail
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Serves `GET /metrics` (and `GET /healthz`) on `addr` from a thread of its own;
    /// returns the address bound (port 0 picks one).
    pub fn serve_http(self: &Arc<Self>, addr: &str) -> Result<SocketAddr, ProtocolError> {
        let server = tiny_http::Server::http(addr).map_err(|e| ProtocolError::Internal {
            detail: format!("metrics endpoint {addr}: {e}"),
        })?;
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| ProtocolError::Internal {
                detail: format!("metrics endpoint {addr}: not an IP address"),
            })?;
        let metrics = self.clone();
        thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for req in server.incoming_requests() {
                    let path = req.url().split('?').next().unwrap_or("").to_string();
                    let (status, body, kind) = match (req.method(), path.as_str()) {
                        (tiny_http::Method::Get, "/metrics") => (
                            200,
                            metrics.render(),
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        ),
                        (tiny_http::Method::Get, "/healthz") if metrics.draining() => {
                            (503, "draining\n".to_string(), "text/plain")
                        }
                        (tiny_http::Method::Get, "/healthz") => {
                            (200, "ok\n".to_string(), "text/plain")
                        }
                        _ => (404, "not found\n".to_string(), "text/plain"),
                    };
                    let mut resp = tiny_http::Response::from_string(body).with_status_code(status);
                    if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", kind) {
                        resp = resp.with_header(h);
                    }
                    let _ = req.respond(resp);
                }
            })
            .map_err(|e| ProtocolError::Internal {
                detail: format!("metrics thread: {e}"),
            })?;
        Ok(bound)
    }
}
