//! `helina infer`: private inference of a whole network from an ONNX model (or a
//! built-in one, `--net`) with both parties in this process over loopback TCP
//! (`helina::infer_local`): the fixed point chosen by agreement with the float model on
//! calibration inputs, every result checked bit for bit against the plaintext
//! fixed-point reference and against the float model, a per-layer report.

use clap::Args;
use serde::Serialize;

use crate::args::{FixedPointArgs, LinkArgs, MethodArg, NonlinearArgs, PlannerArgs};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct InferArgs {
    /// The model: ONNX (as exported by torch.onnx.export), or a compiled `.helina`
    /// file (`helina compile`), which carries its fixed point and methods.
    #[arg(long, conflicts_with = "net")]
    model: Option<String>,
    /// A built-in network instead (seeded public weights): mlp, mnist-a, mnist-b,
    /// mnist-c, mnist-d, minionn-cifar, tiny-resnet, residual-block-cifar,
    /// resnet18-cifar, resnet50-cifar, resnet18-imagenet, resnet50-imagenet (`helina
    /// plan`/`bench network` take them too).
    #[arg(long)]
    net: Option<String>,
    /// Inputs: .npy of float32/float64 with the batch dimension first and the model's
    /// input shape after it. Default with `--net`: seeded random inputs.
    #[arg(long)]
    input: Option<String>,
    /// At most this many inputs.
    #[arg(long)]
    limit: Option<usize>,
    /// Method for every linear layer it applies to, or the planner's pick.
    #[arg(long, value_enum, default_value_t = MethodArg::Auto)]
    method: MethodArg,
    /// The fixed point (default calibration: with --net, seeded random inputs in
    /// [0, 1) other than the evaluated ones; with --model, the inputs themselves, which
    /// is said in the output).
    #[command(flatten)]
    fixed: FixedPointArgs,
    #[command(flatten)]
    nonlinear: NonlinearArgs,
    /// Print JSON.
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,
    /// Print JSON lines: one per input as soon as it is done (its output and checks,
    /// with `input`, its index), then one with the session's summary (`summary`:
    /// true). The inputs' results are not kept, so any batch runs in the memory of one
    /// input.
    #[arg(long)]
    jsonl: bool,
    #[command(flatten)]
    link: LinkArgs,
    #[command(flatten)]
    planner: PlannerArgs,
}

#[derive(Serialize)]
struct Output {
    #[serde(flatten)]
    output: helina::Output,
    #[serde(flatten)]
    check: helina::Check,
}

/// One JSON line of `--jsonl`.
#[derive(Serialize)]
struct Line<'a> {
    input: usize,
    #[serde(flatten)]
    output: &'a helina::Output,
    #[serde(flatten)]
    check: &'a helina::Check,
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
    /// The steps the planner gave approximate truncation (of `truncating_steps`).
    approximate_truncation: Vec<String>,
    /// The bits the approximate steps' DReLU leaves out beyond the truncated ones (the
    /// coarse DReLU; 0: none).
    coarse_drelu_bits: u32,
    /// Steps that truncate.
    truncating_steps: usize,
    /// The input range the plan is safe for.
    input_range: Option<nn::InputRange>,
    /// How long planning took (fixed point, methods), before any encryption.
    planning: helina::PlanTimings,
    setup_ms: f64,
    setup_bytes: u64,
    /// Encoded weights the server held, bytes; layers encoded on the fly (`--mem-limit`).
    encoded_bytes: u64,
    on_the_fly_layers: usize,
    /// Peak resident memory of this process (client and server threads), bytes.
    peak_rss_bytes: Option<u64>,
    outputs: Vec<Output>,
    layers: Vec<helina::Layer>,
}

/// The inputs of `--input` (or seeded ones for `--net`), at most `--limit`.
fn inputs(a: &InferArgs, sample: &[usize]) -> Res<Vec<Vec<f32>>> {
    let len: usize = sample.iter().product();
    let inputs = match &a.input {
        Some(path) => helina::array::read_batch(path, sample)?,
        None if a.net.is_some() => crate::args::seeded_inputs(7, a.limit.unwrap_or(1), len),
        None => return Err("--input x.npy is needed with --model".into()),
    };
    limited(a, inputs)
}

/// At most `--limit` of `inputs`, and at least one.
fn limited(a: &InferArgs, mut inputs: Vec<Vec<f32>>) -> Res<Vec<Vec<f32>>> {
    if let Some(n) = a.limit {
        inputs.truncate(n);
    }
    if inputs.is_empty() {
        return Err("no inputs".into());
    }
    Ok(inputs)
}

pub fn run(a: &InferArgs) -> Res<()> {
    let link = a.link.link()?;
    let mut planning = a.planner.planning(link, a.method.choice())?;
    let (name, model, inputs, calibration) = match a.model.as_deref() {
        // a compiled model (`helina compile`) carries its fixed point and methods
        Some(path) if crate::args::is_compiled(path) => {
            // one session runs these inputs: its flooding is sized for them, as for an
            // ONNX model below (the batch size, read before the model gives the input
            // shape: never below the inputs run, since a file without a batch axis holds
            // one input)
            let file = a
                .input
                .as_deref()
                .ok_or("--input x.npy is needed with --model")?;
            let (shape, data) = helina::array::read_f32(file)?;
            let runs = shape.first().copied().unwrap_or(1);
            let runs = a.limit.map_or(runs, |n| runs.min(n)).max(1);
            planning.session_inputs = planning.session_inputs.or(u32::try_from(runs).ok());
            let (model, calibration) = crate::args::load_compiled(path, &a.fixed, &planning)?;
            let inputs = limited(
                a,
                helina::array::batch_from(file, &shape, &data, model.input_shape())?,
            )?;
            (path.to_string(), model, inputs, calibration)
        }
        _ => {
            let (name, network) = crate::args::network(&a.model, &a.net)?;
            let sample = network.input_shape().to_vec();
            let inputs = inputs(a, &sample)?;
            let default_calibration = if a.net.is_some() {
                crate::args::builtin_calibration(sample.iter().product())
            } else {
                (
                    inputs.clone(),
                    "the inputs themselves (give --calibration to plan on other data)",
                )
            };
            let (fixed, calibration) = a.fixed.fixed_point(&sample, Some(default_calibration))?;
            let fixed = fixed.for_nonlinear(a.nonlinear.protocol());
            // one session runs these inputs: its flooding is sized for them
            planning.session_inputs = planning.session_inputs.or(u32::try_from(inputs.len()).ok());
            let model = helina::Model::new(network, &fixed, &planning)?;
            (name, model, inputs, calibration)
        }
    };
    let opts = helina::LocalOptions {
        server: helina::ServerOptions {
            nonlinear: a.nonlinear.protocol(),
            serve: helina::ServeOptions {
                link,
                ..helina::ServerOptions::default().serve
            },
        },
        client: helina::ClientOptions {
            timeout: std::time::Duration::from_secs(a.link.timeout.max(600)),
            ..Default::default()
        },
    };
    let pb = benchmarks::progress(model.program().steps.len() as u64, "private inference");
    let mut progress = |ph| {
        if let helina::Progress::Step { step, .. } = ph {
            pb.set_position(step as u64)
        }
    };
    let mut mismatches = 0usize;
    let run = if a.jsonl {
        helina::infer_local_each(&model, &inputs, &opts, &mut progress, &mut |k, o, c| {
            mismatches += usize::from(!c.matches_fixed_reference);
            let line = Line {
                input: k,
                output: &o,
                check: &c,
            };
            if let Ok(text) = serde_json::to_string(&line) {
                pb.suspend(|| println!("{text}"));
            }
        })
    } else {
        helina::infer_local(&model, &inputs, &opts, &mut progress)
    };
    pb.finish_and_clear();
    let run = run?;
    let report = Report {
        model: name,
        params: run.inference.params.clone(),
        p: run.inference.p,
        frac_bits: run.inference.frac_bits,
        calibration,
        accuracy: run.inference.accuracy,
        coarse_drelu_bits: model.program().coarse_drelu_bits(),
        approximate_truncation: model
            .program()
            .approximate_steps()
            .into_iter()
            .map(String::from)
            .collect(),
        truncating_steps: model.program().truncating_steps(),
        input_range: run.inference.input_range,
        planning: model.timings,
        setup_ms: run.inference.setup_ms,
        setup_bytes: run.inference.setup_bytes,
        encoded_bytes: run.encoded_bytes,
        on_the_fly_layers: run.on_the_fly_layers,
        peak_rss_bytes: run.peak_rss_bytes,
        outputs: run
            .inference
            .outputs
            .iter()
            .zip(&run.checks)
            .map(|(o, c)| Output {
                output: o.clone(),
                check: c.clone(),
            })
            .collect(),
        layers: run.steps.clone(),
    };
    if a.jsonl {
        let mut summary = serde_json::to_value(&report)?;
        if let Some(m) = summary.as_object_mut() {
            m.remove("outputs");
            m.insert("summary".into(), true.into());
            m.insert("inputs".into(), inputs.len().into());
        }
        println!("{}", serde_json::to_string(&summary)?);
    } else if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if mismatches > 0 || !run.all_match_fixed_reference() {
        return Err("a private result differs from the plaintext fixed-point reference".into());
    }
    Ok(())
}

/// A small graph output as text.
pub fn show_value(v: &nn::HeadValue) -> String {
    let items: Vec<String> = match &v.data {
        nn::HeadData::F32(x) => x.iter().map(|x| format!("{x:.4}")).collect(),
        nn::HeadData::I64(x) => x.iter().map(|x| x.to_string()).collect(),
        nn::HeadData::Str(x) => x.iter().map(|x| format!("{x:?}")).collect(),
    };
    format!("[{}] {}", items.join(", "), v.data.dtype())
}

fn print_report(r: &Report) {
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "helina infer: {} ({}, p = {}, {} fractional bits); setup {:.1} ms, {:.2} MB (keys, silent-OT setup)",
        r.model,
        r.params,
        r.p,
        r.frac_bits,
        r.setup_ms,
        mb(r.setup_bytes)
    );
    if let Some(acc) = r.accuracy {
        println!(
            "fixed point: calibrated on {}; max |Δlogit| vs float {:.2e} (mean {:.2e}) on them, tolerance {}",
            r.calibration, acc.max_abs_err, acc.mean_abs_err, acc.tolerance
        );
    }
    println!(
        "truncation: approximate (Cheetah's) on {} of {} truncating steps{}",
        r.approximate_truncation.len(),
        r.truncating_steps,
        if r.approximate_truncation.len() == r.truncating_steps
            || r.approximate_truncation.is_empty()
        {
            String::new()
        } else {
            format!(": {}", r.approximate_truncation.join(", "))
        }
    );
    if r.coarse_drelu_bits > 0 {
        println!(
            "coarse DReLU: the approximate steps compare {} bits fewer",
            r.coarse_drelu_bits
        );
    }
    println!("planning: {}", r.planning);
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
    let show = |v: &[f32]| {
        v.iter()
            .take(10)
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (i, o) in r.outputs.iter().enumerate() {
        let (out, c) = (&o.output, &o.check);
        println!(
            "  input {i}: label {} (argmax {}; float model: {}), max |Δlogit| vs float {:.2e} ({}), equals the fixed-point reference: {}; {:.1} ms, {:.2} MB ({:.1} ms, {:.2} MB online)",
            out.label(),
            out.argmax,
            c.float_argmax,
            c.float_max_abs_err,
            if c.within_tolerance { "within tolerance" } else { "BEYOND the tolerance" },
            if c.matches_fixed_reference { "yes" } else { "NO" },
            out.total_ms,
            mb(out.total_bytes),
            out.online_ms,
            mb(out.online_bytes)
        );
        println!("    logits: [{}]", show(&out.logits));
        println!("    float:  [{}]", show(&c.float_logits));
        for g in out
            .graph_outputs
            .iter()
            .filter(|g| g.value.shape.iter().product::<usize>() <= 10)
        {
            println!("    {}: {}", g.name, show_value(&g.value));
        }
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
