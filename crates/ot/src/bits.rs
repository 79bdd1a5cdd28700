//! Bit vectors (one bit per element of a batch, 64 to a word) and a packer for
//! fixed-width fields, LSB first. Every message of the nonlinear layers is built
//! from these, so its byte length is `⌈bits/8⌉` of a bit count computed from the layer
//! description alone.

/// A vector of `len` bits, LSB-first in 64-bit words; bits past `len` are zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BitVec {
    words: Vec<u64>,
    len: usize,
}

impl BitVec {
    /// `len` zero bits.
    pub fn zeros(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// `len` one bits.
    pub fn ones(len: usize) -> Self {
        let mut v = Self {
            words: vec![u64::MAX; len.div_ceil(64)],
            len,
        };
        v.clear_tail();
        v
    }

    /// From 64-bit words, LSB first (bits past `len` are cleared; missing words are
    /// zero).
    pub fn from_words(mut words: Vec<u64>, len: usize) -> Self {
        words.resize(len.div_ceil(64), 0);
        let mut v = Self { words, len };
        v.clear_tail();
        v
    }

    /// From booleans.
    pub fn from_bools(bits: &[bool]) -> Self {
        let mut v = Self::zeros(bits.len());
        for (i, &b) in bits.iter().enumerate() {
            if b {
                v.words[i / 64] |= 1 << (i % 64);
            }
        }
        v
    }

    /// From a predicate on the index.
    pub fn from_fn(len: usize, f: impl Fn(usize) -> bool) -> Self {
        let mut v = Self::zeros(len);
        for i in 0..len {
            if f(i) {
                v.words[i / 64] |= 1 << (i % 64);
            }
        }
        v
    }

    /// Number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No bits?
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bit `i` (false past the end).
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < self.len && (self.words[i / 64] >> (i % 64)) & 1 == 1
    }

    /// Sets bit `i` (ignored past the end).
    #[inline]
    pub fn set(&mut self, i: usize, b: bool) {
        if i < self.len {
            let m = 1u64 << (i % 64);
            if b {
                self.words[i / 64] |= m;
            } else {
                self.words[i / 64] &= !m;
            }
        }
    }

    fn clear_tail(&mut self) {
        if !self.len.is_multiple_of(64) {
            if let Some(w) = self.words.last_mut() {
                *w &= (1u64 << (self.len % 64)) - 1;
            }
        }
    }

    /// `self ⊕= o` (lengths must agree; the shorter one is used otherwise).
    pub fn xor_assign(&mut self, o: &BitVec) {
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a ^= b;
        }
    }

    /// `self ⊕ o`.
    pub fn xor(&self, o: &BitVec) -> BitVec {
        let mut r = self.clone();
        r.xor_assign(o);
        r
    }

    /// `self ∧ o`.
    pub fn and(&self, o: &BitVec) -> BitVec {
        let mut r = self.clone();
        for (a, b) in r.words.iter_mut().zip(&o.words) {
            *a &= b;
        }
        r
    }

    /// `¬self`.
    pub fn not(&self) -> BitVec {
        let mut r = self.clone();
        for a in r.words.iter_mut() {
            *a = !*a;
        }
        r.clear_tail();
        r
    }

    /// `[self[idx[0]], self[idx[1]], ...]`.
    pub fn gather(&self, idx: &[u32]) -> BitVec {
        BitVec::from_fn(idx.len(), |i| self.get(idx[i] as usize))
    }

    /// The bits as bytes, LSB first (`⌈len/8⌉` bytes).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len.div_ceil(8));
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.truncate(self.len.div_ceil(8));
        out
    }

    /// Appends the bytes of [`BitVec::to_bytes`] to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
    }

    /// Reads `len` bits from exactly `⌈len/8⌉` bytes (the caller checks the length);
    /// padding bits are ignored.
    pub fn from_bytes(bytes: &[u8], len: usize) -> BitVec {
        let mut v = Self::zeros(len);
        for (i, w) in v.words.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            let lo = (8 * i).min(bytes.len());
            let hi = (8 * i + 8).min(bytes.len());
            b[..hi - lo].copy_from_slice(&bytes[lo..hi]);
            *w = u64::from_le_bytes(b);
        }
        v.clear_tail();
        v
    }

    /// The words (bits past `len` are zero).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Overwrites the bits with zeros (for secrets).
    pub fn zeroize(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.words);
    }

    /// The bits as booleans.
    pub fn to_bools(&self) -> Vec<bool> {
        (0..self.len).map(|i| self.get(i)).collect()
    }
}

/// Writes fixed-width fields LSB first.
#[derive(Debug, Default)]
pub struct BitWriter {
    out: Vec<u8>,
    acc: u128,
    nacc: u32,
}

impl BitWriter {
    /// An empty writer with room for `bits`.
    pub fn with_capacity(bits: usize) -> Self {
        Self {
            out: Vec::with_capacity(bits.div_ceil(8)),
            acc: 0,
            nacc: 0,
        }
    }

    /// Appends the low `width` (≤ 64) bits of `v`.
    #[inline]
    pub fn push(&mut self, v: u64, width: u32) {
        debug_assert!(width <= 64);
        let v = if width == 64 {
            v
        } else {
            v & ((1u64 << width) - 1)
        };
        self.acc |= (v as u128) << self.nacc;
        self.nacc += width;
        while self.nacc >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.nacc -= 8;
        }
    }

    /// Bits written so far.
    pub fn bits(&self) -> usize {
        8 * self.out.len() + self.nacc as usize
    }

    /// Appends the first `bits` bits of `bytes` (LSB first), as [`BitWriter::finish`]
    /// of another writer returns them: whole bytes at once when this writer is at a
    /// byte boundary.
    pub fn append(&mut self, bytes: &[u8], bits: usize) {
        let whole = (bits / 8).min(bytes.len());
        if self.nacc == 0 {
            self.out.extend_from_slice(&bytes[..whole]);
        } else {
            for &b in &bytes[..whole] {
                self.push(b as u64, 8);
            }
        }
        let rest = (bits - 8 * whole) as u32;
        if rest > 0 {
            self.push(bytes.get(whole).copied().unwrap_or(0) as u64, rest);
        }
    }

    /// The bytes (the last one zero-padded).
    pub fn finish(mut self) -> Vec<u8> {
        if self.nacc > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// Reads fixed-width fields LSB first from a byte slice whose length the caller has
/// checked; reading past the end yields zero bits (never panics).
#[derive(Debug)]
pub struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    acc: u128,
    nacc: u32,
}

impl<'a> BitReader<'a> {
    /// A reader over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            acc: 0,
            nacc: 0,
        }
    }

    /// A reader over `bytes` from bit `bit` on.
    pub fn at(bytes: &'a [u8], bit: usize) -> Self {
        let mut r = Self::new(bytes);
        r.pos = bit / 8;
        let skip = (bit % 8) as u32;
        if skip > 0 {
            r.read(skip);
        }
        r
    }

    /// The next `width` (≤ 64) bits.
    #[inline]
    pub fn read(&mut self, width: u32) -> u64 {
        debug_assert!(width <= 64);
        while self.nacc < width {
            let b = self.bytes.get(self.pos).copied().unwrap_or(0);
            self.pos += 1;
            self.acc |= (b as u128) << self.nacc;
            self.nacc += 8;
        }
        let v = if width == 64 {
            self.acc as u64
        } else {
            (self.acc as u64) & ((1u64 << width) - 1)
        };
        self.acc >>= width;
        self.nacc -= width;
        v
    }
}

/// Bytes of `bits` bits.
pub fn bytes_for(bits: usize) -> usize {
    bits.div_ceil(8)
}

/// Elements per parallel piece of a nonlinear layer's per-element loops (a multiple
/// of 64, so that each piece owns whole words of the layer's bit vectors).
pub(crate) const PIECE: usize = 4096;

/// `f` on the consecutive ranges of `0..n`, [`PIECE`] elements each (the last one
/// shorter), on the rayon pool; the results in order. One range runs on the calling
/// thread.
pub(crate) fn pieces<R: Send>(n: usize, f: impl Fn(std::ops::Range<usize>) -> R + Sync) -> Vec<R> {
    use rayon::prelude::*;
    let count = n.div_ceil(PIECE);
    let range = |c: usize| c * PIECE..((c + 1) * PIECE).min(n);
    if count <= 1 {
        return (0..count).map(|c| f(range(c))).collect();
    }
    (0..count).into_par_iter().map(|c| f(range(c))).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn writer_reader_roundtrip() {
        let fields: Vec<(u64, u32)> = (0..200u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), (i % 64 + 1) as u32))
            .collect();
        let mut w = BitWriter::default();
        for &(v, k) in &fields {
            w.push(v, k);
        }
        let bytes = w.finish();
        let total: u32 = fields.iter().map(|f| f.1).sum();
        assert_eq!(bytes.len(), bytes_for(total as usize));
        let mut r = BitReader::new(&bytes);
        for &(v, k) in &fields {
            let m = if k == 64 { u64::MAX } else { (1 << k) - 1 };
            assert_eq!(r.read(k), v & m);
        }
    }

    #[test]
    fn pieces_written_apart_append_to_the_serial_stream() {
        // rows of odd widths, from an unaligned start: the pieces' streams appended in
        // order equal one writer's, and a reader placed at a row reads it
        for (start, width) in [(0u32, 7u32), (3, 13), (5, 64), (1, 1)] {
            let n = 3 * PIECE + 17;
            let row = |i: usize| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut serial = BitWriter::default();
            serial.push(0b101, start);
            for i in 0..n {
                serial.push(row(i), width);
            }
            let mut joined = BitWriter::default();
            joined.push(0b101, start);
            for (bits, bytes) in pieces(n, |r| {
                let mut w = BitWriter::default();
                for i in r {
                    w.push(row(i), width);
                }
                (w.bits(), w.finish())
            }) {
                joined.append(&bytes, bits);
            }
            assert_eq!(joined.bits(), start as usize + n * width as usize);
            let bytes = serial.finish();
            assert_eq!(joined.finish(), bytes);
            let m = if width == 64 {
                u64::MAX
            } else {
                (1 << width) - 1
            };
            for i in [0, 1, PIECE, n - 1] {
                let mut r = BitReader::at(&bytes, start as usize + i * width as usize);
                assert_eq!(r.read(width), row(i) & m);
            }
        }
    }

    #[test]
    fn bitvec_ops() {
        let a = BitVec::from_fn(130, |i| i % 3 == 0);
        let b = BitVec::from_fn(130, |i| i % 5 == 0);
        let x = a.xor(&b);
        let n = a.and(&b);
        for i in 0..130 {
            assert_eq!(x.get(i), (i % 3 == 0) ^ (i % 5 == 0));
            assert_eq!(n.get(i), (i % 3 == 0) && (i % 5 == 0));
            assert_eq!(a.not().get(i), i % 3 != 0);
        }
        assert!(!a.not().get(130));
        assert_eq!(BitVec::from_bytes(&a.to_bytes(), 130), a);
        let g = a.gather(&[3, 4, 129]);
        assert_eq!(g.to_bools(), vec![true, false, true]);
    }
}
