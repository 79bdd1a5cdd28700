//! A planned layer (either kernel family) and the server's automatic choice of method:
//! every applicable method is run on the counting backend and priced
//! ([`kernels::estimate`]); the cheapest predicted time (server compute + transfer
//! over the link + one round trip) wins. Methods that cannot run on the parameters
//! (noise budget, key budget, slot count) are skipped.

use he::{GaloisSpec, Params};
use kernels::{ConvPlan, CostModel, Estimate, LinearLayer, MatvecPlan};
use net::Link;

use crate::msg::{LayerMethod, LayerShape, LayerSpec, ProtocolError, Result};

/// A planned layer.
#[derive(Clone, Debug)]
pub enum Plan {
    /// Matrix-vector.
    Matvec(MatvecPlan),
    /// Convolution.
    Conv(Box<ConvPlan>),
}

impl Plan {
    /// Plans a layer spec on these parameters.
    pub fn new(spec: &LayerSpec, params: &Params) -> Result<Plan> {
        let slots = he::SlotInfo {
            n: params.n(),
            p: params.p(),
            layout: he::Layout::TwoRows,
        };
        Ok(match spec {
            LayerSpec::Matvec { method, rows, cols } => {
                Plan::Matvec(MatvecPlan::new(*method, *rows, *cols, slots)?)
            }
            LayerSpec::Conv { method, shape } => {
                Plan::Conv(Box::new(ConvPlan::new(*method, *shape, slots)?))
            }
        })
    }
    /// Galois keys.
    pub fn galois(&self) -> GaloisSpec {
        match self {
            Plan::Matvec(p) => LinearLayer::galois(p),
            Plan::Conv(p) => LinearLayer::galois(p.as_ref()),
        }
    }
    /// Input length.
    pub fn input_len(&self) -> usize {
        match self {
            Plan::Matvec(p) => p.input_len(),
            Plan::Conv(p) => p.input_len(),
        }
    }
    /// Predicted cost (fails if the parameters cannot afford the flooding).
    pub fn estimate(&self, params: &Params, model: &CostModel) -> Result<Estimate> {
        Ok(match self {
            Plan::Matvec(p) => kernels::estimate(p, params, model)?,
            Plan::Conv(p) => kernels::estimate(p.as_ref(), params, model)?,
        })
    }
}

/// One candidate method of the automatic choice.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The method.
    pub method: LayerMethod,
    /// Its estimate, or why it cannot run.
    pub estimate: std::result::Result<Estimate, ProtocolError>,
    /// Predicted time over the link, ms.
    pub predicted_ms: f64,
}

/// Picks the method with the lowest predicted time for a layer; returns the pick and
/// every candidate.
pub fn choose(
    shape: &LayerShape,
    params: &Params,
    link: &Link,
) -> Result<(LayerSpec, Vec<Candidate>)> {
    let model = CostModel::reference(params);
    let bytes_per_s = link.bandwidth_bps.map(|b| b / 8.0).unwrap_or(0.0);
    let rtt_ms = link.rtt.as_secs_f64() * 1e3;
    let candidates: Vec<Candidate> = shape
        .methods()
        .into_iter()
        .map(|method| {
            let estimate = shape
                .with(method)
                .and_then(|s| Plan::new(&s, params))
                .and_then(|p| p.estimate(params, &model));
            let predicted_ms = estimate
                .as_ref()
                .map(|e| e.total_ms(bytes_per_s, rtt_ms))
                .unwrap_or(f64::INFINITY);
            Candidate {
                method,
                estimate,
                predicted_ms,
            }
        })
        .collect();
    let best = candidates
        .iter()
        .filter(|c| c.estimate.is_ok())
        .min_by(|a, b| a.predicted_ms.total_cmp(&b.predicted_ms))
        .ok_or(ProtocolError::NoMethod { layer: *shape })?;
    Ok((shape.with(best.method)?, candidates))
}
