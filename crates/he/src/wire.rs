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

/// fhe.rs's `Ciphertext` protobuf plus helina's field 4: the coefficient runs a
/// *selected* ciphertext keeps (see [`crate::Backend::select_coeffs`]). Without field 4
/// the bytes are exactly fhe.rs's; with it, `c[0]` holds c0 in power basis at the kept
/// coefficients only.
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
}

/// Representation tag of a power-basis polynomial.
pub(crate) const REPR_POWER_BASIS: i32 = 1;
/// Representation tag of an NTT-form polynomial.
pub(crate) const REPR_NTT: i32 = 2;
/// Representation tag of an NTT + Shoup-form polynomial.
pub(crate) const REPR_NTT_SHOUP: i32 = 3;
