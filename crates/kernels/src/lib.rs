//! helina's linear-layer kernels, generic over [`he::Backend`]: matrix-vector products
//! (one module per method in [`matvec`]), convolutions ([`conv`]) and the shared response step
//! [`share_output`] (mask, re-randomise with a flooding encryption of zero, switch to
//! the last level) that every returned ciphertext goes through.

pub mod clear;
pub mod conv;
mod error;
pub mod estimate;
pub mod layer;
pub mod matvec;
pub mod noise;
mod par;
pub mod reference;
pub mod rotate;
mod share;
pub mod square;

pub use conv::grouped::{DepthwiseLayout, EncodedGroups, GroupedConvShape, GroupedLayout};
pub use conv::{ConvLayout, ConvMethod, ConvShape, EncodedFilters, Packing, Padding};
pub use error::{KernelError, Result};
pub use estimate::{estimate, CostModel, Estimate};
pub use layer::LinearLayer;
pub use matvec::{EncodedMatrix, Geometry, MatvecLayout, Method};
pub use noise::check_weight_bound;
pub use share::{share_output, share_output_encoded, FloodPool, Shared};
pub use square::SquareLayout;
