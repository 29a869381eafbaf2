//! Building a room: from the builder to a running room (the first reads of the store, the background task).

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use crossbeam_utils::CachePadded;
use waitroom_verify::log_gate::LogGate;

use super::builder::RoomBuilder;
use super::cookie::CookieCodec;
use super::estimate::{self, HeadMeter};
use super::key_files;
use super::liveness::{PENDING_SHARDS, Pending};
use super::metrics::RoomMetrics;
use super::tokens::Tokens;
use super::{Inner, WaitingRoom};
use crate::error::BuildError;
use crate::store::{MemoryStore, Settings};

/// Most sessions an instance remembers as let in lately (`Inner::admits`): ten times the seed's capacity.
const ADMITS_KEPT: u64 = 80_000;

/// Most `finished_since` calls at build (each returns a batch of finishes; the rest are read by the ticks).
const MAX_FINISHED_READS_AT_START: usize = 16;

impl WaitingRoom {
    /// Starts building a room for the on-sale `event` (its id: the token audience and the store key).
    pub fn builder(event: impl Into<String>) -> RoomBuilder {
        RoomBuilder::new(event)
    }

    /// A fresh random session id: 16 bytes from the thread's cryptographic RNG, base64url (22 characters).
    pub fn new_session_id() -> String {
        URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>())
    }

    pub(crate) async fn from_builder(
        mut b: RoomBuilder,
        defaults: Settings,
    ) -> Result<Self, BuildError> {
        if let Some(dir) = b.data_dir.take() {
            let file_err = |e: std::io::Error| BuildError::invalid("data_dir", e.to_string());
            if !b.store_given {
                b.store = Arc::new(MemoryStore::open(&dir).map_err(BuildError::Store)?);
            }
            if b.pass.signing_key.is_none() {
                let path = dir.join(key_files::SIGNING_KEY_FILE);
                b.pass.signing_key =
                    Some(key_files::load_or_create_signing_key(&path).map_err(file_err)?);
            }
            if b.pass.cookie_secret.is_none() {
                let path = dir.join(key_files::COOKIE_SECRET_FILE);
                b.pass.cookie_secret =
                    Some(key_files::load_or_create_cookie_secret(&path).map_err(file_err)?);
            }
        }
        let settings = b
            .store
            .init(&b.config.event, &defaults)
            .await
            .map_err(BuildError::Store)?;
        let _ = settings;
        let snap = b
            .store
            .snapshot(&b.config.event)
            .await
            .map_err(BuildError::Store)?;
        let pass = b.pass;
        let cookie_names = pass.effective_cookie_names();
        let key = match pass.signing_key {
            Some(k) => k,
            None => {
                let kid = format!("waitroom-{}", &Self::new_session_id()[..8]);
                waitroom_verify::SigningKey::generate_ed25519(kid).map_err(|source| {
                    BuildError::Key {
                        setting: "signing_key",
                        source,
                    }
                })?
            }
        };
        let tokens = Tokens::new(
            key,
            pass.also_publish,
            pass.issuer,
            b.config.event.clone(),
            Duration::from_secs(b.config.idle_timeout.as_secs()),
            pass.max_qty,
            b.clock.clone(),
        )?;
        let secret = pass
            .cookie_secret
            .unwrap_or_else(|| rand::random::<[u8; 32]>().to_vec());
        let cookies = CookieCodec::new(
            &secret,
            &b.config.event,
            cookie_names,
            pass.secure_cookies,
            pass.session_cookie_max_age,
        )
        .with_domain(pass.cookie_domain);
        // A place nobody asks about for the abandon grace is dropped: a session that polls no more is skipped at
        // the head anyway, and one that moved on to carrying its number in its cookie no longer reads it.
        let cache = moka::sync::Cache::builder()
            .max_capacity(b.config.session_cache_capacity)
            .time_to_idle(b.config.abandon_after.max(Duration::from_secs(60)))
            .build();
        // Those let in lately: about one arrival window's admissions (an opening's capacity; the rest are asked of
        // the store as before).
        let admits = moka::sync::Cache::builder()
            .max_capacity(ADMITS_KEPT)
            .build();
        let (events, _) = tokio::sync::broadcast::channel(b.config.event_buffer.max(1));
        let sold_out = snap.settings.sold_out();
        let batches = super::batch::TicketBatches::new(
            b.config
                .ticket_batch
                .unwrap_or_else(|| b.store.ticket_batch()),
        );
        let inner = Arc::new(Inner {
            metrics: RoomMetrics::new(),
            events,
            sold_out_reported: AtomicBool::new(sold_out),
            config: b.config,
            clock: b.clock,
            store: b.store,
            snap: ArcSwap::from_pointee(snap),
            store_ok: AtomicBool::new(true),
            store_unreachable: AtomicBool::new(false),
            store_log: LogGate::default(),
            last_flush_ms: AtomicU64::new(0),
            flush_failed: AtomicBool::new(false),
            hold_ticks_until_ms: AtomicU64::new(0),
            early_tick: AtomicBool::new(false),
            meter: Mutex::new(HeadMeter::default()),
            pace: ArcSwap::from_pointee((None, estimate::FirstWave::Ahead, Arc::from([]))),
            pending: (0..PENDING_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(Pending::default())))
                .collect(),
            cache,
            admits,
            tokens,
            cookies,
            finished_cursor: Mutex::new(String::new()),
            max_number: AtomicU64::new(0),
            batches,
            drawn: Default::default(),
            restoring: tokio::sync::Mutex::new(()),
            pending_finishes: Mutex::new(std::collections::VecDeque::new()),
            recent_finishes: Mutex::new(std::collections::VecDeque::new()),
        });
        let room = Self { inner };
        // Before the first request: the sessions finished while their tokens may still be valid (by other
        // instances, or before a restart) are refused from the start, not a tick later. A backlog bigger than one
        // read takes a few reads (the ticks read whatever is left beyond MAX_FINISHED_READS_AT_START).
        for _ in 0..MAX_FINISHED_READS_AT_START {
            let read = room.read_finished().await.map_err(BuildError::Store)?;
            if read == 0 {
                break;
            }
        }
        room.record_snapshot();
        if b.spawn_background && tokio::runtime::Handle::try_current().is_ok() {
            room.spawn();
        }
        Ok(room)
    }

    /// Starts the background task (tick, refresh, flush) on the current Tokio runtime. `build` does this already
    /// unless [`RoomBuilder::background`] was turned off. The task stops when the last handle to the room drops.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn(&self) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let every = self.inner.config.tick_interval;
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                let room = WaitingRoom { inner };
                let _ = room.run_once(false).await;
            }
        });
    }
}
