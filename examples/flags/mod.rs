//! The flags the demo's examples share (`mod flags;` in each): the room's settings, the shop's, and logging.
#![allow(dead_code)] // each example uses the part it needs

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use waitroom::demo::{
    COOKIE_SECRET_FILE, DEFAULT_DATA_DIR, OpsOptions, RedisOptions, RoomOptions, SIGNING_KEY_FILE,
    Shop, ShopBuilder, load_or_create_cookie_secret, load_or_create_signing_key,
};
use waitroom::verify::SigningKey;

/// The order people leave the line in.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FairnessFlag {
    /// First come, first served.
    Fifo,
    /// A random draw at the opening among everyone who joined before it.
    Random,
}

/// The room's settings (with several instances over one Redis, the first to start sets them).
#[derive(Debug, clap::Args)]
pub struct RoomFlags {
    /// Most sessions at checkout at once (the seed's on-sale uses 8000; 1 lets two windows show the line).
    #[arg(long, default_value_t = 1)]
    pub capacity: u64,
    /// Most seats per order (written into every token).
    #[arg(long, default_value_t = 4)]
    pub max_per_order: u32,
    /// The order people leave the line in.
    #[arg(long, value_enum, default_value_t = FairnessFlag::Fifo)]
    pub fairness: FairnessFlag,
    /// Keep the door shut this many seconds: a pre-queue, and with `--fairness random` the draw runs then.
    /// Default: open at once with fifo, 30 s with random.
    #[arg(long)]
    pub opens_in: Option<u64>,
    /// Seconds an admitted session may idle before its place frees.
    #[arg(long, default_value_t = 600)]
    pub idle_timeout: u64,
    /// Seconds between the holding page's polls.
    #[arg(long, default_value_t = 5)]
    pub refresh_seconds: u64,
    /// Seconds a person whose turn came while they were away keeps it: back within them, they are let in at the
    /// next free place, ahead of the line (0: a missed turn is lost at once).
    #[arg(long, default_value_t = 600)]
    pub return_window: u64,
    #[command(flatten)]
    pub redis: RedisFlags,
}

/// Where the shared line lives (needs `--features redis`); without any of these it lives in this process.
#[derive(Debug, clap::Args)]
pub struct RedisFlags {
    /// One Redis (or Valkey) server's URL, `redis://[:password@]host:port/[db]`.
    #[arg(long, group = "redis_at")]
    pub redis: Option<String>,
    /// A Redis Cluster: one or more of its nodes' URLs, comma-separated (the rest is learnt from the cluster;
    /// failovers and slot moves are followed).
    #[arg(long, value_delimiter = ',', group = "redis_at")]
    pub redis_cluster: Vec<String>,
    /// A primary under Sentinel: the sentinels' URLs, comma-separated (failovers are followed).
    #[arg(
        long,
        value_delimiter = ',',
        group = "redis_at",
        requires = "redis_sentinel_master"
    )]
    pub redis_sentinel: Vec<String>,
    /// The primary's name in the sentinels' configuration (`sentinel monitor <NAME> ...`).
    #[arg(long, requires = "redis_sentinel")]
    pub redis_sentinel_master: Option<String>,
}

impl RedisFlags {
    /// The demo's options from the flags.
    pub fn options(&self) -> RedisOptions {
        RedisOptions {
            url: self.redis.clone(),
            cluster: self.redis_cluster.clone(),
            sentinel: self.redis_sentinel.clone(),
            sentinel_master: self.redis_sentinel_master.clone(),
        }
    }
}

impl RoomFlags {
    /// The room's options from the flags.
    pub fn options(&self) -> RoomOptions {
        RoomOptions {
            capacity: self.capacity,
            max_per_order: self.max_per_order,
            random_draw: matches!(self.fairness, FairnessFlag::Random),
            opens_in: self.opens_in.map(Duration::from_secs),
            idle_timeout: Duration::from_secs(self.idle_timeout),
            refresh: Duration::from_secs(self.refresh_seconds.max(1)),
            return_window: Duration::from_secs(self.return_window),
            redis: self.redis.options(),
            ..RoomOptions::default()
        }
    }
}

/// The keys room instances over one Redis share: a token from any of them passes on all.
#[derive(Debug, clap::Args)]
pub struct KeyFlags {
    /// Where the sale lives (the line on the embedded store, the seats) and the key files unless named below:
    /// created (mode 0700) on the first start. The default is ignored by the repository's `.gitignore`, so a
    /// checkout never commits a key.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// The token signing key (PKCS#8 PEM), shared by every instance; created if missing [default:
    /// <data-dir>/signing-key.pem].
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// The session-cookie secret, shared by every instance; created if missing [default:
    /// <data-dir>/cookie-secret].
    #[arg(long)]
    pub cookie_secret_file: Option<PathBuf>,
}

impl KeyFlags {
    /// The signing key's file.
    pub fn key_file(&self) -> PathBuf {
        self.key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join(SIGNING_KEY_FILE))
    }

    /// The cookie secret's file.
    pub fn cookie_secret_file(&self) -> PathBuf {
        self.cookie_secret_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join(COOKIE_SECRET_FILE))
    }

    /// The key files named by flag (`--key-file`, `--cookie-secret-file`), read or created; `None` for each left to
    /// the data directory.
    pub fn load_named(&self) -> Result<(Option<SigningKey>, Option<Vec<u8>>), String> {
        let key = match &self.key_file {
            Some(f) => Some(
                load_or_create_signing_key(f)
                    .map_err(|e| format!("--key-file {}: {e}", f.display()))?,
            ),
            None => None,
        };
        let secret = match &self.cookie_secret_file {
            Some(f) => Some(
                load_or_create_cookie_secret(f)
                    .map_err(|e| format!("--cookie-secret-file {}: {e}", f.display()))?,
            ),
            None => None,
        };
        Ok((key, secret))
    }

    /// Reads both files, creating them (mode 0600) on the first start.
    pub fn load(&self) -> Result<(SigningKey, Vec<u8>), String> {
        let (key_file, secret_file) = (self.key_file(), self.cookie_secret_file());
        let key = load_or_create_signing_key(&key_file)
            .map_err(|e| format!("--key-file {}: {e}", key_file.display()))?;
        let secret = load_or_create_cookie_secret(&secret_file)
            .map_err(|e| format!("--cookie-secret-file {}: {e}", secret_file.display()))?;
        Ok((key, secret))
    }
}

/// The operator's kit: the admin API and status page, the metrics. Secrets come from files or the environment,
/// never from the command line (where `ps` and shell history show them).
#[derive(Debug, clap::Args)]
pub struct OpsFlags {
    /// Turns on the admin API and the status page at `/waitroom/admin/`: a file of admin tokens, one a line,
    /// `name:secret` (the name is who the audit log records) or a bare secret (named `admin`); secrets at least
    /// 16 bytes (`openssl rand -base64 32`). Without it, the tokens may come from the environment variable
    /// WAITROOM_ADMIN_TOKENS (same format).
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,
    /// Serves the room's figures for Prometheus at `/waitroom/metrics`.
    #[arg(long)]
    pub metrics: bool,
    /// Asks metrics scrapes for `Authorization: Bearer <the file's secret>` (turns `--metrics` on). Without it,
    /// the secret may come from the environment variable WAITROOM_METRICS_TOKEN.
    #[arg(long, value_name = "PATH")]
    pub metrics_token_file: Option<PathBuf>,
}

impl OpsFlags {
    /// The kit's options (reads the files or the environment).
    pub fn load(&self) -> Result<OpsOptions, String> {
        OpsOptions::load(
            self.admin_token_file.as_deref(),
            self.metrics,
            self.metrics_token_file.as_deref(),
        )
    }
}

/// The shop's settings.
#[derive(Debug, clap::Args)]
pub struct ShopFlags {
    /// Seats on sale.
    #[arg(long, default_value_t = 48_000)]
    pub seats: u32,
    /// Seconds a hold keeps its seats.
    #[arg(long, default_value_t = 300)]
    pub hold_seconds: u64,
    /// Milliseconds the simulated payment provider takes.
    #[arg(long, default_value_t = 1500)]
    pub payment_ms: u64,
}

impl ShopFlags {
    /// A shop builder with these settings.
    pub fn builder(&self) -> ShopBuilder {
        Shop::builder(self.seats)
            .hold_for(Duration::from_secs(self.hold_seconds))
            .payment_latency(Duration::from_millis(self.payment_ms))
    }
}

/// Logs to stderr, at `info` unless `RUST_LOG` says otherwise.
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
}
