//! `helina compile` then `helina server --model m.helina` without calibration data: a
//! client's private results equal those of `helina infer` on the ONNX model bit for
//! bit; a damaged file is refused at the server's start, saying why.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_helina");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn fixed(json: &[u8]) -> Vec<serde_json::Value> {
    let j: serde_json::Value = serde_json::from_slice(json).unwrap();
    j["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["fixed"].clone())
        .collect()
}

#[test]
fn a_compiled_model_is_served_without_calibration_and_gives_the_same_results() {
    let dir = std::env::temp_dir().join(format!("helina-compiled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let saved = dir.join("digits.helina");
    let out = Command::new(BIN)
        .args(["compile", "--model"])
        .arg(fixture("digits-cnn-bn.onnx"))
        .arg("--calibration")
        .arg(fixture("digits-cnn-bn-calibration.npy"))
        .arg("--out")
        .arg(&saved)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut server = Command::new(BIN)
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--sessions",
            "1",
            "--model",
        ])
        .arg(&saved)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(server.stderr.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("the server stopped: {:?}", server.wait());
        }
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let client = Command::new(BIN)
        .args([
            "client",
            "--network",
            "--json",
            "--connect",
            &addr,
            "--input",
        ])
        .arg(fixture("digits-cnn-bn-test.npy"))
        .output()
        .unwrap();
    assert!(
        client.status.success(),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(server.wait().unwrap().success());
    let local = Command::new(BIN)
        .args(["infer", "--json", "--model"])
        .arg(fixture("digits-cnn-bn.onnx"))
        .arg("--calibration")
        .arg(fixture("digits-cnn-bn-calibration.npy"))
        .arg("--input")
        .arg(fixture("digits-cnn-bn-test.npy"))
        .output()
        .unwrap();
    assert!(
        local.status.success(),
        "{}",
        String::from_utf8_lossy(&local.stderr)
    );
    let private = fixed(&client.stdout);
    assert_eq!(private.len(), 32);
    assert_eq!(private, fixed(&local.stdout));

    // one byte changed: the server refuses to start, naming the file and the reason
    let mut bytes = std::fs::read(&saved).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&saved, &bytes).unwrap();
    let out = Command::new(BIN)
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--sessions",
            "1",
            "--model",
        ])
        .arg(&saved)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("digits.helina") && e.contains("checksum"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
