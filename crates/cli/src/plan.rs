//! `helina plan`: for every linear layer of a network, each applicable method costed
//! from its op counts on the count backend × per-op costs (measured here by `helina
//! bench ops --save`, else the reference figures of this machine kind) + bytes and the
//! layer's Galois keys over the link, under the noise and key budgets, and the pick by
//! the objective (time, bytes, balanced): what `infer`, the server and `bench network`
//! use. With `--mem-limit`, layers whose encoded weights no longer fit are encoded on
//! the fly and that encoding is part of their predicted time.

use clap::Args;
use he::Params;
use protocol::MethodChoice;
use serde::Serialize;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct PlanArgs {
    /// The model (ONNX).
    #[arg(long, conflicts_with = "net")]
    model: Option<String>,
    /// A built-in network (see `helina infer --help`).
    #[arg(long)]
    net: Option<String>,
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    link: crate::args::LinkArgs,
    #[command(flatten)]
    planner: crate::args::PlannerArgs,
}

#[derive(Serialize)]
struct CandidateRow {
    method: String,
    predicted_ms: Option<f64>,
    server_ms: Option<f64>,
    bytes_up: Option<u64>,
    bytes_down: Option<u64>,
    galois_keys: Option<usize>,
    encoded_mb: Option<f64>,
    rotations: Option<u64>,
    sc_mult: Option<u64>,
    why_not: Option<String>,
}

#[derive(Serialize)]
struct Row {
    layer: String,
    shape: String,
    pick: String,
    on_the_fly: bool,
    candidates: Vec<CandidateRow>,
}

pub fn run(a: &PlanArgs) -> Res<()> {
    let (_, network) = crate::args::network(&a.model, &a.net)?;
    let params = Params::preset(&a.params)?;
    // Shapes only: any scale will do.
    let prog = nn::lower(&network, 8, params.p())?;
    let link = a.link.link()?;
    let planning = a.planner.planning(link, MethodChoice::Auto)?;
    let (planner, source) = planning.planner(&params)?;
    let plan = planning.plan(&planner, prog, &params, None)?;
    let layers = &plan.layers;
    let rows: Vec<Row> = layers
        .iter()
        .map(|l| Row {
            layer: l.name.clone(),
            shape: format!("{:?}", l.shape),
            pick: l.pick.method().name().to_string(),
            on_the_fly: l.on_the_fly,
            candidates: l
                .candidates
                .iter()
                .map(|c| match &c.estimate {
                    Ok(e) => CandidateRow {
                        method: c.method.name().into(),
                        predicted_ms: Some(c.predicted_ms),
                        server_ms: Some(e.server_ms),
                        bytes_up: Some(e.bytes_up),
                        bytes_down: Some(e.bytes_down),
                        galois_keys: Some(e.galois_keys),
                        encoded_mb: Some(e.encoded_bytes as f64 / 1e6),
                        rotations: Some(e.counts.rotations()),
                        sc_mult: Some(e.counts.sc_mult),
                        why_not: None,
                    },
                    Err(err) => CandidateRow {
                        method: c.method.name().into(),
                        predicted_ms: None,
                        server_ms: None,
                        bytes_up: None,
                        bytes_down: None,
                        galois_keys: None,
                        encoded_mb: None,
                        rotations: None,
                        sc_mult: None,
                        why_not: Some(err.to_string()),
                    },
                })
                .collect(),
        })
        .collect();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "helina plan ({}; link {:?}; {} thread(s); objective {:?}; per-op costs: {source})",
        params.name(),
        link,
        planner.threads,
        planner.objective
    );
    println!("predicted = server compute (op counts x per-op costs, / threads the layer can use) + encoding when on the fly + bytes / bandwidth + one RTT + the layer's Galois keys over the link");
    let mut total_ms = 0.0;
    let mut held = 0.0;
    for (r, l) in rows.iter().zip(layers) {
        println!(
            "  {} {} → {}{}",
            r.layer,
            r.shape,
            r.pick,
            if r.on_the_fly {
                "  (weights encoded on the fly: beyond --mem-limit)"
            } else {
                ""
            }
        );
        if let Some(c) = l.picked() {
            total_ms += c.predicted_ms;
            if !l.on_the_fly {
                held += c.estimate.as_ref().map_or(0.0, |e| e.encoded_bytes as f64);
            }
        }
        for c in &r.candidates {
            match (&c.predicted_ms, &c.why_not) {
                (Some(ms), _) => println!(
                    "      {:<12} {:>9.1} ms  (server {:>8.1} ms, up {:>8} B, down {:>8} B, {} keys, {:.1} MB encoded, {} rotations, {} ScMult){}",
                    c.method,
                    ms,
                    c.server_ms.unwrap_or(0.0),
                    c.bytes_up.unwrap_or(0),
                    c.bytes_down.unwrap_or(0),
                    c.galois_keys.unwrap_or(0),
                    c.encoded_mb.unwrap_or(0.0),
                    c.rotations.unwrap_or(0),
                    c.sc_mult.unwrap_or(0),
                    if c.method == r.pick { "  ← pick" } else { "" }
                ),
                (None, Some(w)) => println!("      {:<12} cannot run: {w}", c.method),
                _ => {}
            }
        }
    }
    println!(
        "total predicted {:.1} ms over {} linear layers; encoded weights held in memory: {:.1} MB",
        total_ms,
        rows.len(),
        held / 1e6
    );
    Ok(())
}
