//! What an inference reports, as plain serde structs: per input the logits and what
//! they cost, per layer what each party did.

use protocol::{ClientOutcome, ClientOutput, StepReport};
use serde::Serialize;

/// One input's result.
#[derive(Clone, Debug, Serialize)]
pub struct Output {
    /// The dequantised output (logits).
    pub logits: Vec<f32>,
    /// Index of the largest logit.
    pub argmax: usize,
    /// Time of this input, offline + online, ms (client's clock).
    pub total_ms: f64,
    /// Bytes of this input, offline + online, both directions.
    pub total_bytes: u64,
    /// Online time, ms.
    pub online_ms: f64,
    /// Online bytes.
    pub online_bytes: u64,
    /// Offline time, ms.
    pub offline_ms: f64,
    /// Offline bytes.
    pub offline_bytes: u64,
    /// The output in fixed point (centred integers), as revealed.
    pub fixed: Vec<i64>,
    /// The graph's own outputs by name (e.g. `label` and `probabilities`): the output
    /// head applied by the client to `logits` (just the logits when the graph has none).
    pub graph_outputs: Vec<nn::GraphOutput>,
    /// The client's shares of the approximately truncated steps' inputs (empty when
    /// the program has none): with them [`crate::Model::fixed_reference`] replays this
    /// run bit for bit. Not serialised.
    #[serde(skip)]
    pub truncation_shares: Vec<Vec<u64>>,
}

impl Output {
    /// The predicted label: the first integer or string graph output with one element
    /// (a classifier's `label`), else the argmax of the logits.
    pub fn label(&self) -> String {
        self.graph_outputs
            .iter()
            .find_map(|g| match &g.value.data {
                nn::HeadData::I64(v) if v.len() == 1 => Some(v[0].to_string()),
                nn::HeadData::Str(v) if v.len() == 1 => Some(v[0].clone()),
                _ => None,
            })
            .unwrap_or_else(|| self.argmax.to_string())
    }
}

/// A client's inference: the plan's facts, per input the output, the first input's
/// per-step report.
#[derive(Clone, Debug, Serialize)]
pub struct Inference {
    /// The parameter set's name.
    pub params: String,
    /// The plaintext modulus.
    pub p: u64,
    /// The input's fractional bits.
    pub frac_bits: u32,
    /// The input range the plan is safe for.
    pub input_range: Option<nn::InputRange>,
    /// The plan's agreement with the float model on its calibration inputs.
    pub accuracy: Option<nn::Accuracy>,
    /// Handshake and keys, ms.
    pub setup_ms: f64,
    /// Handshake and keys, bytes.
    pub setup_bytes: u64,
    /// Per input.
    pub outputs: Vec<Output>,
    /// Per step of the first input, as the client saw it.
    pub layers: Vec<StepReport>,
    /// The smallest noise budget (bits) left in any response.
    pub noise_budget: Option<u32>,
}

/// Index of the largest value (the first of equals).
pub fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold(0, |best, (i, &x)| if x > v[best] { i } else { best })
}

impl Output {
    /// One input's output from the client's share and the server's, as the session
    /// revealed it (its truncation shares moved, not copied).
    pub fn from_client_output(prog: &nn::Program, out: ClientOutput) -> crate::Result<Self> {
        let b = |c: net::Counters| c.bytes_sent + c.bytes_received;
        let fixed = out
            .value
            .ok_or(crate::Error::from(protocol::ProtocolError::Unexpected {
                expected: "a plan that reveals the output",
                got: "one that keeps it shared",
            }))?;
        let logits = nn::dequantise(prog, &fixed);
        let shape = prog
            .output_info()
            .map_or_else(|| vec![logits.len()], |t| t.shape.clone());
        let graph_outputs = prog.head.eval(&logits, &shape)?;
        let t = out.report.traffic;
        Ok(Output {
            argmax: argmax(&logits),
            logits,
            total_ms: out.report.offline_ms + out.report.online_ms,
            total_bytes: b(t.offline) + b(t.online),
            online_ms: out.report.online_ms,
            online_bytes: b(t.online),
            offline_ms: out.report.offline_ms,
            offline_bytes: b(t.offline),
            fixed,
            graph_outputs,
            truncation_shares: out.truncation_shares,
        })
    }
}

impl Inference {
    /// The report of a client's session whose plan revealed the outputs (every output
    /// kept: [`protocol::client::run`]).
    pub fn from_outcome(o: &ClientOutcome) -> crate::Result<Self> {
        let prog = o.program();
        let outputs = o
            .outputs
            .iter()
            .map(|out| Output::from_client_output(prog, out.clone()))
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(Self::summary(o, outputs))
    }

    /// The session's facts around `outputs` (those kept; the first input's per-step
    /// report from the outcome).
    pub fn summary(o: &ClientOutcome, outputs: Vec<Output>) -> Self {
        let prog = o.program();
        let b = |c: net::Counters| c.bytes_sent + c.bytes_received;
        Inference {
            params: o.params.name().to_string(),
            p: o.params.p(),
            frac_bits: prog.frac_bits,
            input_range: prog.input_range,
            accuracy: prog.accuracy,
            setup_ms: o.times.setup_ms,
            setup_bytes: b(o.traffic.setup),
            outputs,
            layers: o
                .first
                .as_ref()
                .or(o.outputs.first().map(|x| &x.report))
                .map(|r| r.steps.clone())
                .unwrap_or_default(),
            noise_budget: o.noise_budget,
        }
    }
}
