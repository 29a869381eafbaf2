//! The shop's seats and orders kept in a file ([`ShopBuilder::open`]), so a restarted demo resumes the sale it
//! was running: the seats sold stay sold, holds stay held until they lapse, confirmations still open. A stand-in for
//! the database a real shop writes to; like the room's durable store it writes what changed every 100 ms, so a crash
//! loses at most that.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::inventory::{Hold, SeatId};
use super::shop::{Inner, Order, Shop, ShopBuilder};

/// How often the shop's file is written when something changed.
pub const SAVE_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    seats: u32,
    sold: Vec<SeatId>,
    holds: Vec<(String, Hold)>,
    orders: Vec<SavedOrder>,
}

#[derive(Debug, Serialize, Deserialize)]
struct SavedOrder {
    id: String,
    session: String,
    seats: Vec<SeatId>,
    at_ms: u64,
}

fn invalid(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{}: {what} (start a new sale with --fresh, or move the file away)",
            path.display()
        ),
    )
}

impl ShopBuilder {
    /// Builds the shop, resuming the sale saved at `path` if the file exists, and keeps saving it there (every
    /// [`SAVE_INTERVAL`] while something changes, until the last handle to the shop drops). Returns the shop and
    /// whether it resumed a saved sale.
    ///
    /// # Errors
    /// When the file cannot be read or does not hold a sale of this many seats; the error names the file.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn open(self, path: &Path) -> io::Result<(Shop, bool)> {
        let seats = self.seats();
        let shop = self.build();
        let resumed = match std::fs::read(path) {
            Ok(bytes) => {
                let saved: Saved = serde_json::from_slice(&bytes).map_err(|e| invalid(path, e))?;
                if saved.seats != seats {
                    return Err(invalid(
                        path,
                        format_args!("the saved sale has {} seats, not {seats}", saved.seats),
                    ));
                }
                shop.inventory()
                    .restore(&saved.sold, &saved.holds)
                    .ok_or_else(|| invalid(path, "a seat is out of range or sold twice"))?;
                let mut orders = shop.lock_orders();
                for o in saved.orders {
                    let order = Order {
                        id: o.id,
                        session: o.session,
                        seats: o.seats,
                        at_ms: o.at_ms,
                    };
                    orders.insert(order.id.clone(), order);
                }
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        };
        spawn_saver(Arc::downgrade(&shop.inner), path.to_owned());
        Ok((shop, resumed))
    }
}

fn spawn_saver(weak: Weak<Inner>, path: PathBuf) {
    tokio::spawn(async move {
        // Written at the first tick whatever happened, so the next start finds the sale.
        let mut last = (u64::MAX, 0);
        let mut tick = tokio::time::interval(SAVE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = weak.upgrade() else { break };
            let shop = Shop { inner };
            let (sold, holds, changes) = shop.inventory().saved();
            let orders: Vec<SavedOrder> = shop
                .lock_orders()
                .values()
                .map(|o| SavedOrder {
                    id: o.id.clone(),
                    session: o.session.clone(),
                    seats: o.seats.clone(),
                    at_ms: o.at_ms,
                })
                .collect();
            if (changes, orders.len()) == last {
                continue;
            }
            last = (changes, orders.len());
            let saved = Saved {
                seats: shop.inventory().total(),
                sold,
                holds,
                orders,
            };
            let path = path.clone();
            let written =
                tokio::task::spawn_blocking(move || write_atomically(&path, &saved)).await;
            if let Ok(Err(e)) = written {
                tracing::error!(error = %e, "could not save the shop's seats");
                last = (u64::MAX, 0);
            }
        }
    });
}

/// Writes `saved` next to `path` and renames it over: the file is the old sale or the new one, never half.
fn write_atomically(path: &Path, saved: &Saved) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec(saved).map_err(io::Error::other)?)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
