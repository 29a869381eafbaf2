//! Finishing across processes through Redis (feature `redis`): [`RedisFinishSink`] records a finish where every
//! room instance reads it, and [`RedisFinishListener`] lets every verifier replica refuse a session finished on
//! another replica.
//!
//! # The contract with the room
//! This crate does not depend on the room. The two meet on the Redis keys of one on-sale, the ones the room's
//! `RedisStore` keeps (see its docs, "Finishing across processes"): `<prefix>:{<event>}:<part>`, where `<prefix>`
//! is the store's key prefix (default `wr`) and `<event>` the on-sale id, which is the tokens' audience (`aud`), so
//! the sink takes it from each [`Finish`]. The hash tag `{<event>}` keeps them in one cluster slot.
//!
//! The sink finishes the session exactly as the room's own finish does, in one script (`EVALSHA`, loaded when the
//! sink connects and again if Redis forgot it): when the session is admitted or active in the store it turns
//! finished, leaves the active count, and its seats count (orders, seats bought, the inventory's held seats move
//! to sold), so the active count drops at once and the next tick of any room instance may let the next person in.
//! Either way the script appends the finish to the on-sale's finish stream:
//!
//! ```text
//! XADD <prefix>:{<event>}:finished MAXLEN ~ 100000 * s <session> n <seats> t <ms> a 1
//! ```
//!
//! (`a 1`: applied already; a writer without this crate may append the entry without `a`, and the next room tick
//! applies it.) Every room instance reads the stream into its token deny list at its next tick, so a finished
//! session's token stops passing the room layer too, and [`RedisFinishListener`]s read it on the verifier
//! replicas. The script's Lua is the room store's ([`FINISH_LUA`], one definition for both).
//!
//! # Wiring
//! ```no_run
//! # async fn demo(verifier: waitroom_verify::Verifier) -> Result<(), Box<dyn std::error::Error>> {
//! use waitroom_verify::VerifyLayer;
//! use waitroom_verify::redis::{RedisFinishListener, RedisFinishSink};
//!
//! let url = "redis://127.0.0.1:6379/";
//! // Finishes made here go to the room (and to the other replicas)...
//! let sink = RedisFinishSink::connect(url).await?;
//! let layer = VerifyLayer::new(verifier.clone()).finish_sink(sink);
//! // ...and finishes made on other replicas are refused here within about a quarter of a second.
//! let listener = RedisFinishListener::spawn(verifier, url, "tour-2026")?;
//! # let _ = (layer, listener); Ok(()) }
//! ```
//!
//! # When Redis is down
//! The session is denied on the replica that finished it at once, whatever Redis does ([`Admission::finish`]
//! does that before the sink is called). The sink's write (the script, a reload included) is bounded by its
//! timeout (default 1 s); when it fails the failure is counted ([`RedisFinishSink::failed`]) and logged at most
//! once per 10 s, the response still leaves, and the room learns nothing: the session's place is freed when its
//! token's idle deadline passes instead. The script is atomic: the finish is applied and appended together, or not
//! at all.
//! The listener keeps reading where it stopped once Redis is back, and a listener that starts (or restarts) reads
//! back over the verifier's deny TTL, so it also refuses the sessions finished shortly before it started.
//!
//! [`Admission::finish`]: crate::Admission::finish

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{ErrorKind, RedisError, Script, ServerErrorKind, Value};
use http::HeaderMap;

use crate::admission::{Finish, FinishFuture, FinishSink};
use crate::log_gate::LogGate;
use crate::verifier::Verifier;

/// The default key prefix, the room store's: keys are `wr:{<event>}:<part>`.
pub const DEFAULT_KEY_PREFIX: &str = "wr";

/// About how many entries the finish stream keeps (`XADD … MAXLEN ~ 100000`), the same cap the room's store uses.
pub const FINISHED_STREAM_CAP: u64 = 100_000;

/// Most entries the listener reads in one call.
const READ_BATCH: u64 = 10_000;

/// The parts of the room store's key names (`<prefix>:{<event>}:<part>`) that a finish touches, in the order the
/// sink's script takes them as `KEYS` (bound to the Lua locals `KM`, `KS`, `KA`, `KF`): the on-sale's meta hash
/// (settings and counters), its session records, its active sessions (sorted by idle deadline) and its finish
/// stream. The room's `RedisStore` names its keys from these, so the two cannot drift apart.
#[doc(hidden)]
pub const FINISH_KEY_PARTS: [&str; 4] = ["meta", "sessions", "active", "finished"];

/// The Lua both the sink's script and the room store's scripts run to finish a session: the one definition of a
/// finish in Redis. It expects the locals `KM`, `KS`, `KA`, `KF` (the keys of [`FINISH_KEY_PARTS`]) in scope and
/// defines:
///
/// - `int(x)`, `fmt(n)`: a number from a reply (0 when none), an integer as text;
/// - `meta()`: the on-sale's meta hash as a table, `nil` when the on-sale was not initialised;
/// - `rec(sid)` / `put(sid, st, n, t)`: a session record (`<state><number>:<time>`) read and written;
/// - `inv(m)`: the inventory (total, sold, held), `nil` when none was reported;
/// - `finish(m, sid, seats)`: finishes an admitted or active session (it leaves the active count, the counters
///   and the inventory take its seats); `false` when it was neither;
/// - `announce(sid, seats, t, cap)`: appends the finish to the stream
///   (`XADD KF MAXLEN ~ cap * s sid n seats t t a 1`); `a 1` says the store has applied it already, so no tick
///   applies it again (an entry without `a`, from a bare `XADD`, is applied by the room's next tick).
#[doc(hidden)]
pub const FINISH_LUA: &str = r#"
local function int(x) return tonumber(x) or 0 end
local function fmt(n) return string.format('%d', n) end
local function meta()
  local r = redis.call('HGETALL', KM)
  if #r == 0 then return nil end
  local m = {}
  for i = 1, #r, 2 do m[r[i]] = r[i + 1] end
  return m
end
local function rec(sid)
  local v = redis.call('HGET', KS, sid)
  if not v then return nil end
  local c = string.find(v, ':', 2, true)
  if not c then return nil end
  return string.sub(v, 1, 1), int(string.sub(v, 2, c - 1)), int(string.sub(v, c + 1))
end
local function put(sid, st, n, t) redis.call('HSET', KS, sid, st .. fmt(n) .. ':' .. fmt(t)) end
local function inv(m)
  if m.inv == nil or m.inv == '' then return nil end
  local t, s, h = string.match(m.inv, '^(%d+):(%d+):(%d+)$')
  return int(t), int(s), int(h)
end
-- Finishes an admitted or active session; false when it was neither.
local function finish(m, sid, seats)
  local st, n = rec(sid)
  if st ~= 'a' and st ~= 'A' then return false end
  put(sid, 'f', n, 0)
  redis.call('ZREM', KA, sid)
  redis.call('HINCRBY', KM, 'finished', 1)
  if seats > 0 then
    redis.call('HINCRBY', KM, 'orders', 1)
    redis.call('HINCRBY', KM, 'seats', seats)
    local total, sold, held = inv(m)
    if total then
      sold = math.min(sold + seats, total)
      held = math.max(held - seats, 0)
      m.inv = fmt(total) .. ':' .. fmt(sold) .. ':' .. fmt(held)
      redis.call('HSET', KM, 'inv', m.inv)
    end
  end
  return true
end
-- Tells every room instance and verifier replica; `a 1`: applied to the store already.
local function announce(sid, seats, t, cap)
  redis.call('XADD', KF, 'MAXLEN', '~', cap, '*', 's', sid, 'n', fmt(seats), 't', t, 'a', '1')
end
"#;

/// The sink's script. ARGV: session, seats, when (ms), stream cap. Returns 1 when the session was admitted or
/// active (the store applied the finish), else 0; the entry is appended either way, for the verifier replicas.
const SINK_BODY: &str = r#"
local sid, seats = ARGV[1], int(ARGV[2])
local m = meta()
local applied = m ~= nil and finish(m, sid, seats)
announce(sid, seats, ARGV[3], ARGV[4])
if applied then return 1 end
return 0
"#;

/// The name of `event`'s finish stream under `prefix`: `<prefix>:{<event>}:finished`.
///
/// # Errors
/// [`RedisFinishError::Invalid`] when the prefix or the event contains `{` or `}` (the event is the hash tag), or
/// either is empty.
pub fn finished_stream_key(prefix: &str, event: &str) -> Result<String, RedisFinishError> {
    for (what, v) in [("key prefix", prefix), ("event id", event)] {
        if v.is_empty() {
            return Err(RedisFinishError::Invalid(format!("the {what} is empty")));
        }
        if v.contains(['{', '}']) {
            return Err(RedisFinishError::Invalid(format!(
                "the {what} `{v}` must not contain `{{` or `}}` (the event id is the hash tag)"
            )));
        }
    }
    Ok(format!("{prefix}:{{{event}}}:finished"))
}

/// The keys of [`FINISH_KEY_PARTS`] for `event` under `prefix`.
fn finish_keys(prefix: &str, event: &str) -> Result<[String; 4], RedisFinishError> {
    finished_stream_key(prefix, event)?;
    Ok(FINISH_KEY_PARTS.map(|part| format!("{prefix}:{{{event}}}:{part}")))
}

/// What can go wrong setting up or using the Redis finish sink or listener.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedisFinishError {
    /// A setting is unusable: a malformed URL, a brace in the prefix or event id, a zero timeout or interval.
    #[error("invalid Redis finish settings: {0}")]
    Invalid(String),
    /// Redis could not be reached, did not answer within the timeout, or refused the command.
    #[error("Redis unavailable: {0}")]
    Unavailable(String),
}

fn unavailable(e: RedisError) -> RedisFinishError {
    RedisFinishError::Unavailable(e.to_string())
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Connection settings shared by the sink and the listener.
#[derive(Clone)]
struct Conn {
    url: String,
    key_prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
}

impl Conn {
    fn new(url: String) -> Self {
        Self {
            url,
            key_prefix: DEFAULT_KEY_PREFIX.into(),
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
        }
    }

    fn check(&self) -> Result<::redis::Client, RedisFinishError> {
        finished_stream_key(&self.key_prefix, "check")?;
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(RedisFinishError::Invalid(
                "the timeouts must be longer than zero".into(),
            ));
        }
        ::redis::Client::open(self.url.as_str())
            .map_err(|e| RedisFinishError::Invalid(format!("invalid Redis URL: {e}")))
    }

    /// Connects (multiplexed, reconnecting), bounded by twice the connect timeout.
    async fn connect(
        &self,
        client: ::redis::Client,
    ) -> Result<ConnectionManager, RedisFinishError> {
        connect_with_timeout(client, self.connect_timeout, self.timeout)
            .await
            .map_err(unavailable)
    }
}

/// Opens a multiplexed, reconnecting connection: the one way this crate's sink and listener and the room's
/// `RedisStore` connect to Redis. Each attempt to (re)connect is bounded by `connect_timeout`, each answer by
/// `response_timeout`; a dropped connection is retried once (50 to 500 ms apart) before a call fails; the first
/// connect as a whole is bounded by twice `connect_timeout`.
///
/// # Errors
/// Redis's error when it cannot be reached, or an I/O error of kind [`TimedOut`](std::io::ErrorKind::TimedOut)
/// ("Redis did not accept a connection within …") when the first connect outlasts its bound.
#[doc(hidden)]
pub async fn connect_with_timeout(
    client: ::redis::Client,
    connect_timeout: Duration,
    response_timeout: Duration,
) -> Result<ConnectionManager, RedisError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(Some(response_timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500));
    let limit = connect_timeout * 2;
    match tokio::time::timeout(limit, ConnectionManager::new_with_config(client, config)).await {
        Ok(r) => r,
        Err(_) => Err(RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("Redis did not accept a connection within {limit:?}"),
        ))),
    }
}

/// Sends one command over `conn`, bounded by `timeout`.
async fn send(
    conn: &ConnectionManager,
    cmd: &::redis::Cmd,
    timeout: Duration,
) -> Result<Value, RedisFinishError> {
    let mut conn = conn.clone();
    match tokio::time::timeout(timeout, cmd.query_async::<Value>(&mut conn)).await {
        Ok(r) => r.map_err(unavailable),
        Err(_) => Err(RedisFinishError::Unavailable(format!(
            "Redis did not answer within {timeout:?}"
        ))),
    }
}

// ---- The sink ----

/// A [`FinishSink`] that finishes the session in the room's Redis store and records it in the on-sale's finish
/// stream, in one script (see the module docs): the place is free and the seats count at once, the room instances
/// sharing that Redis refuse the session's token from their next tick, and [`RedisFinishListener`]s on other
/// verifier replicas refuse it too.
///
/// Cheap to clone: clones share the connection (multiplexed, reconnecting) and the counters. It adds no response
/// header; the write starts inside [`FinishSink::finish`] on the current Tokio runtime, and the response waits for
/// it (at most the timeout). A finish made after the response left is still written.
#[derive(Clone)]
pub struct RedisFinishSink {
    conn: ConnectionManager,
    prefix: Arc<str>,
    timeout: Duration,
    counts: Arc<SinkCounts>,
    script: Arc<SinkScript>,
}

/// The sink's script: its code (for `SCRIPT LOAD`) and SHA1 (for `EVALSHA`).
#[derive(Debug)]
struct SinkScript {
    code: String,
    sha: String,
}

impl SinkScript {
    fn new() -> Self {
        let code = format!(
            "local KM, KS, KA, KF = KEYS[1], KEYS[2], KEYS[3], KEYS[4]\n{FINISH_LUA}\n{SINK_BODY}"
        );
        let sha = Script::new(&code).get_hash().to_owned();
        Self { code, sha }
    }
}

#[derive(Debug, Default)]
struct SinkCounts {
    recorded: AtomicU64,
    failed: AtomicU64,
    log: LogGate,
}

impl fmt::Debug for RedisFinishSink {
    // The connection is left out: its URL may carry a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFinishSink")
            .field("key_prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("recorded", &self.recorded())
            .field("failed", &self.failed())
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisFinishSink`]. Start from [`RedisFinishSink::builder`].
#[must_use = "a builder does nothing until `connect` is called"]
#[derive(Clone)]
pub struct RedisFinishSinkBuilder {
    conn: Conn,
}

impl fmt::Debug for RedisFinishSinkBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFinishSinkBuilder")
            .field("url", &"<redacted>")
            .field("key_prefix", &self.conn.key_prefix)
            .field("timeout", &self.conn.timeout)
            .field("connect_timeout", &self.conn.connect_timeout)
            .finish()
    }
}

impl RedisFinishSinkBuilder {
    /// The key prefix, the room store's (default `wr`). Must not contain `{` or `}`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.conn.key_prefix = prefix.into();
        self
    }

    /// How long one write may take before it counts as failed (default 1 s). The response waits at most this long.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.conn.timeout = d;
        self
    }

    /// How long one attempt to (re)connect may take (default 1 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.conn.connect_timeout = d;
        self
    }

    /// Connects.
    ///
    /// # Errors
    /// [`RedisFinishError::Invalid`] for a malformed URL, a brace in the prefix or a zero timeout;
    /// [`RedisFinishError::Unavailable`] when Redis cannot be reached within the timeouts.
    pub async fn connect(self) -> Result<RedisFinishSink, RedisFinishError> {
        let client = self.conn.check()?;
        let conn = self.conn.connect(client).await?;
        let script = SinkScript::new();
        // Loaded once here; a Redis that forgets it (a restart) gets it again on the first `NOSCRIPT`.
        let mut load = ::redis::cmd("SCRIPT");
        load.arg("LOAD").arg(&script.code);
        send(&conn, &load, self.conn.timeout).await?;
        Ok(RedisFinishSink {
            conn,
            prefix: self.conn.key_prefix.into(),
            timeout: self.conn.timeout,
            counts: Arc::default(),
            script: Arc::new(script),
        })
    }
}

impl RedisFinishSink {
    /// Connects to `url` (`redis://[:password@]host:port/[db]`) with the defaults: prefix `wr`, 1 s timeouts.
    ///
    /// # Errors
    /// See [`RedisFinishSinkBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, RedisFinishError> {
        Self::builder(url).connect().await
    }

    /// Starts building a sink for the Redis at `url`.
    pub fn builder(url: impl Into<String>) -> RedisFinishSinkBuilder {
        RedisFinishSinkBuilder {
            conn: Conn::new(url.into()),
        }
    }

    /// The key prefix.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// Finishes written so far.
    #[must_use]
    pub fn recorded(&self) -> u64 {
        self.counts.recorded.load(Ordering::Relaxed)
    }

    /// Finishes that could not be written (Redis down or too slow, or an event id with a brace).
    #[must_use]
    pub fn failed(&self) -> u64 {
        self.counts.failed.load(Ordering::Relaxed)
    }

    /// Writes one finish now, with `<event>` the finish's on-sale: in one script, the session (when admitted or
    /// active in the store) turns finished, leaves the active count and its seats count, and the finish is
    /// appended to the stream (`XADD <prefix>:{<event>}:finished MAXLEN ~ 100000 * s <session> n <seats> t <ms>
    /// a 1`). [`FinishSink::finish`] calls this; call it directly to record a finish made outside the verify
    /// layer.
    ///
    /// # Errors
    /// [`RedisFinishError::Invalid`] when the event id contains a brace; [`RedisFinishError::Unavailable`] when
    /// Redis did not take the entry within the timeout. Either way the failure is counted in
    /// [`failed`](Self::failed) and logged (at most once per 10 s).
    pub async fn record(&self, finish: &Finish) -> Result<(), RedisFinishError> {
        let r = self.write(finish).await;
        match &r {
            Ok(()) => {
                self.counts.recorded.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
                if self.counts.log.due() {
                    tracing::warn!(session = %crate::session::fingerprint(&finish.session_id), event = %finish.event, error = %e,
                        "could not record a finish in Redis; the room frees the place when the session idles out");
                }
            }
        }
        r
    }

    async fn write(&self, finish: &Finish) -> Result<(), RedisFinishError> {
        let keys = finish_keys(&self.prefix, &finish.event)?;
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(&self.script.sha).arg(keys.len());
        for k in &keys {
            cmd.arg(k);
        }
        cmd.arg(&finish.session_id)
            .arg(finish.seats)
            .arg(finish.at_ms)
            .arg(FINISHED_STREAM_CAP);
        let run = async {
            let mut conn = self.conn.clone();
            match cmd.query_async::<Value>(&mut conn).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    let mut load = ::redis::cmd("SCRIPT");
                    load.arg("LOAD").arg(&self.script.code);
                    load.query_async::<Value>(&mut conn).await?;
                    cmd.query_async::<Value>(&mut conn).await
                }
                r => r,
            }
        };
        // One bound for the whole write, a reload included.
        match tokio::time::timeout(self.timeout, run).await {
            Ok(r) => r.map(|_| ()).map_err(unavailable),
            Err(_) => Err(RedisFinishError::Unavailable(format!(
                "Redis did not answer within {:?}",
                self.timeout
            ))),
        }
    }
}

impl FinishSink for RedisFinishSink {
    fn finish(&self, finish: &Finish, _response_headers: &mut HeaderMap) -> Option<FinishFuture> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.counts.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(session = %crate::session::fingerprint(&finish.session_id), "a Redis finish outside a Tokio runtime was dropped");
            return None;
        };
        // Spawned, so the write survives a response future that is dropped (see the sink contract).
        let sink = self.clone();
        let finish = finish.clone();
        let task = runtime.spawn(async move {
            let _ = sink.record(&finish).await;
        });
        Some(Box::pin(async move {
            let _ = task.await;
        }))
    }
}

// ---- The listener ----

/// Reads an on-sale's finish stream and denies every session in it on a [`Verifier`], so a verifier replica
/// refuses a session finished on another replica (or by the room) within about one poll interval (default
/// 250 ms).
///
/// It polls with `XRANGE <key> (<last id> + COUNT 10000` on its own connection (4 commands a second by default,
/// whatever the traffic). On start it reads back over the verifier's deny TTL (the longest a finished session's
/// token can still be valid), so a replica that starts late still refuses the sessions finished before it. Redis
/// being down is logged at most once per 10 s; reading resumes where it stopped.
///
/// The task stops when the listener is dropped (or [`stop`](Self::stop)ped).
#[derive(Debug)]
pub struct RedisFinishListener {
    task: tokio::task::JoinHandle<()>,
    state: Arc<ListenerState>,
}

#[derive(Debug, Default)]
struct ListenerState {
    denied: AtomicU64,
    connected: AtomicBool,
    caught_up: AtomicBool,
}

/// Builds a [`RedisFinishListener`]. Start from [`RedisFinishListener::builder`].
#[must_use = "a builder does nothing until `spawn` is called"]
#[derive(Clone)]
pub struct RedisFinishListenerBuilder {
    conn: Conn,
    event: String,
    poll_interval: Duration,
    lookback: Option<Duration>,
}

impl fmt::Debug for RedisFinishListenerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFinishListenerBuilder")
            .field("url", &"<redacted>")
            .field("event", &self.event)
            .field("key_prefix", &self.conn.key_prefix)
            .field("poll_interval", &self.poll_interval)
            .field("lookback", &self.lookback)
            .finish()
    }
}

impl RedisFinishListenerBuilder {
    /// The key prefix, the room store's (default `wr`). Must not contain `{` or `}`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.conn.key_prefix = prefix.into();
        self
    }

    /// How often to read the stream (default 250 ms, the room's tick): the longest a finish elsewhere takes to be
    /// refused here, plus one round trip.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.poll_interval = d;
        self
    }

    /// How far back to read at start (default: the verifier's deny TTL).
    pub fn lookback(mut self, d: Duration) -> Self {
        self.lookback = Some(d);
        self
    }

    /// How long one read may take (default 1 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.conn.timeout = d;
        self
    }

    /// How long one attempt to (re)connect may take (default 1 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.conn.connect_timeout = d;
        self
    }

    /// Starts the listener on the current Tokio runtime; it connects in the background (and keeps trying while
    /// Redis is down), so a replica can start before Redis.
    ///
    /// # Errors
    /// [`RedisFinishError::Invalid`] for a malformed URL, a brace in the prefix or event id, or a zero timeout or
    /// interval.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn(self, verifier: Verifier) -> Result<RedisFinishListener, RedisFinishError> {
        let client = self.conn.check()?;
        let key = finished_stream_key(&self.conn.key_prefix, &self.event)?;
        if self.poll_interval.is_zero() {
            return Err(RedisFinishError::Invalid(
                "the poll interval must be longer than zero".into(),
            ));
        }
        let lookback = self.lookback.unwrap_or_else(|| verifier.deny_ttl());
        let state = Arc::new(ListenerState::default());
        let run = Run {
            conn: self.conn,
            client,
            key,
            every: self.poll_interval,
            lookback,
            verifier,
            state: Arc::clone(&state),
            log: LogGate::default(),
        };
        let task = tokio::spawn(run.run());
        Ok(RedisFinishListener { task, state })
    }
}

impl RedisFinishListener {
    /// Starts a listener with the defaults (prefix `wr`, 250 ms, 1 s timeouts): every session finished in
    /// `event`'s stream at the Redis at `url` is denied on `verifier`.
    ///
    /// # Errors
    /// See [`RedisFinishListenerBuilder::spawn`].
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn(verifier: Verifier, url: &str, event: &str) -> Result<Self, RedisFinishError> {
        Self::builder(url, event).spawn(verifier)
    }

    /// Starts building a listener for `event`'s finish stream at the Redis at `url`.
    pub fn builder(url: impl Into<String>, event: impl Into<String>) -> RedisFinishListenerBuilder {
        RedisFinishListenerBuilder {
            conn: Conn::new(url.into()),
            event: event.into(),
            poll_interval: Duration::from_millis(250),
            lookback: None,
        }
    }

    /// Sessions denied so far (each entry read counts once).
    #[must_use]
    pub fn denied(&self) -> u64 {
        self.state.denied.load(Ordering::Relaxed)
    }

    /// Whether the last read succeeded.
    #[must_use]
    pub fn is_connected(&self) -> bool {
        self.state.connected.load(Ordering::Relaxed)
    }

    /// Whether the listener has read everything that was in the stream at some point (it is then at most one poll
    /// interval behind).
    #[must_use]
    pub fn is_caught_up(&self) -> bool {
        self.state.caught_up.load(Ordering::Relaxed)
    }

    /// Stops the listener.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for RedisFinishListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Run {
    conn: Conn,
    client: ::redis::Client,
    key: String,
    every: Duration,
    lookback: Duration,
    verifier: Verifier,
    state: Arc<ListenerState>,
    log: LogGate,
}

impl Run {
    fn failed(&self, e: &RedisFinishError) {
        self.state.connected.store(false, Ordering::Relaxed);
        if self.log.due() {
            tracing::warn!(stream = %self.key, error = %e,
                "cannot read finishes from Redis; sessions finished on other replicas are not refused meanwhile");
        }
    }

    async fn run(self) {
        let mut interval = tokio::time::interval(self.every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first read is inclusive from the lookback; later ones exclusive from the last id.
        let mut cursor = format!(
            "{}-0",
            wall_ms().saturating_sub(self.lookback.as_millis() as u64)
        );
        let mut inclusive = true;
        let mut conn = None;
        loop {
            interval.tick().await;
            let c = match &conn {
                Some(c) => c,
                None => match self.conn.connect(self.client.clone()).await {
                    Ok(c) => conn.insert(c),
                    Err(e) => {
                        self.failed(&e);
                        continue;
                    }
                },
            };
            // Read until a batch comes back short: catching up after start or an outage takes one tick.
            loop {
                let start = if inclusive {
                    cursor.clone()
                } else {
                    format!("({cursor}")
                };
                let mut cmd = ::redis::cmd("XRANGE");
                cmd.arg(&self.key)
                    .arg(start)
                    .arg("+")
                    .arg("COUNT")
                    .arg(READ_BATCH);
                match send(c, &cmd, self.conn.timeout).await.and_then(entries) {
                    Ok(batch) => {
                        if !self.state.connected.swap(true, Ordering::Relaxed) {
                            tracing::debug!(stream = %self.key, "reading finishes from Redis");
                        }
                        let read = batch.len() as u64;
                        if let Some((last, _)) = batch.last() {
                            cursor.clone_from(last);
                            inclusive = false;
                        }
                        for session in batch.iter().filter_map(|(_, s)| s.as_deref()) {
                            self.verifier.deny_session(session);
                            self.state.denied.fetch_add(1, Ordering::Relaxed);
                        }
                        if read < READ_BATCH {
                            self.state.caught_up.store(true, Ordering::Relaxed);
                            break;
                        }
                    }
                    Err(e) => {
                        self.failed(&e);
                        break;
                    }
                }
            }
        }
    }
}

/// Parses an `XRANGE` reply into (entry id, session) pairs; an entry without an `s` field has no session.
type Entries = Vec<(String, Option<String>)>;

fn entries(v: Value) -> Result<Entries, RedisFinishError> {
    let bad =
        |what: &str| RedisFinishError::Unavailable(format!("unexpected XRANGE reply: {what}"));
    let Value::Array(items) = v else {
        return Err(bad("not an array"));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Value::Array(pair) = item else {
            return Err(bad("an entry that is not an array"));
        };
        let [id, fields] = pair.as_slice() else {
            return Err(bad("an entry of the wrong length"));
        };
        let id = text(id).ok_or_else(|| bad("an entry id that is not text"))?;
        let fields = match fields {
            Value::Array(f) => f.as_slice(),
            _ => return Err(bad("entry fields that are not an array")),
        };
        let session = fields.chunks(2).find_map(|kv| match kv {
            [k, v] if text(k).as_deref() == Some("s") => text(v),
            _ => None,
        });
        // The cursor moves past every entry, even one without a session.
        out.push((id, session));
    }
    Ok(out)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}
