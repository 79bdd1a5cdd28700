//! `helina compile`: plans an ONNX model once (fixed point by agreement with float on
//! the calibration inputs, a method per linear layer) and saves it as one `.helina`
//! file that `helina server --model m.helina` serves without calibration data.

use clap::Args;

use crate::args::{FixedPointArgs, MethodArg, PlannerArgs};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct CompileArgs {
    /// The ONNX model.
    #[arg(long)]
    model: String,
    /// Where to write the compiled model (`.helina`).
    #[arg(long)]
    out: std::path::PathBuf,
    /// Method for every layer it applies to, or the planner's pick.
    #[arg(long, value_enum, default_value_t = MethodArg::Auto)]
    method: MethodArg,
    #[command(flatten)]
    fixed: FixedPointArgs,
    #[command(flatten)]
    planner: PlannerArgs,
}

pub fn run(a: &CompileArgs) -> Res<()> {
    let network = nn::import(std::path::Path::new(&a.model))?;
    let (fixed, calibration) = a.fixed.fixed_point(network.input_shape(), None)?;
    let planning = a.planner.planning(net::Link::NONE, a.method.choice())?;
    let model = helina::Model::new(network, &fixed, &planning)?;
    model.save(&a.out)?;
    let size = std::fs::metadata(&a.out).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "{}: compiled to {} ({:.1} MB; {}, {} fractional bits, p = {}; calibrated on {calibration}; {}; planned in {:.1} s + {:.1} s)",
        a.model,
        a.out.display(),
        size as f64 / 1e6,
        model.params().name(),
        model.program().frac_bits,
        model.program().p,
        crate::args::describe(model.program()),
        model.timings.fixed_point_ms / 1e3,
        model.timings.methods_ms / 1e3,
    );
    Ok(())
}
