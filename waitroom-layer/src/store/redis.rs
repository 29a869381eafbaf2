//! The shared store: one line for many room instances, in Redis (or Valkey). See [`RedisStore`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{ErrorKind, RedisError, Script, ServerErrorKind, Value};
use async_trait::async_trait;

use super::{
    Counters, Inventory, Join, Placement, SessionState, Settings, SettingsChange, Snapshot, Store,
    TURN_AWAY_PER_TICK, Tick, TickReport, Touches,
};
use crate::error::StoreError;
use waitroom_verify::redis::{FINISH_KEY_PARTS, FINISH_LUA};

/// Most sessions in one `touch` command (a liveness `BITFIELD` or `HSET`, or an active-session script call); a bigger
/// batch is split so no single command holds Redis for long.
pub const TOUCH_CHUNK: usize = 5_000;

/// About how many finishes the `finished` stream keeps (`XADD … MAXLEN ~`): minutes of finishes at the seed's pace,
/// far more than a reader a second behind needs.
const FINISHED_CAP: u64 = 100_000;

/// Most finishes one [`Store::finished_since`] call returns.
const FINISHED_BATCH: u64 = 10_000;

/// The key names every script starts with (`KEYS` in the order of [`KEY_PARTS`]).
const KEYS_LUA: &str = "local KM, KS, KL, KD, KA, KC, KR, KP, KF, KN, KQ = KEYS[1], KEYS[2], KEYS[3], KEYS[4], \
    KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]";

/// The code shared by every script, after the keys and the finish (`int`, `fmt`, `meta`, `rec`, `put`, `inv`,
/// `finish`, `announce`: `waitroom_verify::redis::FINISH_LUA`, one definition for the room and the verifier's
/// finish sink): record packing, the lazy numbering of the drawn segment, the draw.
const PRELUDE: &str = r#"
local NOEVENT = 'WRNOEVENT the on-sale was not initialised'
-- A pre-queued session's record holds its draw bucket where others hold their number. After the draw its number
-- is implicit: where its bucket starts in the drawn segment, plus how many of the bucket already left the head,
-- plus its rank in what is left.
local function bucket(b) return KD .. ':' .. fmt(b) end
local function place(m, sid)
  local st, n, t = rec(sid)
  if not st then return nil end
  if st == 'p' then
    local b = n
    n = 0
    if m.drawn == '1' then
      local key = bucket(b)
      local r = redis.call('ZRANK', key, sid)
      if r then
        local lo, hi = struct.unpack('>I4>I4', redis.call('GETRANGE', KP, 4 * b, 4 * b + 7))
        n = int(m.dbase) + lo + (hi - lo - redis.call('ZCARD', key)) + r + 1
        st = 'w'
      end
    end
  end
  return {sid, st, n, t}
end
local function out(p) return {p[1], p[2], p[3]} end
local function terminal(st) return st == 'f' or st == 'e' or st == 'x' or st == 't' end
-- Closed or sold out: joins take no place, the tick turns away whoever is still in line.
local function turning_away(m)
  if m.closed == '1' then return true end
  local total, sold = inv(m)
  return total ~= nil and total > 0 and sold >= total
end
local function draw_due(m, now) return m.drawn ~= '1' and (m.opens == '' or now >= int(m.opens)) end
-- The draw: freeze the buckets and write where each starts (2^dbits + 1 big-endian u32s). No session is touched.
-- A draw before the opening first configured (the door opened early) counts every drawn session as seen now
-- (`dfloor`): rooms mark pre-queue polls only shortly before the scheduled opening.
local function draw(m, now)
  local parts, c = {}, 0
  for b = 0, 2 ^ int(m.dbits) - 1 do
    parts[#parts + 1] = struct.pack('>I4', c)
    c = c + redis.call('ZCARD', bucket(b))
  end
  parts[#parts + 1] = struct.pack('>I4', c)
  redis.call('SET', KP, table.concat(parts))
  local last = int(m.last)
  m.drawn, m.dbase, m.dcount, m.last = '1', fmt(last), fmt(c), fmt(last + c)
  m.dfloor = (m.sched == nil or m.sched == '' or now < int(m.sched)) and fmt(now) or ''
  redis.call('HSET', KM, 'drawn', '1', 'dbase', m.dbase, 'dcount', m.dcount, 'last', m.last, 'dfloor', m.dfloor)
end
local function settings(m) return {m.cap, m.apm, m.paused, m.closed, m.opens, m.random, m.inv} end
"#;

/// ARGV: cap, apm, paused, closed, opens, random, inv, draw bucket bits.
const INIT: &str = r#"
if redis.call('EXISTS', KM) == 0 then
  redis.call('HSET', KM, 'cap', ARGV[1], 'apm', ARGV[2], 'paused', ARGV[3], 'closed', ARGV[4],
    'opens', ARGV[5], 'sched', ARGV[5], 'random', ARGV[6], 'inv', ARGV[7], 'drawn', (ARGV[6] == '1') and '0' or '1',
    'dbase', '0', 'dcount', '0', 'last', '0', 'served', '0', 'joined', '0', 'admitted', '0',
    'finished', '0', 'expired', '0', 'abandoned', '0', 'turned', '0', 'orders', '0', 'seats', '0', 'dbits', ARGV[8],
    'fcur', '0-0')
end
return settings(meta())
"#;

/// ARGV: session, account ('' for none), now, draw key (16 hex digits).
const JOIN: &str = r#"
local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, acct, now = ARGV[1], ARGV[2], int(ARGV[3])
if acct ~= '' then
  local owner = redis.call('HGET', KC, acct)
  if owner then
    local p = place(m, owner)
    if p and not terminal(p[2]) then return out(p) end
  end
end
local p = place(m, sid)
if p and not terminal(p[2]) then return out(p) end
-- Closed or sold out: no place, nothing recorded, not counted.
if turning_away(m) then return {sid, 't', 0} end
if draw_due(m, now) then draw(m, now) end
local st, n = 'p', 0
if m.drawn == '1' then
  st, n = 'w', int(m.last) + 1
  redis.call('HSET', KM, 'last', fmt(n))
  redis.call('RPUSH', KL, sid)
else
  -- The key's top `dbits` bits pick the bucket; the rest of its top 53 bits (exact in a double) order it there.
  local bits = int(m.dbits)
  local top = tonumber(string.sub(ARGV[4], 1, 4), 16)
  local low = tonumber(string.sub(ARGV[4], 5, 16), 16)
  local b = math.floor(top / 2 ^ (16 - bits))
  local score = (top % 2 ^ (16 - bits)) * 2 ^ 37 + math.floor(low / 2048)
  redis.call('ZADD', bucket(b), score, sid)
  n = b
end
put(sid, st, n, now)
if st == 'p' then n = 0 end
if acct ~= '' then redis.call('HSET', KC, acct, sid) end
redis.call('HINCRBY', KM, 'joined', 1)
return {sid, st, n}
"#;

/// ARGV: session.
const LOOKUP: &str = r#"
local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local p = place(m, ARGV[1])
if not p then return false end
return out(p)
"#;

/// ARGV: session, now, idle timeout.
const CLAIM: &str = r#"
local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, now, idle = ARGV[1], int(ARGV[2]), int(ARGV[3])
local p = place(m, sid)
if not p then return false end
if p[2] == 'a' or p[2] == 'A' then
  put(sid, 'A', p[3], 0)
  redis.call('ZADD', KA, 'XX', 'GT', fmt(now + idle), sid)
  p[2] = 'A'
end
return out(p)
"#;

/// ARGV: now, idle timeout, the active sessions. (Waiting sessions' liveness marks are not scripted: see
/// [`RedisStore::touch`].)
const TOUCH: &str = r#"
if redis.call('EXISTS', KM) == 0 then return redis.error_reply(NOEVENT) end
local now, idle = int(ARGV[1]), int(ARGV[2])
local deadline = fmt(now + idle)
for i = 3, #ARGV do
  local sid = ARGV[i]
  if rec(sid) == 'A' then redis.call('ZADD', KA, 'XX', 'GT', deadline, sid) end
end
return 1
"#;

/// ARGV: now, arrival window, abandon after, max scan, seen slot length, most sessions turned away.
const TICK: &str = r#"
local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local now, arrival, abandon, maxscan, slot = int(ARGV[1]), int(ARGV[2]), int(ARGV[3]), int(ARGV[4]), int(ARGV[5])
local turnmax = int(ARGV[6])
-- Whether session sid, number n, polled within the grace: its bit in one of the `seen` slots covering
-- [now - abandon, now] (rounded out to whole slots, in the session's favour), or its mark in `pseen` (pre-queue).
local function seen(sid, n)
  for s = math.floor(now / slot), math.floor((now - abandon) / slot), -1 do
    if redis.call('GETBIT', KN .. ':' .. fmt(s), n) == 1 then return true end
  end
  return int(redis.call('HGET', KQ, sid)) + abandon >= now
end
local drew = 0
if draw_due(m, now) then draw(m, now); drew = 1 end
-- Finishes recorded by others as bare stream entries since the last tick: they leave the active count now.
local fcur = m.fcur or '0-0'
local fin = redis.call('XRANGE', KF, '(' .. fcur, '+', 'COUNT', 1000)
if #fin > 0 then
  for _, e in ipairs(fin) do
    local f = {}
    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
    -- `a 1`: the writer applied it already (the room's finish, the verifier's sink script).
    if f.s and f.a ~= '1' then finish(m, f.s, int(f.n)) end
  end
  redis.call('HSET', KM, 'fcur', fin[#fin][1])
end
local expired = redis.call('ZRANGEBYSCORE', KA, '-inf', fmt(now))
if #expired > 0 then
  for _, sid in ipairs(expired) do
    local st, n = rec(sid)
    if st then put(sid, 'e', n, 0) end
  end
  redis.call('ZREMRANGEBYSCORE', KA, '-inf', fmt(now))
  redis.call('HINCRBY', KM, 'expired', #expired)
end
local admitted, abandoned, turned = {}, {}, {}
local served, last = int(m.served), int(m.last)
local dlo = int(m.dbase)
local dhi = dlo + int(m.dcount)
local drawn = m.drawn == '1'
local index, cur, cur_end = nil, -1, -1
local function starts(b) return (struct.unpack('>I4', index, 4 * b + 1)) end
-- Takes the session numbered n (the next at the head) off the line: in the drawn segment, the first of the bucket
-- holding position n (found by binary search in `drawidx`); after it, the front of `line`.
local function pop(n)
  if drawn and n > dlo and n <= dhi then
    local pos = n - dlo - 1
    if pos >= cur_end then
      index = index or redis.call('GET', KP)
      local lo, hi = 0, 2 ^ int(m.dbits) - 1
      while lo < hi do
        local mid = math.floor((lo + hi + 1) / 2)
        if starts(mid) <= pos then lo = mid else hi = mid - 1 end
      end
      cur, cur_end = lo, starts(lo + 1)
    end
    return redis.call('ZPOPMIN', bucket(cur))[1]
  end
  return redis.call('LPOP', KL)
end
if turning_away(m) then
  -- Closed or sold out: turn away up to `turnmax` sessions, the head of the line first (each number counts as
  -- served, as a skip does), then the pre-queue (before the draw every join is in a bucket, so the pre-queue holds
  -- `joined - turned` sessions; empty buckets are passed over, at most 2^dbits of them per tick).
  local budget = turnmax
  while budget > 0 and served < last do
    local n = served + 1
    local sid = pop(n)
    if not sid then break end
    served = n
    budget = budget - 1
    if rec(sid) then
      put(sid, 't', n, 0)
      turned[#turned + 1] = sid
    end
  end
  if not drawn then
    local pq = int(m.joined) - int(m.turned)
    local b, nb = 0, 2 ^ int(m.dbits)
    while budget > 0 and pq > 0 and b < nb do
      local z = redis.call('ZPOPMIN', bucket(b), math.min(budget, pq))
      for i = 1, #z, 2 do
        put(z[i], 't', 0, 0)
        turned[#turned + 1] = z[i]
        budget, pq = budget - 1, pq - 1
      end
      b = b + 1
    end
  end
  if served ~= int(m.served) then redis.call('HSET', KM, 'served', fmt(served)) end
  if #turned > 0 then redis.call('HINCRBY', KM, 'turned', #turned) end
  return {drew, admitted, abandoned, expired, turned}
end
local open = m.paused ~= '1' and m.closed ~= '1' and (m.opens == '' or now >= int(m.opens))
local total, sold, held = inv(m)
if open and total and total <= sold + held then open = false end
if not open then return {drew, admitted, abandoned, expired, turned} end
local room = int(m.cap) - redis.call('ZCARD', KA)
local now_s = math.floor(now / 1000)
local recent = 0
local r = redis.call('HGETALL', KR)
for i = 1, #r, 2 do
  if int(r[i]) + 60 <= now_s then redis.call('HDEL', KR, r[i]) else recent = recent + int(r[i + 1]) end
end
if m.apm ~= '' then room = math.min(room, int(m.apm) - recent) end
-- Never more people let in within a minute than there are seats to pick from.
if total then room = math.min(room, total - sold - held - recent) end
local scanned, nadm = 0, 0
while nadm < room and scanned < maxscan and served < last do
  local n = served + 1
  local sid = pop(n)
  if not sid then break end
  scanned = scanned + 1
  served = n
  local st, _, t = rec(sid)
  if st then
    if drawn and n > dlo and n <= dhi and m.dfloor and m.dfloor ~= '' then t = math.max(t, int(m.dfloor)) end
    if t + abandon < now and not seen(sid, n) then
      put(sid, 'x', n, 0)
      abandoned[#abandoned + 1] = sid
    else
      put(sid, 'a', n, 0)
      redis.call('ZADD', KA, fmt(now + arrival), sid)
      nadm = nadm + 1
      admitted[#admitted + 1] = sid
    end
  end
end
if scanned > 0 then
  redis.call('HSET', KM, 'served', fmt(served))
  redis.call('HINCRBY', KM, 'admitted', nadm)
  redis.call('HINCRBY', KM, 'abandoned', #abandoned)
end
if nadm > 0 then redis.call('HINCRBY', KR, fmt(now_s), nadm) end
return {drew, admitted, abandoned, expired, turned}
"#;

/// ARGV: session, seats, now, stream cap.
const FINISH: &str = r#"
local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, seats = ARGV[1], int(ARGV[2])
if not finish(m, sid, seats) then return 0 end
-- Tell every room instance and verifier replica (see "Finishing across processes").
announce(sid, seats, ARGV[3], ARGV[4])
return 1
"#;

/// ARGV: lookback (ms), most entries. The finishes of the last `lookback` ms on Redis's clock (which dated the
/// entries' ids), oldest first, after the window's start as a cursor (for an empty window).
const FINISHED_RECENT: &str = r#"
local t = redis.call('TIME')
local from = math.max(int(t[1]) * 1000 + math.floor(int(t[2]) / 1000) - int(ARGV[1]), 0)
local start = fmt(from) .. '-0'
return {start, redis.call('XRANGE', KF, start, '+', 'COUNT', ARGV[2])}
"#;

/// No ARGV.
const SNAPSHOT: &str = r#"
local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local o = settings(m)
local pq = 0
-- Before the draw every join went to the pre-queue; those turned away left it.
if m.drawn ~= '1' then pq = int(m.joined) - int(m.turned) end
local rest = {m.drawn, pq, m.last, m.served, redis.call('ZCARD', KA), m.joined, m.admitted, m.finished,
  m.expired, m.abandoned, fmt(int(m.turned)), m.orders, m.seats}
for _, v in ipairs(rest) do o[#o + 1] = v end
return o
"#;

/// ARGV: op, value.
const UPDATE: &str = r#"
local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local op, v = ARGV[1], ARGV[2]
if op == 'cap' then redis.call('HSET', KM, 'cap', v)
elseif op == 'apm' then redis.call('HSET', KM, 'apm', v)
elseif op == 'pause' then redis.call('HSET', KM, 'paused', '1')
elseif op == 'resume' then redis.call('HSET', KM, 'paused', '0')
elseif op == 'open' then
  if m.opens == '' or int(m.opens) > int(v) then redis.call('HSET', KM, 'opens', v) end
elseif op == 'close' then redis.call('HSET', KM, 'closed', '1')
elseif op == 'inv' then redis.call('HSET', KM, 'inv', v)
end
return settings(meta())
"#;

/// One script: its code (for `SCRIPT LOAD`) and its SHA1 (for `EVALSHA`), computed locally.
struct Lua {
    code: String,
    script: Script,
}

impl Lua {
    fn new(body: &str) -> Self {
        let code = format!("{KEYS_LUA}\n{FINISH_LUA}\n{PRELUDE}\n{body}");
        let script = Script::new(&code);
        Self { code, script }
    }
}

/// The scripts, compiled once per store.
struct Scripts {
    init: Lua,
    join: Lua,
    lookup: Lua,
    claim: Lua,
    touch: Lua,
    tick: Lua,
    finish: Lua,
    finished_recent: Lua,
    snapshot: Lua,
    update: Lua,
}

impl Scripts {
    fn new() -> Self {
        Self {
            init: Lua::new(INIT),
            join: Lua::new(JOIN),
            lookup: Lua::new(LOOKUP),
            claim: Lua::new(CLAIM),
            touch: Lua::new(TOUCH),
            tick: Lua::new(TICK),
            finish: Lua::new(FINISH),
            finished_recent: Lua::new(FINISHED_RECENT),
            snapshot: Lua::new(SNAPSHOT),
            update: Lua::new(UPDATE),
        }
    }

    fn all(&self) -> [&Lua; 10] {
        [
            &self.init,
            &self.join,
            &self.lookup,
            &self.claim,
            &self.touch,
            &self.tick,
            &self.finish,
            &self.finished_recent,
            &self.snapshot,
            &self.update,
        ]
    }
}

/// The parts of one on-sale's key set, in the order the scripts expect them (`KEYS[1..=11]`).
/// The parts a finish touches are the verifier's ([`FINISH_KEY_PARTS`]: meta, sessions, active, finished), so the
/// room and the verifier's finish sink name the same keys.
const KEY_PARTS: [&str; 11] = [
    FINISH_KEY_PARTS[0],
    FINISH_KEY_PARTS[1],
    "line",
    "draw",
    FINISH_KEY_PARTS[2],
    "accounts",
    "admits",
    "drawidx",
    FINISH_KEY_PARTS[3],
    "seen",
    "pseen",
];

/// Length of one liveness slot: a numbered waiting session's poll sets its bit in `wr:{ev}:seen:<now / slot>`;
/// the head reads the slots covering the abandon grace (so the grace is rounded up by at most one slot).
pub const SEEN_SLOT_MS: u64 = 10_000;

/// The shared store: every on-sale's line in Redis (or Valkey), shared by every room instance pointing at it.
/// Cheap to clone; clones share the connection and the command counter.
///
/// [`RedisStore`] implements [`Store`] with the same semantics as [`MemoryStore`](super::MemoryStore) (the store
/// contract test in `tests/store_contract.rs` runs against both). Every operation is **one Lua script call**
/// (`EVALSHA`; the scripts are loaded once at connect and again by the store itself if Redis answers `NOSCRIPT`,
/// after a restart for instance). Scripts take `now` from the room's clock as an argument and never read Redis
/// `TIME`, so a manual clock drives a Redis-backed room exactly as it drives the embedded one.
///
/// # Key layout
///
/// All keys of one on-sale share the hash tag `{event}`, so Redis Cluster keeps an on-sale on one shard and each
/// script touches one slot; several on-sales can share one Redis. With the default prefix `wr`:
///
/// | key                    | type   | holds                                                                    |
/// |------------------------|--------|--------------------------------------------------------------------------|
/// | `wr:{ev}:meta`         | hash   | settings (`cap`, `apm`, `paused`, `closed`, `opens`, `random`, `inv`), the line (`last`, `served`, `drawn`, `dbase`, `dcount`, `dbits`) and the counters |
/// | `wr:{ev}:sessions`     | hash   | one field per session: a packed record `<state><number>:<ms>`            |
/// | `wr:{ev}:line`         | list   | ids of sessions with a number not yet served, head first (FIFO joins, and joins after the draw) |
/// | `wr:{ev}:draw:<b>`     | zset   | pre-queue bucket `b` (`0 .. 2^dbits`), scored by the rest of the draw key |
/// | `wr:{ev}:drawidx`      | string | written at the draw: where each bucket starts in the drawn segment (`2^dbits + 1` big-endian u32) |
/// | `wr:{ev}:active`       | zset   | admitted and active sessions, scored by their deadline (ms)             |
/// | `wr:{ev}:accounts`     | hash   | account → the session holding its place (only when the app gives accounts) |
/// | `wr:{ev}:admits`       | hash   | second → admissions in that second, over the last minute (per-minute cap) |
/// | `wr:{ev}:finished`     | stream | finishes, for every instance and verifier replica (capped near 100,000 entries) |
/// | `wr:{ev}:seen:<slot>`  | string | a bitmap: bit `n` set when the waiting session numbered `n` polled during slot `now / 10 s` ([`SEEN_SLOT_MS`]); expires after the abandon grace plus two slots |
/// | `wr:{ev}:pseen`        | hash   | pre-queued session → when it last polled (ms), written only in the last minute or so before the opening; expires the same way |
///
/// The bucket keys are derived inside the scripts from `KEYS[4]` (`wr:{ev}:draw`); they share its hash tag, so
/// they live in the same cluster slot as the declared keys.
///
/// A session record is one short string: the state's one-byte code ([`SessionState::code`]), a number, and, while
/// the session waits, the time it joined in ms; for example `w41207:1767261600000`. The number is the line
/// number, `0` before it has one, except in the pre-queue where it is the session's draw bucket. Admitted and active
/// sessions keep their deadline as their score in `active`, so their record is just `a41207:0`. Records of ended
/// sessions stay (so a lookup answers "finished" and a rejoin starts at the back); delete the on-sale's keys when it
/// is over ([`RedisStore::purge`]).
///
/// # The line and the draw
///
/// The line is numbered densely from 1. `meta.served` counts numbers that have left the head; a waiting session's
/// position is its number minus `served`. With FIFO, a join appends the session to `line` and writes its number into
/// its record.
///
/// With a random draw, a join before opening puts the session in one of `2^dbits` small sorted sets: the top `dbits`
/// bits of the secret draw key (which the room draws and passes in) pick the set, the rest of its top 53 bits are
/// its score there (a double holds 53 bits exactly). Walking the sets in order and each set by score is the order of
/// the draw keys' top 53 bits, ties broken by session id: the order [`MemoryStore`](super::MemoryStore) sorts by
/// unless two keys share their top 53 bits (odds about 2 in 100,000 for 600,000 people; a test checks the two
/// stores number a pre-queue identically). Small sets are
/// the point: Redis keeps a sorted set of up to 128 members as a listpack, about 40 bytes a member, where one big
/// sorted set would cost about 120 (a skiplist node and a dict entry each).
///
/// **The draw touches no session.** At opening (the first tick or join once `opens` has passed) the script counts
/// each set, writes the running totals to `drawidx` (16,385 integers by default; about 15 ms in all) and moves
/// `last` on by the pre-queue's size. Numbers `dbase + 1 ..= dbase + dcount` are then *implicit*: a drawn session in
/// bucket `b` has number `dbase + start(b) + (size(b) - ZCARD draw:b) + ZRANK draw:b session + 1`, and keeps it as
/// the head moves, because the head takes sessions with `ZPOPMIN` from the bucket it has reached (found by binary
/// search in `drawidx`). Joins after opening queue in `line` behind the drawn segment. So 600,000 people in the
/// pre-queue cost no long script at opening. A drawn session's record says `p<bucket>` until it reaches the head;
/// readers translate it.
///
/// # Liveness
///
/// A waiting session is skipped at the head when it has not polled for the abandon grace. Its polls reach Redis
/// in each instance's batch once a second, and they are the one thing that grows with the crowd (300,000 a second
/// at ten times the seed's crowd), so a mark costs no script and no record rewrite: a session with a line number
/// sets its bit in the current 10-second slot's bitmap (`BITFIELD … SET u1 <n> 1`, thousands per command), a
/// pre-queued one writes its time into `pseen` (`HSET`, thousands of fields per command). When the head reaches
/// number `n` with a join time older than the grace, the tick reads bit `n` of the slots covering the grace (at
/// most one slot more, in the session's favour) and the session's `pseen` entry. Rooms mark pre-queue polls only
/// in the last stretch before the scheduled opening (the draw reads liveness as of the opening; earlier marks
/// would be overwritten), so `pseen` holds one entry per live pre-queued session for about a minute and then
/// expires. A draw that runs before the scheduled opening ("open now") counts every drawn session as seen at the
/// draw (`meta.dfloor`), since nobody was being marked yet. Measured (BENCHMARKS.md): about 0.13 µs of Redis time
/// per mark either way, where rewriting the record in a script took 4.4 µs.
///
/// # Closing and selling out
///
/// While the on-sale is closed or sold out (`meta.closed`, or `meta.inv` with every seat sold) the `JOIN` script
/// answers a session without a place `t` (turned away) and writes nothing, and the `TICK` script, instead of
/// admitting, turns away up to [`TURN_AWAY_PER_TICK`] sessions: from the head (the same pops as admission, the
/// drawn segment included; `served` moves over them) and then, before a draw, from the pre-queue's buckets in
/// bucket order (`ZPOPMIN` with a count; at most `2^dbits` empty buckets are passed per tick). Their records become
/// `t<number>:0` (`t0:0` from the pre-queue) and `meta.turned` counts them; before the draw the pre-queue holds
/// `joined - turned` sessions. Should seats come back, those turned away stay turned away.
///
/// # Memory
///
/// Measured on Redis 7.0.15 (jemalloc) with 22-character session ids (see BENCHMARKS.md, "Redis store", for the
/// command): `used_memory` grows by about **132 bytes per waiting FIFO session** (its `sessions` field plus its
/// `line` entry) and by about **158 bytes per pre-queued session** with 600,000 in the pre-queue (164 with 100,000;
/// default 2^14 buckets). Admitted sessions add an `active` entry (about 100 bytes) for the few thousand inside.
///
/// # Finishing across processes
///
/// `wr:{ev}:finished` is the contract between the room and verifiers (which do not depend on this crate). Each
/// entry has the fields `s` (session id), `n` (seats bought) and `t` (when, ms); its id is Redis's (`*`), used only
/// as a cursor.
///
/// - [`Store::finish`] (the room's own finish, for instance from the `Waitroom-Command` response header) marks the
///   session finished and appends an entry, in one script.
/// - A verifier's Redis finish sink (`waitroom_verify::redis::RedisFinishSink`, feature `redis` of the verify
///   crate) does the same in its own script, built from the same Lua (`waitroom_verify::redis::FINISH_LUA`, which
///   these scripts include, and the key names of `FINISH_KEY_PARTS`): the session leaves the active count and its
///   seats count at once. Both mark their entries `a 1` (applied).
/// - A writer without that crate may append a bare entry:
///   `XADD wr:{<event>}:finished MAXLEN ~ 100000 * s <session> n <seats> t <ms>`. The next admission tick of any
///   instance (every 250 ms by default) applies the entries without `a` it has not applied yet (`meta.fcur` is the
///   shared cursor, so each applies once): the session leaves the active count, its seats count, and the same tick
///   may let the next person in.
/// - Every room instance reads the stream after its own cursor each tick ([`Store::finished_since`]) and remembers
///   the sessions ([`WaitingRoom::finished_recently`](crate::WaitingRoom::finished_recently)); verifier replicas
///   read it the same way (`XRANGE key (<last id> + COUNT n`, `waitroom_verify::redis::RedisFinishListener`) to
///   deny those tokens. An instance that starts (or restarts) reads back over its tokens' longest life first
///   (`XRANGE key <now - deny TTL>-0 + COUNT n`, `now` by Redis's clock), before its first request, so it refuses
///   the sessions finished before it started too.
///
/// # Several instances: one key set, one cookie secret
///
/// The store shares the line, not the secrets: every instance of an on-sale must be built with the same signing
/// key and the same cookie secret, or a token or cookie from one instance is refused by the next.
///
/// - **Token key.** Generate it once (`SigningKey::generate_ed25519("room-2026-01")?.to_pem()`), store the PEM as a
///   secret file (Kubernetes secret, Vault, a file readable only by the service user) and give the same file to
///   every instance: `RoomBuilder::signing_key(SigningKey::from_ed25519_pem("room-2026-01", &pem)?)`. The `kid`
///   is part of the configuration, the same on every instance. The order service needs only the public half: the
///   room publishes it at `{base}/jwks.json` (every instance serves the same document), or give it the public PEM.
/// - **Rotation**, with no token refused: (1) add the new public key everywhere while still signing with the old
///   one (`RoomBuilder::publish_key(new.verifying_key())` on every instance; reload the order service's key set,
///   `Verifier::replace_keys`); (2) once every instance and verifier knows it, sign with the new key and publish the
///   old one (`signing_key(new)`, `publish_key(old.verifying_key())`); (3) when the longest-lived token signed with
///   the old key has expired (the idle timeout, plus the verifiers' leeway), drop it. A rolling restart per step is
///   enough; each step is safe while instances run mixed configurations.
/// - **Cookie secret.** At least 32 random bytes, distributed like the key file
///   (`RoomBuilder::cookie_secret`). A session cookie signed under one secret is no cookie under another, so
///   changing it sends everyone in line to the back: rotate it between on-sales, never during one.
///
/// # Cost per request
///
/// Polls of waiting sessions never reach this store: the room answers them from its snapshot. What reaches it per
/// room instance is, per tick interval, one `tick`, one `finished_since` and one `snapshot`, and once a second one
/// `touch` batch (one pipeline: a `BITFIELD` or `HSET` per [`TOUCH_CHUNK`] liveness marks plus their expiry, and a
/// script call per chunk of active sessions), plus one call per join, claim and finish. [`RedisStore::commands_sent`] counts every command sent, to check this.
///
/// # Failures
///
/// The connection is a [`ConnectionManager`]: multiplexed and reconnecting. Every call is bounded by the store's
/// timeout (default 1 s), so a dead Redis answers [`StoreError::Unavailable`] quickly instead of hanging a request;
/// the room keeps answering from its last snapshot meanwhile and carries on when Redis is back.
///
/// # Example
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use waitroom_layer::{RedisStore, WaitingRoom};
///
/// let store = RedisStore::builder("redis://127.0.0.1:6379/")
///     .key_prefix("wr")
///     .timeout(Duration::from_secs(1))
///     .connect()
///     .await?;
/// let room = WaitingRoom::builder("tour-2026-stadium").store(store).build().await?;
/// # let _ = room; Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    scripts: Arc<Scripts>,
    prefix: Arc<str>,
    timeout: Duration,
    draw_bits: u8,
    commands: Arc<AtomicU64>,
}

impl fmt::Debug for RedisStore {
    // The connection is left out: its URL may carry a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("key_prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("commands_sent", &self.commands_sent())
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisStore`]. Start from [`RedisStore::builder`].
#[must_use = "a builder does nothing until `connect` is called"]
#[derive(Clone)]
pub struct RedisStoreBuilder {
    url: String,
    key_prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
    draw_bits: u8,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("url", &"<redacted>")
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("draw_buckets_log2", &self.draw_bits)
            .finish()
    }
}

impl RedisStoreBuilder {
    /// The prefix of every key (default `wr`): keys are `<prefix>:{<event>}:<part>`. Must not contain `{` or `}`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// How long one store call may take before it fails with [`StoreError::Unavailable`] (default 1 s). Keep it
    /// short: a dead Redis must not hang a request.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// How long one attempt to (re)connect may take (default 1 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// The pre-queue of a random draw is split into `2^bits` small sorted sets by the top bits of each session's
    /// draw key (default 14: 16,384 sets). Each set stays compact (Redis's listpack encoding) while it holds at most
    /// 128 sessions, so the default suits pre-queues up to about 1.5 million sessions; a bigger pre-queue still
    /// works, at about 70 more bytes per session. Between 1 and 16. It is written with an on-sale's settings when
    /// the on-sale is first initialised; instances that join later use the stored value.
    pub fn draw_buckets_log2(mut self, bits: u8) -> Self {
        self.draw_bits = bits;
        self
    }

    /// Connects, and loads the scripts.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the URL is malformed, the prefix contains a brace, a timeout is zero, or
    /// Redis cannot be reached within the timeouts.
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        if self.key_prefix.contains(['{', '}']) {
            return Err(StoreError::Unavailable(format!(
                "the key prefix `{}` must not contain `{{` or `}}` (the event id is the hash tag)",
                self.key_prefix
            )));
        }
        if !(1..=16).contains(&self.draw_bits) {
            return Err(StoreError::Unavailable(format!(
                "draw_buckets_log2 must be between 1 and 16, not {}",
                self.draw_bits
            )));
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(StoreError::Unavailable(
                "the store's timeouts must be longer than zero".into(),
            ));
        }
        let client = ::redis::Client::open(self.url.as_str())
            .map_err(|e| StoreError::Unavailable(format!("invalid Redis URL: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let conn = tokio::time::timeout(
            self.connect_timeout * 2,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| {
            StoreError::Unavailable(format!(
                "Redis did not accept a connection within {:?}",
                self.connect_timeout * 2
            ))
        })?
        .map_err(unavailable)?;
        let store = RedisStore {
            conn,
            scripts: Arc::new(Scripts::new()),
            prefix: self.key_prefix.into(),
            timeout: self.timeout,
            draw_bits: self.draw_bits,
            commands: Arc::new(AtomicU64::new(0)),
        };
        for script in store.scripts.all() {
            store.load(script).await?;
        }
        Ok(store)
    }
}

fn unavailable(e: RedisError) -> StoreError {
    StoreError::Unavailable(format!("redis: {e}"))
}

fn corrupt(what: impl fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("unexpected reply from Redis: {what}"))
}

impl RedisStore {
    /// Connects to `url` (`redis://[:password@]host:port/[db]`) with the defaults: prefix `wr`, 1 s timeouts.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when Redis cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// Starts building a store for the Redis at `url`.
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.into(),
            key_prefix: "wr".into(),
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            draw_bits: 14,
        }
    }

    /// Redis commands this store (and its clones) has sent so far: one per script call, plus script loads.
    pub fn commands_sent(&self) -> u64 {
        self.commands.load(Ordering::Relaxed)
    }

    /// Deletes every key of `event`: its settings, counters, line, pre-queue buckets, session records and
    /// liveness marks. For after an on-sale, when no room serves it any more (a room still running over it would
    /// answer "not initialised" until it is built again). Returns how many keys were deleted.
    ///
    /// Finds the keys with `SCAN … MATCH <prefix>:{<event>}:*` (glob characters in the prefix and the id escaped,
    /// so `tour*` never matches `tour-2`) and removes them with `UNLINK` in batches: other on-sales on the same
    /// Redis are untouched and Redis is never blocked for long.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when Redis cannot be reached (some keys may be gone already; call again).
    pub async fn purge(&self, event: &str) -> Result<u64, StoreError> {
        self.keys(event)?;
        let mut pattern = String::new();
        for c in format!("{}:{{{event}}}", self.prefix).chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\' | '^') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str(":*");
        let mut cursor = "0".to_owned();
        let mut deleted = 0;
        loop {
            let mut scan = ::redis::cmd("SCAN");
            scan.arg(&cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1_000);
            let mut reply = array(self.send(&scan).await.map_err(store_error)?)?.into_iter();
            let (Some(next), Some(keys), None) = (reply.next(), reply.next(), reply.next()) else {
                return Err(corrupt("SCAN answered something else than [cursor, keys]"));
            };
            cursor = text(&next)?;
            let keys = strings(keys)?;
            if !keys.is_empty() {
                let mut unlink = ::redis::cmd("UNLINK");
                unlink.arg(&keys);
                deleted += int(&self.send(&unlink).await.map_err(store_error)?)?;
            }
            if cursor == "0" {
                return Ok(deleted);
            }
        }
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The name of one of `event`'s keys: `part` is one of `meta`, `sessions`, `line`, `draw`, `active`,
    /// `accounts`, `admits` (see the module docs).
    pub fn key(&self, event: &str, part: &str) -> String {
        format!("{}:{{{event}}}:{part}", self.prefix)
    }

    fn keys(&self, event: &str) -> Result<[String; 11], StoreError> {
        if event.contains(['{', '}']) {
            return Err(StoreError::Unavailable(format!(
                "the event id `{event}` must not contain `{{` or `}}`"
            )));
        }
        Ok(KEY_PARTS.map(|part| self.key(event, part)))
    }

    /// Sends one command, counted, bounded by the timeout.
    async fn send(&self, cmd: &::redis::Cmd) -> Result<Value, RedisError> {
        self.commands.fetch_add(1, Ordering::Relaxed);
        let mut conn = self.conn.clone();
        match tokio::time::timeout(self.timeout, cmd.query_async::<Value>(&mut conn)).await {
            Ok(r) => r,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("Redis did not answer within {:?}", self.timeout),
            ))),
        }
    }

    /// Sends a pipeline (one round trip), each command counted, bounded by the timeout.
    async fn send_pipe(&self, pipe: &::redis::Pipeline) -> Result<(), RedisError> {
        self.commands
            .fetch_add(pipe.cmd_iter().count() as u64, Ordering::Relaxed);
        let mut conn = self.conn.clone();
        match tokio::time::timeout(self.timeout, pipe.query_async::<Value>(&mut conn)).await {
            Ok(r) => r.map(|_| ()),
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("Redis did not answer within {:?}", self.timeout),
            ))),
        }
    }

    async fn load(&self, lua: &Lua) -> Result<(), StoreError> {
        let mut cmd = ::redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(&lua.code);
        self.send(&cmd).await.map(|_| ()).map_err(store_error)
    }

    /// An `EVALSHA` of `lua` over `event`'s keys, ready for its arguments.
    fn evalsha(&self, lua: &Lua, event: &str) -> Result<::redis::Cmd, StoreError> {
        let keys = self.keys(event)?;
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(lua.script.get_hash()).arg(keys.len());
        for k in &keys {
            cmd.arg(k);
        }
        Ok(cmd)
    }

    /// Runs an `EVALSHA` of `lua`, loading the script first if Redis does not know it (after a restart, say).
    async fn run(&self, lua: &Lua, cmd: &::redis::Cmd) -> Result<Value, StoreError> {
        match self.send(cmd).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.load(lua).await?;
                self.send(cmd).await.map_err(store_error)
            }
            r => r.map_err(store_error),
        }
    }
}

fn store_error(e: RedisError) -> StoreError {
    if e.code() == Some("WRNOEVENT") {
        StoreError::Unavailable("the on-sale was not initialised".into())
    } else {
        unavailable(e)
    }
}

// ---- Reply parsing: every reply is checked; anything unexpected is `StoreError::Corrupt`. ----

fn array(v: Value) -> Result<Vec<Value>, StoreError> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(corrupt(format_args!("expected an array, got {other:?}"))),
    }
}

fn text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).map_err(corrupt),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Int(i) => Ok(i.to_string()),
        other => Err(corrupt(format_args!("expected a string, got {other:?}"))),
    }
}

fn int(v: &Value) -> Result<u64, StoreError> {
    match v {
        Value::Int(i) => u64::try_from(*i).map_err(corrupt),
        Value::BulkString(_) | Value::SimpleString(_) => {
            let s = text(v)?;
            s.parse()
                .map_err(|_| corrupt(format_args!("expected a number, got `{s}`")))
        }
        other => Err(corrupt(format_args!("expected a number, got {other:?}"))),
    }
}

fn opt_int(v: &Value) -> Result<Option<u64>, StoreError> {
    match v {
        Value::Nil => Ok(None),
        _ if text(v)?.is_empty() => Ok(None),
        _ => int(v).map(Some),
    }
}

fn flag(v: &Value) -> Result<bool, StoreError> {
    Ok(int(v)? != 0)
}

fn strings(v: Value) -> Result<Vec<String>, StoreError> {
    array(v)?.iter().map(text).collect()
}

fn settings(v: &[Value]) -> Result<Settings, StoreError> {
    let [cap, apm, paused, closed, opens, random, inv] = v else {
        return Err(corrupt(format_args!(
            "expected 7 settings, got {}",
            v.len()
        )));
    };
    let inventory = match text(inv)? {
        s if s.is_empty() => None,
        s => {
            let mut parts = s.split(':').map(str::parse::<u64>);
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some(Ok(total)), Some(Ok(sold)), Some(Ok(held)), None) => {
                    Some(Inventory { total, sold, held })
                }
                _ => return Err(corrupt(format_args!("inventory `{s}`"))),
            }
        }
    };
    Ok(Settings {
        capacity: int(cap)?,
        admit_per_minute: opt_int(apm)?,
        paused: flag(paused)?,
        closed: flag(closed)?,
        opens_at_ms: opt_int(opens)?,
        random_draw: flag(random)?,
        inventory,
    })
}

fn placement(v: Value) -> Result<Option<Placement>, StoreError> {
    if v == Value::Nil {
        return Ok(None);
    }
    let a = array(v)?;
    let [sid, state, number] = a.as_slice() else {
        return Err(corrupt(format_args!(
            "expected a placement of 3, got {}",
            a.len()
        )));
    };
    let code = text(state)?;
    let state = match code.as_bytes() {
        [c] => SessionState::from_code(*c),
        _ => None,
    }
    .ok_or_else(|| corrupt(format_args!("session state `{code}`")))?;
    let number = int(number)?;
    Ok(Some(Placement {
        session: text(sid)?,
        state,
        number: (number > 0).then_some(number),
    }))
}

fn settings_args(s: &Settings) -> [String; 7] {
    let opt = |o: Option<u64>| o.map(|v| v.to_string()).unwrap_or_default();
    let b = |x: bool| if x { "1" } else { "0" }.to_owned();
    [
        s.capacity.to_string(),
        opt(s.admit_per_minute),
        b(s.paused),
        b(s.closed),
        opt(s.opens_at_ms),
        b(s.random_draw),
        s.inventory
            .map(|i| format!("{}:{}:{}", i.total, i.sold, i.held))
            .unwrap_or_default(),
    ]
}

#[async_trait]
impl Store for RedisStore {
    async fn init(&self, event: &str, defaults: &Settings) -> Result<Settings, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.init, event)?;
        for a in settings_args(defaults) {
            cmd.arg(a);
        }
        cmd.arg(self.draw_bits);
        settings(&array(self.run(&self.scripts.init, &cmd).await?)?)
    }

    async fn join(&self, event: &str, join: &Join) -> Result<Placement, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.join, event)?;
        // Scores are doubles: the top 53 bits of the draw key keep it exact.
        cmd.arg(&join.session)
            .arg(join.account.as_deref().unwrap_or(""))
            .arg(join.now_ms)
            .arg(format!("{:016x}", join.draw_key));
        placement(self.run(&self.scripts.join, &cmd).await?)?
            .ok_or_else(|| corrupt("join answered nothing"))
    }

    async fn lookup(&self, event: &str, session: &str) -> Result<Option<Placement>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.lookup, event)?;
        cmd.arg(session);
        placement(self.run(&self.scripts.lookup, &cmd).await?)
    }

    async fn claim(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
        idle_timeout_ms: u64,
    ) -> Result<Option<Placement>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.claim, event)?;
        cmd.arg(session).arg(now_ms).arg(idle_timeout_ms);
        placement(self.run(&self.scripts.claim, &cmd).await?)
    }

    async fn touch(&self, event: &str, touches: &Touches) -> Result<(), StoreError> {
        // Liveness marks are not scripted: a numbered waiting session sets one bit in this slot's `seen` bitmap
        // (`BITFIELD`, up to TOUCH_CHUNK bits per command), a pre-queued one writes its time into `pseen` (`HSET`,
        // up to TOUCH_CHUNK fields per command); each key then gets its expiry. One round trip, no session record
        // rewritten.
        let keys = self.keys(event)?;
        let keep_ms = touches.abandon_after_ms + 2 * SEEN_SLOT_MS;
        let numbers: Vec<u64> = touches.waiting.iter().filter_map(|m| m.number).collect();
        let unnumbered: Vec<&str> = touches
            .waiting
            .iter()
            .filter(|m| m.number.is_none())
            .map(|m| m.session.as_str())
            .collect();
        if !numbers.is_empty() || !unnumbered.is_empty() {
            let mut pipe = ::redis::pipe();
            if !numbers.is_empty() {
                let key = format!("{}:{}", keys[9], touches.now_ms / SEEN_SLOT_MS);
                for chunk in numbers.chunks(TOUCH_CHUNK) {
                    let cmd = pipe.cmd("BITFIELD").arg(&key);
                    for n in chunk {
                        cmd.arg("SET").arg("u1").arg(*n).arg(1);
                    }
                    cmd.ignore();
                }
                pipe.cmd("PEXPIRE").arg(&key).arg(keep_ms).ignore();
            }
            if !unnumbered.is_empty() {
                for chunk in unnumbered.chunks(TOUCH_CHUNK) {
                    let cmd = pipe.cmd("HSET").arg(&keys[10]);
                    for s in chunk {
                        cmd.arg(*s).arg(touches.now_ms);
                    }
                    cmd.ignore();
                }
                pipe.cmd("PEXPIRE").arg(&keys[10]).arg(keep_ms).ignore();
            }
            self.send_pipe(&pipe).await.map_err(store_error)?;
        }
        for chunk in touches.active.chunks(TOUCH_CHUNK) {
            let mut cmd = self.evalsha(&self.scripts.touch, event)?;
            cmd.arg(touches.now_ms).arg(touches.idle_timeout_ms);
            for s in chunk {
                cmd.arg(s);
            }
            self.run(&self.scripts.touch, &cmd).await?;
        }
        Ok(())
    }

    async fn tick(&self, event: &str, tick: &Tick) -> Result<TickReport, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.tick, event)?;
        cmd.arg(tick.now_ms)
            .arg(tick.arrival_window_ms)
            .arg(tick.abandon_after_ms)
            .arg(tick.max_scan)
            .arg(SEEN_SLOT_MS)
            .arg(TURN_AWAY_PER_TICK);
        let mut a = array(self.run(&self.scripts.tick, &cmd).await?)?.into_iter();
        match (a.next(), a.next(), a.next(), a.next(), a.next(), a.next()) {
            (
                Some(drew),
                Some(admitted),
                Some(abandoned),
                Some(expired),
                Some(turned_away),
                None,
            ) => Ok(TickReport {
                drew: flag(&drew)?,
                admitted: strings(admitted)?,
                abandoned: strings(abandoned)?,
                expired: strings(expired)?,
                turned_away: strings(turned_away)?,
            }),
            _ => Err(corrupt("a tick report of the wrong length")),
        }
    }

    async fn finish(
        &self,
        event: &str,
        session: &str,
        seats: u32,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.finish, event)?;
        cmd.arg(session).arg(seats).arg(now_ms).arg(FINISHED_CAP);
        flag(&self.run(&self.scripts.finish, &cmd).await?)
    }

    async fn finished_since(
        &self,
        event: &str,
        cursor: &str,
        _now_ms: u64,
        lookback_ms: u64,
    ) -> Result<(Vec<String>, String), StoreError> {
        // An empty cursor reads back over the lookback on Redis's clock (the stream's ids are `<ms>-<seq>` of that
        // clock, whatever the room's clock says): `XRANGE key <now - lookback>-0 + COUNT n`, in a script for the
        // time. Later calls continue after the cursor.
        let (mut last, entries) = if cursor.is_empty() {
            let mut cmd = self.evalsha(&self.scripts.finished_recent, event)?;
            cmd.arg(lookback_ms).arg(FINISHED_BATCH);
            let mut a = array(self.run(&self.scripts.finished_recent, &cmd).await?)?.into_iter();
            match (a.next(), a.next(), a.next()) {
                (Some(start), Some(entries), None) => (text(&start)?, entries),
                _ => return Err(corrupt("a finished read of the wrong length")),
            }
        } else {
            let key = self.keys(event)?[8].clone();
            let mut cmd = ::redis::cmd("XRANGE");
            cmd.arg(&key)
                .arg(format!("({cursor}"))
                .arg("+")
                .arg("COUNT")
                .arg(FINISHED_BATCH);
            let v = self.send(&cmd).await.map_err(store_error)?;
            (cursor.to_owned(), v)
        };
        let mut ids = Vec::new();
        for entry in array(entries)? {
            let mut e = array(entry)?.into_iter();
            let (Some(id), Some(fields), None) = (e.next(), e.next(), e.next()) else {
                return Err(corrupt("a stream entry of the wrong shape"));
            };
            last = text(&id)?;
            let fields = array(fields)?;
            for pair in fields.chunks(2) {
                if let [k, v] = pair
                    && text(k)? == "s"
                {
                    ids.push(text(v)?);
                }
            }
        }
        Ok((ids, last))
    }

    async fn snapshot(&self, event: &str) -> Result<Snapshot, StoreError> {
        let cmd = self.evalsha(&self.scripts.snapshot, event)?;
        let a = array(self.run(&self.scripts.snapshot, &cmd).await?)?;
        if a.len() != 20 {
            return Err(corrupt(format_args!(
                "expected a snapshot of 20, got {}",
                a.len()
            )));
        }
        let n = |i: usize| int(&a[i]);
        Ok(Snapshot {
            settings: settings(&a[..7])?,
            drawn: flag(&a[7])?,
            prequeue: n(8)?,
            last_number: n(9)?,
            served: n(10)?,
            active: n(11)?,
            counters: Counters {
                joined: n(12)?,
                admitted: n(13)?,
                finished: n(14)?,
                expired: n(15)?,
                abandoned: n(16)?,
                turned_away: n(17)?,
                orders: n(18)?,
                seats_bought: n(19)?,
            },
        })
    }

    async fn update(&self, event: &str, change: &SettingsChange) -> Result<Settings, StoreError> {
        let (op, value) = match *change {
            SettingsChange::Capacity { capacity } => ("cap", capacity.to_string()),
            SettingsChange::AdmitPerMinute { per_minute } => {
                ("apm", per_minute.map(|v| v.to_string()).unwrap_or_default())
            }
            SettingsChange::Pause => ("pause", String::new()),
            SettingsChange::Resume => ("resume", String::new()),
            SettingsChange::OpenNow { now_ms } => ("open", now_ms.to_string()),
            SettingsChange::Close => ("close", String::new()),
            SettingsChange::Inventory { inventory } => (
                "inv",
                format!("{}:{}:{}", inventory.total, inventory.sold, inventory.held),
            ),
        };
        let mut cmd = self.evalsha(&self.scripts.update, event)?;
        cmd.arg(op).arg(value);
        settings(&array(self.run(&self.scripts.update, &cmd).await?)?)
    }
}
