//! What the rehearsal found: the per-minute table and the figures made at the end from the followed people.

use waitroom_layer::EtaBasis;

use super::crowd::Person;
use super::simulation::Simulation;

/// One simulated minute.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Minute {
    /// Minutes since the opening (negative before it).
    pub minute: i64,
    /// People in line or in the pre-queue at the end of the minute.
    pub waiting: u64,
    /// Active sessions at the end of the minute.
    pub active: u64,
    /// Admitted during the minute.
    pub admitted: u64,
    /// Orders completed during the minute.
    pub orders: u64,
    /// Seats sold so far.
    pub sold: u64,
    /// Seats held now.
    pub held: u64,
    /// Seats available now.
    pub available: u64,
}

/// What the rehearsal found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// The per-minute table.
    pub minutes: Vec<Minute>,
    /// People who joined.
    pub joined: u64,
    /// Seconds after the opening at which the last seat was sold, if it was.
    pub sold_out_after_seconds: Option<u64>,
    /// Seconds after the opening at which no seat was available any more (all sold or held) for the first time.
    pub no_seat_available_after_seconds: Option<u64>,
    /// Seconds after the opening at which 95% of the seats were sold.
    pub most_sold_after_seconds: Option<u64>,
    /// The highest active count seen.
    pub max_active: u64,
    /// The capacity in force.
    pub capacity: u64,
    /// Admissions per minute, averaged from minute 3 after the opening until no seat is available (the steady
    /// state, before the seats run short).
    pub steady_admissions_per_minute: f64,
    /// Orders per minute over the same span.
    pub steady_orders_per_minute: f64,
    /// Orders completed.
    pub orders: u64,
    /// Estimates checked: shown to a followed session when it got its position and every two minutes after, and
    /// compared with the wait it then had until admission.
    pub eta_checked: u64,
    /// Median absolute error of those estimates, in seconds.
    pub eta_median_abs_error_seconds: f64,
    /// 90th percentile of that error, in seconds.
    pub eta_p90_abs_error_seconds: f64,
    /// Median of the error relative to the actual wait.
    pub eta_median_rel_error: f64,
    /// Share of those estimates that came from measurements (the rest from configuration).
    pub eta_measured_share: f64,
    /// Estimates checked at join: the first estimate each followed session was shown, against the whole wait it
    /// then had until admission. For a session that joined after the line had numbers (after the opening, or any
    /// time in FIFO, whose joins are numbered at once) it is the estimate its join answered; for a pre-queued session it
    /// is the estimate at its first poll that returned a place in line (after the draw, or after the opening in
    /// FIFO), up to one poll interval after the draw. Unlike the figures above, no later re-estimate is counted.
    pub eta_join_checked: u64,
    /// Median absolute error of the estimates shown at join, in seconds.
    pub eta_join_median_abs_error_seconds: f64,
    /// 90th percentile of that error, in seconds.
    pub eta_join_p90_abs_error_seconds: f64,
    /// Share of the estimates shown at join that came from measurements (the rest from configuration: capacity
    /// over the expected visit, before the head's pace is measured).
    pub eta_join_measured_share: f64,
    /// Pearson correlation between pre-queue arrival time and getting a ticket (0: arrival time did not matter).
    pub fairness_arrival_vs_ticket: f64,
    /// Seconds from the last seat sold until the last person still in line then had been told "sold out" by
    /// their own next poll through the room (each simulated page polls every `poll_seconds` from its arrival;
    /// people who give up before their next poll are no longer in line). `None` when a poll after the room
    /// turned sold out was answered with anything else, or the run ended before everyone had polled.
    pub sold_out_told_within_seconds: Option<u64>,
    /// The reach estimate halfway through the seats, as a line number, and the last line number that bought.
    pub reach_halfway: Option<(u64, u64)>,
    /// People drawn to step away for a while ([`Params::step_away_share`](super::Params::step_away_share)) who
    /// joined.
    pub stepped_away: u64,
    /// Turns that came while the person was away (the room's count: those who gave up are among them).
    pub missed_turns: u64,
    /// People who came back within the return window after missing their turn (the room's count).
    pub returned_in_time: u64,
    /// People who came back after the window (the room's count).
    pub returned_late: u64,
    /// Of those who came back in time, how many the door let in before the run ended.
    pub returned_let_in: u64,
    /// Seconds from a return (the page's first poll on coming back) to the door letting the person in: median.
    pub return_wait_median_seconds: f64,
    /// The same, the longest.
    pub return_wait_max_seconds: u64,
}

impl Simulation<'_> {
    /// The report on the run so far.
    pub(super) fn report(self) -> Report {
        let open_s = self.open_s;
        let m = &self.milestones;
        let after_opening = |s: Option<u64>| s.map(|s| s.saturating_sub(open_s));
        let (steady_admissions_per_minute, steady_orders_per_minute) =
            steady_rates(&self.table.minutes, m.no_seat_at, open_s);
        let mut all = Errors::of_all_estimates(&self.people);
        let mut join = Errors::of_first_estimates(&self.people);
        let last_buyer = self
            .people
            .iter()
            .filter(|q| q.bought > 0)
            .map(|q| q.number)
            .max()
            .unwrap_or(0);
        let counters = self.counters();
        let mut return_waits: Vec<f64> = self
            .people
            .iter()
            .filter_map(|q| Some(q.admitted_s?.checked_sub(q.returned_s?)? as f64))
            .collect();
        let stepped_away = self
            .people
            .iter()
            .filter(|q| q.away.is_some() && (q.number > 0 || q.admitted_s.is_some()))
            .count() as u64;
        Report {
            stepped_away,
            missed_turns: counters.missed,
            returned_in_time: counters.returned,
            returned_late: counters.returned_late,
            returned_let_in: return_waits.len() as u64,
            return_wait_max_seconds: return_waits.iter().fold(0.0f64, |a, &b| a.max(b)) as u64,
            return_wait_median_seconds: percentile(&mut return_waits, 0.5),
            joined: self.joined(),
            sold_out_after_seconds: after_opening(m.sold_out_at),
            no_seat_available_after_seconds: after_opening(m.no_seat_at),
            most_sold_after_seconds: after_opening(m.most_sold_at),
            max_active: self.table.max_active,
            capacity: self.capacity,
            steady_admissions_per_minute,
            steady_orders_per_minute,
            orders: self.seats.orders,
            eta_checked: all.checked(),
            eta_median_abs_error_seconds: percentile(&mut all.abs, 0.5),
            eta_p90_abs_error_seconds: percentile(&mut all.abs, 0.9),
            eta_median_rel_error: percentile(&mut all.rel, 0.5),
            eta_measured_share: all.measured_share(),
            eta_join_checked: join.checked(),
            eta_join_median_abs_error_seconds: percentile(&mut join.abs, 0.5),
            eta_join_p90_abs_error_seconds: percentile(&mut join.abs, 0.9),
            eta_join_measured_share: join.measured_share(),
            fairness_arrival_vs_ticket: fairness(&self.people, open_s),
            sold_out_told_within_seconds: self.news.told_within,
            reach_halfway: m.reach_halfway.map(|r| (r, last_buyer)),
            minutes: self.table.minutes,
        }
    }
}

/// Admissions and orders per minute in the steady state: from minute 3 after the opening until the seats run
/// short.
fn steady_rates(minutes: &[Minute], no_seat_at: Option<u64>, open_s: u64) -> (f64, f64) {
    let steady: Vec<&Minute> = minutes
        .iter()
        .filter(|m| {
            m.minute > 3
                && no_seat_at.is_none_or(|s| (m.minute as u64) * 60 <= s.saturating_sub(open_s))
        })
        .collect();
    let avg = |f: fn(&Minute) -> u64| {
        if steady.is_empty() {
            0.0
        } else {
            steady.iter().map(|m| f(m) as f64).sum::<f64>() / steady.len() as f64
        }
    };
    (avg(|m| m.admitted), avg(|m| m.orders))
}

/// Estimates shown to followed people against the waits they then had until admission.
#[derive(Debug, Default)]
struct Errors {
    /// Absolute errors, in seconds.
    abs: Vec<f64>,
    /// Errors relative to the wait (at least a minute).
    rel: Vec<f64>,
    /// How many came from measurements.
    measured: u64,
}

impl Errors {
    /// Every estimate shown before admission: at join and every re-estimate.
    fn of_all_estimates(people: &[Person]) -> Self {
        let mut e = Self::default();
        for q in people {
            let Some(adm) = q.admitted_s else { continue };
            for shown in q.followed.iter().filter(|f| f.at_s < adm) {
                let actual = (adm - shown.at_s) as f64;
                e.abs.push((shown.seconds as f64 - actual).abs());
                e.rel
                    .push((shown.seconds as f64 - actual).abs() / actual.max(60.0));
                e.measured += u64::from(shown.basis == EtaBasis::Measured);
            }
        }
        e
    }

    /// The first estimate each followed person was shown, against the whole wait they then had.
    fn of_first_estimates(people: &[Person]) -> Self {
        let mut e = Self::default();
        for q in people {
            if let (Some(adm), Some(shown)) = (q.admitted_s, q.first_shown)
                && shown.at_s < adm
            {
                e.abs
                    .push((shown.seconds as f64 - (adm - shown.at_s) as f64).abs());
                e.measured += u64::from(shown.basis == EtaBasis::Measured);
            }
        }
        e
    }

    fn checked(&self) -> u64 {
        self.abs.len() as u64
    }

    fn measured_share(&self) -> f64 {
        if self.abs.is_empty() {
            0.0
        } else {
            self.measured as f64 / self.abs.len() as f64
        }
    }
}

/// Fairness among the pre-queue: the correlation of arrival time with getting a ticket, over every fifth person
/// who arrived before the opening.
fn fairness(people: &[Person], open_s: u64) -> f64 {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for (i, q) in people.iter().enumerate() {
        if q.arrive_s < open_s && (i as u64).is_multiple_of(5) {
            xs.push(q.arrive_s as f64);
            ys.push(if q.bought > 0 { 1.0 } else { 0.0 });
        }
    }
    pearson(&xs, &ys)
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx).powi(2);
        syy += (b - my).powi(2);
    }
    if sxx == 0.0 || syy == 0.0 {
        0.0
    } else {
        sxy / (sxx * syy).sqrt()
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}
