//! Honest numbers: how fast the head moves, how long a position will wait, how far the seats will reach.
//!
//! Everything here comes from what the room measures in the shared [`Snapshot`]s it refreshes: places free when
//! sessions finish, idle out or are skipped, and in the steady state the door lets in exactly as many as left. So
//! the head's pace is the *departure rate*, measured over the last minutes (or what the door served, when that is
//! less: seats running short, a per-minute cap), and it moves both ways by itself: payment slowing down lowers it,
//! people ahead giving up raises it. The burst at opening (the whole capacity at once) is not a pace and is not
//! counted: nothing has left yet. Until there is something to measure, the
//! estimate comes from configuration (capacity / expected visit length) and says so; so it does during the first
//! expected visit after the head first moves while the measured rate is lower, because departures are still ramping
//! up then (the first wave has not finished). A per-minute cap bounds the pace and fills free places at its rate.
//!
//! # The first wave
//!
//! Capacity over the expected visit is the steady pace, but the line does not start at it. At the opening the whole
//! capacity `C` goes in at once and places only free as that first wave's visits end. By renewal theory, with visits
//! of mean `V` and coefficient of variation `cv`, about `C * (t/V - (1 - cv²)/2)` places have freed `t` after the
//! opening, so the `k`-th place beyond the first wave frees at about `V * (k/C + (1 - cv²)/2)`: a *lag* behind the
//! steady pace of `V/2` for visits of fixed length, `3/8 V` for `cv = 1/2`, nothing for exponential visits. The
//! configured estimate adds what is left of that lag: all of it before the head has moved, less the time since the
//! head first moved afterwards, nothing once that much time has passed (by then the places that did free have moved
//! everyone's position, and the position over the steady pace is right again).
//!
//! The point estimate assumes `3/8 V` ([`FIRST_WAVE_LAG`]), visits with `cv = 1/2`: a visit to a checkout has a floor
//! (pages to load, a form to fill, a payment to confirm) and a tail, and is neither as regular as a fixed length nor
//! as scattered as an exponential one, whose most likely length is no time at all. The range covers the
//! spread: its short end assumes no lag (exponential visits), its long end `V/2` (fixed visits). The room
//! cannot measure `cv` before anyone has left, which is the only time the lag matters.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::store::Snapshot;

/// Where an estimate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EtaBasis {
    /// From the measured pace of the head.
    Measured,
    /// From capacity and the configured visit length (nothing measured yet).
    Configured,
}

impl EtaBasis {
    /// The basis's wire name (JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Measured => "measured",
            Self::Configured => "configured",
        }
    }
}

/// A wait estimate for one position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Eta {
    /// The point estimate, in seconds.
    pub seconds: u64,
    /// The short end of the range.
    pub low_seconds: u64,
    /// The long end of the range.
    pub high_seconds: u64,
    /// Where it comes from.
    pub basis: EtaBasis,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at_ms: u64,
    /// Places freed so far: finished + expired + skipped.
    freed: u64,
    served: u64,
    /// Sessions let in so far.
    admitted: u64,
}

/// The lag of the first wave's departures behind the steady pace, as a share of the expected visit, for the point
/// estimate: `(1 - cv²)/2` with visits of coefficient of variation one half (see the module docs).
pub(crate) const FIRST_WAVE_LAG: f64 = 3.0 / 8.0;
/// The same for the long end of the range: visits of fixed length (the short end assumes none).
const FIRST_WAVE_LAG_HIGH: f64 = 0.5;

/// Where the line stands with the first wave, as this instance saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum FirstWave {
    /// The head has not moved yet (before the opening): the whole first wave is still to come.
    #[default]
    Ahead,
    /// The head first moved at this time (ms): the first wave went in then.
    Since(u64),
    /// This instance first saw the room with numbers already served or places already freed (it started after
    /// the opening): when the first wave went in is unknown, and no lag is added.
    Unknown,
}

impl FirstWave {
    /// What is left of the first wave's lag at `now_ms`, in seconds: `(point, long end)`.
    pub(crate) fn lag_seconds(self, now_ms: u64, expected_visit: Duration) -> (f64, f64) {
        let since_s = match self {
            Self::Ahead => 0.0,
            Self::Since(t) => now_ms.saturating_sub(t) as f64 / 1000.0,
            Self::Unknown => return (0.0, 0.0),
        };
        let v = expected_visit.as_secs_f64();
        (
            (FIRST_WAVE_LAG * v - since_s).max(0.0),
            (FIRST_WAVE_LAG_HIGH * v - since_s).max(0.0),
        )
    }
}

/// The head as the estimates read it: the pace they use (point, slow, fast per minute; `None`: the configured one),
/// where the line stands with the first wave, and when the sessions inside now were let in ([`HeadMeter::front`]).
pub(crate) type Head = (Option<(f64, f64, f64)>, FirstWave, Arc<[u64]>);

/// Measures the head's pace from snapshots.
#[derive(Debug, Default)]
pub(crate) struct HeadMeter {
    samples: VecDeque<Sample>,
    /// When the head first moved (this instance's first sample with more served than its first sample).
    moving_since_ms: Option<u64>,
    first_wave: FirstWave,
    /// `(when, admitted so far)` each time the admitted count rose (one entry a second at most): when each of the
    /// sessions inside now was let in. Entries whose admissions have all left are dropped.
    admits: VecDeque<(u64, u64)>,
    /// Admissions up to this count were before this instance's first sample: when is not known.
    admits_known_after: Option<u64>,
}

/// Most admission times the meter keeps (one a second at most: over two hours of a room that never empties).
const MAX_ADMITS: usize = 8_192;
/// How many of the sessions inside, oldest first, the estimates date ([`HeadMeter::front`]).
pub(crate) const FRONT: usize = 64;

const KEEP_MS: u64 = 10 * 60_000;
const SHORT_MS: u64 = 60_000;
const LONG_MS: u64 = 5 * 60_000;
/// A window must span at least this long before its rate is believed.
const MIN_SPAN_MS: u64 = 30_000;

impl HeadMeter {
    pub(crate) fn record(&mut self, now_ms: u64, snap: &Snapshot) {
        let c = &snap.counters;
        let s = Sample {
            at_ms: now_ms,
            // A skip moves the head as a freed place does (a missed person who comes back takes a place later,
            // counted when it frees).
            freed: c.finished + c.expired + c.missed,
            served: snap.served,
            admitted: c.admitted,
        };
        if self.moving_since_ms.is_none()
            && self.samples.front().is_some_and(|f| s.served > f.served)
        {
            self.moving_since_ms = Some(now_ms);
        }
        if self.first_wave == FirstWave::Ahead {
            match self.samples.front() {
                // The first sample: numbers served or places freed already, the opening was before this instance.
                None if s.served > 0 || s.freed > 0 => self.first_wave = FirstWave::Unknown,
                Some(f) if s.served > f.served => self.first_wave = FirstWave::Since(now_ms),
                _ => {}
            }
        }
        self.record_admits(now_ms, snap);
        if self
            .samples
            .back()
            .is_some_and(|b| now_ms < b.at_ms + 1_000)
        {
            // At most one sample a second; keep the newest figures in it.
            if let Some(b) = self.samples.back_mut() {
                b.freed = s.freed;
                b.served = s.served;
            }
        } else {
            self.samples.push_back(s);
        }
        while self
            .samples
            .front()
            .is_some_and(|f| f.at_ms + KEEP_MS < now_ms)
        {
            self.samples.pop_front();
        }
    }

    fn record_admits(&mut self, now_ms: u64, snap: &Snapshot) {
        let admitted = snap.counters.admitted;
        let known = *self.admits_known_after.get_or_insert(admitted);
        match self.admits.back_mut() {
            Some(b) if admitted <= b.1 => {}
            Some(b) if now_ms < b.0 + 1_000 => b.1 = admitted,
            _ if admitted > known => self.admits.push_back((now_ms, admitted)),
            _ => {}
        }
        // Under first in, first out the sessions inside are the last `active` let in: older entries are gone.
        let oldest = admitted.saturating_sub(snap.active) + 1;
        while self.admits.front().is_some_and(|f| f.1 < oldest) || self.admits.len() > MAX_ADMITS {
            self.admits.pop_front();
        }
    }

    /// When the sessions inside now were let in, oldest first, as far as this instance saw it (at most [`FRONT`]):
    /// the places they hold are the next to free. The room counts admissions and departures, not who left, so the
    /// sessions inside are taken to be the last `active` let in (first in, first out: the oldest visits end first);
    /// an admission this instance did not see (it started later) ends the list.
    pub(crate) fn front(&self, snap: &Snapshot) -> Vec<u64> {
        let admitted = snap.counters.admitted;
        let first = admitted.saturating_sub(snap.active) + 1;
        let known_after = self.admits_known_after.unwrap_or(admitted);
        let mut out = Vec::new();
        let mut entries = self.admits.iter().peekable();
        for idx in first..=admitted {
            if out.len() >= FRONT || idx <= known_after {
                break;
            }
            while entries.peek().is_some_and(|e| e.1 < idx) {
                entries.next();
            }
            match entries.peek() {
                Some(e) => out.push(e.0),
                None => break,
            }
        }
        out
    }

    /// When the head first moved, if it has.
    pub(crate) fn moving_since_ms(&self) -> Option<u64> {
        self.moving_since_ms
    }

    /// Where the line stands with the first wave.
    pub(crate) fn first_wave(&self) -> FirstWave {
        self.first_wave
    }

    /// Places freed per minute over the last `window_ms` (never reaching back to before the head first moved: a
    /// closed door before the opening is not a slow line), if the samples span long enough and something moved.
    fn rate(&self, window_ms: u64) -> Option<f64> {
        let (first, last) = self.window(window_ms, self.moving_since_ms?)?;
        let span = last.at_ms.saturating_sub(first.at_ms);
        if span < MIN_SPAN_MS {
            return None;
        }
        // The head moves as fast as places free, unless the door lets fewer in (seats running short, a cap, a
        // pause): then what it served is the pace.
        let freed = last.freed.saturating_sub(first.freed);
        let served = last.served.saturating_sub(first.served);
        let moved = freed.min(served);
        (moved > 0).then(|| moved as f64 * 60_000.0 / span as f64)
    }

    /// The oldest sample within `window_ms` of the newest and not before `since_ms`, and the newest.
    fn window(&self, window_ms: u64, since_ms: u64) -> Option<(&Sample, &Sample)> {
        let last = self.samples.back()?;
        let first = self
            .samples
            .iter()
            .find(|s| s.at_ms + window_ms >= last.at_ms && s.at_ms >= since_ms)?;
        Some((first, last))
    }

    /// The head's pace, per minute: `(point, slow, fast)`.
    pub(crate) fn pace(&self) -> Option<(f64, f64, f64)> {
        let short = self.rate(SHORT_MS);
        let long = self.rate(LONG_MS);
        match (short, long) {
            (Some(s), Some(l)) => Some(((s + l) / 2.0, s.min(l), s.max(l))),
            (Some(r), None) | (None, Some(r)) => Some((r, r, r)),
            (None, None) => None,
        }
    }

    /// Numbers served per minute over the last minute (what the door actually did, bursts included).
    pub(crate) fn served_per_minute(&self) -> f64 {
        self.per_minute(|s| s.served)
    }

    /// Sessions let in per minute over the last minute: the measured admission rate (served without the skipped
    /// and the turned away).
    pub(crate) fn admitted_per_minute(&self) -> f64 {
        self.per_minute(|s| s.admitted)
    }

    fn per_minute(&self, count: impl Fn(&Sample) -> u64) -> f64 {
        let Some((first, last)) = self.window(SHORT_MS, 0) else {
            return 0.0;
        };
        let span = last.at_ms.saturating_sub(first.at_ms);
        if span == 0 {
            return 0.0;
        }
        count(last).saturating_sub(count(first)) as f64 * 60_000.0 / span as f64
    }
}

/// Estimates the wait for a session at `position` (1 = next), given the free places the door will fill (at its next
/// tick, or at the per-minute cap when one is set) and the measured (or configured) pace, which the cap also bounds.
///
/// `first_wave_lag` is what is left of the first wave's lag, in seconds (point, long end: see
/// [`FirstWave::lag_seconds`]). It is added to a configured estimate for a position beyond the free places, unless
/// the per-minute cap is the pace (then the door, not departures, sets it); a measured pace already has the
/// departures in it.
pub(crate) fn eta(
    position: u64,
    snap: &Snapshot,
    pace: Option<(f64, f64, f64)>,
    configured_per_minute: f64,
    first_wave_lag: (f64, f64),
) -> Eta {
    let free = snap.settings.capacity.saturating_sub(snap.active);
    // Places that must free before this position's turn: none within the free places; behind a full room the
    // next (position 1) waits for one place to free.
    let ahead = position.saturating_sub(free) as f64;
    let cap = snap.settings.admit_per_minute.map(|a| (a as f64).max(1.0));
    // With a cap, the free places ahead are not filled at once but at the cap.
    let filling = cap.map_or(0.0, |a| position.min(free) as f64 / a * 60.0);
    let (point, slow, fast, basis) = match pace {
        Some((p, s, f)) => (p, s * 0.9, f * 1.1, EtaBasis::Measured),
        None => {
            // No floor of one a minute: a room of capacity 1 with 4-minute visits lets one in every 4 minutes.
            let r = configured_per_minute.max(0.001);
            (r, r * 0.75, r * 1.25, EtaBasis::Configured)
        }
    };
    let (lag, lag_high) = match basis {
        EtaBasis::Configured if ahead > 0.0 && cap.is_none_or(|a| a > point) => first_wave_lag,
        _ => (0.0, 0.0),
    };
    let secs = |rate: f64, lag: f64| {
        let rate = cap.map_or(rate, |a| rate.min(a));
        (filling + ahead / rate.max(0.001) * 60.0 + lag).ceil() as u64
    };
    Eta {
        seconds: secs(point, lag),
        low_seconds: secs(fast, 0.0),
        high_seconds: secs(slow, lag_high),
        basis,
    }
}

/// The wait for the `k`-th place to free (1 = the next), from when the session holding it was let in
/// (`admitted_ms`: the sessions inside, oldest first, [`HeadMeter::front`]) and how long a visit lasts (`visit`,
/// measured or configured): it is expected to free when that visit has lasted `visit` (the range: a quarter
/// shorter or longer). A visit that has already lasted longer than the range's long end frees its place within the
/// idle timeout at the latest once the person stops (`idle`: the long end then; the short end is the next tick).
/// `None` when `k` is beyond the dated sessions.
pub(crate) fn place_frees(
    k: u64,
    admitted_ms: &[u64],
    now_ms: u64,
    visit: Duration,
    idle: Duration,
    basis: EtaBasis,
) -> Option<Eta> {
    let at = *admitted_ms.get(usize::try_from(k.checked_sub(1)?).ok()?)?;
    let v = visit.as_millis() as f64;
    let left = |share: f64| {
        ((at as f64 + v * share - now_ms as f64) / 1000.0)
            .max(0.0)
            .ceil() as u64
    };
    let (low, point, high) = (left(0.75), left(1.0), left(1.25));
    let overdue = high == 0;
    Some(Eta {
        seconds: if overdue { idle.as_secs() / 2 } else { point },
        low_seconds: low,
        high_seconds: if overdue { idle.as_secs() } else { high },
        basis,
    })
}

/// How far down the line (as a line number) the remaining seats are likely to reach, from the measured share of
/// departing sessions that bought and their average order size. `None` until enough has been measured or without an
/// inventory.
pub fn reach(snap: &Snapshot) -> Option<u64> {
    let inv = snap.settings.inventory?;
    let c = &snap.counters;
    let departed = c.finished + c.expired;
    if departed < 20 || c.orders == 0 {
        return None;
    }
    let buy_share = c.orders as f64 / departed as f64;
    let seats_per_admission = buy_share * (c.seats_bought as f64 / c.orders as f64);
    let skip_share = if snap.served > 0 {
        // Numbers passed over for good: missed, and not come back.
        c.missed.saturating_sub(c.returned) as f64 / snap.served as f64
    } else {
        0.0
    };
    let remaining = inv.total.saturating_sub(inv.sold) as f64;
    // Those inside now buy first.
    let for_line = (remaining - snap.active as f64 * seats_per_admission).max(0.0);
    let admissions = for_line / seats_per_admission.max(1e-9);
    let numbers = admissions / (1.0 - skip_share).max(0.05);
    Some(snap.served + numbers.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Counters, Settings};

    fn snap(capacity: u64, active: u64, served: u64, freed: u64) -> Snapshot {
        Snapshot {
            settings: Settings {
                capacity,
                admit_per_minute: None,
                paused: false,
                closed: false,
                opens_at_ms: None,
                random_draw: false,
                inventory: None,
                prequeue_opens_at_ms: None,
                closes_at_ms: None,
            },
            drawn: true,
            prequeue: 0,
            last_number: 1_000_000,
            served,
            active,
            returning: 0,
            counters: Counters {
                finished: freed,
                ..Counters::default()
            },
            moved: Vec::new(),
            reclaim_upto: None,
            live: None,
            admitted_lately: Vec::new(),
        }
    }

    #[test]
    fn configured_rate_below_one_a_minute_is_taken_as_it_is() {
        // Capacity 1, visits of 4 minutes: one admission every 4 minutes. 40th in line, room full: its turn comes
        // when the 40th place frees (the one inside now leaves first), 160
        // minutes (128 at a quarter faster, 213 at a quarter slower).
        let e = eta(40, &snap(1, 1, 0, 0), None, 0.25, (0.0, 0.0));
        assert_eq!(e.basis, EtaBasis::Configured);
        assert_eq!(e.seconds, 160 * 60);
        assert_eq!((e.low_seconds, e.high_seconds), (128 * 60, 12_800));
    }

    #[test]
    fn the_next_behind_a_full_room_waits_for_a_place_to_free() {
        // Capacity 1, 4-minute visits (0.25 a minute): place 1 waits for the one inside to leave, 4 minutes (3.2 at
        // a quarter faster, 5.33 at a quarter slower), not "no wait".
        let e = eta(1, &snap(1, 1, 0, 0), None, 0.25, (0.0, 0.0));
        assert_eq!((e.seconds, e.low_seconds, e.high_seconds), (240, 192, 320));
    }

    #[test]
    fn a_place_frees_when_its_visit_has_lasted_the_visit_length() {
        let visit = Duration::from_secs(240);
        let idle = Duration::from_secs(600);
        // Let in at 0 and 60 s; now 100 s: the first place frees at 240 s (a quarter either way: 180..300 s), the
        // second a minute later.
        let front = [0, 60_000];
        let e = place_frees(1, &front, 100_000, visit, idle, EtaBasis::Configured).unwrap();
        assert_eq!((e.seconds, e.low_seconds, e.high_seconds), (140, 80, 200));
        let e = place_frees(2, &front, 100_000, visit, idle, EtaBasis::Configured).unwrap();
        assert_eq!((e.seconds, e.low_seconds, e.high_seconds), (200, 140, 260));
        assert_eq!(
            place_frees(3, &front, 100_000, visit, idle, EtaBasis::Configured),
            None
        );
        // At 301 s the first visit has outlasted the long end: it frees within the idle timeout at the latest.
        let e = place_frees(1, &front, 301_000, visit, idle, EtaBasis::Configured).unwrap();
        assert_eq!((e.low_seconds, e.high_seconds), (0, 600));
        assert_eq!(
            crate::http::page::eta_words(e.low_seconds, e.high_seconds),
            "about 1 to 10 minutes"
        );
    }

    #[test]
    fn the_meter_dates_the_sessions_inside_oldest_first() {
        let mut m = HeadMeter::default();
        let mut s = snap(3, 0, 0, 0);
        m.record(0, &s);
        // One let in at 10 s, two at 20 s; the first leaves at 30 s.
        s.counters.admitted = 1;
        s.active = 1;
        m.record(10_000, &s);
        s.counters.admitted = 3;
        s.active = 3;
        m.record(20_000, &s);
        assert_eq!(m.front(&s), vec![10_000, 20_000, 20_000]);
        s.active = 2;
        s.counters.finished = 1;
        m.record(30_000, &s);
        assert_eq!(m.front(&s), vec![20_000, 20_000]);
        // An instance that starts with sessions inside does not know when they came in.
        let mut late = HeadMeter::default();
        late.record(40_000, &s);
        assert_eq!(late.front(&s), Vec::<u64>::new());
    }

    #[test]
    fn free_places_ahead_are_no_wait_and_a_cap_fills_them_at_its_pace() {
        // 10 free places: positions 1..=10 go in at the next tick.
        assert_eq!(
            eta(10, &snap(100, 90, 0, 0), None, 25.0, (0.0, 0.0)).seconds,
            0
        );
        // With a cap of 60 a minute, the 10th of 10 free places waits 10 s.
        let mut s = snap(100, 90, 0, 0);
        s.settings.admit_per_minute = Some(60);
        assert_eq!(eta(10, &s, None, 25.0, (0.0, 0.0)).seconds, 10);
    }

    #[test]
    fn the_meter_measures_departures_and_moves_both_ways() {
        let mut m = HeadMeter::default();
        // The opening: the whole capacity goes in at once, nothing has left yet: no pace.
        m.record(0, &snap(100, 0, 0, 0));
        m.record(1_000, &snap(100, 100, 100, 0));
        assert_eq!(m.pace(), None);
        // Then 10 leave (and 10 are let in) every 10 s: 60 a minute.
        for i in 1..=12u64 {
            m.record(1_000 + i * 10_000, &snap(100, 100, 100 + i * 10, i * 10));
        }
        let (point, slow, fast) = m.pace().expect("two minutes of departures are a pace");
        assert!((point - 60.0).abs() < 1.0, "{point}");
        assert!(slow <= point && point <= fast);
        // Payment slows down: 5 every 10 s for the next minute. The short window sees it first.
        let base = 1_000 + 12 * 10_000;
        for i in 1..=6u64 {
            m.record(base + i * 10_000, &snap(100, 100, 220 + i * 5, 120 + i * 5));
        }
        let (slower, low, _) = m.pace().unwrap();
        assert!(slower < point && low < 35.0, "{slower} {low}");
        // Served counts every number that left the head over the last minute.
        assert!(
            (m.served_per_minute() - 30.0).abs() < 1.0,
            "{}",
            m.served_per_minute()
        );
    }

    /// Capacity 100, visits of 4 minutes: 25 a minute configured, a first-wave lag of 90 s (3/8 of 240 s), 120 s at
    /// the long end (half a visit).
    const VISIT: Duration = Duration::from_secs(240);

    #[test]
    fn before_the_opening_the_whole_first_wave_lag_is_added() {
        let lag = FirstWave::Ahead.lag_seconds(1_000_000, VISIT);
        assert_eq!(lag, (90.0, 120.0));
        // Room full, 50th in line: its turn when the 50th place frees, 2 minutes at 25 a minute, plus 90 s.
        let e = eta(50, &snap(100, 100, 0, 0), None, 25.0, lag);
        assert_eq!(e.basis, EtaBasis::Configured);
        assert_eq!(e.seconds, 120 + 90);
        // Short end: a quarter faster and no lag (96 s); long end: a quarter slower and half a visit (160 + 120 s).
        assert_eq!((e.low_seconds, e.high_seconds), (96, 160 + 120));
        // The room empty before the opening: the first 100 go in at once, the lag is only for those beyond.
        assert_eq!(eta(100, &snap(100, 0, 0, 0), None, 25.0, lag).seconds, 0);
        assert_eq!(eta(150, &snap(100, 0, 0, 0), None, 25.0, lag).seconds, 210);
    }

    #[test]
    fn the_first_wave_lag_shrinks_as_the_first_visits_go_on_and_is_then_gone() {
        let opened = 5_000_000;
        let wave = FirstWave::Since(opened);
        assert_eq!(wave.lag_seconds(opened, VISIT), (90.0, 120.0));
        // A minute after the opening: 30 s of the lag are left (60 s at the long end).
        assert_eq!(wave.lag_seconds(opened + 60_000, VISIT), (30.0, 60.0));
        let e = eta(
            50,
            &snap(100, 100, 100, 0),
            None,
            25.0,
            wave.lag_seconds(opened + 60_000, VISIT),
        );
        assert_eq!((e.seconds, e.low_seconds, e.high_seconds), (150, 96, 220));
        // 100 s after: the point lag is gone, the long end has 20 s left; after half a visit, nothing.
        assert_eq!(wave.lag_seconds(opened + 100_000, VISIT), (0.0, 20.0));
        assert_eq!(wave.lag_seconds(opened + 120_000, VISIT), (0.0, 0.0));
        assert_eq!(wave.lag_seconds(opened + 3_600_000, VISIT), (0.0, 0.0));
        assert_eq!(FirstWave::Unknown.lag_seconds(opened, VISIT), (0.0, 0.0));
    }

    #[test]
    fn no_lag_on_a_measured_pace_or_when_the_cap_is_the_pace() {
        let lag = (90.0, 120.0);
        // Measured: the departures are in the pace already.
        let e = eta(
            50,
            &snap(100, 100, 0, 0),
            Some((25.0, 25.0, 25.0)),
            25.0,
            lag,
        );
        assert_eq!((e.seconds, e.basis), (120, EtaBasis::Measured));
        // A cap of 10 a minute, below the 25 places freeing a minute: the door sets the pace, not departures.
        let mut s = snap(100, 100, 0, 0);
        s.settings.admit_per_minute = Some(10);
        assert_eq!(eta(50, &s, None, 25.0, lag).seconds, 300);
        // A cap above it: the lag is added.
        s.settings.admit_per_minute = Some(50);
        assert_eq!(eta(50, &s, None, 25.0, lag).seconds, 120 + 90);
    }

    #[test]
    fn the_meter_dates_the_first_wave_from_the_heads_first_move() {
        // Before the opening nothing moves: the whole wave is ahead.
        let mut m = HeadMeter::default();
        m.record(0, &snap(100, 0, 0, 0));
        m.record(10_000, &snap(100, 0, 0, 0));
        assert_eq!(m.first_wave(), FirstWave::Ahead);
        // The opening: the whole capacity goes in.
        m.record(20_000, &snap(100, 100, 100, 0));
        assert_eq!(m.first_wave(), FirstWave::Since(20_000));
        // Later moves change nothing.
        m.record(200_000, &snap(100, 100, 150, 50));
        assert_eq!(m.first_wave(), FirstWave::Since(20_000));
        // An instance started after the opening (numbers served already) cannot date the wave.
        let mut late = HeadMeter::default();
        late.record(0, &snap(100, 100, 100, 0));
        late.record(10_000, &snap(100, 100, 110, 10));
        assert_eq!(late.first_wave(), FirstWave::Unknown);
    }

    #[test]
    fn numbers_passed_over_for_good_carry_the_reach_further_down_the_line() {
        // 6,000 seats left; half of those who left bought, 2 seats an order (1 seat an admission); the 1,000
        // inside buy 1,000 first, so 5,000 admissions are left for the line. With a fifth of the numbers served
        // passed over for good (2,000 missed of 10,000), those admissions span 5,000 / 0.8 = 6,250 numbers.
        let mut s = snap(1_000, 1_000, 10_000, 1_000);
        s.settings.inventory = Some(crate::store::Inventory {
            total: 10_000,
            sold: 4_000,
            held: 0,
        });
        s.counters.orders = 500;
        s.counters.seats_bought = 1_000;
        s.counters.missed = 2_000;
        assert_eq!(reach(&s), Some(10_000 + 6_250));
        // Half of the missed came back: a tenth passed over, 5,000 / 0.9 numbers (5,555.6).
        s.counters.returned = 1_000;
        assert_eq!(reach(&s), Some(10_000 + 5_556));
        // Nobody passed over: one number an admission.
        s.counters.missed = 0;
        s.counters.returned = 0;
        assert_eq!(reach(&s), Some(10_000 + 5_000));
    }
}
