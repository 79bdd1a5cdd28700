//! Helpers of the CLI tests that run `helina` processes: fixtures, a server process and
//! the addresses it logs, a command's JSON output.
#![allow(dead_code, clippy::unwrap_used)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_helina");

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

/// A `helina server --listen 127.0.0.1:0` process with `args`; its address and its
/// metrics address (if it logs one), read from its log, and the rest of its log. The
/// caller waits for it.
#[allow(clippy::zombie_processes)]
pub fn spawn_server<S: AsRef<OsStr>>(
    args: &[S],
) -> (Child, String, Option<String>, BufReader<ChildStderr>) {
    let mut s = Command::new(BIN)
        .args(["server", "--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(s.stderr.take().unwrap());
    let mut metrics = None;
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            let status = s.wait();
            panic!("the server stopped: {status:?}");
        }
        if let Some(rest) = line.split("metrics at http://").nth(1) {
            metrics = Some(rest.trim().trim_end_matches("/metrics").to_string());
        }
        if let Some(rest) = line.split("listening on ").nth(1) {
            let addr = rest.split_whitespace().next().unwrap().to_string();
            return (s, addr, metrics, err);
        }
    }
}

/// Asserts that a command succeeded (showing its stderr if not).
pub fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `fixed` field of every output of a `--json` report.
pub fn fixed_outputs(json: &[u8]) -> Vec<serde_json::Value> {
    let j: serde_json::Value = serde_json::from_slice(json).unwrap();
    j["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["fixed"].clone())
        .collect()
}

/// `helina infer --json` of fixture `model` on its test inputs, planned on its
/// calibration inputs: the fixed-point outputs both parties computed in one process.
pub fn local_fixed_outputs(model: &str) -> Vec<serde_json::Value> {
    let out = Command::new(BIN)
        .args(["infer", "--json", "--faithful-truncation", "--model"])
        .arg(fixture(&format!("{model}.onnx")))
        .arg("--calibration")
        .arg(fixture(&format!("{model}-calibration.npy")))
        .arg("--input")
        .arg(fixture(&format!("{model}-test.npy")))
        .output()
        .unwrap();
    succeeded(&out);
    fixed_outputs(&out.stdout)
}
