//! The Lua scripts, one `.lua` file each under `scripts/` (read, lint and diff them as Lua).
//!
//! Every script Redis runs is assembled from four parts, in this order: [`KEYS`] (the key names as locals `KM`,
//! `KS`, ... in the order of [`KEY_PARTS`](super::KEY_PARTS)), the finish shared with the verifier's finish sink
//! ([`FINISH_LUA`]: `int`, `fmt`, `meta`, `rec`, `put`, `inv`, `finish`, `announce`), the [`PRELUDE`] (record
//! packing, the lazy numbering of the drawn segment, the draw), and the operation's body. The assembled text is
//! what `SCRIPT LOAD` receives and what its SHA1 names.

use ::redis::Script;
use waitroom_verify::redis::FINISH_LUA;

/// The key names every script starts with (`KEYS` in the order of [`KEY_PARTS`](super::KEY_PARTS)).
const KEYS: &str = include_str!("scripts/keys.lua");

/// The code shared by every script, after the keys and the finish: record packing, the lazy numbering of the drawn
/// segment, the draw.
const PRELUDE: &str = include_str!("scripts/prelude.lua");

/// ARGV: cap, apm, paused, closed, opens, random, inv, draw bucket bits, pre-queue opening, closing.
const INIT: &str = include_str!("scripts/init.lua");

/// ARGV: session, account (`''` for none), now, draw key (16 hex digits).
const JOIN: &str = include_str!("scripts/join.lua");

/// ARGV: now, count (default 1). First contacts' tickets: the last of the next `count` numbers (or 0 for pre-queue
/// tickets, -1 turned away).
const TICKET: &str = include_str!("scripts/ticket.lua");

/// ARGV: session, number (empty for a pre-queue ticket), issued, now, grace, draw key (16 hex digits), most
/// numbers left free.
const REDEEM: &str = include_str!("scripts/redeem.lua");

/// ARGV: session.
const LOOKUP: &str = include_str!("scripts/lookup.lua");

/// ARGV: bucket, score, member, most. A page of the random draw's numbers (see the script's head), kept in Redis for
/// a minute for the next room instance (the one write it makes, best effort).
const DRAWN: &str = include_str!("scripts/drawn.lua");

/// ARGV: session, now, return window. A lookup of a session that is here now: a missed one comes back (or is told
/// it came too late).
const COME_BACK: &str = include_str!("scripts/come_back.lua");

/// ARGV: session, now, idle timeout.
const CLAIM: &str = include_str!("scripts/claim.lua");

/// ARGV: now, idle timeout, tickets to count, the active sessions. (Waiting sessions' liveness marks are not scripted: see `touch`
/// in `store_impl.rs`.)
const TOUCH: &str = include_str!("scripts/touch.lua");

/// ARGV: now, arrival window, abandon after, max scan, seen slot length, most sessions turned away, return window.
const TICK: &str = include_str!("scripts/tick.lua");

/// ARGV: session, seats, now, stream cap.
const FINISH: &str = include_str!("scripts/finish.lua");

/// ARGV: lookback (ms), most entries. The finishes of the last `lookback` ms on Redis's clock (which dated the
/// entries' ids), oldest first, after the window's start as a cursor (for an empty window).
const FINISHED_RECENT: &str = include_str!("scripts/finished_recent.lua");

/// ARGV: the seven settings, dbits, drawn, last, served, the eight counters, hold until, late until, behind, most
/// numbers left free, pre-queue opening, closing.
const RESTORE: &str = include_str!("scripts/restore.lua");

/// ARGV: session, number (empty for a pre-queue mark), now, draw key (16 hex digits), most numbers left free.
const RECLAIM: &str = include_str!("scripts/reclaim.lua");

/// ARGV: pairs of block, version: the blocks of `line:held` the caller holds (sent back as `''` when unchanged).
const SNAPSHOT: &str = include_str!("scripts/snapshot.lua");

/// ARGV: session, now, most sessions moved and not yet passed. Moves a waiting session to the front.
const MOVE: &str = include_str!("scripts/move.lua");

/// ARGV: session. Its placement and, while admitted or active, when it was let in.
const INSPECT: &str = include_str!("scripts/inspect.lua");

/// ARGV: op, value (`sched`: opening, pre-queue opening, closing).
const UPDATE: &str = include_str!("scripts/update.lua");

/// One script: its code (for `SCRIPT LOAD`) and its SHA1 (for `EVALSHA`), computed locally.
pub(super) struct Lua {
    pub(super) code: String,
    pub(super) script: Script,
}

impl Lua {
    fn new(body: &str) -> Self {
        // The same text, byte for byte, as when the parts were string constants opening with a blank line.
        let code = format!("{KEYS}{FINISH_LUA}\n\n{PRELUDE}\n\n{body}");
        let script = Script::new(&code);
        Self { code, script }
    }
}

/// The scripts, compiled once per store.
pub(super) struct Scripts {
    pub(super) init: Lua,
    pub(super) join: Lua,
    pub(super) lookup: Lua,
    pub(super) come_back: Lua,
    pub(super) drawn: Lua,
    pub(super) claim: Lua,
    pub(super) touch: Lua,
    pub(super) tick: Lua,
    pub(super) finish: Lua,
    pub(super) finished_recent: Lua,
    pub(super) snapshot: Lua,
    pub(super) update: Lua,
    pub(super) inspect: Lua,
    pub(super) move_front: Lua,
    pub(super) restore: Lua,
    pub(super) reclaim: Lua,
    pub(super) ticket: Lua,
    pub(super) redeem: Lua,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self {
            init: Lua::new(INIT),
            join: Lua::new(JOIN),
            lookup: Lua::new(LOOKUP),
            come_back: Lua::new(COME_BACK),
            drawn: Lua::new(DRAWN),
            claim: Lua::new(CLAIM),
            touch: Lua::new(TOUCH),
            tick: Lua::new(TICK),
            finish: Lua::new(FINISH),
            finished_recent: Lua::new(FINISHED_RECENT),
            snapshot: Lua::new(SNAPSHOT),
            update: Lua::new(UPDATE),
            inspect: Lua::new(INSPECT),
            move_front: Lua::new(MOVE),
            restore: Lua::new(RESTORE),
            reclaim: Lua::new(RECLAIM),
            ticket: Lua::new(TICKET),
            redeem: Lua::new(REDEEM),
        }
    }

    pub(super) fn all(&self) -> [&Lua; 18] {
        [
            &self.init,
            &self.join,
            &self.lookup,
            &self.come_back,
            &self.drawn,
            &self.claim,
            &self.touch,
            &self.tick,
            &self.finish,
            &self.finished_recent,
            &self.snapshot,
            &self.update,
            &self.inspect,
            &self.move_front,
            &self.restore,
            &self.reclaim,
            &self.ticket,
            &self.redeem,
        ]
    }
}
