//! Whole networks privately, client and server in two threads over an in-memory
//! channel: the client's reconstructed output equals the plaintext fixed-point
//! reference bit for bit (nn::run_fixed, integer arithmetic), for an MLP with ReLU, a
//! square-activation network (interactive Square + truncation), a CNN with MaxPool
//! and a residual block with GlobalAveragePool; the fixed point is planned on calibration
//! inputs other than the ones checked; out-of-range or non-finite inputs are refused
//! before anything is encrypted, and a parameter set other than the one asked for is
//! refused.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use he::Params;
use net::{Link, MemChannel};
use protocol::{infer, NetworkPlan, NetworkServer, NonlinearProtocol};

/// A network server of `prog` with the planner's picks (reference costs), all weights
/// held.
fn serve_network<C: net::Channel>(
    ch: &mut C,
    params: &Params,
    prog: &nn::Program,
    nonlinear: NonlinearProtocol,
) -> protocol::Result<protocol::ServerOutcome> {
    NetworkServer::new(&NetworkPlan::auto(prog.clone(), params)?, nonlinear)?.serve(ch)
}

/// Every way the nonlinear steps can run.
const EVERY_NONLINEAR: [NonlinearProtocol; 3] = [
    NonlinearProtocol::SilentOt,
    NonlinearProtocol::GarbledCircuits(gc::Garbler::Server),
    NonlinearProtocol::GarbledCircuits(gc::Garbler::Client),
];
use protocol::ProtocolError;
use rand::{Rng, SeedableRng};

fn check(net_name: &str, inputs: usize) {
    check_bytes(net_name, &nn::zoo::onnx(net_name, 1).unwrap(), inputs, 0.0);
}

/// `n` inputs uniform in [lo, 1) from `seed`.
fn uniform(seed: u64, n: usize, len: usize, lo: f32) -> Vec<Vec<f32>> {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..len).map(|_| r.random_range(lo..1.0)).collect())
        .collect()
}

/// The plan of `bytes` from 8 calibration inputs uniform in [lo, 1), with approximate
/// truncation where the planner allows it or faithful throughout.
fn plan(bytes: &[u8], lo: f32, approximate_truncation: bool) -> (nn::Program, Params) {
    let network = nn::import_bytes(bytes).unwrap();
    let len: usize = network.input_shape().iter().product();
    let prog = nn::choose_fixed_point(
        &network,
        &uniform(1009, 8, len, lo),
        &nn::FixedPointOptions {
            approximate_truncation,
            ..nn::FixedPointOptions::default()
        },
    )
    .unwrap();
    let params = Params::preset(&prog.preset).unwrap();
    (prog, params)
}

/// Test inputs uniform in [lo, 1), other than the calibration inputs.
/// A `k×k` MaxPool node with `pad` on every side and stride `s`.
fn max_pool(m: &mut nn::export::Mb, name: &str, x: &str, out: &str, k: i64, pad: i64, s: i64) {
    use nn::export::a_ints;
    m.node(
        "MaxPool",
        name,
        &[x],
        &[out],
        vec![
            a_ints("kernel_shape", &[k, k]),
            a_ints("pads", &[pad; 4]),
            a_ints("strides", &[s, s]),
        ],
    );
}

/// A Flatten node (axis 1).
fn flatten(m: &mut nn::export::Mb, x: &str, out: &str) {
    m.node(
        "Flatten",
        "/Flatten",
        &[x],
        &[out],
        vec![nn::export::a_int("axis", 1)],
    );
}

fn check_bytes(net_name: &str, bytes: &[u8], inputs: usize, lo: f32) {
    check_bytes_with(net_name, bytes, inputs, lo, NonlinearProtocol::default());
}

/// [`check_bytes`] with the nonlinear steps run by `nonlinear`.
fn check_bytes_with(
    net_name: &str,
    bytes: &[u8],
    inputs: usize,
    lo: f32,
    nonlinear: NonlinearProtocol,
) {
    // silent OT runs the planner's approximate truncations; garbled circuits refuse them
    let ot = nonlinear == NonlinearProtocol::SilentOt;
    let (prog, params) = plan(bytes, lo, ot);
    if !ot {
        let (approximate, _) = plan(bytes, lo, true);
        if !approximate.approximate_steps().is_empty() {
            let plan = NetworkPlan::auto(approximate, &params).unwrap();
            assert!(matches!(
                NetworkServer::new(&plan, nonlinear),
                Err(ProtocolError::Plan(
                    protocol::PlanError::ApproximateWithoutOt
                ))
            ));
        }
    }
    let xs = uniform(9, inputs, prog.input_shape.iter().product(), lo);
    let xq: Vec<Vec<i64>> = xs.iter().map(|x| nn::quantise_input(&prog, x)).collect();
    let (mut c, mut s) = MemChannel::pair(1 << 30, Duration::from_secs(300), Link::NONE);
    let (sp, sprog) = (params.clone(), prog.clone());
    let server = std::thread::spawn(move || serve_network(&mut s, &sp, &sprog, nonlinear));
    let out = infer(&mut c, None, &xs, &mut |_, _| {}).unwrap();
    assert_eq!(out.offer.nonlinear, nonlinear);
    assert_eq!(out.params, params);
    let srv = server.join().unwrap().unwrap();
    assert_eq!(out.outputs.len(), inputs);
    assert_eq!(srv.inferences, inputs);
    assert!(
        srv.shares.is_empty(),
        "the server keeps no shares of revealed outputs"
    );
    // Each party's wait for the other's ciphertexts in an HE step (linear or Square) is
    // part of its time in the step; the client always waits for the server's products.
    let first = srv.first.as_ref().unwrap();
    let he_step =
        |s: &protocol::StepReport| matches!(s.kind.as_str(), "linear" | "conv" | "square");
    for (c, s) in out.outputs[0].report.steps.iter().zip(&first.steps) {
        for (party, r) in [("client", c), ("server", s)] {
            assert!(
                (0.0..=r.ms).contains(&r.wait_ms),
                "{net_name}: {party} {}: waited {} of {} ms",
                r.layer,
                r.wait_ms,
                r.ms
            );
            assert!(he_step(r) || r.wait_ms == 0.0, "{net_name}: {}", r.layer);
        }
        if he_step(c) {
            assert!(c.wait_ms > 0.0, "{net_name}: {}", c.layer);
        }
    }
    for (x, o) in xq.iter().zip(&out.outputs) {
        let (y, rep) = (o.value.as_ref().unwrap(), &o.report);
        // the reference, approximate truncations replayed from the client's shares
        let want = nn::run_fixed_replay(&prog, x, &o.truncation_shares).unwrap();
        assert_eq!(y, &want, "{net_name}");
        assert_eq!(rep.steps.len(), prog.steps.len());
        assert!(rep.traffic.online.bytes_received > 0);
        assert!(rep.traffic.offline.bytes_received > 0);
        for step in &rep.steps {
            if matches!(
                step.kind.as_str(),
                "relu" | "maxpool" | "truncate" | "relu+maxpool"
            ) {
                assert_eq!(step.method, nonlinear.name(), "{net_name}: {}", step.layer);
                let work = if step.method == "ot" {
                    step.cots
                } else {
                    step.and_gates
                };
                assert!(work > 0, "{net_name}: {}", step.layer);
            }
        }
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
    use nn::export::Mb;
    let mut m = Mb::new(4);
    m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
    max_pool(&mut m, "/pool0/MaxPool", "c", "c1", 1, 0, 1);
    max_pool(&mut m, "/pool/MaxPool", "c1", "p", 2, 0, 2);
    flatten(&mut m, "p", "f");
    m.gemm("fc", "f", "output", 32, 4);
    // (the first pool is 1x1: its output is the conv output itself, half negative)
    let bytes = m.finish("input", &[1, 8, 8], "output", &[4], 13);
    for nonlinear in EVERY_NONLINEAR {
        check_bytes_with("conv-maxpool", &bytes, 2, -1.0, nonlinear);
    }
}

/// Conv → ReLU → MaxPool: one fused garbled circuit (ReLU of the max).
#[test]
fn fused_relu_maxpool_equals_the_fixed_point_reference() {
    use nn::export::Mb;
    let mut m = Mb::new(6);
    m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
    m.relu("relu", "c", "r");
    max_pool(&mut m, "/pool/MaxPool", "r", "p", 2, 0, 2);
    flatten(&mut m, "p", "f");
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
    for nonlinear in EVERY_NONLINEAR {
        check_bytes_with("conv-relu-maxpool", &bytes, 2, -1.0, nonlinear);
    }
}

/// Overlapping MaxPool windows (a ResNet stem's padded 3×3/2 after a ReLU, then a 3×3/1
/// of signed values) on an oblong plane: silent OT runs their max separably (each
/// used row once, then the columns), and the private logits still equal the
/// fixed-point reference with every nonlinear protocol.
#[test]
fn overlapping_maxpool_windows_equal_the_fixed_point_reference() {
    use nn::export::Mb;
    let mut m = Mb::new(6);
    m.conv("conv", "input", "c", 1, 2, 3, 1, 1, true);
    m.relu("relu", "c", "r");
    max_pool(&mut m, "/pool/MaxPool", "r", "p", 3, 1, 2);
    m.conv("conv2", "p", "c2", 2, 2, 1, 1, 0, true);
    max_pool(&mut m, "/pool2/MaxPool", "c2", "q", 3, 0, 1);
    flatten(&mut m, "q", "f");
    // 1×9×13 → conv 2×9×13 → pool 2×5×7 → conv 2×5×7 → pool 2×3×5
    m.gemm("fc", "f", "output", 30, 4);
    let bytes = m.finish("input", &[1, 9, 13], "output", &[4], 29);
    let prog = nn::lower(&nn::import_bytes(&bytes).unwrap(), 8, 1032193).unwrap();
    let pooled = prog
        .steps
        .iter()
        .filter_map(|s| protocol::nonlinear_spec(&prog, s).unwrap())
        .filter_map(|s| s.pooling)
        .collect::<Vec<_>>();
    assert_eq!(pooled.len(), 2, "both pools run separably");
    for nonlinear in EVERY_NONLINEAR {
        check_bytes_with("conv-overlapping-maxpool", &bytes, 2, -1.0, nonlinear);
    }
}

/// Input normalisation in the graph (client side), conv + a clip to [−0.1, 0.25] (two
/// ReLUs of one batch; narrow, so that both bounds are hit), a Softmax head: the
/// private logits equal the fixed-point reference, with silent OT and with garbled
/// circuits.
#[test]
fn clip_and_input_normalisation_equal_the_fixed_point_reference() {
    use nn::export::{a_int, f32_tensor, Mb};
    let mut m = Mb::new(8);
    m.inits
        .push(f32_tensor("mean", &[1, 2, 1, 1], &[0.1, -0.2]));
    m.inits.push(f32_tensor("std", &[1, 2, 1, 1], &[0.5, 0.25]));
    m.inits.push(f32_tensor("lo", &[], &[-0.1]));
    m.inits.push(f32_tensor("hi", &[], &[0.25]));
    m.node("Sub", "/norm/Sub", &["input", "mean"], &["xc"], vec![]);
    m.node("Div", "/norm/Div", &["xc", "std"], &["xn"], vec![]);
    m.conv("conv", "xn", "c", 2, 4, 3, 1, 1, true);
    m.node("Clip", "/clip", &["c", "lo", "hi"], &["r"], vec![]);
    flatten(&mut m, "r", "f");
    m.gemm("fc", "f", "logits", 4 * 6 * 6, 3);
    m.node(
        "Softmax",
        "/softmax",
        &["logits"],
        &["p"],
        vec![a_int("axis", 1)],
    );
    let bytes = m.finish("input", &[2, 6, 6], "p", &[3], 13);
    let net = nn::import_bytes(&bytes).unwrap();
    assert!(net.input_affine.is_some() && !net.head.is_empty());
    // both bounds are reached on these inputs
    let conv = net
        .nodes
        .iter()
        .find(|n| matches!(n.op, nn::Op::Conv { .. }))
        .unwrap();
    let x = uniform(9, 1, 2 * 6 * 6, -1.0).remove(0);
    let c = &nn::run_float_all(&net, &x)[conv.output];
    assert!(c.iter().any(|&v| v < -0.1) && c.iter().any(|&v| v > 0.25));
    for nonlinear in EVERY_NONLINEAR.into_iter().take(2) {
        check_bytes_with("normalised-clip", &bytes, 2, -1.0, nonlinear);
    }
}

/// A grouped conv (2 groups of 2 → 4 channels), a ReLU, a depthwise 3x3 stride-2 conv
/// with padding (group = channels), a ReLU and a dense head: the private logits equal
/// the fixed-point reference (the planner picks a grouped method per layer).
#[test]
fn grouped_and_depthwise_convs_equal_the_fixed_point_reference() {
    use nn::export::{a_int, a_ints, Mb};
    let mut m = Mb::new(11);
    let grouped = |m: &mut Mb, name: &str, x: &str, out: &str, c: usize, groups: usize, stride| {
        let per = c / groups;
        let w = m.param(&format!("{name}.weight"), &[c, per, 3, 3], per * 9);
        let b = m.param(&format!("{name}.bias"), &[c], per * 9);
        m.node(
            "Conv",
            &format!("/{name}/Conv"),
            &[x, w.as_str(), b.as_str()],
            &[out],
            vec![
                a_ints("dilations", &[1, 1]),
                a_int("group", groups as i64),
                a_ints("kernel_shape", &[3, 3]),
                a_ints("pads", &[1, 1, 1, 1]),
                a_ints("strides", &[stride, stride]),
            ],
        );
    };
    grouped(&mut m, "grouped", "input", "g", 4, 2, 1);
    m.relu("r1", "g", "g1");
    grouped(&mut m, "depthwise", "g1", "d", 4, 4, 2);
    m.relu("r2", "d", "d1");
    flatten(&mut m, "d1", "f");
    m.gemm("fc", "f", "logits", 4 * 4 * 4, 3);
    let bytes = m.finish("input", &[4, 8, 8], "logits", &[3], 13);
    let net = nn::import_bytes(&bytes).unwrap();
    let groups: Vec<usize> = net
        .nodes
        .iter()
        .filter_map(|n| match n.op {
            nn::Op::Conv { groups, .. } => Some(groups),
            _ => None,
        })
        .collect();
    assert_eq!(groups, [2, 4]);
    check_bytes("grouped-depthwise", &bytes, 2, -1.0);
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

/// Runs a session of the `mlp` planned on calibration inputs in [0, 1) with the
/// client's `inputs` and `expect`; returns both results.
fn session(
    inputs: Vec<Vec<f32>>,
    expect: Option<Params>,
) -> (
    protocol::Result<protocol::ClientOutcome>,
    protocol::Result<protocol::ServerOutcome>,
) {
    let (prog, params) = plan(&nn::zoo::onnx("mlp", 1).unwrap(), 0.0, true);
    let (mut c, mut s) = MemChannel::pair(1 << 30, Duration::from_secs(30), Link::NONE);
    let server = std::thread::spawn(move || {
        serve_network(&mut s, &params, &prog, NonlinearProtocol::default())
    });
    let client = infer(&mut c, expect.as_ref(), &inputs, &mut |_, _| {});
    (client, server.join().unwrap())
}

#[test]
fn a_client_expecting_other_parameters_stops_before_its_keys() {
    let other = Params::preset("n8192-q164").unwrap();
    let (c, s) = session(vec![vec![0.5f32; 784]], Some(other));
    assert!(matches!(c, Err(ProtocolError::Params { .. })), "{c:?}");
    // the server heard the coarse reason while it waited for the keys
    assert_eq!(
        s.unwrap_err(),
        ProtocolError::PeerAborted(protocol::AbortReason::Params)
    );
}

/// Ten times a normal input is refused with the range error, a NaN or an infinity with
/// the non-finite error, on the client before anything is encrypted (the server hears
/// `Abort(Input)` while it waits for the client's keys), and no session sees it wrap.
#[test]
fn out_of_range_and_non_finite_inputs_are_refused_before_encryption() {
    let normal = uniform(5, 1, 784, 0.0).remove(0);
    let big: Vec<f32> = normal.iter().map(|v| 10.0 * v).collect();
    let (c, s) = session(vec![normal.clone(), big], None);
    match c {
        Err(ProtocolError::InputOutOfRange {
            input,
            value,
            lo,
            hi,
            count,
            ..
        }) => {
            assert_eq!(input, 1);
            assert!(
                value > hi && lo <= 0.0 && hi < 10.0 && count > 1,
                "{value} {lo} {hi}"
            );
        }
        other => panic!("expected InputOutOfRange, got {other:?}"),
    }
    assert_eq!(
        s.unwrap_err(),
        ProtocolError::PeerAborted(protocol::AbortReason::Input)
    );
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut x = normal.clone();
        x[17] = bad;
        let (c, s) = session(vec![x], None);
        match c {
            Err(ProtocolError::NonFiniteInput { input, index, .. }) => {
                assert_eq!((input, index), (0, 17))
            }
            other => panic!("expected NonFiniteInput, got {other:?}"),
        }
        assert!(s.is_err());
    }
    // the normal input alone runs
    let (c, s) = session(vec![normal], None);
    assert!(c.is_ok() && s.is_ok());
}

/// A server whose plan names a tensor that does not exist is refused (no indexing
/// with peer data).
#[test]
fn a_plan_with_unknown_tensors_is_refused() {
    use net::Channel;
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
    let (mut c, mut s) = MemChannel::pair(1 << 30, Duration::from_secs(30), Link::NONE);
    let server = std::thread::spawn(move || {
        s.recv().unwrap();
        let params = Params::preset("n8192").unwrap();
        let m = protocol::Msg::Offer(Box::new(protocol::SessionOffer {
            params: params.spec(),
            params_hash: params.hash(),
            program: prog,
            methods,
            reveal: true,
            inputs: 1,
            nonlinear: protocol::NonlinearProtocol::default(),
            session_responses_log2: 20,
            segments: Vec::new(),
        }));
        s.send(&protocol::encode(&m).unwrap()).unwrap();
    });
    let e = infer(&mut c, None, &[vec![0f32; 784]], &mut |_, _| {});
    assert_eq!(
        e.unwrap_err(),
        ProtocolError::Plan(protocol::PlanError::Offer {
            what: "tensor ids within the program"
        })
    );
    server.join().unwrap();
}

/// One network server, its weights encoded once, taking two sessions at a time: two
/// clients hold the slots, a third is told `Busy` at once; when the two end, a client
/// is served (its result bit-exact) without any weight encoding in its session.
#[test]
fn one_more_network_client_than_the_limit_is_told_busy() {
    use std::sync::{Arc, Mutex};
    let (prog, params) = plan(&nn::zoo::onnx("mlp", 1).unwrap(), 0.0, true);
    let server = Arc::new(
        NetworkServer::new(
            &NetworkPlan::auto(prog.clone(), &params).unwrap(),
            NonlinearProtocol::default(),
        )
        .unwrap(),
    );
    assert!(server.encode_ms() > 0.0);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let reports: Arc<Mutex<Vec<protocol::ServerSessionReport>>> = Arc::default();
    let r = reports.clone();
    let h = std::thread::spawn(move || {
        let opts = protocol::ServeOptions {
            timeout: Duration::from_secs(6),
            max_concurrent: 2,
            stop_after: Some(4),
            ..protocol::ServeOptions::new(1 << 30)
        };
        protocol::serve_sessions(
            l,
            &opts,
            move |ch| server.serve(ch),
            move |rep| r.lock().unwrap().push(rep),
        )
        .unwrap();
    });
    // two clients that connect and stay silent hold both slots
    let held: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let xs = uniform(9, 1, 784, 0.0);
    let mut c =
        net::TcpChannel::connect(&addr, 1 << 30, Duration::from_secs(30), Link::NONE).unwrap();
    let busy = infer(&mut c, None, &xs, &mut |_, _| {});
    assert_eq!(
        busy.unwrap_err(),
        ProtocolError::PeerAborted(protocol::AbortReason::Busy)
    );
    // the silent ones time out (frame deadline 6 s) and free their slots
    let t = std::time::Instant::now();
    while reports.lock().unwrap().len() < 3 {
        assert!(t.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(held);
    let mut c =
        net::TcpChannel::connect(&addr, 1 << 30, Duration::from_secs(30), Link::NONE).unwrap();
    let out = infer(&mut c, None, &xs, &mut |_, _| {}).unwrap();
    h.join().unwrap();
    let xq = nn::quantise_input(&prog, &xs[0]);
    let shares = &out.outputs[0].truncation_shares;
    assert_eq!(
        out.outputs[0].value.as_ref().unwrap(),
        &nn::run_fixed_replay(&prog, &xq, shares).unwrap()
    );
    let reports = reports.lock().unwrap();
    let timeouts = reports
        .iter()
        .filter(|r| {
            matches!(
                r.result,
                Err(ProtocolError::Net(net::NetError::Timeout { .. }))
            )
        })
        .count();
    assert_eq!(timeouts, 2);
    let served = reports.iter().find_map(|r| r.result.as_ref().ok()).unwrap();
    assert!(served.responses > 0 && served.distance_log2 < -30.0);
}

/// A plan for sessions of one input floods each response for one input's responses, not
/// [`protocol::MAX_INPUTS_PER_SESSION`] inputs' worth: 12 bits less flooding, so the
/// client's queries are rounded further and are smaller; its one input still equals the
/// reference, and a session of two inputs is refused by the response bound.
#[test]
fn a_plan_for_one_input_floods_less_and_refuses_a_second() {
    let (prog, params) = plan(&nn::zoo::onnx("tiny-resnet", 1).unwrap(), 0.0, true);
    let mut planner = protocol::Planner::new(&params, &Link::NONE);
    planner.session_inputs = 1;
    let one = NetworkPlan::new(
        prog.clone(),
        &params,
        &planner,
        None,
        &protocol::MethodChoice::Auto,
        None,
    )
    .unwrap();
    let many = NetworkPlan::auto(prog.clone(), &params).unwrap();
    let (r1, r) = (
        one.params.session_responses_log2(),
        many.params.session_responses_log2(),
    );
    assert_eq!(
        r1 + 12,
        r,
        "4096 inputs are 12 bits of responses more than one"
    );
    planner.session_inputs = 0;
    assert!(matches!(
        NetworkPlan::new(
            prog.clone(),
            &params,
            &planner,
            None,
            &protocol::MethodChoice::Auto,
            None
        ),
        Err(ProtocolError::TooManyInputs { requested: 0, .. })
    ));
    let len: usize = prog.input_shape.iter().product();
    let run = |plan: &NetworkPlan, xs: &[Vec<f32>]| {
        let (mut c, mut s) = MemChannel::pair(1 << 30, Duration::from_secs(120), Link::NONE);
        let server = NetworkServer::new(plan, NonlinearProtocol::SilentOt).unwrap();
        let h = std::thread::spawn(move || server.serve(&mut s));
        let out = infer(&mut c, None, xs, &mut |_, _| {});
        (out, h.join().unwrap())
    };
    let xs = uniform(11, 2, len, 0.0);
    let (small, _) = run(&one, &xs[..1]);
    let (large, _) = run(&many, &xs[..1]);
    let (small, large) = (small.unwrap(), large.unwrap());
    let x = nn::quantise_input(&prog, &xs[0]);
    for out in [&small, &large] {
        let o = &out.outputs[0];
        let want = nn::run_fixed_replay(&prog, &x, &o.truncation_shares).unwrap();
        assert_eq!(o.value.as_ref().unwrap(), &want);
    }
    let up = |o: &protocol::ClientOutcome| o.traffic.online.bytes_sent;
    assert!(
        up(&small) < up(&large),
        "queries for one input: {} B, for 4096: {} B",
        up(&small),
        up(&large)
    );
    let (two, server) = run(&one, &xs);
    assert!(
        two.is_err(),
        "a second input is over the plan's response bound"
    );
    assert!(
        matches!(
            server,
            Err(ProtocolError::TooManyResponses { inputs: 2, .. })
        ),
        "{server:?}"
    );
}
