//! Where the demo's examples keep their files: the room's data directory (the line, the signing key, the cookie
//! secret; see [`RoomBuilder::data_dir`](waitroom_layer::RoomBuilder::data_dir)) and the shop's seats.

pub use waitroom_layer::{
    COOKIE_SECRET_FILE, SIGNING_KEY_FILE, load_or_create_cookie_secret, load_or_create_signing_key,
};

/// The directory the demo's examples write their files into (the line, the shared keys, the seats, the
/// rehearsal's chart), relative to the directory they are started from. Hidden, and ignored by the repository's
/// `.gitignore`.
pub const DEFAULT_DATA_DIR: &str = ".waitroom";

/// The shop's seats and orders, in the data directory (see [`ShopBuilder::open`](super::ShopBuilder::open)).
pub const SHOP_FILE: &str = "shop.json";
