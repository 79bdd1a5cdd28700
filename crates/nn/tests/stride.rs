//! Strided convolutions lower to a local space-to-depth and a stride-1 convolution with
//! the weights rearranged; the fixed-point result equals the strided convolution
//! computed independently (kernels::reference::conv at the original stride on the
//! IR's weights rounded at 2^s), for odd and even sizes, k < s, k = s, k > s, s = 3.
#![allow(clippy::unwrap_used)]

use nn::export::Mb;
use nn::{Op, Step};
use rand::{Rng, SeedableRng};

#[test]
fn strided_convs_equal_the_strided_reference() {
    let s = 8u32;
    let q = |v: f64, bits: u32| (v * (1u64 << bits) as f64).round() as i64;
    // (c_i, h, c_o, k, stride, pad)
    for (c_i, h, c_o, k, st, pad) in [
        (3, 23, 4, 7, 2, 3),
        (4, 9, 3, 1, 2, 0),
        (4, 10, 5, 3, 2, 1),
        (2, 11, 3, 3, 3, 0),
        (2, 8, 2, 2, 2, 0),
        (3, 7, 2, 1, 3, 0),
    ] {
        let oh = (h + 2 * pad - k) / st + 1;
        let mut m = Mb::new(11);
        m.conv("conv", "input", "output", c_i, c_o, k, st, pad, true);
        let bytes = m.finish("input", &[c_i, h, h], "output", &[c_o, oh, oh], 17);
        let net = nn::import_bytes(&bytes).unwrap();
        let prog = nn::lower(&net, s, 1_099_511_480_321).unwrap();
        let case = format!("{c_i}x{h}x{h} → {c_o} {k}x{k} s{st} pad {pad}");
        assert!(
            prog.steps
                .iter()
                .any(|x| matches!(x, Step::SpaceToDepth { .. })),
            "{case}"
        );
        for x in &prog.steps {
            if let Step::Conv { shape, .. } = x {
                assert_eq!(shape.stride, 1, "{case}");
                assert_eq!(
                    (shape.k_h, shape.c_i),
                    (k.div_ceil(st), c_i * st.min(k) * st.min(k)),
                    "{case}"
                );
            }
        }
        // Independent reference on the IR's own (unlowered) conv.
        let conv = net
            .nodes
            .iter()
            .find_map(|n| match &n.op {
                Op::Conv {
                    shape,
                    weight,
                    bias,
                    ..
                } => Some((*shape, weight.clone(), bias.clone())),
                _ => None,
            })
            .unwrap();
        let (shape, weight, bias) = conv;
        assert_eq!(shape.stride, st);
        // the layer's own weight scale
        let ws = nn::weight_scale_bits(weight.iter().map(|&v| v as f64), s);
        assert!(prog.steps.iter().any(|st| matches!(
            st,
            nn::Step::Conv { weight_scale_bits, .. } if *weight_scale_bits == ws
        )));
        let w: Vec<i64> = weight.iter().map(|&v| q(v as f64, ws)).collect();
        let b: Vec<i64> = bias.unwrap().iter().map(|&v| q(v as f64, s + ws)).collect();
        let mut r = rand::rngs::StdRng::seed_from_u64(k as u64 * 31 + h as u64);
        let x: Vec<i64> = (0..c_i * h * h)
            .map(|_| r.random_range(-300..300))
            .collect();
        // The IR may pad explicitly first (torch padding that is not TF-SAME).
        let padded: Vec<i64> = if shape.h == h {
            x.clone()
        } else {
            let p = (shape.h - h) / 2;
            let mut v = vec![0; c_i * shape.h * shape.w];
            for c in 0..c_i {
                for y in 0..h {
                    for xx in 0..h {
                        v[(c * shape.h + y + p) * shape.w + xx + p] = x[(c * h + y) * h + xx];
                    }
                }
            }
            v
        };
        let want: Vec<i64> = kernels::reference::conv(&shape, &padded, &w)
            .iter()
            .enumerate()
            .map(|(i, &v)| v as i64 + b[i / (oh * oh)])
            .collect();
        assert_eq!(want.len(), c_o * oh * oh, "{case}");
        assert_eq!(nn::run_fixed(&prog, &x).unwrap(), want, "{case}");
    }
}
