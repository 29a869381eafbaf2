//! waitroom-verify: offline checks of waitroom admission tokens for the order service.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
