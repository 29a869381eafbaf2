//! Where the line lives.
//!
//! A [`Store`] holds one or several on-sales (each named by its event id): the line (line numbers in join order,
//! the pre-queue before a random draw), the `served` counter, the active sessions with their deadlines, and the
//! settings that operators change while the room runs. Every method is one atomic step, so several room instances
//! may call them at once (the admission tick included) and the capacity still holds exactly.
//!
//! Two stores ship: [`MemoryStore`] (embedded, the default) and, with the `redis` feature, `RedisStore`. The
//! contract is written so a store can serve it with one round trip per call: polls of waiting sessions do not
//! reach the store at all (the room answers them from a [`Snapshot`] it refreshes a few times a second), liveness
//! and touches arrive in batches ([`Touches`]), and the admission tick is a few calls per instance per interval,
//! each bounded by [`Tick::max_scan`] (the room's `admit_chunk`), so no call's work grows with the line, the
//! pre-queue or the capacity: a store in another process (Redis runs one command at a time) serves every other
//! caller between two of them.
//!
//! # When the store forgets
//!
//! A store may lose an on-sale, wholly (a Redis restarted without persistence, a fresh replica) or its most recent
//! writes (a failover to a replica that lagged). The people in line still hold their places: each carries its line
//! number in its session cookie, signed by the room. Two methods take the line back from them, with these rules
//! (every store follows them; `tests/store_contract.rs` checks them for each):
//!
//! 1. **Restore** ([`Store::restore`]): a store that answers [`StoreError::Forgotten`] is given the on-sale again
//!    from the room's last [`Snapshot`]: its settings as last in force (operator changes included), `served` and
//!    the highest number given out (`last_number`) as floors, its counters. Numbers `served + 1 ..= last_number`
//!    are kept free for their owners ([`Snapshot::reclaim_upto`] says up to where); newcomers get numbers after
//!    them. Nobody is let in for a short hold ([`Restore::hold_ms`], the room's poll interval: every live browser
//!    polls within it) so the owners can come back first. Restore writes nothing when the store knows the on-sale
//!    (several instances may restore at once; the first one wins).
//! 2. **Reclaim** ([`Store::reclaim`]): a session the store does not know, presenting a number from its signed
//!    cookie, is put back at that number. Idempotent: a session the store knows gets its placement, unchanged
//!    (a finished, abandoned or admitted session is never put back in line).
//!    - a number after `last_number`: the session takes it and `last_number` moves up to it, so no later join
//!      gets a number anyone holds (the numbers skipped stay free, for their owners);
//!    - a free number between the head and `last_number`: the session takes it;
//!    - a number the head already passed while the store did not know it, within [`Restore::late_ms`] of the
//!      restore: the session goes ahead of the line (it was in front of everyone waiting); `served` never moves
//!      back;
//!    - anything else (a number someone else holds, a number in a drawn segment the store still has, a number the
//!      head passed long ago or in a store never restored): nothing is written and the answer is `None`: the room
//!      joins the session at the back, as before. No two sessions ever hold one number.
//!    - a pre-queue mark (no number) before the draw: the session rejoins the pre-queue (the draw is random, so
//!      nothing is lost).
//!
//!
//! The same restore serves a store that **lost only its latest writes** (a failover to a replica that had not
//! caught up): a room instance that has seen a higher number than the
//! store's `last_number` (from its own joins or from a signed cookie, noted before it read the store) restores
//! with [`Restore::behind`] set. The store keeps what it has and takes the room's number as a floor: the numbers it
//! lost stay free for their owners (rule 2 takes them back), newcomers get numbers after them, so no two people
//! ever share a number. Nobody is let in for the hold.
//!
//! The durable embedded store ([`MemoryStore::open`]) that crashed needs no room to tell it: it never hands out a
//! number past the high-water mark it committed, so after a restart its `last_number` is that mark (no room sees
//! it behind), and it sets [`Snapshot::reclaim_upto`] to it itself, so the room takes back by rule 2 whoever
//! joined in the moment the crash lost (rule 2's late window opens at its first tick, for the abandon grace).
//!
//! What a restore does not bring back: accounts (an account's next join starts a new place), the sessions
//! admitted but not finished (they keep passing on their tokens, but no longer count against the capacity, so up
//! to one capacity more may be let in while their passes last), and the finishes written in the last moments
//! before the loss (a verifier's deny list still holds them).
//!
//! # Tickets: first contact writes nothing
//!
//! Most requests without a session never come back: bots, crawlers, uptime checks, link previews, apps without a
//! cookie jar. So a first contact does not join: [`Store::ticket`] hands it the next line number (an atomic add
//! in memory, one short script on Redis, which is one `HINCRBY` and a read of the settings) and writes nothing
//! else; the room seals the number and the time into the session cookie (a **ticket**). FIFO order is the order
//! of the ticket calls on the store's one counter. A room over a store a round trip away (Redis) gathers the first
//! contacts that arrive while its previous ticket call is under way into one [`Store::tickets`] call, which gives
//! them consecutive numbers in the order they arrived at that instance ([`Store::ticket_batch`]; a first contact
//! that finds no call under way goes at once). So FIFO holds exactly within an instance; across instances it is the
//! order of their calls: two people who reach two instances within about two store round trips of each other (the
//! call under way, and their own) may be numbered in either order, and anyone who arrives after another's ticket
//! was answered gets a later number. While a room's snapshot shows the line numbered and open (drawn, or first
//! come first served; neither closed nor sold out), its batches ask for the numbers alone
//! ([`Store::line_tickets`]: on Redis one `HINCRBY`, with no script to read the settings the snapshot already
//! gave), and the room adds their count to [`Counters::tickets`] with its next flush of liveness marks
//! ([`Touches::tickets`]); before the draw and far from it, such a room gives pre-queue tickets (no number) from its
//! snapshot with no store call at all, counted the same way. A ticket given in the moment between a close or a
//! sell-out and the room hearing of it takes no place when it comes back. When the ticket
//! comes back within the abandon grace (the holding page's first poll, the next protected request),
//! [`Store::redeem`] writes the session at its number. A ticket that never comes back costs its number: the head
//! passes an unclaimed number as it passes an empty place. One that comes back after the head passed its
//! number, within the grace, goes ahead of the line (it was in front of everyone waiting). One older than the
//! grace takes no place: the room gives it a new ticket, at the back. Before the draw, a pre-queue ticket carries
//! no number (the draw orders whoever redeemed in time, with a random key drawn at redemption).
//!
//! A ticket is the session cookie (or its header form): signed, so a forged or altered one is no cookie; one
//! copied to many clients takes one place (the first to come back; the others find that place, as a copied
//! session cookie always did).

mod memory;
#[cfg(feature = "redis")]
mod redis;

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use memory::{COMMIT_INTERVAL, DATA_FILE, MemoryStore};
#[cfg(feature = "redis")]
pub use redis::{
    ACTIVE_CHUNK, MARK_CHUNK, PSEEN_SHARDS, RedisStore, RedisStoreBuilder, SEEN_SLOT_MS,
    TICKET_BATCH, TOUCH_CHUNK, pseen_shard,
};

use crate::error::StoreError;

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Joined before a random draw; no line number yet.
    PreQueue,
    /// In line with a number.
    Waiting,
    /// Reached the head and let in; has not come to claim the place yet.
    Admitted,
    /// Admitted and claimed its pass; counted as active until it finishes or idles out.
    Active,
    /// Terminal: the order service marked it finished.
    Finished,
    /// Terminal: active, then idle past its deadline. (One let in that never came to claim its place is
    /// [`Missed`](Self::Missed) at the end of its arrival window, and keeps its turn.)
    Expired,
    /// Terminal: its turn came while it was away ([`Missed`](Self::Missed)) and it did not come back within the
    /// return window.
    Abandoned,
    /// Its turn came while it was away (it had not polled for the abandon grace): the door skipped it and let the
    /// next present person in, so nobody present waits for an absent one; or it was let in and did not come to
    /// claim its place within the arrival window (a phone asleep as its turn came): its place freed for the next
    /// present person at the end of the window. It keeps its turn for the return window
    /// ([`Tick::return_window_ms`]): [`Store::come_back`] within the window puts it in the returning queue; after
    /// it, the tick ends it [`Abandoned`](Self::Abandoned).
    Missed,
    /// Came back within the return window after missing its turn: waits in the returning queue, which the tick
    /// serves ahead of the head of the line, within every rule of the door (capacity, per-minute cap, pause,
    /// inventory); turned away first while the on-sale is closed or sold out. Absent again when it comes to the
    /// front of that queue, it is [`Missed`](Self::Missed) again.
    Returning,
    /// Terminal: still in line (or in the pre-queue) when the on-sale closed or sold out, and turned away by the
    /// admission tick. Also what a join answers while the on-sale is closed or sold out (the join takes no place
    /// and is not recorded). A session turned away stays turned away should seats come back; it may join again, at
    /// the back.
    TurnedAway,
}

impl SessionState {
    /// Whether this state ends a join (a new join starts a new place at the back).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Finished | Self::Expired | Self::Abandoned | Self::TurnedAway
        )
    }

    /// Whether the session counts against the capacity.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Admitted | Self::Active)
    }

    /// A stable one-byte code (used by stores that pack records).
    pub fn code(self) -> u8 {
        match self {
            Self::PreQueue => b'p',
            Self::Waiting => b'w',
            Self::Admitted => b'a',
            Self::Active => b'A',
            Self::Finished => b'f',
            Self::Expired => b'e',
            Self::Abandoned => b'x',
            Self::TurnedAway => b't',
            Self::Missed => b'm',
            Self::Returning => b'r',
        }
    }

    /// The inverse of [`SessionState::code`].
    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            b'p' => Self::PreQueue,
            b'w' => Self::Waiting,
            b'a' => Self::Admitted,
            b'A' => Self::Active,
            b'f' => Self::Finished,
            b'e' => Self::Expired,
            b'x' => Self::Abandoned,
            b't' => Self::TurnedAway,
            b'm' => Self::Missed,
            b'r' => Self::Returning,
            _ => return None,
        })
    }
}

/// What the store knows of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The session that holds the place (differs from the asking session when an account already holds one).
    pub session: String,
    /// Where it stands.
    pub state: SessionState,
    /// Its line number, once it has one; never changes for this join.
    pub number: Option<u64>,
}

/// The state of the seats, as the inventory reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Inventory {
    /// Seats on sale in all.
    pub total: u64,
    /// Seats sold.
    pub sold: u64,
    /// Seats held by someone at checkout (they come back if the hold expires).
    pub held: u64,
}

impl Inventory {
    /// Seats neither sold nor held.
    pub fn available(&self) -> u64 {
        self.total
            .saturating_sub(self.sold)
            .saturating_sub(self.held)
    }

    /// Every seat is sold.
    pub fn sold_out(&self) -> bool {
        self.total > 0 && self.sold >= self.total
    }
}

/// Settings shared by every instance of one on-sale; operators change them while the room runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Most sessions active (admitted and not yet finished or expired) at once.
    pub capacity: u64,
    /// Most new admissions in any sliding minute, if set.
    pub admit_per_minute: Option<u64>,
    /// The door is paused by an operator: nobody new is let in.
    pub paused: bool,
    /// The on-sale is closed: nobody new joins or is let in, and the admission tick turns away everyone still in
    /// line or in the pre-queue ([`SessionState::TurnedAway`]). There is no reopening.
    pub closed: bool,
    /// When the door opens (ms since the Unix epoch), if it does not open at once.
    pub opens_at_ms: Option<u64>,
    /// Sessions joining before `opens_at_ms` are ordered by a random draw at opening.
    pub random_draw: bool,
    /// The seats, once the app reports them.
    pub inventory: Option<Inventory>,
    /// When the pre-queue opens (ms since the Unix epoch): before it, a new join takes no place (the room answers
    /// it `503` with `Retry-After`); `None` lets people join at any time. Set by [`SettingsChange::Schedule`].
    #[serde(default)]
    pub prequeue_opens_at_ms: Option<u64>,
    /// When the on-sale closes by itself (ms since the Unix epoch): the first admission tick at or after it closes
    /// the on-sale as [`SettingsChange::Close`] does. Set by [`SettingsChange::Schedule`].
    #[serde(default)]
    pub closes_at_ms: Option<u64>,
}

impl Settings {
    /// Whether the door may let anyone in at `now_ms` (ignoring the capacity).
    pub fn door_open(&self, now_ms: u64) -> bool {
        !self.paused
            && !self.closed
            && self.opens_at_ms.is_none_or(|t| now_ms >= t)
            && self.inventory.is_none_or(|i| i.available() > 0)
    }

    /// Every seat is sold.
    pub fn sold_out(&self) -> bool {
        self.inventory.is_some_and(|i| i.sold_out())
    }

    /// Whether the line has ended for now: the on-sale is closed or sold out. Joins take no place and the admission
    /// tick turns away whoever is still in line (see [`SessionState::TurnedAway`]). Sold out may be withdrawn (a
    /// new inventory report with seats available): joins take places again, and those already turned away stay
    /// turned away.
    pub fn turning_away(&self) -> bool {
        self.closed || self.sold_out()
    }
}

/// Most sessions one admission tick turns away while the on-sale is closed or sold out, so a tick stays short with
/// hundreds of thousands in line: 600,000 are turned away within 300 ticks, 75 s at the default tick interval (less
/// with several instances ticking), while everyone in line already hears "sold out" or "closed" at their next poll
/// from the shared settings. One store call turns away at most this many and at most its [`Tick::max_scan`]; the
/// room calls again (while the call says [`TickReport::more`]) until the tick has turned away this many. In
/// `RedisStore` each call is one script, and Redis serves nobody else while it runs: 10,000 in one script held it
/// for about 45 to 110 ms (Redis 7.0.15, `SLOWLOG`, a 2-core development machine; the numbered line at the low end,
/// the pre-queue's buckets at the high end), so a call of the room's default chunk
/// ([`DEFAULT_ADMIT_CHUNK`](crate::DEFAULT_ADMIT_CHUNK), 128) holds it well under 2 ms (scaled, not measured apart).
pub const TURN_AWAY_PER_TICK: u64 = 2_000;

/// A change to the shared settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum SettingsChange {
    /// Set the capacity.
    Capacity {
        /// The new capacity.
        capacity: u64,
    },
    /// Set or clear the per-minute admission cap.
    AdmitPerMinute {
        /// The new cap; `None` removes it.
        per_minute: Option<u64>,
    },
    /// Stop letting people in.
    Pause,
    /// Let people in again.
    Resume,
    /// Open the door now (runs the draw at the next tick).
    OpenNow {
        /// The time of opening.
        now_ms: u64,
    },
    /// Close the on-sale, for good: nobody new joins (a join takes no place and answers
    /// [`SessionState::TurnedAway`]) or is let in, and the admission tick turns away everyone still in line or in
    /// the pre-queue, [`TURN_AWAY_PER_TICK`] at a time.
    Close,
    /// Set the on-sale's timetable: the opening (with a random draw, the draw runs then), the pre-queue's opening
    /// and the closing. Each value replaces the one in force (`None` clears it: no opening time opens the door at
    /// once). A new opening also becomes the "scheduled" opening the draw's liveness rule compares with (see
    /// [`Store::tick`]). Moving the opening later after the door opened shuts it again until then (nobody is
    /// turned away; a draw that ran does not run again).
    Schedule {
        /// When the door opens (ms since the Unix epoch).
        opens_at_ms: Option<u64>,
        /// When the pre-queue opens.
        prequeue_opens_at_ms: Option<u64>,
        /// When the on-sale closes by itself.
        closes_at_ms: Option<u64>,
    },
    /// Report the seats. While every seat is sold ([`Inventory::sold_out`]) joins take no place and the admission
    /// tick turns away everyone still in line, as after [`Close`](Self::Close); a later report with seats
    /// available lets people join again (those turned away stay turned away, and may join again at the back).
    Inventory {
        /// The new inventory.
        inventory: Inventory,
    },
}

impl SettingsChange {
    /// Applies the change to `s`.
    pub fn apply(&self, s: &mut Settings) {
        match *self {
            Self::Capacity { capacity } => s.capacity = capacity,
            Self::AdmitPerMinute { per_minute } => s.admit_per_minute = per_minute,
            Self::Pause => s.paused = true,
            Self::Resume => s.paused = false,
            Self::OpenNow { now_ms } => {
                if s.opens_at_ms.is_none_or(|t| t > now_ms) {
                    s.opens_at_ms = Some(now_ms);
                }
            }
            Self::Close => s.closed = true,
            Self::Schedule {
                opens_at_ms,
                prequeue_opens_at_ms,
                closes_at_ms,
            } => {
                s.opens_at_ms = opens_at_ms;
                s.prequeue_opens_at_ms = prequeue_opens_at_ms;
                s.closes_at_ms = closes_at_ms;
            }
            Self::Inventory { inventory } => s.inventory = Some(inventory),
        }
    }
}

/// A request to join the line.
#[derive(Debug, Clone)]
pub struct Join {
    /// The session joining.
    pub session: String,
    /// The account, when the app supplies one: an account holds one place whichever session asks.
    pub account: Option<String>,
    /// The time of joining.
    pub now_ms: u64,
    /// A secret random key for the draw (used only when joining the pre-queue).
    pub draw_key: u64,
}

/// A batch of liveness marks and touches, flushed by the room about once a second.
#[derive(Debug, Clone, Default)]
pub struct Touches {
    /// The time of the flush.
    pub now_ms: u64,
    /// Waiting or pre-queued sessions that polled since the last flush.
    pub waiting: Vec<Mark>,
    /// Active sessions that made a protected request since the last flush (their idle deadline moves), and
    /// admitted ones the room let claim their pass from what it knew (see [`Store::claims_in_touches`]): an
    /// admitted session here turns active, as [`Store::claim`] turns it. Sessions neither admitted nor active are
    /// passed over.
    pub active: Vec<String>,
    /// How long an active session may idle before it expires.
    pub idle_timeout_ms: u64,
    /// The room's abandon grace ([`Tick::abandon_after_ms`]): how long a liveness mark must stay readable. A store
    /// may keep marks in coarse time slots and drop them after this.
    pub abandon_after_ms: u64,
    /// Tickets the room gave out since the last flush that no store call counted: numbers from
    /// [`Store::line_tickets`], and pre-queue tickets a room whose store asks for batches
    /// ([`Store::ticket_batch`] above 1) gives from its snapshot before the draw. The store adds them to
    /// [`Counters::tickets`]; a store that batches must count them here.
    pub tickets: u64,
}

/// One waiting session's liveness mark: it polled.
///
/// `number` is its line number when the room knows it (from the session's signed cookie or the store), `None` in
/// the pre-queue. A store may record a numbered mark by number alone (`RedisStore` sets one bit of a bitmap per
/// number, far cheaper than rewriting the session's record), so the number must be the one the store gave this
/// session for its current join.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mark {
    /// The session.
    pub session: String,
    /// Its line number, when known.
    pub number: Option<u64>,
}

impl Touches {
    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.active.is_empty() && self.tickets == 0
    }
}

/// The parameters of one admission tick.
#[derive(Debug, Clone)]
pub struct Tick {
    /// The time of the tick.
    pub now_ms: u64,
    /// How long an admitted session has to come and claim its place; then the place frees and the session is
    /// [`SessionState::Missed`] (named in [`TickReport::missed`]), keeping its turn for the return window.
    pub arrival_window_ms: u64,
    /// A waiting session not seen for this long is skipped when it reaches the head ([`SessionState::Missed`]).
    pub abandon_after_ms: u64,
    /// How long a session whose turn came while it was away keeps that turn: a [`SessionState::Missed`] session
    /// missed at `t` is ended [`SessionState::Abandoned`] by the first tick at or after `t + return_window_ms`
    /// (0: at once, by the tick that skipped it).
    pub return_window_ms: u64,
    /// The most sessions this call may look at: let in or skipped (from the front lane, the returning queue and
    /// the head), turned away (also at most [`TURN_AWAY_PER_TICK`]), expired, and missed sessions whose window
    /// passed; a store may count other bounded steps against it (Redis: finishes read from the stream, empty
    /// pre-queue buckets passed). Bounds one call's work: a call that stops at it says so
    /// ([`TickReport::more`]) and the room calls again, up to its `max_scan_per_tick` a tick.
    ///
    /// People away at the head of the line do not use it: the head passes them to let the next present person in
    /// (a bounded number a call, each store by its own means), and the calls name them in
    /// [`TickReport::missed`] out of what is left of this budget, so a report never names more than `max_scan`
    /// sessions, and the door's pace does not depend on how many went quiet before the people present.
    pub max_scan: u64,
}

/// A return counted by [`Store::come_back`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Return {
    /// Within the return window: the session is [`SessionState::Returning`] now.
    InTime,
    /// After the window: the session is [`SessionState::Abandoned`] (its next join starts at the back).
    TooLate,
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Sessions let in.
    pub admitted: Vec<String>,
    /// Sessions skipped because they were away when their turn came (from the head, or from the returning
    /// queue), or let in and not come within the arrival window: now [`SessionState::Missed`], keeping their turn
    /// for the return window.
    pub missed: Vec<String>,
    /// Missed sessions whose return window passed without a return: now [`SessionState::Abandoned`].
    pub abandoned: Vec<String>,
    /// Sessions turned away because the on-sale is closed or sold out (from the head of the line, then the
    /// pre-queue; at most [`TURN_AWAY_PER_TICK`]).
    pub turned_away: Vec<String>,
    /// Active sessions that idled past their deadline.
    pub expired: Vec<String>,
    /// Whether this tick ran the random draw.
    pub drew: bool,
    /// The call stopped at its budget ([`Tick::max_scan`]) with work maybe left (people to let in while there is
    /// room, to turn away, to expire or to end): another call at the same time may do more. `false`: another call
    /// now would let nobody in and turn nobody away.
    pub more: bool,
}

impl TickReport {
    /// Adds what a later call of the same tick did (the lists in call order).
    pub fn absorb(&mut self, later: TickReport) {
        self.admitted.extend(later.admitted);
        self.missed.extend(later.missed);
        self.abandoned.extend(later.abandoned);
        self.turned_away.extend(later.turned_away);
        self.expired.extend(later.expired);
        self.drew |= later.drew;
        self.more = later.more;
    }

    /// Sessions this report looked at, counted against [`Tick::max_scan`] and the room's `max_scan_per_tick`.
    pub fn looked_at(&self) -> u64 {
        (self.admitted.len()
            + self.missed.len()
            + self.abandoned.len()
            + self.turned_away.len()
            + self.expired.len()) as u64
    }
}

/// Running totals of one on-sale.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Joins (a rejoin after a terminal state counts again).
    pub joined: u64,
    /// Admissions: sessions let in (one let in again after its admission lapsed, see
    /// [`missed`](Self::missed), counts again).
    pub admitted: u64,
    /// Sessions finished by the order service.
    pub finished: u64,
    /// Active sessions that idled out.
    pub expired: u64,
    /// Missed sessions whose return window passed without a return (each ended [`SessionState::Abandoned`]).
    pub abandoned: u64,
    /// Turns that came while the session was away: skips at the head (or at the front of the returning queue),
    /// and admissions not claimed within the arrival window.
    #[serde(default)]
    pub missed: u64,
    /// Missed sessions that came back within the return window.
    #[serde(default)]
    pub returned: u64,
    /// Missed sessions that came back after the window (counted once each, at the first look after the window).
    #[serde(default)]
    pub returned_late: u64,
    /// Sessions still in line (or in the pre-queue) when the on-sale closed or sold out, turned away.
    #[serde(default)]
    pub turned_away: u64,
    /// Tickets given to first contacts ([`Store::ticket`]): each took a number (or a pre-queue ticket) and wrote
    /// no session.
    #[serde(default)]
    pub tickets: u64,
    /// Tickets that came back and took their place ([`Store::redeem`]); also counted in
    /// [`joined`](Self::joined). `tickets - redeemed` were never claimed (or are still within the grace).
    #[serde(default)]
    pub redeemed: u64,
    /// Finished sessions that bought at least one seat.
    pub orders: u64,
    /// Seats bought by finished sessions.
    pub seats_bought: u64,
}

/// Where a page of the random draw's numbers starts ([`Store::drawn_numbers`]); the default is the first page.
/// Opaque to the room: a store writes it and reads it back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrawCursor {
    /// The pre-queue bucket the page starts in.
    pub bucket: u64,
    /// Within it, after this score and member (both empty: from its start).
    pub after: Option<(String, String)>,
}

/// A page of the random draw's numbers ([`Store::drawn_numbers`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrawnPage {
    /// Sessions waiting in the drawn segment, with their line numbers.
    pub numbers: Vec<(String, u64)>,
    /// Where the next page starts; `None` after the last.
    pub next: Option<DrawCursor>,
}

/// The shared numbers every instance refreshes a few times a second.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The settings in force.
    pub settings: Settings,
    /// Whether the random draw has run (always true without a draw).
    pub drawn: bool,
    /// Sessions in the pre-queue (before the draw).
    pub prequeue: u64,
    /// The highest line number given out.
    pub last_number: u64,
    /// Numbers that have left the head (admitted, skipped or turned away).
    pub served: u64,
    /// Sessions admitted or active now.
    pub active: u64,
    /// Sessions in the returning queue ([`SessionState::Returning`]).
    #[serde(default)]
    pub returning: u64,
    /// Running totals.
    pub counters: Counters,
    /// Sessions an operator moved to the front ([`Store::move_to_front`]) whose old line number the head has not
    /// reached yet: a room must not answer them from the number in their cookie (they are let in ahead of it).
    #[serde(default)]
    pub moved: Vec<String>,
    /// Who holds the numbers after the head, for positions that count only the people in line ("The numbers
    /// count the living" in the module docs). `None` from a store that does not count them: positions are then
    /// line numbers minus `served`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveLine>,
    /// Set once the store was restored after it lost the on-sale ([`Store::restore`]): the last number given out
    /// before the loss. Sessions holding a number up to it (or a pre-queue mark) may be unknown to the store and
    /// are taken back with [`Store::reclaim`].
    #[serde(default)]
    pub reclaim_upto: Option<u64>,
    /// Sessions let in since this store handle's previous snapshot, with their line numbers (`None` for a session
    /// moved to the front, which has none), as far as the store names them (`RedisStore`:
    /// those it holds as admitted, a page of at most [`ADMITTED_PER_SNAPSHOT`] a snapshot; the embedded store
    /// none: its one room knows whom its ticks let in). A room whose store [claims in
    /// touches](Store::claims_in_touches) answers their first poll from memory and claims them with its next
    /// touches, instead of a lookup and a claim each.
    #[serde(default, skip)]
    pub admitted_lately: Vec<(String, Option<u64>)>,
}

/// Most sessions a snapshot names as let in since the previous one ([`Snapshot::admitted_lately`]); the rest come
/// with the next snapshots. At the seed's opening (8,000 let in at once) a page of 500 made the snapshots around
/// it the longest Redis calls of the on-sale, 2 to 3 ms and once 5.9 ms (BENCHMARKS.md, "The opening's instance
/// work"); with 250 an instance hears of all 8,000 within 32 snapshots (8 s at the default refresh), and anyone it
/// has not heard of yet is asked of the store, as before.
pub const ADMITTED_PER_SNAPSHOT: usize = 250;

/// Most sessions moved to the front whose old number the head has not passed yet ([`Store::move_to_front`]
/// refuses more): every instance reads them with each snapshot.
pub const MAX_MOVED: usize = 1_000;

impl Snapshot {
    /// Sessions in line, in the pre-queue or in the returning queue (sessions that gave up count until the head
    /// reaches them; with [`live`](Self::live) counts, numbers nobody holds do not count, except those a restore
    /// keeps for their owners).
    pub fn waiting(&self) -> u64 {
        let line = match &self.live {
            Some(live) => live.total + self.kept_below(live, u64::MAX),
            None => self.last_number.saturating_sub(self.served),
        };
        line + self.prequeue + self.returning
    }

    /// After a restore: the numbers below `n` kept for owners not back yet (up to
    /// [`reclaim_upto`](Self::reclaim_upto), after the head, held by nobody in `live`).
    fn kept_below(&self, live: &LiveLine, n: u64) -> u64 {
        match self.reclaim_upto {
            Some(upto) if upto > self.served && n > self.served + 1 => {
                let upto = upto.min(n - 1);
                (upto - self.served).saturating_sub(live.ahead_of(upto + 1))
            }
            _ => 0,
        }
    }

    /// The position of line number `n` (1 = next): the people in line holding a number before it, plus one; without
    /// [`live`](Self::live) counts, `n - served`. A number given out after this snapshot was read (after
    /// `last_number`) counts as a person until the next snapshot says whether it is one, so a person's position
    /// never starts too low (it may start high by the tickets given out in one refresh interval).
    ///
    /// After a restore, the numbers kept for their owners (up to [`reclaim_upto`](Self::reclaim_upto)) count as
    /// people whether or not their owners are back yet: they were people when the store lost them.
    pub fn position_of(&self, n: u64) -> u64 {
        match &self.live {
            Some(live) => {
                live.ahead_of(n)
                    + self.kept_below(live, n)
                    + n.saturating_sub(self.last_number.saturating_add(1))
                    + 1
            }
            None => n.saturating_sub(self.served).max(1),
        }
    }

    /// Sessions whose turn came while they were away and that may still come back for it
    /// ([`SessionState::Missed`] within the return window).
    pub fn away(&self) -> u64 {
        let c = &self.counters;
        c.missed.saturating_sub(c.returned + c.abandoned)
    }
}

/// The numbers held by sessions waiting in line after the head, as a sparse bitmap with running counts: what a
/// room computes positions from, with no store call ([`Snapshot::position_of`]). Numbers nobody holds (tickets not
/// redeemed, places kept for owners not back) are not in it, so a flood of one-shot requests moves nobody back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveLine {
    /// Sessions in it.
    pub total: u64,
    /// `(w, bits, before)`, ascending by `w`, one entry per 64 numbers where someone waits: bit `b` of `bits` is set
    /// when number `64 * w + b` is held; `before` counts the bits of the entries before this one.
    pub words: Vec<(u64, u64, u64)>,
}

impl LiveLine {
    /// How many held numbers are below `n`.
    pub fn ahead_of(&self, n: u64) -> u64 {
        let w = n / 64;
        let i = self.index_of(w);
        match self.words.get(i) {
            Some(&(ew, bits, before)) if ew == w => {
                before + u64::from((bits & ((1u64 << (n % 64)) - 1)).count_ones())
            }
            Some(&(_, _, before)) => before,
            None => self.total,
        }
    }

    /// The index of the first entry whose word is at or after `w` (`words.partition_point(|e| e.0 < w)`), found
    /// by interpolation: the entries' words ascend, mostly in dense runs (the drawn segment, people who joined
    /// in a row), where the first guess is the entry itself. A few guesses narrow a sparse stretch (a flood's
    /// unclaimed numbers) before a binary search of what is left. Every poll of a person in line asks this, and a
    /// plain binary search of hundreds of thousands of entries reads a cache line that is seldom cached at each of
    /// its ~20 steps.
    fn index_of(&self, w: u64) -> usize {
        let s = &self.words;
        // The answer lies in lo..=hi.
        let (mut lo, mut hi) = (0usize, s.len());
        for _ in 0..4 {
            if hi - lo <= 8 {
                break;
            }
            let (a, b) = (s[lo].0, s[hi - 1].0);
            if w <= a {
                return lo;
            }
            if w > b {
                return hi;
            }
            // a < w <= b, so lo <= guess <= hi - 1 (and g == a < w when guess == lo: lo moves on).
            let span = (hi - 1 - lo) as u128;
            let guess = lo + ((u128::from(w - a) * span) / u128::from(b - a)) as usize;
            let g = s[guess].0;
            if g == w {
                return guess;
            }
            if g < w {
                lo = guess + 1;
            } else {
                hi = guess;
            }
        }
        lo + s[lo..hi].partition_point(|e| e.0 < w)
    }
}

/// How many admin actions a store keeps in an on-sale's audit log ([`Store::audit`]); older ones are dropped.
pub const AUDIT_KEEP: usize = 1_000;

/// One operator action, as the audit log keeps it: who (the admin token's name), what, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When, ms since the Unix epoch (the room's clock).
    pub at_ms: u64,
    /// Who: the name of the admin token used.
    pub who: String,
    /// What: the admin call (`pause`, `capacity`, `schedule`, `session-finish`...).
    pub action: String,
    /// The call's arguments, as JSON text (a session appears as its fingerprint, never its id).
    pub detail: String,
}

/// One session as an operator sees it ([`Store::inspect`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionDetail {
    /// Where it stands.
    pub placement: Placement,
    /// When it was let in (ms since the Unix epoch), while it is admitted or active; `None` otherwise or when the
    /// store does not record it.
    pub admitted_at_ms: Option<u64>,
}

/// What an on-sale the store lost is restored from ([`Store::restore`]): the room's last view of it.
#[derive(Debug, Clone)]
pub struct Restore {
    /// The settings last in force.
    pub settings: Settings,
    /// Whether the random draw had run (a restored on-sale that had drawn numbers its newcomers at once).
    pub drawn: bool,
    /// The highest line number given out, as far as the room knows (the floor for new numbers).
    pub last_number: u64,
    /// Numbers that had left the head (the head starts after them).
    pub served: u64,
    /// The running totals, kept going.
    pub counters: Counters,
    /// The time of the restore.
    pub now_ms: u64,
    /// Nobody is let in until `now_ms + hold_ms`: the owners of the numbers come back first.
    pub hold_ms: u64,
    /// Until `now_ms + late_ms`, a session whose number the head passed while the store did not know it goes
    /// ahead of the line when it comes back ([`Store::reclaim`]); later it joins at the back, as an abandoned
    /// session would.
    pub late_ms: u64,
    /// The store knows the on-sale but is behind this view: it gave out fewer numbers than the room has seen (a
    /// failover to a replica that had not caught up). Only the number floor is applied: the numbers it lost
    /// (`last_number` of the store `+ 1 ..=` [`last_number`](Self::last_number)) are kept free for their owners,
    /// who are taken back from their cookies as after a full restore (the hold and the late window included); the
    /// rest of the store is kept.
    pub behind: bool,
}

/// A session the store may not know, asking for its place back ([`Store::reclaim`]).
#[derive(Debug, Clone)]
pub struct Reclaim {
    /// The session.
    pub session: String,
    /// The line number from its signed cookie; `None` for a pre-queue mark.
    pub number: Option<u64>,
    /// The time of the request.
    pub now_ms: u64,
    /// A secret random key for the draw (used only when it rejoins the pre-queue).
    pub draw_key: u64,
}

/// What a first contact gets ([`Store::ticket`]): a place in FIFO order that the store does not record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "number")]
pub enum Ticket {
    /// The next line number.
    Number(u64),
    /// Before the draw: a pre-queue ticket (no number; the draw orders whoever redeems it in time).
    PreQueue,
    /// Closed or sold out: no place.
    TurnedAway,
}

/// A ticket coming back to take its place ([`Store::redeem`]).
#[derive(Debug, Clone)]
pub struct Redeem {
    /// The session (the ticket's id).
    pub session: String,
    /// The ticket's line number; `None` for a pre-queue ticket.
    pub number: Option<u64>,
    /// When the ticket was given out (ms since the Unix epoch; the signed cookie carries it, to the second).
    pub issued_ms: u64,
    /// The time of the request.
    pub now_ms: u64,
    /// How long a ticket stays good: the room's abandon grace ([`Tick::abandon_after_ms`]). An older ticket takes
    /// no place.
    pub grace_ms: u64,
    /// A secret random key for the draw (a pre-queue ticket joins the pre-queue with it).
    pub draw_key: u64,
}

/// Most numbers one reclaim may leave free after `last_number` (a number further on is not taken back): bounds the
/// work of one call and the store's memory (`RedisStore` keeps a free number as an empty list entry, a few bytes).
pub const MAX_RECLAIM_GAP: u64 = 1_000_000;

/// The line's storage. See the module docs.
///
/// Every method is atomic with respect to the others, for every caller sharing the store.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// Writes `defaults` as the settings of `event` unless it already has settings; returns the settings in force.
    async fn init(&self, event: &str, defaults: &Settings) -> Result<Settings, StoreError>;

    /// Joins the line. Idempotent: a session (or account) already in line or admitted (or missed, or returning)
    /// gets its place back (a missed one comes back by [`come_back`](Store::come_back), not here). A session
    /// whose last join ended (finished, expired, abandoned, turned away) joins again at the back.
    ///
    /// While the on-sale is closed or sold out ([`Settings::turning_away`]) a session without a place takes none:
    /// the answer is a placement in [`SessionState::TurnedAway`] with no number, nothing is recorded (a lookup
    /// answers what it answered before) and the join is not counted in [`Counters::joined`].
    async fn join(&self, event: &str, join: &Join) -> Result<Placement, StoreError>;

    /// A first contact's ticket: the next line number (after the draw, or without one) or a pre-queue ticket
    /// (before it), with **no session record and no line entry**: what it costs is the number, and
    /// [`Counters::tickets`]. Runs the draw when it is due (as a join does). While the on-sale is closed or sold
    /// out: [`Ticket::TurnedAway`], nothing counted. See "Tickets" in the module docs.
    async fn ticket(&self, event: &str, now_ms: u64) -> Result<Ticket, StoreError>;

    /// `count` first contacts' tickets in one step, in order: as `count` calls of [`ticket`](Store::ticket) one
    /// after the other with no other call in between, so numbered tickets are `count` consecutive numbers, the
    /// first for the first asker (before the draw: `count` pre-queue tickets; closed or sold out: `count`
    /// [`Ticket::TurnedAway`]). [`Counters::tickets`] counts each. A room whose store asks for batches
    /// ([`ticket_batch`](Store::ticket_batch)) gathers the first contacts that arrive while its previous call is
    /// under way into one such call (see "Tickets" in the module docs).
    ///
    /// The default calls [`ticket`](Store::ticket) `count` times: the numbers are in order and distinct, but
    /// another caller's tickets may fall between them. Both stores of this crate give out the range in one step.
    async fn tickets(
        &self,
        event: &str,
        count: usize,
        now_ms: u64,
    ) -> Result<Vec<Ticket>, StoreError> {
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            out.push(self.ticket(event, now_ms).await?);
        }
        Ok(out)
    }

    /// `count` numbered tickets for first contacts, for a room whose last snapshot shows the line numbered and open
    /// to them (drawn, or first come first served; neither closed nor sold out): the last of `count` consecutive
    /// numbers, the first for the first asker, as [`tickets`](Store::tickets) gives them in that state. The store
    /// reads no setting and counts nothing: the room sends the count with its next [`touch`](Store::touch)
    /// ([`Touches::tickets`]), so [`Counters::tickets`] lags by at most a flush interval (and misses up to an
    /// instance's last flush interval of tickets when it stops or crashes: the metric only). `known_last` is the highest number the room has seen the
    /// store give out: a store whose counter is behind it gives none of those numbers out. One that no longer
    /// knows the on-sale answers [`StoreError::Forgotten`] (the room restores it and asks again); one that knows it
    /// but lost its latest writes answers [`StoreError::Behind`] (the room gives it the floor back and asks again),
    /// so a store that lost data gives no number twice.
    ///
    /// A state that changed since the snapshot (the on-sale closed or sold out a moment ago) costs nothing but
    /// numbers: a ticket that comes back while closed or sold out takes no place ([`redeem`](Store::redeem)).
    ///
    /// `Ok(None)` (the default): not offered; the room calls [`tickets`](Store::tickets). `RedisStore`: one
    /// `HINCRBY` for the whole batch, where `TICKET` is a script that reads the settings (four commands).
    async fn line_tickets(
        &self,
        event: &str,
        count: usize,
        known_last: u64,
    ) -> Result<Option<u64>, StoreError> {
        let _ = (event, count, known_last);
        Ok(None)
    }

    /// The most first contacts a room gathers into one [`tickets`](Store::tickets) call. `1` (the default): the
    /// room asks for each ticket at once, right for a store in the same process, where a call costs less than
    /// gathering. A store a network round trip away asks for more (`RedisStore`: 1,024), so the work per first
    /// contact falls to a fraction of one round trip.
    fn ticket_batch(&self) -> usize {
        1
    }

    /// Whether the room claims an admitted session's pass from what it knows
    /// ([`Snapshot::admitted_lately`]) and sends the claim with its next [`touch`](Store::touch) (at most a flush
    /// interval, a second, later), instead of a [`claim`](Store::claim) call at the session's first poll. False
    /// (the default): every claim is a call, right for a store in the same process. `RedisStore`: true, so the
    /// 8,000 let in at an opening cost no round trip each. Either way the store's arrival window holds the place
    /// meanwhile; an instance that crashes with claims unsent leaves those sessions admitted, so the store frees
    /// their places after the arrival window while they hold a pass (at most one flush interval's claims; they are
    /// then counted missed, away, though their pass still works).
    fn claims_in_touches(&self) -> bool {
        false
    }

    /// A ticket comes back within the grace: the session is written at the ticket's number, as a join would have
    /// written it ([`Counters::joined`] and [`Counters::redeemed`] count it). Idempotent: a session the store
    /// knows gets its placement, unchanged (one ticket copied to many clients takes one place). `None` (nothing
    /// written): the ticket is older than [`Redeem::grace_ms`], the on-sale is closed or sold out, a pre-queue
    /// ticket comes back after the draw, or the number is not free (the room then gives a new ticket, at the
    /// back). A number the head passed while the ticket was out goes ahead of the line (as a reclaim within the
    /// late window does): its holder was in front of everyone waiting. See "Tickets" in the module docs.
    async fn redeem(&self, event: &str, redeem: &Redeem) -> Result<Option<Placement>, StoreError>;

    /// Where a session stands, if the store knows it. A session that ended (finished, expired, abandoned, turned
    /// away) is known for the return window after it ended (at least an abandon grace), by the clock of the last
    /// [`tick`](Store::tick), and forgotten after that: `None`, in both stores (the contract test
    /// `ended_sessions_are_forgotten_after_the_return_window`).
    async fn lookup(&self, event: &str, session: &str) -> Result<Option<Placement>, StoreError>;

    /// Where a session stands, as [`lookup`](Store::lookup), for a session that is here now (it polled or made a
    /// request): a [`SessionState::Missed`] session missed less than `return_window_ms` before `now_ms` comes back:
    /// it turns [`SessionState::Returning`] (seen at `now_ms`), joins the back of the returning queue and counts in
    /// [`Counters::returned`]. One missed longer ago turns [`SessionState::Abandoned`] (if no tick did that yet);
    /// the first such look at an abandoned session counts in [`Counters::returned_late`]. Anything else is
    /// answered as [`lookup`](Store::lookup) answers it. The second value says whether this call counted a return
    /// (each return is counted by one call only, whichever instance makes it).
    async fn come_back(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
        return_window_ms: u64,
    ) -> Result<(Option<Placement>, Option<Return>), StoreError>;

    /// The random draw's numbers, a page at a time, for a room instance to keep (so a drawn person's first poll
    /// after the draw is answered without a store call: see `WaitingRoom`'s draw index). The page starts at `from`
    /// ([`DrawCursor::default`] for the first) and holds at most `most` sessions still waiting in the drawn
    /// segment, each with the line number [`lookup`](Store::lookup) would answer for it at the time of the call,
    /// and the cursor of the next page (`None` after the last). Sessions that left the segment between two pages
    /// (let in, moved to the front) are simply not in later pages; the numbers of the others do not change.
    ///
    /// `Ok(None)`: this store does not page its draw, or nothing is drawn yet; the room then asks per session.
    /// The default answers `None`: right for a store in the same process, whose lookups cost no round trip.
    async fn drawn_numbers(
        &self,
        event: &str,
        from: &DrawCursor,
        most: usize,
    ) -> Result<Option<DrawnPage>, StoreError> {
        let _ = (event, from, most);
        Ok(None)
    }

    /// Turns an admitted session active (it came to claim its pass); its idle deadline starts. Returns its
    /// placement; an already active session stays active and is touched.
    async fn claim(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
        idle_timeout_ms: u64,
    ) -> Result<Option<Placement>, StoreError>;

    /// Records a batch of liveness marks (waiting) and touches (active).
    async fn touch(&self, event: &str, touches: &Touches) -> Result<(), StoreError>;

    /// One call of the admission tick, bounded by [`Tick::max_scan`] (see there what counts): when it stops at the
    /// bound it sets [`TickReport::more`] and the room calls again, so a tick is as many short calls as its work
    /// needs. Each call is one atomic step that reads the capacity afresh: several instances' calls may
    /// interleave, the capacity holds exactly and people go in in line order (the order of the calls).
    ///
    /// The tick: runs the draw when due, expires idle sessions, then lets people in from the head while
    /// the door is open, `active < capacity` and the per-minute cap allows, skipping absent sessions (they miss
    /// their turn). While the on-sale is closed or sold out ([`Settings::turning_away`]) it instead turns away up to
    /// [`TURN_AWAY_PER_TICK`] sessions: from the head of the line (each number counts as served, as a skip does),
    /// then from the pre-queue (no number; it leaves the pre-queue count). With an
    /// inventory, no more people are let in within a sliding minute than there are seats available (so the last
    /// few seats do not draw thousands onto an empty seat map).
    ///
    /// Before the head of the line it serves the returning queue ([`SessionState::Returning`], in the order they
    /// came back), within the same rules and the same budget; while closed or sold out it turns that queue away
    /// first. Last, it ends [`SessionState::Abandoned`] (at most [`Tick::max_scan`]) the missed sessions whose
    /// return window has passed.
    ///
    /// A session is missed when its last mark (or its join, or its return) is older than
    /// [`Tick::abandon_after_ms`]; a store that keeps marks in time slots may round in the session's favour (never
    /// against it). A draw that runs
    /// before the opening first configured (the door opened early) counts every drawn session as seen at the draw.
    async fn tick(&self, event: &str, tick: &Tick) -> Result<TickReport, StoreError>;

    /// Marks an admitted or active session finished (it leaves the active count at once); `seats` is what its
    /// order bought, added to the inventory's sold seats. Returns whether the session was admitted or active.
    async fn finish(
        &self,
        event: &str,
        session: &str,
        seats: u32,
        now_ms: u64,
    ) -> Result<bool, StoreError>;

    /// The shared numbers.
    async fn snapshot(&self, event: &str) -> Result<Snapshot, StoreError>;

    /// Changes the settings; returns the settings in force after the change.
    async fn update(&self, event: &str, change: &SettingsChange) -> Result<Settings, StoreError>;

    /// Gives the on-sale back to a store that lost it ([`StoreError::Forgotten`]), from the room's last view; see
    /// "When the store forgets" in the module docs. Writes nothing when the store knows the on-sale. Returns the
    /// settings in force.
    async fn restore(&self, event: &str, restore: &Restore) -> Result<Settings, StoreError>;

    /// Takes a session back at the number its signed cookie carries, when the store does not know it; see "When
    /// the store forgets" in the module docs for the rules. Idempotent. `None`: not taken back (nothing written);
    /// the room joins it at the back.
    async fn reclaim(
        &self,
        event: &str,
        reclaim: &Reclaim,
    ) -> Result<Option<Placement>, StoreError>;

    /// Sessions finished since `cursor`, oldest first, and the cursor to pass next time. Each room instance calls
    /// this every tick, so a finish recorded anywhere (another instance, a verifier's finish sink writing to the
    /// store) reaches every instance within a tick or two. A reader that falls far behind may miss old finishes
    /// (stores keep a bounded log); finished sessions are also `Finished` in [`lookup`](Store::lookup).
    ///
    /// An empty `cursor` (an instance that just started, or restarted mid-sale) reads back over the last
    /// `lookback_ms` before `now_ms`: the room passes its tokens' longest life (the idle timeout plus twice the
    /// leeway), so a new instance refuses the token of every session finished while such a token could still be
    /// valid. A store whose log is dated by another clock may measure the window on that clock (`RedisStore` uses
    /// Redis's time, which dates its stream entries); a store may return more than the window (never less of what
    /// it remembers within it). When there are more finishes than one call returns, the cursor continues from the
    /// last one returned.
    ///
    /// The default returns nothing: right for a store only one process writes to, where the room sees every finish
    /// itself.
    async fn finished_since(
        &self,
        event: &str,
        cursor: &str,
        now_ms: u64,
        lookback_ms: u64,
    ) -> Result<(Vec<String>, String), StoreError> {
        let _ = (event, now_ms, lookback_ms);
        Ok((Vec::new(), cursor.to_owned()))
    }

    /// One session for an operator: its placement and, while admitted or active, when it was let in. The default
    /// is [`lookup`](Store::lookup) with no admission time.
    async fn inspect(
        &self,
        event: &str,
        session: &str,
    ) -> Result<Option<SessionDetail>, StoreError> {
        Ok(self
            .lookup(event, session)
            .await?
            .map(|placement| SessionDetail {
                placement,
                admitted_at_ms: None,
            }))
    }

    /// Up to `limit` session ids of `event` for which `matches` is true, in no particular order: how an operator
    /// finds a session by the fingerprint the logs show. A scan of every session record (the Redis store reads
    /// them in batches with `HSCAN`, so Redis serves others in between): for occasional operator use. The default
    /// finds nothing.
    async fn find_sessions(
        &self,
        event: &str,
        matches: &(dyn for<'s> Fn(&'s str) -> bool + Send + Sync),
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let _ = (event, matches, limit);
        Ok(Vec::new())
    }

    /// Moves a waiting session with a line number to the front (customer support): the admission tick lets the
    /// sessions moved to the front in first, in the order they were moved, before the line, within the same
    /// capacity and caps; while the on-sale is closed or sold out it turns them away first. The session's old
    /// number stays in the line as an empty place that the head skips (counted as served), and the session waits
    /// with no number. Until the head passes its old number it is listed in [`Snapshot::moved`]. Returns its new
    /// placement, or `None` (nothing changed) when it is not waiting with a number, or [`MAX_MOVED`] sessions are
    /// already listed. The default moves nothing.
    async fn move_to_front(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
    ) -> Result<Option<Placement>, StoreError> {
        let _ = (event, session, now_ms);
        Ok(None)
    }

    /// Appends one admin action to `event`'s audit log, which keeps the last [`AUDIT_KEEP`]. The default keeps
    /// nothing.
    async fn audit(&self, event: &str, entry: &AuditEntry) -> Result<(), StoreError> {
        let _ = (event, entry);
        Ok(())
    }

    /// The last `limit` entries of `event`'s audit log, newest first.
    async fn audit_log(&self, event: &str, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let _ = (event, limit);
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::LiveLine;
    use proptest::prelude::*;

    fn line_of(words: &std::collections::BTreeSet<u64>) -> LiveLine {
        let mut total = 0;
        let words = words
            .iter()
            .map(|&w| {
                // Two numbers held in each word: its first and its last.
                let e = (w, 1 | 1 << 63, total);
                total += 2;
                e
            })
            .collect();
        LiveLine { total, words }
    }

    proptest! {
        /// The interpolated search finds what a binary search finds, over dense runs, sparse stretches and a mix.
        #[test]
        fn ahead_of_counts_the_held_numbers_below_any_number(
            runs in prop::collection::vec((0u64..1 << 40, 1u64..3_000), 0..6),
            stray in prop::collection::btree_set(0u64..1 << 42, 0..300),
            probes in prop::collection::vec(0u64..1 << 46, 1..200),
        ) {
            let mut words = stray;
            for (from, len) in runs {
                words.extend(from..from + len);
            }
            let line = line_of(&words);
            let probes = probes.into_iter().chain(words.iter().flat_map(|&w| [w * 64, w * 64 + 1, w * 64 + 64]).take(3_000));
            let sorted: Vec<u64> = words.iter().copied().collect();
            for n in probes {
                let i = sorted.partition_point(|&w| w < n / 64) as u64;
                let expect = i * 2 + if words.contains(&(n / 64)) { u64::from(n % 64 > 0) } else { 0 };
                prop_assert_eq!(line.ahead_of(n), expect, "n = {}", n);
            }
        }
    }
}
