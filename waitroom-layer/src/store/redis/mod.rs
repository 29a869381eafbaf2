//! The shared store: one line for many room instances, in Redis (or Valkey). See [`RedisStore`], whose docs are
//! the guide (key layout, the draw, liveness, finishing across processes, failures).
//!
//! - this file: the client: [`RedisStore`] and its builder, the connection (opened by
//!   `waitroom_verify::redis::connect_with_timeout`, shared with the verifier's finish sink), sending a command or a
//!   script bounded by the timeout, key names, [`RedisStore::purge`];
//! - `scripts.rs` and `scripts/*.lua`: the Lua, one file per operation, and how a script is assembled;
//! - `reply.rs`: reading Redis's replies (anything unexpected is [`StoreError::Corrupt`]);
//! - `store_impl.rs`: [`Store`] for [`RedisStore`], each operation one script call.

mod live;
mod reply;
mod scripts;
mod store_impl;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ::redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use self::reply::{array, corrupt, int, strings, text};
use self::scripts::{Lua, Scripts};
#[cfg(doc)]
use super::{SessionState, Store, TURN_AWAY_PER_TICK};
use crate::error::StoreError;
use waitroom_verify::redis::{FINISH_KEY_PARTS, RedisConnection, RedisTarget, connect};

/// Most fields in one liveness `HSET` of pre-queued sessions' marks; a bigger batch is split into commands of this
/// many, sent in one pipeline, so no single command holds Redis for long: 5,000 fields an `HSET` took 3.5 to 5.3
/// ms, 256 about 0.9 ms (the opening's figures in BENCHMARKS.md), and 256 took 3 to 5 ms while `pseen` grew past
/// 262,144 and 524,288 fields in the seed's soak: each field moves a bucket of the growing table into the new,
/// twice as large one, and on a machine where a page Redis touches for the first time costs 12.5 µs (memory the
/// hypervisor takes back once it is free, as on the 2-core box of BENCHMARKS.md) the new table's pages are found one
/// fault at a time. 64 fields meet at most 64 buckets of it: 1,100,000 fields into a fresh hash (`one_shot.rs`
/// `measure_one_hash_growing_past_a_million_fields`), 0 and 2 `HSET`s over 0.5 ms and none over 0.73 ms, where 256 a
/// command had 78 and 80, the slowest 3.8 ms; in the soaks the longest outside the machine's stalls was 1.3 to
/// 2.9 ms (3 to 5.8 ms with 256).
pub const TOUCH_CHUNK: usize = 64;

/// How many hashes the pre-queue's liveness marks are kept in (`wr:{ev}:pseen:<k>`, k = [`pseen_shard`]), so that
/// no hash grows to the pre-queue's size. Redis doubles a hash's table in the command that fills it, and the new
/// table's pages are met one fault at a time: with one `pseen` hash for the seed's 600,000, a 64-field `HSET` took
/// 6.6 and 6.8 ms as it reached 2^20 fields, 3,454 of Redis's minor page faults around it, in no stall of the
/// machine (the seed's soak, BENCHMARKS.md). 64 hashes of about 9,400 fields each at the seed's crowd (94,000 at ten
/// times it) double a table of at most 2^17 buckets (1 MB). The scripts find a session's hash by the same sum
/// (`pseen_of` in `prelude.lua`).
pub const PSEEN_SHARDS: u64 = 64;

/// Which `pseen` hash holds session `session`'s pre-queue mark: the sum of its bytes modulo [`PSEEN_SHARDS`] (the
/// room's session ids are random, so the hashes fill evenly; Lua sums the same bytes).
pub fn pseen_shard(session: &str) -> u64 {
    session.bytes().map(u64::from).sum::<u64>() % PSEEN_SHARDS
}

/// Most numbered liveness marks in one `BITFIELD … SET u1` command: a bit each, far less work than a hash field,
/// so sixteen times [`TOUCH_CHUNK`] (after an opening these are most of the Redis commands the polls cause: one a
/// second per 1,024 people polling an instance).
pub const MARK_CHUNK: usize = 1_024;

/// Most sessions in one call of the touch script (active sessions' idle deadlines, and the claims a room makes from
/// what it heard of admissions): 64, as each costs a record read, a `ZADD` pair and, for a
/// claim, a record written (calls of 256 took up to 7.7 ms in the soak's opening, while 8,000 claims went out).
pub const ACTIVE_CHUNK: usize = 64;

/// About how many finishes the `finished` stream keeps (`XADD … MAXLEN ~`): minutes of finishes at the seed's pace,
/// far more than a reader a second behind needs.
const FINISHED_CAP: u64 = 100_000;

/// Most finishes one [`Store::finished_since`] call returns.
const FINISHED_BATCH: u64 = 10_000;

/// The parts of one on-sale's key set, in the order the scripts expect them (`KEYS[1..=18]`).
/// The parts a finish touches are the verifier's ([`FINISH_KEY_PARTS`]: meta, sessions, active, finished), so the
/// room and the verifier's finish sink name the same keys.
const KEY_PARTS: [&str; 18] = [
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
    "back",
    "returning",
    "missed",
    "line:front",
    "line:moved",
    "line:held",
    "line:blk",
];

/// Length of one liveness slot: a numbered waiting session's poll sets its bit in `wr:{ev}:seen:<now / slot>`;
/// the head reads the slots covering the abandon grace (so the grace is rounded up by at most one slot).
pub const SEEN_SLOT_MS: u64 = 10_000;

/// How long a liveness slot's key is kept (Redis's own clock, `PEXPIRE`, from the slot's last mark): the head reads
/// the slots covering the abandon grace, rounded up by at most one slot, so a mark must outlive the grace by a whole
/// slot counted from anywhere within its slot; a second slot is the margin for the clocks of the room and of Redis.
pub(crate) fn seen_keep_ms(abandon_after_ms: u64) -> u64 {
    abandon_after_ms + 2 * SEEN_SLOT_MS
}

/// The most first contacts a room over this store numbers in one `TICKET` call ([`Store::ticket_batch`]): the
/// script's work is the same for one or for a thousand (one `HINCRBY` for the range), so the bound only caps how
/// many people one failed call answers with "status unknown".
///
/// [`Store::ticket_batch`]: super::Store::ticket_batch
pub const TICKET_BATCH: usize = 1_024;

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
/// | `wr:{ev}:meta`         | hash   | settings (`cap`, `apm`, `paused`, `closed`, `opens`, `random`, `inv`, and the timetable's `sched`, `pqopens`, `closes`), the line (`last`, `served`, `swept`, `xlo`, `drawn`, `dbase`, `dcount`, `dbits`), the counters, and the last tick's clock, keep time and grace (`tnow`, `keep`, `abn`) |
/// | `wr:{ev}:sessions`     | hash   | one field per live session (waiting, pre-queued, admitted, active, missed, returning): its 12-byte record |
/// | `wr:{ev}:sessions:<ms>`| hash   | the sessions that ended in the slot starting at `<ms>` (finished, expired, abandoned, turned away): their records, for the return window; expires by itself (see "What is forgotten when") |
/// | `wr:{ev}:line:<k>`     | zset   | sessions waiting with a number `n` in `128 k .. 128 k + 127` outside the drawn segment (FIFO joins, joins after the draw, redeemed tickets), scored by `n % 128`; a number nobody holds has no entry |
/// | `wr:{ev}:draw:<b>`     | zset   | pre-queue bucket `b` (`0 .. 2^dbits`), scored by the rest of the draw key |
/// | `wr:{ev}:draw:n`       | string | until the draw: how many sessions each pre-queue bucket holds (a big-endian u32 per bucket, kept by every script that adds to a bucket or pops from one), so the draw needs no `ZCARD` per bucket |
/// | `wr:{ev}:drawidx`      | string | written at the draw: where each bucket starts in the drawn segment (`2^dbits + 1` big-endian u32) |
/// | `wr:{ev}:draw:page:2:<dat>:<dbase>:<dcount>:<b>:<most>:<score>:<member>` | string | a page of the draw's numbers as the `DRAWN` script worked it out for that cursor (msgpack; `2`: the format (runs joined by newlines; `1` had length-prefixed runs), `dat`: the draw's time), for the next room instance that asks; expires after 60 s; written best effort (a refused write costs nothing but the next instance's work) |
/// | `wr:{ev}:active`       | zset   | admitted and active sessions, scored by their deadline (ms)             |
/// | `wr:{ev}:accounts`     | hash   | account → the session holding its place (only when the app gives accounts) |
/// | `wr:{ev}:admits`       | hash   | second → admissions in that second, over the last minute (per-minute cap) |
/// | `wr:{ev}:finished`     | stream | finishes, for every instance and verifier replica (capped near 100,000 entries) |
/// | `wr:{ev}:seen:<slot>`  | string | a bitmap: bit `n` set when the waiting session numbered `n` polled during slot `now / 10 s` ([`SEEN_SLOT_MS`]); expires after the abandon grace plus two slots |
/// | `wr:{ev}:seen:j:<slot>:<b>`, `wr:{ev}:seen:js:<second>:<b>` | string | bitmaps per block `b` of 65,536 numbers: bit `n % 65536` set when a session was written into `line` at number `n` during that slot, and that second (read only by the head's look over runs of people away, see "Liveness"); expire the same way |
/// | `wr:{ev}:pseen:<k>`    | hash   | pre-queued session → when it last polled (ms), in the hash `k` = [`pseen_shard`] of its id (of [`PSEEN_SHARDS`]); written only in the last minute or so before the opening; expires the same way |
/// | `wr:{ev}:back`         | zset   | after a restore: sessions taken back after the head passed their number, scored by it; let in ahead of the line |
/// | `wr:{ev}:returning`    | list   | sessions that came back within the return window after missing their turn, served ahead of `line` |
/// | `wr:{ev}:returning:again` | set | sessions let in from `returning` that have not claimed their pass yet: one that does not come within the arrival window expires (a lapsed admission keeps its turn once) |
/// | `wr:{ev}:missed:unrep` | list   | sessions the drawn segment's head passed while away (already written missed), until a tick call names them missed |
/// | `wr:{ev}:missed:<s>`   | zset   | sessions that missed their turn in second `s` and have not come back, scored by when (ms); the tick ends those past the return window, from the oldest second that may hold anyone (`meta.xlo`); one set a second, so none grows to the crowd (`wr:{ev}:missed`, the one set of versions before, is still read) |
/// | `wr:{ev}:line:front`   | list   | sessions an operator moved to the front, let in before everyone else; their old places in `line` are freed (in a bucket, an empty id the head skips) |
/// | `wr:{ev}:line:moved`   | zset   | those sessions, scored by their old number, until the head passes it (read with every snapshot) |
/// | `wr:{ev}:line:held`    | string | a bitmap: bit `n` set while a session waits in `line` at number `n` (not in the drawn segment): the live line |
/// | `wr:{ev}:line:blk`     | hash   | block `b` (numbers `4096 b ..`) → a version, new at each change to the block's bits (from `meta.lver`); only blocks with a bit set |
/// | `wr:{ev}:audit`        | list   | the admin actions (JSON: `at_ms`, `who`, `action`, `detail`), newest first, the last [`AUDIT_KEEP`](super::AUDIT_KEEP); written by plain commands, not a script |
///
/// The bucket keys are derived inside the scripts from `KEYS[4]` (`wr:{ev}:draw`); they share its hash tag, so
/// they live in the same cluster slot as the declared keys.
///
/// A session record is 12 bytes: the state's one-byte code ([`SessionState::code`], and `X` for an abandoned session
/// told so), a number (5 bytes, big-endian) and a time in ms (6 bytes): while the session waits, when it joined;
/// admitted or active, when it was let in (for an operator's lookup; the deadline is its score in `active`); ended,
/// when it ended. The number is the line number, `0` before it has one, except in the pre-queue where it is the
/// session's draw bucket. Twelve bytes is what keeps the value in Redis's 16-byte allocation (the text form
/// `w41207:1767261600000` took 32). `redis-cli` shows the records as escaped bytes; read a session with
/// [`Store::inspect`] (or the admin page) instead.
///
/// # What is forgotten when
///
/// A record that ends (finished, expired, abandoned, turned away) leaves `sessions` for the hash of the time slot it
/// ended in, `wr:{ev}:sessions:<slot start ms>`: slots a quarter of the keep time long (at least 1 s), where the
/// keep time (`meta.keep`, written by the tick) is the return window, and at least the abandon grace. Lookups read
/// a session there (newest slot first, at most six `HGET`s, only for a session `sessions` does not hold) while it
/// ended less than the keep time ago by the last tick's clock (`meta.tnow`), exactly as the embedded store forgets
/// at its ticks; after that the store does not know the session: a join is a new place at the back, a poll is told
/// it is not in line (a finished session's token stays refused by the verifiers' deny list, fed from the
/// `finished` stream, for the token's lifetime). Each slot's hash has a Redis expiry of the keep time plus two
/// slots from its last write (`PEXPIRE`, only ever lengthened), so Redis frees it with no script sweeping: the
/// store holds the live line plus the last return window's endings, whatever the crowd that came and went.
/// (Field expiry, `HEXPIRE`, would need Redis 7.4 or Valkey 9; key expiry works on Redis 7.0 and every Valkey.)
/// [`Store::find_sessions`] scans `sessions` and then those slots' hashes (the same age rule). What stays until
/// [`RedisStore::purge`]: the meta hash and its counters, `line:held`'s bits (one per number ever given out), the
/// `accounts` entries, and the `finished` stream (capped near 100,000 entries).
///
/// # The line and the draw
///
/// The line is numbered densely from 1. `meta.served` counts numbers that have left the head; a waiting session's
/// position is the number of people holding a number between the head and its own, plus one (see "The numbers
/// count the living" below). With FIFO, a join puts the session in `line` at its number (in the sorted set
/// `line:<number / 128>`: a set never grows past 128 members, so Redis keeps it in its compact listpack encoding,
/// about 29 bytes a member) and writes its number into its record.
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
/// **The draw touches no session.** At opening (the first tick or join once `opens` has passed) the script reads
/// the sets' sizes from `draw:n` (one `GET`; a pre-queue written by a version without it is counted with a `ZCARD`
/// a set), writes the running totals to `drawidx` (16,385 integers by default, read and written 256 to a call of
/// Lua's `struct`: 2.7 ms measured for 200,000 people, against 8.7 to 9.9 ms with a call a bucket in the same
/// session and 36 to 85 ms with a `ZCARD` a set, see "Every call short") and moves
/// `last` on by the pre-queue's size. Numbers `dbase + 1 ..= dbase + dcount` are then *implicit*: a drawn session in
/// bucket `b` has number `dbase + start(b) + (size(b) - ZCARD draw:b) + ZRANK draw:b session + 1`, and keeps it as
/// the head moves, because the head takes sessions with `ZPOPMIN` from the bucket it has reached (found by binary
/// search in `drawidx`). Joins after opening queue in `line` behind the drawn segment. So 600,000 people in the
/// pre-queue cost no long script at opening. A drawn session's record says `p<bucket>` until it reaches the head;
/// readers translate it.
///
/// **Drawn numbers reach people without a call each.** A drawn person's cookie holds no number until their first
/// poll after the draw, and working the number out takes a script (`ZRANK`, `GETRANGE`, `ZCARD`). So after the draw
/// each room instance reads every drawn number once, a page at a time (the `DRAWN` script,
/// [`Store::drawn_numbers`](super::Store::drawn_numbers): at most 500 members of at most 256 buckets a call, one
/// `ZRANGE` a bucket (its members only from a bucket's front; `WITHSCORES` from a cursor of bucket, score and
/// member, and one `ZSCORE` for the cursor of a bucket larger than a page), the buckets' starts read 64 to a
/// `GETRANGE`; a bucket that held more at the draw than what is left of the page is left unread for the next page,
/// which starts at its front (it was read in part and dropped: about one `ZRANGE` in seven of the seed's pages);
/// the same arithmetic, so each page is exact when read and stays exact while its people wait, as the head only
/// pops bucket fronts), and answers a drawn person's polls from memory; a poll from their moment of the
/// ten minutes after seals the number into their cookie (`RESEAL_SPREAD_MS` in `room/drawn.rs`). A page comes back
/// as runs, one a bucket: its first number, its count, and its members in one string joined by newlines, as
/// `table.concat` joins what `ZRANGE` read, with no Lua loop over them (the k-th holds the first number plus k; one
/// that starts with a zero byte, a number moved to the front; the client checks the count). Two replies a session,
/// formatted by Redis and parsed by the client one by one, were most of the instances' work at the
/// opening after the index itself (BENCHMARKS.md, "The opening's instance work"). 600,000 drawn people are about 1,300 calls per instance and one `ZRANGE` a bucket inside them, where
/// one lookup per person was 600,000 (`redis_room.rs` checks that 1,200 first polls after a draw on
/// two instances send no Redis command once the numbers are kept; without them each is one `COME_BACK` call). Until an instance has read a
/// person's page (a few seconds after the draw at 600,000), that person is asked of the store as before.
/// Every instance reads the same pages (the same first cursor and page size), so a page worked out is kept in
/// Redis for 60 s under its cursor (`wr:{ev}:draw:page:…`) and the next instance gets it with one `GET`: Redis
/// works the pages out once, not once an instance (with ten instances, the opening's index work is one instance's
/// and nine `GET`s a page). A kept page holds what it held when worked out; the numbers in it do not change, and
/// people let in or moved since are answered as from a page an instance has kept for minutes (nobody at or below
/// the head is answered from the pages; anyone moved is asked of the store).
///
/// # Liveness
///
/// A waiting session is skipped at the head when it has not polled for the abandon grace. Its polls reach Redis
/// in each instance's batch once a second, and they are the one thing that grows with the crowd (300,000 a second
/// at ten times the seed's crowd), so a mark costs no script and no record rewrite: a session with a line number
/// sets its bit in the current 10-second slot's bitmap (`BITFIELD … SET u1 <n> 1`, [`MARK_CHUNK`] per command), a
/// pre-queued one writes its time into its `pseen` hash (`pseen:<k>`, one of [`PSEEN_SHARDS`] by [`pseen_shard`];
/// `HSET`, [`TOUCH_CHUNK`] fields per command, the commands of a batch in one pipeline). When the head reaches
/// number `n` with a join time older than the grace, the tick reads bit `n` of the slots covering the grace (at
/// most one slot more, in the session's favour) and the session's `pseen` entry (one `HMGET` a hash for a run).
/// Rooms mark pre-queue polls only
/// in the last stretch before the scheduled opening (the draw reads liveness as of the opening; earlier marks
/// would be overwritten), so the `pseen` hashes hold one entry per live pre-queued session for about a minute and then
/// expires. A draw that runs before the scheduled opening ("open now") counts every drawn session as seen at the
/// draw (`meta.dfloor`), since nobody was being marked yet. Measured (BENCHMARKS.md): about 0.13 µs of Redis time
/// per mark either way, where rewriting the record in a script took 4.4 µs.
///
/// **People away in a row cost the door nothing each.** Writing a person missed (their record, `missed`, out of
/// `line`) costs Redis a few microseconds, so a door that did it for each before letting the next present person
/// in took 46 ticks (12.5 s) to cross 900,000 people who joined and went quiet, all of it out of its budget
/// ([`Tick::max_scan`](super::Tick::max_scan)). Instead, when the person at the head has no sign of life in the
/// bitmaps covering the grace, the head looks for the next person who has one with bit operations: in windows of
/// 65,536 numbers, each bitmap's bytes (the marks' slots, the joins' slots `seen:j:<slot>:<block>`, and for the
/// oldest slot the joins' seconds `seen:js:<second>:<block>`, written by every script that puts a session into
/// `line`, kept per block so each is at most 8 KB) copied into
/// a scratch key and OR-ed by `BITOP`, AND-ed with `line:held`, then one `BITPOS`: at most 16 windows (a million
/// numbers) a call, a few commands on strings of at most 8 KB a window whoever holds its numbers (not timed on
/// their own; the crossing's figures are below). Whoever has no bit there is away by the test
/// the head makes of one person (a join is in its second's bitmap, a mark in its slot's); whoever has one is
/// decided as before. The head moves on to that person, writing nothing for the run; behind it, a sweep writes the
/// run missed, a block of `line` at a time, out of what is left of each call's budget (`meta.swept` is how far it
/// got: every bit of `line:held` at or below `served` is such a person). Until the sweep reaches them, a lookup
/// reads such a person as missed and `COME_BACK` writes them missed and takes them back, as it takes back anyone
/// missed. Measured (BENCHMARKS.md, "People away in a row"): behind 900,000 who redeemed their tickets and went
/// quiet, the first person present goes in at the 4th tick (1.6 s: the joins' second bitmaps round the grace up by
/// a second) instead of the 46th; the sweep writes the 900,000 missed over the next 42 ticks.
///
/// # Missing a turn and coming back
///
/// A session taken from the head while away (by the liveness test above) is written `m<number>:<when>` and added to
/// its second's `missed:<second>` (scored by when); the same tick goes on to the next person. The `COME_BACK` script (the room's lookup of
/// a session that is here now) turns a missed session back within the return window into `r<number>:<now>` and
/// pushes it on `returning`; each tick pops `returning` before the head, with the same liveness test and the same
/// budget (capacity, per-minute cap, inventory), and turns it away first while closed or sold out. At the end of
/// every tick the members of the `missed` sets older than the window (at most `max_scan`, oldest first, from the
/// oldest second that may hold anyone, `meta.xlo`) end `x<number>:0`
/// (abandoned); a late look writes `x<number>:1`, so a late return is counted once. Counters: `meta.missed`,
/// `meta.returned`, `meta.rlate` and `meta.abandoned`.
///
/// # Closing and selling out
///
/// While the on-sale is closed or sold out (`meta.closed`, or `meta.inv` with every seat sold) the `JOIN` script
/// answers a session without a place `t` (turned away) and writes nothing, and the `TICK` script, instead of
/// admitting, turns away up to [`TURN_AWAY_PER_TICK`] sessions (and at most the call's budget, see "Every call
/// short"): from the head (the same pops as admission, the
/// drawn segment included; `served` moves over them) and then, before a draw, from the pre-queue's buckets in
/// bucket order (`ZPOPMIN` with a count, from where the last call stopped; an empty bucket passed costs a sixteenth
/// of a step of the budget). Their records become
/// `t<number>:0` (`t0:0` from the pre-queue) and `meta.turned` counts them; before the draw the pre-queue holds
/// `joined - turned` sessions. Should seats come back, those turned away stay turned away.
///
/// # When Redis forgets
///
/// A Redis that restarted without persistence (or a fresh replica) answers `WRNOEVENT` to every script: the
/// room restores the on-sale (`RESTORE`: the meta hash from the room's last snapshot, with `rupto`, `runtil` and
/// `rlate` for the reclaim window; the numbers kept free for their owners cost nothing) and takes people back as
/// they poll (`RECLAIM`: a free number after the head takes the session into `line`; a number after `last` moves
/// `last` up to it; a number the head passed goes to `back`). The head passes a number nobody took back as it
/// passes a ticket never redeemed (its number counts as served). The rules are
/// [`Store`](super::Store)'s ("When the store forgets").
///
/// # Tickets
///
/// `TICKET` (first contacts) reads the settings, runs the draw when due and does one `HINCRBY meta last <count>`
/// for a room's whole batch of first contacts (up to [`TICKET_BATCH`]; `tickets` alone before the draw): no
/// record, no `line` entry. While the room's snapshot shows the line numbered and open, a batch is the one
/// `HINCRBY meta last <count>` alone ([`Store::line_tickets`](super::Store::line_tickets): no script, so one
/// command a batch instead of four; their count reaches `meta.tickets` with the room's next `TOUCH`). Should that
/// `HINCRBY` meet a Redis that lost the on-sale (the counter is below the last number the room saw and `meta`
/// has no settings), it answers as `WRNOEVENT` does and hands no number on: every script treats a `meta` without
/// settings as an on-sale it does not know, and `RESTORE` keeps such a lone `last` as a floor, so the room
/// restores the on-sale and asks again and no number is given twice. One that knows the on-sale but lost its
/// latest writes answers [`StoreError::Behind`](crate::StoreError::Behind): the room gives it the floor back
/// (`RESTORE` with the behind flag) and asks again. Measured over HTTP at 32 connections (BENCHMARKS.md, "Numbers alone"): 0.073
/// Redis commands a first contact, against 0.245 with `TICKET` for every batch. `REDEEM` writes the session when its ticket comes back within the grace, at its number
/// in `line` (one `ZADD` and one bit, whatever number of tickets lie before it).
///
/// # The numbers count the living
///
/// Beside `line`, the bitmap `line:held` has bit `n` set while a session waits at number `n` (set by every script
/// that writes a session into `line`, cleared when the head takes it or an operator moves it to the front); the
/// drawn segment needs no bits (every number in it is held by its buckets). So:
///
/// - **The door passes numbers nobody holds in one step.** The tick finds the next held number with one `BITPOS`
///   (from the head, `BIT` mode: Redis 7.0 or later); the numbers before it have no entry anywhere, so they use
///   none of [`Tick::max_scan`](super::Tick::max_scan) and no time per number beyond `BITPOS`'s scan of one bit
///   each (900,000 absent numbers are 112 KB, scanned a machine word at a time). Measured (BENCHMARKS.md): the
///   longest command while the door crosses 900,000 unredeemed tickets is 126 µs, against 133 µs with none.
///   The bitmap keeps one bit per number ever given out (0.125 byte a one-shot request) until the on-sale is
///   purged.
/// - **Positions count people, with no store call per poll.** Each snapshot carries the live line
///   ([`Snapshot::live`](super::Snapshot::live)): the script returns, for each block of 4,096 numbers with a bit
///   set (`line:blk`), its version and, only when the version differs from what this instance sent it holds, its
///   512 bytes; the store keeps the blocks per on-sale and builds the [`LiveLine`](super::LiveLine) from them and
///   the drawn segment (less the old numbers of sessions moved out of it). A snapshot in a steady line re-reads
///   the block at the head and the one at the back; a flood of one-shot numbers adds no block. A Redis whose
///   version counter went back (a failover to a replica that lagged) is read again whole.
/// - Numbers kept for their owners after a restore count as people until the head passes them
///   ([`Snapshot::position_of`](super::Snapshot::position_of)).
///
/// # Memory
///
/// Measured on Redis 7.0.15 (jemalloc) with 22-character session ids (see BENCHMARKS.md, "Redis store", for the
/// command): `used_memory` grows by about **121 bytes per waiting FIFO session** (120.7 per redeemed ticket, 119.4
/// per join in one run of `one_shot`'s Redis measure; 136.7 before the records were packed in 12 bytes). Of it,
/// the `sessions` field is about 82 bytes (`MEMORY USAGE`: a 24-byte hash entry, the id in a 32-byte allocation,
/// the record in a 16-byte one, and the hash table's slot), its `line` set member about 29 (a listpack entry), and
/// the sets' and the bitmap's share the rest. A one-shot request (a ticket never redeemed) costs about **0.2 bytes** (its
/// bit), a pre-queued session about **158 bytes** with 600,000 in the pre-queue (164 with 100,000; 2^14 buckets then,
/// 2^13 now; measured before the records were packed, not since). Admitted sessions add an `active`
/// entry (about 100 bytes) for the few thousand inside; an ended session costs about the same as a waiting one's
/// record, for the keep time only.
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
/// room instance is, per tick interval, one `tick` call per chunk of work (one while nothing is to be done, see
/// below), one `finished_since` and one `snapshot`, and once a second one `touch` batch (one pipeline: a `BITFIELD`
/// per [`MARK_CHUNK`] numbered liveness marks or an `HSET` per [`TOUCH_CHUNK`] pre-queue ones, plus their expiry, and
/// a script call per [`ACTIVE_CHUNK`] active sessions),
/// plus one call per join, claim and finish. [`RedisStore::commands_sent`] counts every command sent, to check this.
///
/// # Every call short
///
/// Redis runs one command at a time: while a script runs, every instance's joins, ticks and lookups and every
/// order service's finishes wait. So no call's work grows with the line, the pre-queue or the capacity:
///
/// - **The tick is chunked.** One `TICK` call looks at [`Tick::max_scan`](super::Tick::max_scan) sessions at most
///   (the room's `admit_chunk`, default 64): finishes read from the stream, sessions expired, let in or skipped as
///   away, turned away, missed sessions ended, all from one budget (an empty pre-queue bucket passed while
///   turning away costs a sixteenth; `meta.tcur` remembers where the walk stopped). A call that stops at the budget
///   says so ([`TickReport::more`](super::TickReport::more)) and the room calls again, up to its
///   `max_scan_per_tick` a tick; another instance's calls run in between, and each call reads the capacity afresh,
///   so two instances ticking at once never let in more than the capacity and the head moves in line order (the
///   draw's order) across them. An opening of 8,000 places is some 125 calls (more when it crosses people who left).
/// - **Crossing absent people is bounded the same way**: each one skipped is a step of the budget; numbers nobody
///   holds cost no step at all (one `BITPOS`, "The numbers count the living").
/// - **In the drawn segment the head moves a run at a time**: up to 256 sessions of one bucket (what the room and
///   the budget allow, and a few more) read in one `ZRANGE`, their records in one `HMGET`, the pre-queue marks of
///   those whose last sign of life is older than the grace in another, the `seen` bits of those still unseen in
///   one `BITFIELD` a slot, the records, admissions and misses written in one `HSET` and two `ZADD`s, and those
///   decided out of the bucket in one `ZREMRANGEBYRANK`: about ten commands a run instead of four to twenty-five a
///   session. People away there use none of the budget: at most 128 a call are passed beside it, each written
///   missed at once and pushed on `missed:unrep`, which later calls name out of their budgets, putting them in
///   the `missed` set of the second they are named in (as the sweep names those `line`'s head passed by bits),
///   so the return window ends them a window after they are named: late by as long as the naming waited (600,000
///   passed at the opening are named over some 30 ticks of 20,000), in their favour; a come-back is judged by the
///   record's time. The `seen` bits are read from the slot before the draw's on (`meta.dat`; the slot before for
///   an instance's clock a little behind the one that drew): no earlier slot holds a drawn number.
/// - **Pre-queue liveness marks go in commands of [`TOUCH_CHUNK`] (64)** fields, pipelined (a 5,000-field `HSET`
///   took 3.5 to 5.3 ms; 256 fields 3 to 5 ms while the `pseen` hash grew, see [`TOUCH_CHUNK`]), into
///   [`PSEEN_SHARDS`] (64) hashes, so no hash's table doubles at the pre-queue's size (64 fields took 6.8 ms as one
///   hash of 600,000 reached 2^20; see [`PSEEN_SHARDS`]).
///
/// **The largest unit of work** of a tick call is `admit_chunk` sessions (default 64). Measured (BENCHMARKS.md,
/// "The opening in runs": an opening of 8,000 places over 200,000 pre-queued people, half of them gone, two
/// instances ticking at once, Redis 7.0.15 on this 2-core box; `cargo test -p waitroom-layer --all-features --test
/// redis_instances measure_the_opening -- --ignored --nocapture`): a call of 64 took **1.5 ms at the median and
/// 3.2 ms at the longest**, none over 5 ms, where the same opening in one call took 366 ms. **The draw** is one
/// call, inside the first call after the opening (a tick, a join or a first contact's ticket): it reads the
/// buckets' sizes kept in `draw:n` and writes their running totals, 256 buckets to a `struct` call: **about 3 ms**
/// for 16,384 buckets, half that for the default 8,192 (8.7 to 9.9 ms for 16,384 with a call a bucket, 36 to 85 ms
/// with a `ZCARD` a bucket). **A page of the draw's numbers** (`drawn_numbers`: whole buckets, at most 500
/// sessions as the room asks) was the longest call after the opening: over the seed's whole on-sale over HTTP
/// (600,000 people, two instances, `scripts/soak_redis.py`, BENCHMARKS.md "The opening on Redis, a one-shot
/// flood over HTTP") nothing from the draw on took over 5 ms; since the pages read members without their scores,
/// no page is among the ten longest calls and the longest call from the draw on is a snapshot, **2.0 to 2.5 ms**
/// in three runs (pages with scores: up to 3.6 ms; pages of 1,000 with scores: 4,991 and 5,050 µs). **A
/// snapshot** names at most [`ADMITTED_PER_SNAPSHOT`](super::ADMITTED_PER_SNAPSHOT) sessions let in (250): with
/// 500, the snapshots carrying the opening's 8,000 admissions took 2 to 3.6 ms and once 5.9 ms in 13 soaks; with
/// 250 the longest call from the draw on was 1.7 ms (BENCHMARKS.md, "The opening's instance work").
///
/// **A hash, set or sorted set growing to the crowd's size costs one call a few milliseconds now and then**:
/// Redis grows its table all at once and frees the old one once its entries are moved. On a fresh Redis, the
/// slowest of 1,100,000 `HSET`s into one hash took 0.6 to 2.9 ms in three runs (`one_shot.rs`
/// `measure_one_hash_growing_past_a_million_fields`). During the seed's first polls two `REDEEM`s took 4.9 and 6.3 ms in
/// 13 soaks, as the sessions hash passed 524,288 records (soaks with Redis at `SCHED_FIFO`: the kernel's real-time
/// throttling may account for some of them, see below). The sessions hash is not spread over smaller keys: spread
/// over 64 and then 8 hashes (no table of them doubling past 1 MB at the seed's crowd), the joins still had
/// `REDEEM`s of 5.4 to 9.1 ms in no stall of the machine, as many as with the one hash, so its doubling is not
/// what makes them; and a batch of records (the door's run, a touch's claims, a snapshot's admissions) took a
/// command a hash it fell in, 0.007 Redis commands a poll more in the 30 s after the seed's opening with 8 hashes,
/// 0.03 with 64 (BENCHMARKS.md, "The sessions hash spread over 64 and 8 hashes, and back"). With the scheduler
/// traced through five commands of 6 to 14 ms in the joins, Redis's main thread never left its core for more than
/// half a millisecond at a time in those seconds (no long wait for a lock, a core or the kernel) while a real-time
/// thread on a core could not run: the machine's core held by its host, not the command's work (BENCHMARKS.md,
/// "The draw's pages without a bucket read in part"). The
/// missed sessions are kept a set a second, so none grows to the crowd (the `ZADD`s of 10 to 16 ms that led to it
/// were the throttling's: one set of everyone missed showed none over 3.7 ms with it lifted).
/// **A machine that holds Redis in the kernel** makes a call as long as the hold, whatever the call: on the 2-core
/// box of BENCHMARKS.md a `DRAWN` call of the seed's soak took 4.7 s while Redis's main thread ran for well under
/// half a second of it and was sampled 43 times in 4.3 s in an uninterruptible wait in `vma_prepare` (its memory
/// map being changed, as the allocator maps more memory for a Redis that grows, on a machine whose memory manager,
/// a DAMON page-out scheme, works on that memory meanwhile); three `HSET`s of `pseen` of 0.14 to 6.6 s in earlier soaks
/// came at the same kind of moment (Redis growing fast), before the soak sampled threads. The soak
/// (`scripts/soak_redis.py`) shows such commands apart from the calls' own work.
/// **Crossing 900,000 absent people**: the head passes them by bit operations (see "Liveness") and the sweep
/// writes them missed behind it, a run of up to 128 numbers of one block at a time, out of what is left of each
/// call's budget. Measured (BENCHMARKS.md, "The drawn segment's people away, and the calls of 40 to 100 ms
/// explained"): the first person present goes in at the 4th tick, and the longest call of the crossing was
/// **2.4 ms**, none over 5 ms. (The calls of 40 to 100 ms in earlier runs were the kernel stopping Redis, run at
/// `SCHED_FIFO`, for the rest of each second once it had run 950 ms of it, and the test server's append-only
/// file's rewrites; the measurement now lifts the one and turns off the other.)
/// **Crossing 600,000 drawn people away** (each read and written missed, 128 a call beside the budget): the first
/// person present goes in at the 15th tick (at the 31st when they used the budget), the longest call **2.9 and
/// 3.5 ms** in two runs, none over 5 ms.
///
/// # Failures
///
/// The connection is a [`RedisConnection`]: multiplexed and reconnecting (for one server redis-rs's
/// `ConnectionManager`; for a cluster or Sentinel it follows failovers). Every call is bounded by the store's
/// timeout (default 1 s), so a dead Redis answers [`StoreError::Unavailable`] quickly instead of hanging a request;
/// the room keeps answering from its last snapshot meanwhile and carries on when Redis is back. The Redis error
/// (a refused connection, a timed-out I/O error) is its [`source`](std::error::Error::source). A mistake in the
/// setup (a brace in the key prefix or an event id, a draw size out of range, a zero timeout, a malformed URL) is a
/// [`StoreError::Config`] instead: no outage, and no retry helps.
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
    conn: RedisConnection,
    scripts: Arc<Scripts>,
    prefix: Arc<str>,
    timeout: Duration,
    draw_bits: u8,
    commands: Arc<AtomicU64>,
    /// This instance's copy of each on-sale's live line (the blocks of `line:held` read so far), shared by clones;
    /// a snapshot holds the lock for its one script call.
    live: Arc<tokio::sync::Mutex<HashMap<String, live::LiveCache>>>,
    /// The last on-sale's `TICKET` command up to its arguments (the script's hash and the on-sale's key names),
    /// built once and cloned for each batch of first contacts: naming the keys costs more than the rest of the
    /// call on this side.
    ticket_cmd: Arc<std::sync::Mutex<Option<(String, ::redis::Cmd)>>>,
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
    target: RedisTarget,
    key_prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
    draw_bits: u8,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("target", &self.target)
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
    /// draw key (default 13: 8,192 sets). Each set stays compact (Redis's listpack encoding) while it holds at most
    /// 128 sessions, so the default suits pre-queues up to about a million sessions (the seed's 600,000: about 73
    /// a set); a bigger pre-queue still works, at about 70 more bytes per session: give it 14 up to 2 million, 16
    /// up to 8 million. Fewer sets are fewer commands after the draw: each room instance reads the drawn numbers
    /// with one `ZRANGE` a set (8,192 at the default, where 14 bits were 16,384 per instance, about half the
    /// commands of the 30 s after a seed-sized opening with two instances), and the draw sums one integer a set.
    /// Between 1 and 16. It is written with an on-sale's settings when
    /// the on-sale is first initialised; instances that join later use the stored value.
    pub fn draw_buckets_log2(mut self, bits: u8) -> Self {
        self.draw_bits = bits;
        self
    }

    /// Connects, and loads the scripts.
    ///
    /// # Errors
    /// [`StoreError::Config`] when the URL is malformed, the prefix contains a brace, the draw size is out of range
    /// or a timeout is zero; [`StoreError::Unavailable`] (with Redis's error as its source) when Redis cannot be
    /// reached within the timeouts.
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        if self.key_prefix.contains(['{', '}']) {
            return Err(StoreError::config(format!(
                "the key prefix `{}` must not contain `{{` or `}}` (the event id is the hash tag)",
                self.key_prefix
            )));
        }
        if !(1..=16).contains(&self.draw_bits) {
            return Err(StoreError::config(format!(
                "draw_buckets_log2 must be between 1 and 16, not {}",
                self.draw_bits
            )));
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(StoreError::config(
                "the store's timeouts must be longer than zero",
            ));
        }
        // The URL's text stays out of the error: it may carry a password.
        for url in self.target.urls() {
            ::redis::Client::open(url.as_str())
                .map_err(|e| StoreError::config_because("invalid Redis URL", e))?;
        }
        self.target.check().map_err(StoreError::config)?;
        let conn = connect(&self.target, self.connect_timeout, self.timeout)
            .await
            .map_err(|e| StoreError::unavailable_because("connecting to Redis", e))?;
        let store = RedisStore {
            conn,
            scripts: Arc::new(Scripts::new()),
            prefix: self.key_prefix.into(),
            timeout: self.timeout,
            draw_bits: self.draw_bits,
            commands: Arc::new(AtomicU64::new(0)),
            live: Arc::default(),
            ticket_cmd: Arc::default(),
        };
        for script in store.scripts.all() {
            store.load(script).await?;
        }
        Ok(store)
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://[:password@]host:port/[db]`) with the defaults: prefix `wr`, 1 s timeouts.
    ///
    /// # Errors
    /// See [`RedisStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// Starts building a store for the Redis at `url`: a URL for one server, or any [`RedisTarget`]: a Redis
    /// Cluster ([`RedisTarget::cluster`], seed nodes) or a primary under Sentinel ([`RedisTarget::sentinel`]).
    pub fn builder(url: impl Into<RedisTarget>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            target: url.into(),
            key_prefix: "wr".into(),
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            draw_bits: 13,
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
    /// [`StoreError::Unavailable`] when Redis cannot be reached (some keys may be gone already; call again);
    /// [`StoreError::Config`] when the event id contains a brace.
    pub async fn purge(&self, event: &str) -> Result<u64, StoreError> {
        checked(event)?;
        self.live.lock().await.remove(event);
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
            // On a cluster, SCAN goes to the primary that owns the on-sale's slot (every key shares its hash tag).
            self.commands.fetch_add(1, Ordering::Relaxed);
            let mut conn = self.conn.clone();
            let meta = self.key(event, "meta");
            let reply = self.bounded(conn.run_on_slot_of(&meta, &scan)).await;
            let mut reply = array(reply.map_err(store_error)?)?.into_iter();
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

    /// The name of one of `event`'s keys: `part` is one of `meta`, `sessions`, `line:<k>`, `draw`, `active`,
    /// `accounts`, `admits` (see the module docs).
    pub fn key(&self, event: &str, part: &str) -> String {
        format!("{}:{{{event}}}:{part}", self.prefix)
    }

    /// The on-sale's audit log (a list of JSON entries, newest first, at most [`AUDIT_KEEP`](super::AUDIT_KEEP)).
    fn audit_key(&self, event: &str) -> Result<String, StoreError> {
        checked(event)?;
        Ok(self.key(event, "audit"))
    }

    fn keys(&self, event: &str) -> Result<[String; 18], StoreError> {
        checked(event)?;
        Ok(KEY_PARTS.map(|part| self.key(event, part)))
    }

    /// The on-sale's meta hash alone (`keys(event)[0]`, without formatting the other seventeen).
    fn meta_key(&self, event: &str) -> Result<String, StoreError> {
        checked(event)?;
        Ok(self.key(event, KEY_PARTS[0]))
    }

    /// Sends one command, counted, bounded by the timeout.
    async fn send(&self, cmd: &::redis::Cmd) -> Result<Value, RedisError> {
        self.commands.fetch_add(1, Ordering::Relaxed);
        let mut conn = self.conn.clone();
        self.bounded(cmd.query_async::<Value>(&mut conn)).await
    }

    /// Sends a pipeline (one round trip), each command counted, bounded by the timeout.
    async fn send_pipe(&self, pipe: &::redis::Pipeline) -> Result<(), RedisError> {
        self.commands
            .fetch_add(pipe.cmd_iter().count() as u64, Ordering::Relaxed);
        let mut conn = self.conn.clone();
        self.bounded(pipe.query_async::<Value>(&mut conn))
            .await
            .map(|_| ())
    }

    /// `reply`, or a timed-out I/O error once the store's timeout has passed.
    async fn bounded(
        &self,
        reply: impl Future<Output = Result<Value, RedisError>>,
    ) -> Result<Value, RedisError> {
        match tokio::time::timeout(self.timeout, reply).await {
            Ok(r) => r,
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

/// An event id the keys can hold: no brace (the hash tag `{event}` must be the key's only one).
fn checked(event: &str) -> Result<(), StoreError> {
    if event.contains(['{', '}']) {
        return Err(StoreError::config(format!(
            "the event id `{event}` must not contain `{{` or `}}`"
        )));
    }
    Ok(())
}

/// A Redis error as the store's: an outage, with Redis's error as its source. `WRNOEVENT` is the scripts' own
/// answer for an on-sale Redis does not know (never initialised, or lost): [`StoreError::Forgotten`], as the embedded
/// store says it.
fn store_error(e: RedisError) -> StoreError {
    if e.code() == Some("WRNOEVENT") {
        StoreError::Forgotten("the on-sale was not initialised".into())
    } else {
        StoreError::unavailable_because("redis", e)
    }
}
