//! A server and a client of a trained digit classifier, over TCP in one process (run
//! the two halves on two machines the same way):
//!
//!     cargo run --release -p helina --example two_parties [model.onnx calibration.npy test.npy]
//!
//! Defaults to the committed fixture `fixtures/digits-cnn-bn*`.

use std::net::TcpListener;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (model, calibration, test) = match &args[..] {
        [m, c, t] => (m.clone(), c.clone(), t.clone()),
        [] => (
            format!("{dir}/digits-cnn-bn.onnx"),
            format!("{dir}/digits-cnn-bn-calibration.npy"),
            format!("{dir}/digits-cnn-bn-test.npy"),
        ),
        _ => return Err("give model.onnx calibration.npy test.npy, or nothing".into()),
    };

    // The server: plan the fixed point on its calibration data, encode the weights once.
    let network = nn::import(std::path::Path::new(&model))?;
    let shape = network.input_shape().to_vec();
    let calibration = helina::array::read_batch(&calibration, &shape)?;
    let model = helina::Model::new(
        network,
        &helina::FixedPoint::calibrated(calibration),
        &helina::Planning::default(),
    )?;
    println!(
        "plan: {} (p = {}), {} fractional bits",
        model.params().name(),
        model.program().p,
        model.program().frac_bits
    );
    let server = helina::Server::new(model, helina::ServerOptions::default())?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    let serving = std::thread::spawn(move || server.serve_until(listener, Some(1), |_| {}));

    // The client: its private images, one session for all of them.
    let images = helina::array::read_batch_any(&test)?;
    let client = helina::Client::new(&addr, helina::ClientOptions::default());
    let result = client.infer(&images[..4.min(images.len())], &mut |phase| {
        eprintln!("  {phase}")
    })?;
    for (i, o) in result.outputs.iter().enumerate() {
        println!(
            "image {i}: class {} ({:.0} ms, {:.1} MB)",
            o.argmax,
            o.total_ms,
            o.total_bytes as f64 / 1e6
        );
    }
    serving.join().map_err(|_| "the server thread panicked")??;
    Ok(())
}
