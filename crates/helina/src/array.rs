//! Arrays in and out: `.npy` files (numpy's format), and batches of samples checked
//! against a model's input shape.

use crate::error::{Error, Result};

fn open(path: &str) -> Result<npyz::NpyFile<std::io::BufReader<std::fs::File>>> {
    let f = std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })?;
    npyz::NpyFile::new(std::io::BufReader::new(f)).map_err(|e| Error::Array {
        path: path.into(),
        detail: e.to_string(),
    })
}

/// An `.npy` of float32 or float64: its shape and values (float64 rounded to f32).
/// Non-finite values are kept: the client refuses them with the element's index.
pub fn read_f32(path: &str) -> Result<(Vec<usize>, Vec<f32>)> {
    let shape: Vec<usize> = open(path)?.shape().iter().map(|&d| d as usize).collect();
    let data: Vec<f32> = match open(path)?.into_vec::<f32>() {
        Ok(v) => v,
        Err(_) => open(path)?
            .into_vec::<f64>()
            .map_err(|_| Error::Array {
                path: path.into(),
                detail: "expected float32 or float64".into(),
            })?
            .into_iter()
            .map(|v| v as f32)
            .collect(),
    };
    Ok((shape, data))
}

/// An `.npy` of integers (int32, int64, or floats that are whole numbers below 2^62).
pub fn read_i64(path: &str) -> Result<Vec<i64>> {
    if let Ok(v) = open(path)?.into_vec::<i64>() {
        return Ok(v);
    }
    if let Ok(v) = open(path)?.into_vec::<i32>() {
        return Ok(v.into_iter().map(i64::from).collect());
    }
    let check = |f: f64| -> Result<i64> {
        if f.is_finite() && f.abs() < 2f64.powi(62) {
            Ok(f.round() as i64)
        } else {
            Err(Error::Array {
                path: path.into(),
                detail: format!("value {f} is not a representable integer"),
            })
        }
    };
    if let Ok(v) = open(path)?.into_vec::<f64>() {
        return v.into_iter().map(check).collect();
    }
    if let Ok(v) = open(path)?.into_vec::<f32>() {
        return v.into_iter().map(|f| check(f as f64)).collect();
    }
    Err(Error::Array {
        path: path.into(),
        detail: "expected an .npy of int32, int64, float32 or float64".into(),
    })
}

/// Splits `data` of shape `shape` into samples of the model's input shape `sample`:
/// `shape` is `[batch, ...sample]`, or `sample` itself (one sample).
pub fn batch(shape: &[usize], data: &[f32], sample: &[usize]) -> Result<Vec<Vec<f32>>> {
    let len: usize = sample.iter().product();
    let batched = shape.len() == sample.len() + 1 && shape[1..] == *sample;
    if !(batched || shape == sample) || len == 0 || data.len() != shape.iter().product::<usize>() {
        return Err(Error::InputShape {
            expected: sample.to_vec(),
            actual: shape.to_vec(),
        });
    }
    Ok(data.chunks(len).map(<[f32]>::to_vec).collect())
}

/// An `.npy` batch for a model with input shape `sample` (see [`batch`]).
pub fn read_batch(path: &str, sample: &[usize]) -> Result<Vec<Vec<f32>>> {
    let (shape, data) = read_f32(path)?;
    batch_from(path, &shape, &data, sample)
}

/// [`batch`] of the array [`read_f32`] read from `path`, a shape that does not fit the
/// model reported as an error of that file.
pub fn batch_from(
    path: &str,
    shape: &[usize],
    data: &[f32],
    sample: &[usize],
) -> Result<Vec<Vec<f32>>> {
    batch(shape, data, sample).map_err(|e| match e {
        Error::InputShape { expected, actual } => Error::Array {
            path: path.into(),
            detail: format!(
                "shape {actual:?}; the model takes [batch, {}]",
                expected
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
        e => e,
    })
}

/// An `.npy` batch whose sample shape is not known yet (a client of a remote model:
/// the server's plan says it): the first dimension is the batch.
pub fn read_batch_any(path: &str) -> Result<Vec<Vec<f32>>> {
    let (shape, data) = read_f32(path)?;
    let len: usize = shape.iter().skip(1).product();
    if shape.len() < 2 || len == 0 {
        return Err(Error::Array {
            path: path.into(),
            detail: format!("shape {shape:?}; expected [batch, ...input shape]"),
        });
    }
    Ok(data.chunks(len).map(<[f32]>::to_vec).collect())
}
