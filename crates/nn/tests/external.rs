//! Models whose initializers lie in an external data file (`torch.onnx.export`'s
//! default since torch 2.9: `model.onnx` + `model.onnx.data`).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::*;
use nn::{import, import_bytes, run_float, NnError};
use prost::Message;
use tract_onnx::pb::{tensor_proto::DataLocation, ModelProto, StringStringEntryProto};

/// A conv → relu → flatten → gemm model, inline.
fn inline_model() -> Vec<u8> {
    let mut m = Mb::new(7);
    m.conv("conv", "input", "c", 2, 3, 3, 1, 1, true);
    m.relu("relu", "c", "r");
    m.node(
        "Flatten",
        "/Flatten",
        &["r"],
        &["f"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc", "f", "logits", 3 * 5 * 5, 4);
    m.finish("input", &[2, 5, 5], "logits", &[4], 17)
}

/// The same model with every initializer moved to `dir/data_name` (at 64-byte aligned
/// offsets, as the exporters align them); `edit` may change each entry.
fn external_model(
    dir: &std::path::Path,
    data_name: &str,
    edit: impl Fn(&str, &mut Vec<StringStringEntryProto>),
) -> PathBuf {
    let mut model = ModelProto::decode(&inline_model()[..]).unwrap();
    let mut data = Vec::new();
    for t in &mut model.graph.as_mut().unwrap().initializer {
        while data.len() % 64 != 0 {
            data.push(0u8);
        }
        let offset = data.len();
        data.extend_from_slice(&t.raw_data);
        let entry = |k: &str, v: String| StringStringEntryProto {
            key: k.into(),
            value: v,
        };
        t.external_data = vec![
            entry("location", data_name.into()),
            entry("offset", offset.to_string()),
            entry("length", t.raw_data.len().to_string()),
        ];
        edit(&t.name, &mut t.external_data);
        t.raw_data.clear();
        t.data_location = Some(DataLocation::External as i32);
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("model.onnx.data"), data).unwrap();
    let path = dir.join("model.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("helina-nn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn external_data_imports_as_inline() {
    let dir = scratch("external");
    let path = external_model(&dir, "model.onnx.data", |_, _| {});
    let net = import(&path).unwrap();
    assert_eq!(net, import_bytes(&inline_model()).unwrap());
    // and computes what tract computes on the inline model
    let x = random_inputs(3, 1, 50).remove(0);
    let want = tract_run(&inline_model(), &[2, 5, 5], &x);
    let got = run_float(&net, &x);
    assert!(want.iter().zip(&got).all(|(a, b)| (a - b).abs() < 1e-5));
    // without its path the model cannot find its data, and says so
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        matches!(import_bytes(&bytes), Err(NnError::Initializer { reason, .. }) if reason.contains("external file"))
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn external_data_outside_the_directory_or_the_file_is_refused() {
    let dir = scratch("escape");
    for bad in ["../model.onnx.data", "/etc/passwd", ""] {
        let path = external_model(&dir, bad, |_, _| {});
        assert!(
            matches!(import(&path), Err(NnError::Initializer { reason, .. }) if reason.contains("inside the model's directory")),
            "{bad}"
        );
    }
    // a length beyond the file's end, a length the dims do not call for, a bad number
    let cases: [(&str, &str, &str); 3] = [
        ("offset", "100000", "beyond the end"),
        ("length", "8", "call for"),
        ("offset", "-4", "byte count"),
    ];
    for (key, value, says) in cases {
        let path = external_model(&dir, "model.onnx.data", |name, entries| {
            if name == "fc.weight" {
                entries.iter_mut().find(|e| e.key == key).unwrap().value = value.into();
            }
        });
        let e = import(&path).unwrap_err();
        assert!(
            matches!(&e, NnError::Initializer { name, reason } if name == "fc.weight" && reason.contains(says)),
            "{key}={value}: {e}"
        );
    }
    // a missing data file is an I/O error naming it
    let path = external_model(&dir, "elsewhere.data", |_, _| {});
    assert!(
        matches!(import(&path), Err(NnError::Io { path, .. }) if path.ends_with("elsewhere.data"))
    );
    std::fs::remove_dir_all(dir).unwrap();
}
