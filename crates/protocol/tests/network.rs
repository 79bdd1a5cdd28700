//! Whole networks privately, client and server in two threads over an in-memory
//! channel: the client's reconstructed output equals the plaintext fixed-point
//! reference bit for bit (nn::run_fixed, integer arithmetic), for an MLP with ReLU, a
//! square-activation network (interactive Square + truncation), a CNN with MaxPool
//! and a residual block with GlobalAveragePool; and a wrong parameter set is refused.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use he::Params;
use net::{Link, MemChannel};
use protocol::network::{infer_client, serve_network};
use protocol::ProtocolError;
use rand::{Rng, SeedableRng};

fn check(net_name: &str, inputs: usize) {
    check_bytes(net_name, &nn::zoo::onnx(net_name, 1).unwrap(), inputs, 0.0);
}

/// Inputs uniform in [lo, 1).
fn check_bytes(net_name: &str, bytes: &[u8], inputs: usize, lo: f32) {
    let network = nn::import_bytes(bytes).unwrap();
    let len: usize = network.input_shape().iter().product();
    let mut r = rand::rngs::StdRng::seed_from_u64(9);
    let xs: Vec<Vec<f32>> = (0..inputs)
        .map(|_| (0..len).map(|_| r.random_range(lo..1.0)).collect())
        .collect();
    let prog = nn::plan_fixed_point(&network, &xs, nn::CANDIDATE_MODULI, 6, 12).unwrap();
    let params = Params::preset(&prog.preset).unwrap();
    let xq: Vec<Vec<i64>> = xs.iter().map(|x| nn::quantise_input(&prog, x)).collect();
    let (mut c, mut s) = MemChannel::pair(1 << 30, Duration::from_secs(300), Link::NONE);
    let (sp, sprog) = (params.clone(), prog.clone());
    let server = std::thread::spawn(move || {
        serve_network(
            &mut s,
            &sp,
            &sprog,
            &|_| None,
            &Link::NONE,
            gc::Garbler::Server,
        )
    });
    let out = infer_client(
        &mut c,
        &params,
        protocol::network::Inputs::Quantised(&xq),
        gc::Garbler::Server,
        &mut |_, _| {},
    )
    .unwrap();
    let srv = server.join().unwrap().unwrap();
    assert_eq!(out.outputs.len(), inputs);
    assert_eq!(srv.inferences.len(), inputs);
    for (x, (y, rep)) in xq.iter().zip(&out.outputs) {
        assert_eq!(y, &nn::run_fixed(&prog, x).unwrap(), "{net_name}");
        assert_eq!(rep.steps.len(), prog.steps.len());
        assert!(rep.traffic.online.bytes_received > 0);
        assert!(rep.traffic.offline.bytes_received > 0);
    }
}

#[test]
fn mlp_with_relu_equals_the_fixed_point_reference() {
    check("mlp", 2);
}

/// A strided convolution runs as zero Pad + space-to-depth on the shares and a stride-1
/// kernel (GAZELLE's MNIST C: 5x5 stride 2, then ReLU and two FC layers).
#[test]
fn strided_conv_via_space_to_depth_equals_the_fixed_point_reference() {
    let prog = nn::lower(
        &nn::import_bytes(&nn::zoo::onnx("mnist-c", 1).unwrap()).unwrap(),
        8,
        1_032_193,
    )
    .unwrap();
    assert!(prog
        .steps
        .iter()
        .any(|s| matches!(s, nn::Step::SpaceToDepth { .. })));
    check("mnist-c", 1);
}

/// Conv → MaxPool with no ReLU: the pooled values are often negative (the GC's plain
/// signed max, not ReLU of the max; 1x1 windows keep every negative conv output, 2x2
/// windows then pool), then Flatten → Gemm.
#[test]
fn maxpool_of_negative_values_equals_the_fixed_point_reference() {
    use nn::export::{a_int, a_ints, Mb};
    let mut m = Mb::new(4);
    m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
    m.node(
        "MaxPool",
        "/pool0/MaxPool",
        &["c"],
        &["c1"],
        vec![
            a_ints("kernel_shape", &[1, 1]),
            a_ints("pads", &[0, 0, 0, 0]),
            a_ints("strides", &[1, 1]),
        ],
    );
    m.node(
        "MaxPool",
        "/pool/MaxPool",
        &["c1"],
        &["p"],
        vec![
            a_ints("kernel_shape", &[2, 2]),
            a_ints("pads", &[0, 0, 0, 0]),
            a_ints("strides", &[2, 2]),
        ],
    );
    m.node(
        "Flatten",
        "/Flatten",
        &["p"],
        &["f"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc", "f", "output", 32, 4);
    // (the first pool is 1x1: its output is the conv output itself, half negative)
    let bytes = m.finish("input", &[1, 8, 8], "output", &[4], 13);
    check_bytes("conv-maxpool", &bytes, 2, -1.0);
}

/// Conv → ReLU → MaxPool: one fused garbled circuit (ReLU of the max).
#[test]
fn fused_relu_maxpool_equals_the_fixed_point_reference() {
    use nn::export::{a_int, a_ints, Mb};
    let mut m = Mb::new(6);
    m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
    m.relu("relu", "c", "r");
    m.node(
        "MaxPool",
        "/pool/MaxPool",
        &["r"],
        &["p"],
        vec![
            a_ints("kernel_shape", &[2, 2]),
            a_ints("pads", &[0, 0, 0, 0]),
            a_ints("strides", &[2, 2]),
        ],
    );
    m.node(
        "Flatten",
        "/Flatten",
        &["p"],
        &["f"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc", "f", "output", 32, 4);
    let bytes = m.finish("input", &[1, 8, 8], "output", &[4], 13);
    let prog = nn::lower(&nn::import_bytes(&bytes).unwrap(), 8, 1032193).unwrap();
    assert!(prog.steps.iter().any(|s| matches!(
        s,
        nn::Step::Nonlinear {
            op: nn::NonlinearOp::ReluMaxPool { .. },
            ..
        }
    )));
    check_bytes("conv-relu-maxpool", &bytes, 2, -1.0);
}

#[test]
fn square_network_equals_the_fixed_point_reference() {
    check("mnist-a", 1);
}

#[test]
fn residual_block_equals_the_fixed_point_reference() {
    check("tiny-resnet", 1);
}

#[test]
#[ignore = "a few seconds in release; run with --ignored"]
fn minionn_cnn_equals_the_fixed_point_reference() {
    check("mnist-d", 1);
}

#[test]
fn a_client_with_other_parameters_is_refused() {
    let bytes = nn::zoo::onnx("mlp", 1).unwrap();
    let network = nn::import_bytes(&bytes).unwrap();
    let xs = vec![vec![0.5f32; 784]];
    let prog = nn::plan_fixed_point(&network, &xs, nn::CANDIDATE_MODULI, 6, 12).unwrap();
    let params = Params::preset(&prog.preset).unwrap();
    let other = Params::preset("n8192-q164").unwrap();
    let (mut c, mut s) = MemChannel::pair(1 << 30, Duration::from_secs(30), Link::NONE);
    let server = std::thread::spawn(move || {
        serve_network(
            &mut s,
            &params,
            &prog,
            &|_| None,
            &Link::NONE,
            gc::Garbler::Server,
        )
    });
    let xq = vec![vec![0i64; 784]];
    let e = infer_client(
        &mut c,
        &other,
        protocol::network::Inputs::Quantised(&xq),
        gc::Garbler::Server,
        &mut |_, _| {},
    );
    assert_eq!(
        e.unwrap_err(),
        ProtocolError::PeerAborted(protocol::AbortReason::Params)
    );
    assert!(matches!(
        server.join().unwrap(),
        Err(ProtocolError::Params { .. })
    ));
}

/// A server whose plan names a tensor that does not exist is refused (no indexing
/// with peer data).
#[test]
fn a_plan_with_unknown_tensors_is_refused() {
    use bincode::Options;
    use net::Channel;
    use protocol::network::NetMsg;
    let bytes = nn::zoo::onnx("mlp", 1).unwrap();
    let network = nn::import_bytes(&bytes).unwrap();
    let mut prog = nn::lower(&network, 8, 1032193).unwrap();
    let methods: Vec<Option<protocol::LayerSpec>> = prog
        .steps
        .iter()
        .map(|s| match s {
            nn::Step::Linear { rows, cols, .. } => Some(protocol::LayerSpec::Matvec {
                method: kernels::Method::Gala,
                rows: *rows,
                cols: *cols,
            }),
            _ => None,
        })
        .collect();
    let bad = prog.tensors.len() + 5;
    if let nn::Step::Linear { output, .. } = &mut prog.steps[0] {
        *output = bad;
    }
    let params = Params::preset("n8192").unwrap();
    let (mut c, mut s) = MemChannel::pair(1 << 30, Duration::from_secs(30), Link::NONE);
    let server = std::thread::spawn(move || {
        s.recv().unwrap();
        let m = NetMsg::Plan {
            program: prog,
            methods,
        };
        let frame = bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .serialize(&m)
            .unwrap();
        s.send(&frame).unwrap();
    });
    let xq = vec![vec![0i64; 784]];
    let e = infer_client(
        &mut c,
        &params,
        protocol::network::Inputs::Quantised(&xq),
        gc::Garbler::Server,
        &mut |_, _| {},
    );
    assert_eq!(e.unwrap_err(), ProtocolError::Plan);
    server.join().unwrap();
}
