//! Matrix-vector products (`helina bench matvec`): every method on the same W and x,
//! side by side (see [`crate::linear`] for the columns).

use he::{Layout, Params, SlotInfo};
use kernels::{noise::NoiseModel, MatvecLayout, Method};
use rand::Rng;

use crate::linear::{measure, LinearReport};
use crate::{progress, Result};

/// `bench matvec`.
#[derive(Clone, Debug)]
pub struct MatvecOptions {
    /// Output rows n_o.
    pub rows: usize,
    /// Input columns n_i.
    pub cols: usize,
    /// Methods: `all` or a comma-separated list (naive,diagonal,bsgs,hybrid,gala,heliks).
    pub methods: String,
    /// Parameter preset, or `auto` (per method, the smallest chain whose modelled
    /// budget after share_output stays ≥ 10 bits).
    pub params: String,
    /// Galois-key budget per method.
    pub key_budget: usize,
    /// Queries timed per method (the median is reported).
    pub reps: usize,
}

fn methods(s: &str) -> std::result::Result<Vec<Method>, String> {
    if s == "all" {
        return Ok(Method::ALL.to_vec());
    }
    s.split(',')
        .map(|m| Method::parse(m.trim()).ok_or(format!("unknown method `{m}`")))
        .collect()
}

/// The slot layout of `p` (two rows).
pub fn slots(p: &Params) -> SlotInfo {
    SlotInfo {
        n: p.n(),
        p: p.p(),
        layout: Layout::TwoRows,
    }
}

/// The n = 8192 presets by growing log2 q: `auto` picks the first that leaves ≥ 10 bits.
pub fn auto_candidates() -> Vec<Params> {
    let mut c: Vec<Params> = ["n8192-q109", "n8192-q164", "n8192", "n8192-p32"]
        .iter()
        .filter_map(|n| Params::preset(n).ok())
        .collect();
    c.sort_by_key(|p| p.log_q());
    c
}

/// Whether a kernel of `noise` bits leaves ≥ 10 bits after share_output on `p`.
pub fn leaves_ten_bits(p: &Params, noise: impl Fn(&NoiseModel) -> f64) -> bool {
    let m = NoiseModel::new(p);
    let k = noise(&m);
    m.affords(k) && m.log_q.floor() - m.needed_bits(k) as f64 + 2.0 >= 10.0
}

fn auto_params(
    method: Method,
    n_o: usize,
    n_i: usize,
    budget: usize,
) -> std::result::Result<Params, String> {
    for p in auto_candidates() {
        let layout = MatvecLayout::with_key_budget(method, n_o, n_i, slots(&p), Some(budget))
            .map_err(|e| e.to_string())?;
        if leaves_ten_bits(&p, |m| layout.kernel_noise(m)) {
            return Ok(p);
        }
    }
    Err(format!("no preset affords {method} on {n_o}x{n_i}"))
}

/// Every method of `o.methods` on one random W and x.
pub fn run(a: &MatvecOptions) -> Result<LinearReport> {
    let list = methods(&a.methods)?;
    let mut rng = rand::rng();
    let w: Vec<i64> = (0..a.rows * a.cols)
        .map(|_| rng.random_range(-128..=128))
        .collect();
    let x: Vec<i64> = (0..a.cols).map(|_| rng.random_range(-128..=128)).collect();
    let pb = progress(list.len() as u64, "bench matvec");
    let mut rows = Vec::new();
    for m in list {
        pb.set_message(format!("bench matvec: {m}"));
        let params = if a.params == "auto" {
            auto_params(m, a.rows, a.cols, a.key_budget)?
        } else {
            Params::preset(&a.params)?
        };
        let p = params.p();
        let xr: Vec<u64> = x.iter().map(|&v| params.reduce(v)).collect();
        let want: Vec<u64> = (0..a.rows)
            .map(|r| {
                let s: i128 = (0..a.cols)
                    .map(|c| w[r * a.cols + c] as i128 * x[c] as i128)
                    .sum();
                s.rem_euclid(p as i128) as u64
            })
            .collect();
        let layout =
            MatvecLayout::with_key_budget(m, a.rows, a.cols, slots(&params), Some(a.key_budget))?;
        let mut row = measure(&layout, &params, &w, &xr, &want, a.reps, false)?;
        row.extra_hops = layout.rotations().composed();
        rows.push(row);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let title = format!(
        "bench matvec {}x{} (n_o x n_i), params {}, key budget {}, median of {} queries, {} thread(s)",
        a.rows, a.cols, a.params, a.key_budget, a.reps, rayon::current_num_threads()
    );
    Ok(LinearReport::new(title, "hybrid", rows))
}
