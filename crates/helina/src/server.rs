//! A server of a model: its weights encoded once, sessions served over TCP.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use net::Channel;
use protocol::{NetworkServer, NonlinearProtocol, ServeOptions, ServerOutcome, SessionReport};

use crate::error::Result;
use crate::model::Model;

/// How a server serves.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// How the nonlinear layers run (silent OT by default; the plan tells clients).
    pub nonlinear: NonlinearProtocol,
    /// Sessions at once, deadlines, memory per session, link emulation.
    pub serve: ServeOptions,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            nonlinear: NonlinearProtocol::default(),
            serve: ServeOptions::new(net::DEFAULT_MAX_FRAME),
        }
    }
}

/// A server of one model: the weights are encoded when it is made, once for every
/// session; [`Server::serve`] runs the accept loop.
pub struct Server {
    model: Model,
    network: Arc<NetworkServer>,
    opts: ServerOptions,
    session_budget: u64,
}

impl Server {
    /// Encodes the model's weights (those its plan holds) for every session to come.
    pub fn new(model: Model, opts: ServerOptions) -> Result<Self> {
        let session_budget = opts
            .serve
            .session_memory
            .unwrap_or_else(|| protocol::default_session_memory(opts.serve.max_concurrent));
        let network = NetworkServer::new(&model.plan, opts.nonlinear)?
            .with_session_memory(Some(session_budget));
        Ok(Self {
            model,
            network: Arc::new(network),
            opts,
            session_budget,
        })
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }
    /// The engine's server (encodings, memory per session).
    pub fn network(&self) -> &NetworkServer {
        &self.network
    }
    /// The memory budget of one session, bytes.
    pub fn session_budget(&self) -> u64 {
        self.session_budget
    }
    /// The options it serves with.
    pub fn options(&self) -> &ServerOptions {
        &self.opts
    }
    /// Frame timeout of the sessions.
    pub fn timeout(&self) -> Duration {
        self.opts.serve.timeout
    }

    /// One session on a channel already open.
    pub fn serve_channel<C: Channel>(&self, ch: &mut C) -> Result<ServerOutcome> {
        Ok(self.network.serve(ch)?)
    }

    /// Serves the metrics of this server (`GET /metrics`, Prometheus text format;
    /// `GET /healthz`) on `addr` from a thread of its own, creating them if the options
    /// have none; returns the address bound. Call before [`Server::serve`].
    pub fn serve_metrics(&mut self, addr: &str) -> Result<std::net::SocketAddr> {
        let metrics = self
            .opts
            .serve
            .metrics
            .get_or_insert_with(|| Arc::new(protocol::Metrics::new()))
            .clone();
        metrics.set_encoded_weight_bytes(self.network.encoded_bytes());
        Ok(metrics.serve_http(addr)?)
    }

    /// The handle that drains this server ([`protocol::Shutdown::request`]): running
    /// sessions finish (within `serve.drain_timeout`), new clients are told
    /// `ShuttingDown`, then [`Server::serve`] returns.
    pub fn shutdown_handle(&self) -> protocol::Shutdown {
        self.opts.serve.shutdown.clone()
    }

    /// Accepts clients on `listener` (at most `serve.max_concurrent` at once, the others
    /// told `Busy`; over TLS when `serve.tls` is set) until `serve.stop_after`
    /// sessions, until a drain asked for by [`Server::shutdown_handle`] is over, or
    /// forever; `on_session` hears of each one's end.
    pub fn serve(
        &self,
        listener: TcpListener,
        on_session: impl Fn(SessionReport<ServerOutcome>) + Send + Sync + 'static,
    ) -> Result<()> {
        self.serve_until(listener, self.opts.serve.stop_after, on_session)
    }

    /// [`Server::serve`], stopping after `sessions` connections (`None`: forever)
    /// whatever the options say.
    pub fn serve_until(
        &self,
        listener: TcpListener,
        sessions: Option<usize>,
        on_session: impl Fn(SessionReport<ServerOutcome>) + Send + Sync + 'static,
    ) -> Result<()> {
        let network = self.network.clone();
        let opts = ServeOptions {
            stop_after: sessions,
            ..self.opts.serve.clone()
        };
        let metrics = opts.metrics.clone();
        if let Some(m) = &metrics {
            m.set_encoded_weight_bytes(self.network.encoded_bytes());
        }
        Ok(protocol::serve_sessions(
            listener,
            &opts,
            move |ch| {
                network.serve_observed(ch, &mut |r| {
                    if let Some(m) = &metrics {
                        m.inference(r.offline_ms, r.online_ms);
                    }
                })
            },
            on_session,
        )?)
    }
}
