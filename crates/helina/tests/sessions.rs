//! Sessions at the sizes users run, against one server in this process: a long session
//! whose memory must not grow with its inputs, and several clients at once, twice over.
//! Every output is checked against the plaintext fixed-point reference bit for bit. The
//! tests run one at a time (this process's resident memory is both parties'); the
//! full-size runs (4096 inputs; the CIFAR-sized fixture) are `--ignored`. The server's
//! own memory under concurrent clients is measured in a process of its own by `helina
//! bench serve` (`crates/cli/tests/production.rs`): here, in one process with the
//! clients, the system allocator's per-thread arenas blur it.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;

use helina::{Client, ClientOptions, FixedPoint, Model, Planning, Server, ServerOptions};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn fixture(name: &str) -> String {
    format!("{}/../../fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Resident memory of this process (Linux `VmRSS`), bytes.
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// The fixture model planned on its calibration inputs, and its test inputs.
fn model(name: &str) -> (Model, Vec<Vec<f32>>) {
    let m = nn::import(std::path::Path::new(&fixture(&format!("{name}.onnx")))).unwrap();
    let sample = m.input_shape().to_vec();
    let cal =
        helina::array::read_batch(&fixture(&format!("{name}-calibration.npy")), &sample).unwrap();
    let test = helina::array::read_batch(&fixture(&format!("{name}-test.npy")), &sample).unwrap();
    let model = Model::new(m, &FixedPoint::calibrated(cal), &Planning::default()).unwrap();
    // the planner's default: some truncations approximate, replayed in every check
    assert!(!model.program().approximate_steps().is_empty(), "{name}");
    (model, test)
}

/// A server of `model` on a loopback port, `max` sessions at once, for `sessions`
/// sessions.
fn serve(model: &Model, max: usize, sessions: usize) -> (String, thread::JoinHandle<()>) {
    let mut opts = ServerOptions::default();
    opts.serve.max_concurrent = max;
    let server = Server::new(model.clone(), opts).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = thread::spawn(move || {
        server
            .serve_until(l, Some(sessions), |rep| {
                if let Err(e) = &rep.result {
                    panic!("session failed: {e}");
                }
            })
            .unwrap();
    });
    (addr, h)
}

/// One session of `n` inputs (the test inputs over and over), the outputs taken one
/// by one and checked; returns the resident memory after 1/8 of the inputs and at the
/// end.
fn long_session(name: &str, n: usize) -> (u64, u64) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (model, test) = model(name);
    let inputs: Vec<Vec<f32>> = (0..n).map(|k| test[k % test.len()].clone()).collect();
    let (addr, h) = serve(&model, 1, 1);
    let client = Client::new(&addr, ClientOptions::default());
    let mut early = 0;
    let mut seen = 0;
    let report = client
        .infer_each(&inputs, &mut |_| {}, &mut |k, o| {
            // the fixed-point reference, approximate truncations replayed
            let want = model.fixed_reference(&inputs[k], &o).unwrap();
            assert_eq!(o.fixed, want, "input {k}");
            assert_eq!(k, seen);
            seen += 1;
            if k + 1 == n / 8 {
                early = rss();
            }
        })
        .unwrap();
    h.join().unwrap();
    assert_eq!(seen, n);
    assert!(report.outputs.is_empty());
    (early, rss())
}

/// A session of 256 inputs of the digit CNN (conv-BN-ReLU ×2, MaxPool, FC) holds the
/// same memory after its 32nd input and after its 256th: nothing grows with the
/// inputs, on either side. The allowance, 48 MiB, is the allocator's: glibc's
/// per-thread arenas step resident memory by 20-30 MB at times, whatever the
/// session; anything kept per input of at least one ciphertext (~200 KB) exceeds it
/// over the 224 inputs between the two readings.
#[test]
fn a_long_session_keeps_its_memory_flat() {
    let (early, end) = long_session("digits-cnn-bn", 256);
    assert!(
        end < early + (48 << 20),
        "resident memory {early} after 32 inputs, {end} after 256"
    );
}

/// The full session a user may ask for: 4096 inputs (release: about 10 minutes).
#[test]
#[ignore = "4096 inputs; run with --release --ignored"]
fn a_session_of_4096_inputs_keeps_its_memory_flat() {
    let (early, end) = long_session("digits-cnn-bn", 4096);
    eprintln!(
        "4096-input session: resident memory {:.1} MB after 512 inputs, {:.1} MB after 4096",
        early as f64 / 1e6,
        end as f64 / 1e6
    );
    assert!(end < early + (16 << 20));
}

/// `clients` clients at once, `inputs` each, against one server, twice over: every
/// output checked.
fn concurrent(name: &str, clients: usize, inputs: usize) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (model, test) = model(name);
    let test = Arc::new(test);
    let shared = Arc::new(model.clone());
    let (addr, h) = serve(&model, clients, 2 * clients);
    for _ in 0..2 {
        let workers: Vec<_> = (0..clients)
            .map(|c| {
                let (addr, test, model) = (addr.clone(), test.clone(), shared.clone());
                thread::spawn(move || {
                    let xs: Vec<Vec<f32>> = (0..inputs)
                        .map(|k| test[(c * inputs + k) % test.len()].clone())
                        .collect();
                    let out = Client::new(&addr, ClientOptions::default())
                        .infer(&xs, &mut |_| {})
                        .unwrap();
                    for (x, o) in xs.iter().zip(&out.outputs) {
                        assert_eq!(o.fixed, model.fixed_reference(x, o).unwrap());
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    }
    h.join().unwrap();
}

/// Four clients at once sending 16 inputs each of the digit CNN, twice over: all
/// succeed (the second round's clients connect as the first round's sessions end),
/// bit-exact.
#[test]
fn four_concurrent_clients_twice_over_all_succeed_bit_exact() {
    concurrent("digits-cnn-bn", 4, 16);
}

/// The same with the CIFAR-sized residual fixture (release: about a minute and a half).
#[test]
#[ignore = "128 CIFAR-sized inferences; run with --release --ignored"]
fn four_concurrent_cifar_clients_twice_over_all_succeed_bit_exact() {
    concurrent("residual-cifar", 4, 16);
}
