//! The on-sale demo: a storefront with the waiting room in front, in one process, on the embedded store.
//!
//! `cargo run --release --example onsale`, then open the printed URL. With the default capacity of 1, the first
//! browser window gets the seat map; open a second (private) window to stand in line, and watch it move on by
//! itself when the first one pays or leaves. Every setting is a flag (`--help`).
//!
//! - `/` is the public event page (cacheable, the same for everyone); `/healthz` is a bare route outside the room.
//! - `/seats`, `/holds`, `/pay`, `/leave` are behind the room (`WaitingRoomLayer`) and the order service's own
//!   check (`VerifyLayer`); paying finishes the session with `Admission::finish_with_seats`, which frees its place.
//! - The seats feed the room: every hold, sale and lapsed hold is reported with `room.set_inventory`, so the door
//!   stops when every seat is held and the line is told when every seat is sold.
//! - Cookies are sent without `Secure` (`secure_cookies(false)`) because the demo serves plain HTTP on
//!   127.0.0.1; behind HTTPS, keep the default.
//! - `--redis URL` (with `--features redis`; or `--redis-cluster URL,...`, or `--redis-sentinel URL,...
//!   --redis-sentinel-master NAME`) puts the line in Redis instead of the process; the signing key and
//!   cookie secret the instances over that Redis share are files in `.waitroom/` (`--data-dir`, which the
//!   repository ignores), created on the first start.

mod flags;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use flags::{FairnessFlag, KeyFlags, OpsFlags, RoomFlags, ShopFlags, init_tracing};
use waitroom::demo::{build_room, room_layer_with, serve_behind_room};
use waitroom::verify::VerifyLayer;

/// The allocator a production binary would pick (glibc's malloc shows up at ~10% of the server's CPU under load).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(about = "An on-sale storefront with the waiting room in front")]
struct Args {
    /// Port to listen on (127.0.0.1 unless --host).
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[command(flatten)]
    room: RoomFlags,
    #[command(flatten)]
    shop: ShopFlags,
    /// With `--redis`: the keys every instance over that Redis shares (read, or created on the first start).
    #[command(flatten)]
    keys: KeyFlags,
    /// The operator's kit: admin API, status page, metrics.
    #[command(flatten)]
    ops: OpsFlags,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    init_tracing();
    let args = Args::parse();
    let ops = args.ops.load()?;
    let options = args.room.options();
    let opens_at = options.opens_at();
    // On the embedded store the room draws its own keys; instances sharing a Redis line share them through files.
    let room = if options.redis.is_set() {
        let (key, secret) = args.keys.load()?;
        build_room(&options, Some(key), Some(secret)).await?
    } else {
        build_room(&options, None, None).await?
    };
    let shop = args
        .shop
        .builder()
        .display_name(options.display_name.clone())
        .max_per_order(args.room.max_per_order)
        .opens_at_ms(
            opens_at.map(|t| t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64),
        )
        .room(room.clone())
        .build();
    shop.report_inventory().await;
    shop.spawn_expiry(Duration::from_secs(1));

    // The order routes check the room's tokens themselves, with the room's verifier (same process).
    let app = shop.router(VerifyLayer::new(room.verifier().clone()));
    // The room goes around the whole app, before axum's routing (`app.layer(room)` works too, per route).
    let room_in_front = room_layer_with(room.clone(), &ops)?;

    let addr: SocketAddr = format!("{}:{}", args.host, args.port).parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let shown = if addr.ip().is_unspecified() {
        format!("http://127.0.0.1:{}", addr.port())
    } else {
        format!("http://{addr}")
    };
    println!("The on-sale demo is up: open {shown}/");
    println!(
        "  capacity {} at checkout, {} seats, up to {} per order, {}{}",
        args.room.capacity,
        args.shop.seats,
        args.room.max_per_order,
        match args.room.fairness {
            FairnessFlag::Fifo => "first come, first served",
            FairnessFlag::Random => "random draw at the opening",
        },
        match opens_at {
            Some(t) => format!(
                ", door opens in {} s",
                t.duration_since(SystemTime::now())
                    .unwrap_or_default()
                    .as_secs()
            ),
            None => String::new(),
        }
    );
    println!("  room status: {shown}/waitroom/status  health (outside the room): {shown}/healthz");
    for line in ops.describe(&shown) {
        println!("{line}");
    }
    serve_behind_room(listener, room_in_front, app).await?;
    Ok(())
}
