//! `helina bench network`: every layer of a network, one row each.
//!
//! - Linear layers (matvec, conv): with `--backend bfv` each runs for real (the
//!   network's own lowered weights, a random input, result checked against the
//!   plaintext reference mod p): client encrypt, server kernel + `share_output`, client
//!   decrypt, timed; beside it the planner's prediction. With `--backend count` the
//!   layer runs on the counting backend only: op counts and the planner's prediction,
//!   for every applicable method, in milliseconds for a whole ResNet-50.
//! - Nonlinear layers (silent OT, or garbled circuits with `--nonlinear gc`; skipped
//!   with `--linear-only`): the protocol runs for real in memory on up to
//!   `--nonlinear-sample` elements; a layer with more elements is projected linearly
//!   from that sample (marked "projected"). For silent OT the layer's COTs are priced
//!   at the amortised silent-OT bytes and the generation time per COT measured once
//!   (a refill of each direction); the session's one-time setup is not counted.
//!   Square is predicted from its op counts; SumPool and Add are local (free).
//! - Weights encoded beyond `--mem-limit` are encoded on the fly: their encoding time is
//!   part of the layer's online time (bfv) and of its prediction (both). The benchmark
//!   itself holds one layer's encoding at a time; `encoded_mb` says what a server
//!   holding them all would need.
//!
//! Totals (`total_ms`, `total_bytes`) are the planner's picks; `--method all` adds each
//! method's own total and checks the pick against the best measured method per layer.
//! With `--plot out.svg` per-layer time and bytes by method are drawn (plotters).
//! For networks in GALA Table IX (the MLP, ResNet-18/50 for CIFAR-10) the GAZELLE and
//! GALA op counts are recomputed in the papers' ideal model (n = 2048, one cyclic
//! vector) and printed beside the table's cells.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use he::{Count, Layout, OpCounts, Params, SlotInfo};
use kernels::{reference, ConvLayout, ConvMethod, LinearLayer, MatvecLayout, Method};
use protocol::{LayerLayout, LayerMethod, LayerShape};
use serde::Serialize;

use crate::bench_linear::measure_with;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct NetworkArgs {
    /// A built-in network (`helina infer --help` lists them).
    #[arg(long, conflicts_with = "model")]
    net: Option<String>,
    /// An ONNX model.
    #[arg(long)]
    model: Option<String>,
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// `bfv` (run every layer for real) or `count` (op counts and predictions only).
    #[arg(long, default_value = "bfv")]
    backend: String,
    /// `auto` (the planner's pick per layer), `all` (every applicable method), or a
    /// comma list of method names.
    #[arg(long, default_value = "auto")]
    method: String,
    /// Linear layers only.
    #[arg(long)]
    linear_only: bool,
    /// Only the first N linear layers (and the nonlinear layers before the next one).
    #[arg(long)]
    layers: Option<usize>,
    /// Queries per linear layer (median by time).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Elements of a nonlinear layer run for real; larger layers are projected from
    /// this many.
    #[arg(long, alias = "gc-sample", default_value_t = 4096)]
    nonlinear_sample: usize,
    #[command(flatten)]
    nonlinear: crate::args::NonlinearArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Draw per-layer time and bytes by method into this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    link: crate::args::LinkArgs,
    #[command(flatten)]
    planner: crate::args::PlannerArgs,
}

#[derive(Serialize, Clone, Default)]
struct LayerRow {
    step: usize,
    layer: String,
    kind: String,
    shape: String,
    method: String,
    pick: bool,
    /// Measured (bfv) rather than predicted or projected.
    measured: bool,
    on_the_fly: bool,
    /// bfv: the layer ran in this many output-channel (row) chunks, each encoded, used and
    /// dropped in turn, because its encoded weights exceed the memory budget.
    chunks: usize,
    /// Online time: client + server (+ encoding on the fly) + transfer over the link.
    ms: f64,
    /// Server online time (measured for bfv, predicted for count).
    server_ms: f64,
    /// The planner's predicted server time (with threads and encoding on the fly).
    predicted_server_ms: f64,
    /// Client online time: encrypting and serialising the query, deserialising and
    /// decrypting the response (measured for bfv, predicted for count).
    client_ms: f64,
    /// The planner's predicted client time (with threads).
    predicted_client_ms: f64,
    /// The planner's predicted online time, comparable to `ms`: server + client +
    /// transfer over the link.
    predicted_ms: f64,
    /// bfv: the same op counts priced with per-op costs measured right after the layer
    /// (single-threaded ops, divided by the same thread factor): separates the model's
    /// error from the machine's drift since the cost cache was written.
    predicted_in_run_ms: Option<f64>,
    /// Offline time (weight encoding; OT precomputation and silent-OT generation, or
    /// garbling and OTs).
    offline_ms: f64,
    bytes: u64,
    bytes_up: u64,
    bytes_down: u64,
    offline_bytes: u64,
    galois_keys: usize,
    encoded_bytes: u64,
    perm: u64,
    dec_perm: u64,
    hst_perm: u64,
    sc_mult: u64,
    add: u64,
    elements: u64,
    and_gates: u64,
    /// Correlated OTs (silent OT).
    cots: u64,
    correct: Option<bool>,
}

#[derive(Serialize)]
struct MethodTotal {
    method: String,
    layers: usize,
    cannot_run: usize,
    total_ms: f64,
    total_bytes: u64,
    perm: u64,
    dec_perm: u64,
    hst_perm: u64,
    sc_mult: u64,
    add: u64,
}

#[derive(Serialize)]
struct TableIx {
    net: &'static str,
    paper_gazelle: [u64; 5],
    paper_gala: [u64; 5],
    ours_gazelle: [u64; 5],
    ours_gala: [u64; 5],
    note: String,
}

#[derive(Serialize)]
struct Report {
    net: String,
    params: String,
    backend: String,
    threads: usize,
    objective: String,
    costs: String,
    link: String,
    rows: Vec<LayerRow>,
    totals_by_method: Vec<MethodTotal>,
    /// The planner's picks: linear layers (and nonlinear ones unless --linear-only).
    total_ms: f64,
    total_bytes: u64,
    linear_ms: f64,
    /// The planner's prediction of `linear_ms` (server + client + transfer per layer).
    predicted_linear_ms: f64,
    /// bfv: (predicted − measured) / measured linear time of the whole network.
    linear_prediction_error: Option<f64>,
    linear_bytes: u64,
    nonlinear_ms: f64,
    nonlinear_bytes: u64,
    /// How the nonlinear layers ran (`ot` or `gc`).
    nonlinear: String,
    /// Their offline bytes (precomputation, silent OT or garbled tables).
    nonlinear_offline_bytes: u64,
    /// Offline work of the picks (weight encoding, GC garbling and OTs).
    offline_ms: f64,
    offline_bytes: u64,
    /// Galois keys of all picked layers, each distinct key once (one upload per
    /// session), bytes.
    key_bytes: u64,
    /// Encoded weights of the picks, held in memory unless on the fly.
    encoded_bytes: u64,
    encoded_on_the_fly_bytes: u64,
    relu_elements: u64,
    maxpool_outputs: u64,
    and_gates: u64,
    cots: u64,
    /// Planner's pick vs the best measured method per layer (`--method all`, bfv).
    worst_pick_vs_best: Option<f64>,
    /// Per layer |predicted − measured| / measured server time, worst (bfv).
    worst_prediction_error: Option<f64>,
    median_prediction_error: Option<f64>,
    /// The same with per-op costs measured right after each layer.
    worst_in_run_prediction_error: Option<f64>,
    median_in_run_prediction_error: Option<f64>,
    peak_rss_bytes: Option<u64>,
    table_ix: Option<TableIx>,
    wall_s: f64,
}

/// The methods to run on a layer.
fn methods_for(a: &NetworkArgs, shape: &LayerShape, pick: LayerMethod) -> Res<Vec<LayerMethod>> {
    Ok(match a.method.as_str() {
        "auto" => vec![pick],
        "all" => shape.methods(),
        list => {
            let mut v = Vec::new();
            for name in list.split(',') {
                let m = shape
                    .methods()
                    .into_iter()
                    .find(|m| m.name() == name.trim());
                match m {
                    Some(m) => v.push(m),
                    None if known_method(name.trim()) => {}
                    None => return Err(format!("unknown method `{name}`").into()),
                }
            }
            if v.is_empty() {
                return Err(format!(
                    "none of `{list}` applies to the {} layer",
                    shape_kind(shape)
                )
                .into());
            }
            v
        }
    })
}

fn known_method(name: &str) -> bool {
    Method::ALL
        .iter()
        .any(|m| LayerMethod::Matvec(*m).name() == name)
        || ConvMethod::ALL
            .iter()
            .any(|m| LayerMethod::Conv(*m).name() == name)
}

fn shape_kind(shape: &LayerShape) -> &'static str {
    match shape {
        LayerShape::Matvec { .. } => "matvec",
        LayerShape::Conv(_) => "conv",
        LayerShape::Grouped(_) => "grouped conv",
    }
}

fn shape_text(shape: &LayerShape) -> String {
    match shape {
        LayerShape::Matvec { rows, cols } => format!("{rows}x{cols}"),
        LayerShape::Conv(s) => format!(
            "{}x{}x{} → {} {}x{} s{}",
            s.c_i, s.h, s.w, s.c_o, s.k_h, s.k_w, s.stride
        ),
        LayerShape::Grouped(s) => format!(
            "{}x{}x{} → {} {}x{} s{} g{}",
            s.c_i, s.h, s.w, s.c_o, s.k_h, s.k_w, s.stride, s.groups
        ),
    }
}

fn set_counts(r: &mut LayerRow, c: &OpCounts) {
    r.perm = c.perm;
    r.dec_perm = c.dec_perm;
    r.hst_perm = c.hst_perm;
    r.sc_mult = c.sc_mult;
    r.add = c.add;
}

pub fn run(a: &NetworkArgs) -> Res<()> {
    let wall = Instant::now();
    if a.backend != "bfv" && a.backend != "count" {
        return Err(format!("--backend {}: give bfv or count", a.backend).into());
    }
    let bfv = a.backend == "bfv";
    let (name, network) = crate::args::network(&a.model, &a.net)?;
    let params = Params::preset(&a.params)?;
    let frac = 8;
    let prog = nn::lower(&network, frac, params.p())?;
    let link = a.link.link()?;
    let mut planning = a.planner.planning(link, protocol::MethodChoice::Auto)?;
    // without --mem-limit every layer's weights count as held (measured apart per layer)
    planning.mem_limit = Some(a.planner.mem_limit_bytes()?.unwrap_or(u64::MAX));
    let (planner, source) = planning.planner(&params)?;
    let network_plan = planning.plan(&planner, prog.clone(), &params, a.layers)?;
    // the plan's parameters carry the program's public weight bound
    let params = network_plan.params.clone();
    let planned = &network_plan.layers;
    let last_step = match a.layers {
        Some(_) => planned.last().map_or(0, |l| l.step),
        None => prog.steps.len(),
    };
    let total_units = planned
        .iter()
        .map(|l| methods_for(a, &l.shape, l.pick.method()).map_or(1, |m| m.len()))
        .sum::<usize>();
    let pb = crate::timing::progress(total_units as u64, "bench network");
    let mut rows: Vec<LayerRow> = Vec::new();
    let mut rng = rand::rng();
    let mut steps: Vec<i64> = Vec::new();
    // The most encoded weights one layer may hold at once (bfv): --mem-limit, else a
    // third of the memory available now.
    let layer_budget = match a.planner.mem_limit_bytes()? {
        Some(b) => b.max(1),
        None => 4 << 30,
    };
    let nonlinear = a.nonlinear.protocol();
    let mut sample_cache: BTreeMap<String, Sample> = BTreeMap::new();
    let mut ms_per_cot: Option<f64> = None;

    for (i, step) in prog.steps.iter().enumerate() {
        if a.layers.is_some() && i > last_step {
            break;
        }
        if let Some(l) = planned.iter().find(|l| l.step == i) {
            let weights: &[i64] = match step {
                nn::Step::Linear { weight, .. } | nn::Step::Conv { weight, .. } => weight,
                _ => &[],
            };
            for method in methods_for(a, &l.shape, l.pick.method())? {
                pb.set_message(format!("{} {}", l.name, method.name()));
                let cand = l.candidates.iter().find(|c| c.method == method);
                let mut row = LayerRow {
                    step: i,
                    layer: l.name.clone(),
                    kind: shape_kind(&l.shape).into(),
                    shape: shape_text(&l.shape),
                    method: method.name().into(),
                    pick: method == l.pick.method(),
                    on_the_fly: l.on_the_fly,
                    ..Default::default()
                };
                let est = match cand.map(|c| c.estimate.as_ref()) {
                    Some(Ok(e)) => e.clone(),
                    Some(Err(e)) => {
                        if !a.json {
                            pb.println(format!("  {} {}: cannot run: {e}", l.name, method.name()));
                        }
                        pb.inc(1);
                        continue;
                    }
                    None => {
                        return Err(format!("{}: no estimate for {}", l.name, method.name()).into())
                    }
                };
                let plan = LayerLayout::new(&l.shape.with(method)?, &params)?;
                let parallel = plan.parallel();
                row.predicted_server_ms =
                    planner.server_ms(est.server_ms, est.encode_ms, parallel, l.on_the_fly);
                row.predicted_client_ms = planner.client_ms(est.client_ms, parallel);
                row.galois_keys = est.galois_keys;
                row.encoded_bytes = est.encoded_bytes;
                if row.pick {
                    steps.extend(plan.galois().steps());
                }
                if bfv {
                    let x: Vec<i64> = (0..plan.input_len())
                        .map(|_| rand::Rng::random_range(&mut rng, -128..128))
                        .collect();
                    let chunks = est.encoded_bytes.div_ceil(layer_budget.max(1)).max(1) as usize;
                    let on_the_fly = l.on_the_fly || chunks > 1;
                    let run = Measuring {
                        reps: a.reps,
                        chunks,
                        on_the_fly,
                    };
                    let m = measure_chunked(&l.shape, method, &params, weights, &x, run)?;
                    row.on_the_fly = on_the_fly;
                    row.chunks = chunks;
                    row.measured = true;
                    row.correct = Some(m.correct);
                    // In-run: the kernel's op counts at the measured per-op costs, and
                    // on the fly the predicted encoding (not measured apart).
                    row.predicted_in_run_ms = Some(planner.server_ms(
                        m.predicted_server_ms,
                        if on_the_fly {
                            est.encode_ms
                        } else {
                            m.offline_ms
                        },
                        parallel,
                        on_the_fly,
                    ));
                    if chunks > 1 && !l.on_the_fly {
                        row.predicted_server_ms =
                            planner.server_ms(est.server_ms, est.encode_ms, parallel, true);
                    }
                    // On the fly, the measured kernel encoded the weights itself.
                    row.server_ms = m.server_ms;
                    row.client_ms = m.client_ms;
                    row.offline_ms = if on_the_fly { 0.0 } else { m.offline_ms };
                    row.bytes_up = m.bytes_up;
                    row.bytes_down = m.bytes_down;
                    row.bytes = m.bytes_up + m.bytes_down;
                    row.ms = m.online_ms + planner.wire_ms(row.bytes);
                    row.perm = m.perm;
                    row.dec_perm = m.dec_perm;
                    row.hst_perm = m.hst_perm;
                    row.sc_mult = m.sc_mult;
                    row.add = m.add;
                } else {
                    set_counts(&mut row, &est.counts);
                    row.server_ms = row.predicted_server_ms;
                    row.client_ms = row.predicted_client_ms;
                    row.offline_ms = if l.on_the_fly { 0.0 } else { est.encode_ms };
                    row.bytes_up = est.bytes_up;
                    row.bytes_down = est.bytes_down;
                    row.bytes = est.bytes_up + est.bytes_down;
                    row.ms = cand.map_or(0.0, |c| c.predicted_ms);
                }
                row.predicted_ms = row.predicted_server_ms
                    + row.predicted_client_ms
                    + planner.wire_ms(est.bytes_up + est.bytes_down);
                rows.push(row);
                pb.inc(1);
            }
            continue;
        }
        if a.linear_only {
            continue;
        }
        match step {
            nn::Step::Nonlinear {
                name,
                input,
                op,
                trunc_bits,
                ..
            } => {
                let spec = protocol::gc_spec(&prog, *input, *op, *trunc_bits)?;
                let kind = match op {
                    nn::NonlinearOp::Relu => "relu",
                    nn::NonlinearOp::MaxPool { .. } => "maxpool",
                    nn::NonlinearOp::ReluMaxPool { .. } => "relu+maxpool",
                    nn::NonlinearOp::Identity => "truncate",
                    nn::NonlinearOp::Clip { .. } => "clip",
                };
                pb.set_message(format!("{name} {kind}"));
                let key = format!("{:?}/{}", spec.op, spec.trunc_bits);
                let sample = spec.count.min(a.nonlinear_sample.max(1));
                let per = match sample_cache.get(&key) {
                    Some(v) if v.elements >= sample => *v,
                    _ => {
                        let v = match nonlinear {
                            protocol::NonlinearProtocol::GarbledCircuits(g) => {
                                gc_sample(&spec, g, sample)?
                            }
                            protocol::NonlinearProtocol::SilentOt => {
                                let t = match ms_per_cot {
                                    Some(t) => t,
                                    None => *ms_per_cot.insert(silent_ms_per_cot()?),
                                };
                                ot_sample(&spec, sample, t)?
                            }
                        };
                        sample_cache.insert(key, v);
                        v
                    }
                };
                let scale = spec.count as f64 / per.elements as f64;
                let online_bytes = (per.online_bytes as f64 * scale) as u64;
                let is_ot = nonlinear == protocol::NonlinearProtocol::SilentOt;
                rows.push(LayerRow {
                    step: i,
                    layer: name.clone(),
                    kind: kind.into(),
                    shape: format!("{:?}", prog.tensors[*input].shape),
                    method: nonlinear.name().into(),
                    pick: true,
                    measured: bfv && spec.count <= per.elements,
                    ms: per.online_ms * scale + planner.wire_ms(online_bytes),
                    server_ms: per.online_ms * scale,
                    offline_ms: per.offline_ms * scale,
                    bytes: online_bytes,
                    bytes_down: online_bytes,
                    offline_bytes: (per.offline_bytes as f64 * scale) as u64,
                    elements: spec.count as u64,
                    and_gates: if is_ot { 0 } else { spec.and_gates() },
                    cots: if is_ot {
                        (per.cots as f64 * scale) as u64
                    } else {
                        0
                    },
                    ..Default::default()
                });
            }
            nn::Step::Square { name, input, .. } => {
                let count = prog.tensors[*input].len();
                let slots = SlotInfo {
                    n: params.n(),
                    p: params.p(),
                    layout: Layout::TwoRows,
                };
                let plan = kernels::SquareLayout::new(count, slots)?;
                let e = kernels::estimate(&plan, &params, &planner.model)?;
                let mut row = LayerRow {
                    step: i,
                    layer: name.clone(),
                    kind: "square".into(),
                    shape: format!("{count}"),
                    method: "he-square".into(),
                    pick: true,
                    server_ms: e.server_ms,
                    predicted_server_ms: e.server_ms,
                    bytes_up: e.bytes_up,
                    bytes_down: e.bytes_down,
                    bytes: e.bytes_up + e.bytes_down,
                    ms: e.server_ms + planner.wire_ms(e.bytes_up + e.bytes_down),
                    elements: count as u64,
                    ..Default::default()
                };
                set_counts(&mut row, &e.counts);
                rows.push(row);
            }
            _ => {}
        }
    }
    pb.finish_and_clear();

    let picks: Vec<&LayerRow> = rows.iter().filter(|r| r.pick).collect();
    let is_linear = |r: &LayerRow| r.kind == "matvec" || r.kind == "conv";
    let sum_ms = |f: &dyn Fn(&LayerRow) -> bool| {
        picks.iter().filter(|r| f(r)).map(|r| r.ms).sum::<f64>() + 0.0
    };
    let sum_bytes =
        |f: &dyn Fn(&LayerRow) -> bool| picks.iter().filter(|r| f(r)).map(|r| r.bytes).sum::<u64>();
    // One key per distinct Galois element over all picked layers (uploaded once).
    steps.sort_unstable();
    steps.dedup();
    let key_bytes = he::GaloisSpec::new(steps).key_count(params.n() / 2) as u64
        * planner.model.galois_key_bytes;

    // Per-method totals over the linear layers.
    let layers_of = |kind: Option<&str>| {
        let mut v: Vec<usize> = rows
            .iter()
            .filter(|r| is_linear(r) && kind.is_none_or(|k| r.kind == k))
            .map(|r| r.step)
            .collect();
        v.dedup();
        v
    };
    let linear_layers = layers_of(None);
    let mut names: Vec<String> = rows
        .iter()
        .filter(|r| is_linear(r))
        .map(|r| r.method.clone())
        .collect();
    names.sort();
    names.dedup();
    let totals_by_method: Vec<MethodTotal> = names
        .iter()
        .map(|m| {
            let rs: Vec<&LayerRow> = rows
                .iter()
                .filter(|r| is_linear(r) && &r.method == m)
                .collect();
            let kind = rs.first().map(|r| r.kind.as_str());
            MethodTotal {
                method: m.clone(),
                layers: rs.len(),
                cannot_run: layers_of(kind).len().saturating_sub(rs.len()),
                total_ms: rs.iter().map(|r| r.ms).sum(),
                total_bytes: rs.iter().map(|r| r.bytes).sum(),
                perm: rs.iter().map(|r| r.perm).sum(),
                dec_perm: rs.iter().map(|r| r.dec_perm).sum(),
                hst_perm: rs.iter().map(|r| r.hst_perm).sum(),
                sc_mult: rs.iter().map(|r| r.sc_mult).sum(),
                add: rs.iter().map(|r| r.add).sum(),
            }
        })
        .collect();

    // Validation (bfv): prediction error per measured linear row; pick vs best measured.
    let errors_of = |f: &dyn Fn(&LayerRow) -> Option<f64>| {
        let mut e: Vec<f64> = rows
            .iter()
            .filter(|r| r.measured && is_linear(r) && r.server_ms > 0.0)
            .filter_map(|r| f(r).map(|p| (p - r.server_ms).abs() / r.server_ms))
            .collect();
        e.sort_by(|x, y| x.total_cmp(y));
        e
    };
    let errors = errors_of(&|r| Some(r.predicted_server_ms));
    let errors_in_run = errors_of(&|r| r.predicted_in_run_ms);
    let worst_pick_vs_best = if bfv && a.method == "all" {
        linear_layers
            .iter()
            .filter_map(|s| {
                let rs: Vec<&LayerRow> = rows
                    .iter()
                    .filter(|r| r.step == *s && is_linear(r))
                    .collect();
                let best = rs.iter().map(|r| r.ms).fold(f64::INFINITY, f64::min);
                rs.iter().find(|r| r.pick).map(|r| r.ms / best - 1.0)
            })
            .max_by(|x, y| x.total_cmp(y))
    } else {
        None
    };

    let linear_ms = sum_ms(&is_linear);
    let predicted_linear_ms: f64 = picks
        .iter()
        .filter(|r| is_linear(r))
        .map(|r| r.predicted_ms)
        .sum();
    let report = Report {
        net: name.clone(),
        params: params.name().into(),
        backend: a.backend.clone(),
        threads: planner.threads,
        objective: format!("{:?}", planner.objective),
        costs: source,
        link: format!("{link:?}"),
        total_ms: sum_ms(&|_| true),
        total_bytes: sum_bytes(&|_| true),
        linear_ms,
        predicted_linear_ms,
        linear_prediction_error: (bfv && linear_ms > 0.0)
            .then(|| predicted_linear_ms / linear_ms - 1.0),
        linear_bytes: sum_bytes(&is_linear),
        nonlinear_ms: sum_ms(&|r| !is_linear(r)),
        nonlinear_bytes: sum_bytes(&|r| !is_linear(r)),
        nonlinear: a.nonlinear.protocol().name().into(),
        nonlinear_offline_bytes: picks
            .iter()
            .filter(|r| !is_linear(r))
            .map(|r| r.offline_bytes)
            .sum(),
        offline_ms: picks.iter().map(|r| r.offline_ms).sum(),
        offline_bytes: picks.iter().map(|r| r.offline_bytes).sum(),
        key_bytes,
        encoded_bytes: picks
            .iter()
            .filter(|r| is_linear(r))
            .map(|r| r.encoded_bytes)
            .sum(),
        encoded_on_the_fly_bytes: picks
            .iter()
            .filter(|r| is_linear(r) && r.on_the_fly)
            .map(|r| r.encoded_bytes)
            .sum(),
        relu_elements: picks
            .iter()
            .filter(|r| r.kind == "relu")
            .map(|r| r.elements)
            .sum(),
        maxpool_outputs: picks
            .iter()
            .filter(|r| r.kind.contains("maxpool"))
            .map(|r| r.elements)
            .sum(),
        and_gates: picks.iter().map(|r| r.and_gates).sum(),
        cots: picks.iter().map(|r| r.cots).sum(),
        worst_pick_vs_best,
        worst_prediction_error: errors.last().copied(),
        median_prediction_error: errors.get(errors.len() / 2).copied(),
        worst_in_run_prediction_error: errors_in_run.last().copied(),
        median_in_run_prediction_error: errors_in_run.get(errors_in_run.len() / 2).copied(),
        peak_rss_bytes: protocol::peak_rss_bytes(),
        table_ix: table_ix(&name, &prog)?,
        wall_s: 0.0,
        totals_by_method,
        rows,
    };
    let report = Report {
        wall_s: wall.elapsed().as_secs_f64(),
        ..report
    };
    if let Some(path) = &a.plot {
        plot(path, &report)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    if report.rows.iter().any(|r| r.correct == Some(false)) {
        return Err("a layer's shares did not reconstruct the plaintext result".into());
    }
    Ok(())
}

/// How one layer is measured: queries timed, groups it is split into, and whether its
/// weights are encoded on the fly.
#[derive(Clone, Copy, Debug)]
struct Measuring {
    reps: usize,
    chunks: usize,
    on_the_fly: bool,
}

/// Measures a linear layer with real BFV, split into `chunks` groups of output channels
/// (conv) or rows (matvec) when its encoded weights exceed the budget: each group is
/// planned with the same method, encoded, queried, answered and dropped in turn; the
/// result is checked against the plaintext reference of the whole layer and the figures
/// are summed (each group's query counted: an upper bound on the bytes up).
fn measure_chunked(
    shape: &LayerShape,
    method: LayerMethod,
    params: &Params,
    weights: &[i64],
    x: &[i64],
    run: Measuring,
) -> Res<crate::bench_linear::Row> {
    let Measuring {
        reps,
        chunks,
        on_the_fly,
    } = run;
    let p = params.p();
    let xr = reference::reduce(&x.iter().map(|&v| v as i128).collect::<Vec<_>>(), p);
    let (outputs, per_output, want) = match shape {
        LayerShape::Matvec { rows, cols } => (
            *rows,
            1,
            reference::reduce(&reference::matvec(weights, x, *rows, *cols), p),
        ),
        LayerShape::Conv(sh) => {
            let (oh, ow, _, _) = reference::conv_output(sh);
            (
                sh.c_o,
                oh * ow,
                reference::reduce(&reference::conv(sh, x, weights), p),
            )
        }
        LayerShape::Grouped(sh) => {
            let (c_o, oh, ow) = sh.output_shape()?;
            (
                c_o,
                oh * ow,
                reference::reduce(&reference::grouped_conv(sh, x, weights)?, p),
            )
        }
    };
    // a grouped layer's encoding is small (one filter set per group): never split
    let chunks = if matches!(shape, LayerShape::Grouped(_)) {
        1
    } else {
        chunks
    };
    let per_weight = weights.len() / outputs.max(1);
    let size = outputs.div_ceil(chunks.max(1));
    let mut total = crate::bench_linear::Row {
        correct: true,
        ..Default::default()
    };
    let mut start = 0;
    while start < outputs {
        let n = size.min(outputs - start);
        let part = match shape {
            LayerShape::Matvec { cols, .. } => LayerShape::Matvec {
                rows: n,
                cols: *cols,
            },
            LayerShape::Conv(sh) => LayerShape::Conv(kernels::ConvShape { c_o: n, ..*sh }),
            LayerShape::Grouped(sh) => LayerShape::Grouped(*sh),
        };
        let w = &weights[start * per_weight..(start + n) * per_weight];
        let want = &want[start * per_output..(start + n) * per_output];
        let m = match LayerLayout::new(&part.with(method)?, params)? {
            LayerLayout::Matvec(pl) => measure_with(&pl, params, w, &xr, want, reps, on_the_fly)?,
            LayerLayout::Conv(pl) => {
                measure_with(pl.as_ref(), params, w, &xr, want, reps, on_the_fly)?
            }
            LayerLayout::Depthwise(pl) => {
                measure_with(pl.as_ref(), params, w, &xr, want, reps, on_the_fly)?
            }
            LayerLayout::Grouped(pl) => {
                measure_with(pl.as_ref(), params, w, &xr, want, reps, on_the_fly)?
            }
        };
        total.correct &= m.correct;
        total.server_ms += m.server_ms;
        total.client_ms += m.client_ms;
        total.online_ms += m.online_ms;
        total.offline_ms += m.offline_ms;
        total.predicted_server_ms += m.predicted_server_ms;
        total.bytes_up += m.bytes_up;
        total.bytes_down += m.bytes_down;
        total.perm += m.perm;
        total.dec_perm += m.dec_perm;
        total.hst_perm += m.hst_perm;
        total.sc_mult += m.sc_mult;
        total.add += m.add;
        start += n;
    }
    Ok(total)
}

/// A nonlinear layer run on a sample of its elements.
#[derive(Clone, Copy, Debug)]
struct Sample {
    offline_ms: f64,
    online_ms: f64,
    offline_bytes: u64,
    online_bytes: u64,
    /// Correlated OTs consumed (silent OT).
    cots: u64,
    elements: usize,
}

/// `spec` with `sample` elements, and random shares of its inputs for each party.
fn sample_shares(spec: &gc::NonlinSpec, sample: usize) -> (gc::NonlinSpec, Vec<u64>, Vec<u64>) {
    let mut s = *spec;
    s.count = sample;
    let len = sample * s.window().max(1);
    let mut rng = rand::rng();
    let mut shares = || -> Vec<u64> {
        (0..len)
            .map(|_| rand::Rng::random_range(&mut rng, 0..s.p))
            .collect()
    };
    let (c, v) = (shares(), shares());
    (s, c, v)
}

/// Runs a GC layer of `sample` elements for real in memory with random shares.
fn gc_sample(spec: &gc::NonlinSpec, garbler: gc::Garbler, sample: usize) -> Res<Sample> {
    let (s, c, v) = sample_shares(spec, sample);
    let (_, _, r) = gc::run_local(&s, garbler, &c, &v)?;
    Ok(Sample {
        offline_ms: r.offline_ms,
        online_ms: r.online_ms,
        offline_bytes: r.bytes_offline,
        online_bytes: r.bytes_online,
        cots: 0,
        elements: sample,
    })
}

/// Runs a silent-OT layer (faithful truncation) of `sample` elements in memory with
/// random shares in a fresh session. The offline figures are the steady state of a
/// long session: the layer's own offline work without the session's refills, plus its
/// COTs at the amortised silent-OT bytes and `ms_per_cot` each.
fn ot_sample(spec: &gc::NonlinSpec, sample: usize, ms_per_cot: f64) -> Res<Sample> {
    let (s, c, v) = sample_shares(spec, sample);
    let (_, _, r) = ot::run_local(&ot::OtSpec::faithful(s), &c, &v)?;
    let layer_offline = r.bytes_offline.saturating_sub(r.bytes_refill);
    Ok(Sample {
        offline_ms: (r.offline_ms - r.refill_ms).max(0.0) + r.cots as f64 * ms_per_cot,
        online_ms: r.online_ms,
        offline_bytes: layer_offline + (r.cots as f64 * r.bytes_per_cot) as u64,
        online_bytes: r.bytes_online,
        cots: r.cots,
        elements: sample,
    })
}

/// Wall time of silent-OT generation per COT, ms: both parties in this process set up
/// a session and refill each direction once.
fn silent_ms_per_cot() -> Res<f64> {
    let (mut cch, mut sch) = net::MemChannel::pair(
        net::DEFAULT_MAX_FRAME,
        std::time::Duration::from_secs(300),
        net::Link::NONE,
    );
    let per = ot::SilentParams::DEFAULT.usable();
    let refill = |ch: &mut net::MemChannel, role: ot::Role| -> ot::Result<f64> {
        let mut s = ot::OtSession::new(ch, role, ot::SilentParams::DEFAULT)?;
        s.reserve(ch, per + 1, per + 1)?;
        Ok(s.stats().refill_ms)
    };
    let (c, s) = std::thread::scope(|scope| {
        let h = scope.spawn(|| refill(&mut sch, ot::Role::Server));
        let c = refill(&mut cch, ot::Role::Client);
        (c, h.join())
    });
    let s = s.map_err(|_| "the silent-OT server thread panicked")?;
    Ok(c?.max(s?) / (2 * per) as f64)
}

/// GALA Table IX rows (GAZELLE → GALA: Perm, DecPerm, HstPerm, ScMult, Add).
const TABLE_IX: &[(&str, [u64; 5], [u64; 5])] = &[
    ("mlp", [70, 0, 0, 56, 70], [55, 0, 0, 56, 55]),
    (
        "resnet18-cifar",
        [180375, 483, 3467, 1399363, 1398778],
        [5921, 482, 3464, 1399363, 1398771],
    ),
    (
        "resnet50-cifar",
        [1464119, 2819, 3863, 2935408, 2931734],
        [30615, 2818, 3848, 2935408, 2931727],
    ),
];

/// Kernel-only counts in the papers' ideal model (n = 2048, cyclic, p = 12289): GAZELLE
/// (hybrid matvec, output-rotation conv) and GALA, summed over the linear layers.
fn table_ix(name: &str, prog: &nn::Program) -> Res<Option<TableIx>> {
    let Some((net, paper_gz, paper_ga)) = TABLE_IX.iter().find(|(n, _, _)| *n == name) else {
        return Ok(None);
    };
    const N: usize = 2048;
    const P: u64 = 12289;
    let slots = SlotInfo {
        n: N,
        p: P,
        layout: Layout::Cyclic,
    };
    let cells = |c: OpCounts| [c.perm, c.dec_perm, c.hst_perm, c.sc_mult, c.add];
    let mut gz = OpCounts::default();
    let mut ga = OpCounts::default();
    for step in &prog.steps {
        match protocol::layer_shape(step) {
            Some(LayerShape::Matvec { rows, cols }) => {
                for (m, acc) in [(Method::Hybrid, &mut gz), (Method::Gala, &mut ga)] {
                    let plan = MatvecLayout::with_key_budget(m, rows, cols, slots, None)?;
                    *acc = *acc + kernel_counts(&plan, N, P)?;
                }
            }
            Some(LayerShape::Conv(sh)) => {
                for (m, acc) in [
                    (ConvMethod::GazelleOut, &mut gz),
                    (ConvMethod::Gala, &mut ga),
                ] {
                    let plan = ConvLayout::with_key_budget(m, sh, slots, None)?;
                    *acc = *acc + kernel_counts(&plan, N, P)?;
                }
            }
            Some(LayerShape::Grouped(_)) | None => {}
        }
    }
    let note = if *net == "mlp" {
        "layers 128x784, 128x128, 10x128 at n = 2048. helina pads n_i = 784 to 1024, so the first \
         layer has 1024·128/2048 = 64 products where the table's 784 unpadded columns give 49; GALA's \
         Table II formulas with n_i = 1024 give exactly our cells (GAZELLE Perm + HstPerm = 85, \
         GALA Perm = Add = 70, ScMult 64 + 8 + 1 = 73). The table's GAZELLE Perm is Perm + HstPerm, \
         and its ScMult 56 is 58 by its own Table II with n_i = 784 (49 + 8 + 1)."
            .to_string()
    } else {
        "GALA does not publish its CIFAR-10 ResNet shapes, and its GAZELLE Perm is Perm + HstPerm. \
         Ours are the He et al. CIFAR-10 shapes (kuangliu/pytorch-cifar) in helina's layout: \
         channels packed per power-of-two block, strided convolutions lowered to space-to-depth + \
         stride 1 (no product for a dropped output). No cell can be expected to match; the \
         GAZELLE → GALA reduction in Perm (the paper's point) is what compares."
            .to_string()
    };
    Ok(Some(TableIx {
        net,
        paper_gazelle: *paper_gz,
        paper_gala: *paper_ga,
        ours_gazelle: cells(gz),
        ours_gala: cells(ga),
        note,
    }))
}

fn kernel_counts<L: LinearLayer>(plan: &L, n: usize, p: u64) -> Res<OpCounts> {
    let b = Count::ideal(n, p, plan.galois());
    let m = plan.encode_weights(&b, &vec![0; plan.weight_len()])?;
    let q = plan.query(&b, &vec![0; plan.input_len()])?;
    b.take();
    plan.compute(&b, &m, &q)?;
    Ok(b.take())
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

fn print(r: &Report) {
    println!(
        "bench network {} ({}; backend {}; {} thread(s); objective {}; costs {}; link {})",
        r.net, r.params, r.backend, r.threads, r.objective, r.costs, r.link
    );
    println!(
        "{:<4} {:<28} {:<12} {:<26} {:<12} {:>1} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>6} {:>7} {:>8} {:>8} {:>4} {:>8}",
        "step", "layer", "kind", "shape", "method", "", "ms", "server ms", "pred ms", "MB", "offl ms",
        "Perm", "Dec", "Hst", "ScMult", "Add", "keys", "elements"
    );
    for row in &r.rows {
        println!(
            "{:<4} {:<28} {:<12} {:<26} {:<12} {:>1} {:>10.1} {:>10.1} {:>10.1} {:>10.3} {:>10.1} {:>7} {:>6} {:>7} {:>8} {:>8} {:>4} {:>8}{}{}{}",
            row.step,
            truncate(&row.layer, 28),
            row.kind,
            truncate(&row.shape, 26),
            row.method,
            if row.pick { "*" } else { "" },
            row.ms,
            row.server_ms,
            row.predicted_server_ms,
            mb(row.bytes),
            row.offline_ms,
            row.perm,
            row.dec_perm,
            row.hst_perm,
            row.sc_mult,
            row.add,
            row.galois_keys,
            row.elements,
            if row.chunks > 1 {
                format!("  on the fly, {} chunks", row.chunks)
            } else if row.on_the_fly {
                "  on the fly".to_string()
            } else {
                String::new()
            },
            if !row.measured && r.backend == "bfv" && !(row.kind == "matvec" || row.kind == "conv") {
                if row.kind == "square" { "  predicted" } else { "  projected" }
            } else {
                ""
            },
            match row.correct {
                Some(false) => "  WRONG",
                _ => "",
            }
        );
    }
    println!("* = the planner's pick");
    if r.totals_by_method.len() > 1 {
        println!("linear layers by method:");
        for t in &r.totals_by_method {
            println!(
                "  {:<12} {:>12.1} ms {:>10.1} MB  Perm {:>9} DecPerm {:>7} HstPerm {:>8} ScMult {:>10} Add {:>10}{}",
                t.method,
                t.total_ms,
                mb(t.total_bytes),
                t.perm,
                t.dec_perm,
                t.hst_perm,
                t.sc_mult,
                t.add,
                if t.cannot_run > 0 {
                    format!("  (cannot run {} layer(s))", t.cannot_run)
                } else {
                    String::new()
                }
            );
        }
    }
    println!(
        "total (planner's picks): {:.1} ms, {:.1} MB online; linear {:.1} ms / {:.1} MB; nonlinear {:.1} ms / {:.1} MB",
        r.total_ms,
        mb(r.total_bytes),
        r.linear_ms,
        mb(r.linear_bytes),
        r.nonlinear_ms,
        mb(r.nonlinear_bytes)
    );
    println!(
        "nonlinear layers ({}): {:.1} MB online + {:.1} MB offline = {:.1} MB",
        r.nonlinear,
        mb(r.nonlinear_bytes),
        mb(r.nonlinear_offline_bytes),
        mb(r.nonlinear_bytes + r.nonlinear_offline_bytes)
    );
    println!(
        "offline {:.1} ms / {:.1} MB; Galois keys {:.1} MB (once per session); encoded weights {:.1} MB ({:.1} MB of them on the fly); ReLUs {}, MaxPool outputs {}, AND gates {}, COTs {}",
        r.offline_ms,
        mb(r.offline_bytes),
        mb(r.key_bytes),
        mb(r.encoded_bytes),
        mb(r.encoded_on_the_fly_bytes),
        r.relu_elements,
        r.maxpool_outputs,
        r.and_gates,
        r.cots
    );
    if let Some(e) = r.linear_prediction_error {
        println!(
            "planner prediction of the linear layers (server + client + transfer): {:.1} ms, {:+.0}% of measured",
            r.predicted_linear_ms,
            e * 100.0
        );
    }
    if let (Some(w), Some(m)) = (r.worst_prediction_error, r.median_prediction_error) {
        println!(
            "planner prediction vs measured server time: median error {:.0}%, worst {:.0}%",
            m * 100.0,
            w * 100.0
        );
    }
    if let (Some(w), Some(m)) = (
        r.worst_in_run_prediction_error,
        r.median_in_run_prediction_error,
    ) {
        println!(
            "  with per-op costs re-measured after each layer: median error {:.0}%, worst {:.0}%",
            m * 100.0,
            w * 100.0
        );
    }
    if let Some(w) = r.worst_pick_vs_best {
        println!(
            "planner's pick vs the best measured method: worst layer {:.1}% slower",
            w * 100.0
        );
    }
    if let Some(t) = &r.table_ix {
        println!("GALA Table IX ({}; Perm, DecPerm, HstPerm, ScMult, Add), ideal model n = 2048, kernel only:", t.net);
        let cmp = |paper: &[u64; 5], ours: &[u64; 5]| {
            paper
                .iter()
                .zip(ours)
                .map(|(p, o)| {
                    if p == o {
                        format!("{o} (=)")
                    } else {
                        format!("{o} (paper {p})")
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("  GAZELLE: {}", cmp(&t.paper_gazelle, &t.ours_gazelle));
        println!("  GALA:    {}", cmp(&t.paper_gala, &t.ours_gala));
        println!("  {}", t.note);
    }
    if let Some(rss) = r.peak_rss_bytes {
        println!("peak RSS {:.1} MB; wall {:.1} s", mb(rss), r.wall_s);
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n - 1).collect();
        format!("{t}…")
    }
}

/// Per-layer time (top) and bytes (bottom) by method, log scale, one line per method.
fn plot(path: &std::path::Path, r: &Report) -> Res<()> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1200, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(400);
    let mut methods: Vec<String> = r.rows.iter().map(|x| x.method.clone()).collect();
    methods.sort();
    methods.dedup();
    let steps: Vec<usize> = {
        let mut v: Vec<usize> = r.rows.iter().map(|x| x.step).collect();
        v.dedup();
        v
    };
    let xmax = steps.len().max(1) as f64;
    let pos = |s: usize| steps.iter().position(|x| *x == s).unwrap_or(0) as f64;
    let time: fn(&LayerRow) -> f64 = |x| x.ms;
    let bytes: fn(&LayerRow) -> f64 = |x| mb(x.bytes);
    for (area, title, f) in [
        (&top, "time per layer (ms)", time),
        (&bottom, "bytes per layer (MB)", bytes),
    ] {
        let vals: Vec<f64> = r.rows.iter().map(&f).filter(|v| *v > 0.0).collect();
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) * 0.5;
        let hi = vals.iter().copied().fold(0.0, f64::max).max(lo * 10.0) * 2.0;
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{} — {title}", r.net), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5..xmax - 0.5, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("layer (execution order)")
            .y_desc(title)
            .draw()?;
        for (k, m) in methods.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let pts: Vec<(f64, f64)> = r
                .rows
                .iter()
                .filter(|x| &x.method == m && f(x) > 0.0)
                .map(|x| (pos(x.step), f(x)))
                .collect();
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))?
                .label(m.clone())
                .legend(move |(x, y)| Circle::new((x, y), 4, color.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
