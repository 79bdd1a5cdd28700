//! A writer of torch-export-like ONNX models (the prost types of `tract_onnx::pb`):
//! initializers named like torch's (`{module}.weight`, `{module}.bias`,
//! `{module}.running_mean`, …), Gemm with `transB = 1`, unfused BatchNormalization, a
//! symbolic batch dimension `batch_size`, node names `/{module}/{Op}`. Parameters are
//! drawn like torch's default initialisation (uniform in ±1/√fan_in) from a seeded
//! generator: these are test and benchmark models with public weights, never
//! private ones. Used by the tests and by [`crate::zoo`].

use prost::Message;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tract_onnx::pb::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto::dimension,
    tensor_shape_proto::Dimension, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// See the module doc.
pub fn f32_tensor(name: &str, dims: &[usize], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Float as i32,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// See the module doc.
pub fn i64_tensor(name: &str, dims: &[usize], data: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Int64 as i32,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// See the module doc.
pub fn a_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    }
}
/// See the module doc.
pub fn a_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}
/// See the module doc.
pub fn a_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Float as i32,
        f: v,
        ..Default::default()
    }
}
/// See the module doc.
pub fn a_str(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}
/// See the module doc.
pub fn a_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Tensor as i32,
        t: Some(t),
        ..Default::default()
    }
}

fn value_info(name: &str, dims: &[usize]) -> ValueInfoProto {
    let mut dim = vec![Dimension {
        denotation: String::new(),
        value: Some(dimension::Value::DimParam("batch_size".into())),
    }];
    dim.extend(dims.iter().map(|&d| Dimension {
        denotation: String::new(),
        value: Some(dimension::Value::DimValue(d as i64)),
    }));
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            denotation: String::new(),
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: DataType::Float as i32,
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
        doc_string: String::new(),
    }
}

/// A torch-export-like model under construction.
pub struct Mb {
    pub nodes: Vec<NodeProto>,
    pub inits: Vec<TensorProto>,
    pub rng: ChaCha8Rng,
}

impl Mb {
    /// See the module doc.
    pub fn new(seed: u64) -> Self {
        Mb {
            nodes: vec![],
            inits: vec![],
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Random U(-1/sqrt(fan_in), 1/sqrt(fan_in)) initializer (torch's default init).
    /// See the module doc.
    pub fn param(&mut self, name: &str, dims: &[usize], fan_in: usize) -> String {
        let n: usize = dims.iter().product();
        let b = 1.0 / (fan_in as f32).sqrt();
        let data: Vec<f32> = (0..n).map(|_| self.rng.random_range(-b..b)).collect();
        self.inits.push(f32_tensor(name, dims, &data));
        name.into()
    }

    /// See the module doc.
    pub fn uniform(&mut self, name: &str, n: usize, lo: f32, hi: f32) -> String {
        let data: Vec<f32> = (0..n).map(|_| self.rng.random_range(lo..hi)).collect();
        self.inits.push(f32_tensor(name, &[n], &data));
        name.into()
    }

    /// See the module doc.
    pub fn node(
        &mut self,
        op: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) {
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: name.into(),
            op_type: op.into(),
            domain: String::new(),
            attribute: attrs,
            doc_string: String::new(),
        });
    }

    /// torch Conv2d export: `{m}.weight`, `{m}.bias`, node `/{m}/Conv`, symmetric `pad`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv(
        &mut self,
        m: &str,
        x: &str,
        out: &str,
        c_i: usize,
        c_o: usize,
        k: usize,
        stride: usize,
        pad: usize,
        bias: bool,
    ) {
        self.conv_pads(m, x, out, c_i, c_o, k, stride, [pad; 4], bias);
    }

    /// [`Mb::conv`] with explicit ONNX `pads = [top, left, bottom, right]`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_pads(
        &mut self,
        m: &str,
        x: &str,
        out: &str,
        c_i: usize,
        c_o: usize,
        k: usize,
        stride: usize,
        pads: [usize; 4],
        bias: bool,
    ) {
        let w = self.param(&format!("{m}.weight"), &[c_o, c_i, k, k], c_i * k * k);
        let mut ins = vec![x.to_string(), w];
        if bias {
            ins.push(self.param(&format!("{m}.bias"), &[c_o], c_i * k * k));
        }
        let ins: Vec<&str> = ins.iter().map(String::as_str).collect();
        let k = k as i64;
        let s = stride as i64;
        let p: Vec<i64> = pads.iter().map(|&p| p as i64).collect();
        self.node(
            "Conv",
            &format!("/{m}/Conv"),
            &ins,
            &[out],
            vec![
                a_ints("dilations", &[1, 1]),
                a_int("group", 1),
                a_ints("kernel_shape", &[k, k]),
                a_ints("pads", &p),
                a_ints("strides", &[s, s]),
            ],
        );
    }

    /// torch MaxPool2d export (`ceil_mode = 0`), node `/{m}/MaxPool`, symmetric `pad`
    /// (padded positions take no part in the max).
    pub fn max_pool(&mut self, m: &str, x: &str, out: &str, k: usize, stride: usize, pad: usize) {
        let (k, s, p) = (k as i64, stride as i64, pad as i64);
        self.node(
            "MaxPool",
            &format!("/{m}/MaxPool"),
            &[x],
            &[out],
            vec![
                a_int("ceil_mode", 0),
                a_ints("dilations", &[1, 1]),
                a_ints("kernel_shape", &[k, k]),
                a_ints("pads", &[p, p, p, p]),
                a_ints("strides", &[s, s]),
            ],
        );
    }

    /// torch ZeroPad2d export: `Pad` (mode `constant`, value 0) node `/{m}/Pad` with an
    /// int64 `pads` initializer `[0, 0, top, left, 0, 0, bottom, right]`.
    pub fn zero_pad(&mut self, m: &str, x: &str, out: &str, pads: [usize; 4]) {
        let [t, l, b, r] = pads.map(|p| p as i64);
        let name = format!("onnx::Pad_{}", self.inits.len());
        self.inits
            .push(i64_tensor(&name, &[8], &[0, 0, t, l, 0, 0, b, r]));
        self.node(
            "Pad",
            &format!("/{m}/Pad"),
            &[x, &name],
            &[out],
            vec![a_str("mode", "constant")],
        );
    }

    /// torch BatchNorm2d/1d export (eval mode, unfused).
    /// See the module doc.
    pub fn bn(&mut self, m: &str, x: &str, out: &str, c: usize) {
        let g = self.uniform(&format!("{m}.weight"), c, 0.5, 1.5);
        let b = self.uniform(&format!("{m}.bias"), c, -0.2, 0.2);
        let mu = self.uniform(&format!("{m}.running_mean"), c, -0.2, 0.2);
        let v = self.uniform(&format!("{m}.running_var"), c, 0.5, 1.5);
        self.node(
            "BatchNormalization",
            &format!("/{m}/BatchNormalization"),
            &[x, &g, &b, &mu, &v],
            &[out],
            vec![a_float("epsilon", 1e-5), a_float("momentum", 0.9)],
        );
    }

    /// torch Linear export: Gemm transB=1.
    /// See the module doc.
    pub fn gemm(&mut self, m: &str, x: &str, out: &str, cols: usize, rows: usize) {
        let w = self.param(&format!("{m}.weight"), &[rows, cols], cols);
        let b = self.param(&format!("{m}.bias"), &[rows], cols);
        self.node(
            "Gemm",
            &format!("/{m}/Gemm"),
            &[x, &w, &b],
            &[out],
            vec![
                a_float("alpha", 1.0),
                a_float("beta", 1.0),
                a_int("transB", 1),
            ],
        );
    }

    /// See the module doc.
    pub fn relu(&mut self, m: &str, x: &str, out: &str) {
        self.node("Relu", &format!("/{m}/Relu"), &[x], &[out], vec![]);
    }

    /// See the module doc.
    pub fn finish(
        self,
        input: &str,
        in_dims: &[usize],
        output: &str,
        out_dims: &[usize],
        opset: i64,
    ) -> Vec<u8> {
        ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: opset,
            }],
            producer_name: "pytorch".into(),
            producer_version: "2.3.0".into(),
            graph: Some(GraphProto {
                node: self.nodes,
                name: "main_graph".into(),
                initializer: self.inits,
                input: vec![value_info(input, in_dims)],
                output: vec![value_info(output, out_dims)],
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec()
    }
}
