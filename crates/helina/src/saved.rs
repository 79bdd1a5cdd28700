//! A compiled model as one file (`.helina`): what planning decided, so that a server
//! starts without calibration data and without the fixed-point search.
//!
//! Layout: the magic `HELINA-MODEL\n` (13 bytes), the format version (u32, little
//! endian), the body's length (u64, LE), the body (bincode), and the SHA-256 of the
//! body (32 bytes). The body holds the float network as imported (graph, float
//! weights, the client's head), the fixed-point program (parameter set, fractional
//! bits, input range, agreement with float on the calibration inputs, integer weights)
//! and the method of every linear step. Loading checks the magic, the version, the
//! length and the checksum before it decodes anything, and then plans the steps again
//! with the saved methods on this machine (whether a layer's weights are held or
//! encoded per query depends on its memory). What a client gets at the handshake is the
//! same as from the model planned from ONNX.

use std::path::Path;

use bincode::Options;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::{CalibrationSource, Model, PlanTimings, Planning};

/// The first bytes of every saved model.
pub const MAGIC: &[u8; 13] = b"HELINA-MODEL\n";
/// The format this build writes and reads (2: a program's nonlinear steps say
/// whether they truncate approximately; 3: and how many bits their coarse DReLU
/// leaves out).
pub const FORMAT_VERSION: u32 = 3;

const HEADER: usize = 13 + 4 + 8;
const CHECKSUM: usize = 32;

/// Why a saved model cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum SavedModelError {
    /// The file does not start with the magic.
    #[error("not a helina model file (no `HELINA-MODEL` header)")]
    NotAModel,
    /// Another format version.
    #[error("saved model format {found}; this helina reads format {supported}: compile the model again with this version")]
    Version {
        /// The file's version.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// Fewer bytes than the header announces.
    #[error("truncated: {expected} bytes expected, {actual} present")]
    Truncated {
        /// Bytes the header announces (header, body, checksum).
        expected: u64,
        /// Bytes present.
        actual: u64,
    },
    /// Bytes after the checksum.
    #[error("{extra} bytes after the end of the model")]
    Trailing {
        /// How many.
        extra: u64,
    },
    /// The body's checksum does not match (the file was changed or damaged).
    #[error("checksum mismatch: the file was changed or damaged")]
    Checksum,
    /// The body does not decode, or does not describe a consistent model.
    #[error("invalid contents: {detail}")]
    Invalid {
        /// What is wrong.
        detail: String,
    },
}

/// The body of a saved model.
#[derive(Serialize, Deserialize)]
struct Body {
    /// The helina version that wrote it (informational).
    helina_version: String,
    network: nn::Network,
    program: nn::Program,
    /// The method of every linear step, by step index.
    methods: Vec<(usize, protocol::LayerMethod)>,
    calibration_from_range: bool,
    /// How long the fixed-point search and the methods took when it was compiled, ms.
    compile_ms: (f64, f64),
}

fn invalid(detail: impl std::fmt::Display) -> SavedModelError {
    SavedModelError::Invalid {
        detail: detail.to_string(),
    }
}

impl Model {
    /// The model as the bytes of a `.helina` file.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let body = Body {
            helina_version: env!("CARGO_PKG_VERSION").to_string(),
            network: self.network.clone(),
            program: self.plan.program.clone(),
            methods: self
                .plan
                .layers
                .iter()
                .map(|l| (l.step, l.pick.method()))
                .collect(),
            calibration_from_range: self.calibration == CalibrationSource::Range,
            compile_ms: (self.timings.fixed_point_ms, self.timings.methods_ms),
        };
        let body = bincode::serialize(&body).map_err(|e| Error::Option {
            option: "saving the model",
            detail: e.to_string(),
        })?;
        let mut out = Vec::with_capacity(HEADER + body.len() + CHECKSUM);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&Sha256::digest(&body));
        Ok(out)
    }

    /// Writes the model to `path` (a `.helina` file; see the module doc).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = self.to_bytes()?;
        std::fs::write(path, bytes).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Reads a model saved by [`Model::save`] and plans its steps with the saved methods
    /// (`planning` gives the costs, threads and memory budget of this machine; its
    /// method choice is not used).
    pub fn load(path: impl AsRef<Path>, planning: &Planning) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(&bytes, planning).map_err(|e| match e {
            Error::SavedModel { error, .. } => Error::SavedModel {
                path: path.display().to_string(),
                error,
            },
            e => e,
        })
    }

    /// [`Model::load`] from the bytes of a `.helina` file.
    pub fn from_bytes(bytes: &[u8], planning: &Planning) -> Result<Self> {
        let fail = |error| Error::SavedModel {
            path: "<bytes>".into(),
            error,
        };
        let body = read_body(bytes).map_err(fail)?;
        let body: Body = bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .allow_trailing_bytes()
            .with_limit(body.len() as u64)
            .deserialize(body)
            .map_err(|e| fail(invalid(e)))?;
        let source = if body.calibration_from_range {
            CalibrationSource::Range
        } else {
            CalibrationSource::Inputs
        };
        let planning = Planning {
            method: protocol::MethodChoice::PerStep(body.methods.clone()),
            ..planning.clone()
        };
        // no fixed-point search runs when a model is loaded
        let m = Self::from_program(
            body.network,
            body.program,
            &planning,
            source,
            PlanTimings::default(),
        )?;
        let planned: Vec<_> = m
            .plan
            .layers
            .iter()
            .map(|l| (l.step, l.pick.method()))
            .collect();
        if planned != body.methods {
            return Err(fail(invalid(
                "the saved methods do not match the program's linear steps",
            )));
        }
        Ok(m)
    }
}

/// The body of a `.helina` file, checked: magic, version, length, checksum.
fn read_body(bytes: &[u8]) -> std::result::Result<&[u8], SavedModelError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(SavedModelError::NotAModel);
    }
    if bytes.len() < HEADER {
        return Err(SavedModelError::Truncated {
            expected: HEADER as u64,
            actual: bytes.len() as u64,
        });
    }
    let mut version = [0u8; 4];
    version.copy_from_slice(&bytes[13..17]);
    let version = u32::from_le_bytes(version);
    if version != FORMAT_VERSION {
        return Err(SavedModelError::Version {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[17..25]);
    let len = u64::from_le_bytes(len);
    let expected = (HEADER as u64)
        .saturating_add(len)
        .saturating_add(CHECKSUM as u64);
    let actual = bytes.len() as u64;
    if actual < expected {
        return Err(SavedModelError::Truncated { expected, actual });
    }
    if actual > expected {
        return Err(SavedModelError::Trailing {
            extra: actual - expected,
        });
    }
    let body = &bytes[HEADER..HEADER + len as usize];
    let sum = &bytes[HEADER + len as usize..];
    if Sha256::digest(body).as_slice() != sum {
        return Err(SavedModelError::Checksum);
    }
    Ok(body)
}
