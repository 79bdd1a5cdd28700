//! A compiled model saved as one `.helina` file and loaded without calibration data:
//! the same program (its approximate truncations included), methods and input range,
//! and private results equal to those of the model planned from ONNX bit for bit
//! where every truncation is faithful (with approximate truncation both runs are
//! checked against the reference replayed from their own shares); a file with another format version, truncated, with bytes
//! changed or appended, or not a model at all is refused with its own error.
#![allow(clippy::unwrap_used)]

use helina::{
    infer_local, FixedPoint, LocalOptions, Model, Planning, SavedModelError, SAVED_MODEL_FORMAT,
};

fn fixture(name: &str) -> String {
    format!("{}/../../fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn compiled(name: &str, approximate_truncation: bool) -> (Model, Vec<Vec<f32>>) {
    let m = nn::import(std::path::Path::new(&fixture(&format!("{name}.onnx")))).unwrap();
    let sample = m.input_shape().to_vec();
    let cal =
        helina::array::read_batch(&fixture(&format!("{name}-calibration.npy")), &sample).unwrap();
    let test = helina::array::read_batch(&fixture(&format!("{name}-test.npy")), &sample).unwrap();
    (
        Model::new(
            m,
            &FixedPoint {
                approximate_truncation,
                ..FixedPoint::calibrated(cal)
            },
            &Planning::default(),
        )
        .unwrap(),
        test,
    )
}

fn fixed_outputs(model: &Model, xs: &[Vec<f32>]) -> Vec<Vec<i64>> {
    let run = infer_local(model, xs, &LocalOptions::default(), &mut |_| {}).unwrap();
    assert!(run.checks.iter().all(|c| c.matches_fixed_reference));
    assert!(run.checks.iter().all(|c| c.within_tolerance));
    run.inference.outputs.into_iter().map(|o| o.fixed).collect()
}

#[test]
fn a_saved_model_loads_to_the_same_plan_and_the_same_private_results() {
    for (name, approximate) in [("digits-cnn-bn", false), ("residual-pools", true)] {
        let (model, test) = compiled(name, approximate);
        assert_eq!(
            !model.program().approximate_steps().is_empty(),
            approximate,
            "{name}"
        );
        let dir = std::env::temp_dir().join(format!("helina-saved-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.helina"));
        model.save(&path).unwrap();
        let loaded = Model::load(&path, &Planning::default()).unwrap();
        assert_eq!(loaded.program(), model.program(), "{name}");
        assert_eq!(loaded.network, model.network, "{name}");
        assert_eq!(loaded.params(), model.params(), "{name}");
        assert_eq!(loaded.plan.methods(), model.plan.methods(), "{name}");
        assert_eq!(loaded.calibration, model.calibration);
        // no fixed-point search when loading
        assert_eq!(loaded.timings.fixed_point_ms, 0.0);
        let xs = &test[..2];
        let (a, b) = (fixed_outputs(&loaded, xs), fixed_outputs(&model, xs));
        if !approximate {
            assert_eq!(a, b, "{name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn damaged_files_are_refused_with_their_own_error() {
    let (model, _) = compiled("digits-mlp", true);
    let good = model.to_bytes().unwrap();
    assert!(Model::from_bytes(&good, &Planning::default()).is_ok());
    let refused = |bytes: &[u8]| match Model::from_bytes(bytes, &Planning::default()) {
        Err(helina::Error::SavedModel { error, .. }) => error,
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("accepted"),
    };
    // a byte changed in the body (weights), in the checksum
    for at in [good.len() / 2, good.len() - 1, 40] {
        let mut b = good.clone();
        b[at] ^= 1;
        assert_eq!(refused(&b), SavedModelError::Checksum, "byte {at}");
    }
    // truncated anywhere
    for len in [0, 10, 20, good.len() / 3, good.len() - 1] {
        let e = refused(&good[..len]);
        assert!(
            matches!(
                e,
                SavedModelError::Truncated { .. } | SavedModelError::NotAModel
            ),
            "{len}: {e:?}"
        );
    }
    // appended bytes
    let mut b = good.clone();
    b.extend_from_slice(b"more");
    assert_eq!(refused(&b), SavedModelError::Trailing { extra: 4 });
    // another format version
    let mut b = good.clone();
    b[13..17].copy_from_slice(&(SAVED_MODEL_FORMAT + 1).to_le_bytes());
    assert_eq!(
        refused(&b),
        SavedModelError::Version {
            found: SAVED_MODEL_FORMAT + 1,
            supported: SAVED_MODEL_FORMAT
        }
    );
    // an ONNX file is not a saved model
    let onnx = std::fs::read(fixture("digits-mlp.onnx")).unwrap();
    assert_eq!(refused(&onnx), SavedModelError::NotAModel);
    // a well-formed file whose body is not a model
    let mut b = Vec::new();
    b.extend_from_slice(b"HELINA-MODEL\n");
    b.extend_from_slice(&SAVED_MODEL_FORMAT.to_le_bytes());
    b.extend_from_slice(&5u64.to_le_bytes());
    b.extend_from_slice(b"hello");
    use sha2::Digest;
    b.extend_from_slice(&sha2::Sha256::digest(b"hello"));
    assert!(matches!(refused(&b), SavedModelError::Invalid { .. }));
}
