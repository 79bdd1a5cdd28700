//! Graphs from other exporters: scikit-learn classifiers exported by skl2onnx (zipmap
//! off; `fixtures/make_fixtures.py`), their output heads (Softmax, ArgMax, the label
//! lookup, Cast) evaluated by the client on the fixed-point output, against
//! onnxruntime's labels and probabilities on 200 held-out inputs; the input
//! normalisation (Scaler) applied before quantisation.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use nn::{
    choose_fixed_point, dequantise, import, quantise_input, run_fixed, FixedPointOptions, HeadData,
    Program,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn read_rows(name: &str) -> Vec<Vec<f32>> {
    let f = npyz::NpyFile::new(std::io::BufReader::new(
        std::fs::File::open(fixture(name)).unwrap(),
    ))
    .unwrap();
    let len: usize = f.shape().iter().skip(1).map(|&d| d as usize).product();
    let v: Vec<f32> = f.into_vec().unwrap();
    v.chunks(len).map(<[f32]>::to_vec).collect()
}

/// The plan of a fixture on its calibration inputs.
fn plan(name: &str) -> (nn::Network, Program) {
    let net = import(&fixture(&format!("{name}.onnx"))).unwrap();
    let cal = read_rows(&format!("{name}-calibration.npy"));
    let prog = choose_fixed_point(&net, &cal, &FixedPointOptions::default()).unwrap();
    (net, prog)
}

/// Label agreement with onnxruntime and the largest probability difference, over the
/// fixture's test inputs, through the fixed-point reference and the head.
fn agreement(name: &str) -> (usize, usize, f64) {
    let (_, prog) = plan(name);
    let xs = read_rows(&format!("{name}-test.npy"));
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture(&format!("{name}-test-reference.json"))).unwrap(),
    )
    .unwrap();
    let (labels, probs) = (
        reference["label"].as_array().unwrap(),
        reference["probabilities"].as_array().unwrap(),
    );
    assert!(xs.len() >= 100 && labels.len() == xs.len());
    let shape = prog.output_info().unwrap().shape.clone();
    let (mut same, mut worst) = (0, 0f64);
    for (i, x) in xs.iter().enumerate() {
        let y = dequantise(&prog, &run_fixed(&prog, &quantise_input(&prog, x)).unwrap());
        let out = prog.head.eval(&y, &shape).unwrap();
        let names: Vec<&str> = out.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["label", "probabilities"]);
        let label_ok = match &out[0].value.data {
            HeadData::I64(v) => labels[i].as_i64() == Some(v[0]),
            HeadData::Str(v) => labels[i].as_str() == Some(v[0].as_str()),
            HeadData::F32(_) => panic!("a float label"),
        };
        same += label_ok as usize;
        assert_eq!(out[0].value.shape, vec![1]);
        assert_eq!(out[1].value.shape, vec![1, 10]);
        let HeadData::F32(p) = &out[1].value.data else {
            panic!("probabilities are not floats")
        };
        for (a, b) in p.iter().zip(probs[i].as_array().unwrap()) {
            worst = worst.max((*a as f64 - b.as_f64().unwrap()).abs());
        }
    }
    (same, xs.len(), worst)
}

#[test]
fn sklearn_mlp_labels_and_probabilities_agree_with_onnxruntime() {
    let (same, n, worst) = agreement("sklearn-mlp");
    assert!(same * 100 >= 99 * n, "{same} of {n} labels agree");
    assert!(worst <= 0.02, "probabilities differ by {worst}");
}

#[test]
fn sklearn_pipeline_with_a_scaler_and_string_labels() {
    let (net, prog) = plan("sklearn-pipeline");
    // the StandardScaler is the client's input normalisation, not a private layer
    assert!(net.input_affine.is_some() && prog.input_affine.is_some());
    assert!(net
        .nodes
        .iter()
        .all(|n| matches!(n.op, nn::Op::Linear { .. } | nn::Op::Relu)));
    let (same, n, worst) = agreement("sklearn-pipeline");
    assert!(same * 100 >= 99 * n, "{same} of {n} labels agree");
    assert!(worst <= 0.02, "probabilities differ by {worst}");
}
