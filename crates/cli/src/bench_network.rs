//! `helina bench network`: every layer of a network, one row each (measured by
//! [`benchmarks::network`]; printed, drawn or written as JSON here).
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
//!   from that sample (marked "projected"). For silent OT the sample is the median of
//!   three runs, each after a warm-up layer, and the layer's COTs are priced at the
//!   amortised silent-OT bytes and the generation time per COT measured once (three
//!   refills of each direction after a warm-up one); the session's one-time setup is not
//!   counted. Square is predicted from its op counts; SumPool and Add are local (free).
//! - A linear layer's offline time per inference is its flooding encryptions of zero
//!   (predicted, spread over the threads); encoding its held weights is the server's
//!   start-up work, reported apart (`weight_encoding_ms`).
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

use std::path::PathBuf;

use benchmarks::network::{Backend, LayerRow, NetworkOptions, Report};
use clap::Args;

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
    /// Run the program `helina infer` would serve: its fixed point chosen on
    /// --calibration (a built-in network: 32 seeded inputs, as `infer --net`), with its
    /// own p and truncations (instead of an 8-bit lowering on --params): the nonlinear
    /// layers then cost what a real inference pays.
    #[arg(long)]
    as_served: bool,
    /// Calibration inputs for --as-served (.npy, batch first).
    #[arg(long, requires = "as_served")]
    calibration: Option<String>,
    /// Only the first N linear layers (and the nonlinear layers before the next one).
    #[arg(long)]
    layers: Option<usize>,
    /// Queries per linear layer (median by time).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Elements of a nonlinear layer run for real; larger layers are projected from
    /// this many.
    #[arg(long, alias = "gc-sample", default_value_t = 32768)]
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

pub fn run(a: &NetworkArgs) -> Res<()> {
    let backend = match a.backend.as_str() {
        "bfv" => Backend::Bfv,
        "count" => Backend::Count,
        other => return Err(format!("--backend {other}: give bfv or count").into()),
    };
    let (name, network) = crate::args::network(&a.model, &a.net)?;
    let link = a.link.link()?;
    let planning = a.planner.planning(link, protocol::MethodChoice::Auto)?;
    let program = if a.as_served {
        let sample = network.input_shape().to_vec();
        let calibration = match &a.calibration {
            Some(path) => helina::array::read_batch(path, &sample)?,
            None if a.net.is_some() => crate::args::builtin_calibration(sample.iter().product()).0,
            None => return Err("--as-served needs --calibration cal.npy with --model".into()),
        };
        let fixed = helina::FixedPoint::calibrated(calibration);
        Some(
            helina::Model::new(network.clone(), &fixed, &planning)?
                .plan
                .program,
        )
    } else {
        None
    };
    let report = benchmarks::network::run(&NetworkOptions {
        name,
        network,
        params: a.params.clone(),
        program,
        backend,
        methods: a.method.clone(),
        linear_only: a.linear_only,
        layers: a.layers,
        reps: a.reps,
        nonlinear_sample: a.nonlinear_sample,
        nonlinear: a.nonlinear.protocol(),
        planning,
        mem_limit: a.planner.mem_limit_bytes()?,
    })?;
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
            if row.on_the_fly {
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
        "offline {:.1} ms / {:.1} MB per inference; Galois keys {:.1} MB (once per session); encoded weights {:.1} MB ({:.1} MB of them on the fly; the held ones encoded in {:.1} ms at the server's start); ReLUs {}, MaxPool outputs {}, AND gates {}, COTs {}",
        r.offline_ms,
        mb(r.offline_bytes),
        mb(r.key_bytes),
        mb(r.encoded_bytes),
        mb(r.encoded_on_the_fly_bytes),
        r.weight_encoding_ms,
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
