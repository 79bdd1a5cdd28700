//! The nonlinear layers as sequences of [`crate::program`]s over shares mod p.
//!
//! **DReLU for odd p without share conversion** (the `Z_n`, `n` odd, case of
//! CrypTFlow2 §5; here through the parity of the double): for the centred value
//! `Y ∈ (−p/2, p/2)` with shares `y_S + y_C ≡ Y`, let `z_P = 2y_P mod p`. Then
//! `z = z_S + z_C − p·wz ∈ [0, p)` is `2Y mod p`, which is even iff `Y ≥ 0`, and
//! `lsb(z) = lsb(z_S) ⊕ lsb(z_C) ⊕ wz` because `p` is odd. So
//! `DReLU(Y) = 1 ⊕ lsb(z_S) ⊕ lsb(z_C) ⊕ wz` with the single wrap bit
//! `wz = [z_C > p − 1 − z_S]`: **one** ℓ-bit millionaire (client = receiver), where
//! CrypTFlow2's `Z_n` DReLU (OpenCheetah `SCI/src/NonLinear/drelu-field.h`) runs two
//! comparisons (wrap and sign) through shared leaf OTs plus a 1-of-4 OT to combine
//! them. Both parties fold their `lsb` in locally.
//!
//! **ReLU** = `DReLU·Y` by two multiplexer OTs ([`crate::program`], `F(d) = d·y_P`,
//! one per direction), CrypTFlow2 §4.1.
//!
//! **Truncation by 2^f** shares the same comparison. With `M = 2^{f+1}` and
//! `k = wz + (1 − DReLU) ∈ {0, 1, 2}`, `2Y = z_S + z_C − k·p` exactly, so
//! `⌊Y/2^f⌋ = ⌊z_S/M⌋ + G(k) + ε` with `G(k) = ⌊(z_C − k·p)/M⌋` (the client's) and the
//! carry `ε = [ (z_S mod M) + ((z_C − k·p) mod M) ≥ M ]`. With `λ = lsb(z_S) ⊕ lsb(z_C)`
//! (each party knows its half), `k = wz + (wz ⊕ λ)`, so `[k ≥ 1] = wz ∨ λ` and
//! `[k ≥ 2] = wz ∧ ¬λ`: one AND `h = wz ∧ λ`, then
//! * Identity: `⌊z_S/M⌋` (server, local) `+ G(0)` (client, local)
//!   `+ (wz ⊕ λ ⊕ h)·(G(1) − G(0)) + (wz ⊕ h)·(G(2) − G(1))`: two OTs in which the
//!   client sends and the server chooses by its shares;
//! * ReLU: `DReLU·(⌊z_S/M⌋ + G(0)) + h·(G(1) − G(0))` (for `DReLU = 1`, `λ = wz` and
//!   `k = wz`; for `DReLU = 0`, `h = 0`): the multiplexer of the value `⌊z_S/M⌋ + G(0)`
//!   plus one OT.
//!
//! * **approximate** ([`crate::Truncation::Approximate`], Cheetah's truncation with
//!   the carry dropped, adapted to Z_p): the result is `⌊Y/2^f⌋ − ε`, never above the
//!   exact value and at most one below, and it is below exactly when
//!   `(2y_S mod p) mod 2^{f+1} > 2·(Y mod 2^f)` (`y_S` the server's share of the
//!   value being truncated). With a uniform server share that happens with
//!   probability about `1 − (Y mod 2^f + ½)/2^f`: almost always when `2^f | Y`,
//!   almost never when `Y ≡ −1 (mod 2^f)`. For ReLU it applies only to `Y ≥ 0`;
//!   negative inputs give exactly 0. [`crate::approx_trunc`] is the cleartext model.
//! * **faithful** ([`crate::Truncation::Faithful`], the semantics of `gc::reference`):
//!   `ε_k` for each possible `k` by a second millionaire on `f + 1` bits, server =
//!   receiver with `z_S mod M`, client thresholds `M − 1 − ((z_C − k·p) mod M)` (`k` ∈
//!   {0, 1} for ReLU, where only `k = wz` matters; {0, 1, 2} otherwise), run in
//!   parallel with the first; selected by two AND levels
//!   (`DReLU ∧ (ε₀ ⊕ wz·(ε₀ ⊕ ε₁))` for ReLU, `ε₀ ⊕ wz·(ε₀ ⊕ ε₂) ⊕ λ·(…)` otherwise) and
//!   added by one more OT (bit to Z_p).
//!
//! **High-bits DReLU** ([`crate::OtSpec::high_bits_drelu`], for inputs with
//! `|Y| ≤ (p − 1)/2 − 2^f`, which `nn` programs keep): a step that truncates by `f`
//! compares only `⌊z_C/M⌋` with `⌊(p − 1 − z_S)/M⌋` (`M = 2^{f+1}`, each party shifts its
//! own input), an `(ℓ − f − 1)`-bit millionaire. Its `wz'` is never above `wz`, and
//! misses it exactly when the two fall in one block of `M` while `z_C > p − 1 − z_S`,
//! i.e. `z = z_S + z_C − p ∈ [0, M − 2]`. An odd such `z` is a `Y` within `2^f` of
//! `−p/2`, outside the bound; an even one is `Y ∈ [0, 2^f)`, where the true `λ = 1`,
//! so `k = wz + (wz ⊕ λ) = 1` either way: the truncation is unchanged, and only
//! DReLU flips to 0. Identity and faithful results are therefore exact; a ReLU's
//! `⌊Y/2^f⌋ = 0` stays 0 faithfully, and approximately it is 0 where it might have been
//! −1 ([`crate::approx_trunc`] models which).
//!
//! **Coarse DReLU** ([`crate::OtSpec::coarse_drelu_bits`] `= c`, approximate steps
//! only, for inputs with `|Y| ≤ (p − 1)/2 − 2^{f+c}`): the same comparison with
//! `M = 2^{f+1+c}`, `c` more bits left out (`c` fewer leaf COTs, and an AND group fewer
//! per 3 bits). By the argument above it misses `wz` only for `Y ∈ [0, 2^{f+c})`, where
//! `k` is still right: an Identity step's result is unchanged, and a ReLU's result
//! becomes 0 there, with a probability that depends on the shares (about
//! `1 − Y/2^{f+c}`), instead of `⌊Y/2^f⌋` or one less. [`crate::approx_trunc`] models it,
//! and `nn`'s fixed-point search takes `c` only where the calibration inputs' outputs
//! stay within the tolerance.
//!
//! Cost per element (`ℓ = ⌈log₂ p⌉`, `m = 3`-bit digits, every OT into Z_p one COT and
//! `ℓ + 1` bits): the DReLU millionaire (`ℓ` COTs, `ℓ` + `Σ_j (2^{m_j} − 1)·w_j` bits,
//! `q − 1` AND groups for `q = ⌈ℓ/3⌉` digits, one fewer when
//! `ℓ ≡ 1 (mod 3)`); ReLU adds 2 OTs; truncation adds 1 AND and 2 (Identity)
//! or 3 (ReLU) OTs; faithful adds the `(f + 1)`-bit millionaire, 2–3 AND groups and
//! 1 OT. Measured at ℓ = 40, f = 12 (tests/bench.rs): ReLU 46 B on the wire + 66
//! COTs; ReLU + approximate truncation 52 B + 69 COTs; ReLU + faithful truncation
//! 77 B + 97 COTs; 8, 9 and 10 flights. At ℓ = 28 (ResNet-50's p): ReLU +
//! approximate truncation 36 B + 49 COTs with the full DReLU, 37 COTs with the
//! high-bits one at f = 7 (a 20-bit millionaire), 32 with the coarse one of 3 bits (a
//! 17-bit millionaire).
//!
//! **Max over a window**: a tree of pairwise steps. When every input is known to lie in
//! `(−p/4, p/4)` ([`crate::OtSpec::inputs_within_quarter`]: a program's bound), `a − b`
//! cannot wrap and `a ≥ b` is `DReLU(a − b)` alone; `MaxPool` then ends with the ReLU
//! (and truncation) step on the maximum. Otherwise `a ≥ b` for centred `a, b` is
//! `DReLU(a − b)` when the signs agree and `DReLU(a)` when they differ (`a − b` can
//! wrap otherwise): `ge = δ ⊕ (σ_a ⊕ σ_b) ∧ (δ ⊕ σ_a)` with `δ = DReLU(a − b)`,
//! `σ = DReLU(·)`; the new sign is `σ_a ∨ σ_b = σ_b ⊕ (σ_a ⊕ σ_b) ∧ σ_a` (one
//! correlated AND group for both); the new value `b + ge·(a − b)` by two multiplexer
//! OTs. Signs of the inputs are computed once, in the first level. `MaxPool` is
//! `ReLU(max)`: a final multiplexer by the tracked sign (`f = 0`) or the truncation
//! step with ReLU (`f > 0`). The windows of a pooling whose stride is below its side
//! ([`crate::OtSpec::pooling`]) share rows: the tree then runs over each used input
//! row's `k`-wide pieces once, and over the `k` row maxima of each window after a local
//! re-arrangement (a 3×3/2 MaxPool: about 6 comparisons per window instead of 8).
//!
//! Identity with `f = 0` only re-shares: `y_S + r`, `y_C − r` with `r` from a seed
//! both parties share (no traffic).

use rand::Rng;
use rand_chacha::ChaCha20Rng;

use crate::bits::BitVec;
use crate::circuit::{Builder, Wire};
use crate::mill::{self, LeafWires, MillShape};
use crate::program::{Inputs, MillIn, OtFn, OtShape, Shape};
use crate::protocol::Pooling;
use crate::session::Role;

/// One step of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Re-share with the common mask.
    Reshare { n: usize },
    /// DReLU/ReLU/truncation of `n` values.
    Core {
        n: usize,
        relu: bool,
        f: u32,
        faithful: bool,
        /// The DReLU compares the bits above the low `f + 1` only
        /// ([`crate::OtSpec::high_bits_drelu`]).
        high: bool,
        /// With `high`, `coarse` more low bits left out
        /// ([`crate::OtSpec::coarse_drelu_bits`]).
        coarse: u32,
    },
    /// One level of the max tree: `count` windows of `w ≥ 2` values; with `signs`,
    /// tracking the inputs' signs (needed unless every input is within `(−p/4, p/4)`).
    MaxLevel {
        count: usize,
        w: usize,
        first: bool,
        signs: bool,
    },
    /// `σ·m` for the tracked sign `σ` (MaxPool without truncation).
    Mux { n: usize },
    /// DReLU alone, as arithmetic shares of 0/1 (one more OT from the server).
    Drelu { n: usize },
    /// A separable pooling's re-arrangement of the values (and tracked signs), local:
    /// [`regroup_order`].
    Regroup {
        pooling: Pooling,
        channels: usize,
        stage: Stage,
    },
}

/// Which pieces a separable pooling's [`Step::Regroup`] lines up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// From the gathered `k×k` windows to the `k`-wide pieces of every used input row
    /// (`channels × rows × out_w` of them), each read from the first window that covers
    /// the row.
    Rows,
    /// From those pieces' maxima to the `k` of them below each other in a window
    /// (`channels × out_h × out_w` windows).
    Columns,
}

/// The source index of each value after a [`Step::Regroup`].
pub(crate) fn regroup_order(g: Pooling, channels: usize, stage: Stage) -> Vec<usize> {
    let (k, s, oh, ow, rows) = (g.k, g.stride, g.out_h, g.out_w, g.rows());
    match stage {
        Stage::Rows => {
            let mut order = Vec::with_capacity(channels * rows * ow * k);
            for c in 0..channels {
                for y in 0..rows {
                    let oy = (y / s).min(oh - 1);
                    let dy = y - oy * s;
                    for ox in 0..ow {
                        let window = ((c * oh + oy) * ow + ox) * k * k + dy * k;
                        order.extend(window..window + k);
                    }
                }
            }
            order
        }
        Stage::Columns => {
            let mut order = Vec::with_capacity(channels * oh * ow * k);
            for c in 0..channels {
                for oy in 0..oh {
                    for ox in 0..ow {
                        order.extend((0..k).map(|dy| (c * rows + oy * s + dy) * ow + ox));
                    }
                }
            }
            order
        }
    }
}

/// Bits of `p`.
pub(crate) fn bits(p: u64) -> usize {
    (64 - p.leading_zeros()) as usize
}

/// The low bits of the doubled shares a Core step's DReLU leaves out: `f + 1 + coarse`
/// for the high-bits DReLU (`coarse` for the coarse one) while at least 2 bits remain to
/// compare, else `f + 1` if that leaves 2, else none.
pub(crate) fn dropped_bits(p: u64, f: u32, high: bool, coarse: u32) -> u32 {
    let leaves_two = |d: u32| bits(p) >= d as usize + 2;
    match f.checked_add(coarse.saturating_add(1)) {
        Some(d) if high && leaves_two(d) => d,
        _ if high && leaves_two(f + 1) => f + 1,
        _ => 0,
    }
}

/// Named wires of a step's circuit.
#[derive(Clone, Debug, Default)]
pub(crate) struct StepWires {
    /// `lsb(z)` inputs (server's, client's) per DReLU millionaire, in mill order.
    lsb: Vec<(Wire, Wire)>,
    /// The incoming sign shares (MaxLevel after the first, Mux).
    sigma_in: Option<Wire>,
    /// The outgoing sign shares (MaxLevel).
    pub sigma_out: Option<Wire>,
}

/// A step's program shape.
#[derive(Clone, Debug)]
pub(crate) struct StepShape {
    pub step: Step,
    pub shape: Option<Shape>,
    pub wires: StepWires,
}

/// The DReLU of `n` shares of `l` bits: the millionaire tree comparing them (the
/// client receives), recorded in `mills` and `leaves`, and the DReLU from its root and
/// the `lsb` inputs (recorded in `lsb`). Returns (the root, λ, the DReLU).
fn drelu(
    b: &mut Builder,
    n: usize,
    l: usize,
    lsb: &mut Vec<(Wire, Wire)>,
    mills: &mut Vec<MillShape>,
    leaves: &mut Vec<LeafWires>,
) -> (Wire, Wire, Wire) {
    let m = MillShape {
        n,
        bits: l,
        k: 1,
        recv: Role::Client,
    };
    let (lw, roots) = mill::tree(b, &m);
    let wz = roots[0];
    let ls = b.input(n);
    let lc = b.input(n);
    let lam = b.xor(ls, lc);
    let t = b.xor(lam, wz);
    let d = b.not(t);
    lsb.push((ls, lc));
    mills.push(m);
    leaves.push(lw);
    (wz, lam, d)
}

impl Step {
    /// The program shape (`None` for a re-share).
    pub(crate) fn shape(self, p: u64) -> StepShape {
        let l = bits(p);
        let mut b = Builder::default();
        let mut wires = StepWires::default();
        let mut mills = Vec::new();
        let mut leaves = Vec::new();
        let mut ots = Vec::new();
        let n_out;
        match self {
            Step::Reshare { .. } | Step::Regroup { .. } => {
                return StepShape {
                    step: self,
                    shape: None,
                    wires,
                }
            }
            Step::Core {
                n,
                relu,
                f,
                faithful,
                high,
                coarse,
            } => {
                n_out = n;
                let lc = l - dropped_bits(p, f, high, coarse) as usize;
                let (wz, lam, d) = drelu(&mut b, n, lc, &mut wires.lsb, &mut mills, &mut leaves);
                let push = |ots: &mut Vec<OtShape>, sender: Role, w: Wire| {
                    ots.push(OtShape {
                        n,
                        sender,
                        choice: vec![w],
                        out: None,
                    })
                };
                if f == 0 {
                    push(&mut ots, Role::Server, d);
                    push(&mut ots, Role::Client, d);
                } else {
                    let eps = if faithful {
                        let low = MillShape {
                            n,
                            bits: f as usize + 1,
                            k: if relu { 2 } else { 3 },
                            recv: Role::Server,
                        };
                        let (lw2, eps) = mill::tree(&mut b, &low);
                        mills.push(low);
                        leaves.push(lw2);
                        Some(eps)
                    } else {
                        None
                    };
                    // h = λ ∧ wz (= DReLU ∧ wz); with ε, share the operand wz
                    let (h, e) = match (&eps, relu) {
                        (None, _) => (b.and(wz, lam), None),
                        (Some(eps), true) => {
                            let x = b.xor(eps[0], eps[1]);
                            let o = b.and_many(wz, &[lam, x]);
                            let ep = b.xor(eps[0], o[1]);
                            (o[0], Some(b.and(d, ep)))
                        }
                        (Some(eps), false) => {
                            let x = b.xor(eps[0], eps[2]);
                            let o = b.and_many(wz, &[lam, x]);
                            let e0 = b.xor(eps[0], o[1]);
                            let y = b.xor(eps[1], e0);
                            let a2 = b.and(lam, y);
                            (o[0], Some(b.xor(e0, a2)))
                        }
                    };
                    if relu {
                        push(&mut ots, Role::Server, d);
                        push(&mut ots, Role::Client, d);
                        push(&mut ots, Role::Client, h);
                    } else {
                        let t = b.xor(wz, lam);
                        let ge1 = b.xor(t, h);
                        let ge2 = b.xor(wz, h);
                        push(&mut ots, Role::Client, ge1);
                        push(&mut ots, Role::Client, ge2);
                    }
                    if let Some(e) = e {
                        push(&mut ots, Role::Client, e);
                    }
                }
            }
            Step::MaxLevel {
                count,
                w,
                first,
                signs,
            } => {
                let (pairs, odd) = (w / 2, w % 2);
                let wn = pairs + odd;
                let np = count * pairs;
                let nin = count * w;
                n_out = count * wn;
                let (_, _, delta) = drelu(&mut b, np, l, &mut wires.lsb, &mut mills, &mut leaves);
                let pos: Vec<u32> = (0..np)
                    .map(|j| ((j / pairs) * wn + j % pairs) as u32)
                    .collect();
                let ge = if !signs {
                    // a − b cannot wrap: a ≥ b is DReLU(a − b)
                    delta
                } else {
                    let sigma = if first {
                        let (_, _, s) =
                            drelu(&mut b, nin, l, &mut wires.lsb, &mut mills, &mut leaves);
                        s
                    } else {
                        let s = b.input(nin);
                        wires.sigma_in = Some(s);
                        s
                    };
                    let a_idx: Vec<(u8, u32)> = (0..np)
                        .map(|j| (0, ((j / pairs) * w + 2 * (j % pairs)) as u32))
                        .collect();
                    let b_idx: Vec<(u8, u32)> = a_idx.iter().map(|&(s, i)| (s, i + 1)).collect();
                    let sa = b.gather(&[sigma], a_idx);
                    let sb = b.gather(&[sigma], b_idx);
                    let s = b.xor(sa, sb);
                    let x1 = b.xor(delta, sa);
                    let o = b.and_many(s, &[x1, sa]);
                    let ge = b.xor(delta, o[0]);
                    let snew = b.xor(sb, o[1]);
                    let next: Vec<(u8, u32)> = (0..n_out)
                        .map(|j| {
                            let (c, i) = (j / wn, j % wn);
                            if i < pairs {
                                (0, (c * pairs + i) as u32)
                            } else {
                                (1, (c * w + w - 1) as u32)
                            }
                        })
                        .collect();
                    wires.sigma_out = Some(b.gather(&[snew, sigma], next));
                    ge
                };
                for sender in [Role::Server, Role::Client] {
                    ots.push(OtShape {
                        n: np,
                        sender,
                        choice: vec![ge],
                        out: Some(pos.clone()),
                    });
                }
            }
            Step::Drelu { n } => {
                n_out = n;
                let (_, _, d) = drelu(&mut b, n, l, &mut wires.lsb, &mut mills, &mut leaves);
                ots.push(OtShape {
                    n,
                    sender: Role::Server,
                    choice: vec![d],
                    out: None,
                });
            }
            Step::Mux { n } => {
                n_out = n;
                let s = b.input(n);
                wires.sigma_in = Some(s);
                for sender in [Role::Server, Role::Client] {
                    ots.push(OtShape {
                        n,
                        sender,
                        choice: vec![s],
                        out: None,
                    });
                }
            }
        }
        StepShape {
            step: self,
            shape: Some(Shape {
                mills,
                leaves,
                circuit: b.finish(),
                ots,
                n_out,
            }),
            wires,
        }
    }
}

fn twice(x: u64, p: u64) -> u64 {
    let y = 2 * x;
    if y >= p {
        y - p
    } else {
        y
    }
}

/// This party's inputs of a DReLU millionaire on `z` (doubled shares), comparing the
/// bits above the low `drop`.
fn drelu_inputs(role: Role, z: &[u64], p: u64, drop: u32, lsb: (Wire, Wire), inputs: &mut Inputs) {
    let own = BitVec::from_fn(z.len(), |i| z[i] & 1 == 1);
    let zero = BitVec::zeros(z.len());
    match role {
        Role::Server => {
            inputs.mills.push(MillIn::Send(vec![z
                .iter()
                .map(|&z| (p - 1 - z) >> drop)
                .collect()]));
            inputs.wires.push((lsb.0, own));
            inputs.wires.push((lsb.1, zero));
        }
        Role::Client => {
            inputs
                .mills
                .push(MillIn::Recv(z.iter().map(|&z| z >> drop).collect()));
            inputs.wires.push((lsb.0, zero));
            inputs.wires.push((lsb.1, own));
        }
    }
}

/// This party's inputs to a step on its values `x` (and sign shares `sigma`).
pub(crate) fn inputs(
    s: &StepShape,
    role: Role,
    p: u64,
    x: &[u64],
    sigma: Option<&BitVec>,
) -> Inputs {
    let mut inp = Inputs::default();
    let Some(shape) = &s.shape else {
        return inp;
    };
    let mine = |sender: Role, f: OtFn| if sender == role { Some(f) } else { None };
    match s.step {
        Step::Reshare { .. } | Step::Regroup { .. } => {}
        Step::Core {
            n,
            relu,
            f,
            faithful,
            high,
            coarse,
        } => {
            let z: Vec<u64> = x.iter().map(|&v| twice(v, p)).collect();
            let drop = dropped_bits(p, f, high, coarse);
            drelu_inputs(role, &z, p, drop, s.wires.lsb[0], &mut inp);
            let m = 1u64 << (f + 1);
            if f == 0 {
                inp.ots.push(mine(Role::Server, OtFn::Mul(x.to_vec())));
                inp.ots.push(mine(Role::Client, OtFn::Mul(x.to_vec())));
            } else {
                if faithful {
                    match role {
                        Role::Server => inp
                            .mills
                            .push(MillIn::Recv(z.iter().map(|&z| z % m).collect())),
                        Role::Client => {
                            let ks = if relu { 2 } else { 3 };
                            let t = (0..ks)
                                .map(|k| {
                                    z.iter()
                                        .map(|&z| {
                                            let b = (z as i128 - k as i128 * p as i128)
                                                .rem_euclid(m as i128);
                                            (m as i128 - 1 - b) as u64
                                        })
                                        .collect()
                                })
                                .collect();
                            inp.mills.push(MillIn::Send(t));
                        }
                    }
                }
                // ⌊z/M⌋ of own share; the client's corrections G(k) − G(k−1) for
                // G(k) = ⌊(z_C − k·p)/M⌋
                let hi: Vec<u64> = z.iter().map(|&z| z >> (f + 1)).collect();
                let g = |z: u64, k: i128| (z as i128 - k * p as i128).div_euclid(m as i128);
                let corr = |k: i128| -> Vec<u64> {
                    z.iter()
                        .map(|&z| (g(z, k) - g(z, k - 1)).rem_euclid(p as i128) as u64)
                        .collect()
                };
                if relu {
                    inp.ots.push(mine(Role::Server, OtFn::Mul(hi.clone())));
                    inp.ots.push(mine(Role::Client, OtFn::Mul(hi)));
                    inp.ots.push(mine(Role::Client, OtFn::Mul(corr(1))));
                } else {
                    inp.ots.push(mine(Role::Client, OtFn::Mul(corr(1))));
                    inp.ots.push(mine(Role::Client, OtFn::Mul(corr(2))));
                    inp.local = hi;
                }
                if faithful {
                    inp.ots.push(mine(Role::Client, OtFn::Mul(vec![1; n])));
                }
            }
        }
        Step::MaxLevel {
            count,
            w,
            first,
            signs,
        } => {
            let pairs = w / 2;
            let wn = pairs + w % 2;
            let np = count * pairs;
            let (mut diff, mut z) = (Vec::with_capacity(np), Vec::with_capacity(np));
            let mut local = vec![0u64; count * wn];
            for j in 0..np {
                let (c, i) = (j / pairs, j % pairs);
                let (a, bb) = (x[c * w + 2 * i], x[c * w + 2 * i + 1]);
                let d = (a + p - bb) % p;
                diff.push(d);
                z.push(twice(d, p));
                local[c * wn + i] = bb;
            }
            if w % 2 == 1 {
                for c in 0..count {
                    local[c * wn + pairs] = x[c * w + w - 1];
                }
            }
            drelu_inputs(role, &z, p, 0, s.wires.lsb[0], &mut inp);
            if !signs {
                // compared by DReLU(a − b) alone
            } else if first {
                let zx: Vec<u64> = x.iter().map(|&v| twice(v, p)).collect();
                drelu_inputs(role, &zx, p, 0, s.wires.lsb[1], &mut inp);
            } else if let (Some(w_in), Some(sg)) = (s.wires.sigma_in, sigma) {
                inp.wires.push((w_in, sg.clone()));
            }
            inp.ots.push(mine(Role::Server, OtFn::Mul(diff.clone())));
            inp.ots.push(mine(Role::Client, OtFn::Mul(diff)));
            inp.local = local;
        }
        Step::Drelu { n } => {
            let z: Vec<u64> = x.iter().map(|&v| twice(v, p)).collect();
            drelu_inputs(role, &z, p, 0, s.wires.lsb[0], &mut inp);
            inp.ots.push(mine(Role::Server, OtFn::Mul(vec![1; n])));
        }
        Step::Mux { .. } => {
            if let (Some(w_in), Some(sg)) = (s.wires.sigma_in, sigma) {
                inp.wires.push((w_in, sg.clone()));
            }
            inp.ots.push(mine(Role::Server, OtFn::Mul(x.to_vec())));
            inp.ots.push(mine(Role::Client, OtFn::Mul(x.to_vec())));
        }
    }
    let _ = shape;
    inp
}

/// The re-share of Identity with `f = 0`.
pub(crate) fn reshare(role: Role, p: u64, x: &[u64], rng: &mut ChaCha20Rng) -> Vec<u64> {
    x.iter()
        .map(|&v| {
            let r = rng.random_range(0..p);
            match role {
                Role::Server => (v + r) % p,
                Role::Client => (v + p - r) % p,
            }
        })
        .collect()
}
