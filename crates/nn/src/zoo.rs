//! Built-in networks with their published shapes, as torch-export-like ONNX models with
//! seeded random weights (public: for demonstrations and benchmarks only).
//!
//! - `mlp`: 784-128-128-10 with ReLU, the MNIST MLP of SecureML, MiniONN, GAZELLE and
//!   GALA (gala.txt footnote 11).
//! - `mnist-a`: GAZELLE's MNIST network A (SecureML's 3-FC network with the square
//!   activation; gazelle-excerpt.txt §8, Table 11): 784-128-128-10, x² between layers.
//! - `mnist-d`: GAZELLE's MNIST network D, MiniONN's MNIST CNN (Liu et al., CCS 2017,
//!   Figure 11): Conv 1→16 5x5 (valid) + ReLU + MaxPool 2x2, Conv 16→16 5x5 + ReLU +
//!   MaxPool 2x2, FC 256→100 + ReLU, FC 100→10.
//! - `minionn-cifar`: MiniONN's CIFAR-10 network (Liu et al., CCS 2017, Figure 13; the
//!   one GAZELLE and ENSEI Table 5 use): 3x32x32 → Conv 3x3x64 ×2 (ReLU) → MeanPool 2x2 →
//!   Conv 3x3x64 ×2 (ReLU) → MeanPool 2x2 → Conv 3x3x64 (ReLU) → Conv 1x1x64 (ReLU) →
//!   Conv 1x1x16 (ReLU) → FC 1024→10; 3x3 convolutions padded to keep the size.

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
        "mnist-d",
        &[1, 28, 28],
        "GAZELLE MNIST D: MiniONN's 2-Conv 2-FC, ReLU + MaxPool",
    ),
    (
        "tiny-resnet",
        &[3, 8, 8],
        "a ResNet basic block (conv-bn-relu, residual Add), GAP, FC: for tests",
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
        "tiny-resnet" => return Some(tiny_resnet(seed, 17)),
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

/// A stem conv and one ResNet basic block (unfused BatchNormalization, identity
/// shortcut), GlobalAveragePool, Flatten, FC to 10 classes; input 3x8x8.
pub fn tiny_resnet(seed: u64, opset: i64) -> Vec<u8> {
    use crate::export::a_int;
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
    m.node(
        "GlobalAveragePool",
        "/avgpool/GlobalAveragePool",
        &["r3"],
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
    m.gemm("fc", "flat", "output", 4, 10);
    m.finish("input", &[3, 8, 8], "output", &[10], opset)
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
