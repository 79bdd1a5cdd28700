//! Both parties in this process: the server in a thread, the client here, over a
//! loopback TCP connection — the same code two machines run — with every result checked
//! against the plaintext fixed-point reference and compared with the float model.

use std::net::TcpListener;
use std::thread;

use net::{TcpChannel, DEFAULT_MAX_FRAME};
use protocol::{ServeOptions, StepReport};
use serde::Serialize;

use crate::client::{ClientOptions, Progress};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::report::{argmax, Inference};
use crate::server::{Server, ServerOptions};

/// One input's checks.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// The float model's output on the same input.
    pub float_logits: Vec<f32>,
    /// Its argmax.
    pub float_argmax: usize,
    /// max |private − float|.
    pub float_max_abs_err: f64,
    /// `float_max_abs_err` within the plan's tolerance.
    pub within_tolerance: bool,
    /// The private output equals the plaintext fixed-point reference bit for bit.
    pub matches_fixed_reference: bool,
}

/// One step as both parties saw it.
#[derive(Clone, Debug, Serialize)]
pub struct Layer {
    /// Step name.
    pub layer: String,
    /// Kind of step.
    pub kind: String,
    /// Output shape.
    pub shape: Vec<usize>,
    /// Method.
    pub method: String,
    /// Server's online time, ms.
    pub server_ms: f64,
    /// Client's online time, ms.
    pub client_ms: f64,
    /// Of `server_ms`, the server's wait for the client's query (linear and Square steps;
    /// the server computes its own part W·x_S + b first), ms.
    pub server_wait_ms: f64,
    /// Of `client_ms`, the client's wait for the server's response (linear and Square
    /// steps), ms. `client_ms − client_wait_ms` is the client's encryption and decryption.
    pub client_wait_ms: f64,
    /// Offline time of the step's own work (the longer party's; waits for the peer to
    /// finish its earlier steps are not counted), ms.
    pub offline_ms: f64,
    /// Bytes client → server.
    pub bytes_up: u64,
    /// Bytes server → client.
    pub bytes_down: u64,
    /// Online bytes, both directions.
    pub online_bytes: u64,
    /// Client flights.
    pub rounds: u64,
    /// Server HE operations.
    pub counts: he::OpCounts,
    /// AND gates.
    pub and_gates: u64,
    /// Smallest noise budget left in a step's first response (each step measures its
    /// first; a step's responses are flooded alike).
    pub noise_budget_left: Option<u32>,
    /// Weights encoded during the step.
    pub on_the_fly: bool,
}

fn merge(c: &StepReport, s: &StepReport) -> Layer {
    Layer {
        layer: c.layer.clone(),
        kind: c.kind.clone(),
        shape: c.shape.clone(),
        method: if c.method.is_empty() {
            s.method.clone()
        } else {
            c.method.clone()
        },
        server_ms: s.ms,
        client_ms: c.ms,
        server_wait_ms: s.wait_ms,
        client_wait_ms: c.wait_ms,
        offline_ms: c.offline_ms.max(s.offline_ms),
        bytes_up: c.bytes_sent,
        bytes_down: c.bytes_received,
        online_bytes: c.online_bytes,
        rounds: c.rounds,
        counts: s.counts,
        and_gates: c.and_gates,
        noise_budget_left: c.noise_budget,
        on_the_fly: s.on_the_fly,
    }
}

/// A local inference: the client's report, the checks per input, both parties' view per
/// layer, and the server's memory.
#[derive(Clone, Debug, Serialize)]
pub struct LocalInference {
    /// The client's report.
    #[serde(flatten)]
    pub inference: Inference,
    /// Per input, beside `inference.outputs`.
    pub checks: Vec<Check>,
    /// Per step of the first input, both parties.
    pub steps: Vec<Layer>,
    /// Encoded weights the server held, bytes.
    pub encoded_bytes: u64,
    /// Layers encoded on the fly.
    pub on_the_fly_layers: usize,
    /// Peak resident memory of this process, bytes.
    pub peak_rss_bytes: Option<u64>,
}

impl LocalInference {
    /// Whether every output equals the plaintext fixed-point reference.
    pub fn all_match_fixed_reference(&self) -> bool {
        self.checks.iter().all(|c| c.matches_fixed_reference)
    }
}

/// Options of a local inference.
#[derive(Clone, Debug, Default)]
pub struct LocalOptions {
    /// The server's options (nonlinear protocol, link emulation in `serve.link`).
    pub server: ServerOptions,
    /// The client's options (the link is taken from the server's).
    pub client: ClientOptions,
}

/// Runs `model` privately on `inputs` with both parties in this process (see the
/// module doc), keeping every output and its checks. `progress` hears of the client's
/// stages.
pub fn infer_local(
    model: &Model,
    inputs: &[Vec<f32>],
    opts: &LocalOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<LocalInference> {
    let mut kept = Vec::with_capacity(inputs.len());
    let mut run = infer_local_each(model, inputs, opts, progress, &mut |_, o, c| {
        kept.push((o, c))
    })?;
    (run.inference.outputs, run.checks) = kept.into_iter().unzip();
    Ok(run)
}

/// [`infer_local`], handing each input's output and its checks to `on_result(k,
/// output, check)` as soon as the input is done instead of keeping them (the returned
/// report's `inference.outputs` and `checks` are empty): a session of thousands of
/// inputs holds one input's data at a time.
pub fn infer_local_each(
    model: &Model,
    inputs: &[Vec<f32>],
    opts: &LocalOptions,
    progress: &mut dyn FnMut(Progress),
    on_result: &mut dyn FnMut(usize, crate::report::Output, Check),
) -> Result<LocalInference> {
    let server_opts = ServerOptions {
        serve: ServeOptions {
            max_concurrent: 1,
            stop_after: Some(1),
            ..opts.server.serve.clone()
        },
        ..opts.server.clone()
    };
    let link = server_opts.serve.link;
    let server = Server::new(model.clone(), server_opts)?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|source| Error::Io {
        path: "127.0.0.1:0".into(),
        source,
    })?;
    let addr = listener
        .local_addr()
        .map_err(|source| Error::Io {
            path: "127.0.0.1:0".into(),
            source,
        })?
        .to_string();
    let timeout = opts.client.timeout;
    let srv = thread::spawn(move || -> Result<protocol::ServerOutcome> {
        let (stream, _) = listener.accept().map_err(|source| Error::Io {
            path: "loopback listener".into(),
            source,
        })?;
        let mut ch = TcpChannel::new(stream, DEFAULT_MAX_FRAME, timeout, link)?;
        server.serve_channel(&mut ch)
    });
    let client_opts = ClientOptions {
        link,
        ..opts.client.clone()
    };
    let client = crate::client::Client::new(&addr, client_opts);
    let mut failed: Option<Error> = None;
    let inference = client.infer_each(inputs, progress, &mut |k, o| {
        if failed.is_some() {
            return;
        }
        match inputs.get(k).map(|x| check(model, x, &o)) {
            Some(Ok(c)) => on_result(k, o, c),
            Some(Err(e)) => failed = Some(e),
            None => {}
        }
    });
    let served = srv.join().map_err(|_| Error::Thread { party: "server" })?;
    let (inference, served) = match (inference, served) {
        // the server's error says why when the client only saw the connection end
        (Err(Error::Protocol(p)), Err(e))
            if matches!(
                *p,
                protocol::ProtocolError::Net(net::NetError::Disconnected)
            ) =>
        {
            return Err(e)
        }
        (inference, served) => (inference?, served?),
    };
    if let Some(e) = failed {
        return Err(e);
    }
    let steps = match &served.first {
        Some(s) => inference
            .layers
            .iter()
            .zip(&s.steps)
            .map(|(c, s)| merge(c, s))
            .collect(),
        None => Vec::new(),
    };
    Ok(LocalInference {
        inference,
        checks: Vec::new(),
        steps,
        encoded_bytes: served.encoded_bytes,
        on_the_fly_layers: served.on_the_fly_layers,
        peak_rss_bytes: protocol::peak_rss_bytes(),
    })
}

/// One input's checks: the private output against the plaintext fixed-point reference
/// and the float model.
fn check(model: &Model, x: &[f32], o: &crate::report::Output) -> Result<Check> {
    let prog = model.program();
    let tolerance = prog.accuracy.map_or(nn::DEFAULT_TOLERANCE, |a| a.tolerance);
    let want = model.fixed_reference(x, o)?;
    let float = nn::run_float(&model.network, x);
    let err = o
        .logits
        .iter()
        .zip(&float)
        .map(|(a, b)| (*a as f64 - *b as f64).abs())
        .fold(0f64, f64::max);
    Ok(Check {
        float_argmax: argmax(&float),
        float_logits: float,
        float_max_abs_err: err,
        within_tolerance: err <= tolerance,
        matches_fixed_reference: want == o.fixed,
    })
}
