//! The one-process on-sale `examples/onsale.rs` serves: the room (durable in a data directory on the embedded
//! store), the shop in front of its order routes, the shop's seats kept in the same directory.

use std::path::Path;
use std::time::Duration;

use waitroom_layer::store::DATA_FILE;
use waitroom_layer::{WaitingRoom, WaitingRoomLayer};
use waitroom_verify::{SigningKey, VerifyLayer};

use super::files::{COOKIE_SECRET_FILE, SHOP_FILE, SIGNING_KEY_FILE};
use super::setup::{RoomOptions, build_room, room_layer_with};
use super::shop::{Shop, ShopBuilder};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A started on-sale, ready to serve ([`serve_behind_room`](super::serve_behind_room)`(listener, layer, app)`).
#[derive(Debug)]
pub struct Onsale {
    /// The room.
    pub room: WaitingRoom,
    /// The shop (its seats report to the room).
    pub shop: Shop,
    /// The room's layer over the shop's order routes.
    pub layer: WaitingRoomLayer,
    /// The shop's router, its order routes behind the room's verifier.
    pub app: axum::Router,
    /// Whether the seats were taken back from the data directory (a resumed sale).
    pub resumed: bool,
}

/// Starts the on-sale of `options` with the shop of `shop`. With [`RoomOptions::data_dir`] on the embedded store,
/// the line, the signing key, the cookie secret and the seats are kept there and a restart resumes the sale
/// (the seats as they were: a resumed sale is never reset). `keys` overrides the directory's key files.
///
/// # Errors
/// Invalid settings, a data directory that cannot be read (corrupt or unreadable: the error names the file), or a
/// store that cannot be reached.
pub async fn start_onsale(
    options: &RoomOptions,
    shop: ShopBuilder,
    keys: (Option<SigningKey>, Option<Vec<u8>>),
    ops: &super::OpsOptions,
) -> Result<Onsale, BoxError> {
    let room = build_room(options, keys.0, keys.1).await?;
    let shop = shop.room(room.clone());
    let (shop, resumed) = match &options.data_dir {
        Some(dir) if !options.redis.is_set() => shop.open(&dir.join(SHOP_FILE))?,
        _ => (shop.build(), false),
    };
    // The seats as they are (a resumed sale's, as saved): the room's view follows the shop's.
    shop.report_inventory().await;
    shop.spawn_expiry(Duration::from_secs(1));
    let app = shop.router(VerifyLayer::new(room.verifier().clone()));
    let layer = room_layer_with(room.clone(), ops)?;
    Ok(Onsale {
        room,
        shop,
        layer,
        app,
        resumed,
    })
}

/// Clears the sale kept in `dir` (the line, the seats, and the keys, so no cookie or pass of the old sale opens
/// anything in the new one); the next start is a new sale. Other files in the directory stay.
///
/// # Errors
/// When a file exists but cannot be removed.
pub fn start_new_sale(dir: &Path) -> std::io::Result<()> {
    for name in [DATA_FILE, SHOP_FILE, SIGNING_KEY_FILE, COOKIE_SECRET_FILE] {
        match std::fs::remove_file(dir.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", dir.join(name).display()),
                ));
            }
        }
    }
    Ok(())
}
