//! `helina bench conv`: convolution methods side by side on the same image and filters
//! (columns as `bench matvec`), with named presets for the papers' shapes.

use he::Params;
use kernels::rotate::DEFAULT_KEY_BUDGET;
use kernels::{ConvLayout, ConvMethod, ConvShape, Packing, Padding};
use rand::Rng;

use crate::linear::{measure, LinearReport};
use crate::matvec::{auto_candidates, leaves_ten_bits, slots};
use crate::{progress, Result};

/// `bench conv`.
#[derive(Clone, Debug)]
pub struct ConvOptions {
    /// The convolution ([`shape`], [`preset`]).
    pub shape: ConvShape,
    /// Methods: `all` or a comma-separated list (gazelle-out,gala,ensei,…).
    pub methods: String,
    /// Channel packing of the slot methods: `auto` (the layout's choice), `padded`,
    /// `compact`, or `both` (each slot method once per packing that applies; `ensei` and
    /// `cheetah` lay out their own and run once).
    pub packing: String,
    /// Parameter preset or `auto`.
    pub params: String,
    /// Queries timed per method.
    pub reps: usize,
}

/// The papers' shapes: (name, source, input HxWxC, filters C_OxKxK, stride, padding).
pub const PRESETS: &[(&str, &str, &str, &str, usize, &str)] = &[
    (
        "gazelle-9-1",
        "GAZELLE Table 9",
        "28x28x1",
        "5x5x5",
        2,
        "valid",
    ),
    (
        "gazelle-9-2",
        "GAZELLE Table 9",
        "16x16x128",
        "128x1x1",
        1,
        "same",
    ),
    (
        "gazelle-9-3",
        "GAZELLE Table 9",
        "32x32x32",
        "32x3x3",
        1,
        "same",
    ),
    (
        "gazelle-9-4",
        "GAZELLE Table 9",
        "16x16x128",
        "128x3x3",
        1,
        "same",
    ),
    (
        "gala-viii-1",
        "GALA Table VIII",
        "16x16x128",
        "128x1x1",
        1,
        "same",
    ),
    (
        "gala-viii-2",
        "GALA Table VIII",
        "16x16x2048",
        "512x1x1",
        1,
        "same",
    ),
    (
        "gala-viii-3",
        "GALA Table VIII",
        "16x16x128",
        "128x3x3",
        1,
        "same",
    ),
    (
        "gala-viii-4",
        "GALA Table VIII",
        "16x16x2048",
        "64x5x5",
        1,
        "same",
    ),
    ("ensei-4-1", "ENSEI Table 4", "28x28x1", "5x5x5", 2, "valid"),
    (
        "ensei-4-2",
        "ENSEI Table 4",
        "32x32x32",
        "32x3x3",
        1,
        "same",
    ),
];

fn dims(s: &str, what: &str) -> std::result::Result<[usize; 3], String> {
    let v: Vec<usize> = s
        .split('x')
        .map(|t| t.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| format!("{what} `{s}`: expected three numbers like 16x16x128"))?;
    v.try_into()
        .map_err(|_| format!("{what} `{s}`: expected three numbers like 16x16x128"))
}

/// A convolution from the command line's words: input `HxWxC`, filters `C_OxK_HxK_W`,
/// the stride, padding `same` or `valid`.
pub fn shape(
    input: &str,
    filters: &str,
    stride: usize,
    padding: &str,
) -> std::result::Result<ConvShape, String> {
    let [h, w, c_i] = dims(input, "--input")?;
    let [c_o, k_h, k_w] = dims(filters, "--filters")?;
    let padding = match padding {
        "same" => Padding::Same,
        "valid" => Padding::Valid,
        other => return Err(format!("--padding `{other}`: same or valid")),
    };
    Ok(ConvShape::new(
        [c_i, h, w],
        [c_o, k_h, k_w],
        stride,
        padding,
    ))
}

/// Plaintext integer convolution, c_o x h_out x w_out, reduced mod p.
fn reference(layout: &ConvLayout, x: &[i64], f: &[i64], p: u64) -> Vec<u64> {
    let g = layout.geometry();
    let sh = g.shape;
    let mut out = Vec::with_capacity(sh.c_o * g.h_out * g.w_out);
    for o in 0..sh.c_o {
        for y in 0..g.h_out {
            for xx in 0..g.w_out {
                let mut acc: i128 = 0;
                for c in 0..sh.c_i {
                    for dy in 0..sh.k_h {
                        for dx in 0..sh.k_w {
                            let iy = (y * sh.stride + dy) as i64 - g.pad[0] as i64;
                            let ix = (xx * sh.stride + dx) as i64 - g.pad[2] as i64;
                            if iy >= 0 && ix >= 0 && (iy as usize) < sh.h && (ix as usize) < sh.w {
                                acc += x[(c * sh.h + iy as usize) * sh.w + ix as usize] as i128
                                    * f[((o * sh.c_i + c) * sh.k_h + dy) * sh.k_w + dx] as i128;
                            }
                        }
                    }
                }
                out.push(acc.rem_euclid(p as i128) as u64);
            }
        }
    }
    out
}

/// The shape of the preset `name` ([`PRESETS`]).
pub fn preset(name: &str) -> std::result::Result<ConvShape, String> {
    let (_, _, i, f, s, pad) = PRESETS
        .iter()
        .find(|p| p.0 == name)
        .ok_or(format!("unknown preset `{name}` (see --list-presets)"))?;
    shape(i, f, *s, pad)
}

/// Every method of `a.methods` (and packing) on one random image and filter bank.
pub fn run(a: &ConvOptions) -> Result<LinearReport> {
    let sh = a.shape;
    let list: Vec<ConvMethod> = if a.methods == "all" {
        ConvMethod::ALL.to_vec()
    } else {
        a.methods
            .split(',')
            .map(|m| ConvMethod::parse(m.trim()).ok_or(format!("unknown method `{m}`")))
            .collect::<std::result::Result<_, _>>()?
    };
    let mut rng = rand::rng();
    let x: Vec<i64> = (0..sh.c_i * sh.h * sh.w)
        .map(|_| rng.random_range(-32..=32))
        .collect();
    let f: Vec<i64> = (0..sh.c_o * sh.c_i * sh.k_h * sh.k_w)
        .map(|_| rng.random_range(-32..=32))
        .collect();
    let packings: Vec<Option<Packing>> = match a.packing.as_str() {
        "auto" => vec![None],
        "padded" => vec![Some(Packing::Padded)],
        "compact" => vec![Some(Packing::Compact)],
        "both" => vec![Some(Packing::Padded), Some(Packing::Compact)],
        other => {
            return Err(format!("unknown packing `{other}` (auto, padded, compact, both)").into())
        }
    };
    let slot_method = |m: ConvMethod| !(m == ConvMethod::Ensei || m.is_cheetah());
    let runs: Vec<(ConvMethod, Option<Packing>)> = list
        .iter()
        .flat_map(|&m| {
            let own = if slot_method(m) {
                packings.clone()
            } else {
                vec![None]
            };
            own.into_iter().map(move |p| (m, p))
        })
        .collect();
    let layout_for = |m: ConvMethod, packing: Option<Packing>, params: &Params| match packing {
        None => ConvLayout::new(m, sh, slots(params)),
        Some(k) => ConvLayout::with_packing(m, sh, slots(params), Some(DEFAULT_KEY_BUDGET), k),
    };
    let pb = progress(runs.len() as u64, "bench conv");
    let mut rows = Vec::new();
    for (m, packing) in runs {
        pb.set_message(format!("bench conv: {m}"));
        let params = if a.params == "auto" {
            match auto_candidates().into_iter().find(|p| {
                layout_for(m, packing, p)
                    .is_ok_and(|layout| leaves_ten_bits(p, |nm| layout.kernel_noise(nm)))
            }) {
                Some(p) => p,
                // `both`: compact packing that does not apply to this shape is skipped.
                None if packing == Some(Packing::Compact) && a.packing == "both" => {
                    pb.inc(1);
                    continue;
                }
                None => return Err(format!("no preset affords {m}").into()),
            }
        } else {
            Params::preset(&a.params)?
        };
        let layout = match layout_for(m, packing, &params) {
            Err(kernels::KernelError::Packing { .. }) if a.packing == "both" => {
                pb.inc(1);
                continue;
            }
            layout => layout?,
        };
        let pts = layout.encoded_plaintexts();
        let gib = pts as f64 * (params.n() * params.levels() * 16) as f64 / (1u64 << 30) as f64;
        if gib > 12.0 {
            return Err(format!(
                "{m}: the encoded filters would take {gib:.1} GiB ({pts} plaintexts); \
                 encoding on the fly under a memory budget is not implemented yet"
            )
            .into());
        }
        let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
        let want = reference(&layout, &x, &f, params.p());
        let mut row = measure(&layout, &params, &f, &xr, &want, a.reps, false)?;
        row.extra_hops = layout.rotations().composed();
        if slot_method(m) {
            row.method = format!("{m} ({})", layout.packing().name());
        }
        rows.push(row);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let title = format!(
        "bench conv {}x{}x{} -> {} {}x{} stride {} {:?}, params {}, median of {} queries, {} thread(s)",
        sh.h, sh.w, sh.c_i, sh.c_o, sh.k_h, sh.k_w, sh.stride, sh.padding, a.params, a.reps, rayon::current_num_threads()
    );
    Ok(LinearReport::new(title, "gazelle-out", rows))
}
