//! `helina demo`: private inference of a small trained network over loopback TCP — the
//! digit classifier `fixtures/digits-cnn-bn.onnx` (conv-BN-ReLU ×2, MaxPool, FC on
//! 8x8 images from scikit-learn's digits, trained and exported by
//! `fixtures/make_fixtures.py`, embedded in the binary). The server plans the fixed
//! point on the committed calibration inputs; the client classifies held-out images
//! and prints per image the prediction, the true label, the private logits beside the
//! float model's, time and bytes.
//!
//! `helina demo --layers`: a server and a client over loopback TCP, each with only its
//! own keys, for the sample matvec layer (10 x 128, the last layer of the MNIST MLP)
//! and the sample convolution (4 x 16 x 16 → 4, 3x3 same), with every method (or
//! `--method`). Each run is a full session of the protocol (handshake, keys, the
//! server's offline work, query, response); the server then reveals its share (demo
//! only) so the client can reconstruct the output and compare it with the plaintext
//! reference.

use std::net::TcpListener;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use he::Params;
use net::{Channel, TcpChannel, DEFAULT_MAX_FRAME};
use protocol::{LayerMethod, LayerRequest, LayerShape, ServeOptions, ServedLayer, ServedLayers};
use serde::Serialize;

use crate::samples;

#[derive(Args)]
pub struct DemoArgs {
    /// The per-method demo of two sample linear layers instead of the network.
    #[arg(long)]
    layers: bool,
    /// Images to classify (network demo; at most 32).
    #[arg(long, default_value_t = 8)]
    limit: usize,
    /// Parameter preset (--layers).
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Methods, comma-separated (matvec and conv names), or `all` (--layers).
    #[arg(long, default_value = "all")]
    method: String,
    /// Layers: `matvec`, `conv` or `both` (--layers).
    #[arg(long, default_value = "both")]
    layer: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    link: crate::twoparty::LinkArgs,
}

#[derive(Serialize)]
struct Report {
    layer: String,
    method: String,
    params: String,
    correct: bool,
    outputs: usize,
    client_ms: f64,
    server_offline_ms: f64,
    server_online_ms: f64,
    setup_bytes: u64,
    online_bytes_up: u64,
    online_bytes_down: u64,
    rounds: u64,
    noise_budget_left: Option<u32>,
    counts: he::OpCounts,
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn name(shape: &LayerShape) -> String {
    match shape {
        LayerShape::Matvec { rows, cols } => format!("matvec {rows}x{cols}"),
        LayerShape::Conv(s) => format!(
            "conv {}x{}x{}->{} {}x{}",
            s.c_i, s.h, s.w, s.c_o, s.k_h, s.k_w
        ),
        LayerShape::Grouped(s) => format!(
            "grouped conv {}x{}x{}->{} {}x{} g{}",
            s.c_i, s.h, s.w, s.c_o, s.k_h, s.k_w, s.groups
        ),
    }
}

/// The demo network and its data (see `fixtures/make_fixtures.py`).
const MODEL: &[u8] = include_bytes!("../../../fixtures/digits-cnn-bn.onnx");
const CALIBRATION: &[u8] = include_bytes!("../../../fixtures/digits-cnn-bn-calibration.npy");
const TEST: &[u8] = include_bytes!("../../../fixtures/digits-cnn-bn-test.npy");
const LABELS: &[u8] = include_bytes!("../../../fixtures/digits-cnn-bn-test-labels.npy");

fn npy_f32(bytes: &[u8], len: usize) -> Res<Vec<Vec<f32>>> {
    let v = npyz::NpyFile::new(bytes)?.into_vec::<f32>()?;
    Ok(v.chunks(len).map(<[f32]>::to_vec).collect())
}

#[derive(Serialize)]
struct Image {
    label: i64,
    prediction: usize,
    float_prediction: usize,
    logits: Vec<f32>,
    float_logits: Vec<f32>,
    max_abs_err: f64,
    ms: f64,
    bytes: u64,
    online_ms: f64,
    online_bytes: u64,
}

fn network(a: &DemoArgs) -> Res<()> {
    let net = nn::import_bytes(MODEL)?;
    let len: usize = net.input_shape().iter().product();
    let calibration = npy_f32(CALIBRATION, len)?;
    let mut images = npy_f32(TEST, len)?;
    let labels = npyz::NpyFile::new(LABELS)?.into_vec::<i64>()?;
    images.truncate(a.limit.clamp(1, images.len()));
    let model = helina::Model::new(
        net,
        &helina::FixedPoint::calibrated(calibration),
        &helina::Planning::default(),
    )?;
    let (prog, params) = (model.program(), model.params());
    if !a.json {
        println!(
            "helina demo: private inference of a digit classifier (fixtures/digits-cnn-bn.onnx: conv-BN-ReLU x2, MaxPool, FC; 8x8 images from scikit-learn's digits)"
        );
        println!(
            "  a server holding the weights and a client holding the images talk over loopback TCP; {} (p = {}), {} fractional bits; {}",
            params.name(),
            prog.p,
            prog.frac_bits,
            crate::args::describe(prog)
        );
    }
    let t = Instant::now();
    let opts = helina::LocalOptions {
        server: helina::ServerOptions {
            serve: helina::ServeOptions {
                link: a.link.link()?,
                ..helina::ServerOptions::default().serve
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let run = helina::infer_local(&model, &images, &opts, &mut |_| {})?;
    let wall = t.elapsed().as_secs_f64() * 1e3;
    if !run.all_match_fixed_reference() {
        return Err("a private result differs from the fixed-point reference".into());
    }
    let inf = &run.inference;
    let rows: Vec<Image> = inf
        .outputs
        .iter()
        .zip(&run.checks)
        .enumerate()
        .map(|(i, (o, c))| Image {
            label: labels.get(i).copied().unwrap_or(-1),
            prediction: o.argmax,
            float_prediction: c.float_argmax,
            logits: o.logits.clone(),
            float_logits: c.float_logits.clone(),
            max_abs_err: c.float_max_abs_err,
            ms: o.total_ms,
            bytes: o.total_bytes,
            online_ms: o.online_ms,
            online_bytes: o.online_bytes,
        })
        .collect();
    let correct = rows
        .iter()
        .filter(|r| r.prediction as i64 == r.label)
        .count();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "model": "fixtures/digits-cnn-bn.onnx",
                "params": params.name(),
                "frac_bits": prog.frac_bits,
                "accuracy": prog.accuracy,
                "input_range": prog.input_range,
                "setup_ms": inf.setup_ms,
                "setup_bytes": inf.setup_bytes,
                "images": rows,
                "correct": correct,
                "wall_ms": wall,
                "peak_rss_bytes": run.peak_rss_bytes,
            }))?
        );
        return Ok(());
    }
    println!(
        "  setup {:.0} ms, {:.2} MB (keys, silent-OT setup); every result checked bit for bit against the fixed-point reference",
        inf.setup_ms,
        inf.setup_bytes as f64 / 1e6
    );
    for (i, r) in rows.iter().enumerate() {
        let f = |v: &[f32]| {
            v.iter()
                .map(|x| format!("{x:6.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "  image {i}: predicted {} (true label {}){}; {:.0} ms, {:.2} MB ({:.0} ms, {:.2} MB online)",
            r.prediction,
            r.label,
            if r.prediction as i64 == r.label { "" } else { "  <- wrong" },
            r.ms,
            r.bytes as f64 / 1e6,
            r.online_ms,
            r.online_bytes as f64 / 1e6
        );
        println!("    private logits {}", f(&r.logits));
        println!(
            "    float logits   {}   (max |Δ| {:.1e}; float predicts {})",
            f(&r.float_logits),
            r.max_abs_err,
            r.float_prediction
        );
    }
    println!(
        "  {correct} of {} correct; {:.1} s in all (`helina demo --layers` runs the per-method layer demo)",
        rows.len(),
        wall / 1e3
    );
    Ok(())
}

pub fn run(a: &DemoArgs) -> Res<()> {
    if !a.layers {
        return network(a);
    }
    let params = Params::preset(&a.params)?;
    let link = a.link.link()?;
    let shapes = match a.layer.as_str() {
        "both" => vec![samples::MATVEC, samples::CONV],
        l => vec![samples::by_name(l).ok_or(format!("--layer {l}: matvec, conv or both"))?],
    };
    let mut runs: Vec<(LayerShape, LayerMethod)> = Vec::new();
    for s in &shapes {
        for m in s.methods() {
            if a.method == "all" || a.method.split(',').any(|w| w.trim() == m.name()) {
                runs.push((*s, m));
            }
        }
    }
    if runs.is_empty() {
        return Err(format!("--method {}: no such method for these layers", a.method).into());
    }
    let model = ServedLayers::public_demo(
        shapes
            .iter()
            .map(|&shape| ServedLayer {
                shape,
                method: None,
                weights: samples::weights(&shape),
            })
            .collect(),
    )?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    let (tx, rx) = mpsc::channel();
    let opts = ServeOptions {
        timeout: Duration::from_secs(a.link.timeout),
        link,
        max_concurrent: 1,
        stop_after: Some(runs.len()),
        ..ServeOptions::new(DEFAULT_MAX_FRAME)
    };
    let server_params = params.clone();
    let server = thread::spawn(move || {
        protocol::serve_tcp(listener, &server_params, Arc::new(model), &opts, move |r| {
            let _ = tx.send(r);
        })
    });
    if !a.json {
        println!(
            "helina demo: server and client over loopback TCP ({}, n = {}), each run a full private session; the server reveals its share so the result can be checked (demo only)",
            params.name(),
            params.n()
        );
    }
    let mut reports = Vec::new();
    for (shape, method) in &runs {
        let x = samples::input(shape);
        let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
        let t = Instant::now();
        let mut ch = TcpChannel::connect(
            &addr,
            DEFAULT_MAX_FRAME,
            Duration::from_secs(a.link.timeout),
            link,
        )?;
        let pb = crate::twoparty::spinner();
        let out = protocol::query(
            &mut ch,
            &params,
            LayerRequest {
                shape: *shape,
                method: Some(*method),
            },
            &[xr],
            true,
            &mut |ph| pb.set_message(format!("{} {}: {ph}", name(shape), method.name())),
        );
        pb.finish_and_clear();
        let out = out?;
        let client_ms = t.elapsed().as_secs_f64() * 1e3;
        let srv = rx.recv_timeout(Duration::from_secs(60))?;
        let srv = srv.result?;
        let want = kernels::reference::reduce(
            &samples::reference(shape, &samples::weights(shape), &x),
            params.p(),
        );
        let got = out.revealed.as_ref().and_then(|v| v.first()).cloned();
        let c = ch.counters();
        let r = Report {
            layer: name(shape),
            method: method.name().to_string(),
            params: params.name().to_string(),
            correct: got.as_ref() == Some(&want),
            outputs: want.len(),
            client_ms,
            server_offline_ms: srv.times.offline_ms,
            server_online_ms: srv.times.online_ms,
            setup_bytes: out.traffic.setup.bytes_sent + out.traffic.setup.bytes_received,
            online_bytes_up: out.traffic.online.bytes_sent,
            online_bytes_down: out.traffic.online.bytes_received,
            rounds: c.flights,
            noise_budget_left: out.noise_budget,
            counts: srv.counts.first().copied().unwrap_or_default(),
        };
        if !a.json {
            println!(
                "  {:<22} {:<11} correct: {:<3}  session {:7.1} ms (server offline {:6.1}, online {:6.1})  keys {:>9} B  query {:>7} B  response {:>7} B  rounds {}  Perm {:>3} ScMult {:>4}  budget left {:?}",
                r.layer,
                r.method,
                if r.correct { "yes" } else { "NO" },
                r.client_ms,
                r.server_offline_ms,
                r.server_online_ms,
                r.setup_bytes,
                r.online_bytes_up,
                r.online_bytes_down,
                r.rounds,
                r.counts.perm + r.counts.hst_perm,
                r.counts.sc_mult,
                r.noise_budget_left,
            );
        }
        reports.push(r);
    }
    server.join().map_err(|_| "the server thread panicked")??;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else if let Some(r) = reports.first() {
        let show: Vec<i64> = samples::reference(
            &samples::MATVEC,
            &samples::weights(&samples::MATVEC),
            &samples::input(&samples::MATVEC),
        )
        .iter()
        .map(|&v| v as i64)
        .collect();
        if r.layer.starts_with("matvec") {
            println!("  W·x (plaintext reference, the value every method reconstructed): {show:?}");
        }
    }
    if reports.iter().any(|r| !r.correct) {
        return Err("a reconstructed result differs from the plaintext reference".into());
    }
    Ok(())
}
