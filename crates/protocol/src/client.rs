//! The client: asks for layers by shape, generates only the keys the server's plan
//! needs, waits for the server's offline phase, then queries each layer and decrypts
//! its share.

use std::time::Instant;

use he::{Backend, Bfv, Params};
use kernels::LinearLayer;
use net::Channel;
use tracing::debug;

use crate::msg::{
    recv, send, unexpected, LayerRequest, LayerSpec, Msg, ProtocolError, Result, PROTOCOL_VERSION,
};
use crate::plan::Plan;
use crate::server::{PhaseCounters, PhaseTimes};

/// A step of the client's session, reported to a progress callback when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Handshake.
    Handshake,
    /// Generating the secret, public and Galois keys.
    KeyGen,
    /// Uploading the keys.
    Setup,
    /// Waiting for the server's input-independent work.
    Offline,
    /// Encrypting and sending a layer's query.
    Query(usize),
    /// Waiting for and decrypting a layer's response.
    Response(usize),
    /// Closing (or asking for the server's shares, demo only).
    Close,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Phase::Handshake => write!(f, "handshake"),
            Phase::KeyGen => write!(f, "generating keys"),
            Phase::Setup => write!(f, "uploading keys"),
            Phase::Offline => write!(f, "server precomputing (offline)"),
            Phase::Query(i) => write!(f, "layer {i}: encrypting and sending the query"),
            Phase::Response(i) => write!(f, "layer {i}: waiting for the response"),
            Phase::Close => write!(f, "closing"),
        }
    }
}

/// What the client gets.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientOutcome {
    /// The plan the server chose.
    pub plan: Vec<LayerSpec>,
    /// The client's share of each layer's output.
    pub shares: Vec<Vec<u64>>,
    /// With `reveal`: the reconstructed outputs (client + server share mod p).
    pub revealed: Option<Vec<Vec<u64>>>,
    /// Traffic per phase, as this side's socket counted it.
    pub traffic: PhaseCounters,
    /// Time per phase.
    pub times: PhaseTimes,
    /// The smallest noise budget (bits) left in any response.
    pub noise_budget: Option<u32>,
}

/// Runs the requested layers as the client, one input per layer (reduced mod p). With
/// `reveal` (demo only, insecure) the server sends its shares and the outputs are
/// reconstructed. `progress` is told when each phase starts.
pub fn query<C: Channel>(
    ch: &mut C,
    params: &Params,
    requests: &[LayerRequest],
    inputs: &[Vec<u64>],
    reveal: bool,
    progress: &mut dyn FnMut(Phase),
) -> Result<ClientOutcome> {
    for (i, (r, x)) in requests.iter().zip(inputs).enumerate() {
        if x.len() != r.shape.input_len() {
            return Err(ProtocolError::InputLength {
                layer: i,
                expected: r.shape.input_len(),
                actual: x.len(),
            });
        }
    }
    if requests.len() != inputs.len() {
        return Err(ProtocolError::InputLength {
            layer: requests.len().min(inputs.len()),
            expected: requests.len(),
            actual: inputs.len(),
        });
    }
    let t0 = Instant::now();
    let c0 = ch.counters();
    progress(Phase::Handshake);
    send(
        ch,
        &Msg::Hello {
            version: PROTOCOL_VERSION,
            params: params.spec(),
            params_hash: params.hash(),
            layers: requests.to_vec(),
        },
    )?;
    let specs = match recv(ch)? {
        Msg::HelloOk { layers } => layers,
        m => return Err(unexpected("HelloOk", &m)),
    };
    let agrees = specs.len() == requests.len()
        && specs
            .iter()
            .zip(requests)
            .all(|(s, r)| s.shape() == r.shape && r.method.is_none_or(|m| m == s.method()));
    if !agrees {
        return Err(ProtocolError::Plan);
    }
    debug!(plan = ?specs, "plan accepted");
    let plans = specs
        .iter()
        .map(|s| Plan::new(s, params))
        .collect::<Result<Vec<_>>>()?;
    progress(Phase::KeyGen);
    let galois = plans
        .iter()
        .fold(he::GaloisSpec::none(), |g, p| g.union(&p.galois()));
    let b = Bfv::keygen(params, galois)?;
    progress(Phase::Setup);
    send(ch, &Msg::Setup(b.public_keys().clone()))?;
    let c1 = ch.counters();
    let t1 = Instant::now();
    progress(Phase::Offline);
    match recv(ch)? {
        Msg::Ready => {}
        m => return Err(unexpected("Ready", &m)),
    }
    let c2 = ch.counters();
    let t2 = Instant::now();
    let mut shares = Vec::with_capacity(plans.len());
    let mut noise_budget: Option<u32> = None;
    for (i, (plan, x)) in plans.iter().zip(inputs).enumerate() {
        progress(Phase::Query(i));
        let q = match plan {
            Plan::Matvec(p) => p.query(&b, x)?,
            Plan::Conv(p) => p.query(&b, x)?,
        };
        let cts = q
            .iter()
            .map(|c| b.serialize(c))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        send(
            ch,
            &Msg::Query {
                layer: i as u32,
                cts,
            },
        )?;
        progress(Phase::Response(i));
        let cts = match recv(ch)? {
            Msg::Response { layer, cts } if layer as usize == i => cts,
            m => return Err(unexpected("Response for the layer queried", &m)),
        };
        let resp = cts
            .iter()
            .map(|c| b.deserialize(c))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for c in &resp {
            if let Some(bits) = b.noise_budget(c)? {
                noise_budget = Some(noise_budget.map_or(bits, |v| v.min(bits)));
            }
        }
        shares.push(match plan {
            Plan::Matvec(p) => p.decrypt(&b, &resp)?,
            Plan::Conv(p) => p.decrypt(&b, &resp)?,
        });
    }
    progress(Phase::Close);
    let revealed = if reveal {
        send(ch, &Msg::Reveal)?;
        match recv(ch)? {
            Msg::Share(s)
                if s.len() == shares.len()
                    && s.iter().zip(&shares).all(|(a, b)| a.len() == b.len()) =>
            {
                let p = params.p();
                Some(
                    shares
                        .iter()
                        .zip(&s)
                        .map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x + y % p) % p).collect())
                        .collect(),
                )
            }
            m => return Err(unexpected("Share of every layer", &m)),
        }
    } else {
        send(ch, &Msg::Close)?;
        None
    };
    let c3 = ch.counters();
    Ok(ClientOutcome {
        plan: specs,
        shares,
        revealed,
        traffic: PhaseCounters {
            setup: c1 - c0,
            offline: c2 - c1,
            online: c3 - c2,
        },
        times: PhaseTimes {
            setup_ms: (t1 - t0).as_secs_f64() * 1e3,
            offline_ms: (t2 - t1).as_secs_f64() * 1e3,
            online_ms: t2.elapsed().as_secs_f64() * 1e3,
        },
        noise_budget,
    })
}
