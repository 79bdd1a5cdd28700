//! `helina bench conv`: convolution methods side by side on the same image and filters
//! (columns as `bench matvec`), with named presets for the papers' shapes (see
//! [`benchmarks::conv`]).

use benchmarks::conv::{ConvOptions, PRESETS};
use clap::Args;

#[derive(Args)]
pub struct ConvArgs {
    /// Input as HxWxC (16x16x128 = a 16x16 image with 128 channels).
    #[arg(long, default_value = "16x16x128")]
    input: String,
    /// Filters as C_OxK_HxK_W (128x3x3 = 128 filters of 3x3).
    #[arg(long, default_value = "128x3x3")]
    filters: String,
    /// Stride.
    #[arg(long, default_value_t = 1)]
    stride: usize,
    /// Padding: same or valid.
    #[arg(long, default_value = "same")]
    padding: String,
    /// A named shape from the papers' tables (overrides the shape flags).
    #[arg(long)]
    preset: Option<String>,
    /// List the presets.
    #[arg(long)]
    list_presets: bool,
    /// Methods: `all` or a comma-separated list (gazelle-out,gala,ensei).
    #[arg(long, default_value = "all")]
    method: String,
    /// Channel packing of the slot methods: `auto` (the plan's choice), `padded`,
    /// `compact`, or `both` (each slot method once per packing that applies; `ensei` and
    /// `cheetah` lay out their own and run once).
    #[arg(long, default_value = "auto")]
    packing: String,
    /// Parameter preset or `auto`.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Queries timed per method.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON rows.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &ConvArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.list_presets {
        for (name, src, i, f, s, pad) in PRESETS {
            println!("{name:<12} {src:<16} --input {i} --filters {f} --stride {s} --padding {pad}");
        }
        return Ok(());
    }
    let shape = match &a.preset {
        Some(name) => benchmarks::conv::preset(name)?,
        None => benchmarks::conv::shape(&a.input, &a.filters, a.stride, &a.padding)?,
    };
    let report = benchmarks::conv::run(&ConvOptions {
        shape,
        methods: a.method.clone(),
        packing: a.packing.clone(),
        params: a.params.clone(),
        reps: a.reps,
    })?;
    crate::bench_linear::print(&report, a.json)
}
