//! What the room tells: a session's [`Status`] (local, no store call), the operators' [`RoomStats`], the pace the
//! estimates use, and the counters behind the metrics.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;
use waitroom_verify::fingerprint;

use super::WaitingRoom;
use super::estimate::{self, Eta};
use crate::store::{Inventory, Placement, SessionState, Snapshot};

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
    /// Its turn came while it was away, and it came back within the return window: it is let in at the next free
    /// place, ahead of the line (usually at the next admission tick; ask again after `refresh_seconds`).
    Returning,
    /// Its turn came while it was away and passed: it did not come back within the return window. Its next
    /// protected request joins the line again, at the back.
    Missed,
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
            Self::Returning => "returning",
            Self::Missed => "missed",
        }
    }
}

/// Why the door lets nobody in now ([`Status::stopped`]): the page says so instead of a wait it cannot promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// An operator paused the door; it moves again when they resume it. No wait is given.
    Paused,
    /// Every seat left is held by people at checkout; some may come back when a hold lapses or a payment fails.
    /// No wait is given.
    SeatsHeld,
    /// The door opens at [`Status::opens_at`]; the wait given starts then.
    NotOpen,
}

impl Stopped {
    /// The reason's wire name (JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Paused => "paused",
            Self::SeatsHeld => "seats_held",
            Self::NotOpen => "not_open",
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
    /// Why the door lets nobody in now, for a person in line (or in the pre-queue); `None` while it moves.
    pub stopped: Option<Stopped>,
    /// False when the shared store could not be reached lately: the figures are the last known ones.
    pub store_ok: bool,
    /// When these figures were taken, RFC 3339.
    pub updated_at: String,
}

/// A snapshot of the room for operators.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomStats {
    /// The on-sale id.
    pub event: String,
    /// People in line (numbers not yet served) plus the pre-queue and the returning queue.
    pub waiting: u64,
    /// People in the pre-queue.
    pub prequeue: u64,
    /// People who came back after missing their turn and wait to be let in, ahead of the line.
    pub returning: u64,
    /// People whose turn came while they were away and who may still come back for it (within the return window).
    pub away: u64,
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
    /// What the door does now, and why.
    pub door: Door,
    /// When the door opens (ms since the Unix epoch), as scheduled, past or future; `None`: no opening time.
    pub opens_at_ms: Option<u64>,
    /// When the pre-queue opens (ms since the Unix epoch), if scheduled.
    pub prequeue_opens_at_ms: Option<u64>,
    /// When the on-sale closes by itself (ms since the Unix epoch), if scheduled.
    pub closes_at_ms: Option<u64>,
    /// When these figures were taken (ms since the Unix epoch, the room's clock).
    pub now_ms: u64,
}

/// What the door does now, and why: for the operator's status page and [`RoomStats`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Door {
    /// `open`, `full`, `capped`, `held`, `not_open`, `paused`, `sold_out`, `closed` or `store_unreachable`.
    pub state: &'static str,
    /// Why, in a sentence.
    pub why: String,
}

fn rfc3339(ms: u64) -> String {
    // Every status carries the time; it changes once a second, so each thread formats it once a second.
    thread_local! {
        static LAST: std::cell::RefCell<Option<(u64, String)>> = const { std::cell::RefCell::new(None) };
    }
    // Past the year 9999 (a time an app passed to `set_schedule`) it prints as the end of 9999 rather than overflow.
    let secs = (ms / 1000).min(253_402_300_799);
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
            stopped: None,
            store_ok: self.store_ok(),
            updated_at: rfc3339(now),
        };
        let state = placement.map(|p| p.state);
        st.state = match state {
            Some(SessionState::Active) => ViewState::Admitted,
            // Once the on-sale is closed or sold out nobody new is let in, a session admitted but not yet come for
            // its pass included (at the end of its arrival window it misses its turn, as a no-show does).
            Some(SessionState::Admitted) if !s.turning_away() => ViewState::Admitted,
            // A session turned away (or waiting to be) hears why: the on-sale closed or sold out.
            _ if s.closed => ViewState::Closed,
            _ if s.sold_out() => ViewState::SoldOut,
            // Drawn, its number not known here yet (see `locate_local`): in line, its place to come.
            Some(SessionState::PreQueue) if snap.drawn => ViewState::Waiting,
            Some(SessionState::PreQueue) => ViewState::Prequeue,
            Some(SessionState::Waiting | SessionState::Returning)
                if s.paused || s.inventory.is_some_and(|i| i.available() == 0) =>
            {
                ViewState::Paused
            }
            Some(SessionState::Waiting) => ViewState::Waiting,
            Some(SessionState::Returning) => ViewState::Returning,
            Some(SessionState::Missed | SessionState::Abandoned) => ViewState::Missed,
            _ => ViewState::NotInLine,
        };
        if state == Some(SessionState::Returning) && !s.turning_away() {
            // Next in: ask again right after the next admission tick.
            st.position = Some(1);
            st.refresh_seconds = self
                .inner
                .config
                .tick_interval
                .as_secs()
                .clamp(1, st.refresh_seconds);
        }
        if matches!(
            st.state,
            ViewState::Waiting | ViewState::Paused | ViewState::Returning | ViewState::Prequeue
        ) {
            st.stopped = if s.paused {
                Some(Stopped::Paused)
            } else if s.inventory.is_some_and(|i| i.available() == 0) {
                Some(Stopped::SeatsHeld)
            } else if st.opens_at.is_some() {
                Some(Stopped::NotOpen)
            } else {
                None
            };
        }
        // A place and a wait mean something while the line can still move: not once the on-sale is sold out or
        // closed (the page then says so, and nothing else).
        if let (Some(SessionState::Waiting), Some(n)) = (state, placement.and_then(|p| p.number))
            && !s.turning_away()
        {
            let position = snap.position_of(n);
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
            if matches!(st.stopped, Some(Stopped::Paused | Stopped::SeatsHeld)) {
                // Nobody knows when the door moves again: no wait it cannot keep.
                (
                    st.eta_seconds,
                    st.eta_low_seconds,
                    st.eta_high_seconds,
                    st.eta_basis,
                ) = (None, None, None, None);
            }
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

    /// The wait at `position`. Behind a full room (the position is past the free places) it waits for places to
    /// free: at the pace the head moves ([`estimate::eta`], which knows that visits vary), or, for the first places,
    /// when the visits of the sessions inside reach the visit length (measured: the sessions inside over the pace
    /// they leave at; else configured), from their ages ([`estimate::place_frees`]), whichever comes first: the
    /// pace does not know that the one person inside a room of one has been there for three of their four
    /// minutes, the ages do not know that of a hundred people let in together some leave early.
    fn eta_for(&self, position: u64, snap: &Snapshot, now_ms: u64) -> Eta {
        let head = self.inner.pace.load();
        let (pace, wave, front) = (head.0, head.1, &head.2);
        let cfg = &self.inner.config;
        let lag = wave.lag_seconds(now_ms, cfg.expected_visit);
        let by_pace = estimate::eta(position, snap, pace, self.configured_rate(snap), lag);
        let free = snap.settings.capacity.saturating_sub(snap.active);
        let Some(k) = position.checked_sub(free).filter(|&k| k > 0) else {
            return by_pace;
        };
        let (visit, basis) = match pace {
            Some((per_minute, _, _)) if per_minute > 0.0 && snap.active > 0 => (
                Duration::from_secs_f64((snap.active as f64 * 60.0 / per_minute).min(86_400.0)),
                estimate::EtaBasis::Measured,
            ),
            _ => (cfg.expected_visit, estimate::EtaBasis::Configured),
        };
        match estimate::place_frees(k, front, now_ms, visit, cfg.idle_timeout, basis) {
            Some(by_age) if by_age.seconds < by_pace.seconds => Eta {
                seconds: by_age.seconds,
                low_seconds: by_age.low_seconds.min(by_pace.low_seconds),
                high_seconds: by_age.high_seconds.min(by_pace.high_seconds),
                basis: by_age.basis,
            },
            _ => by_pace,
        }
    }

    /// A snapshot of the room for operators and dashboards.
    pub fn stats(&self) -> RoomStats {
        let snap = self.inner.snap.load();
        let (pace, served_pm, admitted_pm) = {
            let m = self.inner.meter.lock().unwrap_or_else(|e| e.into_inner());
            (m.pace(), m.served_per_minute(), m.admitted_per_minute())
        };
        let tail = snap.waiting();
        let now = self.now_ms();
        let door = door(&snap, now, self.store_ok(), admitted_pm);
        RoomStats {
            event: self.inner.config.event.clone(),
            waiting: tail,
            prequeue: snap.prequeue,
            returning: snap.returning,
            away: snap.away(),
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
            door,
            opens_at_ms: snap.settings.opens_at_ms,
            prequeue_opens_at_ms: snap.settings.prequeue_opens_at_ms,
            closes_at_ms: snap.settings.closes_at_ms,
            now_ms: now,
        }
    }

    /// Measures the head and stores the pace the estimates use. For one expected visit after the head first moves,
    /// the departure rate is still ramping up (nobody admitted at the opening has finished yet), so the configured
    /// rate is used while it is the higher of the two.
    pub(super) fn record_snapshot(&self) {
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
        let front = meter.front(&snap).into();
        self.inner
            .pace
            .store(Arc::new((pace, meter.first_wave(), front)));
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
}

/// The door's state and the reason, from the shared numbers (the first that applies, most final first).
fn door(snap: &Snapshot, now: u64, store_ok: bool, admitted_pm: f64) -> Door {
    let s = &snap.settings;
    let d = |state: &'static str, why: String| Door { state, why };
    if s.closed {
        return match s.closes_at_ms.filter(|&t| now >= t) {
            Some(t) => d(
                "closed",
                format!("closed at its scheduled time ({})", rfc3339(t)),
            ),
            None => d("closed", "closed by an operator".into()),
        };
    }
    if s.sold_out() {
        return d("sold_out", "every seat is sold".into());
    }
    if !store_ok {
        return d(
            "store_unreachable",
            "the store has not answered lately: these figures are the last known".into(),
        );
    }
    if s.paused {
        return d("paused", "paused by an operator".into());
    }
    if let Some(t) = s.opens_at_ms.filter(|&t| t > now) {
        let pre = match s.prequeue_opens_at_ms.filter(|&p| p > now) {
            Some(p) => format!("; the pre-queue opens at {}", rfc3339(p)),
            None => "; people may join".into(),
        };
        return d("not_open", format!("opens at {}{pre}", rfc3339(t)));
    }
    if s.inventory.is_some_and(|i| i.available() == 0) {
        return d("held", "every seat left is held at checkout".into());
    }
    if snap.active >= s.capacity {
        return d(
            "full",
            format!(
                "at capacity ({} inside): the next person goes in when a place frees",
                snap.active
            ),
        );
    }
    if let Some(cap) = s.admit_per_minute
        && admitted_pm >= cap as f64
    {
        return d(
            "capped",
            format!("the cap of {cap} admissions a minute is reached"),
        );
    }
    if snap.waiting() == 0 {
        return d("open", "open: nobody is waiting".into());
    }
    d("open", "open: letting people in".into())
}
