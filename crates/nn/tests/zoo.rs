//! The built-in networks: import, lowering, and shape facts computed independently from
//! the published configurations (He et al. Table 1, torchvision, CryptoNets Table 1).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use nn::{
    choose_fixed_point, dequantise, import_bytes, lower, quantise_input, run_fixed, run_float, zoo,
    NonlinearOp, Op, PadMode, Program, Step, CANDIDATE_MODULI,
};
use prost::Message;

/// The plaintext modulus of the `n8192` preset.
const P: u64 = 1_032_193;

fn bytes(name: &str) -> Vec<u8> {
    zoo::onnx(name, 1).unwrap()
}

/// Parameters the ONNX model holds as torch counts them: every float initializer except
/// BatchNorm's running statistics (buffers, not parameters).
fn onnx_parameters(bytes: &[u8]) -> usize {
    let model = tract_onnx::pb::ModelProto::decode(bytes).unwrap();
    model
        .graph
        .unwrap()
        .initializer
        .iter()
        .filter(|t| t.data_type == tract_onnx::pb::tensor_proto::DataType::Float as i32)
        .filter(|t| !t.name.ends_with(".running_mean") && !t.name.ends_with(".running_var"))
        .map(|t| t.dims.iter().product::<i64>() as usize)
        .sum()
}

/// Linear/Conv steps of a program, their MACs (`c_o·h_out·w_out·c_i·k_h·k_w`, `rows·cols`)
/// and the number of Conv steps among them.
/// Multiply-accumulates of the imported network's convolutions and linear layers (the
/// lowering may compute more: space-to-depth pads strided filters with zero taps).
fn ir_macs(net: &nn::Network) -> u64 {
    net.nodes
        .iter()
        .map(|n| match &n.op {
            Op::Conv { shape, .. } => {
                let o = net.shape(n.output);
                (o.iter().product::<usize>() * shape.c_i * shape.k_h * shape.k_w) as u64
            }
            Op::Linear { rows, cols, .. } => (rows * cols) as u64,
            _ => 0,
        })
        .sum()
}

fn linear_steps(prog: &Program) -> (usize, u64, usize) {
    let mut n = 0;
    let mut convs = 0;
    let mut macs = 0u64;
    for st in &prog.steps {
        match st {
            Step::Conv { shape, output, .. } => {
                let o = &prog.tensors[*output].shape;
                assert_eq!(o[0], shape.c_o);
                macs += (shape.c_o * o[1] * o[2] * shape.c_i * shape.k_h * shape.k_w) as u64;
                n += 1;
                convs += 1;
            }
            Step::Linear { rows, cols, .. } => {
                macs += (rows * cols) as u64;
                n += 1;
            }
            _ => {}
        }
    }
    (n, macs, convs)
}

/// Independent count from the stage configuration (He et al. Table 1; the CIFAR variant
/// of kuangliu/pytorch-cifar): `(convs, downsample convs, MACs, parameters incl. BN
/// scale/shift, ReLU elements, final spatial side)`.
fn resnet_facts(bottleneck: bool, imagenet: bool) -> (usize, usize, u64, u64, u64, u64) {
    let blocks: [u64; 4] = if bottleneck {
        [3, 4, 6, 3]
    } else {
        [2, 2, 2, 2]
    };
    let expansion = if bottleneck { 4 } else { 1 };
    let classes: u64 = if imagenet { 1000 } else { 10 };
    let (mut convs, mut ds, mut macs, mut params, mut relus) = (1usize, 0usize, 0u64, 0u64, 0u64);
    // stem: 7×7/2 to 112, then max pool to 56; or 3×3/1 at 32
    let (k, mut h) = if imagenet { (7u64, 112u64) } else { (3, 32) };
    macs += 64 * h * h * 3 * k * k;
    params += 64 * 3 * k * k + 2 * 64;
    relus += 64 * h * h;
    if imagenet {
        h = 56;
    }
    let mut c = 64u64;
    for (stage, planes) in [64u64, 128, 256, 512].into_iter().enumerate() {
        for j in 0..blocks[stage] {
            let s = if stage > 0 && j == 0 { 2 } else { 1 };
            let ho = h / s;
            let out = planes * expansion;
            if bottleneck {
                macs += planes * c * h * h + planes * planes * 9 * ho * ho + out * planes * ho * ho;
                params += planes * c + planes * planes * 9 + out * planes + 2 * (2 * planes + out);
                relus += planes * h * h + planes * ho * ho + out * ho * ho;
                convs += 3;
            } else {
                macs += planes * c * 9 * ho * ho + planes * planes * 9 * ho * ho;
                params += planes * c * 9 + planes * planes * 9 + 4 * planes;
                relus += 2 * planes * ho * ho;
                convs += 2;
            }
            if s != 1 || c != out {
                macs += out * c * ho * ho;
                params += out * c + 2 * out;
                convs += 1;
                ds += 1;
            }
            c = out;
            h = ho;
        }
    }
    macs += c * classes;
    params += c * classes + classes;
    (convs, ds, macs, params, relus, h)
}

fn relu_elements(net: &nn::Network) -> u64 {
    net.nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Relu))
        .map(|n| net.shape(n.output).iter().product::<usize>() as u64)
        .sum()
}

/// Imports, lowers at s = 8 for the n8192 modulus and checks everything that follows
/// from the published configuration.
fn check_resnet(name: &str, bottleneck: bool, imagenet: bool) -> Program {
    let b = bytes(name);
    let (convs, ds, macs, params, relus, side) = resnet_facts(bottleneck, imagenet);
    assert_eq!(onnx_parameters(&b) as u64, params, "{name}: parameters");
    let net = import_bytes(&b).unwrap();
    let side_in = if imagenet { 224 } else { 32 };
    assert_eq!(net.input_shape(), [3, side_in, side_in]);
    assert_eq!(zoo::input_shape(name).unwrap(), net.input_shape());
    let classes = if imagenet { 1000 } else { 10 };
    assert_eq!(net.shape(net.output), [classes]);
    assert_eq!(relu_elements(&net), relus, "{name}: ReLU elements");
    // the residual Adds: one per block
    let adds = net.nodes.iter().filter(|n| matches!(n.op, Op::Add)).count();
    assert_eq!(adds, if bottleneck { 16 } else { 8 });
    let prog = lower(&net, 8, P).unwrap();
    assert_eq!(prog.input_shape, [3, side_in, side_in]);
    assert_eq!(prog.tensors[prog.output].shape, [classes]);
    let (n_lin, _, n_conv) = linear_steps(&prog);
    let prog_macs = ir_macs(&net);
    assert_eq!(
        (n_conv, n_lin),
        (convs, convs + 1),
        "{name}: conv / linear steps"
    );
    assert_eq!(prog_macs, macs, "{name}: MACs");
    // downsample shortcuts: the 1×1 convs whose input has more spatial positions than their
    // output, plus the stride-1 projection of ResNet-50's first block
    let shortcuts = prog
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Conv { name, .. } if name.contains("downsample") || name.contains("shortcut")))
        .count();
    assert_eq!(shortcuts, ds);
    // the last feature map before the pool
    let pool_in = prog
        .steps
        .iter()
        .find_map(|s| match s {
            Step::SumPool { input, .. } => Some(&prog.tensors[*input].shape),
            _ => None,
        })
        .unwrap();
    let c_last = if bottleneck { 2048 } else { 512 };
    assert_eq!(pool_in, &vec![c_last, side as usize, side as usize]);
    // Every conv runs at stride 1. A stride-2 one (the 7×7 stem, the 3×3s and 1×1
    // shortcuts at a stage change) reads a space-to-depth of its input (4x the channels,
    // ⌈k/2⌉-sized filters); the 7×7 and 3×3 ones pad with zeros first, k/2 on each side.
    let producer = |t: usize| prog.steps.iter().find(|s| s.output() == t);
    let mut strided = 0;
    for st in &prog.steps {
        if let Step::Conv { shape, input, .. } = st {
            assert_eq!(shape.stride, 1, "{}", st.name());
            if let Some(Step::SpaceToDepth { stride, input, .. }) = producer(*input) {
                assert_eq!(*stride, 2);
                strided += 1;
                let k = 2 * shape.k_h - 1;
                let padded = matches!(producer(*input), Some(Step::Pad { mode: PadMode::Zero, pads, .. }) if *pads == [k / 2; 4]);
                assert_eq!(padded, k > 1, "{}: {shape:?}", st.name());
            }
        }
    }
    // stem (ImageNet) + per stage change: the strided 3×3 (or the first 3×3 of a basic
    // block) and its shortcut
    assert_eq!(
        strided,
        usize::from(imagenet) + 2 * 3,
        "{name}: strided convs"
    );
    prog
}

/// GC work of a program: elements through ReLU steps, and ReluMaxPool outputs.
fn gc_relus(prog: &Program) -> (u64, u64) {
    let mut relu = 0;
    let mut pooled = 0;
    for st in &prog.steps {
        if let Step::Nonlinear {
            op, input, output, ..
        } = st
        {
            match op {
                NonlinearOp::Relu => relu += prog.tensors[*input].len() as u64,
                NonlinearOp::ReluMaxPool { .. } => pooled += prog.tensors[*output].len() as u64,
                _ => {}
            }
        }
    }
    (relu, pooled)
}

#[test]
fn every_net_is_registered_and_lowers() {
    let names: Vec<&str> = zoo::NETS.iter().map(|(n, _, _)| *n).collect();
    for want in [
        "mlp",
        "mnist-a",
        "mnist-b",
        "mnist-c",
        "mnist-d",
        "minionn-cifar",
        "tiny-resnet",
        "residual-block-cifar",
        "resnet18-cifar",
        "resnet50-cifar",
        "resnet18-imagenet",
        "resnet50-imagenet",
    ] {
        assert!(names.contains(&want), "{want} not in NETS");
    }
    assert!(zoo::onnx("no-such-net", 1).is_none());
    // the cheap ones here; the ResNets have their own tests
    for (name, shape, _) in zoo::NETS
        .iter()
        .filter(|(n, _, _)| !n.starts_with("resnet"))
    {
        let net = import_bytes(&bytes(name)).unwrap();
        assert_eq!(net.input_shape(), *shape, "{name}");
        let prog = lower(&net, 8, P).unwrap();
        assert_eq!(prog.tensors[prog.output].shape, [10], "{name}");
        // same seed, same bytes; another seed, other weights
        assert_eq!(zoo::onnx(name, 1), zoo::onnx(name, 1));
        assert_ne!(zoo::onnx(name, 1), zoo::onnx(name, 2));
    }
}

/// CryptoNets Table 1 geometry shared by GAZELLE's B and C.
fn check_cryptonets_like(name: &str, square: bool) {
    let b = bytes(name);
    // conv 5·1·25 + 5, FC 845·100 + 100, FC 100·10 + 10
    assert_eq!(onnx_parameters(&b), 130 + 84_600 + 1_010);
    let net = import_bytes(&b).unwrap();
    let act = if square { "Square" } else { "Relu" };
    let ops: Vec<&str> = net.nodes.iter().map(|n| n.op.kind()).collect();
    assert_eq!(
        ops,
        ["Pad", "Conv", act, "Flatten", "Linear", act, "Linear"]
    );
    assert!(matches!(
        net.nodes[0].op,
        Op::Pad {
            pads: [1, 1, 0, 0],
            mode: PadMode::Zero
        }
    ));
    assert_eq!(net.shape(net.nodes[0].output), [1, 29, 29]);
    let Op::Conv { shape, .. } = &net.nodes[1].op else {
        panic!()
    };
    assert_eq!(
        (
            shape.c_i,
            shape.h,
            shape.c_o,
            shape.k_h,
            shape.stride,
            shape.padding
        ),
        (1, 29, 5, 5, 2, kernels::Padding::Valid)
    );
    assert_eq!(net.shape(net.nodes[1].output), [5, 13, 13]);
    assert!(matches!(
        net.nodes[4].op,
        Op::Linear {
            rows: 100,
            cols: 845,
            ..
        }
    ));
    assert!(matches!(
        net.nodes[6].op,
        Op::Linear {
            rows: 10,
            cols: 100,
            ..
        }
    ));

    // float IR vs tract (an independent ONNX implementation, ZeroPad2d semantics included)
    for x in &random_inputs(22, 2, 784) {
        let f = run_float(&net, x);
        let t = tract_run(&b, &[1, 28, 28], x);
        let scale = t.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
        for (a, b) in f.iter().zip(&t) {
            assert!((a - b).abs() <= 1e-4 * scale, "{f:?} vs {t:?}");
        }
    }
    // fixed point (planned from calibration; and s = 12 on the 32-bit modulus) agrees
    // with float: every logit within 12% of the largest at s = 8 (halved per extra
    // fractional bit), and the same argmax wherever the float top two are further apart
    let calib = random_inputs(7, 8, 784);
    // these seeded weights give small logits: ask for 0.5% of their scale
    let scale = calib
        .iter()
        .flat_map(|x| run_float(&net, x))
        .fold(0f32, |m, v| m.max(v.abs())) as f64;
    let tolerance = 0.005 * scale;
    let auto = choose_fixed_point(
        &net,
        &calib,
        &nn::FixedPointOptions::default().tolerance(tolerance),
    )
    .unwrap();
    let s12 = choose_fixed_point(
        &net,
        &calib,
        &nn::FixedPointOptions::with(&CANDIDATE_MODULI[1..], 12, 12).tolerance(f64::INFINITY),
    )
    .unwrap();
    assert_eq!(s12.frac_bits, 12);
    let acc = auto.accuracy.unwrap();
    assert!(acc.max_abs_err <= tolerance / 2.0, "{acc:?}");
    let (_, _, convs) = linear_steps(&auto);
    let macs = ir_macs(&net);
    assert_eq!(convs, 1);
    assert_eq!(macs, 5 * 13 * 13 * 25 + 845 * 100 + 100 * 10);
    let squares: usize = auto
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Square { input, .. } => Some(auto.tensors[*input].len()),
            _ => None,
        })
        .sum();
    assert_eq!(squares, if square { 845 + 100 } else { 0 });
    assert_eq!(gc_relus(&auto).0, if square { 0 } else { 845 + 100 });
    for prog in [&auto, &s12] {
        let rel = 0.12 * 2f32.powi(8 - prog.frac_bits as i32);
        let mut agree = 0;
        for x in &random_inputs(21, 16, 784) {
            let f = run_float(&net, x);
            let y = dequantise(prog, &run_fixed(prog, &quantise_input(prog, x)).unwrap());
            assert_eq!(y.len(), 10);
            let tol = rel * f.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            for (a, b) in y.iter().zip(&f) {
                assert!(
                    (a - b).abs() <= tol,
                    "s = {}: {y:?} vs {f:?}",
                    prog.frac_bits
                );
            }
            let mut sorted = f.clone();
            sorted.sort_by(|a, b| b.partial_cmp(a).unwrap());
            if sorted[0] - sorted[1] > 2.0 * tol {
                assert_eq!(argmax(&y), argmax(&f), "s = {}", prog.frac_bits);
                agree += 1;
            }
        }
        assert!(
            agree >= 4,
            "{name}, s = {}: only {agree} inputs with a clear argmax",
            prog.frac_bits
        );
    }
}

#[test]
fn mnist_b_is_cryptonets() {
    check_cryptonets_like("mnist-b", true);
}

#[test]
fn mnist_c_is_deepsecure() {
    check_cryptonets_like("mnist-c", false);
}

#[test]
fn resnet18_cifar_shapes() {
    let prog = check_resnet("resnet18-cifar", false, false);
    let (_, _, _, _, relus, _) = resnet_facts(false, false);
    assert_eq!(gc_relus(&prog), (relus, 0));
}

#[test]
fn resnet50_cifar_shapes() {
    let prog = check_resnet("resnet50-cifar", true, false);
    let (_, _, _, _, relus, _) = resnet_facts(true, false);
    assert_eq!(gc_relus(&prog), (relus, 0));
}

#[test]
fn resnet18_imagenet_matches_torchvision() {
    let (convs, ds, macs, params, relus, _) = resnet_facts(false, true);
    // torchvision's published numbers
    assert_eq!((convs, ds), (20, 3));
    assert_eq!(params, 11_689_512);
    assert_eq!(macs, 1_814_073_344);
    let prog = check_resnet("resnet18-imagenet", false, true);
    // the stem's ReLU is fused into the padded max pool: 64×56×56 outputs
    assert_eq!(gc_relus(&prog), (relus - 64 * 112 * 112, 64 * 56 * 56));
    check_stem(&prog);
}

#[test]
fn resnet50_imagenet_matches_torchvision() {
    let (convs, ds, macs, params, relus, _) = resnet_facts(true, true);
    assert_eq!((convs, ds), (53, 4));
    assert_eq!(params, 25_557_032);
    assert_eq!(macs, 4_089_184_256);
    let prog = check_resnet("resnet50-imagenet", true, true);
    assert_eq!(gc_relus(&prog), (relus - 64 * 112 * 112, 64 * 56 * 56));
    check_stem(&prog);
}

/// torchvision's stem: Pad 3 (zeros) → Conv 7×7/2 (as space-to-depth → Conv 4×4/1 over
/// 12 channels) → Pad 1 (edge) → ReLU+MaxPool 3×3/2.
fn check_stem(prog: &Program) {
    let ws = match &prog.steps[2] {
        Step::Conv {
            weight_scale_bits, ..
        } => *weight_scale_bits,
        other => panic!("{other:?}"),
    };
    let kinds: Vec<String> = prog.steps[..5]
        .iter()
        .map(|s| match s {
            Step::Pad { pads, mode, .. } => format!("pad {pads:?} {mode:?}"),
            Step::Conv { shape, .. } => {
                format!(
                    "conv {}x{}/{} c_i {}",
                    shape.k_h, shape.k_w, shape.stride, shape.c_i
                )
            }
            Step::SpaceToDepth {
                stride,
                phases,
                out_h,
                out_w,
                ..
            } => format!("space-to-depth {stride} {phases:?} {out_h}x{out_w}"),
            Step::Nonlinear { op, trunc_bits, .. } => format!("{op:?} >> {trunc_bits}"),
            other => other.name().to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "pad [3, 3, 3, 3] Zero",
            "space-to-depth 2 [2, 2] 115x115",
            "conv 4x4/1 c_i 12",
            "pad [1, 1, 1, 1] Edge",
            &format!("ReluMaxPool {{ k: 3, stride: 2 }} >> {ws}")
        ]
    );
    let t = |i: usize| &prog.tensors[prog.steps[i].output()];
    assert_eq!(t(0).shape, [3, 230, 230]);
    assert_eq!(t(1).shape, [12, 115, 115]);
    assert_eq!(t(2).shape, [64, 112, 112]);
    // the edge pad now reads the conv output (scale s + w) and keeps its scale
    assert_eq!(
        (t(3).shape.as_slice(), t(3).scale_bits),
        (&[64, 114, 114][..], 8 + ws)
    );
    assert_eq!(
        (t(4).shape.as_slice(), t(4).scale_bits),
        (&[64, 56, 56][..], 8)
    );
}

/// A whole CIFAR ResNet-18 through the integer reference on the 40-bit modulus: the logits
/// follow the float network to quantisation precision (relative error ≤ 5% at s = 12,
/// ≤ 1% at s = 16: about 16× per 4 bits, so no systematic error) and keep its argmax.
/// At s = 8 (what the 20-bit modulus allows) the error is of the order of the logits
/// themselves for these seeded weights. ~45 s in a debug build: run with `--ignored`.
#[test]
#[ignore]
fn resnet18_cifar_fixed_point_follows_float() {
    let net = import_bytes(&bytes("resnet18-cifar")).unwrap();
    let x = &random_inputs(5, 1, 3 * 32 * 32)[0];
    let f = run_float(&net, x);
    let scale = f.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
    for (s, rel) in [(12u32, 0.05f32), (16, 0.01)] {
        let prog = lower(&net, s, CANDIDATE_MODULI[2].0).unwrap();
        let y = dequantise(&prog, &run_fixed(&prog, &quantise_input(&prog, x)).unwrap());
        let err = y
            .iter()
            .zip(&f)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(err <= rel * scale, "s = {s}: {y:?} vs {f:?}");
        if s == 16 {
            assert_eq!(argmax(&y), argmax(&f));
        }
    }
}

/// The peer comparison's residual network (`peers/spu/bench_spu_nets.py` has the same
/// shapes): parameters, MACs, ReLU elements and the shortcut, counted by hand.
#[test]
fn residual_block_cifar_has_its_shapes() {
    let name = "residual-block-cifar";
    let b = bytes(name);
    // convs (no bias) + BN scale and shift per channel, FC with bias
    let conv = |ci: usize, co: usize, k: usize| ci * co * k * k + 2 * co;
    let params = conv(3, 16, 3)
        + 2 * conv(16, 16, 3)
        + conv(16, 32, 3)
        + conv(32, 32, 3)
        + conv(16, 32, 1)
        + 32 * 10
        + 10;
    assert_eq!(onnx_parameters(&b), params);
    let net = import_bytes(&b).unwrap();
    assert_eq!(net.input_shape(), [3, 32, 32]);
    assert_eq!(zoo::input_shape(name).unwrap(), net.input_shape());
    // stem and block 1 at 32x32 (16 channels), block 2 at 16x16 (32 channels)
    let macs = 1024 * 16 * (3 * 9 + 2 * 16 * 9) + 256 * 32 * (16 * 9 + 32 * 9 + 16) + 32 * 10;
    assert_eq!(ir_macs(&net), macs as u64);
    assert_eq!(relu_elements(&net), (3 * 16 * 1024 + 2 * 32 * 256) as u64);
    let adds = net.nodes.iter().filter(|n| matches!(n.op, Op::Add)).count();
    assert_eq!(adds, 2);
    let prog = lower(&net, 8, P).unwrap();
    let (n_lin, _, n_conv) = linear_steps(&prog);
    assert_eq!((n_conv, n_lin), (6, 7));
    let shortcuts = prog
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Conv { name, .. } if name.contains("shortcut")))
        .count();
    assert_eq!(shortcuts, 1);
    assert_eq!(prog.tensors[prog.output].shape, [10]);
}
