//! `helina infer` as a user runs it: an ONNX file and an .npy batch, the JSON report's
//! keys, and the private result equal to the plaintext fixed-point reference.
#![allow(clippy::unwrap_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_helina");

/// A little-endian float32 .npy (format 1.0), written the way numpy.save does.
fn write_npy(path: &std::path::Path, shape: &[usize], data: &[f32]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for v in data {
        bytes.extend(v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn infer_an_onnx_model_on_an_npy_batch() {
    let dir = std::env::temp_dir().join(format!("helina-infer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("mlp.onnx");
    std::fs::write(&model, nn::zoo::onnx("mlp", 5).unwrap()).unwrap();
    let input = dir.join("x.npy");
    let data: Vec<f32> = (0..2 * 784)
        .map(|i| ((i * 37) % 101) as f32 / 101.0)
        .collect();
    write_npy(&input, &[2, 784], &data);
    let out = Command::new(BIN)
        .args(["infer", "--model"])
        .arg(&model)
        .arg("--input")
        .arg(&input)
        .args(["--limit", "1", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let outputs = j["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 1);
    let o = &outputs[0];
    assert_eq!(o["logits"].as_array().unwrap().len(), 10);
    assert_eq!(o["matches_fixed_reference"], true);
    for k in ["argmax", "total_bytes", "online_bytes"] {
        assert!(o[k].as_u64().is_some(), "{k}");
    }
    for k in ["total_ms", "online_ms"] {
        assert!(o[k].as_f64().unwrap() > 0.0, "{k}");
    }
    assert!(o["total_bytes"].as_u64() > o["online_bytes"].as_u64());
    assert!(j["setup_ms"].as_f64().is_some() && j["setup_bytes"].as_u64().is_some());
    assert!(j["frac_bits"].as_u64().unwrap() >= 6);
    assert_eq!(j["layers"].as_array().unwrap().len(), 5);
    // A wrong input shape is a clear error.
    let bad = dir.join("bad.npy");
    write_npy(&bad, &[1, 10], &[0.0; 10]);
    let out = Command::new(BIN)
        .args(["infer", "--model"])
        .arg(&model)
        .arg("--input")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the model takes [batch, 784]"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_network_between_two_processes() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    let dir = std::env::temp_dir().join(format!("helina-net-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("mnist-a.onnx");
    std::fs::write(&model, nn::zoo::onnx("mnist-a", 2).unwrap()).unwrap();
    let input = dir.join("x.npy");
    let data: Vec<f32> = (0..784).map(|i| ((i * 13) % 97) as f32 / 97.0).collect();
    write_npy(&input, &[1, 784], &data);
    let mut server = Command::new(BIN)
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--sessions",
            "1",
            "--model",
        ])
        .arg(&model)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(server.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let addr = first.split_whitespace().nth(4).unwrap().to_string();
    let preset = first
        .rsplit("--params ")
        .next()
        .unwrap()
        .trim_end_matches([')', '\n'])
        .to_string();
    let out = Command::new(BIN)
        .args([
            "client",
            "--network",
            "--connect",
            &addr,
            "--params",
            &preset,
            "--json",
            "--input",
        ])
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["outputs"][0]["logits"].as_array().unwrap().len(), 10);
    assert!(j["outputs"][0]["online_bytes"].as_u64().unwrap() > 0);
    assert!(server.wait().unwrap().success());
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("1 inference(s)"), "{rest}");
    let _ = std::fs::remove_dir_all(dir);
}
