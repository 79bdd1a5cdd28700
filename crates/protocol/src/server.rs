//! The server: a [`Model`] (the layers it can serve, with their weights and methods),
//! one session over any channel ([`serve`]), and a TCP accept loop that runs sessions
//! concurrently, one thread each, up to a limit ([`serve_tcp`]). One session's failure
//! is logged and answered with a coarse `Abort`; it never stops the others.
//!
//! Phases of a session (each with its own byte counters and time):
//! - setup: `Hello` → `HelloOk` (the plan) → `Setup` (public key, Galois keys);
//! - offline (input-independent): encoding the weights into prepared plaintexts and
//!   precomputing the flooding encryptions of zero; ends with `Ready`;
//! - online: per layer `Query` → `Response`; then `Close` (or `Reveal`, demo only).

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use he::{Backend, Bfv, Counting, OpCounts, Params};
use kernels::{FloodPool, LinearLayer};
use net::{Channel, Counters, Link, TcpChannel};
use tracing::{debug, info, warn};

use crate::msg::{
    recv, send, unexpected, AbortReason, LayerMethod, LayerRequest, LayerShape, LayerSpec, Msg,
    ProtocolError, Result, PROTOCOL_VERSION,
};
use crate::plan::{choose, Plan};

/// One layer a server can serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedLayer {
    /// Its shape (public).
    pub shape: LayerShape,
    /// The method, or `None` to pick per session (the client's wish, else the cheapest).
    pub method: Option<LayerMethod>,
    /// Signed weights (private), `shape.weight_len()` of them.
    pub weights: Vec<i64>,
}

/// The layers a server holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    layers: Vec<ServedLayer>,
}

impl Model {
    /// Checks every layer's weight count and method kind.
    pub fn new(layers: Vec<ServedLayer>) -> Result<Model> {
        for (i, l) in layers.iter().enumerate() {
            if l.weights.len() != l.shape.weight_len() {
                return Err(ProtocolError::WeightLength {
                    layer: i,
                    expected: l.shape.weight_len(),
                    actual: l.weights.len(),
                });
            }
            if let Some(m) = l.method {
                l.shape.with(m)?;
            }
        }
        Ok(Model { layers })
    }
    /// The layers.
    pub fn layers(&self) -> &[ServedLayer] {
        &self.layers
    }
    /// The plan for a client's requests: each request matched by shape; the method is
    /// the server's if it fixed one (a different wish from the client is a plan
    /// mismatch), else the client's wish, else the cheapest predicted on `link`.
    pub fn plan(
        &self,
        requests: &[LayerRequest],
        params: &Params,
        link: &Link,
    ) -> Result<Vec<(LayerSpec, usize)>> {
        requests
            .iter()
            .map(|r| {
                let (i, served) = self
                    .layers
                    .iter()
                    .enumerate()
                    .find(|(_, l)| l.shape == r.shape)
                    .ok_or(ProtocolError::Plan)?;
                let spec = match (served.method, r.method) {
                    (Some(m), Some(w)) if m != w => return Err(ProtocolError::Plan),
                    (Some(m), _) | (None, Some(m)) => r.shape.with(m)?,
                    (None, None) => choose(&r.shape, params, link)?.0,
                };
                Ok((spec, i))
            })
            .collect()
    }
}

/// Byte counters per phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PhaseCounters {
    /// Handshake and keys.
    pub setup: Counters,
    /// Input-independent work (ends with `Ready`).
    pub offline: Counters,
    /// Queries, responses, close.
    pub online: Counters,
}

/// Wall-clock time per phase, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PhaseTimes {
    /// Handshake and keys (including the client's key generation, as the server sees it).
    pub setup_ms: f64,
    /// Input-independent work.
    pub offline_ms: f64,
    /// Queries and responses.
    pub online_ms: f64,
}

/// What the server keeps of a session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerOutcome {
    /// The plan that ran.
    pub plan: Vec<LayerSpec>,
    /// The server's share of each layer's output.
    pub shares: Vec<Vec<u64>>,
    /// Whether the client asked for the server's shares (demo).
    pub revealed: bool,
    /// Traffic per phase.
    pub traffic: PhaseCounters,
    /// Time per phase.
    pub times: PhaseTimes,
    /// HE operations of each layer's online work.
    pub counts: Vec<OpCounts>,
}

/// Serves one client on `ch`. Any failure aborts the session with a coarse reason to
/// the peer (the detail stays local) and is returned.
pub fn serve<C: Channel>(
    ch: &mut C,
    params: &Params,
    model: &Model,
    link: &Link,
) -> Result<ServerOutcome> {
    let r = serve_inner(ch, params, model, link);
    if let Err(e) = &r {
        abort(ch, e);
    }
    r
}

/// Tells the peer, coarsely, why this side stops (nothing when the transport failed
/// or the peer itself aborted).
pub(crate) fn abort<C: Channel>(ch: &mut C, e: &ProtocolError) {
    let reason = match e {
        ProtocolError::Version { .. } => AbortReason::Version,
        ProtocolError::Params { .. } => AbortReason::Params,
        ProtocolError::Plan | ProtocolError::NoMethod { .. } => AbortReason::Plan,
        ProtocolError::Malformed { .. } | ProtocolError::Unexpected { .. } => {
            AbortReason::Malformed
        }
        ProtocolError::InputOutOfRange { .. } | ProtocolError::NonFiniteInput { .. } => {
            AbortReason::Input
        }
        ProtocolError::Net(_) | ProtocolError::PeerAborted(_) => return,
        _ => AbortReason::Internal,
    };
    let _ = send(ch, &Msg::Abort(reason));
}

type Server = Counting<Bfv>;

/// One layer after the offline phase.
enum Prepared {
    Matvec(
        kernels::MatvecPlan,
        kernels::EncodedMatrix<Server>,
        FloodPool<Server>,
    ),
    Conv(
        Box<kernels::ConvPlan>,
        kernels::EncodedFilters<Server>,
        FloodPool<Server>,
    ),
}

fn prepare<L: LinearLayer>(
    plan: &L,
    b: &Server,
    params: &Params,
    w: &[i64],
) -> Result<(L::Encoded<Server>, FloodPool<Server>)> {
    let m = plan.encode_weights(b, w)?;
    let mut pool = FloodPool::new(plan.flood_bits(params)?);
    pool.fill(b, plan.output_cts())?;
    Ok((m, pool))
}

/// One query answered: validate and read the ciphertexts, run the kernel and
/// `share_output`, serialise the response; returns it and the server's share.
pub(crate) fn answer<L: LinearLayer>(
    plan: &L,
    b: &Server,
    m: &L::Encoded<Server>,
    pool: &mut FloodPool<Server>,
    cts: &[Vec<u8>],
) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
    if cts.len() != plan.query_cts() {
        return Err(ProtocolError::Malformed {
            detail: format!(
                "query of {} ciphertexts, the layer takes {}",
                cts.len(),
                plan.query_cts()
            ),
        });
    }
    let q = cts
        .iter()
        .map(|c| b.deserialize(c))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let (resp, share) = plan.respond(b, m, &q, pool)?;
    let out = resp
        .iter()
        .map(|c| b.serialize(c))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((out, share))
}

fn serve_inner<C: Channel>(
    ch: &mut C,
    params: &Params,
    model: &Model,
    link: &Link,
) -> Result<ServerOutcome> {
    let t0 = Instant::now();
    let c0 = ch.counters();
    let plan = match recv(ch)? {
        Msg::Hello {
            version,
            params: spec,
            params_hash,
            layers,
        } => {
            if version != PROTOCOL_VERSION {
                return Err(ProtocolError::Version {
                    ours: PROTOCOL_VERSION,
                    theirs: version,
                });
            }
            if params_hash != params.hash()
                || he::Params::from_spec(&spec).ok().as_ref() != Some(params)
            {
                return Err(ProtocolError::Params {
                    ours: params.hash(),
                    theirs: params_hash,
                });
            }
            model.plan(&layers, params, link)?
        }
        m => return Err(unexpected("Hello", &m)),
    };
    let specs: Vec<LayerSpec> = plan.iter().map(|(s, _)| s.clone()).collect();
    debug!(plan = ?specs, "handshake accepted");
    send(
        ch,
        &Msg::HelloOk {
            layers: specs.clone(),
        },
    )?;
    let keys = match recv(ch)? {
        Msg::Setup(k) => k,
        m => return Err(unexpected("Setup", &m)),
    };
    let b = Counting::new(Bfv::server(params, &keys)?);
    let c1 = ch.counters();
    let t1 = Instant::now();
    debug!(
        galois_bytes = keys.galois_bytes(),
        public_key_bytes = keys.public_key_bytes(),
        "keys received"
    );

    // Offline: everything that does not depend on the client's input.
    let mut prepared = Vec::with_capacity(plan.len());
    for (spec, i) in &plan {
        let w = &model.layers[*i].weights;
        prepared.push(match Plan::new(spec, params)? {
            Plan::Matvec(p) => {
                let (m, pool) = prepare(&p, &b, params, w)?;
                Prepared::Matvec(p, m, pool)
            }
            Plan::Conv(p) => {
                let (m, pool) = prepare(p.as_ref(), &b, params, w)?;
                Prepared::Conv(p, m, pool)
            }
        });
    }
    b.take();
    send(ch, &Msg::Ready)?;
    let c2 = ch.counters();
    let t2 = Instant::now();
    debug!(ms = (t2 - t1).as_secs_f64() * 1e3, "offline work done");

    let mut out = ServerOutcome {
        plan: specs,
        ..Default::default()
    };
    for (i, prep) in prepared.iter_mut().enumerate() {
        let cts = match recv(ch)? {
            Msg::Query { layer, cts } if layer as usize == i => cts,
            m => return Err(unexpected("Query for the next layer", &m)),
        };
        let t = Instant::now();
        let (resp, share) = match prep {
            Prepared::Matvec(p, m, pool) => answer(p, &b, m, pool, &cts)?,
            Prepared::Conv(p, m, pool) => answer(p.as_ref(), &b, m, pool, &cts)?,
        };
        debug!(
            layer = i,
            ms = t.elapsed().as_secs_f64() * 1e3,
            "query answered"
        );
        send(
            ch,
            &Msg::Response {
                layer: i as u32,
                cts: resp,
            },
        )?;
        out.shares.push(share);
        out.counts.push(b.take());
    }
    match recv(ch)? {
        Msg::Close => {}
        Msg::Reveal => {
            out.revealed = true;
            send(ch, &Msg::Share(out.shares.clone()))?;
        }
        m => return Err(unexpected("Close or Reveal", &m)),
    }
    let c3 = ch.counters();
    out.traffic = PhaseCounters {
        setup: c1 - c0,
        offline: c2 - c1,
        online: c3 - c2,
    };
    out.times = PhaseTimes {
        setup_ms: (t1 - t0).as_secs_f64() * 1e3,
        offline_ms: (t2 - t1).as_secs_f64() * 1e3,
        online_ms: t2.elapsed().as_secs_f64() * 1e3,
    };
    Ok(out)
}

/// How a TCP server runs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Frame size limit.
    pub max_frame: usize,
    /// Read/write timeout per message.
    pub timeout: Duration,
    /// Emulated link.
    pub link: Link,
    /// Sessions that may run at once; more are refused with `Abort(Busy)`.
    pub max_concurrent: usize,
    /// Stop accepting after this many connections (`None`: serve forever).
    pub stop_after: Option<usize>,
}

/// One finished session of [`serve_tcp`].
#[derive(Clone, Debug)]
pub struct SessionReport {
    /// The peer's address.
    pub peer: String,
    /// The outcome.
    pub result: Result<ServerOutcome>,
    /// Wall-clock time, ms.
    pub elapsed_ms: f64,
    /// Everything the socket carried.
    pub counters: Counters,
}

/// Accepts connections and serves each on its own thread (at most
/// `opts.max_concurrent` at once). `on_session` is called from the session's thread
/// when it ends, with its report. Returns after `opts.stop_after` connections have
/// been served (all of them joined), or never.
pub fn serve_tcp<F>(
    listener: TcpListener,
    params: &Params,
    model: Arc<Model>,
    opts: &ServeOptions,
    on_session: F,
) -> Result<()>
where
    F: Fn(SessionReport) + Send + Sync + 'static,
{
    let on_session = Arc::new(on_session);
    let running = Arc::new(AtomicUsize::new(0));
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
        if running.load(Ordering::SeqCst) >= opts.max_concurrent {
            warn!(%peer, "busy: refusing the session");
            let _ = send(&mut ch, &Msg::Abort(AbortReason::Busy));
            on_session(SessionReport {
                peer,
                result: Err(ProtocolError::PeerAborted(AbortReason::Busy)),
                elapsed_ms: 0.0,
                counters: ch.counters(),
            });
        } else {
            running.fetch_add(1, Ordering::SeqCst);
            let (params, model, link) = (params.clone(), model.clone(), opts.link);
            let (running, on_session) = (running.clone(), on_session.clone());
            handles.push(thread::spawn(move || {
                info!(%peer, "session started");
                let t = Instant::now();
                let result = serve(&mut ch, &params, &model, &link);
                running.fetch_sub(1, Ordering::SeqCst);
                match &result {
                    Ok(o) => info!(
                        %peer,
                        setup_ms = o.times.setup_ms,
                        offline_ms = o.times.offline_ms,
                        online_ms = o.times.online_ms,
                        "session done"
                    ),
                    Err(e) => tracing::error!(%peer, error = %e, "session failed"),
                }
                on_session(SessionReport {
                    peer,
                    result,
                    elapsed_ms: t.elapsed().as_secs_f64() * 1e3,
                    counters: ch.counters(),
                });
            }));
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
