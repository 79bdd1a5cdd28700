//! The planner's per-op costs: measured on this machine (`helina bench ops --save`, or
//! [`CostSource::Measure`]) and cached in a file per parameter set, else the reference
//! figures of this machine kind (`kernels::CostModel::reference`).
//!
//! Cache folder: `$HELINA_CACHE_DIR`, else `$XDG_CACHE_HOME/helina`, else
//! `$HOME/.cache/helina`; file `costs-<preset>-<params hash>.json`.

use std::path::PathBuf;

use he::Params;
use kernels::CostModel;

use crate::error::{Error, Result};

/// Where the per-op costs come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CostSource {
    /// This machine's, from the cache, else the reference figures.
    #[default]
    Cached,
    /// The reference figures of this machine kind.
    Reference,
    /// Measure now and update the cache.
    Measure,
}

impl std::str::FromStr for CostSource {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "cached" => Ok(CostSource::Cached),
            "reference" => Ok(CostSource::Reference),
            "measure" => Ok(CostSource::Measure),
            _ => Err(format!("`{s}`: give cached, reference or measure")),
        }
    }
}

/// Where the cost model of `params` is cached.
pub fn cache_path(params: &Params) -> Result<PathBuf> {
    let dir = if let Some(d) = std::env::var_os("HELINA_CACHE_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(d).join("helina")
    } else if let Some(h) = std::env::var_os("HOME") {
        PathBuf::from(h).join(".cache").join("helina")
    } else {
        return Err(Error::Option {
            option: "cost cache",
            detail: "no cache folder: set HELINA_CACHE_DIR".into(),
        });
    };
    let hash: String = params.hash().chars().take(12).collect();
    Ok(dir.join(format!("costs-{}-{hash}.json", params.name())))
}

/// Measures the per-op costs now (each on every thread of the current pool at once, as
/// a layer runs them) and writes the cache.
pub fn measure_and_save(params: &Params, reps: usize) -> Result<(CostModel, PathBuf)> {
    let m = CostModel::measure(params, reps, rayon::current_num_threads())?;
    let path = cache_path(params)?;
    m.save(&path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok((m, path))
}

/// The cost model from `source`, and a description of where it came from.
pub fn model(params: &Params, source: CostSource) -> Result<(CostModel, String)> {
    match source {
        CostSource::Reference => Ok((CostModel::reference(params), "reference".into())),
        CostSource::Measure => {
            let (m, path) = measure_and_save(params, 9)?;
            Ok((m, format!("measured now ({})", path.display())))
        }
        CostSource::Cached => {
            let path = cache_path(params)?;
            match CostModel::load(&path) {
                Ok(m) => Ok((m, format!("measured ({})", path.display()))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((
                    CostModel::reference(params),
                    // Not a recommendation to measure: single ops timed hot price
                    // rotations below what they cost inside a layer (1.7 vs 2.7 ms),
                    // and ResNet-50's picks then run slower (README, planner).
                    "reference (no cache of `helina bench ops --save`)".into(),
                )),
                Err(source) => Err(Error::Io {
                    path: format!(
                        "{} (delete it or run `helina bench ops --save`)",
                        path.display()
                    ),
                    source,
                }),
            }
        }
    }
}
