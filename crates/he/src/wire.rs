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

/// Representation tag of an NTT-form polynomial.
pub(crate) const REPR_NTT: i32 = 2;
/// Representation tag of an NTT + Shoup-form polynomial.
pub(crate) const REPR_NTT_SHOUP: i32 = 3;
