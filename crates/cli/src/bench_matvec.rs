//! `helina bench matvec`: every method on the same W and x, side by side (see
//! [`benchmarks::matvec`]).

use benchmarks::matvec::MatvecOptions;
use clap::Args;

#[derive(Args)]
pub struct MatvecArgs {
    /// Output rows n_o.
    #[arg(long, default_value_t = 16)]
    rows: usize,
    /// Input columns n_i.
    #[arg(long, default_value_t = 128)]
    cols: usize,
    /// Methods: `all` or a comma-separated list (naive,diagonal,bsgs,hybrid,gala,heliks).
    #[arg(long, default_value = "all")]
    method: String,
    /// Parameter preset, or `auto` (per method, the smallest chain whose modelled
    /// budget after share_output stays ≥ 10 bits).
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Galois-key budget per method.
    #[arg(long, default_value_t = kernels::rotate::DEFAULT_KEY_BUDGET)]
    key_budget: usize,
    /// Queries timed per method (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON rows instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &MatvecArgs) -> Result<(), Box<dyn std::error::Error>> {
    let report = benchmarks::matvec::run(&MatvecOptions {
        rows: a.rows,
        cols: a.cols,
        methods: a.method.clone(),
        params: a.params.clone(),
        key_budget: a.key_budget,
        reps: a.reps,
    })?;
    crate::bench_linear::print(&report, a.json)
}
