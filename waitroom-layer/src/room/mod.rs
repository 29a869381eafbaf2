//! The line and the door: the room handle (one `Arc` shared by every route, every layer and the background task)
//! and what it is made of. Nothing here imports the HTTP face (`crate::http`).
//!
//! - [`builder`]: [`RoomBuilder`] and the fixed configuration. [`estimate`]: waits and reach from the head's pace.
//! - [`events`]: the lifecycle stream. [`metrics`]: the instance's counters in the OpenMetrics text format.
//! - [`cookie`] and [`tokens`]: the pass (the signed session cookie, the admission token).

pub(crate) mod builder;
pub(crate) mod cookie;
pub(crate) mod estimate;
pub mod events;
pub mod metrics;
pub(crate) mod tokens;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, UNIX_EPOCH};

use arc_swap::ArcSwap;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use compact_str::CompactString;
use crossbeam_utils::CachePadded;
use serde::Serialize;
use tracing::Instrument as _;
use waitroom_verify::{SharedClock, fingerprint};

use crate::error::{ConfigError, StoreError};
use crate::store::{
    Inventory, Join, Mark, Placement, SessionState, Settings, SettingsChange, Snapshot, Store,
    Tick, TickReport, Touches,
};
use builder::{RoomBuilder, RoomConfig, StoreOutage};
use cookie::CookieCodec;
use estimate::{Eta, HeadMeter};
use events::{RoomEvent, RoomEventKind};
use metrics::RoomMetrics;
use tokens::Tokens;

/// A waiting room for one on-sale. Cheap to clone: one `Arc` inside, so every clone (every route, every layer) shares
/// one line.
///
/// ```no_run
/// # async fn demo() -> Result<(), waitroom_layer::ConfigError> {
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
    last_error_log_ms: AtomicU64,
    last_flush_ms: AtomicU64,
    /// The last flush of liveness marks failed: flush again before any tick.
    flush_failed: AtomicBool,
    /// No admission tick before this time (ms): set when the store comes back, so every instance has flushed the
    /// liveness marks it held during the outage before anyone is skipped as abandoned.
    hold_ticks_until_ms: AtomicU64,
    meter: Mutex<HeadMeter>,
    /// The head's pace as last measured (point, slow, fast per minute) and where the line stands with the first
    /// wave, kept beside the meter so a poll reads them without a lock.
    pace: ArcSwap<estimate::Head>,
    /// Liveness marks since the last flush, in shards (see [`pending_shard`]).
    pending: Box<[CachePadded<Mutex<Pending>>]>,
    /// Session -> (state, line number) of sessions waiting or in the pre-queue, as last read from the store.
    cache: moka::sync::Cache<String, (SessionState, Option<u64>)>,
    tokens: Tokens,
    cookies: CookieCodec,
    /// This instance's counters (see [`crate::metrics`]).
    pub(crate) metrics: RoomMetrics,
    /// The lifecycle events (see [`crate::events`]).
    events: tokio::sync::broadcast::Sender<RoomEvent>,
    /// Sold out was reported (once per instance).
    sold_out_reported: AtomicBool,
    /// Where this instance has read the store's finishes up to (`Store::finished_since`); the finished sessions
    /// themselves go to the token verifier's deny list.
    finished_cursor: Mutex<String>,
}

#[derive(Debug, Default)]
struct Pending {
    /// The polls of waiting sessions since the last flush, in order, each with the line number it knew (when
    /// known). Repeats included: a poll appends without looking anything up (a lookup in a table of thousands
    /// of sessions is a cache miss on every poll); the flush keeps one mark per session.
    waiting: Vec<(CompactString, Option<u64>)>,
    /// The previous window's buffer, emptied by the flush and swapped in at the next one (so the polls of a
    /// window land in memory already in use, not in fresh pages from the system).
    spare: Vec<(CompactString, Option<u64>)>,
    /// The active sessions that made a request since the last flush.
    active: SessionSet,
}

/// Session ids marked since the last flush. Hashed with foldhash (randomly seeded) rather than SipHash: an
/// admitted request marks its session on every call, and the ids are the room's own random ones (read from a
/// session cookie whose HMAC verified), so nobody chooses them. The ids are `CompactString`s here and in
/// [`Pending::waiting`]: the room's 22-character ids are stored inline (up to 24 bytes), so a mark allocates
/// nothing and comparing one reads no second place in memory.
type SessionSet = HashSet<CompactString, foldhash::fast::RandomState>;

/// Waiting sessions' marks, one per session (with its line number when any of its marks knew it).
type WaitingMarks = HashMap<CompactString, Option<u64>, foldhash::fast::RandomState>;

fn lock_pending(shard: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    shard.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bound on liveness marks held between two flushes, all shards together: one flush window's polls, or while the
/// store is down every session's mark (each failed flush puts them back one per session) plus one window's polls.
/// Beyond it, new marks are dropped until a flush succeeds.
const MAX_PENDING: usize = 2_000_000;
/// Most `finished_since` calls at build (each returns a batch of finishes; the rest are read by the ticks).
const MAX_FINISHED_READS_AT_START: usize = 16;
/// Shards of the liveness marks.
const PENDING_SHARDS: usize = 8;
/// Bound per shard.
const MAX_PENDING_PER_SHARD: usize = MAX_PENDING / PENDING_SHARDS;

/// The shard of the liveness marks this thread writes to. Every poll and every admitted request marks its
/// session; with one lock for all, that lock's cache line would move between cores on nearly every request.
/// Each thread keeps to one shard (threads are numbered as they first mark), and the flush drains them all.
fn pending_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % PENDING_SHARDS;
    }
    SHARD.with(|s| *s)
}

/// How often touches are flushed to the store.
const FLUSH_EVERY_MS: u64 = 1_000;
/// How often a failing store is logged.
const ERROR_LOG_EVERY_MS: u64 = 10_000;
/// `last_error_log_ms` before the first error was logged.
const NEVER_LOGGED: u64 = u64::MAX;
/// How long after the store comes back the door stays shut: two flush intervals, so every instance sharing the
/// store has sent the liveness marks it kept during the outage.
const HOLD_AFTER_OUTAGE_MS: u64 = 2 * FLUSH_EVERY_MS;

/// What a person in line (or at the door) is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViewState {
    /// Joined before the draw; no position yet.
    Prequeue,
    /// In line.
    Waiting,
    /// Let in: the pass is ready.
    Admitted,
    /// Every seat is sold.
    SoldOut,
    /// The on-sale is closed.
    Closed,
    /// In line, but the door is paused (by an operator, or because every seat is held).
    Paused,
    /// Not in line (never joined, or the last visit ended).
    NotInLine,
}

impl ViewState {
    /// The state's wire name (`Waitroom-State` header, JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prequeue => "prequeue",
            Self::Waiting => "waiting",
            Self::Admitted => "admitted",
            Self::SoldOut => "sold_out",
            Self::Closed => "closed",
            Self::Paused => "paused",
            Self::NotInLine => "not_in_line",
        }
    }
}

/// The status of one session, answered from local memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    /// The on-sale id.
    pub event: String,
    /// The on-sale's name.
    pub name: String,
    /// What to tell the person.
    pub state: ViewState,
    /// Places ahead, counting this one (1 = next), while in line.
    pub position: Option<u64>,
    /// The line number, once assigned.
    pub number: Option<u64>,
    /// The estimated wait, while in line.
    pub eta_seconds: Option<u64>,
    /// The short end of the estimate's range.
    pub eta_low_seconds: Option<u64>,
    /// The long end of the estimate's range.
    pub eta_high_seconds: Option<u64>,
    /// Where the estimate comes from (`measured` or `configured`).
    pub eta_basis: Option<estimate::EtaBasis>,
    /// How far down the line the remaining seats are likely to reach, as a position (null until measured).
    pub reach_position: Option<u64>,
    /// The seats are likely to run out before this position's turn.
    pub beyond_reach: bool,
    /// People in line or in the pre-queue.
    pub in_line: u64,
    /// When to ask again, in seconds.
    pub refresh_seconds: u64,
    /// When the door opens (and the draw happens), RFC 3339, if in the future.
    pub opens_at: Option<String>,
    /// False when the shared store could not be reached lately: the figures are the last known ones.
    pub store_ok: bool,
    /// When these figures were taken, RFC 3339.
    pub updated_at: String,
}

/// A snapshot of the room for operators.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// The on-sale id.
    pub event: String,
    /// People in line (numbers not yet served) plus the pre-queue.
    pub waiting: u64,
    /// People in the pre-queue.
    pub prequeue: u64,
    /// Sessions admitted or active.
    pub active: u64,
    /// The capacity.
    pub capacity: u64,
    /// The per-minute cap.
    pub admit_per_minute: Option<u64>,
    /// Numbers served (admitted, skipped, or turned away once closed or sold out).
    pub served: u64,
    /// Running totals.
    pub counters: crate::store::Counters,
    /// Places freeing per minute (measured), if measured.
    pub head_rate_per_minute: Option<f64>,
    /// Numbers served per minute over the last minute (admitted, skipped or turned away).
    pub served_per_minute: f64,
    /// Sessions let in per minute over the last minute: the measured admission rate.
    pub admitted_per_minute: f64,
    /// The estimated wait at the back of the line, in seconds.
    pub tail_eta_seconds: Option<u64>,
    /// The seats, if reported.
    pub inventory: Option<Inventory>,
    /// The door is paused.
    pub paused: bool,
    /// The on-sale is closed.
    pub closed: bool,
    /// Every seat is sold.
    pub sold_out: bool,
    /// When the door opens (and the draw happens), RFC 3339, while that is in the future; `None` once it is open
    /// (at the scheduled time, or earlier by an operator's open now) or when no opening was scheduled.
    pub opens_at: Option<String>,
    /// The store answered lately.
    pub store_ok: bool,
}

fn rfc3339(ms: u64) -> String {
    // Every status carries the time; it changes once a second, so each thread formats it once a second.
    thread_local! {
        static LAST: std::cell::RefCell<Option<(u64, String)>> = const { std::cell::RefCell::new(None) };
    }
    let secs = ms / 1000;
    LAST.with_borrow_mut(|last| match last {
        Some((at, text)) if *at == secs => text.clone(),
        _ => {
            let text = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs))
                .to_string();
            *last = Some((secs, text.clone()));
            text
        }
    })
}

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
        b: RoomBuilder,
        defaults: Settings,
    ) -> Result<Self, ConfigError> {
        let settings = b
            .store
            .init(&b.config.event, &defaults)
            .await
            .map_err(|e| ConfigError::Store(e.to_string()))?;
        let _ = settings;
        let snap = b
            .store
            .snapshot(&b.config.event)
            .await
            .map_err(|e| ConfigError::Store(e.to_string()))?;
        let pass = b.pass;
        let key = match pass.signing_key {
            Some(k) => k,
            None => {
                let kid = format!("waitroom-{}", &Self::new_session_id()[..8]);
                waitroom_verify::SigningKey::generate_ed25519(kid)
                    .map_err(|e| ConfigError::invalid("signing_key", e.to_string()))?
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
            pass.cookie_names,
            pass.secure_cookies,
            pass.session_cookie_max_age,
        );
        // A place nobody asks about for the abandon grace is dropped: a session that polls no more is skipped at
        // the head anyway, and one that moved on to carrying its number in its cookie no longer reads it.
        let cache = moka::sync::Cache::builder()
            .max_capacity(b.config.session_cache_capacity)
            .time_to_idle(b.config.abandon_after.max(Duration::from_secs(60)))
            .build();
        let (events, _) = tokio::sync::broadcast::channel(b.config.event_buffer.max(1));
        let sold_out = snap.settings.sold_out();
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
            last_error_log_ms: AtomicU64::new(NEVER_LOGGED),
            last_flush_ms: AtomicU64::new(0),
            flush_failed: AtomicBool::new(false),
            hold_ticks_until_ms: AtomicU64::new(0),
            meter: Mutex::new(HeadMeter::default()),
            pace: ArcSwap::from_pointee((None, estimate::FirstWave::Ahead)),
            pending: (0..PENDING_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(Pending::default())))
                .collect(),
            cache,
            tokens,
            cookies,
            finished_cursor: Mutex::new(String::new()),
        });
        let room = Self { inner };
        // Before the first request: the sessions finished while their tokens may still be valid (by other
        // instances, or before a restart) are refused from the start, not a tick later. A backlog bigger than one
        // read takes a few reads (the ticks read whatever is left beyond MAX_FINISHED_READS_AT_START).
        for _ in 0..MAX_FINISHED_READS_AT_START {
            let read = room
                .read_finished()
                .await
                .map_err(|e| ConfigError::Store(e.to_string()))?;
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

    /// The room's token issuer and checker.
    pub(crate) fn tokens(&self) -> &Tokens {
        &self.inner.tokens
    }

    /// The room's session cookie codec.
    pub(crate) fn cookies(&self) -> &CookieCodec {
        &self.inner.cookies
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

    fn event(&self) -> &str {
        &self.inner.config.event
    }

    fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// The last shared numbers (refreshed by every tick).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.snap.load_full()
    }

    /// Whether the store answered at the last attempt.
    pub fn store_ok(&self) -> bool {
        self.inner.store_ok.load(Ordering::Relaxed)
    }

    /// Whether a protected request without a valid token passes now: the store could not be reached at the last
    /// attempt (an unreadable answer does not open the door) and the room was built with [`StoreOutage::FailOpen`].
    pub(crate) fn fails_open(&self) -> bool {
        self.inner.config.store_outage == StoreOutage::FailOpen
            && self.inner.store_unreachable.load(Ordering::Relaxed)
    }

    fn note_store(&self, r: Result<(), &StoreError>) {
        match r {
            Ok(()) => {
                self.inner.store_unreachable.store(false, Ordering::Relaxed);
                if !self.inner.store_ok.swap(true, Ordering::Relaxed) {
                    let now = self.now_ms();
                    self.inner
                        .hold_ticks_until_ms
                        .store(now + HOLD_AFTER_OUTAGE_MS, Ordering::Relaxed);
                    tracing::info!(event = %self.event(), "store reachable again");
                }
            }
            Err(e) => {
                self.inner.metrics.store_errors.inc();
                self.inner.store_ok.store(false, Ordering::Relaxed);
                self.inner
                    .store_unreachable
                    .store(matches!(e, StoreError::Unavailable(_)), Ordering::Relaxed);
                let now = self.now_ms();
                let last = self.inner.last_error_log_ms.load(Ordering::Relaxed);
                // Once per interval (the first error at once; a clock that went back counts as a new interval).
                if (last == NEVER_LOGGED
                    || now >= last.saturating_add(ERROR_LOG_EVERY_MS)
                    || now < last)
                    && self
                        .inner
                        .last_error_log_ms
                        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    match self.inner.config.store_outage {
                        StoreOutage::FailClosed => {
                            tracing::warn!(event = %self.event(), error = %e,
                            "store unavailable; answering from the last snapshot, nobody new gets in")
                        }
                        StoreOutage::FailOpen => tracing::warn!(event = %self.event(), error = %e,
                            "store unavailable; answering from the last snapshot, failing open: protected paths are unprotected until it answers"),
                    }
                }
            }
        }
    }

    fn observe<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        self.note_store(r.as_ref().map(|_| ()));
        r
    }

    /// Records a waiting session's poll for the next batch. A numbered session is always marked (the store may keep
    /// it as one bit). A pre-queued one is marked only in the last stretch before the scheduled opening: the draw
    /// reads liveness as of the opening, so earlier marks would only be overwritten, and at 10x the seed's crowd
    /// they are hundreds of thousands of record writes a second. (Should the door open earlier than scheduled, the
    /// store counts every drawn session as seen at the draw; see [`Store::tick`].)
    fn mark_waiting(&self, session: &str, number: Option<u64>, snap: &Snapshot) {
        if number.is_none() && !self.prequeue_marks_due(snap) {
            return;
        }
        let mut p = self.pending_here();
        if p.waiting.len() < MAX_PENDING_PER_SHARD {
            p.waiting.push((CompactString::new(session), number));
        }
    }

    /// Whether pre-queue polls are marked now: no opening scheduled, or the opening is within the abandon grace
    /// plus one poll interval and two flushes (so every page that still polls leaves a mark the draw can read).
    fn prequeue_marks_due(&self, snap: &Snapshot) -> bool {
        let c = &self.inner.config;
        let lead = (c.abandon_after + c.poll_interval).as_millis() as u64 + 2 * FLUSH_EVERY_MS;
        snap.settings
            .opens_at_ms
            .is_none_or(|t| self.now_ms().saturating_add(lead) >= t)
    }

    /// Records that an active session made a protected request (batched; its idle deadline moves at the next flush).
    pub fn touch_active(&self, session: &str) {
        let mut p = self.pending_here();
        if p.active.len() < MAX_PENDING_PER_SHARD {
            p.active.insert(CompactString::new(session));
        }
    }

    /// This thread's shard of the liveness marks, locked.
    fn pending_here(&self) -> std::sync::MutexGuard<'_, Pending> {
        lock_pending(&self.inner.pending[pending_shard()])
    }

    /// Records a waiting session's liveness and, when `cache`, its place in the local cache; forgets the place of
    /// a session that is not waiting. Joins do not fill the cache: a browser carries its place in its signed
    /// cookie (its number, or the pre-queue mark), so the cache only holds what a caller without it looked up.
    fn remember(&self, p: &Placement, cache: bool) {
        if matches!(p.state, SessionState::Waiting | SessionState::PreQueue) {
            if cache {
                self.inner
                    .cache
                    .insert(p.session.clone(), (p.state, p.number));
            }
            self.mark_waiting(&p.session, p.number, &self.inner.snap.load());
        } else {
            self.inner.cache.invalidate(&p.session);
        }
    }

    /// Joins the line (idempotent). With an `account`, the account holds one place whichever session asks; the
    /// returned placement names the session that holds it.
    ///
    /// # Errors
    /// When the store cannot be reached; nothing changed then.
    pub async fn join(
        &self,
        session: &str,
        account: Option<&str>,
    ) -> Result<Placement, StoreError> {
        self.inner.metrics.joins.inc();
        let span = tracing::debug_span!("waitroom.join", event = %self.event(), session = %fingerprint(session));
        async move {
            let join = Join {
                session: session.to_owned(),
                account: account.map(str::to_owned),
                now_ms: self.now_ms(),
                draw_key: rand::random(),
            };
            let p = self.observe(self.inner.store.join(self.event(), &join).await)?;
            self.remember(&p, false);
            tracing::debug!(
                holder = %fingerprint(&p.session),
                state = ?p.state,
                number = p.number,
                "joined"
            );
            if matches!(p.state, SessionState::Waiting | SessionState::PreQueue) {
                self.emit(RoomEventKind::Joined {
                    session: p.session.clone(),
                    number: p.number,
                });
            }
            Ok(p)
        }
        .instrument(span)
        .await
    }

    /// Subscribes to the room's lifecycle events (joined, admitted, finished, expired, abandoned, turned away, sold
    /// out) as
    /// this instance sees them. The buffer is bounded: a subscriber that falls behind loses the oldest events
    /// (its `recv` says how many with `RecvError::Lagged`). See [`crate::events`].
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RoomEvent> {
        self.inner.events.subscribe()
    }

    fn emit(&self, kind: RoomEventKind) {
        if self.inner.events.receiver_count() > 0 {
            let _ = self.inner.events.send(RoomEvent {
                at_ms: self.now_ms(),
                kind,
            });
        }
    }

    /// This instance's counters and the room's figures in the OpenMetrics text format (content type
    /// [`METRICS_CONTENT_TYPE`](crate::METRICS_CONTENT_TYPE)), what the layer serves at its metrics path. For an
    /// app that serves metrics elsewhere (another port, its own registry's endpoint). See [`crate::metrics`].
    pub fn metrics_text(&self) -> String {
        self.inner.metrics.render(&self.stats())
    }

    /// Counts a token refused on a protected path.
    pub(crate) fn note_refusal(&self, refusal: waitroom_verify::Refusal, session: &str) {
        self.inner.metrics.refused(refusal);
        tracing::debug_span!(
            "waitroom.refusal",
            event = %self.event(),
            session = %fingerprint(session),
            reason = refusal.code(),
        )
        .in_scope(|| tracing::debug!("token refused"));
    }

    /// Counts a status poll.
    pub(crate) fn note_poll(&self, session: Option<&str>) {
        self.inner.metrics.polls.inc();
        if let Some(s) = session {
            tracing::trace!(event = %self.event(), session = %fingerprint(s), "poll");
        }
    }

    /// Where a session stands. The hot path: a waiting session whose line number is known (from its signed cookie,
    /// `number_hint`, or from the local cache) is answered from local memory with no store call; its liveness is
    /// recorded for the next batch. Others are looked up once in the store. While the on-sale is closed or sold
    /// out, a `number_hint` the head has passed is answered [`SessionState::TurnedAway`] without a store call.
    ///
    /// # Errors
    /// When the store must be asked and cannot be reached.
    pub async fn locate(
        &self,
        session: &str,
        number_hint: Option<u64>,
    ) -> Result<Option<Placement>, StoreError> {
        self.locate_marked(session, number_hint, false).await
    }

    /// [`locate`](Self::locate) with the session cookie's pre-queue mark.
    pub(crate) async fn locate_marked(
        &self,
        session: &str,
        number_hint: Option<u64>,
        prequeue_hint: bool,
    ) -> Result<Option<Placement>, StoreError> {
        if let Some((state, number)) = self.locate_local(session, number_hint, prequeue_hint) {
            return Ok(Some(Placement {
                session: session.to_owned(),
                state,
                number,
            }));
        }
        let p = self.observe(self.inner.store.lookup(self.event(), session).await)?;
        if let Some(p) = &p {
            self.remember(p, true);
        }
        Ok(p)
    }

    /// [`locate`](Self::locate)'s answer when local memory has it, as (state, line number): a session waiting behind
    /// the head (its line number from `number_hint` or the local cache) or in the pre-queue before the draw
    /// (`prequeue_hint`, from its signed cookie, or the local cache); its liveness is recorded for the next batch.
    /// `None`: only the store knows.
    pub(crate) fn locate_local(
        &self,
        session: &str,
        number_hint: Option<u64>,
        prequeue_hint: bool,
    ) -> Option<(SessionState, Option<u64>)> {
        let snap = self.inner.snap.load();
        if let Some(n) = number_hint
            && n > snap.served
        {
            self.mark_waiting(session, Some(n), &snap);
            return Some((SessionState::Waiting, Some(n)));
        }
        // While the on-sale is closed or sold out, the line only leaves by being turned away: a session the head
        // has passed, or in the pre-queue, is answered as turned away without a store call, so the whole line can
        // hear "sold out" at its next poll without a lookup each. One the head passed because it was let in just
        // before hears the same: an unclaimed admission is not let in any more (see `status`), and a claimed pass
        // keeps working on its token.
        if snap.settings.turning_away() && (number_hint.is_some() || prequeue_hint) {
            return Some((SessionState::TurnedAway, number_hint));
        }
        // Before the draw, the signed pre-queue mark is the place, unless sessions were turned away since (a
        // sell-out withdrawn before the draw): then the store says whether this one still has it.
        if prequeue_hint && !snap.drawn && snap.counters.turned_away == 0 {
            self.mark_waiting(session, None, &snap);
            return Some((SessionState::PreQueue, None));
        }
        let (state, number) = self.inner.cache.get(session)?;
        let fresh = match state {
            SessionState::Waiting => number.is_some_and(|n| n > snap.served),
            SessionState::PreQueue => !snap.drawn && snap.counters.turned_away == 0,
            _ => false,
        };
        if fresh {
            self.mark_waiting(session, number, &snap);
            Some((state, number))
        } else {
            None
        }
    }

    /// An admitted session comes for its pass: it turns active (its idle deadline starts). Returns its placement.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn claim(&self, session: &str) -> Result<Option<Placement>, StoreError> {
        let idle = self.inner.config.idle_timeout.as_millis() as u64;
        let p = self.observe(
            self.inner
                .store
                .claim(self.event(), session, self.now_ms(), idle)
                .await,
        )?;
        self.inner.cache.invalidate(session);
        Ok(p)
    }

    /// Marks a session finished: it leaves the active count at once and the next tick lets the next person in.
    /// `seats` is what its order bought (0 when it left without buying). Returns whether it was active.
    ///
    /// The seats feed the measured share of buyers and their average order (the reach estimate), and move from
    /// held to sold in the room's inventory. An app that also reports absolute counts with
    /// [`set_inventory`](Self::set_inventory) must not count an order as sold there before its finish has reached
    /// the room, or the order is counted twice (report its seats as held until then, as the demo's `Shop` does).
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn finish(&self, session: &str, seats: u32) -> Result<bool, StoreError> {
        let span = tracing::debug_span!("waitroom.finish", event = %self.event(), session = %fingerprint(session), seats);
        let r = self.observe(
            self.inner
                .store
                .finish(self.event(), session, seats, self.now_ms())
                .instrument(span.clone())
                .await,
        )?;
        span.in_scope(|| tracing::debug!(was_active = r, "finished"));
        if r {
            self.emit(RoomEventKind::Finished {
                session: session.to_owned(),
                seats,
            });
        }
        self.inner.cache.invalidate(session);
        if r {
            self.inner.tokens.deny(session);
        }
        for shard in &self.inner.pending {
            lock_pending(shard).active.remove(session);
        }
        self.refresh().await.ok();
        Ok(r)
    }

    /// Whether `session` finished lately (within the idle timeout), through this room or through anything sharing
    /// its store (another instance, a verifier's finish sink): a layer must not renew its token. Local: no store
    /// call; finishes recorded elsewhere arrive within a tick or two.
    pub fn finished_recently(&self, session: &str) -> bool {
        self.inner.tokens.verifier.is_denied(session)
    }

    /// Reads the finishes recorded since this instance's cursor into the token deny list; returns how many it read.
    /// The first read (empty cursor) reaches back over the deny TTL (the tokens' longest life plus twice the
    /// leeway), so an instance started mid-sale refuses the tokens of sessions finished before it started.
    async fn read_finished(&self) -> Result<usize, StoreError> {
        let cursor = self
            .inner
            .finished_cursor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let lookback_ms = self.inner.tokens.verifier.deny_ttl().as_millis() as u64;
        let (ids, next) = self.observe(
            self.inner
                .store
                .finished_since(self.event(), &cursor, self.now_ms(), lookback_ms)
                .await,
        )?;
        let read = ids.len();
        for s in ids {
            self.inner.cache.invalidate(&s);
            self.inner.tokens.deny(&s);
        }
        *self
            .inner
            .finished_cursor
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = next;
        Ok(read)
    }

    /// What to tell the holder of `placement` (`None`: not in line). Local: no store call.
    pub fn status(&self, placement: Option<&Placement>) -> Status {
        let snap = self.inner.snap.load();
        let now = self.now_ms();
        let s = &snap.settings;
        let mut st = Status {
            event: self.inner.config.event.clone(),
            name: self.inner.config.display_name.clone(),
            state: ViewState::NotInLine,
            position: None,
            number: placement.and_then(|p| p.number),
            eta_seconds: None,
            eta_low_seconds: None,
            eta_high_seconds: None,
            eta_basis: None,
            reach_position: None,
            beyond_reach: false,
            in_line: snap.waiting(),
            refresh_seconds: self.inner.config.poll_interval.as_secs().max(1),
            opens_at: s.opens_at_ms.filter(|&t| t > now).map(rfc3339),
            store_ok: self.store_ok(),
            updated_at: rfc3339(now),
        };
        let state = placement.map(|p| p.state);
        st.state = match state {
            Some(SessionState::Active) => ViewState::Admitted,
            // Once the on-sale is closed or sold out nobody new is let in, a session admitted but not yet come for
            // its pass included (it expires at the end of its arrival window, as a no-show does).
            Some(SessionState::Admitted) if !s.turning_away() => ViewState::Admitted,
            // A session turned away (or waiting to be) hears why: the on-sale closed or sold out.
            _ if s.closed => ViewState::Closed,
            _ if s.sold_out() => ViewState::SoldOut,
            Some(SessionState::PreQueue) => ViewState::Prequeue,
            Some(SessionState::Waiting) => {
                if s.paused || s.inventory.is_some_and(|i| i.available() == 0) {
                    ViewState::Paused
                } else {
                    ViewState::Waiting
                }
            }
            _ => ViewState::NotInLine,
        };
        // A place and a wait mean something while the line can still move: not once the on-sale is sold out or
        // closed (the page then says so, and nothing else).
        if let (Some(SessionState::Waiting), Some(n)) = (state, placement.and_then(|p| p.number))
            && !s.turning_away()
        {
            let position = n.saturating_sub(snap.served).max(1);
            st.position = Some(position);
            let eta = self.eta_for(position, &snap, now);
            // Before the door opens, the wait starts at the opening.
            let until_open = s
                .opens_at_ms
                .filter(|&t| t > now)
                .map_or(0, |t| (t - now).div_ceil(1000));
            st.eta_seconds = Some(eta.seconds + until_open);
            st.eta_low_seconds = Some(eta.low_seconds + until_open);
            st.eta_high_seconds = Some(eta.high_seconds + until_open);
            st.eta_basis = Some(eta.basis);
            if let Some(reach) = estimate::reach(&snap) {
                let reach_pos = reach.saturating_sub(snap.served);
                st.reach_position = Some(reach_pos);
                st.beyond_reach = position > reach_pos;
            }
        }
        st
    }

    fn configured_rate(&self, snap: &Snapshot) -> f64 {
        snap.settings.capacity as f64 / (self.inner.config.expected_visit.as_secs_f64() / 60.0)
    }

    fn eta_for(&self, position: u64, snap: &Snapshot, now_ms: u64) -> Eta {
        let (pace, wave) = **self.inner.pace.load();
        let lag = wave.lag_seconds(now_ms, self.inner.config.expected_visit);
        estimate::eta(position, snap, pace, self.configured_rate(snap), lag)
    }

    /// A snapshot of the room for operators and dashboards.
    pub fn stats(&self) -> Stats {
        let snap = self.inner.snap.load();
        let (pace, served_pm, admitted_pm) = {
            let m = self.inner.meter.lock().unwrap_or_else(|e| e.into_inner());
            (m.pace(), m.served_per_minute(), m.admitted_per_minute())
        };
        let tail = snap.waiting();
        Stats {
            event: self.inner.config.event.clone(),
            waiting: tail,
            prequeue: snap.prequeue,
            active: snap.active,
            capacity: snap.settings.capacity,
            admit_per_minute: snap.settings.admit_per_minute,
            served: snap.served,
            counters: snap.counters,
            head_rate_per_minute: pace.map(|p| p.0),
            served_per_minute: served_pm,
            admitted_per_minute: admitted_pm,
            tail_eta_seconds: (tail > 0).then(|| self.eta_for(tail, &snap, self.now_ms()).seconds),
            inventory: snap.settings.inventory,
            paused: snap.settings.paused,
            closed: snap.settings.closed,
            sold_out: snap.settings.sold_out(),
            opens_at: snap
                .settings
                .opens_at_ms
                .filter(|&t| t > self.now_ms())
                .map(rfc3339),
            store_ok: self.store_ok(),
        }
    }

    /// Measures the head and stores the pace the estimates use. For one expected visit after the head first moves,
    /// the departure rate is still ramping up (nobody admitted at the opening has finished yet), so the configured
    /// rate is used while it is the higher of the two.
    fn record_snapshot(&self) {
        let snap = self.inner.snap.load();
        let now = self.now_ms();
        let mut meter = self.inner.meter.lock().unwrap_or_else(|e| e.into_inner());
        meter.record(now, &snap);
        let warming = meter.moving_since_ms().is_some_and(|t| {
            now < t.saturating_add(self.inner.config.expected_visit.as_millis() as u64)
        });
        let pace = match meter.pace() {
            Some(p) if warming && p.0 < self.configured_rate(&snap) => None,
            measured => measured,
        };
        self.inner.pace.store(Arc::new((pace, meter.first_wave())));
    }

    /// Reads the shared numbers from the store now.
    ///
    /// # Errors
    /// When the store cannot be reached; the last snapshot stays in force.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let snap = self.observe(self.inner.store.snapshot(self.event()).await)?;
        let sold_out = snap.settings.sold_out();
        self.inner.snap.store(Arc::new(snap));
        self.record_snapshot();
        if sold_out && !self.inner.sold_out_reported.swap(true, Ordering::Relaxed) {
            tracing::info!(event = %self.event(), "sold out");
            self.emit(RoomEventKind::SoldOut);
        }
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        let mut waiting = WaitingMarks::default();
        let mut active = SessionSet::default();
        for shard in &self.inner.pending {
            let mut p = lock_pending(shard);
            let spare = std::mem::take(&mut p.spare);
            let mut marks = std::mem::replace(&mut p.waiting, spare);
            if active.is_empty() {
                active = std::mem::take(&mut p.active);
            } else {
                active.extend(p.active.drain());
            }
            drop(p);
            let polls = marks.len();
            for (session, number) in marks.drain(..) {
                // A session's line number never changes once it has one: a mark that knows it says more.
                let kept = waiting.entry(session).or_insert(number);
                if kept.is_none() {
                    *kept = number;
                }
            }
            // Back as the next spare, trimmed when this window was much quieter than its size (after an outage).
            if marks.capacity() > 4 * polls.max(1024) {
                marks.shrink_to(polls);
            }
            lock_pending(shard).spare = marks;
        }
        if waiting.is_empty() && active.is_empty() {
            return Ok(());
        }
        let touches = Touches {
            now_ms: self.now_ms(),
            waiting: waiting
                .iter()
                .map(|(session, number)| Mark {
                    session: session.to_string(),
                    number: *number,
                })
                .collect(),
            active: active.iter().map(CompactString::to_string).collect(),
            idle_timeout_ms: self.inner.config.idle_timeout.as_millis() as u64,
            abandon_after_ms: self.inner.config.abandon_after.as_millis() as u64,
        };
        let r = self.observe(self.inner.store.touch(self.event(), &touches).await);
        if r.is_err() {
            // Keep the marks for the next attempt: a store outage must not make people look abandoned.
            // Back into the shards, an equal part in each (the bound is per shard).
            let mut waiting = waiting.into_iter();
            let per_waiting = waiting.len().div_ceil(PENDING_SHARDS);
            let mut active = active.into_iter();
            let per_active = active.len().div_ceil(PENDING_SHARDS);
            for shard in &self.inner.pending {
                let mut p = lock_pending(shard);
                for mark in waiting.by_ref().take(per_waiting) {
                    if p.waiting.len() < MAX_PENDING_PER_SHARD {
                        p.waiting.push(mark);
                    }
                }
                for s in active.by_ref().take(per_active) {
                    if p.active.len() < MAX_PENDING_PER_SHARD {
                        p.active.insert(s);
                    }
                }
            }
        }
        r
    }

    async fn run_once(&self, force_flush: bool) -> Result<TickReport, StoreError> {
        let now = self.now_ms();
        let last = self.inner.last_flush_ms.load(Ordering::Relaxed);
        let retry = self.inner.flush_failed.load(Ordering::Relaxed);
        if force_flush || retry || now >= last + FLUSH_EVERY_MS || now < last {
            self.inner.last_flush_ms.store(now, Ordering::Relaxed);
            if let Err(e) = self.flush().await {
                // The liveness marks did not reach the store: a tick now could skip people who polled all along
                // as abandoned. No tick until they are sent.
                self.inner.flush_failed.store(true, Ordering::Relaxed);
                let _ = self.refresh().await;
                return Err(e);
            }
            self.inner.flush_failed.store(false, Ordering::Relaxed);
        }
        if now < self.inner.hold_ticks_until_ms.load(Ordering::Relaxed) {
            // Just back from an outage: other instances may still hold liveness marks (see HOLD_AFTER_OUTAGE_MS).
            let _ = self.refresh().await;
            return Ok(TickReport::default());
        }
        let tick = Tick {
            now_ms: now,
            arrival_window_ms: self.inner.config.arrival_window.as_millis() as u64,
            abandon_after_ms: self.inner.config.abandon_after.as_millis() as u64,
            max_scan: self.inner.config.max_scan_per_tick,
        };
        let report = self.observe(self.inner.store.tick(self.event(), &tick).await);
        if let Ok(r) = &report {
            self.report_tick(r);
            for s in r
                .expired
                .iter()
                .chain(&r.admitted)
                .chain(&r.abandoned)
                .chain(&r.turned_away)
            {
                self.inner.cache.invalidate(s);
            }
            if r.drew {
                tracing::info!(event = %self.event(), "the draw ran; the door is open");
            }
            let _ = self.read_finished().await;
        }
        let _ = self.refresh().await;
        report
    }

    /// Logs and emits what a tick of this instance did.
    fn report_tick(&self, r: &TickReport) {
        if r.admitted.is_empty()
            && r.abandoned.is_empty()
            && r.expired.is_empty()
            && r.turned_away.is_empty()
        {
            return;
        }
        tracing::debug!(
            event = %self.event(),
            admitted = r.admitted.len(),
            abandoned = r.abandoned.len(),
            expired = r.expired.len(),
            turned_away = r.turned_away.len(),
            "tick"
        );
        type Make = fn(String) -> RoomEventKind;
        // One `DEBUG` span per session (a span's name is fixed where it is made, hence one function per kind); the
        // fields are only computed when the span is enabled.
        type Log = fn(&str, &str);
        let kinds: [(&[String], Make, Log); 4] = [
            (
                &r.admitted,
                |session| RoomEventKind::Admitted { session },
                |event, s| {
                    tracing::debug_span!("waitroom.admit", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("admitted"));
                },
            ),
            (
                &r.abandoned,
                |session| RoomEventKind::Abandoned { session },
                |event, s| {
                    tracing::debug_span!("waitroom.abandon", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("abandoned"));
                },
            ),
            (
                &r.expired,
                |session| RoomEventKind::Expired { session },
                |event, s| {
                    tracing::debug_span!("waitroom.expire", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("expired"));
                },
            ),
            (
                &r.turned_away,
                |session| RoomEventKind::TurnedAway { session },
                |event, s| {
                    tracing::debug_span!("waitroom.turn_away", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("turned away"));
                },
            ),
        ];
        let listening = self.inner.events.receiver_count() > 0;
        for (sessions, make, log) in kinds {
            for s in sessions {
                log(self.event(), s);
                if listening {
                    self.emit(make(s.clone()));
                }
            }
        }
    }

    /// Runs one round of the background work now: flushes liveness and touches, runs the admission tick, refreshes
    /// the shared numbers. Tests and rehearsals with a manual clock call this instead of waiting.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn tick_now(&self) -> Result<TickReport, StoreError> {
        self.run_once(true).await
    }

    async fn change(&self, change: SettingsChange) -> Result<Settings, StoreError> {
        let r = self.observe(self.inner.store.update(self.event(), &change).await);
        match &r {
            Ok(_) => tracing::info!(event = %self.event(), change = ?change, "settings changed"),
            Err(e) => {
                tracing::warn!(event = %self.event(), change = ?change, error = %e, "settings change failed")
            }
        }
        let s = r?;
        let _ = self.refresh().await;
        Ok(s)
    }

    /// Sets the capacity (every instance sharing the store sees it at its next refresh).
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn set_capacity(&self, capacity: u64) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Capacity { capacity }).await
    }

    /// Sets or clears the per-minute admission cap.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn set_admit_per_minute(
        &self,
        per_minute: Option<u64>,
    ) -> Result<Settings, StoreError> {
        self.change(SettingsChange::AdmitPerMinute { per_minute })
            .await
    }

    /// Pauses the door.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn pause(&self) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Pause).await
    }

    /// Resumes the door.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn resume(&self) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Resume).await
    }

    /// Opens the door now (with a random draw, the draw runs at the next tick).
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn open_now(&self) -> Result<Settings, StoreError> {
        self.change(SettingsChange::OpenNow {
            now_ms: self.now_ms(),
        })
        .await
    }

    /// Closes the on-sale, for good: nobody new joins (a join answers [`SessionState::TurnedAway`] and takes no
    /// place) or is let in, and the admission tick turns away everyone still in line or in the pre-queue
    /// ([`TURN_AWAY_PER_TICK`](crate::store::TURN_AWAY_PER_TICK) a tick; each hears "closed" at its next poll).
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn close(&self) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Close).await
    }

    /// Reports the seats: the door stops when none is available, lets in no more people within a minute than there
    /// are seats available, and the room turns sold out when all are sold. The counts are absolute and replace the
    /// last report; see [`finish`](Self::finish) for orders still on their way to the room.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn set_inventory(&self, inventory: Inventory) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Inventory { inventory }).await
    }
}
