//! The planner's per-op costs: measured on this machine by `helina bench ops --save`
//! (or `helina plan --measure`) and cached in a file per parameter set, else the
//! reference figures of this machine kind (`kernels::CostModel::reference`).
//!
//! Cache folder: `$HELINA_CACHE_DIR`, else `$XDG_CACHE_HOME/helina`, else
//! `$HOME/.cache/helina`; file `costs-<preset>-<params hash>.json`.

use std::path::PathBuf;

use clap::Args;
use he::Params;
use kernels::CostModel;
use protocol::{Objective, Planner};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Planner options shared by `plan`, `infer`, `server` and `bench network`.
#[derive(Args, Clone, Debug)]
pub struct PlannerArgs {
    /// What the automatic choice minimises: time, bytes or balanced.
    #[arg(long, default_value = "time")]
    pub objective: Objective,
    /// Per-op costs: `cached` (this machine's, from `bench ops --save`, else the
    /// reference), `reference`, or `measure` (measure now and update the cache).
    #[arg(long, default_value = "cached")]
    pub costs: String,
    /// Memory budget for encoded weights, MB; layers beyond it are encoded on the fly
    /// (their encoding counted in the plan's time).
    #[arg(long)]
    pub mem_limit: Option<f64>,
}

impl PlannerArgs {
    /// The planner for these parameters and link, with the threads of the global pool.
    pub fn planner(&self, params: &Params, link: &net::Link) -> Res<(Planner, String)> {
        let (model, source) = model(params, &self.costs)?;
        let mut p = Planner::new(params, link);
        p.model = model;
        p.objective = self.objective;
        p.threads = rayon::current_num_threads();
        Ok((p, source))
    }
    /// The memory budget in bytes (unlimited without `--mem-limit`).
    pub fn mem_limit_bytes(&self) -> Res<Option<u64>> {
        match self.mem_limit {
            Some(mb) if !(mb.is_finite() && mb >= 0.0) => {
                Err(format!("--mem-limit {mb}: give a size in MB ≥ 0").into())
            }
            Some(mb) => Ok(Some((mb * 1e6) as u64)),
            None => Ok(None),
        }
    }
}

/// Where the cost model of `params` is cached.
pub fn cache_path(params: &Params) -> Res<PathBuf> {
    let dir = if let Some(d) = std::env::var_os("HELINA_CACHE_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(d).join("helina")
    } else if let Some(h) = std::env::var_os("HOME") {
        PathBuf::from(h).join(".cache").join("helina")
    } else {
        return Err("no cache folder: set HELINA_CACHE_DIR".into());
    };
    let hash: String = params.hash().chars().take(12).collect();
    Ok(dir.join(format!("costs-{}-{hash}.json", params.name())))
}

/// Measures the per-op costs now and writes the cache.
pub fn measure_and_save(params: &Params, reps: usize) -> Res<(CostModel, PathBuf)> {
    let m = CostModel::measure(params, reps)?;
    let path = cache_path(params)?;
    m.save(&path)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok((m, path))
}

/// The cost model by `how` (`cached`, `reference`, `measure`) and where it came from.
pub fn model(params: &Params, how: &str) -> Res<(CostModel, String)> {
    match how {
        "reference" => Ok((CostModel::reference(params), "reference".into())),
        "measure" => {
            let (m, path) = measure_and_save(params, 9)?;
            Ok((m, format!("measured now ({})", path.display())))
        }
        "cached" => {
            let path = cache_path(params)?;
            match CostModel::load(&path) {
                Ok(m) => Ok((m, format!("measured ({})", path.display()))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((
                    CostModel::reference(params),
                    "reference (no cache: run `helina bench ops --save`)".into(),
                )),
                Err(e) => Err(format!(
                    "{}: {e} (delete it or run `helina bench ops --save`)",
                    path.display()
                )
                .into()),
            }
        }
        _ => Err(format!("--costs {how}: give cached, reference or measure").into()),
    }
}

/// Peak resident memory of this process so far (Linux `VmHWM`), bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
