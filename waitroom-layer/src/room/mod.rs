//! The line and the door: the room handle (one `Arc` shared by every route, every layer and the background task)
//! and what it is made of. Nothing here imports the HTTP face (`crate::http`).
//!
//! - [`builder`]: [`RoomBuilder`] and the fixed configuration. [`estimate`]: waits and reach from the head's pace.
//! - [`lifecycle`]: the lifecycle stream. [`metrics`]: the instance's counters in the OpenMetrics text format.
//! - [`cookie`] and [`tokens`]: the pass (the signed session cookie, the admission token); [`key_files`]: their
//!   keys kept in the data directory.
//!
//! [`WaitingRoom`]'s methods are grouped by what they touch in its [`Inner`]:
//! - `construct`: building a room and starting its background task.
//! - `outage`: whether the store answers, and what an outage does to the door.
//! - `liveness`: the marks of waiting and active sessions, batched and flushed to the store.
//! - `line`: join, locate, claim, finish (a session's way through the line).
//! - `status`: what a session is told ([`Status`]), what operators see ([`RoomStats`]), the counters.
//! - `tick`: the background round (flush, admission tick, refresh).
//! - `controls`: the operator's settings.

pub(crate) mod builder;
pub(crate) mod cookie;
pub(crate) mod estimate;
pub(crate) mod key_files;
pub mod lifecycle;
pub mod metrics;
pub(crate) mod tokens;

mod batch;
mod construct;
mod controls;
mod drawn;
mod line;
mod liveness;
mod outage;
mod status;
mod tick;

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use crossbeam_utils::CachePadded;
use waitroom_verify::log_gate::LogGate;
use waitroom_verify::{SharedClock, fingerprint};

use crate::store::{SessionState, Snapshot, Store};
use builder::RoomConfig;
use cookie::CookieCodec;
use estimate::HeadMeter;
use lifecycle::{RoomEvent, RoomEventKind};
use liveness::Pending;
use metrics::RoomMetrics;
use tokens::Tokens;

pub use status::{Door, RoomStats, Status, Stopped, ViewState};

/// A waiting room for one on-sale. Cheap to clone: one `Arc` inside, so every clone (every route, every layer) shares
/// one line.
///
/// ```no_run
/// # async fn demo() -> Result<(), waitroom_layer::BuildError> {
/// use waitroom_layer::WaitingRoom;
/// let room = WaitingRoom::builder("tour-2026-stadium").capacity(8_000).build().await?;
/// let me = WaitingRoom::new_session_id();
/// let place = room.join(&me, None).await.expect("the embedded store is always up");
/// println!("{:?}", room.status(Some(&place)));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WaitingRoom {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for WaitingRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoom")
            .field("event", &self.inner.config.event)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) config: RoomConfig,
    pub(crate) clock: SharedClock,
    pub(crate) store: Arc<dyn Store>,
    snap: ArcSwap<Snapshot>,
    store_ok: AtomicBool,
    /// The last store call failed to reach the store (not a store that answered with something unreadable): what
    /// [`StoreOutage::FailOpen`] opens on.
    store_unreachable: AtomicBool,
    /// Paces the warning of a failing store.
    store_log: LogGate,
    last_flush_ms: AtomicU64,
    /// The last flush of liveness marks failed: flush again before any tick.
    flush_failed: AtomicBool,
    /// No admission tick before this time (ms): set when the store comes back, so every instance has flushed the
    /// liveness marks it held during the outage before anyone is skipped as away.
    hold_ticks_until_ms: AtomicU64,
    /// An early admission tick for a newcomer who may go straight in is running on this instance (at most one at
    /// a time: see `WaitingRoom::let_in_at_once`).
    early_tick: AtomicBool,
    meter: Mutex<HeadMeter>,
    /// The head's pace as last measured (point, slow, fast per minute) and where the line stands with the first
    /// wave, kept beside the meter so a poll reads them without a lock.
    pace: ArcSwap<estimate::Head>,
    /// Liveness marks since the last flush, in shards (see `liveness::pending_shard`).
    pending: Box<[CachePadded<Mutex<Pending>>]>,
    /// Session -> (state, line number) of sessions waiting or in the pre-queue, as last read from the store.
    cache: moka::sync::Cache<String, (SessionState, Option<u64>)>,
    /// Sessions let in lately, as this instance heard (the snapshots' `admitted_lately`), with when it heard (room
    /// clock, ms) and their line numbers: while the store claims in touches, their first poll is answered and their
    /// pass claimed from here (see `WaitingRoom::claim`). Empty for a store that does not.
    admits: moka::sync::Cache<String, (u64, Option<u64>)>,
    tokens: Tokens,
    cookies: CookieCodec,
    /// This instance's counters (see [`crate::metrics`]).
    pub(crate) metrics: RoomMetrics,
    /// The lifecycle events (see [`crate::lifecycle`]).
    events: tokio::sync::broadcast::Sender<RoomEvent>,
    /// Sold out was reported (once per instance).
    sold_out_reported: AtomicBool,
    /// Where this instance has read the store's finishes up to (`Store::finished_since`); the finished sessions
    /// themselves go to the token verifier's deny list.
    finished_cursor: Mutex<String>,
    /// The highest line number this instance has seen (its joins, its sessions' cookies): with the snapshot's
    /// `last_number`, the floor a restore keeps new numbers above (see `outage.rs`).
    max_number: AtomicU64,
    /// First contacts' tickets, gathered into batches when the store asks for them (see `batch.rs`).
    batches: batch::TicketBatches,
    /// The random draw's numbers, read from the store after the draw (see `drawn.rs`).
    drawn: drawn::DrawIndex,
    /// Serialises restores of a store that forgot the on-sale (one at a time per instance).
    restoring: tokio::sync::Mutex<()>,
    /// Finishes the store could not take yet (session, seats), oldest first, at most `MAX_PENDING_FINISHES`:
    /// retried in order before each tick until the store takes them (see `WaitingRoom::finish`).
    pending_finishes: Mutex<std::collections::VecDeque<(String, u32)>>,
    /// The finishes this instance recorded lately (session, seats, when), oldest first, at most
    /// `MAX_PENDING_FINISHES` and none older than the idle timeout: applied again to a store found behind this
    /// instance's view (a failover that lost them), so their places free and they stay finished.
    recent_finishes: Mutex<std::collections::VecDeque<(String, u32, u64)>>,
}

impl WaitingRoom {
    /// The room's token issuer and checker.
    pub(crate) fn tokens(&self) -> &Tokens {
        &self.inner.tokens
    }

    /// The room's session cookie codec.
    pub(crate) fn cookies(&self) -> &CookieCodec {
        &self.inner.cookies
    }

    /// The cookie names in force (`__Host-waitroom_session` and `__Host-waitroom_token` behind HTTPS by default;
    /// see [`RoomBuilder::cookie_prefix`](crate::RoomBuilder::cookie_prefix)): what an order service's
    /// `VerifyLayer::cookie_names` should read.
    pub fn cookie_names(&self) -> &waitroom_verify::CookieNames {
        &self.inner.cookies.names
    }

    /// The JWKS document of the room's public token keys (what `{base}/jwks.json` serves).
    pub fn jwks_json(&self) -> bytes::Bytes {
        self.inner.tokens.jwks()
    }

    /// The room's own token verifier (issuer, audience and keys of this room; its deny list holds the sessions
    /// finished through this room). Handy for tests and for an order service in the same process.
    pub fn verifier(&self) -> &waitroom_verify::Verifier {
        &self.inner.tokens.verifier
    }

    /// A signed admission token for `session`, valid from now for the idle timeout, as the room issues it when it
    /// lets a session in. `None` only if signing fails (logged).
    pub fn issue_token(&self, session: &str) -> Option<String> {
        let token = self.inner.tokens.issue(session)?;
        self.inner.metrics.tokens_issued.inc();
        tracing::debug_span!("waitroom.token", event = %self.event(), session = %fingerprint(session))
            .in_scope(|| tracing::debug!("token issued"));
        Some(token)
    }

    /// The fixed configuration.
    pub fn config(&self) -> &RoomConfig {
        &self.inner.config
    }

    /// The room's clock.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The store behind the room.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub(super) fn event(&self) -> &str {
        &self.inner.config.event
    }

    pub(super) fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// The last shared numbers (refreshed by every tick).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.snap.load_full()
    }

    /// `f` of the snapshot in force, read without taking a reference to it (no count moved between cores, as
    /// [`snapshot`](Self::snapshot)'s `Arc` does): for the request path.
    pub(crate) fn with_snapshot<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
        f(&self.inner.snap.load())
    }

    /// Subscribes to the room's lifecycle events (joined, admitted, finished, expired, abandoned, turned away, sold
    /// out) as
    /// this instance sees them. The buffer is bounded: a subscriber that falls behind loses the oldest events
    /// (its `recv` says how many with `RecvError::Lagged`). See [`crate::lifecycle`].
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RoomEvent> {
        self.inner.events.subscribe()
    }

    pub(super) fn emit(&self, kind: RoomEventKind) {
        if self.inner.events.receiver_count() > 0 {
            let _ = self.inner.events.send(RoomEvent {
                at_ms: self.now_ms(),
                kind,
            });
        }
    }
}
