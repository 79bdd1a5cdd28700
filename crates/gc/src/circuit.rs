//! Boolean circuits built programmatically from reusable gadgets.
//!
//! A [`Circuit`] is a list of XOR and AND gates over wires numbered
//! `0..evaluator_inputs` (the evaluator's input bits), then the garbler's input bits,
//! then one wire per gate in order. NOT is free: a [`Bit`] carries a negation flag
//! (garbling flips the wire's zero label by `Δ`), and constants are folded while
//! building, so gates whose result is known are never emitted. Only AND gates cost
//! (two ciphertexts each with half-gates); XOR is free.
//!
//! Numbers are little-endian `Vec<Bit>`. Gadget costs below are for `n`-bit
//! operands with no constant folding (folding only lowers them), `ℓ = ⌈log₂ p⌉`.

/// A bit of a circuit under construction: a constant or a (possibly negated) wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bit {
    /// A known constant.
    Const(bool),
    /// Wire `id`, negated when `neg`.
    Wire {
        /// Wire index.
        id: u32,
        /// Negated?
        neg: bool,
    },
}

impl std::ops::Not for Bit {
    type Output = Bit;
    /// Logical NOT (free).
    fn not(self) -> Bit {
        match self {
            Bit::Const(v) => Bit::Const(!v),
            Bit::Wire { id, neg } => Bit::Wire { id, neg: !neg },
        }
    }
}

/// A gate; its output wire is `inputs + index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// `a ⊕ b` (free).
    Xor {
        /// Left input wire.
        a: u32,
        /// Right input wire.
        b: u32,
    },
    /// `(a ⊕ na) ∧ (b ⊕ nb)`.
    And {
        /// Left input wire.
        a: u32,
        /// Left negated?
        na: bool,
        /// Right input wire.
        b: u32,
        /// Right negated?
        nb: bool,
    },
}

/// A circuit for one element.
#[derive(Clone, Debug)]
pub struct Circuit {
    /// Evaluator input bits (wires `0..evaluator_inputs`).
    pub evaluator_inputs: usize,
    /// Garbler input bits (the following wires).
    pub garbler_inputs: usize,
    /// Gates in topological order.
    pub gates: Vec<Gate>,
    /// Output bits.
    pub outputs: Vec<Bit>,
}

impl Circuit {
    /// Input wires.
    pub fn inputs(&self) -> usize {
        self.evaluator_inputs + self.garbler_inputs
    }
    /// All wires.
    pub fn wires(&self) -> usize {
        self.inputs() + self.gates.len()
    }
    /// AND gates.
    pub fn and_gates(&self) -> u64 {
        self.gates
            .iter()
            .filter(|g| matches!(g, Gate::And { .. }))
            .count() as u64
    }
    /// Evaluates in the clear (for tests). Panics if the input lengths are wrong.
    pub fn eval_plain(&self, evaluator: &[bool], garbler: &[bool]) -> Vec<bool> {
        assert_eq!(evaluator.len(), self.evaluator_inputs);
        assert_eq!(garbler.len(), self.garbler_inputs);
        let mut v: Vec<bool> = evaluator.iter().chain(garbler).copied().collect();
        for g in &self.gates {
            let x = match *g {
                Gate::Xor { a, b } => v[a as usize] ^ v[b as usize],
                Gate::And { a, na, b, nb } => (v[a as usize] ^ na) & (v[b as usize] ^ nb),
            };
            v.push(x);
        }
        self.outputs
            .iter()
            .map(|b| match *b {
                Bit::Const(c) => c,
                Bit::Wire { id, neg } => v[id as usize] ^ neg,
            })
            .collect()
    }
}

/// Builds a [`Circuit`] with constant folding.
#[derive(Debug)]
pub struct Builder {
    evaluator_inputs: usize,
    garbler_inputs: usize,
    gates: Vec<Gate>,
}

/// `n` bits of `v`, little-endian, as constants.
pub fn constant(v: u64, n: usize) -> Vec<Bit> {
    (0..n)
        .map(|i| Bit::Const(i < 64 && (v >> i) & 1 == 1))
        .collect()
}

impl Builder {
    /// A builder with the given input counts; returns it with the evaluator's and
    /// the garbler's input bits.
    pub fn new(evaluator_inputs: usize, garbler_inputs: usize) -> (Self, Vec<Bit>, Vec<Bit>) {
        let w = |i: usize| Bit::Wire {
            id: i as u32,
            neg: false,
        };
        let e = (0..evaluator_inputs).map(w).collect();
        let g = (evaluator_inputs..evaluator_inputs + garbler_inputs)
            .map(w)
            .collect();
        (
            Self {
                evaluator_inputs,
                garbler_inputs,
                gates: Vec::new(),
            },
            e,
            g,
        )
    }

    fn push(&mut self, g: Gate) -> u32 {
        self.gates.push(g);
        (self.evaluator_inputs + self.garbler_inputs + self.gates.len() - 1) as u32
    }

    /// `a ⊕ b` (0 AND).
    pub fn xor(&mut self, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::Const(x), o) | (o, Bit::Const(x)) => {
                if x {
                    !o
                } else {
                    o
                }
            }
            (Bit::Wire { id: i, neg: ni }, Bit::Wire { id: j, neg: nj }) => {
                if i == j {
                    Bit::Const(ni ^ nj)
                } else {
                    let id = self.push(Gate::Xor { a: i, b: j });
                    Bit::Wire { id, neg: ni ^ nj }
                }
            }
        }
    }

    /// `a ∧ b` (≤ 1 AND).
    pub fn and(&mut self, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::Const(x), o) | (o, Bit::Const(x)) => {
                if x {
                    o
                } else {
                    Bit::Const(false)
                }
            }
            (Bit::Wire { id: i, neg: ni }, Bit::Wire { id: j, neg: nj }) => {
                if i == j {
                    if ni == nj {
                        a
                    } else {
                        Bit::Const(false)
                    }
                } else {
                    let id = self.push(Gate::And {
                        a: i,
                        na: ni,
                        b: j,
                        nb: nj,
                    });
                    Bit::Wire { id, neg: false }
                }
            }
        }
    }

    /// `s ? x : y` for one bit (≤ 1 AND).
    pub fn mux_bit(&mut self, s: Bit, x: Bit, y: Bit) -> Bit {
        let d = self.xor(x, y);
        let t = self.and(s, d);
        self.xor(y, t)
    }

    /// `s ? x : y` bitwise: **n ANDs**.
    pub fn mux(&mut self, s: Bit, x: &[Bit], y: &[Bit]) -> Vec<Bit> {
        x.iter()
            .zip(y)
            .map(|(&a, &b)| self.mux_bit(s, a, b))
            .collect()
    }

    /// Ripple-carry `a + b + cin` over `n = a.len()` bits with one AND per bit
    /// (`c' = c ⊕ ((a ⊕ c) ∧ (b ⊕ c))`): **n ANDs** with the carry out,
    /// **n − 1** without (`carry_out = false` returns `Const(false)` as carry).
    pub fn add(&mut self, a: &[Bit], b: &[Bit], cin: Bit, carry_out: bool) -> (Vec<Bit>, Bit) {
        let n = a.len();
        let mut c = cin;
        let mut s = Vec::with_capacity(n);
        for i in 0..n {
            let t1 = self.xor(a[i], c);
            let t2 = self.xor(b[i], c);
            s.push(self.xor(t1, b[i]));
            if i + 1 < n || carry_out {
                let t = self.and(t1, t2);
                c = self.xor(c, t);
            } else {
                c = Bit::Const(false);
            }
        }
        (s, c)
    }

    /// `a − b` mod 2ⁿ and the borrow (`a < b`): **n ANDs** (n − 1 without borrow).
    pub fn sub(&mut self, a: &[Bit], b: &[Bit], borrow_out: bool) -> (Vec<Bit>, Bit) {
        let nb: Vec<Bit> = b.iter().map(|&x| !x).collect();
        let (d, c) = self.add(a, &nb, Bit::Const(true), borrow_out);
        (d, if borrow_out { !c } else { c })
    }

    /// `a ≥ b` (unsigned): the carry chain of `a + ¬b + 1` only, **n ANDs**.
    pub fn ge(&mut self, a: &[Bit], b: &[Bit]) -> Bit {
        let mut c = Bit::Const(true);
        for (&x, &y) in a.iter().zip(b) {
            let t1 = self.xor(x, c);
            let t2 = self.xor(!y, c);
            let t = self.and(t1, t2);
            c = self.xor(c, t);
        }
        c
    }

    /// `(a + b) mod p` for `a, b < p` (ℓ bits): add with carry out (ℓ), subtract `p`
    /// from the ℓ+1-bit sum keeping only the borrow (≤ ℓ + 1), mux (ℓ):
    /// **≤ 3ℓ + 1 ANDs**.
    pub fn add_mod(&mut self, a: &[Bit], b: &[Bit], p: u64) -> Vec<Bit> {
        let l = a.len();
        let (mut s, c) = self.add(a, b, Bit::Const(false), true);
        s.push(c);
        let pb = constant(p, l + 1);
        let (d, borrow) = self.sub(&s, &pb, true);
        // borrow ⇒ s < p ⇒ keep s, else s − p.
        self.mux(borrow, &s[..l], &d[..l])
    }

    /// `(a − b) mod p` for `a, b < p`: subtract with borrow (ℓ), add `p` masked by
    /// the borrow mod 2^ℓ (ℓ − 1; the mask is free): **≤ 2ℓ − 1 ANDs**.
    pub fn sub_mod(&mut self, a: &[Bit], b: &[Bit], p: u64) -> Vec<Bit> {
        let l = a.len();
        let (d, borrow) = self.sub(a, b, true);
        let pm: Vec<Bit> = constant(p, l)
            .into_iter()
            .map(|x| self.and(x, borrow))
            .collect();
        self.add(&d, &pm, Bit::Const(false), false).0
    }

    /// Sign of the centred value of `y < p`: `y > (p − 1)/2`, a comparison with a
    /// constant: **≤ ℓ ANDs** (fewer by the trailing zeros of (p+1)/2).
    pub fn sign(&mut self, y: &[Bit], p: u64) -> Bit {
        let h = constant(p / 2 + 1, y.len());
        self.ge(y, &h)
    }

    /// ReLU of a centred value given its sign: `y ∧ ¬s`; the top bit of a
    /// non-negative centred value is 0, so **ℓ − 1 ANDs**.
    pub fn relu(&mut self, y: &[Bit], s: Bit) -> Vec<Bit> {
        let l = y.len();
        let mut out: Vec<Bit> = y[..l.saturating_sub(1)]
            .iter()
            .map(|&b| self.and(b, !s))
            .collect();
        if l > 0 {
            out.push(Bit::Const(false));
        }
        out
    }

    /// Signed max of two centred values given their signs; returns the max and its
    /// sign. `x > y` is `sy` when the signs differ, else the unsigned comparison:
    /// comparison (ℓ) + select (1) + mux of value and sign (ℓ + 1): **≤ 2ℓ + 2 ANDs**.
    pub fn max_signed(&mut self, x: &[Bit], sx: Bit, y: &[Bit], sy: Bit) -> (Vec<Bit>, Bit) {
        let x_ge_y = self.ge(x, y);
        let differ = self.xor(sx, sy);
        // differ ? sy : x_ge_y
        let sel = self.mux_bit(differ, sy, x_ge_y);
        let m = self.mux(sel, x, y);
        let sm = self.mux_bit(sel, sx, sy);
        (m, sm)
    }

    /// Floor division of the centred value of `y < p` (sign `s`) by 2^f, as a
    /// residue mod p (f ≥ 1): to (ℓ+1)-bit two's complement by adding
    /// `s·(2^{ℓ+1} − p)` (≤ ℓ), arithmetic shift (free), back to mod p by adding
    /// `s·p` mod 2^ℓ (≤ ℓ − 1): **≤ 2ℓ − 1 ANDs**.
    pub fn trunc_signed(&mut self, y: &[Bit], s: Bit, p: u64, f: usize) -> Vec<Bit> {
        let l = y.len();
        let mut y1 = y.to_vec();
        y1.push(Bit::Const(false));
        let k = (1u64 << (l + 1)) - p;
        let km: Vec<Bit> = constant(k, l + 1)
            .into_iter()
            .map(|x| self.and(x, s))
            .collect();
        let (w, _) = self.add(&y1, &km, Bit::Const(false), false);
        // arithmetic shift; the sign of w is s.
        let mut sh: Vec<Bit> = w[f..].to_vec();
        sh.truncate(l);
        while sh.len() < l {
            sh.push(s);
        }
        let pm: Vec<Bit> = constant(p, l).into_iter().map(|x| self.and(x, s)).collect();
        self.add(&sh, &pm, Bit::Const(false), false).0
    }

    /// The finished circuit.
    pub fn finish(self, outputs: Vec<Bit>) -> Circuit {
        Circuit {
            evaluator_inputs: self.evaluator_inputs,
            garbler_inputs: self.garbler_inputs,
            gates: self.gates,
            outputs,
        }
    }
}

/// `n` bits of `v`, little-endian.
pub fn to_bits(v: u64, n: usize) -> Vec<bool> {
    (0..n).map(|i| i < 64 && (v >> i) & 1 == 1).collect()
}

/// Little-endian bits to a value (bits beyond 64 ignored).
pub fn from_bits(bits: &[bool]) -> u64 {
    bits.iter()
        .take(64)
        .enumerate()
        .fold(0, |acc, (i, &b)| acc | ((b as u64) << i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run2(
        n: usize,
        f: impl Fn(&mut Builder, &[Bit], &[Bit]) -> Vec<Bit>,
    ) -> impl Fn(u64, u64) -> u64 {
        let (mut b, e, g) = Builder::new(n, n);
        let out = f(&mut b, &e, &g);
        let c = b.finish(out);
        move |x, y| from_bits(&c.eval_plain(&to_bits(x, n), &to_bits(y, n)))
    }

    #[test]
    fn gadgets_exhaustive_small_p() {
        let p = 13u64;
        let l = 4;
        let add = run2(l, |b, x, y| b.add_mod(x, y, p));
        let sub = run2(l, |b, x, y| b.sub_mod(x, y, p));
        let ge = run2(l, |b, x, y| vec![b.ge(x, y)]);
        let sign = run2(l, |b, x, _| vec![b.sign(x, p)]);
        for x in 0..p {
            assert_eq!(sign(x, 0), (x > (p - 1) / 2) as u64);
            for y in 0..p {
                assert_eq!(add(x, y), (x + y) % p, "{x}+{y}");
                assert_eq!(sub(x, y), (x + p - y) % p, "{x}-{y}");
                assert_eq!(ge(x, y), (x >= y) as u64);
            }
        }
    }

    #[test]
    fn gadget_costs() {
        let (mut b, e, g) = Builder::new(20, 20);
        b.add(&e, &g, Bit::Const(false), true);
        assert_eq!(
            b.gates
                .iter()
                .filter(|g| matches!(g, Gate::And { .. }))
                .count(),
            20
        );
        let (mut b, e, g) = Builder::new(20, 21);
        b.mux(g[20], &e, &g[..20]);
        assert_eq!(b.finish(vec![]).and_gates(), 20);
    }
}
