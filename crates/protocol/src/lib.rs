//! helina's two-party protocol for linear layers, as two functions over any
//! [`net::Channel`]: [`serve`] (the server, holding the weights) and [`query`] (the
//! client, holding the input).
//!
//! Messages (bincode, one per frame, decoded with the frame limit):
//! 1. client → server `Hello` (protocol version, parameter spec and hash — the hash
//!    includes the NTT backend, since builds with different backends cannot read each
//!    other's keys — and the layer plan); server → `HelloOk` or `Abort`;
//! 2. client → `Setup` (public key and only the Galois keys the plan needs, seeded);
//! 3. per layer: client → `Query` (seeded symmetric ciphertexts), server → `Response`
//!    (masked, flooded, last-level ciphertexts); each side keeps its share;
//! 4. client → `Reveal` (demo only, insecure: the server sends its share) or `Close`.
//!
//! Errors sent to the peer are coarse ([`AbortReason`]); the detail stays local.

use he::{Backend, Bfv, GaloisSpec, Params, ParamsSpec, PublicKeys};
use kernels::{ConvPlan, FloodPool, LinearLayer, MatvecPlan};
use net::{Channel, NetError};
use serde::{Deserialize, Serialize};

use bincode::Options;

/// Protocol version.
pub const PROTOCOL_VERSION: u32 = 1;

/// One linear layer of the plan both parties agree on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayerSpec {
    /// W·x with an n_o x n_i matrix.
    Matvec {
        /// Method.
        method: kernels::Method,
        /// Rows n_o.
        rows: usize,
        /// Columns n_i.
        cols: usize,
    },
    /// A convolution.
    Conv {
        /// Method.
        method: kernels::ConvMethod,
        /// Shape.
        shape: kernels::ConvShape,
    },
}

/// Coarse reasons an endpoint gives its peer when it stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AbortReason {
    /// Protocol version mismatch.
    Version,
    /// Parameter set or NTT backend mismatch.
    Params,
    /// Layer plan mismatch.
    Plan,
    /// A message that did not decode or did not fit.
    Malformed,
    /// Something else went wrong on the sender's side.
    Internal,
}

/// The wire messages.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Client hello.
    Hello {
        /// Protocol version.
        version: u32,
        /// Parameter set.
        params: ParamsSpec,
        /// `Params::hash()` (includes the NTT backend).
        params_hash: String,
        /// The layers.
        layers: Vec<LayerSpec>,
    },
    /// Server accepts.
    HelloOk,
    /// Client keys.
    Setup(PublicKeys),
    /// A query for a layer.
    Query {
        /// Layer index.
        layer: u32,
        /// Serialized ciphertexts.
        cts: Vec<Vec<u8>>,
    },
    /// The response to a query.
    Response {
        /// Layer index.
        layer: u32,
        /// Serialized ciphertexts.
        cts: Vec<Vec<u8>>,
    },
    /// Client asks for the server's share (demo only).
    Reveal,
    /// The server's share of the last layer (demo only).
    Share(Vec<u64>),
    /// Orderly close.
    Close,
    /// The sender stops.
    Abort(AbortReason),
}

/// Protocol errors.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum ProtocolError {
    /// Transport error.
    #[error(transparent)]
    Net(#[from] NetError),
    /// HE error.
    #[error(transparent)]
    He(#[from] he::HeError),
    /// Kernel error.
    #[error(transparent)]
    Kernel(#[from] kernels::KernelError),
    /// A frame that is not a message.
    #[error("malformed message: {detail}")]
    Malformed {
        /// Decoder's words.
        detail: String,
    },
    /// Version mismatch.
    #[error("protocol version {theirs} is not ours ({ours})")]
    Version {
        /// Ours.
        ours: u32,
        /// Theirs.
        theirs: u32,
    },
    /// Parameter or NTT-backend mismatch.
    #[error("parameter set mismatch: ours {ours}, theirs {theirs}")]
    Params {
        /// Our hash.
        ours: String,
        /// Their hash.
        theirs: String,
    },
    /// Layer plan mismatch.
    #[error("layer plan mismatch")]
    Plan,
    /// A message out of order.
    #[error("expected {expected}, got {got}")]
    Unexpected {
        /// What was expected.
        expected: &'static str,
        /// What came.
        got: String,
    },
    /// The peer stopped.
    #[error("the peer aborted: {0:?}")]
    PeerAborted(AbortReason),
}

/// Result alias.
pub type Result<T> = std::result::Result<T, ProtocolError>;

fn codec(limit: usize) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(limit as u64)
}

/// Sends one message.
pub fn send<C: Channel>(ch: &mut C, m: &Msg) -> Result<()> {
    let bytes = codec(usize::MAX)
        .serialize(m)
        .map_err(|e| ProtocolError::Malformed {
            detail: e.to_string(),
        })?;
    Ok(ch.send(&bytes)?)
}

/// Receives one message (an `Abort` from the peer becomes [`ProtocolError::PeerAborted`]).
pub fn recv<C: Channel>(ch: &mut C) -> Result<Msg> {
    let frame = ch.recv()?;
    let m: Msg = codec(frame.len())
        .deserialize(&frame)
        .map_err(|e| ProtocolError::Malformed {
            detail: e.to_string(),
        })?;
    match m {
        Msg::Abort(r) => Err(ProtocolError::PeerAborted(r)),
        m => Ok(m),
    }
}

fn kind(m: &Msg) -> String {
    match m {
        Msg::Hello { .. } => "Hello",
        Msg::HelloOk => "HelloOk",
        Msg::Setup(_) => "Setup",
        Msg::Query { .. } => "Query",
        Msg::Response { .. } => "Response",
        Msg::Reveal => "Reveal",
        Msg::Share(_) => "Share",
        Msg::Close => "Close",
        Msg::Abort(_) => "Abort",
    }
    .to_string()
}

/// A planned layer (either kernel family).
#[derive(Clone, Debug)]
pub enum Plan {
    /// Matrix-vector.
    Matvec(MatvecPlan),
    /// Convolution.
    Conv(Box<ConvPlan>),
}

impl Plan {
    /// Plans a layer spec on these parameters.
    pub fn new(spec: &LayerSpec, params: &Params) -> Result<Plan> {
        let slots = he::SlotInfo {
            n: params.n(),
            p: params.p(),
            layout: he::Layout::TwoRows,
        };
        Ok(match spec {
            LayerSpec::Matvec { method, rows, cols } => {
                Plan::Matvec(MatvecPlan::new(*method, *rows, *cols, slots)?)
            }
            LayerSpec::Conv { method, shape } => {
                Plan::Conv(Box::new(ConvPlan::new(*method, *shape, slots)?))
            }
        })
    }
    /// Galois keys.
    pub fn galois(&self) -> GaloisSpec {
        match self {
            Plan::Matvec(p) => LinearLayer::galois(p),
            Plan::Conv(p) => LinearLayer::galois(p.as_ref()),
        }
    }
    /// Input length.
    pub fn input_len(&self) -> usize {
        match self {
            Plan::Matvec(p) => p.input_len(),
            Plan::Conv(p) => p.input_len(),
        }
    }
}

fn serialize_all<B: Backend>(b: &B, cts: &[B::Ct]) -> Result<Vec<Vec<u8>>> {
    Ok(cts
        .iter()
        .map(|c| b.serialize(c))
        .collect::<std::result::Result<_, _>>()?)
}

fn deserialize_all<B: Backend>(b: &B, cts: &[Vec<u8>]) -> Result<Vec<B::Ct>> {
    Ok(cts
        .iter()
        .map(|c| b.deserialize(c))
        .collect::<std::result::Result<_, _>>()?)
}

/// One layer's server side: encode (offline), precompute flooding, answer a query.
fn answer<L: LinearLayer>(
    plan: &L,
    b: &Bfv,
    params: &Params,
    w: &[i64],
    cts: &[Vec<u8>],
) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
    let m = plan.encode_weights(b, w)?;
    let mut pool = FloodPool::new(plan.flood_bits(params)?);
    pool.fill(b, plan.output_cts())?;
    let q = deserialize_all(b, cts)?;
    let (resp, share) = plan.respond(b, &m, &q, &mut pool)?;
    Ok((serialize_all(b, &resp)?, share))
}

/// What the server keeps of a session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerOutcome {
    /// The server's share of each layer's output.
    pub shares: Vec<Vec<u64>>,
    /// Whether the client asked for the server's last share (demo).
    pub revealed: bool,
}

/// Serves one client on `ch`: the layers and their signed weights.
/// Any failure aborts the session with a coarse reason to the peer.
pub fn serve<C: Channel>(
    ch: &mut C,
    params: &Params,
    layers: &[(LayerSpec, Vec<i64>)],
) -> Result<ServerOutcome> {
    let r = serve_inner(ch, params, layers);
    if let Err(e) = &r {
        let reason = match e {
            ProtocolError::Version { .. } => AbortReason::Version,
            ProtocolError::Params { .. } => AbortReason::Params,
            ProtocolError::Plan => AbortReason::Plan,
            ProtocolError::Malformed { .. } | ProtocolError::Unexpected { .. } => {
                AbortReason::Malformed
            }
            ProtocolError::Net(_) | ProtocolError::PeerAborted(_) => return r,
            _ => AbortReason::Internal,
        };
        let _ = send(ch, &Msg::Abort(reason));
    }
    r
}

fn serve_inner<C: Channel>(
    ch: &mut C,
    params: &Params,
    layers: &[(LayerSpec, Vec<i64>)],
) -> Result<ServerOutcome> {
    match recv(ch)? {
        Msg::Hello {
            version,
            params: spec,
            params_hash,
            layers: theirs,
        } => {
            if version != PROTOCOL_VERSION {
                return Err(ProtocolError::Version {
                    ours: PROTOCOL_VERSION,
                    theirs: version,
                });
            }
            if params_hash != params.hash()
                || Params::from_spec(&spec).ok().as_ref() != Some(params)
            {
                return Err(ProtocolError::Params {
                    ours: params.hash(),
                    theirs: params_hash,
                });
            }
            if theirs.len() != layers.len() || theirs.iter().zip(layers).any(|(a, (b, _))| a != b) {
                return Err(ProtocolError::Plan);
            }
        }
        m => {
            return Err(ProtocolError::Unexpected {
                expected: "Hello",
                got: kind(&m),
            })
        }
    }
    send(ch, &Msg::HelloOk)?;
    let keys = match recv(ch)? {
        Msg::Setup(k) => k,
        m => {
            return Err(ProtocolError::Unexpected {
                expected: "Setup",
                got: kind(&m),
            })
        }
    };
    let b = Bfv::server(params, &keys)?;
    let mut out = ServerOutcome::default();
    for (i, (spec, w)) in layers.iter().enumerate() {
        let cts = match recv(ch)? {
            Msg::Query { layer, cts } if layer as usize == i => cts,
            m => {
                return Err(ProtocolError::Unexpected {
                    expected: "Query for the next layer",
                    got: kind(&m),
                })
            }
        };
        let (resp, share) = match Plan::new(spec, params)? {
            Plan::Matvec(p) => answer(&p, &b, params, w, &cts)?,
            Plan::Conv(p) => answer(p.as_ref(), &b, params, w, &cts)?,
        };
        send(
            ch,
            &Msg::Response {
                layer: i as u32,
                cts: resp,
            },
        )?;
        out.shares.push(share);
    }
    match recv(ch)? {
        Msg::Close => {}
        Msg::Reveal => {
            out.revealed = true;
            send(
                ch,
                &Msg::Share(out.shares.last().cloned().unwrap_or_default()),
            )?;
        }
        m => {
            return Err(ProtocolError::Unexpected {
                expected: "Close or Reveal",
                got: kind(&m),
            })
        }
    }
    Ok(out)
}

/// What the client gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOutcome {
    /// The client's share of the (single) layer's output.
    pub share: Vec<u64>,
    /// With `reveal`: the reconstructed output (client + server share mod p).
    pub revealed: Option<Vec<u64>>,
    /// Traffic of the setup phase (handshake, public key, Galois keys).
    pub setup: net::Counters,
    /// Traffic of the online phase (query, response, close or reveal).
    pub online: net::Counters,
}

/// Runs one linear layer as the client: `x` reduced mod p. With `reveal` (demo only,
/// insecure) the server sends its share and the output is reconstructed.
pub fn query<C: Channel>(
    ch: &mut C,
    params: &Params,
    layer: &LayerSpec,
    x: &[u64],
    reveal: bool,
) -> Result<ClientOutcome> {
    let plan = Plan::new(layer, params)?;
    send(
        ch,
        &Msg::Hello {
            version: PROTOCOL_VERSION,
            params: params.spec(),
            params_hash: params.hash(),
            layers: vec![layer.clone()],
        },
    )?;
    match recv(ch)? {
        Msg::HelloOk => {}
        m => {
            return Err(ProtocolError::Unexpected {
                expected: "HelloOk",
                got: kind(&m),
            })
        }
    }
    let start = ch.counters();
    let b = Bfv::keygen(params, plan.galois())?;
    send(ch, &Msg::Setup(b.public_keys().clone()))?;
    let after_setup = ch.counters();
    let q = match &plan {
        Plan::Matvec(p) => p.query(&b, x)?,
        Plan::Conv(p) => p.query(&b, x)?,
    };
    send(
        ch,
        &Msg::Query {
            layer: 0,
            cts: serialize_all(&b, &q)?,
        },
    )?;
    let cts = match recv(ch)? {
        Msg::Response { layer: 0, cts } => cts,
        m => {
            return Err(ProtocolError::Unexpected {
                expected: "Response",
                got: kind(&m),
            })
        }
    };
    let resp = deserialize_all(&b, &cts)?;
    let share = match &plan {
        Plan::Matvec(p) => p.decrypt(&b, &resp)?,
        Plan::Conv(p) => p.decrypt(&b, &resp)?,
    };
    let revealed = if reveal {
        send(ch, &Msg::Reveal)?;
        match recv(ch)? {
            Msg::Share(s) if s.len() == share.len() => {
                let p = params.p();
                Some(share.iter().zip(&s).map(|(a, b)| (a + b) % p).collect())
            }
            m => {
                return Err(ProtocolError::Unexpected {
                    expected: "Share",
                    got: kind(&m),
                })
            }
        }
    } else {
        send(ch, &Msg::Close)?;
        None
    };
    let end = ch.counters();
    Ok(ClientOutcome {
        share,
        revealed,
        setup: after_setup - start,
        online: end - after_setup,
    })
}
