//! The table `bench matvec` and `bench conv` print (see [`benchmarks::linear`] for the
//! measurement).

use benchmarks::linear::LinearReport;

/// Prints the table (or the rows as JSON); an error when a method's shares did not
/// reconstruct the plaintext result.
pub fn print(report: &LinearReport, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let (title, rows) = (&report.title, &report.rows);
    if json {
        println!("{}", serde_json::to_string_pretty(&report.rows)?);
        return Ok(());
    }
    println!("{title}");
    let mw = rows
        .iter()
        .map(|r| r.method.len())
        .max()
        .unwrap_or(0)
        .max(9);
    println!(
        "{:<mw$} {:>10} {:>5} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>4} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>5} {:>7} {:>3}",
        "method", "params", "Perm", "Hst", "Dec", "ScMul", "Add", "NTT", "iNTT", "keys", "offl ms",
        "query ms", "online", "server", "kernel", "share", "pred", "client", "up B", "down B",
        "noise", "x base", "ok"
    );
    for r in rows {
        println!(
            "{:<mw$} {:>10} {:>5} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>4} {:>9.1} {:>9.1} {:>9.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>9} {:>9} {:>5} {:>7} {:>3}",
            r.method, r.params, r.perm, r.hst_perm, r.dec_perm, r.sc_mult, r.add, r.ntt, r.intt,
            r.galois_keys, r.offline_ms, r.query_ms, r.online_ms, r.server_ms, r.kernel_ms,
            r.share_ms, r.predicted_server_ms, r.client_ms, r.bytes_up, r.bytes_down,
            r.noise_budget_left.map_or("-".into(), |v| v.to_string()),
            r.speedup_vs_baseline.map_or("-".into(), |v| format!("{v:.2}")),
            if r.correct { "yes" } else { "NO" }
        );
    }
    println!(
        "key bytes (one-time upload, Galois + public key): {}",
        rows.iter()
            .map(|r| format!("{} {}", r.method, r.key_bytes))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(r) = rows.first() {
        println!(
            "seeded symmetric query: {} B up vs {} B as a public-key query ({:.1}x smaller)",
            r.bytes_up,
            r.bytes_up_pk_query,
            r.bytes_up_pk_query as f64 / r.bytes_up.max(1) as f64
        );
    }
    println!("server = kernel + share_output + (de)serialising the query and the response; pred = Σ(op count × per-op cost measured in this run), share_output and (de)serialisation included.");
    if !report.correct() {
        return Err("a method's shares did not reconstruct the plaintext result".into());
    }
    Ok(())
}
