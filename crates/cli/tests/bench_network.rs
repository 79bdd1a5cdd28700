//! `helina bench network`, `helina plan` and the per-op cost cache as a user runs them.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_helina");

fn run(args: &[&str], cache: &std::path::Path) -> Value {
    let out = Command::new(BIN)
        .args(args)
        .env("HELINA_CACHE_DIR", cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("helina-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// The MLP on the count backend, every method: rows per layer and method, totals, and
/// GALA Table IX's MLP row recomputed in the ideal n = 2048 model. helina pads n_i = 784
/// to 1024, so by GALA's Table II formulas per layer (n_o x n_i, n = 2048):
/// GAZELLE hybrid HstPerm = n_i·n_o/n − 1 = 63, 7, 0; Perm = log2(n/n_o) = 4, 4, 7
/// (n_o = 10 padded to 16); one DecPerm per layer with hoisted rotations (2);
/// ScMult = n_i·n_o/n = 64, 8, 1; Add = Perm + HstPerm. GALA replaces every rotation
/// by a plain Perm: 70 Perm, 70 Add, no hoisting, the same products.
#[test]
fn count_backend_rows_totals_and_table_ix() {
    let cache = tmp("bn-count");
    let r = run(
        &[
            "bench",
            "network",
            "--net",
            "mlp",
            "--backend",
            "count",
            "--method",
            "all",
            "--json",
            "--costs",
            "reference",
        ],
        &cache,
    );
    let rows = r["rows"].as_array().unwrap();
    let linear: Vec<&Value> = rows.iter().filter(|x| x["kind"] == "matvec").collect();
    assert_eq!(linear.len(), 3 * 7, "3 layers x 7 matvec methods");
    assert_eq!(rows.iter().filter(|x| x["kind"] == "relu").count(), 2);
    assert_eq!(u(&r["relu_elements"]), 256);
    // Exactly one pick per layer, and the totals are the picks' sums.
    for step in [0, 2, 4] {
        let picks = rows
            .iter()
            .filter(|x| x["step"] == step && x["pick"] == true)
            .count();
        assert_eq!(picks, 1, "step {step}");
    }
    let picked: f64 = rows
        .iter()
        .filter(|x| x["pick"] == true)
        .map(|x| x["ms"].as_f64().unwrap())
        .sum();
    assert!((r["total_ms"].as_f64().unwrap() - picked).abs() < 1e-6 * picked.max(1.0));
    // Predicted rows: the row's time is its prediction, server + client (+ no link).
    for x in rows
        .iter()
        .filter(|x| x["pick"] == true && x["kind"] == "matvec")
    {
        let f = |k: &str| x[k].as_f64().unwrap();
        assert!(f("client_ms") > 0.0 && f("client_ms") == f("predicted_client_ms"));
        assert!((f("predicted_ms") - f("server_ms") - f("client_ms")).abs() < 1e-9);
        assert!((f("ms") - f("predicted_ms")).abs() < 1e-9 * f("ms"));
    }
    assert!(r["linear_prediction_error"].is_null());
    let bytes: u64 = rows
        .iter()
        .filter(|x| x["pick"] == true)
        .map(|x| u(&x["bytes"]))
        .sum();
    assert_eq!(u(&r["total_bytes"]), bytes);
    let t = &r["table_ix"];
    let cells = |v: &Value| -> Vec<u64> { v.as_array().unwrap().iter().map(u).collect() };
    // Perm, DecPerm, HstPerm, ScMult, Add.
    assert_eq!(cells(&t["ours_gazelle"]), vec![15, 2, 70, 73, 85]);
    assert_eq!(cells(&t["ours_gala"]), vec![70, 0, 0, 73, 70]);
    assert_eq!(cells(&t["paper_gala"]), vec![55, 0, 0, 56, 55]);
    let hybrid = r["totals_by_method"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == "hybrid")
        .unwrap();
    assert_eq!(u(&hybrid["layers"]), 3);
    assert_eq!(u(&hybrid["cannot_run"]), 0);
    assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0);
}

/// Real BFV on the first layer of MNIST D (ENSEI, n = 8192): the shares reconstruct the reference, the row carries the measured
/// and the predicted time, and the plot is an SVG.
#[test]
fn bfv_backend_measures_checks_and_plots() {
    let cache = tmp("bn-bfv");
    let svg = cache.join("layers.svg");
    let r = run(
        &[
            "bench",
            "network",
            "--net",
            "mnist-d",
            "--method",
            "ensei",
            "--layers",
            "1",
            "--linear-only",
            "--json",
            "--plot",
            svg.to_str().unwrap(),
        ],
        &cache,
    );
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row["method"], "ensei");
    assert_eq!(row["correct"], true);
    assert_eq!(row["measured"], true);
    assert!(row["server_ms"].as_f64().unwrap() > 0.0);
    assert!(row["predicted_server_ms"].as_f64().unwrap() > 0.0);
    // Measured client time next to the predicted one.
    assert!(row["client_ms"].as_f64().unwrap() > 0.0);
    assert!(row["predicted_client_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(u(&row["perm"]) + u(&row["hst_perm"]), 0);
    // held weights: encoded once at the server's start, apart from the offline work per
    // inference (the flooding encryptions of zero)
    assert!(row["weight_encoding_ms"].as_f64().unwrap() > 0.0);
    assert!(row["offline_ms"].as_f64().unwrap() > 0.0);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.contains("ensei"));

    // A memory budget below the layer's encoded weights: the whole layer runs with its
    // weights encoded on the fly (as a server beyond its budget runs it), still equal to
    // the reference, with the same operations as held.
    let one = u(&row["sc_mult"]);
    let r = run(
        &[
            "bench",
            "network",
            "--net",
            "mnist-d",
            "--method",
            "ensei",
            "--layers",
            "1",
            "--linear-only",
            "--mem-limit",
            "0.3",
            "--json",
        ],
        &cache,
    );
    let row = &r["rows"][0];
    assert_eq!(row["correct"], true);
    assert_eq!(row["on_the_fly"], true);
    assert_eq!(u(&row["sc_mult"]), one);
    // encoded per query: nothing encoded at the server's start; its flooding
    // encryptions are still offline work per inference
    assert_eq!(row["weight_encoding_ms"].as_f64().unwrap(), 0.0);
    assert!(row["offline_ms"].as_f64().unwrap() > 0.0);

    // The planner's own pick: the network's predicted linear time next to the measured.
    let r = run(
        &[
            "bench",
            "network",
            "--net",
            "mnist-d",
            "--layers",
            "1",
            "--linear-only",
            "--json",
        ],
        &cache,
    );
    let measured = r["linear_ms"].as_f64().unwrap();
    let predicted = r["predicted_linear_ms"].as_f64().unwrap();
    let error = r["linear_prediction_error"].as_f64().unwrap();
    assert!(measured > 0.0 && predicted > 0.0);
    assert!((error - (predicted / measured - 1.0)).abs() < 1e-9);
}

/// `bench ops --save` writes this machine's per-op costs; `plan` then reads them, and
/// `--mem-limit 0` puts every layer's encoding on the fly.
#[test]
fn the_cost_cache_is_written_and_read() {
    let cache = tmp("bn-cache");
    let out = Command::new(BIN)
        .args(["bench", "ops", "--reps", "1", "--save"])
        .env("HELINA_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(out.status.success());
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert_eq!(files.len(), 1);
    let model: Value =
        serde_json::from_slice(&std::fs::read(files[0].as_ref().unwrap().path()).unwrap()).unwrap();
    assert!(model["perm_us"].as_f64().unwrap() > 0.0);
    // the scalar path's products are priced apart
    assert!(model["sc_mult_rows_us"].as_f64().unwrap() > 0.0);
    // and the products by plaintexts held as strided transforms
    assert!(model["sc_mult_strided_us"].as_f64().unwrap() > 0.0);
    let plan = run(
        &["plan", "--net", "mlp", "--mem-limit", "0", "--json"],
        &cache,
    );
    let layers = plan.as_array().unwrap();
    assert_eq!(layers.len(), 3);
    assert!(layers.iter().all(|l| l["on_the_fly"] == true));
    let text = Command::new(BIN)
        .args(["plan", "--net", "mlp"])
        .env("HELINA_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("per-op costs: measured"));
    let bad = Command::new(BIN)
        .args(["plan", "--net", "mlp", "--objective", "fastest"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

/// `--as-served`: the program `helina infer` runs (its parameter set, chosen on the same
/// 32 seeded calibration inputs), not the 8-bit lowering on `--params`; its nonlinear
/// layers take the same number of COTs as the real inference's silent OT.
#[test]
fn as_served_projects_the_program_infer_runs() {
    let cache = tmp("bn-served");
    let bench = |served: bool| {
        let mut args = vec![
            "bench",
            "network",
            "--net",
            "mlp",
            "--backend",
            "count",
            "--json",
            "--costs",
            "reference",
        ];
        if served {
            args.push("--as-served");
        }
        run(&args, &cache)
    };
    let lowered = bench(false);
    let served = bench(true);
    let infer = run(&["infer", "--net", "mlp", "--limit", "1", "--json"], &cache);
    assert_eq!(
        (&lowered["params"], u(&lowered["frac_bits"])),
        (&"n8192".into(), 8)
    );
    assert_eq!(served["params"], infer["params"]);
    assert_eq!(served["frac_bits"], infer["frac_bits"]);
    assert_ne!(served["frac_bits"], lowered["frac_bits"]);
    let relu = |r: &Value| -> u64 { u(&r["relu_elements"]) };
    assert!(relu(&served) > 0 && relu(&served) == relu(&lowered));
    assert!(u(&served["cots"]) > 0);
}
