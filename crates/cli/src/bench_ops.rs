//! `helina bench ops`: median per-operation times, plain fhe.rs next to the faster
//! variant helina uses (see [`benchmarks::ops`]).

use benchmarks::ops::{OpsOptions, HOISTED_GROUP as GROUP, PRODUCT_TERMS as TERMS};
use clap::Args;

#[derive(Args)]
pub struct OpsArgs {
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Repetitions per operation (the median is reported).
    #[arg(long, default_value_t = 25)]
    reps: usize,
    /// Print JSON (op name → median µs) instead of the table.
    #[arg(long)]
    json: bool,
    /// Save the kernels' per-op costs as this machine's planner cost model (the cache
    /// `helina plan`, `infer`, the server and `bench network` read).
    #[arg(long)]
    save: bool,
}

pub fn run(a: &OpsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let r = benchmarks::ops::run(&OpsOptions {
        params: a.params.clone(),
        reps: a.reps,
        save: a.save,
        threads: rayon::current_num_threads(),
    })?;
    if let Some(path) = &r.saved_to {
        eprintln!("planner cost model saved to {}", path.display());
    }
    let m = &r.medians;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
        return Ok(());
    }
    println!(
        "bench ops: {} (n = {}, log2 q = {}, p = {}), each op on {} threads at once, median of {} reps, µs",
        r.params, r.n, r.log_q, r.p, r.threads, r.reps
    );
    let pairs: [(&str, &str, &str); 4] = [
        ("rotation (fhe.rs)", "rotate", "rotate_hoisted"),
        ("single rotation", "rotate", "rotate_single"),
        ("ct x pt", "mul_plain", "mul_plain_shoup"),
        ("sum of products, per term", "mul_add_term", "dot_term"),
    ];
    println!(
        "{:<28} {:>12} {:>22} {:>12} {:>8}",
        "operation", "plain", "faster variant", "µs", "x"
    );
    for (label, plain, fast) in pairs {
        println!(
            "{:<28} {:>12.1} {:>22} {:>12.1} {:>8.2}",
            label,
            m[plain],
            fast,
            m[fast],
            m[plain] / m[fast]
        );
    }
    println!();
    for (k, v) in m {
        println!("{k:<28} {v:>12.1}");
    }
    println!(
        "rotate_hoisted = per rotation in a group of {GROUP}, its share of hoist_precompute included; \
         mul_add_term / dot_term = per term of {TERMS}."
    );
    println!(
        "bytes: ciphertext {} (seeded {}, last level {}), Galois key {} each, public key {}",
        r.ct_bytes,
        r.seeded_ct_bytes,
        r.last_level_ct_bytes,
        r.galois_key_bytes,
        r.public_key_bytes
    );
    Ok(())
}
