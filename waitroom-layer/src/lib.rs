//! waitroom-layer: a virtual waiting room as Tower middleware.
//!
//! The room keeps a line of sessions in a [`Store`] and lets people in at the pace the checkout can finish: it counts
//! active sessions and admits the next person whenever one ends, up to a capacity. See the repository README for
//! the whole picture.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod builder;
mod error;
mod estimate;
mod room;
pub mod store;

pub use builder::{Fairness, RoomBuilder, RoomConfig};
pub use error::{ConfigError, StoreError};
pub use estimate::{Eta, EtaBasis};
pub use room::{Stats, Status, ViewState, WaitingRoom};
pub use store::{Inventory, MemoryStore, Placement, SessionState, Settings, Snapshot, Store};
#[cfg(feature = "redis")]
pub use store::{RedisStore, RedisStoreBuilder};
pub use waitroom_verify::{Clock, ManualClock, SharedClock, SystemClock};
