//! `helina infer`: private inference of a whole network from an ONNX model (or a
//! built-in one, `--net`), with the client and the server in two threads over loopback
//! TCP running the same protocol code as two machines would. The fixed point is chosen
//! by agreement with the float model on calibration inputs (`--calibration`,
//! `--input-range`; see [`crate::fixed`]). Prints per input the dequantised logits and
//! the argmax, checks them bit for bit against the plaintext fixed-point reference and
//! against the float model (max |Δlogit|, within the tolerance or not), and a per-layer
//! report.

use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use clap::Args;
use net::{TcpChannel, DEFAULT_MAX_FRAME};
use protocol::network::{infer_client, serve_network_with, StepReport};
use serde::Serialize;

use crate::twoparty::LinkArgs;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct InferArgs {
    /// The model (ONNX, as exported by torch.onnx.export).
    #[arg(long, conflicts_with = "net")]
    model: Option<String>,
    /// A built-in network instead (seeded public weights): mlp, mnist-a, mnist-b,
    /// mnist-c, mnist-d, minionn-cifar, tiny-resnet, resnet18-cifar, resnet50-cifar,
    /// resnet18-imagenet, resnet50-imagenet (`helina plan`/`bench network` take them too).
    #[arg(long)]
    net: Option<String>,
    /// Inputs: .npy of float32/float64 with the batch dimension first and the model's
    /// input shape after it. Default with `--net`: seeded random inputs.
    #[arg(long)]
    input: Option<String>,
    /// At most this many inputs.
    #[arg(long)]
    limit: Option<usize>,
    /// Method for every linear layer it applies to (e.g. gala, heliks, ensei), or auto.
    #[arg(long, default_value = "auto")]
    method: String,
    /// The fixed point (default calibration: with --net, seeded random inputs in
    /// [0, 1) other than the evaluated ones; with --model, the inputs themselves, which
    /// is said in the output).
    #[command(flatten)]
    fixed: crate::fixed::FixedPointArgs,
    /// Who garbles the nonlinear layers: server or client.
    #[arg(long, default_value = "server")]
    garbler: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    link: LinkArgs,
    #[command(flatten)]
    planner: crate::costs::PlannerArgs,
}

/// Reads an .npy of floats; returns its shape and data.
fn read_floats(path: &str) -> Res<(Vec<usize>, Vec<f32>)> {
    let open = || -> Res<npyz::NpyFile<std::io::BufReader<std::fs::File>>> {
        Ok(npyz::NpyFile::new(std::io::BufReader::new(
            std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?,
        ))
        .map_err(|e| format!("{path}: {e}"))?)
    };
    let shape: Vec<usize> = open()?.shape().iter().map(|&d| d as usize).collect();
    let data: Vec<f32> = match open()?.into_vec::<f32>() {
        Ok(v) => v,
        Err(_) => open()?
            .into_vec::<f64>()
            .map_err(|_| format!("{path}: expected float32 or float64"))?
            .into_iter()
            .map(|v| v as f32)
            .collect(),
    };
    if let Some(bad) = data.iter().find(|v| !v.is_finite()) {
        return Err(format!("{path}: value {bad} is not finite").into());
    }
    Ok((shape, data))
}

/// Reads an .npy of floats with the batch dimension first (or a single sample);
/// returns the samples, checked against the model's input shape.
pub fn read_batch(path: &str, sample: &[usize]) -> Res<Vec<Vec<f32>>> {
    let (shape, data) = read_floats(path)?;
    let len: usize = sample.iter().product();
    let batched = shape.len() == sample.len() + 1 && shape[1..] == *sample;
    let single = shape == sample;
    if !(batched || single) || len == 0 {
        return Err(format!(
            "{path}: shape {shape:?}; the model takes [batch, {}]",
            sample
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
        .into());
    }
    Ok(data.chunks(len).map(<[f32]>::to_vec).collect())
}

/// Reads an .npy batch whose sample shape is not known yet (the client of a remote
/// network: the server announces the shape): the first dimension is the batch.
pub fn read_batch_any(path: &str) -> Res<Vec<Vec<f32>>> {
    let (shape, data) = read_floats(path)?;
    let len: usize = shape.iter().skip(1).product();
    if shape.len() < 2 || len == 0 {
        return Err(format!("{path}: shape {shape:?}; expected [batch, ...input shape]").into());
    }
    Ok(data.chunks(len).map(<[f32]>::to_vec).collect())
}

#[derive(Serialize)]
struct Output {
    logits: Vec<f32>,
    argmax: usize,
    /// The float model's logits on the same input.
    float_logits: Vec<f32>,
    float_argmax: usize,
    /// max |logits − float_logits|.
    float_max_abs_err: f64,
    /// `float_max_abs_err` within the plan's tolerance.
    within_tolerance: bool,
    matches_fixed_reference: bool,
    total_ms: f64,
    total_bytes: u64,
    online_ms: f64,
    online_bytes: u64,
    offline_ms: f64,
    offline_bytes: u64,
}

#[derive(Serialize)]
struct Layer {
    layer: String,
    kind: String,
    shape: Vec<usize>,
    method: String,
    server_ms: f64,
    client_ms: f64,
    offline_ms: f64,
    bytes_up: u64,
    bytes_down: u64,
    online_bytes: u64,
    rounds: u64,
    counts: he::OpCounts,
    and_gates: u64,
    noise_budget_left: Option<u32>,
}

#[derive(Serialize)]
struct Report {
    model: String,
    params: String,
    p: u64,
    frac_bits: u32,
    /// Where the calibration inputs came from.
    calibration: String,
    /// The plan's float agreement on the calibration inputs and its tolerance.
    accuracy: Option<nn::Accuracy>,
    /// The input range the plan is safe for.
    input_range: Option<nn::InputRange>,
    setup_ms: f64,
    setup_bytes: u64,
    /// Encoded weights the server held, bytes; layers encoded on the fly (`--mem-limit`).
    encoded_bytes: u64,
    on_the_fly_layers: usize,
    /// Peak resident memory of this process (client and server threads), bytes.
    peak_rss_bytes: Option<u64>,
    outputs: Vec<Output>,
    layers: Vec<Layer>,
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold(0, |best, (i, &x)| if x > v[best] { i } else { best })
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
        offline_ms: c.offline_ms.max(s.offline_ms),
        bytes_up: c.bytes_sent,
        bytes_down: c.bytes_received,
        online_bytes: c.online_bytes,
        rounds: c.rounds,
        counts: s.counts,
        and_gates: c.and_gates,
        noise_budget_left: c.noise_budget,
    }
}

pub fn run(a: &InferArgs) -> Res<()> {
    let (name, bytes) = match (&a.model, &a.net) {
        (Some(path), None) => (
            path.clone(),
            std::fs::read(path).map_err(|e| format!("{path}: {e}"))?,
        ),
        (None, Some(n)) => (
            n.clone(),
            nn::zoo::onnx(n, 1).ok_or_else(|| {
                format!(
                    "unknown network `{n}`: {}",
                    nn::zoo::NETS
                        .iter()
                        .map(|(n, _, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?,
        ),
        _ => return Err("give --model m.onnx or --net NAME".into()),
    };
    let network = nn::import_bytes(&bytes)?;
    let sample = network.input_shape().to_vec();
    let len: usize = sample.iter().product();
    let seeded = |seed: u64, n: usize| -> Vec<Vec<f32>> {
        use rand::{Rng, SeedableRng};
        let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| (0..len).map(|_| r.random_range(0.0f32..1.0)).collect())
            .collect()
    };
    let mut inputs = match &a.input {
        Some(path) => read_batch(path, &sample)?,
        None if a.net.is_some() => seeded(7, a.limit.unwrap_or(1)),
        None => return Err("--input x.npy is needed with --model".into()),
    };
    if let Some(n) = a.limit {
        inputs.truncate(n);
    }
    if inputs.is_empty() {
        return Err("no inputs".into());
    }
    let default_calibration = if a.net.is_some() {
        (seeded(11, 32), "32 seeded random inputs in [0, 1)")
    } else {
        (
            inputs.clone(),
            "the inputs themselves (give --calibration to plan on other data)",
        )
    };
    let (prog, params, source) = a.fixed.plan(&network, Some(default_calibration))?;
    let garbler: gc::Garbler = a.garbler.parse()?;
    let (client, srv) = run_over_loopback(
        &prog, &params, &inputs, &a.method, garbler, &a.link, &a.planner, true,
    )?;
    let mut outputs = Vec::new();
    for (x, (y, rep)) in inputs.iter().zip(&client.outputs) {
        let want = nn::run_fixed(&prog, &nn::quantise_input(&prog, x))?;
        let logits = nn::dequantise(&prog, y);
        let float = nn::run_float(&network, x);
        let err = logits
            .iter()
            .zip(&float)
            .map(|(a, b)| (*a as f64 - *b as f64).abs())
            .fold(0f64, f64::max);
        let t = rep.traffic;
        let b = |c: net::Counters| c.bytes_sent + c.bytes_received;
        outputs.push(Output {
            argmax: argmax(&logits),
            float_argmax: argmax(&float),
            float_max_abs_err: err,
            within_tolerance: err <= a.fixed.tolerance,
            float_logits: float,
            matches_fixed_reference: &want == y,
            logits,
            total_ms: rep.offline_ms + rep.online_ms,
            total_bytes: b(t.offline) + b(t.online),
            online_ms: rep.online_ms,
            online_bytes: b(t.online),
            offline_ms: rep.offline_ms,
            offline_bytes: b(t.offline),
        });
    }
    let layers: Vec<Layer> = match (client.outputs.first(), srv.inferences.first()) {
        (Some((_, c)), Some(s)) => c
            .steps
            .iter()
            .zip(&s.steps)
            .map(|(c, s)| merge(c, s))
            .collect(),
        _ => Vec::new(),
    };
    let report = Report {
        model: name,
        params: params.name().to_string(),
        p: prog.p,
        frac_bits: prog.frac_bits,
        calibration: source.to_string(),
        accuracy: prog.accuracy,
        input_range: prog.input_range,
        setup_ms: client.setup_ms,
        setup_bytes: client.setup.bytes_sent + client.setup.bytes_received,
        encoded_bytes: srv.encoded_bytes,
        on_the_fly_layers: srv.on_the_fly_layers,
        peak_rss_bytes: protocol::network::peak_rss_bytes(),
        outputs,
        layers,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if report.outputs.iter().any(|o| !o.matches_fixed_reference) {
        return Err("a private result differs from the plaintext fixed-point reference".into());
    }
    Ok(())
}

/// Runs the network privately with the server in a thread and the client here, over
/// a loopback TCP connection: the server plans every linear layer (`method` or the
/// planner's pick), the client sends `inputs` (checked against the plan's range).
#[allow(clippy::too_many_arguments)]
pub fn run_over_loopback(
    prog: &nn::Program,
    params: &he::Params,
    inputs: &[Vec<f32>],
    method: &str,
    garbler: gc::Garbler,
    link_args: &LinkArgs,
    planner_args: &crate::costs::PlannerArgs,
    show_progress: bool,
) -> Res<(
    protocol::network::ClientNetOutcome,
    protocol::network::ServerNetOutcome,
)> {
    if method != "auto"
        && kernels::Method::parse(method).is_none()
        && kernels::ConvMethod::parse(method).is_none()
    {
        return Err(format!("unknown method `{method}`").into());
    }
    let link = link_args.link()?;
    let (planner, _) = planner_args.planner(params, &link)?;
    let mem_limit = planner_args.mem_limit_bytes()?;
    let fixed =
        crate::plan::method_per_layer(prog, params, &planner, mem_limit, method.to_string())?;
    let timeout = Duration::from_secs(link_args.timeout.max(600));
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    let (sp, sprog) = (params.clone(), prog.clone());
    let server = thread::spawn(move || -> Result<_, String> {
        let (stream, _) = listener.accept().map_err(|e| e.to_string())?;
        let mut ch =
            TcpChannel::new(stream, DEFAULT_MAX_FRAME, timeout, link).map_err(|e| e.to_string())?;
        serve_network_with(&mut ch, &sp, &sprog, &fixed, &link, garbler, mem_limit)
            .map_err(|e| e.to_string())
    });
    let mut ch = TcpChannel::connect(&addr, DEFAULT_MAX_FRAME, timeout, link)?;
    let pb = if show_progress {
        crate::timing::progress(prog.steps.len() as u64, "private inference")
    } else {
        indicatif::ProgressBar::hidden()
    };
    let client = infer_client(&mut ch, Some(params), inputs, garbler, &mut |i, _| {
        pb.set_position(i as u64)
    });
    pb.finish_and_clear();
    let srv = server.join().map_err(|_| "the server thread panicked")?;
    let client = client?;
    let srv = srv.map_err(|e| format!("server: {e}"))?;
    Ok((client, srv))
}

fn print_report(r: &Report) {
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "helina infer: {} ({}, p = {}, {} fractional bits); setup {:.1} ms, {:.2} MB (keys, weight encoding)",
        r.model, r.params, r.p, r.frac_bits, r.setup_ms, mb(r.setup_bytes)
    );
    if let Some(acc) = r.accuracy {
        println!(
            "fixed point: calibrated on {}; max |Δlogit| vs float {:.2e} (mean {:.2e}) on them, tolerance {}",
            r.calibration, acc.max_abs_err, acc.mean_abs_err, acc.tolerance
        );
    }
    if let Some(ir) = r.input_range {
        println!(
            "input range [{}, {}] ({})",
            ir.lo,
            ir.hi,
            match ir.basis {
                nn::RangeBasis::WorstCase =>
                    "no input in it can wrap: worst-case bounds".to_string(),
                nn::RangeBasis::Calibration { headroom_bits } =>
                    format!("calibration maxima kept {headroom_bits} bits below p/2"),
            }
        );
    }
    println!(
        "memory: encoded weights held {:.1} MB{}; peak RSS {}",
        mb(r.encoded_bytes),
        if r.on_the_fly_layers > 0 {
            format!(", {} layer(s) encoded on the fly", r.on_the_fly_layers)
        } else {
            String::new()
        },
        r.peak_rss_bytes
            .map_or("n/a".into(), |b| format!("{:.1} MB", mb(b)))
    );
    for (i, o) in r.outputs.iter().enumerate() {
        let shown: Vec<String> = o
            .logits
            .iter()
            .take(10)
            .map(|v| format!("{v:.3}"))
            .collect();
        println!(
            "  input {i}: argmax {} (float model: {}), max |Δlogit| vs float {:.2e} ({}), equals the fixed-point reference: {}; {:.1} ms, {:.2} MB ({:.1} ms, {:.2} MB online)",
            o.argmax,
            o.float_argmax,
            o.float_max_abs_err,
            if o.within_tolerance { "within tolerance" } else { "BEYOND the tolerance" },
            if o.matches_fixed_reference { "yes" } else { "NO" },
            o.total_ms,
            mb(o.total_bytes),
            o.online_ms,
            mb(o.online_bytes)
        );
        let float: Vec<String> = o
            .float_logits
            .iter()
            .take(10)
            .map(|v| format!("{v:.3}"))
            .collect();
        println!("    logits: [{}]", shown.join(", "));
        println!("    float:  [{}]", float.join(", "));
    }
    println!(
        "  {:<24} {:<9} {:<14} {:<11} {:>9} {:>9} {:>9} {:>10} {:>10} {:>6} {:>6} {:>6} {:>9} {:>6}",
        "layer", "kind", "shape", "method", "server ms", "client ms", "offl. ms", "up B", "down B", "rounds", "Perm", "ScMult", "AND", "budget"
    );
    for l in &r.layers {
        println!(
            "  {:<24} {:<9} {:<14} {:<11} {:>9.1} {:>9.1} {:>9.1} {:>10} {:>10} {:>6} {:>6} {:>6} {:>9} {:>6}",
            l.layer.chars().take(24).collect::<String>(),
            l.kind,
            format!("{:?}", l.shape),
            l.method,
            l.server_ms,
            l.client_ms,
            l.offline_ms,
            l.bytes_up,
            l.bytes_down,
            l.rounds,
            l.counts.perm + l.counts.hst_perm,
            l.counts.sc_mult,
            l.and_gates,
            l.noise_budget_left.map(|b| b.to_string()).unwrap_or_default()
        );
    }
}
