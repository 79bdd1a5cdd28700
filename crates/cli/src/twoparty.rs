//! `helina server` and `helina client`: linear layers between two processes over TCP.
//!
//! The architecture is public: the client names the layer's shape (`--layer`), the
//! server matches it against the layers it holds and answers with the plan (the method
//! it fixed with `--method`, else the client's `--method`, else the cheapest predicted
//! one). Weights: `--model m.safetensors` (naming convention in [`load_model`]); without
//! `--model` the server serves the demo's two sample layers (`--layer matvec`, the
//! default, and `--layer conv`), whose weights come from a public seed so that a
//! `--reveal` client can check the result: demo only. `--reveal` makes the server send
//! its shares (insecure, for demonstrations).

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use he::Params;
use indicatif::{ProgressBar, ProgressStyle};
use kernels::{ConvShape, Padding};
use net::{Channel, Counters, TcpChannel, DEFAULT_MAX_FRAME};
use protocol::{
    LayerMethod, LayerRequest, LayerShape, Phase, ServeOptions, ServedLayer, ServedLayers,
};
use serde::Serialize;

use crate::args::{
    ClientTlsArgs, FixedPointArgs, MethodArg, NonlinearArgs, PlannerArgs, ServerTlsArgs,
};
use crate::samples;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

pub use crate::args::LinkArgs;

#[derive(Args)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7000")]
    listen: String,
    /// Weights: one layer (`.safetensors`, `layer0.weight`) or a whole network
    /// (`.onnx`, or a model compiled by `helina compile`: `.helina`, no calibration
    /// needed); without it, the demo's sample layers.
    #[arg(long)]
    model: Option<String>,
    /// How a network's nonlinear layers run (the plan tells the client).
    #[command(flatten)]
    nonlinear: NonlinearArgs,
    /// Method for every layer it applies to, or the planner's pick (for a single
    /// layer: the client's wish, else the cheapest predicted).
    #[arg(long, value_enum, default_value_t = MethodArg::Auto)]
    method: MethodArg,
    /// The fixed point of a network model (`--params` also sets a single layer's
    /// preset; auto: n8192). A network needs --calibration or --input-range.
    #[command(flatten)]
    fixed: FixedPointArgs,
    /// Stop after this many connections (default: serve forever).
    #[arg(long)]
    sessions: Option<usize>,
    /// Sessions served at once (one layer or a network); more are refused as busy.
    #[arg(long, default_value_t = 4)]
    max_clients: usize,
    /// A session must end within this many seconds. Default: derived from the plan
    /// for each session (10 s plus the session's predicted work ten times slower and
    /// its bytes over a 1 MB/s link, plus half a second per interactive step per
    /// input); every frame is still bounded by --timeout.
    #[arg(long)]
    session_timeout: Option<u64>,
    /// Memory one session may use, MB (its offline window of flooding zeros,
    /// ciphertexts and OT material or garbled tables, the largest frame it reads, the
    /// silent-OT pools), checked before it allocates; it does not grow with the
    /// session's inputs. Default: the available memory divided by --max-clients.
    #[arg(long)]
    session_memory: Option<f64>,
    #[command(flatten)]
    link: LinkArgs,
    #[command(flatten)]
    tls: ServerTlsArgs,
    /// Serve Prometheus metrics at http://ADDR/metrics (and a health check at
    /// /healthz: 200 while serving, 503 while draining).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// On SIGTERM or Ctrl-C the server stops taking sessions (new clients are told it
    /// is shutting down), lets the running ones finish for up to this many seconds,
    /// then exits 0. A second signal exits at once.
    #[arg(long, default_value_t = 60)]
    drain_timeout: u64,
    /// Planner options (network models; a single layer uses the reference costs).
    #[command(flatten)]
    planner: PlannerArgs,
}

#[derive(Args)]
pub struct ClientArgs {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1:7000")]
    connect: String,
    /// Input (.npy of integers, or floats rounded to integers); default: the sample input.
    #[arg(long)]
    input: Option<String>,
    /// The layer: `matvec` or `conv` (the demo's sample layers), `matvec:ROWSxCOLS` or
    /// `conv:CxHxW:C_OxK_HxK_W[:stride[:same|valid]]`.
    #[arg(long, default_value = "matvec")]
    layer: String,
    /// Method for the layer, or the server's choice.
    #[arg(long, value_enum, default_value_t = MethodArg::Auto)]
    method: MethodArg,
    /// Parameter preset: for one layer the set to use (default n8192); with
    /// --network only an assertion (the server's plan names the set; a different one
    /// is refused).
    #[arg(long)]
    params: Option<String>,
    /// Ask the server for its share and print the reconstructed result (demo only,
    /// insecure).
    #[arg(long)]
    reveal: bool,
    /// Print a JSON summary.
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,
    /// With --network: print JSON lines, one per input as soon as its result arrives
    /// (with `input`, its index), then one with the session's summary (`summary`:
    /// true); results are not kept, so any batch runs in the memory of one input.
    #[arg(long, requires = "network")]
    jsonl: bool,
    /// Private inference of the server's whole network (`helina server --model
    /// m.onnx`) on `--input` (float .npy, batch first) instead of one layer.
    #[arg(long)]
    network: bool,
    #[command(flatten)]
    link: LinkArgs,
    #[command(flatten)]
    tls: ClientTlsArgs,
}

fn dims(s: &str) -> Res<Vec<usize>> {
    s.split('x')
        .map(|t| {
            t.parse::<usize>()
                .map_err(|_| format!("bad dimensions `{s}`").into())
        })
        .collect()
}

/// Parses `matvec`, `conv`, `matvec:RxC` or `conv:CxHxW:OxKxK[:stride[:padding]]`.
pub fn parse_layer(s: &str) -> Res<LayerShape> {
    if let Some(l) = samples::by_name(s) {
        return Ok(l);
    }
    let parts: Vec<&str> = s.split(':').collect();
    let shape = match parts.as_slice() {
        ["matvec", d] => match dims(d)?.as_slice() {
            [rows, cols] => LayerShape::Matvec {
                rows: *rows,
                cols: *cols,
            },
            _ => return Err(format!("matvec layer `{s}`: expected matvec:ROWSxCOLS").into()),
        },
        ["conv", inp, filt, rest @ ..] => {
            let (i, f) = (dims(inp)?, dims(filt)?);
            let (&[c_i, h, w], &[c_o, k_h, k_w]) = (i.as_slice(), f.as_slice()) else {
                return Err(format!("conv layer `{s}`: expected conv:CxHxW:C_OxK_HxK_W").into());
            };
            let stride = rest
                .first()
                .map(|v| v.parse::<usize>())
                .transpose()?
                .unwrap_or(1);
            let padding = match rest.get(1).copied().unwrap_or("same") {
                "same" => Padding::Same,
                "valid" => Padding::Valid,
                o => return Err(format!("padding `{o}`: same or valid").into()),
            };
            LayerShape::Conv(ConvShape::new(
                [c_i, h, w],
                [c_o, k_h, k_w],
                stride,
                padding,
            ))
        }
        _ => return Err(format!("layer `{s}`: expected matvec, conv, matvec:… or conv:…").into()),
    };
    if shape.weight_len() == 0 || shape.input_len() == 0 {
        return Err(format!("layer `{s}`: every dimension must be positive").into());
    }
    if let LayerShape::Conv(c) = &shape {
        if c.stride == 0 || c.k_h > c.h || c.k_w > c.w {
            return Err(
                format!("layer `{s}`: stride must be positive and filters fit the image").into(),
            );
        }
    }
    Ok(shape)
}

/// `auto` → `None`, else the named method for this kind of layer.
pub fn parse_method(shape: &LayerShape, m: &str) -> Res<Option<LayerMethod>> {
    if m == "auto" {
        return Ok(None);
    }
    let names: Vec<&str> = shape.methods().iter().map(|m| m.name()).collect();
    LayerMethod::parse(shape, m).map(Some).ok_or_else(|| {
        format!(
            "unknown method `{m}` for this layer: auto, {}",
            names.join(", ")
        )
        .into()
    })
}

fn tensor_i64(path: &str, t: &safetensors::tensor::TensorView<'_>, name: &str) -> Res<Vec<i64>> {
    let data = t.data();
    Ok(match t.dtype() {
        safetensors::Dtype::I64 => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
        safetensors::Dtype::I32 => data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as i64)
            .collect(),
        d => {
            return Err(format!(
                "{path}: tensor `{name}` has dtype {d:?}; expected I32 or I64 (quantised weights)"
            )
            .into())
        }
    })
}

/// Loads one linear layer from a safetensors file. Naming convention:
/// - `layer0.weight`: int32 or int64, `[rows, cols]` for a matrix (row-major, y = W·x)
///   or `[c_o, c_i, k_h, k_w]` for a convolution (PyTorch's layout);
/// - metadata for a convolution: `layer0.input` = `CxHxW` (required),
///   `layer0.stride` (default 1), `layer0.padding` = `same` (default) or `valid`.
///
/// Any other tensor is refused with its name (one linear layer per file until whole
/// networks land), as are other dtypes and shapes.
pub fn load_model(path: &str) -> Res<(LayerShape, Vec<i64>)> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let (_, meta) =
        safetensors::SafeTensors::read_metadata(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let meta: HashMap<String, String> = meta.metadata().clone().unwrap_or_default();
    if let Some(other) = st.names().into_iter().find(|n| *n != "layer0.weight") {
        return Err(format!(
            "{path}: unexpected tensor `{other}`; a layer file holds only `layer0.weight`"
        )
        .into());
    }
    let t = st
        .tensor("layer0.weight")
        .map_err(|_| format!("{path}: no tensor `layer0.weight`"))?;
    let w = tensor_i64(path, &t, "layer0.weight")?;
    let layer = match t.shape() {
        [rows, cols] => parse_layer(&format!("matvec:{rows}x{cols}"))?,
        [c_o, c_i, k_h, k_w] => {
            let input = meta.get("layer0.input").ok_or(format!(
                "{path}: a 4-D `layer0.weight` needs metadata `layer0.input` = CxHxW"
            ))?;
            let stride = meta.get("layer0.stride").map(String::as_str).unwrap_or("1");
            let pad = meta
                .get("layer0.padding")
                .map(String::as_str)
                .unwrap_or("same");
            if !input.starts_with(&format!("{c_i}x")) {
                return Err(format!(
                    "{path}: tensor `layer0.weight` has {c_i} input channels, `layer0.input` is {input}"
                )
                .into());
            }
            parse_layer(&format!("conv:{input}:{c_o}x{k_h}x{k_w}:{stride}:{pad}"))
                .map_err(|e| format!("{path}: `layer0.weight` with metadata: {e}"))?
        }
        s => {
            return Err(format!(
                "{path}: tensor `layer0.weight` has shape {s:?}; expected 2-D or 4-D"
            )
            .into())
        }
    };
    if w.len() != layer.weight_len() {
        return Err(format!(
            "{path}: `layer0.weight` holds {} values, its shape needs {}",
            w.len(),
            layer.weight_len()
        )
        .into());
    }
    Ok((layer, w))
}

/// Drains `shutdown` on the first SIGINT/SIGTERM/SIGHUP; a second one exits at once.
fn drain_on_signals(shutdown: protocol::Shutdown, timeout: u64) -> Res<()> {
    ctrlc::set_handler(move || {
        if shutdown.requested() {
            eprintln!("helina server: second signal: exiting now");
            std::process::exit(130);
        }
        eprintln!(
            "helina server: draining: no new sessions; the running ones have {timeout} s to finish"
        );
        shutdown.request();
    })?;
    Ok(())
}

/// The accept loop's options: frame and session deadlines, concurrency, memory, TLS,
/// metrics (their endpoint started here), the drain on signals.
fn serve_options(a: &ServerArgs) -> Res<ServeOptions> {
    let session_memory = match a.session_memory {
        Some(mb) if !(mb.is_finite() && mb > 0.0) => {
            return Err(format!("--session-memory {mb}: give a size in MB > 0").into())
        }
        Some(mb) => Some((mb * 1e6) as u64),
        None => None,
    };
    let metrics = match &a.metrics {
        Some(addr) => {
            let m = Arc::new(protocol::Metrics::new());
            let bound = m.serve_http(addr)?;
            eprintln!("helina server: metrics at http://{bound}/metrics");
            Some(m)
        }
        None => None,
    };
    let opts = ServeOptions {
        timeout: Duration::from_secs(a.link.timeout),
        session_timeout: a.session_timeout.map(Duration::from_secs),
        session_memory,
        link: a.link.link()?,
        max_concurrent: a.max_clients.max(1),
        stop_after: a.sessions,
        tls: a.tls.tls()?,
        metrics,
        drain_timeout: Duration::from_secs(a.drain_timeout),
        ..ServeOptions::new(DEFAULT_MAX_FRAME)
    };
    drain_on_signals(opts.shutdown.clone(), a.drain_timeout)?;
    Ok(opts)
}

pub fn server(a: &ServerArgs) -> Res<()> {
    if let Some(path) = a
        .model
        .as_deref()
        .filter(|p| p.ends_with(".onnx") || p.ends_with(".helina"))
    {
        return network_server(a, path);
    }
    let params = Params::preset(if a.fixed.params == "auto" {
        "n8192"
    } else {
        &a.fixed.params
    })?;
    let layers = match &a.model {
        Some(path) => {
            let (shape, weights) = load_model(path)?;
            vec![ServedLayer {
                method: parse_method(&shape, &a.method.name())?,
                shape,
                weights,
            }]
        }
        None => [samples::MATVEC, samples::CONV]
            .into_iter()
            .map(|shape| {
                Ok(ServedLayer {
                    method: parse_method(&shape, &a.method.name())?,
                    weights: samples::weights(&shape),
                    shape,
                })
            })
            .collect::<Res<Vec<_>>>()?,
    };
    // the sample layers' weights come from a public seed: only they may be revealed
    let model = Arc::new(if a.model.is_some() {
        ServedLayers::new(layers)?
    } else {
        ServedLayers::public_demo(layers)?
    });
    let opts = serve_options(a)?;
    let listener = TcpListener::bind(&a.listen)?;
    eprintln!(
        "helina server: listening on {}{} ({}; {} layer(s): {})",
        listener.local_addr()?,
        if opts.tls.is_some() { " (TLS)" } else { "" },
        params.name(),
        model.layers().len(),
        model
            .layers()
            .iter()
            .map(|l| format!("{:?}", l.shape))
            .collect::<Vec<_>>()
            .join(", ")
    );
    protocol::serve_tcp(listener, &params, model, &opts, |rep| {
        match &rep.result {
        Ok(o) => eprintln!(
            "helina server: {}: served {} in {:.1} ms (setup {:.1}, offline {:.1}, online {:.1}); {} B in, {} B out{}",
            rep.peer,
            o.specs
                .iter()
                .map(|s| format!("{:?} with {}", s.shape(), s.method().name()))
                .collect::<Vec<_>>()
                .join(", "),
            rep.elapsed_ms,
            o.times.setup_ms,
            o.times.offline_ms,
            o.times.online_ms,
            rep.counters.bytes_received,
            rep.counters.bytes_sent,
            if o.revealed { " (shares revealed on request: demo)" } else { "" }
        ),
        Err(e) => eprintln!("helina server: {}: session failed: {e}", rep.peer),
    }
    })?;
    eprintln!("helina server: stopped");
    Ok(())
}

/// Bytes and flights of one phase, from the client's socket.
#[derive(Serialize)]
struct PhaseTraffic {
    bytes_sent: u64,
    bytes_received: u64,
    rounds: u64,
}

impl From<Counters> for PhaseTraffic {
    fn from(c: Counters) -> Self {
        Self {
            bytes_sent: c.bytes_sent,
            bytes_received: c.bytes_received,
            rounds: c.flights,
        }
    }
}

#[derive(Serialize)]
struct ClientReport {
    layer: String,
    method: String,
    params: String,
    outputs: usize,
    share_head: Vec<u64>,
    revealed: Option<Vec<i64>>,
    matches_reference: Option<bool>,
    noise_budget_left: Option<u32>,
    total_ms: f64,
    setup_ms: f64,
    offline_ms: f64,
    online_ms: f64,
    /// Everything the socket carried (frames with their 4-byte headers).
    bytes_sent: u64,
    bytes_received: u64,
    frames_sent: u64,
    frames_received: u64,
    /// Client flights (each answered by the server): request/response rounds.
    rounds: u64,
    setup: PhaseTraffic,
    offline: PhaseTraffic,
    online: PhaseTraffic,
}

/// A spinner on stderr that names the current phase (hidden when stderr is not a
/// terminal).
pub fn spinner() -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    if let Ok(s) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
        pb.set_style(s);
    }
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

pub fn client(a: &ClientArgs) -> Res<()> {
    if a.network {
        return network_client(a);
    }
    let params = Params::preset(a.params.as_deref().unwrap_or("n8192"))?;
    let shape = parse_layer(&a.layer)?;
    let method = parse_method(&shape, &a.method.name())?;
    let sample = samples::by_name(&a.layer).is_some();
    let x = match &a.input {
        Some(p) => helina::array::read_i64(p)?,
        None => samples::input(&shape),
    };
    if x.len() != shape.input_len() {
        return Err(format!(
            "input has {} values, the layer takes {}",
            x.len(),
            shape.input_len()
        )
        .into());
    }
    let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
    let t = Instant::now();
    let (timeout, link) = (Duration::from_secs(a.link.timeout), a.link.link()?);
    let mut ch = match a.tls.tls()? {
        Some(tls) => TcpChannel::connect_tls(&a.connect, &tls, DEFAULT_MAX_FRAME, timeout, link),
        None => TcpChannel::connect(&a.connect, DEFAULT_MAX_FRAME, timeout, link),
    }
    .map_err(|e| format!("connecting to {}: {e}", a.connect))?;
    let pb = spinner();
    let out = protocol::query(
        &mut ch,
        &params,
        LayerRequest { shape, method },
        &[xr],
        a.reveal,
        &mut |ph: Phase| pb.set_message(ph.to_string()),
    );
    pb.finish_and_clear();
    let out = out?;
    let total_ms = t.elapsed().as_secs_f64() * 1e3;
    let c = ch.counters();
    let revealed: Option<Vec<i64>> = out
        .revealed
        .as_ref()
        .and_then(|v| v.first())
        .map(|v| v.iter().map(|&y| params.center(y)).collect());
    // With a sample layer and input (public seed) the client can check the result.
    let matches_reference = match (&revealed, sample && a.input.is_none()) {
        (Some(got), true) => {
            let want = samples::reference(&shape, &samples::weights(&shape), &x);
            let p = params.p();
            Some(
                kernels::reference::reduce(&want, p)
                    == got.iter().map(|&v| params.reduce(v)).collect::<Vec<_>>(),
            )
        }
        _ => None,
    };
    let share = out.shares.first().cloned().unwrap_or_default();
    let report = ClientReport {
        layer: format!("{shape:?}"),
        method: out
            .specs
            .first()
            .map(|s| s.method().name().to_string())
            .unwrap_or_default(),
        params: params.name().to_string(),
        outputs: share.len(),
        share_head: share.iter().take(8).copied().collect(),
        revealed,
        matches_reference,
        noise_budget_left: out.noise_budget,
        total_ms,
        setup_ms: out.times.setup_ms,
        offline_ms: out.times.offline_ms,
        online_ms: out.times.online_ms,
        bytes_sent: c.bytes_sent,
        bytes_received: c.bytes_received,
        frames_sent: c.frames_sent,
        frames_received: c.frames_received,
        rounds: c.flights,
        setup: out.traffic.setup.into(),
        offline: out.traffic.offline.into(),
        online: out.traffic.online.into(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "helina client: {} with {} ({}), {} outputs in {:.1} ms (setup {:.1}, offline {:.1}, online {:.1})",
            report.layer,
            report.method,
            report.params,
            report.outputs,
            total_ms,
            report.setup_ms,
            report.offline_ms,
            report.online_ms
        );
        println!("  my share (first values): {:?}", report.share_head);
        if let Some(v) = &report.revealed {
            println!(
                "  reconstructed (server revealed its share — demo only): {:?}",
                &v[..v.len().min(8)]
            );
        }
        if let Some(m) = report.matches_reference {
            println!("  matches the plaintext reference: {m}");
        }
        println!(
            "  sent {} B in {} frames ({} rounds), received {} B in {} frames",
            c.bytes_sent, c.frames_sent, c.flights, c.bytes_received, c.frames_received
        );
        println!(
            "  setup (keys): {} B up, {} B down; offline: {} B down; online (query, response): {} B up, {} B down",
            report.setup.bytes_sent,
            report.setup.bytes_received,
            report.offline.bytes_received,
            report.online.bytes_sent,
            report.online.bytes_received
        );
    }
    if report.matches_reference == Some(false) {
        return Err("the reconstructed result differs from the plaintext reference".into());
    }
    Ok(())
}

/// `helina server --model m.onnx`: serves private inference of the whole network
/// (`helina::Server`: the model planned and its weights encoded once, sessions through
/// the one accept loop).
fn network_server(a: &ServerArgs, path: &str) -> Res<()> {
    let link = a.link.link()?;
    let planning = a.planner.planning(link, a.method.choice())?;
    let (model, calibration) = if crate::args::is_compiled(path) {
        crate::args::load_compiled(path, &a.fixed, &planning)?
    } else {
        let network = nn::import(std::path::Path::new(path))?;
        let (fixed, calibration) = a.fixed.fixed_point(network.input_shape(), None)?;
        let fixed = fixed.for_nonlinear(a.nonlinear.protocol());
        (helina::Model::new(network, &fixed, &planning)?, calibration)
    };
    tracing::info!(
        "planner: objective {:?}, per-op costs {}",
        planning.objective,
        model.costs
    );
    let listener = TcpListener::bind(&a.listen)?;
    let (preset, steps, frac_bits, p) = (
        model.params().name().to_string(),
        model.program().steps.len(),
        model.program().frac_bits,
        model.program().p,
    );
    let describe = crate::args::describe(model.program());
    let timings = model.timings;
    let serve = serve_options(a)?;
    let tls = serve.tls.is_some();
    let server = helina::Server::new(
        model,
        helina::ServerOptions {
            nonlinear: a.nonlinear.protocol(),
            serve,
        },
    )?;
    eprintln!(
        "helina server: listening on {}{} (network {path}: {steps} steps, {preset}, {frac_bits} fractional bits, p = {p}; calibrated on {calibration}; {describe}; planned in {:.1} s + {:.1} s)",
        listener.local_addr()?,
        if tls { " (TLS)" } else { "" },
        timings.fixed_point_ms / 1e3,
        timings.methods_ms / 1e3,
    );
    eprintln!(
        "helina server: weights encoded once for every session in {:.0} ms ({} layer(s) on the fly); a session needs about {:.1} MB whatever its inputs (budget {:.1} MB), at most {} at once; {} responses per input, flooding sized for 2^{} per session (statistical distance ≤ 2^-40 per session)",
        server.network().encode_ms(),
        server.network().on_the_fly_layers(),
        server.network().session_bytes(protocol::MAX_INPUTS_PER_SESSION)? as f64 / 1e6,
        server.session_budget() as f64 / 1e6,
        a.max_clients.max(1),
        server.network().limits().responses_per_input,
        server.network().params().session_responses_log2(),
    );
    server.serve(listener, |rep| match &rep.result {
        Ok(o) => eprintln!(
            "helina server: {}: {} inference(s) in {:.1} ms; encoded weights {:.1} MB, {} layer(s) on the fly; {} responses of at most 2^{} (statistical distance ≤ 2^{:.1}); peak RSS {}",
            rep.peer,
            o.inferences,
            rep.elapsed_ms,
            o.encoded_bytes as f64 / 1e6,
            o.on_the_fly_layers,
            o.responses,
            o.responses_log2,
            o.distance_log2,
            o.peak_rss_bytes
                .map_or("n/a".into(), |b| format!("{:.1} MB", b as f64 / 1e6))
        ),
        Err(e) => eprintln!("helina server: {}: session failed: {e}", rep.peer),
    })?;
    eprintln!("helina server: stopped");
    Ok(())
}

/// `helina client --network`: private inference on a remote network (`helina::Client`).
fn network_client(a: &ClientArgs) -> Res<()> {
    let path = a
        .input
        .as_deref()
        .ok_or("--network needs --input x.npy (float, batch first)")?;
    let xs = helina::array::read_batch_any(path)?;
    let client = helina::Client::new(
        &a.connect,
        helina::ClientOptions {
            expect_params: a.params.clone(),
            timeout: Duration::from_secs(a.link.timeout),
            link: a.link.link()?,
            tls: a.tls.tls()?,
            ..Default::default()
        },
    );
    let pb = spinner();
    if a.jsonl {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            input: usize,
            #[serde(flatten)]
            output: &'a helina::Output,
        }
        let out = client.infer_each(
            &xs,
            &mut |ph| pb.set_message(ph.to_string()),
            &mut |k, o| {
                if let Ok(text) = serde_json::to_string(&Line {
                    input: k,
                    output: &o,
                }) {
                    pb.suspend(|| println!("{text}"));
                }
            },
        );
        pb.finish_and_clear();
        let mut summary = serde_json::to_value(out?)?;
        if let Some(m) = summary.as_object_mut() {
            m.remove("outputs");
            m.insert("summary".into(), true.into());
            m.insert("inputs".into(), xs.len().into());
            m.insert("peak_rss_bytes".into(), protocol::peak_rss_bytes().into());
        }
        println!("{}", serde_json::to_string(&summary)?);
        return Ok(());
    }
    let out = client.infer(&xs, &mut |ph| pb.set_message(ph.to_string()));
    pb.finish_and_clear();
    let out = out?;
    if a.json {
        /// The client's report and the peak resident memory of this (the client's)
        /// process; the server logs its own with each session.
        #[derive(serde::Serialize)]
        struct Report<'a> {
            #[serde(flatten)]
            run: &'a helina::Inference,
            peak_rss_bytes: Option<u64>,
        }
        let report = Report {
            run: &out,
            peak_rss_bytes: protocol::peak_rss_bytes(),
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for (i, o) in out.outputs.iter().enumerate() {
            println!(
                "input {i}: label {} (argmax {}) logits {:?}; {:.1} ms, {} B ({:.1} ms, {} B online)",
                o.label(),
                o.argmax,
                o.logits,
                o.total_ms,
                o.total_bytes,
                o.online_ms,
                o.online_bytes
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    fn write(
        name: &str,
        tensors: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)>,
        meta: Option<HashMap<String, String>>,
    ) -> String {
        let path =
            std::env::temp_dir().join(format!("helina-{}-{name}.safetensors", std::process::id()));
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap()))
            .collect();
        std::fs::write(&path, safetensors::serialize(views, meta).unwrap()).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn i32_bytes(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn models_load_with_shapes_and_dtypes_checked() {
        let w: Vec<i32> = (0..6).map(|i| i - 3).collect();
        let ok = write(
            "ok",
            vec![("layer0.weight", Dtype::I32, vec![2, 3], i32_bytes(&w))],
            None,
        );
        let (layer, got) = load_model(&ok).unwrap();
        assert_eq!(layer, parse_layer("matvec:2x3").unwrap());
        assert_eq!(got, vec![-3, -2, -1, 0, 1, 2]);
        let conv = write(
            "conv",
            vec![(
                "layer0.weight",
                Dtype::I32,
                vec![4, 3, 3, 3],
                i32_bytes(&[1; 108]),
            )],
            Some(HashMap::from([(
                "layer0.input".to_string(),
                "3x8x8".to_string(),
            )])),
        );
        assert!(matches!(load_model(&conv).unwrap().0, LayerShape::Conv(_)));
        let float = write(
            "float",
            vec![("layer0.weight", Dtype::F32, vec![2, 3], vec![0; 24])],
            None,
        );
        assert!(load_model(&float)
            .unwrap_err()
            .to_string()
            .contains("dtype"));
        let missing = write(
            "missing",
            vec![("fc.weight", Dtype::I32, vec![2, 3], i32_bytes(&w))],
            None,
        );
        assert!(load_model(&missing)
            .unwrap_err()
            .to_string()
            .contains("layer0.weight"));
        let bad_shape = write(
            "shape",
            vec![("layer0.weight", Dtype::I32, vec![6], i32_bytes(&w))],
            None,
        );
        assert!(load_model(&bad_shape)
            .unwrap_err()
            .to_string()
            .contains("shape"));
        let no_meta = write(
            "nometa",
            vec![(
                "layer0.weight",
                Dtype::I32,
                vec![4, 3, 3, 3],
                i32_bytes(&[1; 108]),
            )],
            None,
        );
        assert!(load_model(&no_meta)
            .unwrap_err()
            .to_string()
            .contains("layer0.input"));
        let extra = write(
            "extra",
            vec![
                ("layer0.weight", Dtype::I32, vec![2, 3], i32_bytes(&w)),
                ("layer0.bias", Dtype::I32, vec![2], i32_bytes(&[1, 2])),
            ],
            None,
        );
        assert!(load_model(&extra)
            .unwrap_err()
            .to_string()
            .contains("`layer0.bias`"));
        let _ = std::fs::remove_file(extra);
        std::fs::write(&ok, b"not a safetensors file").unwrap();
        assert!(load_model(&ok).is_err());
        for p in [ok, conv, float, missing, bad_shape, no_meta] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn layer_specs_parse() {
        assert!(matches!(
            parse_layer("conv:3x8x8:4x3x3:2:valid").unwrap(),
            LayerShape::Conv(_)
        ));
        assert!(parse_layer("matvec:2").is_err());
        assert!(parse_layer("conv:3x8x8:4x3x3:1:round").is_err());
        assert!(parse_layer("pool:2x2").is_err());
        assert!(parse_layer("matvec:0x4").is_err());
        assert!(parse_layer("conv:3x2x2:4x3x3").is_err());
        assert_eq!(parse_layer("conv").unwrap(), samples::CONV);
        assert!(parse_method(&samples::CONV, "diagonal").is_err());
        assert_eq!(parse_method(&samples::MATVEC, "auto").unwrap(), None);
    }
}
