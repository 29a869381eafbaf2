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

use ::redis::{ErrorKind, RedisError, Script, ServerErrorKind, Value};
use http::HeaderMap;

use crate::admission::{Finish, FinishFuture, FinishSink};
use crate::log_gate::LogGate;
use crate::verifier::Verifier;

mod conn;
mod listener;
mod sink;

pub use conn::{RedisConnection, RedisTarget, connect};

pub use listener::{RedisFinishListener, RedisFinishListenerBuilder};
pub use sink::{RedisFinishSink, RedisFinishSinkBuilder};

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
/// - `rec(sid)` / `put(sid, st, n, t)`: a session record read and written (12 bytes: the state's byte, the number
///   and a time in ms, big-endian in 5 and 6 bytes). A record that ends (`f`, `e`, `x`, `X`, `t`) leaves the
///   `sessions` hash for the hash of the time slot it ended in (`<sessions key>:<slot start ms>`, under Redis expiry),
///   its time the end (`NOW`: the script's own `now`, else the room's clock as of the last tick, `meta.tnow`);
///   `rec` reads it from there while it is younger than `meta.keep` (the return window, at least an abandon grace)
///   by `REF` (`meta.tnow`), and after that the session is unknown (forgotten);
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
-- The room's clock as of the last tick (`meta.tnow`: records are forgotten by it, as the embedded store forgets them
-- at its ticks), how long an ended record is kept (`meta.keep`, written by the tick: the return window, at least an
-- abandon grace), and when a record ending now ends (the script's own `now` where it has one, else REF); set by
-- meta().
local REF, KEEP, NOW = 0, nil, 0
local function meta()
  local r = redis.call('HGETALL', KM)
  if #r == 0 then return nil end
  local m = {}
  for i = 1, #r, 2 do m[r[i]] = r[i + 1] end
  -- No settings: a hash a lone counter command made after Redis lost the on-sale (the room's `line_tickets`).
  if m.cap == nil then return nil end
  REF, KEEP = int(m.tnow), tonumber(m.keep)
  NOW = REF
  return m
end
-- A record is 12 bytes (Redis keeps it in its 16-byte allocation): the state's byte, the number (5 bytes) and a
-- time in ms (6 bytes), big-endian.
local function unpacked(v)
  if not v or #v ~= 12 then return nil end
  local n, t = struct.unpack('>I5>I6', v, 2)
  return string.sub(v, 1, 1), n, t
end
-- Ended records live in the hash of the slot they ended in: slots of a quarter of `keep` (at least 1 s), each
-- expiring (Redis's clock) two slots after `keep` from its last write, so nothing sweeps them.
local function ended_slot() return math.max(math.ceil((KEEP or 600000) / 4), 1000) end
local function ended_key(s, len) return KS .. ':' .. fmt(s * len) end
local function rec(sid)
  local v = redis.call('HGET', KS, sid)
  if v then return unpacked(v) end
  if not KEEP then return nil end
  -- The newest slot that holds it has its last ending; kept while younger than `keep` by REF.
  local len = ended_slot()
  for s = math.floor(REF / len) + 1, math.floor((REF - KEEP) / len), -1 do
    v = redis.call('HGET', ended_key(s, len), sid)
    if v then
      local st, n, t = unpacked(v)
      if st and t + KEEP > REF then return st, n, t end
      return nil
    end
  end
  return nil
end
local function terminal(st) return st == 'f' or st == 'e' or st == 'x' or st == 'X' or st == 't' end
-- An ended record, ended at `at`: out of `sessions`, into its slot's hash (at most the slot after REF's, where
-- `rec` looks, for a script whose clock is ahead of the last tick's; kept longer by as much).
local function ended(sid, st, n, at)
  redis.call('HDEL', KS, sid)
  local len = ended_slot()
  local key = ended_key(math.min(math.floor(at / len), math.floor(REF / len) + 1), len)
  redis.call('HSET', key, sid, st .. struct.pack('>I5>I6', n, at))
  local ttl = (KEEP or 600000) + 2 * len + math.max(at - REF, 0)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, fmt(ttl)) end
end
-- Writes a record; an ending (a terminal state) ends at NOW, whatever `t` says.
local function put(sid, st, n, t)
  if terminal(st) then return ended(sid, st, n, NOW) end
  redis.call('HSET', KS, sid, st .. struct.pack('>I5>I6', n, t))
end
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
    target: RedisTarget,
    key_prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
}

impl Conn {
    fn new(target: RedisTarget) -> Self {
        Self {
            target,
            key_prefix: DEFAULT_KEY_PREFIX.into(),
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
        }
    }

    fn check(&self) -> Result<(), RedisFinishError> {
        finished_stream_key(&self.key_prefix, "check")?;
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(RedisFinishError::Invalid(
                "the timeouts must be longer than zero".into(),
            ));
        }
        self.target.check().map_err(RedisFinishError::Invalid)
    }

    /// Connects (multiplexed, following failovers), bounded by twice the connect timeout.
    async fn connect(&self) -> Result<RedisConnection, RedisFinishError> {
        connect(&self.target, self.connect_timeout, self.timeout)
            .await
            .map_err(unavailable)
    }
}

/// Sends one command over `conn`, bounded by `timeout`.
async fn send(
    conn: &RedisConnection,
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
