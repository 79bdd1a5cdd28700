//! Plaintext references: the fixed-point [`Program`] executed exactly as specified (the
//! private executor must reproduce [`run_fixed`] bit for bit) and a simple f32 interpreter
//! of the float IR ([`run_float`]).
//!
//! Fixed point: values are centered representatives mod `p`; every step output (and the
//! input) must lie in `(−p/2, p/2)`, else [`NnError::RangeExceeded`]. Truncation rounds
//! to nearest: `⌊(op(v) + 2^(f−1)) / 2^f⌋` of the centred value, applied after the
//! nonlinear op (the two-party step reconstructs `v + 2^(f−1)`, which must be in range
//! too; a MaxPool compares differences of two inputs, so twice its input must be).
//! An approximate step (`Step::Nonlinear::approximate`) adds `2^f` instead and
//! may come out one less, as a function of the server's share
//! ([`approximate_truncation`]): [`run_fixed`] draws those shares from a seeded model,
//! [`run_fixed_replay`] derives them from the client's shares of a real run. MaxPool output `(c, oy, ox)` takes the window elements
//! `(c, oy·s+dy, ox·s+dx)` in row-major `(dy, dx)` order ([`window_indices`]); padding is
//! a separate [`Step::Pad`] whose element order is [`pad_indices`].

use kernels::reference::conv_output;
use kernels::ConvShape;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::error::NnError;
use crate::ir::{Network, Op, PadMode};
use crate::quant::{NonlinearOp, Program, Step};

/// `round(x · 2^s)` for each input value.
pub fn quantise_input(prog: &Program, x: &[f32]) -> Vec<i64> {
    let f = (1u64 << prog.frac_bits) as f64;
    let normalised;
    let x = match &prog.input_affine {
        Some(a) => {
            normalised = a.apply(x);
            &normalised[..]
        }
        None => x,
    };
    x.iter().map(|&v| (v as f64 * f).round() as i64).collect()
}

/// The output values divided by `2^scale · divisor` of the output tensor.
pub fn dequantise(prog: &Program, y: &[i64]) -> Vec<f32> {
    let (sc, d) = prog
        .output_info()
        .map_or((prog.frac_bits, 1), |t| (t.scale_bits, t.divisor));
    let f = 2f64.powi(sc as i32) * d.max(1) as f64;
    y.iter().map(|&v| (v as f64 / f) as f32).collect()
}

/// Tensor `t`'s values divided by `2^scale · divisor` (any tensor of the program).
pub fn dequantise_tensor(prog: &Program, t: usize, v: &[i128]) -> Vec<f32> {
    let (sc, d) = prog
        .tensors
        .get(t)
        .map_or((prog.frac_bits, 1), |t| (t.scale_bits, t.divisor));
    let f = 2f64.powi(sc as i32) * d.max(1) as f64;
    v.iter().map(|&v| (v as f64 / f) as f32).collect()
}

/// The offset the server adds to its share before a truncation by `f` bits:
/// `2^(f−1)` (rounding to nearest), `2^f` for approximate truncation (its floor or one
/// less is then the value's floor or one more), 0 for `f = 0`.
pub fn trunc_offset(f: u32, approximate: bool) -> i128 {
    match (f, approximate) {
        (0, _) => 0,
        (f, true) => 1i128 << f,
        (f, false) => 1i128 << (f - 1),
    }
}

/// The result of approximate truncation (Cheetah's, the carry dropped) by `2^f` of the
/// centred value `y` (offset included), for a ReLU (`relu`) or an Identity step, when
/// the server's share of `y` mod p is `server_share`: `⌊y/2^f⌋` or one less (0 for a
/// negative `y` with `relu`). The cleartext model of the silent-OT protocol
/// (`ot::approx_trunc`), centred, with the high-bits DReLU every program's truncating
/// steps use (`ot::OtSpec::high_bits_drelu`: [`crate::quant`]'s value bounds keep
/// `|y| ≤ (p − 1)/2 − 2^(f + coarse)`), leaving out `coarse` more bits
/// (`ot::OtSpec::coarse_drelu_bits`: a ReLU may then give 0 for `y < 2^(f + coarse)`).
pub fn approximate_truncation(
    p: u64,
    f: u32,
    relu: bool,
    coarse: u32,
    y: i128,
    server_share: u64,
) -> i128 {
    let pi = p as i128;
    // a centred y needs no 128-bit division
    let y = match y {
        y if (0..pi).contains(&y) => y,
        y if (-pi..0).contains(&y) => y + pi,
        y => y.rem_euclid(pi),
    } as u64;
    let v = ot::approx_trunc(p, f, relu, true, coarse, y, server_share) as i128;
    if v > (p as i128 - 1) / 2 {
        v - p as i128
    } else {
        v
    }
}

/// Where the server's shares of the approximately truncated steps' inputs (offset
/// included) come from: approximate truncation's result depends on them.
#[derive(Clone, Copy, Debug)]
pub enum ServerShares<'a> {
    /// Uniform mod p from ChaCha20 seeded with this value: a model of a real run, as
    /// the planner's calibration sees it.
    Modelled(u64),
    /// From the client's shares `y_C` of a real run, one vector per approximate step in
    /// program order: the server's is `y + h − y_C mod p`, so the run is replayed bit
    /// for bit.
    FromClient(&'a [Vec<u64>]),
}

/// Runs the program on a quantised input; returns the output tensor's values (centered).
/// Approximate steps, if any, see server shares modelled with seed 0.
pub fn run_fixed(prog: &Program, x_q: &[i64]) -> Result<Vec<i64>, NnError> {
    let vals = execute(prog, x_q, true, ServerShares::Modelled(0))?;
    Ok(vals[prog.output].iter().map(|&v| v as i64).collect())
}

/// [`run_fixed`] replaying a real run: the approximate steps' results from the
/// client's shares of their inputs (`ServerShares::FromClient`), so the private output
/// must equal this bit for bit.
pub fn run_fixed_replay(
    prog: &Program,
    x_q: &[i64],
    client_shares: &[Vec<u64>],
) -> Result<Vec<i64>, NnError> {
    let vals = execute(prog, x_q, true, ServerShares::FromClient(client_shares))?;
    Ok(vals[prog.output].iter().map(|&v| v as i64).collect())
}

/// [`run_fixed`], returning every tensor's values (index = tensor id).
pub fn run_fixed_all(prog: &Program, x_q: &[i64]) -> Result<Vec<Vec<i128>>, NnError> {
    execute(prog, x_q, true, ServerShares::Modelled(0))
}

/// The input positions of every pooling window of a `C×H×W` tensor (no padding):
/// output `(c, oy, ox)` in row-major order, each followed by its `k_h·k_w` window
/// elements `(c, oy·stride+dy, ox·stride+dx)` in row-major `(dy, dx)` order. The one
/// definition of the window order: the plaintext reference and the private executor
/// (which gathers shares with it) both use it.
pub fn window_indices(shape: &[usize], k_h: usize, k_w: usize, stride: usize) -> Vec<usize> {
    let (c, h, w) = (shape[0], shape[1], shape[2]);
    let (ho, wo) = ((h - k_h) / stride + 1, (w - k_w) / stride + 1);
    let mut out = Vec::with_capacity(c * ho * wo * k_h * k_w);
    for ch in 0..c {
        for oy in 0..ho {
            for ox in 0..wo {
                for dy in 0..k_h {
                    for dx in 0..k_w {
                        out.push(ch * h * w + (oy * stride + dy) * w + ox * stride + dx);
                    }
                }
            }
        }
    }
    out
}

/// The source of every element of a padded `C×H×W` tensor (`pads = [top, left, bottom,
/// right]`), in row-major order of the padded `C×(top+H+bottom)×(left+W+right)` output:
/// `Some(i)` copies input element `i`, `None` is a zero ([`PadMode::Zero`] border).
/// [`PadMode::Edge`] never gives `None` (the border repeats the nearest element of the same
/// channel). The one definition of padding: the plaintext references and the private
/// executor (which pads each party's share with it: zero shares for a zero border, copied
/// shares otherwise) both use it. Panics on an empty `H` or `W` (checked by
/// [`Network::validate`]).
pub fn pad_indices(shape: &[usize], pads: [usize; 4], mode: PadMode) -> Vec<Option<usize>> {
    let (c, h, w) = (shape[0], shape[1], shape[2]);
    let [top, left, bottom, right] = pads;
    let (hp, wp) = (top + h + bottom, left + w + right);
    let mut out = Vec::with_capacity(c * hp * wp);
    for ch in 0..c {
        for y in 0..hp {
            for x in 0..wp {
                let (iy, ix) = (y as isize - top as isize, x as isize - left as isize);
                let inside = (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix);
                out.push(match mode {
                    _ if inside => Some(ch * h * w + iy as usize * w + ix as usize),
                    PadMode::Zero => None,
                    PadMode::Edge => {
                        let cy = iy.clamp(0, h as isize - 1) as usize;
                        let cx = ix.clamp(0, w as isize - 1) as usize;
                        Some(ch * h * w + cy * w + cx)
                    }
                });
            }
        }
    }
    out
}

/// The source of every element of [`crate::Step::SpaceToDepth`]'s output (row-major
/// `(C·ph·pw)×out_h×out_w`, `[ph, pw] = phases`): output channel `(c·ph + ry)·pw + rx`
/// at `(a, b)` is input `(c, s·a + ry, s·b + rx)`, `None` (zero) beyond the `C×H×W`
/// input.
pub fn space_to_depth_indices(
    shape: &[usize],
    s: usize,
    phases: [usize; 2],
    out_h: usize,
    out_w: usize,
) -> Vec<Option<usize>> {
    let (c, h, w) = (shape[0], shape[1], shape[2]);
    let [ph, pw] = phases;
    let mut out = Vec::with_capacity(c * ph * pw * out_h * out_w);
    for ch in 0..c {
        for ry in 0..ph {
            for rx in 0..pw {
                for a in 0..out_h {
                    for b in 0..out_w {
                        let (y, x) = (s * a + ry, s * b + rx);
                        out.push((y < h && x < w).then(|| (ch * h + y) * w + x));
                    }
                }
            }
        }
    }
    out
}

fn pad_values<T: Copy + Default>(
    x: &[T],
    shape: &[usize],
    pads: [usize; 4],
    mode: PadMode,
) -> Vec<T> {
    pad_indices(shape, pads, mode)
        .into_iter()
        .map(|i| i.map_or_else(T::default, |i| x[i]))
        .collect()
}

fn window_pool(
    x: &[i128],
    shape: &[usize],
    k_h: usize,
    k_w: usize,
    stride: usize,
    f: impl Fn(&mut dyn Iterator<Item = i128>) -> i128,
) -> Vec<i128> {
    window_indices(shape, k_h, k_w, stride)
        .chunks(k_h * k_w)
        .map(|win| f(&mut win.iter().map(|&i| x[i])))
        .collect()
}

/// Executes all steps; returns every tensor's values. `check`: enforce `(−p/2, p/2)`;
/// otherwise only `|v| ≤ 2^62` (so that no integer arithmetic can overflow). `shares`:
/// the server's shares at the approximate steps.
pub(crate) fn execute(
    prog: &Program,
    x_q: &[i64],
    check: bool,
    shares: ServerShares<'_>,
) -> Result<Vec<Vec<i128>>, NnError> {
    let mut model = ChaCha20Rng::seed_from_u64(match shares {
        ServerShares::Modelled(seed) => seed,
        ServerShares::FromClient(_) => 0,
    });
    let mut approximate_steps = 0usize;
    let n_in: usize = prog.input_shape.iter().product();
    if x_q.len() != n_in {
        return Err(NnError::Length {
            what: "quantised input".into(),
            expected: n_in,
            actual: x_q.len(),
        });
    }
    // unchecked runs (calibration) still stop before i64/i128 arithmetic could overflow
    let half = if check {
        (prog.p as i128 - 1) / 2
    } else {
        1i128 << 62
    };
    let in_range = |step: usize, layer: &str, v: &[i128]| -> Result<(), NnError> {
        {
            if let Some(&bad) = v.iter().find(|a| a.abs() > half) {
                return Err(NnError::RangeExceeded {
                    step,
                    layer: layer.into(),
                    value: bad,
                    p: prog.p,
                });
            }
        }
        Ok(())
    };
    let mut vals: Vec<Vec<i128>> = vec![Vec::new(); prog.tensors.len()];
    vals[prog.input] = x_q.iter().map(|&v| v as i128).collect();
    in_range(0, "input", &vals[prog.input])?;
    for (i, st) in prog.steps.iter().enumerate() {
        let shape_err = |what: &str, expected: usize, actual: usize| NnError::Length {
            what: format!("step {i} ({}): {what}", st.name()),
            expected,
            actual,
        };
        let out = match st {
            Step::Linear {
                input,
                rows,
                cols,
                weight,
                bias,
                ..
            } => {
                let x = &vals[*input];
                if x.len() != *cols || weight.len() != rows * cols || bias.len() != *rows {
                    return Err(shape_err("input/weight/bias", *cols, x.len()));
                }
                crate::gemm::linear(weight, x, *rows, *cols)
                    .into_iter()
                    .zip(bias)
                    .map(|(a, &b)| a + b as i128)
                    .collect()
            }
            Step::Conv {
                input,
                shape,
                weight,
                bias,
                groups,
                ..
            } => {
                let x = &vals[*input];
                if *groups != 1 {
                    let g = crate::quant::grouped_shape(shape, *groups);
                    if x.len() != g.input_len() || weight.len() != g.weight_len() {
                        return Err(shape_err("input/weight", g.input_len(), x.len()));
                    }
                    let acc = crate::gemm::conv(shape, *groups, x, weight)
                        .ok_or_else(|| shape_err("input/weight", g.input_len(), x.len()))?;
                    let per = acc.len() / shape.c_o.max(1);
                    if bias.len() != shape.c_o {
                        return Err(shape_err("bias", shape.c_o, bias.len()));
                    }
                    acc.into_iter()
                        .enumerate()
                        .map(|(i, v)| v + bias[i / per.max(1)] as i128)
                        .collect()
                } else {
                    conv_checked(shape, x, weight, bias)
                        .ok_or_else(|| shape_err("input", shape.c_i * shape.h * shape.w, x.len()))?
                }
            }
            Step::Nonlinear {
                input,
                op,
                trunc_bits,
                approximate,
                coarse_drelu_bits,
                ..
            } => {
                let x = &vals[*input];
                let h = trunc_offset(*trunc_bits, *approximate);
                if *approximate && !op.truncates_input() {
                    return Err(NnError::ApproximateTruncation {
                        step: i,
                        layer: st.name().into(),
                        op: op.to_string(),
                    });
                }
                if let NonlinearOp::Clip { lo, hi } = op {
                    // the protocol's two ReLUs see y + h − lo·2^f and y + h − hi·2^f
                    for b in std::iter::once(*lo).chain(*hi) {
                        let shift = (b as i128) << trunc_bits;
                        if let Some(&bad) = x.iter().find(|v| (**v + h - shift).abs() > half) {
                            return Err(NnError::RangeExceeded {
                                step: i,
                                layer: st.name().into(),
                                value: bad + h - shift,
                                p: prog.p,
                            });
                        }
                    }
                    let (lo, hi) = (*lo as i128, hi.map_or(i128::MAX, |v| v as i128));
                    x.iter()
                        .map(|&v| ((v + h) >> trunc_bits).clamp(lo, hi))
                        .collect()
                } else {
                    let y: Vec<i128> = match op {
                        NonlinearOp::Relu => x.iter().map(|&v| v.max(0)).collect(),
                        NonlinearOp::Clip { .. } => x.clone(), // handled above
                        NonlinearOp::Identity => x.clone(),
                        NonlinearOp::MaxPool { k, stride }
                        | NonlinearOp::ReluMaxPool { k, stride } => {
                            let sh = &prog.tensors[*input].shape;
                            if sh.len() != 3 || sh[1] < *k || sh[2] < *k || *stride == 0 {
                                return Err(shape_err("C×H×W input", 3, sh.len()));
                            }
                            let relu = matches!(op, NonlinearOp::ReluMaxPool { .. });
                            window_pool(
                                x,
                                sh,
                                *k,
                                *k,
                                *stride,
                                |it: &mut dyn Iterator<Item = i128>| {
                                    let m = it.max().unwrap_or(0);
                                    if relu {
                                        m.max(0)
                                    } else {
                                        m
                                    }
                                },
                            )
                        }
                    };
                    if let Some(&bad) = x.iter().find(|v| (**v + h).abs() > half) {
                        return Err(NnError::RangeExceeded {
                            step: i,
                            layer: st.name().into(),
                            value: bad + h,
                            p: prog.p,
                        });
                    }
                    // the max tree reconstructs differences of two inputs
                    let pool = op.is_max_pool();
                    if let Some(&bad) = x.iter().find(|v| pool && 2 * v.abs() > half) {
                        return Err(NnError::RangeExceeded {
                            step: i,
                            layer: st.name().into(),
                            value: 2 * bad,
                            p: prog.p,
                        });
                    }
                    if *approximate && *trunc_bits > 0 {
                        let k = approximate_steps;
                        approximate_steps += 1;
                        let p = prog.p;
                        let server: Vec<u64> = match shares {
                            ServerShares::Modelled(_) => {
                                x.iter().map(|_| model.random_range(0..p)).collect()
                            }
                            ServerShares::FromClient(c) => {
                                let c = c.get(k).ok_or_else(|| NnError::Length {
                                    what: "client shares: approximate steps".into(),
                                    expected: k + 1,
                                    actual: c.len(),
                                })?;
                                if c.len() != x.len() {
                                    return Err(shape_err("client shares", x.len(), c.len()));
                                }
                                x.iter()
                                    .zip(c)
                                    .map(|(&v, &yc)| {
                                        (v + h - (yc % p) as i128).rem_euclid(p as i128) as u64
                                    })
                                    .collect()
                            }
                        };
                        let relu = matches!(op, NonlinearOp::Relu);
                        x.iter()
                            .zip(server)
                            .map(|(&v, s)| {
                                approximate_truncation(
                                    p,
                                    *trunc_bits,
                                    relu,
                                    *coarse_drelu_bits,
                                    v + h,
                                    s,
                                )
                            })
                            .collect()
                    } else {
                        y.into_iter().map(|v| (v + h) >> trunc_bits).collect()
                    }
                }
            }
            Step::Square { input, .. } => vals[*input].iter().map(|&v| v * v).collect(),
            Step::Reshape { input, output, .. } => {
                let x = &vals[*input];
                let n = prog.tensors[*output].len();
                if x.len() != n {
                    return Err(shape_err("input", n, x.len()));
                }
                x.clone()
            }
            Step::Pad {
                input, pads, mode, ..
            } => {
                let sh = &prog.tensors[*input].shape;
                let x = &vals[*input];
                if sh.len() != 3 || sh[1] == 0 || sh[2] == 0 {
                    return Err(shape_err("C×H×W input", 3, sh.len()));
                }
                if x.len() != sh.iter().product::<usize>() {
                    return Err(shape_err("input", sh.iter().product(), x.len()));
                }
                pad_values(x, sh, *pads, *mode)
            }
            Step::SpaceToDepth {
                input,
                stride,
                phases,
                out_h,
                out_w,
                ..
            } => {
                let sh = &prog.tensors[*input].shape;
                let x = &vals[*input];
                if sh.len() != 3 || *stride == 0 || phases.iter().any(|&q| q == 0 || q > *stride) {
                    return Err(shape_err("C×H×W input", 3, sh.len()));
                }
                if x.len() != sh.iter().product::<usize>() {
                    return Err(shape_err("input", sh.iter().product(), x.len()));
                }
                space_to_depth_indices(sh, *stride, *phases, *out_h, *out_w)
                    .into_iter()
                    .map(|i| i.map_or(0, |i| x[i]))
                    .collect()
            }
            Step::SumPool {
                input,
                k_h,
                k_w,
                stride,
                ..
            } => {
                let sh = &prog.tensors[*input].shape;
                if sh.len() != 3 || sh[1] < *k_h || sh[2] < *k_w || *stride == 0 {
                    return Err(shape_err("C×H×W input", 3, sh.len()));
                }
                window_pool(
                    &vals[*input],
                    sh,
                    *k_h,
                    *k_w,
                    *stride,
                    |it: &mut dyn Iterator<Item = i128>| it.sum(),
                )
            }
            Step::Add {
                a, b, mul_a, mul_b, ..
            } => {
                let (x, y) = (&vals[*a], &vals[*b]);
                if x.len() != y.len() {
                    return Err(shape_err("second operand", x.len(), y.len()));
                }
                let (ma, mb) = (*mul_a as i128, *mul_b as i128);
                if ma >= 1 << 40 || mb >= 1 << 40 {
                    return Err(shape_err(
                        "multipliers below 2^40",
                        1 << 40,
                        ma.max(mb) as usize,
                    ));
                }
                x.iter().zip(y).map(|(&u, &v)| u * ma + v * mb).collect()
            }
        };
        in_range(i, st.name(), &out)?;
        vals[st.output()] = out;
    }
    Ok(vals)
}

fn conv_checked(sh: &ConvShape, x: &[i128], w: &[i64], b: &[i64]) -> Option<Vec<i128>> {
    if x.len() != sh.c_i * sh.h * sh.w
        || w.len() != sh.c_o * sh.c_i * sh.k_h * sh.k_w
        || b.len() != sh.c_o
    {
        return None;
    }
    let y = crate::gemm::conv(sh, 1, x, w)?;
    let (ho, wo, _, _) = conv_output(sh);
    Some(
        y.into_iter()
            .enumerate()
            .map(|(i, v)| v + b[i / (ho * wo)] as i128)
            .collect(),
    )
}

fn conv_f32(sh: &ConvShape, groups: usize, x: &[f32], w: &[f32], b: Option<&Vec<f32>>) -> Vec<f32> {
    let (ho, wo, _, _) = conv_output(sh);
    let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let wf: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    let per = (ho * wo).max(1);
    crate::gemm::conv_f64(sh, groups, &xf, &wf)
        .into_iter()
        .enumerate()
        .map(|(i, v)| (v + b.map_or(0.0, |b| b[i / per] as f64)) as f32)
        .collect()
}

fn pool_f32(x: &[f32], shape: &[usize], k: usize, k2: usize, s: usize, max: bool) -> Vec<f32> {
    let xi: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let (c, h, w) = (shape[0], shape[1], shape[2]);
    let (ho, wo) = ((h - k) / s + 1, (w - k2) / s + 1);
    let mut out = Vec::with_capacity(c * ho * wo);
    for ch in 0..c {
        for oy in 0..ho {
            for ox in 0..wo {
                let it = (0..k).flat_map(|dy| {
                    let xi = &xi;
                    (0..k2).map(move |dx| xi[ch * h * w + (oy * s + dy) * w + ox * s + dx])
                });
                out.push(if max {
                    it.fold(f64::NEG_INFINITY, f64::max) as f32
                } else {
                    (it.sum::<f64>() / (k * k2) as f64) as f32
                });
            }
        }
    }
    out
}

/// A plain f32 interpreter of the float IR (f64 accumulation). `x` must have
/// `prod(input_shape)` values; the network must be valid ([`Network::validate`]).
pub fn run_float(net: &Network, x: &[f32]) -> Vec<f32> {
    let mut vals = run_float_all(net, x);
    std::mem::take(&mut vals[net.output])
}

/// [`run_float`], returning every tensor of the network (index = tensor id).
pub fn run_float_all(net: &Network, x: &[f32]) -> Vec<Vec<f32>> {
    let mut vals: Vec<Vec<f32>> = vec![Vec::new(); net.tensors.len()];
    vals[0] = match &net.input_affine {
        Some(a) => a.apply(x),
        None => x.to_vec(),
    };
    for n in &net.nodes {
        let a = &vals[n.inputs[0]];
        let sh = net.shape(n.inputs[0]);
        let y = match &n.op {
            Op::Conv {
                shape,
                weight,
                bias,
                groups,
            } => conv_f32(shape, *groups, a, weight, bias.as_ref()),
            Op::Linear {
                rows,
                cols,
                weight,
                bias,
            } => {
                let wf: Vec<f64> = weight.iter().map(|&v| v as f64).collect();
                let xf: Vec<f64> = a.iter().map(|&v| v as f64).collect();
                crate::gemm::linear_f64(&wf, &xf, *rows, *cols)
                    .into_iter()
                    .enumerate()
                    .map(|(r, acc)| (acc + bias.as_ref().map_or(0.0, |b| b[r] as f64)) as f32)
                    .collect()
            }
            Op::Relu => a.iter().map(|&v| v.max(0.0)).collect(),
            Op::Square => a.iter().map(|&v| v * v).collect(),
            Op::MaxPool { k, stride } => pool_f32(a, sh, *k, *k, *stride, true),
            Op::AvgPool { k, stride } => pool_f32(a, sh, *k, *k, *stride, false),
            Op::GlobalAvgPool => pool_f32(a, sh, sh[1], sh[2], 1, false),
            Op::Add => a
                .iter()
                .zip(&vals[n.inputs[1]])
                .map(|(u, v)| u + v)
                .collect(),
            Op::Flatten | Op::Reshape { .. } => a.clone(),
            Op::Clip { min, max } => a
                .iter()
                .map(|&v| v.max(*min).min(max.unwrap_or(f32::INFINITY)))
                .collect(),
            Op::Pad { pads, mode } => pad_values(a, sh, *pads, *mode),
        };
        vals[n.output] = y;
    }
    vals
}
