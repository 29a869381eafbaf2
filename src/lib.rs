#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use waitroom_layer as layer;
pub use waitroom_verify as verify;

#[cfg(any(feature = "demo", feature = "rehearsal"))]
mod numbers;

#[cfg(feature = "rehearsal")]
pub mod rehearsal;

#[cfg(feature = "demo")]
pub mod demo;
