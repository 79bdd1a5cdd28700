//! The server of single linear layers: a [`Model`] (the layers it can serve, with their
//! weights and methods), one session over any channel ([`serve`]), and the TCP server
//! ([`serve_tcp`], sessions run by [`crate::serve_sessions`]: concurrent up to a limit,
//! deadlines per frame and per session, failures and panics contained). Encoded
//! weights are made once per server and shared by its sessions ([`Encodings`]).
//!
//! Phases of a session (each with its own byte counters and time):
//! - setup: `Hello` → `HelloOk` (the plan) → `Setup` (public key, Galois keys; validated
//!   at the border);
//! - offline (input-independent): the flooding encryptions of zero, and the weights'
//!   encoding the first time any session needs it; ends with `Ready`;
//! - online: per layer `Query` → `Response`; then `Close` (or `Reveal`: answered only by
//!   a server of public demo weights, [`Model::public_demo`]).
//!
//! What one client can make a server do is bounded before anything is allocated: at
//! most as many layer requests as the server holds (each served layer once), and the
//! session's memory (flooding zeros, query and response ciphertexts) within
//! [`ServeOptions::session_memory`].

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use he::{Bfv, Counting, OpCounts, Params};
use kernels::noise::NoiseModel;
use net::{Channel, Counters, Link};
use tracing::{debug, warn};

use crate::msg::{
    recv, send, unexpected, AbortReason, LayerMethod, LayerRequest, LayerShape, LayerSpec, Msg,
    ProtocolError, Result, PROTOCOL_VERSION,
};
use crate::plan::{choose, Encoded, Plan, ServerBackend};
use crate::sessions::{serve_sessions, ServeOptions, SessionReport};

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
    public_weights: bool,
}

impl Model {
    /// A model of private weights: every layer's weight count and method kind checked;
    /// a client's `Reveal` is refused.
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
        Ok(Model {
            layers,
            public_weights: false,
        })
    }
    /// A model of public demonstration weights (seeded, published): a client may ask
    /// for the server's shares (`Reveal`) to check its result.
    pub fn public_demo(layers: Vec<ServedLayer>) -> Result<Model> {
        Ok(Model {
            public_weights: true,
            ..Model::new(layers)?
        })
    }
    /// The layers.
    pub fn layers(&self) -> &[ServedLayer] {
        &self.layers
    }
    /// Whether the weights are public (the server answers `Reveal`).
    pub fn public_weights(&self) -> bool {
        self.public_weights
    }
    /// The plan for a client's requests: at most as many as the layers held; each
    /// request matched by shape to a held layer no earlier request took; the method is
    /// the server's if it fixed one (a different wish from the client is a plan
    /// mismatch), else the client's wish, else the cheapest predicted on `link`.
    pub fn plan(
        &self,
        requests: &[LayerRequest],
        params: &Params,
        link: &Link,
    ) -> Result<Vec<(LayerSpec, usize)>> {
        if requests.len() > self.layers.len() {
            return Err(ProtocolError::TooManyLayers {
                requested: requests.len(),
                held: self.layers.len(),
            });
        }
        let mut taken = vec![false; self.layers.len()];
        requests
            .iter()
            .enumerate()
            .map(|(k, r)| {
                let i = (0..self.layers.len())
                    .find(|&i| !taken[i] && self.layers[i].shape == r.shape)
                    .ok_or(ProtocolError::NotServed {
                        request: k,
                        shape: r.shape,
                    })?;
                taken[i] = true;
                let served = &self.layers[i];
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

/// Encoded weights a server shares between its sessions: per (held layer, plan),
/// made the first time a session needs them (with a keyless [`Bfv::encoder`]: the
/// encoding depends on the weights and the parameters only).
pub struct Encodings {
    params: Params,
    encoder: ServerBackend,
    made: Mutex<HashMap<(usize, LayerSpec), Arc<Encoded>>>,
}

impl Encodings {
    /// No encodings yet, for these parameters.
    pub fn new(params: &Params) -> Result<Self> {
        Ok(Self {
            params: params.clone(),
            encoder: Counting::new(Bfv::encoder(params)?),
            made: Mutex::new(HashMap::new()),
        })
    }
    /// Layer `layer` of `model` encoded for `spec` (made now if no session made it yet).
    pub fn get(&self, model: &Model, layer: usize, spec: &LayerSpec) -> Result<Arc<Encoded>> {
        let key = (layer, spec.clone());
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = made.get(&key) {
            return Ok(e.clone());
        }
        let weights = &model.layers.get(layer).ok_or(ProtocolError::Plan)?.weights;
        let e = Arc::new(Plan::new(spec, &self.params)?.encode(&self.encoder, weights)?);
        made.insert(key, e.clone());
        Ok(e)
    }
    /// How many encodings are held.
    pub fn len(&self) -> usize {
        self.made.lock().map_or(0, |m| m.len())
    }
    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    /// Response ciphertexts sent.
    pub responses: usize,
    /// log2 of the statistical distance between this session's responses and
    /// responses that depend on W·x + r alone (each within 2^-39, union bound).
    pub distance_log2: f64,
}

/// Serves one client on `ch` with encodings of its own and no memory limit (tests,
/// single sessions). Any failure aborts the session with a coarse reason to the peer
/// (the detail stays local) and is returned.
pub fn serve<C: Channel>(
    ch: &mut C,
    params: &Params,
    model: &Model,
    link: &Link,
) -> Result<ServerOutcome> {
    serve_with(ch, params, model, &Encodings::new(params)?, link, None)
}

/// [`serve`] with encodings shared between sessions and a memory limit for the session.
pub fn serve_with<C: Channel>(
    ch: &mut C,
    params: &Params,
    model: &Model,
    encodings: &Encodings,
    link: &Link,
    memory: Option<u64>,
) -> Result<ServerOutcome> {
    let r = serve_inner(ch, params, model, encodings, link, memory);
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
        ProtocolError::Plan
        | ProtocolError::NoMethod { .. }
        | ProtocolError::TooManyLayers { .. }
        | ProtocolError::NotServed { .. }
        | ProtocolError::TooManyInputs { .. } => AbortReason::Plan,
        ProtocolError::SessionMemory { .. } => AbortReason::Busy,
        ProtocolError::RevealRefused => AbortReason::Refused,
        ProtocolError::Malformed { .. }
        | ProtocolError::Unexpected { .. }
        | ProtocolError::He(he::HeError::Malformed { .. }) => AbortReason::Malformed,
        ProtocolError::InputOutOfRange { .. } | ProtocolError::NonFiniteInput { .. } => {
            AbortReason::Input
        }
        ProtocolError::Net(_) | ProtocolError::PeerAborted(_) => return,
        _ => AbortReason::Internal,
    };
    let _ = send(ch, &Msg::Abort(reason));
}

/// Checks a session's memory need against its budget, before it allocates.
pub(crate) fn check_memory(needed: u64, memory: Option<u64>) -> Result<()> {
    match memory {
        Some(budget) if needed > budget => Err(ProtocolError::SessionMemory { needed, budget }),
        _ => Ok(()),
    }
}

fn serve_inner<C: Channel>(
    ch: &mut C,
    params: &Params,
    model: &Model,
    encodings: &Encodings,
    link: &Link,
    memory: Option<u64>,
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
    let planned = plan
        .iter()
        .map(|(spec, _)| Plan::new(spec, params))
        .collect::<Result<Vec<_>>>()?;
    check_memory(
        planned.iter().map(|p| p.session_bytes(params)).sum(),
        memory,
    )?;
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
    for ((spec, i), p) in plan.iter().zip(&planned) {
        prepared.push((encodings.get(model, *i, spec)?, p.flood_pool(&b, params)?));
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
    for (i, (encoded, pool)) in prepared.iter_mut().enumerate() {
        let cts = match recv(ch)? {
            Msg::Query { layer, cts } if layer as usize == i => cts,
            m => return Err(unexpected("Query for the next layer", &m)),
        };
        let t = Instant::now();
        let (resp, share) = encoded.answer(&b, pool, &cts)?;
        debug!(
            layer = i,
            ms = t.elapsed().as_secs_f64() * 1e3,
            "query answered"
        );
        out.responses += resp.len();
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
    out.distance_log2 = NoiseModel::session_distance_log2(out.responses);
    match recv(ch)? {
        Msg::Close => {}
        Msg::Reveal if model.public_weights => {
            out.revealed = true;
            send(ch, &Msg::Share(out.shares.clone()))?;
        }
        Msg::Reveal => {
            warn!("a client asked for the server's shares of private weights: refused");
            return Err(ProtocolError::RevealRefused);
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

/// One finished session of [`serve_tcp`].
pub type LayerSessionReport = SessionReport<ServerOutcome>;

/// Serves `model` over TCP: sessions run by [`serve_sessions`] (concurrent up to
/// `opts.max_concurrent`, frame and session deadlines, failures contained), sharing one
/// set of encoded weights, each within `opts.session_memory` (default: the available
/// memory divided among the concurrent sessions). Returns after `opts.stop_after`
/// connections, or never.
pub fn serve_tcp<F>(
    listener: TcpListener,
    params: &Params,
    model: Arc<Model>,
    opts: &ServeOptions,
    on_session: F,
) -> Result<()>
where
    F: Fn(LayerSessionReport) + Send + Sync + 'static,
{
    let encodings = Arc::new(Encodings::new(params)?);
    let params = params.clone();
    let link = opts.link;
    let memory = Some(
        opts.session_memory
            .unwrap_or_else(|| crate::sessions::default_session_memory(opts.max_concurrent)),
    );
    serve_sessions(
        listener,
        opts,
        move |ch| serve_with(ch, &params, &model, &encodings, &link, memory),
        on_session,
    )
}
