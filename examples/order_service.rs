//! The split deployment's order service: the storefront's routes behind the verify layer only, in its own
//! process, behind one or more room gateways (`examples/gateway.rs`). See the README, "Several processes".
//!
//! `cargo run --release --example order_service -- --port 3001 --gateway http://127.0.0.1:3000`
//!
//! - At start it reads the room's public keys from the gateway's `/waitroom/jwks.json` (waiting for the gateway if
//!   it is not up yet) and re-reads them every few minutes; every token is then checked offline.
//! - Paying finishes the session with `Admission::finish_with_seats`. Without Redis the finish travels back in the
//!   response header (`Waitroom-Command`), which the gateway's room layer consumes; with `--redis` (built with
//!   `--features redis`) it is also written to the shared store at once, so every gateway learns of it.
//! - The seats live in this process (one order service); the gateways read the counts from `/api/inventory`.

mod flags;

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use flags::{ShopFlags, init_tracing};
use waitroom::demo::{DEFAULT_EVENT, verifier_from_jwks_url};
use waitroom::verify::VerifyLayer;

#[derive(Debug, Parser)]
#[command(about = "The order service behind the room gateway: verify layer only")]
struct Args {
    /// Port to listen on.
    #[arg(long, default_value_t = 3001)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// A gateway's base URL (its `/waitroom/jwks.json` holds the room's public keys).
    #[arg(long, default_value = "http://127.0.0.1:3000")]
    gateway: String,
    /// The on-sale id (the tokens' audience).
    #[arg(long, default_value = DEFAULT_EVENT)]
    event: String,
    #[command(flatten)]
    shop: ShopFlags,
    /// Most seats per order (a token's `max_qty`, when lower, wins).
    #[arg(long, default_value_t = 4)]
    max_per_order: u32,
    /// The room's store (needs `--features redis`): finishes are written there too.
    #[command(flatten)]
    redis: flags::RedisFlags,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    init_tracing();
    let args = Args::parse();
    let jwks_url = format!("{}/waitroom/jwks.json", args.gateway.trim_end_matches('/'));
    let keys = verifier_from_jwks_url(
        &jwks_url,
        &args.event,
        Duration::from_secs(120),
        Duration::from_secs(300),
    )
    .await?;
    let verify = VerifyLayer::new(keys.verifier().clone()).join_url("/waitroom/join");
    let mut shop = args.shop.builder().max_per_order(args.max_per_order);
    let finishes = match waitroom::demo::store_for(&args.redis.options()).await? {
        Some(store) => {
            // A room handle over the shared store, to write finishes and seat counts (no tick: the gateways run
            // the door). Built after the gateway answered, so the on-sale's settings are already in the store.
            let room = waitroom::layer::WaitingRoom::builder(args.event.clone())
                .shared_store(store)
                .background(false)
                .build()
                .await?;
            shop = shop.room(room);
            "written to Redis (and sent back in the response header)"
        }
        None => "sent back to the gateway in the response header",
    };
    let shop = shop.build();
    shop.report_inventory().await;
    shop.spawn_expiry(Duration::from_secs(1));
    let app = shop.router(verify);

    let addr: SocketAddr = format!("{}:{}", args.host, args.port).parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!(
        "Order service up on http://{} (keys from {jwks_url}; finishes {finishes}); browse through the gateway",
        listener.local_addr()?
    );
    // Header-read timeout, connection cap and keep-alive limits (`waitroom::demo::ServerLimits`).
    waitroom::demo::serve(listener, app, waitroom::demo::ServerLimits::default()).await?;
    Ok(())
}
