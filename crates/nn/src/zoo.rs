//! Built-in networks with their published shapes, as torch-export-like ONNX models with
//! seeded random weights (public: for demonstrations and benchmarks only). Every shape
//! below names its source; "assumed" marks what the sources leave open.
//!
//! - `mlp`: 784-128-128-10 with ReLU, the MNIST MLP of SecureML, MiniONN, GAZELLE and
//!   GALA (gala.txt footnote 11).
//! - `mnist-a`: GAZELLE's MNIST network A (SecureML's 3-FC network with the square
//!   activation; gazelle-excerpt.txt §8, Table 11): 784-128-128-10, x² between layers.
//! - `mnist-b`: GAZELLE's MNIST network B, "1-Conv and 2-FC with square activation from
//!   \[18\]" (gazelle-excerpt.txt §8, Table 11), \[18\] = CryptoNets (Gilad-Bachrach et al.,
//!   ICML 2016). Shapes from CryptoNets Table 1 (the 5-layer network it evaluates, after
//!   collapsing the trained network's adjacent linear layers): convolution with "windows
//!   of size 5×5, stride size of 2 … 5 different maps … a padding is added to the upper
//!   side and left side of each image" — one zero row on top and one zero column on the
//!   left, 1×29×29 → 5×13×13 = 845 (exported as torch `ZeroPad2d((1, 0, 1, 0))`, an ONNX
//!   `Pad`, then an unpadded `Conv` 1→5 5×5 stride 2); square; "pool layer" = weighted
//!   sum 845 → 100 (Table 1 prints "835 outputs", a misprint of 5·13·13 = 845); square;
//!   output layer 100 → 10. Assumed: every layer has a bias (torch's default; the table
//!   only says "weighted sum").
//! - `mnist-c`: GAZELLE's MNIST network C, "1-Conv and 2-FC with ReLU activation from
//!   \[36\]" (gazelle-excerpt.txt §8, Table 11), \[36\] = DeepSecure (Rouhani, Riazi,
//!   Koushanfar, DAC 2018), the MNIST benchmark GAZELLE compares against (DeepSecure's
//!   9.67 s, Table 11). DeepSecure's text was not available here; its benchmark is quoted
//!   as 5 convolution maps with stride 2, FC 100, FC 10, ReLU activations, i.e.
//!   CryptoNets' network with ReLU instead of x². Assumed from CryptoNets Table 1: the
//!   5×5 kernel and the top/left zero padding (1×29×29 → 5×13×13 = 845). So: Pad → Conv
//!   1→5 5×5 stride 2 → ReLU → FC 845→100 → ReLU → FC 100→10.
//! - `mnist-d`: GAZELLE's MNIST network D, MiniONN's MNIST CNN (Liu et al., CCS 2017,
//!   Figure 11): Conv 1→16 5x5 (valid) + ReLU + MaxPool 2x2, Conv 16→16 5x5 + ReLU +
//!   MaxPool 2x2, FC 256→100 + ReLU, FC 100→10.
//! - `minionn-cifar`: MiniONN's CIFAR-10 network (Liu et al., CCS 2017, Figure 13; the
//!   one GAZELLE and ENSEI Table 5 use): 3x32x32 → Conv 3x3x64 ×2 (ReLU) → MeanPool 2x2 →
//!   Conv 3x3x64 ×2 (ReLU) → MeanPool 2x2 → Conv 3x3x64 (ReLU) → Conv 1x1x64 (ReLU) →
//!   Conv 1x1x16 (ReLU) → FC 1024→10; 3x3 convolutions padded to keep the size.
//! - `tiny-resnet`: one ResNet basic block on 3×8×8, for tests only.
//! - `residual-block-cifar`: the CIFAR-sized residual network compared with the peer
//!   (`peers/spu/bench_spu_nets.py` writes the same shapes in JAX): a 3×3 stem with 16
//!   channels, a basic block 16→16 and a downsampling basic block 16→32 (stride 2, 1×1
//!   shortcut + BN), GlobalAveragePool, FC 32→10; BN unfused as torch exports it.
//! - `resnet18-cifar`, `resnet50-cifar`: GALA's ResNet-18/50 on CIFAR-10 (gala.txt §IV-B
//!   runs He et al.'s \[32\] networks on CIFAR-10 and gives no layer shapes; papers.md §8).
//!   The blocks are He et al.'s (CVPR 2016, §3.3 and Figure 5: the basic
//!   block of two 3×3 convolutions; the bottleneck 1×1, 3×3, 1×1 with expansion 4;
//!   projection shortcuts, option B, where the shape changes) with the stage widths 64,
//!   128, 256, 512 and depths `[2, 2, 2, 2]` / `[3, 4, 6, 3]` of He et al. Table 1. The CIFAR-10
//!   adaptation is assumed to be the common one, kuangliu/pytorch-cifar
//!   `models/resnet.py`: stem Conv 3→64 3×3 stride 1 pad 1 (no bias) + BN + ReLU and no
//!   max pool; stages of stride 1, 2, 2, 2 (the stride on the first block's first 3×3 /
//!   on the bottleneck's 3×3, pad 1); shortcut Conv 1×1 with the block's stride (no
//!   bias) and BN whenever the stride is not 1 or the channels change (3 in ResNet-18, 4 in
//!   ResNet-50); ReLU after the residual Add; `F.avg_pool2d(out, 4)` on the final
//!   4×4 map (an `AveragePool` 4×4); FC 512·expansion → 10. Every conv is followed by
//!   an unfused `BatchNormalization` (folded at import). A 3×3 stride-2 pad-1 conv on an
//!   even size is not TF-SAME: the importer gives it an explicit zero `Pad` + VALID conv.
//! - `resnet18-imagenet`, `resnet50-imagenet`: He et al. Table 1 at 3×224×224 with
//!   torchvision's definition (`torchvision/models/resnet.py`, the "ResNet v1.5" variant
//!   whose bottleneck strides its 3×3 conv2, not conv1): Conv 3→64 7×7 stride 2 pad 3 (no
//!   bias) + BN + ReLU → MaxPool 3×3 stride 2 pad 1 (112 → 56) → the four stages as above at
//!   56, 28, 14, 7 → global average pool (`AdaptiveAvgPool2d((1, 1))`, exported as
//!   `GlobalAveragePool`) → FC 512·expansion → 1000. Check values from torchvision's model
//!   documentation: 11,689,512 / 25,557,032 parameters (BN scale and shift included),
//!   1.81 / 4.09 G multiply-accumulates (listed there as "GFLOPS"); the tests recompute
//!   both exactly from the stage configuration (1,814,073,344 and 4,089,184,256 MACs).
//!   The stem's padding becomes an explicit zero `Pad`, the max pool's an edge `Pad`
//!   (exactly PyTorch's "padding takes no part in the max"), see [`crate::onnx`].
//!
//! Precision note: with these seeded weights a ResNet's logits follow the float network
//! to ~2.5% of their range at s = 12 and ~0.3% at s = 16 (40-bit modulus), while at s = 8
//! the error is of the order of the logits: plan ResNets with `min_frac_bits ≥ 12` and a
//! 32/40-bit preset (test `resnet18_cifar_fixed_point_follows_float`).

use crate::export::Mb;

/// The built-in networks: name, input shape (no batch), one-line description.
pub const NETS: &[(&str, &[usize], &str)] = &[
    (
        "mlp",
        &[784],
        "MNIST MLP 784-128-128-10, ReLU (SecureML/MiniONN/GAZELLE/GALA)",
    ),
    (
        "mnist-a",
        &[784],
        "GAZELLE MNIST A: 784-128-128-10 with x² (SecureML)",
    ),
    (
        "mnist-b",
        &[1, 28, 28],
        "GAZELLE MNIST B: CryptoNets' Conv 5x5/2 (5 maps) + FC 845-100-10, x²",
    ),
    (
        "mnist-c",
        &[1, 28, 28],
        "GAZELLE MNIST C: DeepSecure's Conv 5x5/2 (5 maps) + FC 845-100-10, ReLU",
    ),
    (
        "mnist-d",
        &[1, 28, 28],
        "GAZELLE MNIST D: MiniONN's 2-Conv 2-FC, ReLU + MaxPool",
    ),
    (
        "minionn-cifar",
        &[3, 32, 32],
        "MiniONN CIFAR-10: 7 Conv, 2 mean pools, FC, ReLU (GAZELLE, ENSEI)",
    ),
    (
        "tiny-resnet",
        &[3, 8, 8],
        "a ResNet basic block (conv-bn-relu, residual Add), GAP, FC: for tests",
    ),
    (
        "residual-block-cifar",
        &[3, 32, 32],
        "a CIFAR residual network: 3x3 stem (16), a basic block (16), a downsampling one (32, 1x1 shortcut), GAP, FC",
    ),
    (
        "resnet18-cifar",
        &[3, 32, 32],
        "ResNet-18, CIFAR-10 variant (GALA): 3x3 stem, [2,2,2,2] basic blocks, 10 classes",
    ),
    (
        "resnet50-cifar",
        &[3, 32, 32],
        "ResNet-50, CIFAR-10 variant (GALA): 3x3 stem, [3,4,6,3] bottlenecks, 10 classes",
    ),
    (
        "resnet18-imagenet",
        &[3, 224, 224],
        "ResNet-18, torchvision ImageNet: 7x7/2 stem + max pool, 1000 classes (11.7M params)",
    ),
    (
        "resnet50-imagenet",
        &[3, 224, 224],
        "ResNet-50 v1.5, torchvision ImageNet: 1000 classes (25.6M params, 4.1 G MACs)",
    ),
];

/// The input shape of a built-in network.
pub fn input_shape(name: &str) -> Option<&'static [usize]> {
    NETS.iter().find(|(n, _, _)| *n == name).map(|(_, s, _)| *s)
}

/// A built-in network as ONNX bytes (opset 17), weights drawn from `seed`.
pub fn onnx(name: &str, seed: u64) -> Option<Vec<u8>> {
    let mut m = Mb::new(seed);
    Some(match name {
        "mlp" | "mnist-a" => {
            let act = |m: &mut Mb, i: usize, x: &str, out: &str| {
                if name == "mlp" {
                    m.relu(&format!("act{i}"), x, out);
                } else {
                    m.node("Mul", &format!("/act{i}/Mul"), &[x, x], &[out], vec![]);
                }
            };
            m.gemm("fc1", "input", "h1", 784, 128);
            act(&mut m, 1, "h1", "a1");
            m.gemm("fc2", "a1", "h2", 128, 128);
            act(&mut m, 2, "h2", "a2");
            m.gemm("fc3", "a2", "output", 128, 10);
            m.finish("input", &[784], "output", &[10], 17)
        }
        "mnist-d" => {
            m.conv("conv1", "input", "c1", 1, 16, 5, 1, 0, true);
            m.relu("relu1", "c1", "r1");
            pool(&mut m, "pool1", "r1", "p1");
            m.conv("conv2", "p1", "c2", 16, 16, 5, 1, 0, true);
            m.relu("relu2", "c2", "r2");
            pool(&mut m, "pool2", "r2", "p2");
            m.node(
                "Flatten",
                "/flatten/Flatten",
                &["p2"],
                &["f"],
                vec![crate::export::a_int("axis", 1)],
            );
            m.gemm("fc1", "f", "h1", 256, 100);
            m.relu("relu3", "h1", "r3");
            m.gemm("fc2", "r3", "output", 100, 10);
            m.finish("input", &[1, 28, 28], "output", &[10], 17)
        }
        "mnist-b" | "mnist-c" => {
            use crate::export::a_int;
            let act = |m: &mut Mb, i: usize, x: &str, out: &str| {
                if name == "mnist-b" {
                    m.node("Mul", &format!("/act{i}/Mul"), &[x, x], &[out], vec![]);
                } else {
                    m.relu(&format!("act{i}"), x, out);
                }
            };
            m.zero_pad("pad", "input", "padded", [1, 1, 0, 0]);
            m.conv("conv1", "padded", "c1", 1, 5, 5, 2, 0, true);
            act(&mut m, 1, "c1", "a1");
            m.node(
                "Flatten",
                "/flatten/Flatten",
                &["a1"],
                &["f"],
                vec![a_int("axis", 1)],
            );
            m.gemm("fc1", "f", "h1", 845, 100);
            act(&mut m, 2, "h1", "a2");
            m.gemm("fc2", "a2", "output", 100, 10);
            m.finish("input", &[1, 28, 28], "output", &[10], 17)
        }
        "resnet18-cifar" => return Some(resnet(seed, ResNet::R18, false)),
        "resnet50-cifar" => return Some(resnet(seed, ResNet::R50, false)),
        "resnet18-imagenet" => return Some(resnet(seed, ResNet::R18, true)),
        "resnet50-imagenet" => return Some(resnet(seed, ResNet::R50, true)),
        "tiny-resnet" => return Some(tiny_resnet(seed, 17)),
        "residual-block-cifar" => return Some(residual_block_cifar(seed)),
        "minionn-cifar" => {
            use crate::export::{a_int, a_ints};
            let layers: [(usize, usize, usize); 7] = [
                (3, 64, 3),
                (64, 64, 3),
                (64, 64, 3),
                (64, 64, 3),
                (64, 64, 3),
                (64, 64, 1),
                (64, 16, 1),
            ];
            let mut x = "input".to_string();
            for (i, &(c_i, c_o, k)) in layers.iter().enumerate() {
                let (c, r) = (format!("c{i}"), format!("r{i}"));
                m.conv(&format!("conv{i}"), &x, &c, c_i, c_o, k, 1, k / 2, true);
                m.relu(&format!("relu{i}"), &c, &r);
                x = r;
                if i == 1 || i == 3 {
                    let pooled = format!("pool{i}");
                    m.node(
                        "AveragePool",
                        &format!("/pool{i}/AveragePool"),
                        &[&x],
                        &[&pooled],
                        vec![
                            a_ints("kernel_shape", &[2, 2]),
                            a_ints("pads", &[0, 0, 0, 0]),
                            a_ints("strides", &[2, 2]),
                        ],
                    );
                    x = pooled;
                }
            }
            m.node(
                "Flatten",
                "/flatten/Flatten",
                &[&x],
                &["f"],
                vec![a_int("axis", 1)],
            );
            m.gemm("fc", "f", "output", 1024, 10);
            m.finish("input", &[3, 32, 32], "output", &[10], 17)
        }
        _ => return None,
    })
}

/// The two ResNet depths built here (He et al., CVPR 2016, Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResNet {
    /// Basic blocks, [2, 2, 2, 2].
    R18,
    /// Bottlenecks (expansion 4), [3, 4, 6, 3].
    R50,
}

/// A ResNet as torch exports it (see the module doc): `imagenet` selects torchvision's
/// 3×224×224 definition with 1000 classes, else the CIFAR-10 variant (3×32×32, 10 classes,
/// kuangliu/pytorch-cifar's module names).
fn resnet(seed: u64, depth: ResNet, imagenet: bool) -> Vec<u8> {
    use crate::export::a_int;
    let mut m = Mb::new(seed);
    let (blocks, expansion) = match depth {
        ResNet::R18 => ([2, 2, 2, 2], 1),
        ResNet::R50 => ([3, 4, 6, 3], 4),
    };
    let (side, classes) = if imagenet { (224, 1000) } else { (32, 10) };
    // stem
    if imagenet {
        m.conv("conv1", "input", "conv1", 3, 64, 7, 2, 3, false);
    } else {
        m.conv("conv1", "input", "conv1", 3, 64, 3, 1, 1, false);
    }
    m.bn("bn1", "conv1", "bn1", 64);
    m.relu("relu", "bn1", "relu");
    let mut x = "relu".to_string();
    if imagenet {
        m.max_pool("maxpool", &x, "maxpool", 3, 2, 1);
        x = "maxpool".into();
    }
    let shortcut = if imagenet { "downsample" } else { "shortcut" };
    let mut c = 64;
    for (stage, (&planes, &n)) in [64, 128, 256, 512].iter().zip(&blocks).enumerate() {
        for j in 0..n {
            let stride = if stage > 0 && j == 0 { 2 } else { 1 };
            let b = format!("layer{}.{j}", stage + 1);
            let out_c = planes * expansion;
            // residual branch: (conv, bn, relu)*, conv, bn
            let convs: Vec<(usize, usize, usize, usize)> = match depth {
                // (c_in, c_out, k, stride)
                ResNet::R18 => vec![(c, planes, 3, stride), (planes, planes, 3, 1)],
                ResNet::R50 => vec![
                    (c, planes, 1, 1),
                    (planes, planes, 3, stride),
                    (planes, out_c, 1, 1),
                ],
            };
            x = residual_block(&mut m, &b, &x, &convs, c, stride, shortcut);
            c = out_c;
        }
    }
    if imagenet {
        m.node(
            "GlobalAveragePool",
            "/avgpool/GlobalAveragePool",
            &[&x],
            &["avgpool"],
            vec![],
        );
    } else {
        use crate::export::a_ints;
        m.node(
            "AveragePool",
            "/AveragePool",
            &[&x],
            &["avgpool"],
            vec![
                a_int("ceil_mode", 0),
                a_ints("kernel_shape", &[4, 4]),
                a_ints("pads", &[0, 0, 0, 0]),
                a_ints("strides", &[4, 4]),
            ],
        );
    }
    m.node(
        "Flatten",
        "/Flatten",
        &["avgpool"],
        &["flat"],
        vec![a_int("axis", 1)],
    );
    let fc = if imagenet { "fc" } else { "linear" };
    m.gemm(fc, "flat", "output", c, classes);
    m.finish("input", &[3, side, side], "output", &[classes], 17)
}

/// One ResNet block as torchvision exports it: the branch `convs` (c_in, c_out, kernel,
/// stride), each conv followed by BatchNormalization and all but the last by ReLU; the
/// shortcut is `x` itself, or a 1×1 conv with the block's stride + BN named
/// `{b}.{shortcut}.0/1` where the shape changes; Add, then ReLU. Returns the output's name.
fn residual_block(
    m: &mut Mb,
    b: &str,
    x: &str,
    convs: &[(usize, usize, usize, usize)],
    c: usize,
    stride: usize,
    shortcut: &str,
) -> String {
    let out_c = convs.last().map_or(c, |l| l.1);
    let mut y = x.to_string();
    for (i, &(ci, co, k, s)) in convs.iter().enumerate() {
        let conv = format!("{b}.conv{}", i + 1);
        let bn = format!("{b}.bn{}", i + 1);
        m.conv(&conv, &y, &conv, ci, co, k, s, k / 2, false);
        m.bn(&bn, &conv, &bn, co);
        y = bn;
        if i + 1 < convs.len() {
            let relu = if i == 0 {
                format!("{b}.relu")
            } else {
                format!("{b}.relu_{i}")
            };
            m.relu(&relu, &y, &relu);
            y = relu;
        }
    }
    let identity = if stride != 1 || c != out_c {
        let conv = format!("{b}.{shortcut}.0");
        let bn = format!("{b}.{shortcut}.1");
        m.conv(&conv, x, &conv, c, out_c, 1, stride, 0, false);
        m.bn(&bn, &conv, &bn, out_c);
        bn
    } else {
        x.to_string()
    };
    let sum = format!("{b}.add");
    m.node(
        "Add",
        &format!("/{b}/Add"),
        &[&y, &identity],
        &[&sum],
        vec![],
    );
    let relu = format!("{b}.relu_{}", convs.len() - 1);
    m.relu(&relu, &sum, &relu);
    relu
}

/// The CIFAR-sized residual network of the peer comparison (`peers/spu`): 3×32×32 →
/// stem Conv 3→16 3×3 + BN + ReLU → a basic block 16→16 (identity shortcut) → a basic
/// block 16→32 stride 2 (shortcut Conv 1×1 stride 2 + BN) → GlobalAveragePool over
/// 16×16 → FC 32→10.
fn residual_block_cifar(seed: u64) -> Vec<u8> {
    let mut m = Mb::new(seed);
    m.conv("conv1", "input", "conv1", 3, 16, 3, 1, 1, false);
    m.bn("bn1", "conv1", "bn1", 16);
    m.relu("relu", "bn1", "relu");
    let x = residual_block(
        &mut m,
        "layer1.0",
        "relu",
        &[(16, 16, 3, 1), (16, 16, 3, 1)],
        16,
        1,
        "shortcut",
    );
    let x = residual_block(
        &mut m,
        "layer2.0",
        &x,
        &[(16, 32, 3, 2), (32, 32, 3, 1)],
        16,
        2,
        "shortcut",
    );
    pooled_classifier(&mut m, &x, 32);
    m.finish("input", &[3, 32, 32], "output", &[10], 17)
}

/// A stem conv and one ResNet basic block (unfused BatchNormalization, identity
/// shortcut), GlobalAveragePool, Flatten, FC to 10 classes; input 3x8x8.
pub fn tiny_resnet(seed: u64, opset: i64) -> Vec<u8> {
    let mut m = Mb::new(seed);
    m.conv("conv1", "input", "c1", 3, 4, 3, 1, 1, false);
    m.bn("bn1", "c1", "b1", 4);
    m.relu("relu", "b1", "r1");
    m.conv("layer1.0.conv1", "r1", "c2", 4, 4, 3, 1, 1, false);
    m.bn("layer1.0.bn1", "c2", "b2", 4);
    m.relu("layer1.0.relu", "b2", "r2");
    m.conv("layer1.0.conv2", "r2", "c3", 4, 4, 3, 1, 1, false);
    m.bn("layer1.0.bn2", "c3", "b3", 4);
    m.node(
        "Add",
        "/layer1/layer1.0/Add",
        &["b3", "r1"],
        &["sum"],
        vec![],
    );
    m.relu("layer1.0.relu_1", "sum", "r3");
    pooled_classifier(&mut m, "r3", 4);
    m.finish("input", &[3, 8, 8], "output", &[10], opset)
}

/// GlobalAveragePool of `x` (`c` channels), Flatten, FC to 10 classes named `output`.
fn pooled_classifier(m: &mut Mb, x: &str, c: usize) {
    use crate::export::a_int;
    m.node(
        "GlobalAveragePool",
        "/avgpool/GlobalAveragePool",
        &[x],
        &["gap"],
        vec![],
    );
    m.node(
        "Flatten",
        "/Flatten",
        &["gap"],
        &["flat"],
        vec![a_int("axis", 1)],
    );
    m.gemm("fc", "flat", "output", c, 10);
}

fn pool(m: &mut Mb, name: &str, x: &str, out: &str) {
    use crate::export::a_ints;
    m.node(
        "MaxPool",
        &format!("/{name}/MaxPool"),
        &[x],
        &[out],
        vec![
            a_ints("kernel_shape", &[2, 2]),
            a_ints("pads", &[0, 0, 0, 0]),
            a_ints("strides", &[2, 2]),
        ],
    );
}
