//! `helina inspect m.onnx`: what helina makes of a model before anything is encrypted —
//! the imported graph with shapes, the fixed point (parameter set, fractional bits,
//! each tensor's scale and pooling divisor, each layer's weight scale and accumulator
//! bits), the agreement with the float model on the calibration inputs, the input range
//! the plan is safe for, and the method the planner picks for every linear layer.

use clap::Args;
use serde::Serialize;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct InspectArgs {
    /// The model: ONNX, or a compiled `.helina` file (`helina compile`).
    #[arg(conflicts_with = "net")]
    model: Option<String>,
    /// A built-in network instead (calibrated on seeded random inputs in [0, 1)).
    #[arg(long)]
    net: Option<String>,
    #[command(flatten)]
    fixed: crate::args::FixedPointArgs,
    /// Method for every linear layer it applies to, or the planner's pick.
    #[arg(long, value_enum, default_value_t = crate::args::MethodArg::Auto)]
    method: crate::args::MethodArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    link: crate::args::LinkArgs,
    #[command(flatten)]
    planner: crate::args::PlannerArgs,
}

#[derive(Serialize)]
struct NodeRow {
    name: String,
    op: String,
    inputs: Vec<Vec<usize>>,
    output: Vec<usize>,
}

#[derive(Serialize)]
struct StepRow {
    name: String,
    kind: String,
    output: String,
    shape: Vec<usize>,
    scale_bits: u32,
    divisor: u64,
    weight_scale_bits: Option<u32>,
    trunc_bits: Option<u32>,
    calibration_bits: Option<u32>,
    worst_case_bits: Option<u32>,
    method: Option<String>,
    predicted_ms: Option<f64>,
}

#[derive(Serialize)]
struct Report {
    model: String,
    input_shape: Vec<usize>,
    nodes: Vec<NodeRow>,
    /// The graph normalises its input (the client applies it before quantising).
    input_normalisation: bool,
    /// The output head's ops, computed by the client on the revealed output.
    head: Vec<String>,
    /// The graph's outputs.
    graph_outputs: Vec<String>,
    params: String,
    p: u64,
    frac_bits: u32,
    calibration: String,
    accuracy: Option<nn::Accuracy>,
    input_range: Option<nn::InputRange>,
    steps: Vec<StepRow>,
    predicted_linear_ms: f64,
    /// How long planning took (fixed point, methods).
    planning: helina::PlanTimings,
}

fn kind(st: &nn::Step) -> String {
    match st {
        nn::Step::Linear { .. } => "linear".into(),
        nn::Step::Conv { .. } => "conv".into(),
        nn::Step::Nonlinear { op, .. } => op.to_string(),
        nn::Step::Square { .. } => "square".into(),
        nn::Step::SumPool { k_h, k_w, .. } => format!("sumpool {k_h}x{k_w}"),
        nn::Step::Add { mul_a, mul_b, .. } => format!("add (x{mul_a}, x{mul_b})"),
        nn::Step::Pad { .. } => "pad".into(),
        nn::Step::SpaceToDepth { .. } => "space-to-depth".into(),
        nn::Step::Reshape { .. } => "reshape".into(),
    }
}

pub fn run(a: &InspectArgs) -> Res<()> {
    let planning = a.planner.planning(a.link.link()?, a.method.choice())?;
    let (name, model, source) = match a.model.as_deref() {
        Some(path) if crate::args::is_compiled(path) => {
            let (model, source) = crate::args::load_compiled(path, &a.fixed, &planning)?;
            (path.to_string(), model, source)
        }
        _ => {
            let (name, network) = crate::args::network(&a.model, &a.net)?;
            let len: usize = network.input_shape().iter().product();
            let default = a
                .net
                .as_ref()
                .map(|_| crate::args::builtin_calibration(len));
            let (fixed, source) = a.fixed.fixed_point(network.input_shape(), default)?;
            (
                name,
                helina::Model::new(network, &fixed, &planning)?,
                source,
            )
        }
    };
    let (network, prog, params) = (&model.network, model.program(), model.params());
    let layers = &model.plan.layers;
    let nodes = network
        .nodes
        .iter()
        .map(|n| NodeRow {
            name: n.name.clone(),
            op: n.op.kind().into(),
            inputs: n
                .inputs
                .iter()
                .map(|&t| network.shape(t).to_vec())
                .collect(),
            output: network.shape(n.output).to_vec(),
        })
        .collect();
    let mut total = 0.0;
    let steps = prog
        .steps
        .iter()
        .enumerate()
        .map(|(i, st)| {
            let t = &prog.tensors[st.output()];
            let bound = prog.bounds.iter().find(|b| b.step == i);
            let layer = layers.iter().find(|l| l.step == i);
            let predicted = layer.and_then(|l| l.picked()).map(|c| c.predicted_ms);
            total += predicted.unwrap_or(0.0);
            StepRow {
                name: st.name().into(),
                kind: kind(st),
                output: t.name.clone(),
                shape: t.shape.clone(),
                scale_bits: t.scale_bits,
                divisor: t.divisor,
                weight_scale_bits: match st {
                    nn::Step::Linear {
                        weight_scale_bits, ..
                    }
                    | nn::Step::Conv {
                        weight_scale_bits, ..
                    } => Some(*weight_scale_bits),
                    _ => None,
                },
                trunc_bits: match st {
                    nn::Step::Nonlinear { trunc_bits, .. } => Some(*trunc_bits),
                    _ => None,
                },
                calibration_bits: bound.map(|b| b.calibration_bits),
                worst_case_bits: bound.map(|b| b.worst_case_bits),
                method: layer.map(|l| l.pick.method().name().to_string()),
                predicted_ms: predicted,
            }
        })
        .collect();
    let report = Report {
        model: name,
        input_shape: network.input_shape().to_vec(),
        nodes,
        input_normalisation: network.input_affine.is_some(),
        head: network
            .head
            .nodes
            .iter()
            .map(|h| {
                format!("{:?}", h.op)
                    .split([' ', '{', '('])
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect(),
        graph_outputs: network
            .head
            .outputs
            .iter()
            .map(|(n, _)| n.clone())
            .collect(),
        params: params.name().into(),
        p: prog.p,
        frac_bits: prog.frac_bits,
        calibration: source,
        accuracy: prog.accuracy,
        input_range: prog.input_range,
        steps,
        predicted_linear_ms: total,
        planning: model.timings,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print(&report);
    Ok(())
}

fn print(r: &Report) {
    println!("helina inspect: {} (input {:?})", r.model, r.input_shape);
    println!(
        "graph ({} nodes after import: BatchNormalization folded, Identity/Dropout removed):",
        r.nodes.len()
    );
    for n in &r.nodes {
        println!(
            "  {:<32} {:<14} {:?} -> {:?}",
            n.name.chars().take(32).collect::<String>(),
            n.op,
            n.inputs,
            n.output
        );
    }
    if r.input_normalisation {
        println!(
            "input normalisation (constants on the input): applied by the client before quantising"
        );
    }
    if !r.head.is_empty() {
        println!(
            "output head (the client computes it on the revealed output): {}",
            r.head.join(" → ")
        );
    }
    println!("graph outputs: {}", r.graph_outputs.join(", "));
    println!(
        "fixed point: {} (p = {}), {} fractional bits; calibration: {}",
        r.params, r.p, r.frac_bits, r.calibration
    );
    println!("planning: {}", r.planning);
    if let Some(acc) = r.accuracy {
        println!(
            "float agreement on the calibration inputs: max |Δ| {:.3e}, mean {:.3e} over {} inputs (tolerance {}, the plan must meet half of it)",
            acc.max_abs_err, acc.mean_abs_err, acc.inputs, acc.tolerance
        );
    }
    if let Some(ir) = r.input_range {
        println!(
            "input range: [{}, {}], {}",
            ir.lo,
            ir.hi,
            match ir.basis {
                nn::RangeBasis::WorstCase =>
                    "guaranteed: worst-case interval bounds of every value fit p".to_string(),
                nn::RangeBasis::Calibration { headroom_bits } => format!(
                    "from the calibration maxima ({headroom_bits} bits of headroom below p/2); worst-case bounds do not fit p"
                ),
            }
        );
    }
    println!(
        "  {:<28} {:<24} {:<16} {:>5} {:>7} {:>5} {:>5} {:>6} {:>6} {:<11} {:>9}",
        "step",
        "kind",
        "shape",
        "scale",
        "divisor",
        "w",
        "trunc",
        "calib",
        "worst",
        "method",
        "pred ms"
    );
    let o = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
    for s in &r.steps {
        println!(
            "  {:<28} {:<24} {:<16} {:>5} {:>7} {:>5} {:>5} {:>6} {:>6} {:<11} {:>9}",
            s.name.chars().take(28).collect::<String>(),
            s.kind.chars().take(24).collect::<String>(),
            format!("{:?}", s.shape),
            s.scale_bits,
            s.divisor,
            o(s.weight_scale_bits),
            o(s.trunc_bits),
            o(s.calibration_bits),
            o(s.worst_case_bits),
            s.method.clone().unwrap_or_default(),
            s.predicted_ms
                .map(|v| format!("{v:.1}"))
                .unwrap_or_default()
        );
    }
    println!(
        "scale: fractional bits of each step's output; w: the layer's weight scale; calib / worst: accumulator bits on the calibration inputs / worst case; predicted linear time {:.1} ms",
        r.predicted_linear_ms
    );
}
