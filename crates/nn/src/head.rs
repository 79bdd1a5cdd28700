//! Output heads: what an ONNX graph computes after its last private tensor — Softmax,
//! LogSoftmax, Sigmoid, ArgMax/ArgMin, TopK, a label lookup from a constant class table
//! (`ArrayFeatureExtractor`), casts, reshapes, elementwise arithmetic with constants,
//! Concat — evaluated by the client on its revealed output, exactly as ONNX defines
//! them. The server never sees the head; the head travels in the plan (it is part of the
//! public architecture: a class table becomes public).
//!
//! Values keep ONNX's full shapes, batch axis included (always 1: one input at a time),
//! so axes mean what the graph says.

use serde::{Deserialize, Serialize};

use crate::error::NnError;

/// The elements of a head value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum HeadData {
    /// Floating point (FLOAT or DOUBLE in the graph).
    F32(Vec<f32>),
    /// Integers (INT64 or INT32).
    I64(Vec<i64>),
    /// Strings (class labels).
    Str(Vec<String>),
}

impl HeadData {
    pub(crate) fn len(&self) -> usize {
        match self {
            HeadData::F32(v) => v.len(),
            HeadData::I64(v) => v.len(),
            HeadData::Str(v) => v.len(),
        }
    }
    /// The element type's name (`float32`, `int64`, `string`).
    pub fn dtype(&self) -> &'static str {
        match self {
            HeadData::F32(_) => "float32",
            HeadData::I64(_) => "int64",
            HeadData::Str(_) => "string",
        }
    }
    /// Elements `idx` in that order.
    fn pick(&self, idx: &[usize]) -> HeadData {
        match self {
            HeadData::F32(v) => HeadData::F32(idx.iter().map(|&i| v[i]).collect()),
            HeadData::I64(v) => HeadData::I64(idx.iter().map(|&i| v[i]).collect()),
            HeadData::Str(v) => HeadData::Str(idx.iter().map(|&i| v[i].clone()).collect()),
        }
    }
}

/// A tensor of the head: ONNX shape (batch axis included) and data, row-major.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeadValue {
    /// Shape.
    pub shape: Vec<usize>,
    /// Elements.
    pub data: HeadData,
}

impl HeadValue {
    fn new(shape: Vec<usize>, data: HeadData) -> Result<Self, String> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(format!("{} values for shape {shape:?}", data.len()));
        }
        Ok(HeadValue { shape, data })
    }
}

/// Where a head node reads an input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum HeadSrc {
    /// The network's (private, then revealed) output, shape `[1, ...]`.
    Output,
    /// A value computed by an earlier head node.
    Value(usize),
    /// A constant of the graph.
    Const(HeadValue),
}

/// Elementwise arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arith {
    /// `a + b`.
    Add,
    /// `a − b`.
    Sub,
    /// `a · b`.
    Mul,
    /// `a / b`.
    Div,
}

/// The element types a `Cast` may produce in a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CastTo {
    /// FLOAT / DOUBLE.
    Float,
    /// INT64 / INT32 (from float: toward zero, as ONNX Runtime casts).
    Int,
}

/// A head operation (ONNX semantics; axes may be negative).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum HeadOp {
    /// Copy.
    Identity,
    /// `exp(x − max) / Σ exp(x − max)` along `axis`; `coerce_2d` is the opset < 13
    /// rule (the tensor seen as `[prod(..axis), prod(axis..)]`).
    Softmax {
        /// Axis.
        axis: i64,
        /// Opset < 13 semantics.
        coerce_2d: bool,
    },
    /// `log(softmax)`.
    LogSoftmax {
        /// Axis.
        axis: i64,
        /// Opset < 13 semantics.
        coerce_2d: bool,
    },
    /// `1 / (1 + exp(−x))`.
    Sigmoid,
    /// Index of the largest (`max`) or smallest element along `axis`, int64.
    ArgExtreme {
        /// ArgMax (else ArgMin).
        max: bool,
        /// Axis.
        axis: i64,
        /// Keep the reduced axis (size 1).
        keepdims: bool,
        /// The last index of equal extremes (else the first).
        select_last_index: bool,
    },
    /// The `k` largest (or smallest) elements along `axis` and their indices (two
    /// outputs); `k` is the second input (a constant).
    TopK {
        /// Axis.
        axis: i64,
        /// Largest (else smallest).
        largest: bool,
    },
    /// `ai.onnx.ml` ArrayFeatureExtractor: elements of input 0 (along its last axis) at
    /// the indices of input 1.
    ArrayFeatureExtractor,
    /// A new shape (ONNX `Reshape` rules: `-1` inferred, `0` copies unless `allowzero`).
    Reshape {
        /// Target.
        shape: Vec<i64>,
        /// `0` means zero.
        allowzero: bool,
    },
    /// `[prod(..axis), prod(axis..)]`.
    Flatten {
        /// Axis.
        axis: i64,
    },
    /// Removes the given size-1 axes (all of them when `None`).
    Squeeze {
        /// Axes.
        axes: Option<Vec<i64>>,
    },
    /// Inserts size-1 axes at the given output positions.
    Unsqueeze {
        /// Axes.
        axes: Vec<i64>,
    },
    /// A new element type.
    Cast {
        /// Target type.
        to: CastTo,
    },
    /// Elementwise with numpy broadcasting.
    Arith {
        /// Operation.
        op: Arith,
    },
    /// Concatenation along `axis`.
    Concat {
        /// Axis.
        axis: i64,
    },
}

/// `outputs = op(inputs)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeadNode {
    /// The ONNX node's name (for errors).
    pub name: String,
    /// The operation.
    pub op: HeadOp,
    /// Inputs.
    pub inputs: Vec<HeadSrc>,
    /// Value ids written (one, or two for TopK).
    pub outputs: Vec<usize>,
}

/// The client's part of a graph: nodes in order and the graph's outputs by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Head {
    /// Nodes in topological order.
    pub nodes: Vec<HeadNode>,
    /// Values the nodes write (ids `0..values`).
    pub values: usize,
    /// The graph's outputs, in graph order.
    pub outputs: Vec<(String, HeadSrc)>,
}

/// A graph output as the client computed it. In reports it reads
/// `{"name": …, "shape": […], "dtype": "int64"|"float32"|"string", "values": […]}`.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphOutput {
    /// The output's name in the graph.
    pub name: String,
    /// Its value.
    pub value: HeadValue,
}

impl Serialize for GraphOutput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("GraphOutput", 4)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("shape", &self.value.shape)?;
        st.serialize_field("dtype", self.value.data.dtype())?;
        match &self.value.data {
            HeadData::F32(v) => st.serialize_field("values", v)?,
            HeadData::I64(v) => st.serialize_field("values", v)?,
            HeadData::Str(v) => st.serialize_field("values", v)?,
        }
        st.end()
    }
}

fn axis_of(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} out of range for rank {rank}"))
    }
}

/// (outer, len, inner) around `axis`.
fn split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

fn floats(v: &HeadValue) -> Result<&[f32], String> {
    match &v.data {
        HeadData::F32(x) => Ok(x),
        d => Err(format!("a float tensor is needed, got {}", d.dtype())),
    }
}

fn ints(v: &HeadValue) -> Result<&[i64], String> {
    match &v.data {
        HeadData::I64(x) => Ok(x),
        d => Err(format!("an integer tensor is needed, got {}", d.dtype())),
    }
}

fn softmax(v: &HeadValue, axis: i64, coerce_2d: bool, log: bool) -> Result<HeadValue, String> {
    let x = floats(v)?;
    let a = axis_of(axis, v.shape.len())?;
    let (outer, len, inner) = if coerce_2d {
        (
            v.shape[..a].iter().product(),
            v.shape[a..].iter().product(),
            1,
        )
    } else {
        split(&v.shape, a)
    };
    let mut y = vec![0f32; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * len * inner + j * inner + i;
            let m = (0..len).map(|j| x[at(j)]).fold(f32::NEG_INFINITY, f32::max);
            let sum: f64 = (0..len).map(|j| ((x[at(j)] - m) as f64).exp()).sum();
            for j in 0..len {
                let d = (x[at(j)] - m) as f64;
                y[at(j)] = if log {
                    (d - sum.ln()) as f32
                } else {
                    (d.exp() / sum) as f32
                };
            }
        }
    }
    HeadValue::new(v.shape.clone(), HeadData::F32(y))
}

/// Ordering of two elements for ArgMax/TopK (floats or ints).
fn cmp_at(d: &HeadData, a: usize, b: usize) -> Result<std::cmp::Ordering, String> {
    match d {
        HeadData::F32(v) => Ok(v[a].total_cmp(&v[b])),
        HeadData::I64(v) => Ok(v[a].cmp(&v[b])),
        HeadData::Str(_) => Err("ordering of strings is not supported".into()),
    }
}

fn arg_extreme(
    v: &HeadValue,
    max: bool,
    axis: i64,
    keepdims: bool,
    last: bool,
) -> Result<HeadValue, String> {
    let a = axis_of(axis, v.shape.len())?;
    let (outer, len, inner) = split(&v.shape, a);
    if len == 0 {
        return Err("arg-extreme over an empty axis".into());
    }
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * len * inner + j * inner + i;
            let mut best = 0;
            for j in 1..len {
                let c = cmp_at(&v.data, at(j), at(best))?;
                let c = if max { c } else { c.reverse() };
                if c.is_gt() || (last && c.is_eq()) {
                    best = j;
                }
            }
            out.push(best as i64);
        }
    }
    let mut shape = v.shape.clone();
    if keepdims {
        shape[a] = 1;
    } else {
        shape.remove(a);
    }
    HeadValue::new(shape, HeadData::I64(out))
}

fn top_k(v: &HeadValue, k: i64, axis: i64, largest: bool) -> Result<[HeadValue; 2], String> {
    let a = axis_of(axis, v.shape.len())?;
    let (outer, len, inner) = split(&v.shape, a);
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= len)
        .ok_or_else(|| format!("k = {k} for an axis of {len}"))?;
    let mut idx_out = Vec::with_capacity(outer * k * inner);
    let mut pos = Vec::with_capacity(outer * k * inner);
    let mut order_err = None;
    for o in 0..outer {
        let mut block = vec![(0usize, 0i64); k * inner];
        for i in 0..inner {
            let at = |j: usize| o * len * inner + j * inner + i;
            let mut js: Vec<usize> = (0..len).collect();
            // stable: equal elements keep the lower index first, as ONNX Runtime does
            js.sort_by(|&x, &y| match cmp_at(&v.data, at(x), at(y)) {
                Ok(c) => {
                    if largest {
                        c.reverse()
                    } else {
                        c
                    }
                }
                Err(e) => {
                    order_err = Some(e);
                    std::cmp::Ordering::Equal
                }
            });
            for (r, &j) in js.iter().take(k).enumerate() {
                block[r * inner + i] = (at(j), j as i64);
            }
        }
        for (p, j) in block {
            pos.push(p);
            idx_out.push(j);
        }
    }
    if let Some(e) = order_err {
        return Err(e);
    }
    let mut shape = v.shape.clone();
    shape[a] = k;
    Ok([
        HeadValue::new(shape.clone(), v.data.pick(&pos))?,
        HeadValue::new(shape, HeadData::I64(idx_out))?,
    ])
}

fn reshape(v: &HeadValue, target: &[i64], allowzero: bool) -> Result<HeadValue, String> {
    let n: usize = v.shape.iter().product();
    let mut dims: Vec<Option<usize>> = Vec::new();
    for (i, &d) in target.iter().enumerate() {
        dims.push(match d {
            -1 => None,
            0 if !allowzero => Some(
                *v.shape
                    .get(i)
                    .ok_or_else(|| format!("shape {target:?}: 0 at {i} has no input axis"))?,
            ),
            d if d >= 0 => Some(d as usize),
            d => return Err(format!("shape {target:?}: invalid value {d}")),
        });
    }
    let known: usize = dims.iter().flatten().product();
    let shape: Vec<usize> = match dims.iter().filter(|d| d.is_none()).count() {
        0 => dims.iter().flatten().copied().collect(),
        1 if known > 0 && n.is_multiple_of(known) => {
            dims.iter().map(|d| d.unwrap_or(n / known)).collect()
        }
        _ => return Err(format!("shape {target:?} cannot hold {n} elements")),
    };
    HeadValue::new(shape, v.data.clone())
}

fn squeeze(v: &HeadValue, axes: &Option<Vec<i64>>) -> Result<HeadValue, String> {
    let shape = match axes {
        None => v.shape.iter().copied().filter(|&d| d != 1).collect(),
        Some(axes) => {
            let mut drop = vec![false; v.shape.len()];
            for &a in axes {
                let a = axis_of(a, v.shape.len())?;
                if v.shape[a] != 1 {
                    return Err(format!("axis {a} has size {}, not 1", v.shape[a]));
                }
                drop[a] = true;
            }
            v.shape
                .iter()
                .zip(drop)
                .filter(|(_, d)| !d)
                .map(|(s, _)| *s)
                .collect()
        }
    };
    HeadValue::new(shape, v.data.clone())
}

fn unsqueeze(v: &HeadValue, axes: &[i64]) -> Result<HeadValue, String> {
    let rank = v.shape.len() + axes.len();
    let mut at: Vec<usize> = axes
        .iter()
        .map(|&a| axis_of(a, rank))
        .collect::<Result<_, _>>()?;
    at.sort_unstable();
    at.dedup();
    if at.len() != axes.len() {
        return Err(format!("repeated axes {axes:?}"));
    }
    let mut shape = Vec::with_capacity(rank);
    let mut src = v.shape.iter();
    for i in 0..rank {
        if at.contains(&i) {
            shape.push(1);
        } else {
            shape.push(*src.next().ok_or("axes out of range")?);
        }
    }
    HeadValue::new(shape, v.data.clone())
}

fn cast(v: &HeadValue, to: CastTo) -> Result<HeadValue, String> {
    let data = match (&v.data, to) {
        (HeadData::F32(x), CastTo::Float) => HeadData::F32(x.clone()),
        (HeadData::I64(x), CastTo::Float) => HeadData::F32(x.iter().map(|&v| v as f32).collect()),
        (HeadData::I64(x), CastTo::Int) => HeadData::I64(x.clone()),
        (HeadData::F32(x), CastTo::Int) => {
            if let Some(bad) = x.iter().find(|v| !v.is_finite()) {
                return Err(format!("cast of {bad} to an integer"));
            }
            HeadData::I64(x.iter().map(|&v| v.trunc() as i64).collect())
        }
        (HeadData::Str(_), _) => return Err("casts of strings are not supported".into()),
    };
    HeadValue::new(v.shape.clone(), data)
}

/// The output shape of a broadcast and, per output element, the indices into a and b.
type Broadcast = (Vec<usize>, Vec<(usize, usize)>);

/// numpy broadcasting of two shapes; for each output element the indices into a and b.
fn broadcast(a: &[usize], b: &[usize]) -> Result<Broadcast, String> {
    let r = a.len().max(b.len());
    let pad = |s: &[usize]| -> Vec<usize> {
        let mut v = vec![1; r - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (pa, pb) = (pad(a), pad(b));
    let mut out = Vec::with_capacity(r);
    for (x, y) in pa.iter().zip(&pb) {
        out.push(match (x, y) {
            (x, y) if x == y => *x,
            (1, y) => *y,
            (x, 1) => *x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        });
    }
    let n: usize = out.iter().product();
    let strides = |s: &[usize]| -> Vec<usize> {
        let mut st = vec![0; r];
        let mut acc = 1;
        for i in (0..r).rev() {
            st[i] = if s[i] == 1 { 0 } else { acc };
            acc *= s[i];
        }
        st
    };
    let (sa, sb) = (strides(&pa), strides(&pb));
    let mut idx = Vec::with_capacity(n);
    let mut coord = vec![0usize; r];
    for _ in 0..n {
        let ia = coord.iter().zip(&sa).map(|(c, s)| c * s).sum();
        let ib = coord.iter().zip(&sb).map(|(c, s)| c * s).sum();
        idx.push((ia, ib));
        for i in (0..r).rev() {
            coord[i] += 1;
            if coord[i] < out[i] {
                break;
            }
            coord[i] = 0;
        }
    }
    Ok((out, idx))
}

fn arith(a: &HeadValue, b: &HeadValue, op: Arith) -> Result<HeadValue, String> {
    let (shape, idx) = broadcast(&a.shape, &b.shape)?;
    let data = match (&a.data, &b.data) {
        (HeadData::F32(x), HeadData::F32(y)) => HeadData::F32(
            idx.iter()
                .map(|&(i, j)| match op {
                    Arith::Add => x[i] + y[j],
                    Arith::Sub => x[i] - y[j],
                    Arith::Mul => x[i] * y[j],
                    Arith::Div => x[i] / y[j],
                })
                .collect(),
        ),
        (HeadData::I64(x), HeadData::I64(y)) => HeadData::I64(
            idx.iter()
                .map(|&(i, j)| match op {
                    Arith::Add => Ok(x[i].wrapping_add(y[j])),
                    Arith::Sub => Ok(x[i].wrapping_sub(y[j])),
                    Arith::Mul => Ok(x[i].wrapping_mul(y[j])),
                    Arith::Div => x[i]
                        .checked_div(y[j])
                        .ok_or_else(|| "integer division by zero".to_string()),
                })
                .collect::<Result<_, _>>()?,
        ),
        (x, y) => {
            return Err(format!(
                "arithmetic of {} and {} tensors",
                x.dtype(),
                y.dtype()
            ))
        }
    };
    HeadValue::new(shape, data)
}

fn concat(vs: &[&HeadValue], axis: i64) -> Result<HeadValue, String> {
    let first = vs.first().ok_or("Concat of nothing")?;
    let a = axis_of(axis, first.shape.len())?;
    for v in vs {
        let same_rest = v.shape.len() == first.shape.len()
            && v.shape
                .iter()
                .zip(&first.shape)
                .enumerate()
                .all(|(i, (x, y))| i == a || x == y);
        if !same_rest || std::mem::discriminant(&v.data) != std::mem::discriminant(&first.data) {
            return Err(format!(
                "Concat of {:?} ({}) and {:?} ({})",
                first.shape,
                first.data.dtype(),
                v.shape,
                v.data.dtype()
            ));
        }
    }
    let outer: usize = first.shape[..a].iter().product();
    let inner: usize = first.shape[a + 1..].iter().product();
    let mut shape = first.shape.clone();
    shape[a] = vs.iter().map(|v| v.shape[a]).sum();
    let mut parts: Vec<(usize, usize)> = Vec::new(); // (value, element)
    for o in 0..outer {
        for (k, v) in vs.iter().enumerate() {
            let block = v.shape[a] * inner;
            parts.extend((0..block).map(|e| (k, o * block + e)));
        }
    }
    let data = match &first.data {
        HeadData::F32(_) => HeadData::F32(
            parts
                .iter()
                .map(|&(k, e)| floats(vs[k]).map(|x| x[e]))
                .collect::<Result<_, _>>()?,
        ),
        HeadData::I64(_) => HeadData::I64(
            parts
                .iter()
                .map(|&(k, e)| ints(vs[k]).map(|x| x[e]))
                .collect::<Result<_, _>>()?,
        ),
        HeadData::Str(_) => HeadData::Str(
            parts
                .iter()
                .map(|&(k, e)| match &vs[k].data {
                    HeadData::Str(x) => Ok(x[e].clone()),
                    _ => Err("mixed types".to_string()),
                })
                .collect::<Result<_, _>>()?,
        ),
    };
    HeadValue::new(shape, data)
}

fn feature_extract(table: &HeadValue, indices: &HeadValue) -> Result<HeadValue, String> {
    let idx = ints(indices)?;
    let last = *table.shape.last().ok_or("an empty table")?;
    let outer: usize = table.shape[..table.shape.len() - 1].iter().product();
    let mut pos = Vec::with_capacity(outer * idx.len());
    for o in 0..outer {
        for &i in idx {
            let i = usize::try_from(i)
                .ok()
                .filter(|&i| i < last)
                .ok_or_else(|| format!("index {i} outside a table of {last}"))?;
            pos.push(o * last + i);
        }
    }
    // ONNX Runtime: a 1-D table gives [1, indices]; else the table's leading axes
    let shape = if table.shape.len() == 1 {
        vec![1, idx.len()]
    } else {
        let mut s = table.shape[..table.shape.len() - 1].to_vec();
        s.push(idx.len());
        s
    };
    HeadValue::new(shape, table.data.pick(&pos))
}

impl Head {
    /// Whether the head does anything beyond naming the output.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Evaluates the head on one input's revealed output (`output`, shape
    /// `output_shape` without batch) and returns the graph's outputs in graph order.
    pub fn eval(
        &self,
        output: &[f32],
        output_shape: &[usize],
    ) -> Result<Vec<GraphOutput>, NnError> {
        let mut shape = vec![1];
        shape.extend_from_slice(output_shape);
        let out = HeadValue::new(shape, HeadData::F32(output.to_vec())).map_err(|reason| {
            NnError::Graph {
                node: "<head>".into(),
                op: "output".into(),
                reason,
            }
        })?;
        let mut values: Vec<Option<HeadValue>> = vec![None; self.values];
        let get = |values: &[Option<HeadValue>], s: &HeadSrc| -> Result<HeadValue, String> {
            match s {
                HeadSrc::Output => Ok(out.clone()),
                HeadSrc::Const(c) => Ok(c.clone()),
                HeadSrc::Value(i) => values
                    .get(*i)
                    .and_then(|v| v.clone())
                    .ok_or_else(|| format!("value {i} is read before it is written")),
            }
        };
        for n in &self.nodes {
            let err = |reason: String| NnError::Graph {
                node: n.name.clone(),
                op: format!("{:?}", n.op)
                    .split([' ', '{', '('])
                    .next()
                    .unwrap_or("head")
                    .to_string(),
                reason,
            };
            let ins = n
                .inputs
                .iter()
                .map(|s| get(&values, s))
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?;
            let one = |i: usize| ins.get(i).ok_or_else(|| format!("missing input {i}"));
            let res: Result<Vec<HeadValue>, String> = (|| {
                Ok(match &n.op {
                    HeadOp::Identity => vec![one(0)?.clone()],
                    HeadOp::Softmax { axis, coerce_2d } => {
                        vec![softmax(one(0)?, *axis, *coerce_2d, false)?]
                    }
                    HeadOp::LogSoftmax { axis, coerce_2d } => {
                        vec![softmax(one(0)?, *axis, *coerce_2d, true)?]
                    }
                    HeadOp::Sigmoid => {
                        let v = one(0)?;
                        let y = floats(v)?
                            .iter()
                            .map(|&x| (1.0 / (1.0 + (-(x as f64)).exp())) as f32)
                            .collect();
                        vec![HeadValue::new(v.shape.clone(), HeadData::F32(y))?]
                    }
                    HeadOp::ArgExtreme {
                        max,
                        axis,
                        keepdims,
                        select_last_index,
                    } => vec![arg_extreme(
                        one(0)?,
                        *max,
                        *axis,
                        *keepdims,
                        *select_last_index,
                    )?],
                    HeadOp::TopK { axis, largest } => {
                        let k = match ints(one(1)?)? {
                            [k] => *k,
                            k => return Err(format!("k must be one integer, got {k:?}")),
                        };
                        top_k(one(0)?, k, *axis, *largest)?.to_vec()
                    }
                    HeadOp::ArrayFeatureExtractor => vec![feature_extract(one(0)?, one(1)?)?],
                    HeadOp::Reshape { shape, allowzero } => {
                        vec![reshape(one(0)?, shape, *allowzero)?]
                    }
                    HeadOp::Flatten { axis } => {
                        let v = one(0)?;
                        let r = v.shape.len() as i64;
                        let a = if *axis < 0 { axis + r } else { *axis };
                        if !(0..=r).contains(&a) {
                            return Err(format!("axis {axis} out of range for rank {r}"));
                        }
                        let a = a as usize;
                        let shape =
                            vec![v.shape[..a].iter().product(), v.shape[a..].iter().product()];
                        vec![HeadValue::new(shape, v.data.clone())?]
                    }
                    HeadOp::Squeeze { axes } => vec![squeeze(one(0)?, axes)?],
                    HeadOp::Unsqueeze { axes } => vec![unsqueeze(one(0)?, axes)?],
                    HeadOp::Cast { to } => vec![cast(one(0)?, *to)?],
                    HeadOp::Arith { op } => vec![arith(one(0)?, one(1)?, *op)?],
                    HeadOp::Concat { axis } => {
                        vec![concat(&ins.iter().collect::<Vec<_>>(), *axis)?]
                    }
                })
            })();
            let res = res.map_err(err)?;
            if res.len() < n.outputs.len() {
                return Err(err(format!(
                    "{} outputs computed, {} expected",
                    res.len(),
                    n.outputs.len()
                )));
            }
            for (&id, v) in n.outputs.iter().zip(res) {
                let slot = values
                    .get_mut(id)
                    .ok_or_else(|| err(format!("value id {id} out of range")))?;
                *slot = Some(v);
            }
        }
        self.outputs
            .iter()
            .map(|(name, s)| {
                get(&values, s)
                    .map(|value| GraphOutput {
                        name: name.clone(),
                        value,
                    })
                    .map_err(|reason| NnError::Graph {
                        node: "<head>".into(),
                        op: "output".into(),
                        reason: format!("{name}: {reason}"),
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn f(shape: &[usize], v: &[f32]) -> HeadValue {
        HeadValue::new(shape.to_vec(), HeadData::F32(v.to_vec())).unwrap()
    }

    #[test]
    fn softmax_argmax_and_label_lookup_as_skl2onnx_writes_them() {
        // Softmax → ArgMax(axis 1) → ArrayFeatureExtractor(classes) → Reshape(-1) → Cast
        let classes = HeadValue::new(vec![3], HeadData::I64(vec![10, 20, 30])).unwrap();
        let head = Head {
            nodes: vec![
                HeadNode {
                    name: "sm".into(),
                    op: HeadOp::Softmax {
                        axis: -1,
                        coerce_2d: false,
                    },
                    inputs: vec![HeadSrc::Output],
                    outputs: vec![0],
                },
                HeadNode {
                    name: "am".into(),
                    op: HeadOp::ArgExtreme {
                        max: true,
                        axis: 1,
                        keepdims: true,
                        select_last_index: false,
                    },
                    inputs: vec![HeadSrc::Value(0)],
                    outputs: vec![1],
                },
                HeadNode {
                    name: "afe".into(),
                    op: HeadOp::ArrayFeatureExtractor,
                    inputs: vec![HeadSrc::Const(classes), HeadSrc::Value(1)],
                    outputs: vec![2],
                },
                HeadNode {
                    name: "rs".into(),
                    op: HeadOp::Reshape {
                        shape: vec![-1],
                        allowzero: false,
                    },
                    inputs: vec![HeadSrc::Value(2)],
                    outputs: vec![3],
                },
            ],
            values: 4,
            outputs: vec![
                ("label".into(), HeadSrc::Value(3)),
                ("probabilities".into(), HeadSrc::Value(0)),
            ],
        };
        let out = head.eval(&[1.0, 3.0, 2.0], &[3]).unwrap();
        assert_eq!(
            out[0].value,
            HeadValue::new(vec![1], HeadData::I64(vec![20])).unwrap()
        );
        let HeadData::F32(p) = &out[1].value.data else {
            panic!()
        };
        let e: Vec<f64> = [1.0f64, 3.0, 2.0].iter().map(|x| (x - 3.0).exp()).collect();
        let s: f64 = e.iter().sum();
        for (a, b) in p.iter().zip(&e) {
            assert!((*a as f64 - b / s).abs() < 1e-6);
        }
        assert_eq!(out[1].value.shape, vec![1, 3]);
    }

    #[test]
    fn topk_concat_broadcast_and_casts() {
        let [v, i] = top_k(&f(&[1, 4], &[0.5, 2.0, 2.0, -1.0]), 2, -1, true).unwrap();
        assert_eq!(v, f(&[1, 2], &[2.0, 2.0]));
        assert_eq!(i.data, HeadData::I64(vec![1, 2]));
        let [_, small] = top_k(&f(&[1, 4], &[0.5, 2.0, 2.0, -1.0]), 1, 1, false).unwrap();
        assert_eq!(small.data, HeadData::I64(vec![3]));
        // 1 − p, p for a binary classifier
        let p = f(&[1, 1], &[0.25]);
        let one = f(&[], &[1.0]);
        let q = arith(&one, &p, Arith::Sub).unwrap();
        assert_eq!(concat(&[&q, &p], 1).unwrap(), f(&[1, 2], &[0.75, 0.25]));
        let per_col = arith(
            &f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
            &f(&[2], &[10.0, 100.0]),
            Arith::Mul,
        )
        .unwrap();
        assert_eq!(per_col, f(&[2, 2], &[10.0, 200.0, 30.0, 400.0]));
        assert!(arith(&f(&[3], &[1.0; 3]), &f(&[2], &[1.0; 2]), Arith::Add).is_err());
        assert_eq!(
            cast(&f(&[2], &[-1.7, 2.9]), CastTo::Int).unwrap().data,
            HeadData::I64(vec![-1, 2])
        );
        assert!(cast(&f(&[1], &[f32::NAN]), CastTo::Int).is_err());
        assert_eq!(
            squeeze(&f(&[1, 3, 1], &[1.0; 3]), &None).unwrap().shape,
            vec![3]
        );
        assert_eq!(
            unsqueeze(&f(&[3], &[1.0; 3]), &[0, -1]).unwrap().shape,
            vec![1, 3, 1]
        );
        assert_eq!(
            arg_extreme(&f(&[1, 3], &[2.0, 1.0, 2.0]), true, -1, false, true)
                .unwrap()
                .data,
            HeadData::I64(vec![2])
        );
    }

    #[test]
    fn bad_heads_are_errors_naming_the_node() {
        let head = Head {
            nodes: vec![HeadNode {
                name: "/argmax".into(),
                op: HeadOp::ArgExtreme {
                    max: true,
                    axis: 3,
                    keepdims: true,
                    select_last_index: false,
                },
                inputs: vec![HeadSrc::Output],
                outputs: vec![0],
            }],
            values: 1,
            outputs: vec![("y".into(), HeadSrc::Value(0))],
        };
        assert!(matches!(
            head.eval(&[1.0, 2.0], &[2]),
            Err(NnError::Graph { node, reason, .. }) if node == "/argmax" && reason.contains("axis 3")
        ));
    }
}
