//! The on-sale demo: a storefront with the room in front, in one process or split in two.
//!
//! Enabled by the `demo` feature (the examples and tests turn it on). The pieces, used by `examples/onsale.rs`,
//! `examples/gateway.rs`, `examples/order_service.rs` and the integration tests alike:
//! - [`SeatInventory`]: the seats, holds that lapse, and the conditional write that refuses a seat someone else
//!   holds. Small and in one place; a real one is a database doing the same conditional update.
//! - [`Shop`]: the storefront and order service as an axum [`Router`](axum::Router): the public event page, the
//!   seat map, holds, payment (finishing the session through [`Admission::finish_with_seats`]), the confirmation.
//! - [`room_layer`]: the room over the order routes ([`PROTECTED_PATHS`]), `/healthz` bypassed;
//!   [`serve_behind_room`]: an app served with the room around the whole router, before axum's routing.
//! - [`RoomOptions`] / [`build_room`]: the room from the examples' flags (embedded store, or Redis).
//! - [`OpsOptions`]: the operator's kit (admin tokens, metrics) from files or the environment, for
//!   [`room_layer_with`].
//! - [`gateway`]: the split deployment's front: the room, forwarding to the order service over HTTP.
//! - [`start_onsale`]: the one-process on-sale `examples/onsale.rs` serves, durable in a data directory (the
//!   line, the keys, the seats: a restart resumes the sale; [`start_new_sale`] clears it).
//! - [`load_or_create_signing_key`], [`load_or_create_cookie_secret`]: the files several gateways share, by
//!   default in [`DEFAULT_DATA_DIR`] (which the repository ignores).
//!
//! [`Admission::finish_with_seats`]: waitroom_verify::Admission::finish_with_seats

mod files;
pub mod gateway;
mod inventory;
mod onsale;
mod ops;
mod pages;
mod setup;
mod shop;
mod shop_file;

pub use files::{
    COOKIE_SECRET_FILE, DEFAULT_DATA_DIR, SHOP_FILE, SIGNING_KEY_FILE,
    load_or_create_cookie_secret, load_or_create_signing_key,
};
pub use inventory::{
    Hold, HoldError, Layout, PurchaseError, Sale, SeatId, SeatInventory, SeatState,
};
pub use onsale::{Onsale, start_new_sale, start_onsale};
pub use ops::{ADMIN_TOKENS_ENV, METRICS_TOKEN_ENV, OpsOptions, parse_admin_tokens};
pub use setup::{
    DEFAULT_EVENT, ISSUER, PROTECTED_PATHS, RedisOptions, RoomOptions, ServerLimits, build_room,
    room_layer, room_layer_with, serve, serve_behind_room, store_for, verifier_from_jwks_url,
};
pub use shop::{Order, Shop, ShopBuilder};
pub use shop_file::SAVE_INTERVAL;
