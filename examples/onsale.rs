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
//! - The sale is durable: the line, the signing key, the cookie secret and the seats live in `.waitroom/`
//!   (`--data-dir`, which the repository ignores), so stopping the demo (or killing it) and running it again
//!   resumes the same sale, with everyone's place, pass and seats. `--fresh` starts a new sale instead.
//! - `--redis URL` (with `--features redis`; or `--redis-cluster URL,...`, or `--redis-sentinel URL,...
//!   --redis-sentinel-master NAME`) puts the line in Redis instead of the process; the signing key and
//!   cookie secret the instances over that Redis share are files in the same directory, created on the first
//!   start.

mod flags;

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;
use flags::{FairnessFlag, KeyFlags, OpsFlags, RoomFlags, ShopFlags, init_tracing};
use waitroom::demo::{Onsale, serve_behind_room, start_new_sale, start_onsale};

/// The allocator a production binary would pick (glibc's malloc shows up at ~10% of the server's CPU under load).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    about = "An on-sale storefront with the waiting room in front",
    after_help = "The sale is durable: the line, the keys and the seats are kept in --data-dir (default \
                  .waitroom/), so a restart, even after a crash, resumes it where it was (up to the last 100 ms). \
                  --fresh starts a new sale."
)]
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
    /// The data directory: the line (on the embedded store), the keys, the seats. With `--redis`, the keys every
    /// instance over that Redis shares (read, or created on the first start).
    #[command(flatten)]
    keys: KeyFlags,
    /// The operator's kit: admin API, status page, metrics.
    #[command(flatten)]
    ops: OpsFlags,
    /// Start a new sale: clear the line, the seats and the keys kept in the data directory (an old cookie or pass
    /// opens nothing in the new sale). Without it, a restart resumes the sale where it was.
    #[arg(long)]
    fresh: bool,
    /// Keep nothing: the line in memory only, fresh keys at every start (what the demo did before it was durable;
    /// the HTTP benchmark's baseline).
    #[arg(long, conflicts_with = "fresh")]
    memory_only: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    init_tracing();
    let args = Args::parse();
    let ops = args.ops.load()?;
    let mut options = args.room.options();
    let opens_at = options.opens_at();
    // Keys from the data directory (or the files named), the line there too on the embedded store.
    let keys = if options.redis.is_set() {
        if args.fresh {
            return Err("--fresh starts a new sale on the embedded store; with --redis, purge the on-sale's \
                        keys in Redis instead"
                .into());
        }
        let (key, secret) = args.keys.load()?;
        (Some(key), Some(secret))
    } else {
        if args.fresh {
            start_new_sale(&args.keys.data_dir)?;
        }
        if !args.memory_only {
            options.data_dir = Some(args.keys.data_dir.clone());
        }
        args.keys.load_named()?
    };
    let shop = args
        .shop
        .builder()
        .display_name(options.display_name.clone())
        .max_per_order(args.room.max_per_order)
        .opens_at_ms(
            opens_at.map(|t| t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64),
        );
    let Onsale {
        layer: room_in_front,
        app,
        resumed,
        ..
    } = start_onsale(&options, shop, keys, &ops).await?;

    let addr: SocketAddr = format!("{}:{}", args.host, args.port).parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let shown = if addr.ip().is_unspecified() {
        format!("http://127.0.0.1:{}", addr.port())
    } else {
        format!("http://{addr}")
    };
    println!(
        "The on-sale demo is up: open {shown}/ ({} in {})",
        if resumed {
            "the sale resumed"
        } else {
            "a new sale"
        },
        args.keys.data_dir.display()
    );
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
