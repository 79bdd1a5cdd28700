//! `helina compile` then `helina server --model m.helina` (and `helina infer --model
//! m.helina`) without calibration data: the private results equal those of `helina
//! infer` on the ONNX model bit for bit; a damaged file is refused at the server's
//! start, saying why.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::{fixed_outputs, fixture, local_fixed_outputs, spawn_server, succeeded, BIN};

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
        // results compared with another run's bit for bit
        .arg("--faithful-truncation")
        .arg("--out")
        .arg(&saved)
        .output()
        .unwrap();
    succeeded(&out);

    let (mut server, addr, _, _log) = spawn_server(&[
        "--sessions".as_ref(),
        "1".as_ref(),
        "--model".as_ref(),
        saved.as_os_str(),
    ]);
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
    succeeded(&client);
    assert!(server.wait().unwrap().success());
    let private = fixed_outputs(&client.stdout);
    assert_eq!(private.len(), 32);
    // the client's own peak memory (this process only: the server logs its own)
    let report: serde_json::Value = serde_json::from_slice(&client.stdout).unwrap();
    let rss = report["peak_rss_bytes"].as_u64().unwrap_or(0);
    assert!((1 << 20..1 << 32).contains(&rss), "client peak RSS {rss}");
    let reference = local_fixed_outputs("digits-cnn-bn");
    assert_eq!(private, reference);

    // `helina infer` runs the compiled model too, with the same results; a fixed point
    // given beside it is refused (the file carries its own)
    let local = Command::new(BIN)
        .args(["infer", "--json", "--limit", "8", "--model"])
        .arg(&saved)
        .arg("--input")
        .arg(fixture("digits-cnn-bn-test.npy"))
        .output()
        .unwrap();
    succeeded(&local);
    assert_eq!(fixed_outputs(&local.stdout), reference[..8]);
    let j: serde_json::Value = serde_json::from_slice(&local.stdout).unwrap();
    assert!(j["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["matches_fixed_reference"] == true));
    // and plans its session for the 8 inputs it runs, as for the ONNX model: the same
    // bytes per input (sized for a full session instead, the responses' flooding is
    // larger and so are the responses)
    let onnx = Command::new(BIN)
        .args([
            "infer",
            "--json",
            "--limit",
            "8",
            "--faithful-truncation",
            "--model",
        ])
        .arg(fixture("digits-cnn-bn.onnx"))
        .arg("--calibration")
        .arg(fixture("digits-cnn-bn-calibration.npy"))
        .arg("--input")
        .arg(fixture("digits-cnn-bn-test.npy"))
        .output()
        .unwrap();
    succeeded(&onnx);
    let o: serde_json::Value = serde_json::from_slice(&onnx.stdout).unwrap();
    let bytes = |j: &serde_json::Value| -> Vec<u64> {
        let outs = j["outputs"].as_array().unwrap();
        outs.iter()
            .map(|o| o["total_bytes"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(bytes(&j).len(), 8);
    assert_eq!(bytes(&j), bytes(&o));
    let refused = Command::new(BIN)
        .args(["infer", "--model"])
        .arg(&saved)
        .arg("--input")
        .arg(fixture("digits-cnn-bn-test.npy"))
        .arg("--calibration")
        .arg(fixture("digits-cnn-bn-calibration.npy"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let e = String::from_utf8_lossy(&refused.stderr);
    assert!(e.contains("is compiled"), "{e}");

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
