//! Wire helpers shared by the parameter set (exact sizes) and the BFV backend
//! (validation of received polynomials).

use prost::Message;

/// Mirror of fhe-math's `Rq` protobuf (private there), so that wire polynomials are
/// validated here before any fhe.rs code touches them.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct RqWire {
    #[prost(int32, tag = "1")]
    pub(crate) representation: i32,
    #[prost(uint32, tag = "2")]
    pub(crate) degree: u32,
    #[prost(bytes = "vec", tag = "3")]
    pub(crate) coefficients: Vec<u8>,
    #[prost(bool, tag = "4")]
    pub(crate) allow_variable_time: bool,
}

/// fhe.rs's `Ciphertext` protobuf plus helina's fields: 4, the coefficient runs a
/// *selected* ciphertext keeps (see [`crate::Backend::select_coeffs`]), and 5-8, the
/// rounding of a rounded one (see [`crate::Backend::round`]). Without them the bytes are
/// exactly fhe.rs's; with field 4 alone, `c[0]` holds c0 in power basis at the kept
/// coefficients only; rounded, each `c[i]` is the bit-packed digits of
/// `crate::rounding` (c0 at the kept coefficients when selected).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct CtWire {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub(crate) c: Vec<Vec<u8>>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) seed: Vec<u8>,
    #[prost(uint32, tag = "3")]
    pub(crate) level: u32,
    /// Kept runs as (start, end) pairs, fixed-width so sizes do not depend on values.
    #[prost(fixed32, repeated, tag = "4")]
    pub(crate) keep: Vec<u32>,
    /// Rounded form ([`crate::Rounding`]; all zero: not rounded): c0's dropped limbs.
    #[prost(uint32, tag = "5")]
    pub(crate) c0_limbs: u32,
    /// c0's dropped bits.
    #[prost(uint32, tag = "6")]
    pub(crate) c0_bits: u32,
    /// c1's dropped limbs.
    #[prost(uint32, tag = "7")]
    pub(crate) c1_limbs: u32,
    /// c1's dropped bits.
    #[prost(uint32, tag = "8")]
    pub(crate) c1_bits: u32,
}

/// Representation tag of a power-basis polynomial.
pub(crate) const REPR_POWER_BASIS: i32 = 1;
/// Representation tag of an NTT-form polynomial.
pub(crate) const REPR_NTT: i32 = 2;
/// Representation tag of an NTT + Shoup-form polynomial.
pub(crate) const REPR_NTT_SHOUP: i32 = 3;
