//! The split deployment's front: the waiting room, forwarding every request it lets through to the order service
//! (`examples/order_service.rs`) over HTTP. See the README, "Several processes".
//!
//! `cargo run --release --example gateway -- --port 3000 --upstream http://127.0.0.1:3001`
//!
//! - The room answers `/waitroom/*` (status, join, and `jwks.json`, the public keys the order service verifies
//!   tokens with), holds `/seats`, `/holds`, `/pay`, `/leave` until the session is let in, and passes everything
//!   else to the order service untouched. `/healthz` is answered here, outside the room.
//! - Sessions finish through the response header the order service's verify layer adds
//!   (`Waitroom-Command: finish; seats=<n>`): the room layer consumes it on the way back. With Redis, the order
//!   service also writes the finish to the store, which every gateway reads.
//! - The seat counts come from the order service's `/api/inventory`, read every `--inventory-poll-ms`.
//! - Several gateways over one Redis (`--redis`, built with `--features redis`) are one line: they share the
//!   token signing key (`--key-file`) and the cookie secret (`--cookie-secret-file`), by default in `.waitroom/`
//!   (`--data-dir`, which the repository ignores); both files are created on the first start (mode 0600) and read
//!   by every later one, so instances on one machine started from one directory need no extra step.

mod flags;

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use flags::{KeyFlags, RoomFlags, init_tracing};
use waitroom::demo::gateway::{Upstream, router, spawn_inventory_poll};
use waitroom::demo::{build_room, room_layer, serve_behind_room};

#[derive(Debug, Parser)]
#[command(about = "The waiting room in front of the order service")]
struct Args {
    /// Port to listen on.
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The order service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:3001")]
    upstream: String,
    #[command(flatten)]
    keys: KeyFlags,
    #[command(flatten)]
    room: RoomFlags,
    /// Milliseconds between reads of the order service's seat counts.
    #[arg(long, default_value_t = 1000)]
    inventory_poll_ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    init_tracing();
    let args = Args::parse();
    let (key, secret) = args.keys.load()?;
    let options = args.room.options();
    let kid = key.kid().to_owned();
    let room = build_room(&options, Some(key), Some(secret)).await?;
    let upstream = Upstream::new(args.upstream.clone())?;
    spawn_inventory_poll(
        &room,
        upstream.clone(),
        Duration::from_millis(args.inventory_poll_ms.max(100)),
    );
    let app = router(upstream);
    // The room goes around the whole app, before axum's routing (every request here is the room's business).
    let room_in_front = room_layer(room.clone())?;

    let addr: SocketAddr = format!("{}:{}", args.host, args.port).parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    println!(
        "Room gateway up: open http://{addr}/ (forwarding to {})",
        args.upstream
    );
    println!(
        "  store: {}; signing key `{kid}` from {}; public keys at http://{addr}/waitroom/jwks.json",
        if args.room.redis.options().is_set() {
            "Redis"
        } else {
            "this process"
        },
        args.keys.key_file().display()
    );
    serve_behind_room(listener, room_in_front, app).await?;
    Ok(())
}
