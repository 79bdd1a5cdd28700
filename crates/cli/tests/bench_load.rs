//! `helina bench load` as an operator runs it: a `helina server` process of the digit CNN
//! fixture under four clients at once, 16 inputs each, three rounds. Every session
//! succeeds, and the server process (its own resident memory, read from /proc) holds no
//! more after the third round than after the second: nothing is kept per session.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_helina");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

#[test]
fn a_server_under_four_clients_stays_flat_round_after_round() {
    let m = "digits-cnn-bn";
    let out = Command::new(BIN)
        .args(["bench", "load", "--model"])
        .arg(fixture(&format!("{m}.onnx")))
        .arg("--calibration")
        .arg(fixture(&format!("{m}-calibration.npy")))
        .arg("--input")
        .arg(fixture(&format!("{m}-test.npy")))
        .args([
            "--clients",
            "4",
            "--inputs",
            "16",
            "--rounds",
            "3",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rounds = j["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 3);
    for r in rounds {
        assert_eq!(r["inferences"], 64, "{r}");
        assert!(r["failures"].as_array().unwrap().is_empty(), "{r}");
    }
    let rss = |k: usize| rounds[k]["server_rss_bytes"].as_u64().unwrap();
    assert!(
        rss(2) < rss(1) + (32 << 20),
        "server RSS {} after round 2, {} after round 3",
        rss(1),
        rss(2)
    );
}
