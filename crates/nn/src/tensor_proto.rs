//! ONNX tensors as the importer reads them: initializers and `Constant` values (raw or
//! typed data, external data files beside the model), class-label strings, and
//! broadcasting of a constant to an activation's shape.

use std::path::Path;

use tract_onnx::pb::{self, tensor_proto::DataType};

use crate::error::NnError;
use crate::head::{HeadData, HeadValue};

/// Bytes per element of the tensor types the importer reads.
fn element_bytes(data_type: i32) -> Option<u64> {
    match DataType::from_i32(data_type)? {
        DataType::Float | DataType::Int32 => Some(4),
        DataType::Double | DataType::Int64 => Some(8),
        _ => None,
    }
}

/// Moves a tensor's external data (ONNX `external_data`: `location` relative to the
/// model's directory, optional `offset` and `length`) into `raw_data`. The location
/// must stay inside the directory (no absolute path, no `..`), and exactly the bytes
/// the tensor's dimensions call for are read, checked against the file's size first.
pub(crate) fn load_external_data(t: &mut pb::TensorProto, dir: &Path) -> Result<(), NnError> {
    if t.data_location != Some(pb::tensor_proto::DataLocation::External as i32) {
        return Ok(());
    }
    let err = |reason: String| NnError::Initializer {
        name: t.name.clone(),
        reason,
    };
    let key = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.as_str())
    };
    let location = key("location").ok_or_else(|| err("external data without a location".into()))?;
    let rel = Path::new(location);
    if location.is_empty()
        || rel.is_absolute()
        || rel.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return Err(err(format!(
            "external data location {location:?}: a path inside the model's directory is needed"
        )));
    }
    let number = |k: &str| -> Result<Option<u64>, NnError> {
        key(k)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| err(format!("external data {k} {v:?} is not a byte count")))
            })
            .transpose()
    };
    let offset = number("offset")?.unwrap_or(0);
    let numel = t.dims.iter().try_fold(1u64, |acc, &d| {
        u64::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    });
    let expected = element_bytes(t.data_type)
        .zip(numel)
        .and_then(|(b, n)| b.checked_mul(n))
        .ok_or_else(|| {
            err(format!(
                "external data of element type {} and dims {:?} cannot be read (FLOAT, DOUBLE, INT64, INT32 can)",
                t.data_type, t.dims
            ))
        })?;
    let length = number("length")?.unwrap_or(expected);
    if length != expected {
        return Err(err(format!(
            "external data length {length} bytes; dims {:?} call for {expected}",
            t.dims
        )));
    }
    let file = dir.join(rel);
    let io = |source: std::io::Error| NnError::Io {
        path: file.display().to_string(),
        source,
    };
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&file).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(err(format!(
            "external data bytes {offset}..{offset}+{length} lie beyond the end of {} ({size} bytes)",
            file.display()
        )));
    }
    let len =
        usize::try_from(length).map_err(|_| err(format!("{length} bytes do not fit in memory")))?;
    let mut raw = vec![0u8; len];
    f.seek(SeekFrom::Start(offset)).map_err(io)?;
    f.read_exact(&mut raw).map_err(io)?;
    t.raw_data = raw;
    t.external_data.clear();
    t.data_location = Some(pb::tensor_proto::DataLocation::Default as i32);
    Ok(())
}

/// A constant value: float data with its dims, or integers (shape arithmetic, indices).
#[derive(Clone, Debug)]
pub(crate) enum Const {
    /// Floats (FLOAT, DOUBLE) with their dims.
    F32 { dims: Vec<usize>, data: Vec<f32> },
    /// Integers (INT64, INT32), flat.
    I64(Vec<i64>),
}

/// A STRING tensor (class labels) as a head constant.
pub(crate) fn string_tensor(t: &pb::TensorProto) -> Result<HeadValue, String> {
    let shape: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<_, _>>()?;
    let data: Vec<String> = t
        .string_data
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    if shape.iter().product::<usize>() != data.len() {
        return Err(format!(
            "string tensor {}: {} values for dims {:?}",
            t.name,
            data.len(),
            t.dims
        ));
    }
    Ok(HeadValue {
        shape,
        data: HeadData::Str(data),
    })
}

/// `c` (dims `dims`) broadcast to `shape` (numpy rules, right-aligned); `None` when it
/// does not broadcast.
pub(crate) fn broadcast_const(dims: &[usize], c: &[f32], shape: &[usize]) -> Option<Vec<f32>> {
    if dims.len() > shape.len() || dims.iter().product::<usize>() != c.len() {
        return None;
    }
    let off = shape.len() - dims.len();
    if dims
        .iter()
        .zip(&shape[off..])
        .any(|(&d, &s)| d != 1 && d != s)
    {
        return None;
    }
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    for flat in 0..n {
        let (mut rem, mut idx, mut stride) = (flat, 0usize, 1usize);
        let mut coords = vec![0usize; shape.len()];
        for a in (0..shape.len()).rev() {
            coords[a] = rem % shape[a];
            rem /= shape[a];
        }
        for a in (0..dims.len()).rev() {
            let cdx = if dims[a] == 1 { 0 } else { coords[off + a] };
            idx += cdx * stride;
            stride *= dims[a];
        }
        out.push(c[idx]);
    }
    Some(out)
}

fn le_chunks<const N: usize>(raw: &[u8], name: &str) -> Result<Vec<[u8; N]>, NnError> {
    if !raw.len().is_multiple_of(N) {
        return Err(NnError::Initializer {
            name: name.into(),
            reason: format!("raw_data length {} is not a multiple of {N}", raw.len()),
        });
    }
    Ok(raw
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        })
        .collect())
}

pub(crate) fn load_tensor(t: &pb::TensorProto, fallback_name: &str) -> Result<Const, NnError> {
    let name = if t.name.is_empty() {
        fallback_name
    } else {
        &t.name
    };
    let err = |reason: String| NnError::Initializer {
        name: name.into(),
        reason,
    };
    if t.data_location == Some(pb::tensor_proto::DataLocation::External as i32) {
        return Err(err(
            "the tensor's data lies in an external file: import the model from its path (nn::import), beside that file".into(),
        ));
    }
    let dims = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| err(format!("negative dimension {d}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let numel: usize = dims.iter().product();
    let raw = !t.raw_data.is_empty();
    let c = match DataType::from_i32(t.data_type).ok_or(()) {
        Ok(DataType::Float) => Const::F32 {
            data: if raw {
                le_chunks::<4>(&t.raw_data, name)?
                    .into_iter()
                    .map(f32::from_le_bytes)
                    .collect()
            } else {
                t.float_data.clone()
            },
            dims,
        },
        Ok(DataType::Double) => Const::F32 {
            data: if raw {
                le_chunks::<8>(&t.raw_data, name)?
                    .into_iter()
                    .map(|b| f64::from_le_bytes(b) as f32)
                    .collect()
            } else {
                t.double_data.iter().map(|&v| v as f32).collect()
            },
            dims,
        },
        Ok(DataType::Int64) => Const::I64(if raw {
            le_chunks::<8>(&t.raw_data, name)?
                .into_iter()
                .map(i64::from_le_bytes)
                .collect()
        } else {
            t.int64_data.clone()
        }),
        Ok(DataType::Int32) => Const::I64(if raw {
            le_chunks::<4>(&t.raw_data, name)?
                .into_iter()
                .map(|b| i32::from_le_bytes(b) as i64)
                .collect()
        } else {
            t.int32_data.iter().map(|&v| v as i64).collect()
        }),
        _ => {
            return Err(err(format!(
                "element type {} is not supported (FLOAT, DOUBLE, INT64, INT32 are)",
                t.data_type
            )))
        }
    };
    let len = match &c {
        Const::F32 { data, .. } => data.len(),
        Const::I64(v) => v.len(),
    };
    if len != numel {
        return Err(err(format!(
            "{len} values for dims {:?} ({numel} expected)",
            t.dims
        )));
    }
    Ok(c)
}

// ---------------------------------------------------------------------------------------
// pass 2
