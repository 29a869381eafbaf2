//! The room's figures in the Prometheus (OpenMetrics) text format.
//!
//! Two kinds of figures:
//! - **This instance's counters**, kept in the room's one `Arc` and bumped with one atomic increment where the thing
//!   happens: `waitroom_polls_total` (status polls), `waitroom_join_requests_total`, `waitroom_tokens_issued_total`,
//!   `waitroom_token_refusals_total{reason}` (tokens the room refused on protected paths, by
//!   [`Refusal::code`]), `waitroom_store_errors_total`, `waitroom_store_restores_total` (a store that
//!   forgot the on-sale, restored from this instance's view). Sum them over instances: `sum(rate(...[1m]))`.
//! - **The room's figures**, read from [`WaitingRoom::stats`](crate::WaitingRoom::stats) at scrape time: the line, the door, the seats and the
//!   store's running totals. They come from the shared store, so every instance reports the same value: aggregate
//!   them with `max`, not `sum`.
//!
//! Every series carries the label `event="<on-sale id>"`.

use std::borrow::Cow;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::{Registry, Unit};
use waitroom_verify::Refusal;

use crate::room::RoomStats;

/// The content type of [`WaitingRoom::metrics_text`](crate::WaitingRoom::metrics_text): OpenMetrics text 1.0.0,
/// which Prometheus scrapes natively.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The label of a token refusal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Reason {
    reason: &'static str,
}

/// This instance's counters (one set per room, in the room's `Arc`).
#[derive(Debug)]
pub(crate) struct RoomMetrics {
    pub(crate) polls: Counter,
    pub(crate) joins: Counter,
    pub(crate) tokens_issued: Counter,
    /// Passes claimed from what this instance heard of admissions, the claim sent with the next touches.
    pub(crate) claims_in_touches: Counter,
    /// Tickets this instance gave to first contacts.
    pub(crate) tickets_issued: Counter,
    /// Tickets that came back to this instance and took their place.
    pub(crate) tickets_redeemed: Counter,
    /// Tickets that came back to this instance after the grace (given a new ticket, at the back).
    pub(crate) tickets_expired: Counter,
    /// Store calls that gave out this instance's tickets (one per batch of first contacts).
    pub(crate) ticket_batches: Counter,
    /// Store calls that read a page of the random draw's numbers into this instance (see `room/drawn.rs`).
    pub(crate) draw_pages: Counter,
    /// The random draw's numbers this instance keeps.
    pub(crate) draw_numbers_kept: Gauge,
    pub(crate) store_errors: Counter,
    /// Restores of a store that had forgotten the on-sale.
    pub(crate) store_restores: Counter,
    /// Finishes kept because the store could not take them, waiting to be retried.
    pub(crate) finishes_pending: Gauge,
    /// The longest store call this instance has made (µs), and how many took over 5 ms: see
    /// `WaitingRoom::longest_store_call`.
    pub(crate) store_call_longest_us: std::sync::atomic::AtomicU64,
    pub(crate) store_calls_over_5ms: Counter,
    /// Finishes given up because the queue of pending ones was full.
    pub(crate) finishes_dropped: Counter,
    refusals: Family<Reason, Counter>,
}

impl RoomMetrics {
    pub(crate) fn new() -> Self {
        let refusals = Family::<Reason, Counter>::default();
        // Every reason is present from the start (at 0), so `rate()` sees the first refusal of each.
        for r in Refusal::all() {
            let _ = refusals.get_or_create(&Reason { reason: r.code() });
        }
        Self {
            polls: Counter::default(),
            joins: Counter::default(),
            tokens_issued: Counter::default(),
            claims_in_touches: Counter::default(),
            tickets_issued: Counter::default(),
            tickets_redeemed: Counter::default(),
            tickets_expired: Counter::default(),
            ticket_batches: Counter::default(),
            draw_pages: Counter::default(),
            draw_numbers_kept: Gauge::default(),
            store_errors: Counter::default(),
            store_restores: Counter::default(),
            finishes_pending: Gauge::default(),
            store_call_longest_us: std::sync::atomic::AtomicU64::new(0),
            store_calls_over_5ms: Counter::default(),
            finishes_dropped: Counter::default(),
            refusals,
        }
    }

    /// Counts a token refused on a protected path.
    pub(crate) fn refused(&self, refusal: Refusal) {
        self.refusals
            .get_or_create(&Reason {
                reason: refusal.code(),
            })
            .inc();
    }

    /// The exposition: this instance's counters and the room's figures from `stats`.
    pub(crate) fn render(&self, stats: &RoomStats) -> String {
        let labels = std::iter::once((Cow::Borrowed("event"), Cow::Owned(stats.event.clone())));
        let mut r = Registry::with_prefix_and_labels("waitroom", labels);
        self.register_instance(&mut r);
        // The room (the same on every instance sharing the store).
        register_line(&mut r, stats);
        register_door(&mut r, stats);
        let mut out = String::with_capacity(8 * 1024);
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &r);
        out
    }

    /// This instance's own counters.
    fn register_instance(&self, r: &mut Registry) {
        r.register(
            "polls",
            "Status polls answered by this instance",
            self.polls.clone(),
        );
        r.register(
            "join_requests",
            "Join calls made by this instance (each puts a session in line, or finds it there)",
            self.joins.clone(),
        );
        r.register(
            "tokens_issued",
            "Admission tokens issued or renewed by this instance",
            self.tokens_issued.clone(),
        );
        r.register(
            "claims_in_touches",
            "Passes this instance let claim from the admissions it heard of, the claim sent with its next touches (no store call at the first poll)",
            self.claims_in_touches.clone(),
        );
        r.register(
            "tickets_issued",
            "Tickets this instance gave to first contacts (a number, no session written)",
            self.tickets_issued.clone(),
        );
        r.register(
            "tickets_redeemed",
            "Tickets that came back to this instance within the grace and took their place",
            self.tickets_redeemed.clone(),
        );
        r.register(
            "tickets_expired",
            "Tickets that came back to this instance after the grace (given a new place at the back)",
            self.tickets_expired.clone(),
        );
        r.register(
            "ticket_batches",
            "Store calls that gave out this instance's tickets: one per batch of first contacts (tickets issued over batches is the batch size)",
            self.ticket_batches.clone(),
        );
        r.register(
            "draw_pages",
            "Store calls that read a page of the random draw's numbers into this instance, so drawn people's first polls after the draw need no store call each",
            self.draw_pages.clone(),
        );
        r.register(
            "draw_numbers_kept",
            "The random draw's numbers this instance keeps (read after the draw; at most 4,000,000)",
            self.draw_numbers_kept.clone(),
        );
        r.register(
            "store_calls_over_5ms",
            "Store calls of this instance that took over 5 ms from the call to the answer (the round trip and any wait included; Redis's SLOWLOG times the command alone)",
            self.store_calls_over_5ms.clone(),
        );
        r.register(
            "token_refusals",
            "Tokens refused on protected paths by this instance, by reason (requests without a token are not counted)",
            self.refusals.clone(),
        );
        r.register(
            "store_errors",
            "Store calls that failed on this instance",
            self.store_errors.clone(),
        );
        r.register(
            "store_restores",
            "Times this instance restored an on-sale the store had forgotten (a Redis restarted without persistence)",
            self.store_restores.clone(),
        );
        r.register(
            "finishes_pending",
            "Finishes this instance could not record yet (the store was out of reach), kept and retried in order",
            self.finishes_pending.clone(),
        );
        r.register(
            "finishes_dropped",
            "Finishes given up because the queue of pending finishes was full",
            self.finishes_dropped.clone(),
        );
    }
}

fn gauge(r: &mut Registry, name: &str, help: &str, v: u64) {
    r.register(name, help, ConstGauge::new(v as i64));
}

fn flag(r: &mut Registry, name: &str, help: &str, v: bool) {
    r.register(name, help, ConstGauge::new(i64::from(v)));
}

fn total(r: &mut Registry, name: &str, help: &str, v: u64) {
    r.register(name, help, ConstCounter::new(v));
}

/// The line: who waits, who is in, the running totals.
fn register_line(r: &mut Registry, stats: &RoomStats) {
    gauge(
        r,
        "waiting",
        "People in line (numbers not yet served) plus the pre-queue and the returning queue",
        stats.waiting,
    );
    gauge(
        r,
        "prequeue",
        "People in the pre-queue (joined before the draw)",
        stats.prequeue,
    );
    gauge(
        r,
        "returning",
        "People who came back after missing their turn, waiting to be let in ahead of the line",
        stats.returning,
    );
    gauge(
        r,
        "away",
        "People whose turn came while they were away and who may still come back (within the return window)",
        stats.away,
    );
    gauge(r, "active", "Sessions admitted or active", stats.active);
    gauge(
        r,
        "capacity",
        "Most sessions active at once",
        stats.capacity,
    );
    if let Some(n) = stats.admit_per_minute {
        gauge(
            r,
            "admit_per_minute",
            "Most new admissions in any minute (absent when no cap is set)",
            n,
        );
    }
    total(
        r,
        "served",
        "Line numbers that left the head (admitted, skipped or turned away)",
        stats.served,
    );
    let c = &stats.counters;
    total(r, "joined", "Sessions that joined the line", c.joined);
    total(
        r,
        "tickets",
        "Tickets given to first contacts, by every instance (each a number; no session written)",
        c.tickets,
    );
    total(
        r,
        "tickets_claimed",
        "Tickets that came back within the grace and took their place (also counted in joined)",
        c.redeemed,
    );
    gauge(
        r,
        "tickets_unclaimed",
        "Tickets given out and never claimed (or still within the grace): tickets minus tickets claimed",
        c.tickets.saturating_sub(c.redeemed),
    );
    total(
        r,
        "admitted",
        "Admissions (a session let in again after its admission lapsed counts again)",
        c.admitted,
    );
    total(
        r,
        "finished",
        "Sessions finished by the order service",
        c.finished,
    );
    total(r, "expired", "Active sessions that idled out", c.expired);
    total(
        r,
        "missed",
        "Turns that came while the session was away (skipped, or let in and not come within the arrival window; it keeps its turn for the return window)",
        c.missed,
    );
    total(
        r,
        "returned",
        "Sessions that came back within the return window after missing their turn",
        c.returned,
    );
    total(
        r,
        "returned_late",
        "Sessions that came back after the return window (told their turn passed)",
        c.returned_late,
    );
    total(
        r,
        "abandoned",
        "Sessions that missed their turn and did not come back within the return window",
        c.abandoned,
    );
    total(
        r,
        "turned_away",
        "Sessions still in line when the on-sale closed or sold out, turned away",
        c.turned_away,
    );
    total(
        r,
        "orders",
        "Finished sessions that bought at least one seat",
        c.orders,
    );
    total(
        r,
        "seats_bought",
        "Seats bought by finished sessions",
        c.seats_bought,
    );
}

/// The door: its pace, the seats, its switches.
fn register_door(r: &mut Registry, stats: &RoomStats) {
    if let Some(rate) = stats.head_rate_per_minute {
        r.register(
            "head_rate_per_minute",
            "Places freeing per minute at the head, as measured (absent until measured)",
            ConstGauge::new(rate),
        );
    }
    r.register(
        "served_per_minute",
        "Line numbers served over the last minute",
        ConstGauge::new(stats.served_per_minute),
    );
    r.register(
        "admitted_per_minute",
        "Sessions let in over the last minute (the measured admission rate)",
        ConstGauge::new(stats.admitted_per_minute),
    );
    r.register_with_unit(
        "tail_eta",
        "Estimated wait at the back of the line (0 when nobody waits)",
        Unit::Seconds,
        ConstGauge::new(stats.tail_eta_seconds.unwrap_or(0) as i64),
    );
    if let Some(inv) = stats.inventory {
        gauge(
            r,
            "seats_on_sale",
            "Seats on sale in all (absent until the app reports its inventory)",
            inv.total,
        );
        gauge(r, "seats_sold", "Seats sold", inv.sold);
        gauge(
            r,
            "seats_held",
            "Seats held at checkout (they come back if the hold expires)",
            inv.held,
        );
        gauge(
            r,
            "seats_available",
            "Seats neither sold nor held",
            inv.available(),
        );
    }
    flag(
        r,
        "paused",
        "1 while an operator has paused the door",
        stats.paused,
    );
    flag(
        r,
        "door_open",
        "1 while the door lets people in as places free (open, full or at its per-minute cap; not before the opening, paused, held, closed or sold out)",
        matches!(stats.door.state, "open" | "full" | "capped"),
    );
    flag(r, "closed", "1 once the on-sale is closed", stats.closed);
    flag(r, "sold_out", "1 once every seat is sold", stats.sold_out);
    flag(
        r,
        "store_up",
        "1 while this instance reaches the store",
        stats.store_ok,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_reason_is_present_from_the_start() {
        let m = RoomMetrics::new();
        let stats = RoomStats {
            event: "ev".into(),
            waiting: 3,
            prequeue: 0,
            returning: 0,
            away: 0,
            active: 2,
            capacity: 5,
            admit_per_minute: None,
            served: 4,
            counters: Default::default(),
            head_rate_per_minute: None,
            served_per_minute: 0.0,
            admitted_per_minute: 0.0,
            tail_eta_seconds: None,
            inventory: None,
            paused: false,
            closed: false,
            sold_out: false,
            opens_at: None,
            store_ok: true,
            door: crate::room::Door {
                state: "open",
                why: String::new(),
            },
            opens_at_ms: None,
            prequeue_opens_at_ms: None,
            closes_at_ms: None,
            now_ms: 0,
        };
        m.polls.inc();
        m.refused(Refusal::Expired);
        let text = m.render(&stats);
        for r in Refusal::all() {
            assert!(
                text.contains(&format!("reason=\"{}\"", r.code())),
                "{}",
                r.code()
            );
        }
        assert!(text.contains("waitroom_token_refusals_total{event=\"ev\",reason=\"expired\"} 1"));
        assert!(text.contains("waitroom_polls_total{event=\"ev\"} 1"));
        assert!(text.contains("waitroom_waiting{event=\"ev\"} 3"));
        assert!(text.contains("waitroom_tail_eta_seconds{event=\"ev\"} 0"));
        assert!(!text.contains("waitroom_seats_sold"));
        assert!(text.ends_with("# EOF\n"));
    }
}
