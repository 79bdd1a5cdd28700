//! `helina server` and `helina client`: one linear layer between two processes over TCP.
//!
//! The layer's architecture is public: the client states it with `--layer` (the demo's
//! sample layer by default) and the server refuses a plan that differs from its own.
//! Weights: `--model m.safetensors` holds `layer0.weight` as an int32/int64 tensor
//! ([rows, cols] for a matrix, [c_o, c_i, k_h, k_w] for a convolution; a convolution
//! also needs the metadata entry `layer0.input` = "CxHxW", and optionally
//! `layer0.stride` and `layer0.padding` = same|valid). Without `--model` the server
//! serves the demo's sample layer, whose weights come from a public seed so that a
//! `--reveal` client can check the result: demo only.
//! `--reveal` makes the server send its share (insecure, for demonstrations).

use std::collections::HashMap;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use clap::Args;
use he::Params;
use kernels::{ConvMethod, ConvShape, Method, Padding};
use net::{Channel, Link, TcpChannel, DEFAULT_MAX_FRAME};
use protocol::LayerSpec;
use rand::{Rng, SeedableRng};
use serde::Serialize;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The public seed of the sample layer's weights and input (demo only).
const SAMPLE_SEED: u64 = 0x6865_6c69_6e61;

#[derive(Args)]
pub struct LinkArgs {
    /// Link emulation preset: none, gala-lan (1 Gbit/s), gala-wan (200 Mbit/s, 13 ms), heliks (800 Mbit/s).
    #[arg(long, default_value = "none")]
    link: String,
    /// Custom bandwidth (e.g. 100mbit, 50MB); needs --rtt.
    #[arg(long)]
    bandwidth: Option<String>,
    /// Custom round-trip time (e.g. 13ms).
    #[arg(long)]
    rtt: Option<String>,
    /// Read timeout, seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

impl LinkArgs {
    fn link(&self) -> Res<Link> {
        Ok(match (&self.bandwidth, &self.rtt) {
            (Some(b), Some(r)) => Link::custom(b, r)?,
            (None, None) => Link::preset(&self.link)?,
            _ => return Err("--bandwidth and --rtt go together".into()),
        })
    }
}

#[derive(Args)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7000")]
    listen: String,
    /// Weights (safetensors, `layer0.weight`); without it, the demo's sample layer.
    #[arg(long)]
    model: Option<String>,
    /// Method for the layer.
    #[arg(long, default_value = "gala")]
    method: String,
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Stop after this many sessions (default: serve forever).
    #[arg(long)]
    sessions: Option<usize>,
    #[command(flatten)]
    link: LinkArgs,
}

#[derive(Args)]
pub struct ClientArgs {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1:7000")]
    connect: String,
    /// Input (.npy of integers, or floats rounded to integers); default: the sample input.
    #[arg(long)]
    input: Option<String>,
    /// The layer: `matvec:ROWSxCOLS` or `conv:CxHxW:C_OxK_HxK_W[:stride[:same|valid]]`;
    /// default: the demo's sample layer.
    #[arg(long)]
    layer: Option<String>,
    /// Method for the layer (must match the server's).
    #[arg(long, default_value = "gala")]
    method: String,
    /// Parameter preset (must match the server's).
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Ask the server for its share and print the reconstructed result (demo only,
    /// insecure).
    #[arg(long)]
    reveal: bool,
    /// Print a JSON summary.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    link: LinkArgs,
}

fn sample_layer(method: &str) -> Res<LayerSpec> {
    Ok(LayerSpec::Matvec {
        method: Method::parse(method).ok_or(format!("unknown matvec method `{method}`"))?,
        rows: 10,
        cols: 128,
    })
}

fn dims(s: &str) -> Res<Vec<usize>> {
    s.split('x')
        .map(|t| {
            t.parse::<usize>()
                .map_err(|_| format!("bad dimensions `{s}`").into())
        })
        .collect()
}

/// Parses `matvec:RxC` or `conv:CxHxW:OxKxK[:stride[:padding]]`.
pub fn parse_layer(s: &str, method: &str) -> Res<LayerSpec> {
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        ["matvec", d] => match dims(d)?.as_slice() {
            [rows, cols] => Ok(LayerSpec::Matvec {
                method: Method::parse(method).ok_or(format!("unknown matvec method `{method}`"))?,
                rows: *rows,
                cols: *cols,
            }),
            _ => Err(format!("matvec layer `{s}`: expected matvec:ROWSxCOLS").into()),
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
            Ok(LayerSpec::Conv {
                method: ConvMethod::parse(method)
                    .ok_or(format!("unknown conv method `{method}`"))?,
                shape: ConvShape {
                    c_i,
                    h,
                    w,
                    c_o,
                    k_h,
                    k_w,
                    stride,
                    padding,
                },
            })
        }
        _ => Err(format!("layer `{s}`: expected matvec:… or conv:…").into()),
    }
}

fn weight_len(l: &LayerSpec) -> usize {
    match l {
        LayerSpec::Matvec { rows, cols, .. } => rows * cols,
        LayerSpec::Conv { shape: s, .. } => s.c_o * s.c_i * s.k_h * s.k_w,
    }
}

fn input_len(l: &LayerSpec) -> usize {
    match l {
        LayerSpec::Matvec { cols, .. } => *cols,
        LayerSpec::Conv { shape: s, .. } => s.c_i * s.h * s.w,
    }
}

fn sample_values(n: usize, salt: u64) -> Vec<i64> {
    let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(SAMPLE_SEED ^ salt);
    (0..n).map(|_| r.random_range(-64..=64)).collect()
}

/// Loads `layer0.weight` from a safetensors file, checking dtype and shape.
fn load_model(path: &str, method: &str) -> Res<(LayerSpec, Vec<i64>)> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let (_, meta) =
        safetensors::SafeTensors::read_metadata(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let meta: HashMap<String, String> = meta.metadata().clone().unwrap_or_default();
    let t = st
        .tensor("layer0.weight")
        .map_err(|_| format!("{path}: no tensor `layer0.weight`"))?;
    let data = t.data();
    let w: Vec<i64> = match t.dtype() {
        safetensors::Dtype::I64 => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
        safetensors::Dtype::I32 => data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as i64)
            .collect(),
        d => return Err(format!("{path}: tensor `layer0.weight` has dtype {d:?}; expected I32 or I64 (quantised weights)").into()),
    };
    let layer = match t.shape() {
        [rows, cols] => parse_layer(&format!("matvec:{rows}x{cols}"), method)?,
        [c_o, c_i, k_h, k_w] => {
            let input = meta.get("layer0.input").ok_or(format!(
                "{path}: a 4-D `layer0.weight` needs metadata `layer0.input` = CxHxW"
            ))?;
            let stride = meta.get("layer0.stride").map(String::as_str).unwrap_or("1");
            let pad = meta
                .get("layer0.padding")
                .map(String::as_str)
                .unwrap_or("same");
            let l = parse_layer(
                &format!("conv:{input}:{c_o}x{k_h}x{k_w}:{stride}:{pad}"),
                method,
            )?;
            if !input.starts_with(&format!("{c_i}x")) {
                return Err(
                    format!("{path}: `layer0.input` {input} does not have {c_i} channels").into(),
                );
            }
            l
        }
        s => {
            return Err(format!(
                "{path}: tensor `layer0.weight` has shape {s:?}; expected 2-D or 4-D"
            )
            .into())
        }
    };
    if w.len() != weight_len(&layer) {
        return Err(format!(
            "{path}: `layer0.weight` holds {} values, its shape needs {}",
            w.len(),
            weight_len(&layer)
        )
        .into());
    }
    Ok((layer, w))
}

pub fn server(a: &ServerArgs) -> Res<()> {
    let params = Params::preset(&a.params)?;
    let (layer, w) = match &a.model {
        Some(path) => load_model(path, &a.method)?,
        None => {
            let l = sample_layer(&a.method)?;
            let w = sample_values(weight_len(&l), 1);
            (l, w)
        }
    };
    let link = a.link.link()?;
    let listener = TcpListener::bind(&a.listen)?;
    eprintln!(
        "helina server: listening on {} ({:?}, {})",
        a.listen,
        layer,
        params.name()
    );
    let mut served = 0usize;
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                eprintln!("helina server: accept failed: {e}");
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let t = Instant::now();
        match TcpChannel::new(
            stream,
            DEFAULT_MAX_FRAME,
            Duration::from_secs(a.link.timeout),
            link,
        )
        .map_err(protocol::ProtocolError::from)
        .and_then(|mut ch| {
            let r = protocol::serve(&mut ch, &params, &[(layer.clone(), w.clone())]);
            r.map(|o| (o, ch.counters()))
        }) {
            Ok((o, c)) => eprintln!(
                "helina server: {peer}: served in {:.1} ms, {} B in, {} B out{}",
                t.elapsed().as_secs_f64() * 1e3,
                c.bytes_received,
                c.bytes_sent,
                if o.revealed {
                    " (share revealed on request)"
                } else {
                    ""
                }
            ),
            Err(e) => eprintln!("helina server: {peer}: session failed: {e}"),
        }
        served += 1;
        if a.sessions.is_some_and(|n| served >= n) {
            break;
        }
    }
    Ok(())
}

fn read_npy(path: &str) -> Res<Vec<i64>> {
    let read = || -> Res<npyz::NpyFile<std::io::BufReader<std::fs::File>>> {
        Ok(npyz::NpyFile::new(std::io::BufReader::new(
            std::fs::File::open(path)?,
        ))?)
    };
    if let Ok(v) = read()?.into_vec::<i64>() {
        return Ok(v);
    }
    if let Ok(v) = read()?.into_vec::<i32>() {
        return Ok(v.into_iter().map(i64::from).collect());
    }
    if let Ok(v) = read()?.into_vec::<f64>() {
        return Ok(v.into_iter().map(|f| f.round() as i64).collect());
    }
    if let Ok(v) = read()?.into_vec::<f32>() {
        return Ok(v.into_iter().map(|f| f.round() as i64).collect());
    }
    Err(format!("{path}: expected an .npy of int32, int64, float32 or float64").into())
}

#[derive(Serialize)]
struct ClientReport {
    layer: String,
    params: String,
    outputs: usize,
    share_head: Vec<u64>,
    revealed: Option<Vec<i64>>,
    matches_reference: Option<bool>,
    total_ms: f64,
    bytes_sent: u64,
    bytes_received: u64,
    frames_sent: u64,
    frames_received: u64,
    flights_sent: u64,
    setup_bytes_sent: u64,
    setup_bytes_received: u64,
    online_bytes_sent: u64,
    online_bytes_received: u64,
    online_flights_sent: u64,
}

pub fn client(a: &ClientArgs) -> Res<()> {
    let params = Params::preset(&a.params)?;
    let layer = match &a.layer {
        Some(s) => parse_layer(s, &a.method)?,
        None => sample_layer(&a.method)?,
    };
    let x = match &a.input {
        Some(p) => read_npy(p)?,
        None => sample_values(input_len(&layer), 2),
    };
    if x.len() != input_len(&layer) {
        return Err(format!(
            "input has {} values, the layer takes {}",
            x.len(),
            input_len(&layer)
        )
        .into());
    }
    let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
    let t = Instant::now();
    let mut ch = TcpChannel::connect(
        &a.connect,
        DEFAULT_MAX_FRAME,
        Duration::from_secs(a.link.timeout),
        a.link.link()?,
    )?;
    let out = protocol::query(&mut ch, &params, &layer, &xr, a.reveal)?;
    let total_ms = t.elapsed().as_secs_f64() * 1e3;
    let c = ch.counters();
    let revealed: Option<Vec<i64>> = out
        .revealed
        .map(|v| v.iter().map(|&y| params.center(y)).collect());
    // With the sample layer (public seed) the client can check the reconstruction.
    let matches_reference = match (&revealed, a.layer.is_none() && a.input.is_none()) {
        (Some(got), true) => {
            let w = sample_values(weight_len(&layer), 1);
            let (rows, cols) = match layer {
                LayerSpec::Matvec { rows, cols, .. } => (rows, cols),
                LayerSpec::Conv { .. } => (0, 0),
            };
            let want: Vec<i64> = (0..rows)
                .map(|r| (0..cols).map(|k| w[r * cols + k] * x[k]).sum())
                .collect();
            Some(&want == got)
        }
        _ => None,
    };
    let report = ClientReport {
        layer: format!("{layer:?}"),
        params: params.name().to_string(),
        outputs: out.share.len(),
        share_head: out.share.iter().take(8).copied().collect(),
        revealed,
        matches_reference,
        total_ms,
        bytes_sent: c.bytes_sent,
        bytes_received: c.bytes_received,
        frames_sent: c.frames_sent,
        frames_received: c.frames_received,
        flights_sent: c.flights,
        setup_bytes_sent: out.setup.bytes_sent,
        setup_bytes_received: out.setup.bytes_received,
        online_bytes_sent: out.online.bytes_sent,
        online_bytes_received: out.online.bytes_received,
        online_flights_sent: out.online.flights,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "helina client: {} ({}), {} outputs in {:.1} ms",
            report.layer, report.params, report.outputs, total_ms
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
            "  sent {} B in {} frames ({} flights), received {} B in {} frames",
            c.bytes_sent, c.frames_sent, c.flights, c.bytes_received, c.frames_received
        );
        println!(
            "  setup (keys): {} B up, {} B down; online (query, response): {} B up, {} B down",
            report.setup_bytes_sent,
            report.setup_bytes_received,
            report.online_bytes_sent,
            report.online_bytes_received
        );
    }
    if report.matches_reference == Some(false) {
        return Err("the reconstructed result differs from the plaintext reference".into());
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
        let (layer, got) = load_model(&ok, "gala").unwrap();
        assert_eq!(layer, parse_layer("matvec:2x3", "gala").unwrap());
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
        assert!(matches!(
            load_model(&conv, "gala").unwrap().0,
            LayerSpec::Conv { .. }
        ));
        let float = write(
            "float",
            vec![("layer0.weight", Dtype::F32, vec![2, 3], vec![0; 24])],
            None,
        );
        assert!(load_model(&float, "gala")
            .unwrap_err()
            .to_string()
            .contains("dtype"));
        let missing = write(
            "missing",
            vec![("fc.weight", Dtype::I32, vec![2, 3], i32_bytes(&w))],
            None,
        );
        assert!(load_model(&missing, "gala")
            .unwrap_err()
            .to_string()
            .contains("layer0.weight"));
        let bad_shape = write(
            "shape",
            vec![("layer0.weight", Dtype::I32, vec![6], i32_bytes(&w))],
            None,
        );
        assert!(load_model(&bad_shape, "gala")
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
        assert!(load_model(&no_meta, "gala")
            .unwrap_err()
            .to_string()
            .contains("layer0.input"));
        std::fs::write(&ok, b"not a safetensors file").unwrap();
        assert!(load_model(&ok, "gala").is_err());
        for p in [ok, conv, float, missing, bad_shape, no_meta] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn layer_specs_parse() {
        assert!(matches!(
            parse_layer("conv:3x8x8:4x3x3:2:valid", "heliks").unwrap(),
            LayerSpec::Conv { .. }
        ));
        assert!(parse_layer("matvec:2", "gala").is_err());
        assert!(parse_layer("conv:3x8x8:4x3x3:1:round", "gala").is_err());
        assert!(parse_layer("pool:2x2", "gala").is_err());
    }
}
