//! `helina plan`: for every linear layer of a network, each applicable method costed
//! from its op counts on the count backend × per-op costs (`kernels::CostModel`, the
//! reference figures of this machine kind) + bytes over the link, and the pick (the
//! lowest predicted time), which is what `infer --method auto` and the server use.

use clap::Args;
use he::Params;
use protocol::LayerShape;
use serde::Serialize;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct PlanArgs {
    /// The model (ONNX).
    #[arg(long, conflicts_with = "net")]
    model: Option<String>,
    /// A built-in network: mlp, mnist-a, mnist-d, tiny-resnet.
    #[arg(long)]
    net: Option<String>,
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    link: crate::twoparty::LinkArgs,
}

#[derive(Serialize)]
struct Candidate {
    method: String,
    predicted_ms: Option<f64>,
    server_ms: Option<f64>,
    bytes_up: Option<u64>,
    bytes_down: Option<u64>,
    galois_keys: Option<usize>,
    rotations: Option<u64>,
    sc_mult: Option<u64>,
    why_not: Option<String>,
}

#[derive(Serialize)]
struct Row {
    layer: String,
    shape: String,
    pick: String,
    candidates: Vec<Candidate>,
}

pub fn run(a: &PlanArgs) -> Res<()> {
    let bytes = match (&a.model, &a.net) {
        (Some(p), None) => std::fs::read(p).map_err(|e| format!("{p}: {e}"))?,
        (None, Some(n)) => nn::zoo::onnx(n, 1).ok_or(format!("unknown network `{n}`"))?,
        _ => return Err("give --model m.onnx or --net NAME".into()),
    };
    let network = nn::import_bytes(&bytes)?;
    let params = Params::preset(&a.params)?;
    // Shapes only: any scale will do.
    let prog = nn::lower(&network, 8, params.p())?;
    let link = a.link.link()?;
    let mut rows = Vec::new();
    for step in &prog.steps {
        let shape = match step {
            nn::Step::Linear { rows, cols, .. } => LayerShape::Matvec {
                rows: *rows,
                cols: *cols,
            },
            nn::Step::Conv { shape, .. } => LayerShape::Conv(*shape),
            _ => continue,
        };
        let (pick, cands) = protocol::choose(&shape, &params, &link)?;
        rows.push(Row {
            layer: step.name().to_string(),
            shape: format!("{shape:?}"),
            pick: pick.method().name().to_string(),
            candidates: cands
                .iter()
                .map(|c| match &c.estimate {
                    Ok(e) => Candidate {
                        method: c.method.name().into(),
                        predicted_ms: Some(c.predicted_ms),
                        server_ms: Some(e.server_ms),
                        bytes_up: Some(e.bytes_up),
                        bytes_down: Some(e.bytes_down),
                        galois_keys: Some(e.galois_keys),
                        rotations: Some(e.counts.rotations()),
                        sc_mult: Some(e.counts.sc_mult),
                        why_not: None,
                    },
                    Err(err) => Candidate {
                        method: c.method.name().into(),
                        predicted_ms: None,
                        server_ms: None,
                        bytes_up: None,
                        bytes_down: None,
                        galois_keys: None,
                        rotations: None,
                        sc_mult: None,
                        why_not: Some(err.to_string()),
                    },
                })
                .collect(),
        });
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "helina plan ({}; link {:?}): predicted = server compute (op counts x reference per-op costs) + bytes / bandwidth + one RTT",
        params.name(),
        a.link.link()?
    );
    for r in &rows {
        println!("  {} {} → {}", r.layer, r.shape, r.pick);
        for c in &r.candidates {
            match (&c.predicted_ms, &c.why_not) {
                (Some(ms), _) => println!(
                    "      {:<12} {:>9.1} ms  (server {:>8.1} ms, up {:>8} B, down {:>8} B, {} keys, {} rotations, {} ScMult){}",
                    c.method,
                    ms,
                    c.server_ms.unwrap_or(0.0),
                    c.bytes_up.unwrap_or(0),
                    c.bytes_down.unwrap_or(0),
                    c.galois_keys.unwrap_or(0),
                    c.rotations.unwrap_or(0),
                    c.sc_mult.unwrap_or(0),
                    if c.method == r.pick { "  ← pick" } else { "" }
                ),
                (None, Some(w)) => println!("      {:<12} cannot run: {w}", c.method),
                _ => {}
            }
        }
    }
    Ok(())
}
