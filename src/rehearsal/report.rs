//! What the rehearsal found: the per-minute table and the figures made at the end from the people, and the report
//! in words for a planner ([`Report::summary`] first, then [`Report::table`]).

use std::fmt::Write as _;

use waitroom_layer::EtaBasis;

use crate::numbers::grouped;

use super::crowd::Person;
use super::simulation::Simulation;

/// One simulated minute.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Minute {
    /// Minutes since the opening (negative before it).
    pub minute: i64,
    /// People in line or in the pre-queue at the end of the minute: the live line (on the embedded store, only
    /// those who came back; one-shot tickets are not in it).
    pub waiting: u64,
    /// Line numbers handed out after the head at the end of the minute: people in line, one-shot tickets never
    /// redeemed, those who left. What the line would show if it counted every request.
    pub numbers_out: u64,
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
    /// Seats on sale.
    pub seats: u64,
    /// Seats sold by the end of the run.
    pub sold: u64,
    /// Seconds between polls of the holding page.
    pub poll_seconds: u64,
    /// Seconds after the opening at which the last person still in line when the last seat sold heard "sold out"
    /// at their own poll (the last seat sold plus [`sold_out_told_within_seconds`](Self::sold_out_told_within_seconds)).
    pub last_heard_sold_out_after_seconds: Option<u64>,
    /// The wait of people who bought, from the opening (or their arrival, if later) until the door let them in:
    /// the median, in seconds.
    pub buyer_wait_median_seconds: f64,
    /// The same, the 90th percentile: one buyer in ten waited longer.
    pub buyer_wait_p90_seconds: f64,
    /// People still in line when the last seat sold who then heard "sold out" at their own poll.
    pub told_sold_out: u64,
    /// Their wait, from the opening (or their arrival, if later) until they heard it: the median, in seconds.
    pub told_sold_out_wait_median_seconds: f64,
    /// The same, the 90th percentile.
    pub told_sold_out_wait_p90_seconds: f64,
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
    /// Of those let in, people the door had let in before, while they were away, who did not come within the
    /// arrival window: the room kept their turn and let them in again when they came back.
    pub lapsed_let_in_again: u64,
    /// Admissions from the line's head (people who had not come back from missing a turn) made while someone who
    /// came back in time waited for the door: 0 when the door serves the returning queue first, as it should.
    pub head_let_in_while_a_return_waited: u64,
    /// Seconds from a return (the page's first poll on coming back) to the door letting the person in: median.
    pub return_wait_median_seconds: f64,
    /// The same, the longest.
    pub return_wait_max_seconds: u64,
    /// One-shot visitors sent ([`Params::one_shot_share`](super::Params::one_shot_share)): a ticket each, never
    /// redeemed.
    pub one_shot_visitors: u64,
    /// Positions checked: the position each followed person was shown with their first estimate, against the
    /// people actually let in from then until their own turn (themselves included, as a position counts them).
    pub positions_checked: u64,
    /// Median of shown position over that actual count (1: exact; above 1: people who left ahead, or tickets,
    /// were counted).
    pub position_over_actual_median: f64,
    /// 90th percentile of the same ratio.
    pub position_over_actual_p90: f64,
    /// The longest store call the room made, in milliseconds of real time (from the call to the answer: on Redis a
    /// round trip and any wait for it included), whatever the simulated clock did meanwhile.
    pub longest_store_call_ms: f64,
    /// Store calls over 5 ms.
    pub store_calls_over_5ms: u64,
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
        let mut head_admissions: Vec<u64> = self
            .people
            .iter()
            .filter(|q| q.returned_s.is_none())
            .filter_map(|q| q.admitted_s)
            .collect();
        head_admissions.sort_unstable();
        // A return is known to the door from the second of the page's poll on (that second's tick comes after it).
        // One who came back waits until let in, or (never let in) until giving up.
        let head_let_in_while_a_return_waited = self
            .people
            .iter()
            .filter_map(|q| {
                let back = q.returned_s?;
                let until = match q.admitted_s {
                    Some(a) if a >= back && !q.lapsed => a,
                    _ => q.give_up_s,
                };
                Some((back, until.max(back)))
            })
            .map(|(back, until)| {
                (head_admissions.partition_point(|&a| a < until)
                    - head_admissions.partition_point(|&a| a < back)) as u64
            })
            .sum();
        let mut return_waits: Vec<f64> = self
            .people
            .iter()
            .filter_map(|q| Some(q.admitted_s?.checked_sub(q.returned_s?)? as f64))
            .collect();
        // Waits count from the opening, or from the arrival for people who came after it.
        let since = |q: &Person| q.arrive_s.max(open_s);
        let mut buyer_waits: Vec<f64> = self
            .people
            .iter()
            .filter(|q| q.bought > 0)
            .filter_map(|q| Some(q.admitted_s?.saturating_sub(since(q)) as f64))
            .collect();
        let mut told_waits: Vec<f64> = self
            .people
            .iter()
            .filter_map(|q| Some(q.told_sold_out_s?.saturating_sub(since(q)) as f64))
            .collect();
        let sold_out_after_seconds = after_opening(m.sold_out_at);
        let stepped_away = self
            .people
            .iter()
            .filter(|q| q.away.is_some() && (q.number > 0 || q.admitted_s.is_some()))
            .count() as u64;
        // Shown positions against the people actually let in from the moment each was shown until that person's own
        // turn (themselves included): admissions counted from the sorted admission seconds.
        let mut admitted_at: Vec<u64> = self.people.iter().filter_map(|q| q.admitted_s).collect();
        admitted_at.sort_unstable();
        let mut position_ratios: Vec<f64> = self
            .people
            .iter()
            .filter_map(|q| {
                let (shown, position, own) = (q.first_shown?, q.first_position?, q.admitted_s?);
                let from = admitted_at.partition_point(|&a| a < shown.at_s);
                let to = admitted_at.partition_point(|&a| a <= own);
                let actual = (to - from).max(1);
                Some(position as f64 / actual as f64)
            })
            .collect();
        let (longest, over_5ms) = self.room.longest_store_call();
        Report {
            longest_store_call_ms: longest.as_secs_f64() * 1e3,
            store_calls_over_5ms: over_5ms,
            one_shot_visitors: self.one_shots_sent(),
            positions_checked: position_ratios.len() as u64,
            position_over_actual_median: percentile(&mut position_ratios, 0.5),
            position_over_actual_p90: percentile(&mut position_ratios, 0.9),
            stepped_away,
            missed_turns: counters.missed,
            returned_in_time: counters.returned,
            returned_late: counters.returned_late,
            returned_let_in: return_waits.len() as u64,
            lapsed_let_in_again: self.people.iter().filter(|q| q.let_in_again).count() as u64,
            head_let_in_while_a_return_waited,
            return_wait_max_seconds: return_waits.iter().fold(0.0f64, |a, &b| a.max(b)) as u64,
            return_wait_median_seconds: percentile(&mut return_waits, 0.5),
            joined: self.joined(),
            seats: self.seats.total,
            sold: self.seats.sold,
            poll_seconds: self.p.poll_seconds,
            last_heard_sold_out_after_seconds: sold_out_after_seconds
                .zip(self.news.told_within)
                .map(|(s, t)| s + t),
            buyer_wait_median_seconds: percentile(&mut buyer_waits, 0.5),
            buyer_wait_p90_seconds: percentile(&mut buyer_waits, 0.9),
            told_sold_out: told_waits.len() as u64,
            told_sold_out_wait_median_seconds: percentile(&mut told_waits, 0.5),
            told_sold_out_wait_p90_seconds: percentile(&mut told_waits, 0.9),
            sold_out_after_seconds,
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

/// A span of time as a planner reads it: `45 seconds`, `7.2 minutes`, `2.5 hours`.
fn span(seconds: f64) -> String {
    if seconds < 90.0 {
        let s = seconds.round() as u64;
        format!("{s} second{}", if s == 1 { "" } else { "s" })
    } else if seconds < 90.0 * 60.0 {
        format!("{:.1} minutes", seconds / 60.0)
    } else {
        format!("{:.1} hours", seconds / 3600.0)
    }
}

/// `7.9%`, `14%`: a share, with a decimal while it is small.
fn percent(part: u64, whole: u64) -> String {
    let p = if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    };
    if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

impl Report {
    /// The share of the people who joined who got tickets (bought at least one seat), between 0 and 1.
    pub fn got_tickets_share(&self) -> f64 {
        if self.joined == 0 {
            0.0
        } else {
            self.orders as f64 / self.joined as f64
        }
    }

    /// What happened, in plain words, for the people who plan the on-sale: who got tickets, when the seats ran out,
    /// when the last person heard "sold out", how long buyers and the others waited, the door's pace, how good the
    /// wait estimates were, whether arriving early mattered. The figures are this report's own fields.
    pub fn summary(&self) -> String {
        let mut s = String::from("What happened\n");
        let mut line = |text: String| {
            let _ = writeln!(s, "- {text}");
        };

        line(format!(
            "{} of the crowd got tickets: {} of the {} people who joined bought {} of the {} seats ({:.1} an \
             order).",
            percent(self.orders, self.joined),
            grouped(self.orders),
            grouped(self.joined),
            grouped(self.sold),
            grouped(self.seats),
            self.sold as f64 / self.orders.max(1) as f64
        ));
        match (
            self.no_seat_available_after_seconds,
            self.sold_out_after_seconds,
        ) {
            (Some(out), Some(last)) => line(format!(
                "The seats ran out {} after the opening (every seat sold or held by someone paying). Seats \
                 held by people who then did not buy came back on sale, and the last one was sold {} after the \
                 opening.",
                span(out as f64),
                span(last as f64)
            )),
            (Some(out), None) => line(format!(
                "The seats ran out {} after the opening (every seat sold or held by someone paying), but {} \
                 were still unsold when the run ended.",
                span(out as f64),
                grouped(self.seats - self.sold)
            )),
            _ => line(format!(
                "The seats did not run out: {} were left when the run ended.",
                grouped(self.seats - self.sold)
            )),
        }
        match (
            self.last_heard_sold_out_after_seconds,
            self.sold_out_told_within_seconds,
        ) {
            (Some(at), Some(within)) => line(format!(
                "The last person still in line heard \"sold out\" {} after the opening, {} after the last seat \
                 sold (each page asks every {}).",
                span(at as f64),
                span(within as f64),
                span(self.poll_seconds as f64)
            )),
            _ if self.sold_out_after_seconds.is_some() => line(
                "NOT everyone still in line heard \"sold out\": a poll was answered otherwise, or the run ended \
                 first."
                    .into(),
            ),
            _ => {}
        }
        if self.orders > 0 {
            line(format!(
                "People who bought waited {} (the median) from the opening, or from their arrival if later, until \
                 they could choose seats; one in ten waited more than {}.",
                span(self.buyer_wait_median_seconds),
                span(self.buyer_wait_p90_seconds)
            ));
        }
        if self.told_sold_out > 0 {
            line(format!(
                "The {} people still in line when the last seat sold waited {} (the median; one in ten more than \
                 {}) before hearing \"sold out\".",
                grouped(self.told_sold_out),
                span(self.told_sold_out_wait_median_seconds),
                span(self.told_sold_out_wait_p90_seconds)
            ));
        }
        line(format!(
            "The checkout: at most {} people inside at once (the capacity is {}); while seats lasted the door let \
             in {} people a minute and {} orders a minute were completed.",
            grouped(self.max_active),
            grouped(self.capacity),
            grouped(self.steady_admissions_per_minute.round() as u64),
            grouped(self.steady_orders_per_minute.round() as u64)
        ));
        if self.eta_join_checked > 0 {
            let measured = (self.eta_join_measured_share * 100.0).round();
            let basis = if measured >= 100.0 {
                "All of them came from the pace the room measured at the front of the line."
                    .to_owned()
            } else if measured <= 0.0 {
                "All of them came from the settings (the capacity over the expected visit), because nobody had \
                 left the checkout yet when they were shown."
                    .to_owned()
            } else {
                format!(
                    "{measured:.0}% of them came from the pace the room measured at the front of the line; the \
                     rest, shown before anyone had left the checkout, from the settings (the capacity over the \
                     expected visit)."
                )
            };
            line(format!(
                "Wait estimates: the first estimate people saw was within {} of the wait they then had for half \
                 of them, and within {} for nine in ten ({} people followed). {basis} Counting the new estimates \
                 their pages showed every 2 minutes as well: within {} for half, {} for nine in ten.",
                span(self.eta_join_median_abs_error_seconds),
                span(self.eta_join_p90_abs_error_seconds),
                grouped(self.eta_join_checked),
                span(self.eta_median_abs_error_seconds),
                span(self.eta_p90_abs_error_seconds)
            ));
        }
        let r = self.fairness_arrival_vs_ticket;
        line(format!(
            "Arriving early in the pre-queue {}: the correlation between arrival time and getting a ticket is \
             {r:+.2} (0: no link; -1: the earliest always win).",
            if r.abs() < 0.1 {
                "did not help"
            } else {
                "mattered"
            }
        ));
        if let Some((est, last)) = self.reach_halfway {
            line(format!(
                "Halfway through the seats, the room expected them to last as far as place {} in line (what it \
                 warns people behind that place about); the last buyer had place {}.",
                grouped(est),
                grouped(last)
            ));
        }
        if self.positions_checked > 0 {
            let flood = if self.one_shot_visitors > 0 {
                format!(
                    " {} one-shot visitors took a ticket each and never came back (the line's numbers, \
                     `numbers_out`, count them; the positions and `waiting` count the people who came back).",
                    grouped(self.one_shot_visitors)
                )
            } else {
                String::new()
            };
            line(format!(
                "Positions shown with the first estimate, against the people actually let in before each person's \
                 turn (themselves included): {:.2} times for half of the {} followed people, {:.2} at the 90th \
                 percentile (1 is exact; people who left ahead are counted until the door skips them).{flood}",
                self.position_over_actual_median,
                grouped(self.positions_checked),
                self.position_over_actual_p90,
            ));
        }
        if self.stepped_away > 0 {
            line(format!(
                "{} people stepped away for a while; {} turns came while someone was away. {} came back in time \
                 ({} let in: {} from their return to the door for half of them, {} at most; {} of them let in \
                 before while away) and {} too late.",
                grouped(self.stepped_away),
                grouped(self.missed_turns),
                grouped(self.returned_in_time),
                grouped(self.returned_let_in),
                span(self.return_wait_median_seconds),
                span(self.return_wait_max_seconds as f64),
                grouped(self.lapsed_let_in_again),
                grouped(self.returned_late)
            ));
        }
        line(format!(
            "The room's longest store call took {:.1} ms of real time; {} took over 5 ms.",
            self.longest_store_call_ms,
            grouped(self.store_calls_over_5ms)
        ));
        s
    }

    /// The per-minute table, its columns named by what they count: a minute's arrivals at the door and orders
    /// happened during that minute; the line, the checkout and the seats are as they stood at its end (seats sold:
    /// so far). From the minute before the opening.
    pub fn table(&self) -> String {
        const HEAD: [&str; 9] = [
            "minute",
            "in line",
            "numbers out",
            "inside",
            "let in",
            "orders",
            "seats sold",
            "seats held",
            "seats left",
        ];
        const UNDER: [&str; 9] = [
            "",
            "at end",
            "at end",
            "at end",
            "this minute",
            "this minute",
            "so far",
            "at end",
            "at end",
        ];
        let mut rows: Vec<[String; 9]> = vec![HEAD.map(String::from), UNDER.map(String::from)];
        for m in self.minutes.iter().filter(|m| m.minute >= 0) {
            rows.push([
                m.minute.to_string(),
                grouped(m.waiting),
                grouped(m.numbers_out),
                grouped(m.active),
                grouped(m.admitted),
                grouped(m.orders),
                grouped(m.sold),
                grouped(m.held),
                grouped(m.available),
            ]);
        }
        let widths: Vec<usize> = (0..9)
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        let mut s = String::from(
            "Minute by minute (minute 1 is the first after the opening; \"this minute\" counts what happened \
             during it, \"at end\" is how things stood when it ended; the run stops once the line has heard \
             \"sold out\", so its last minute may be cut short; \"in line\" counts the people who came back, \
             \"numbers out\" the line numbers handed out after the head, one-shot tickets and people who left \
             included)\n",
        );
        for r in &rows {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:>w$}"))
                .collect();
            let _ = writeln!(s, "{}", cells.join("  ").trim_end());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::{percent, span};

    #[test]
    fn spans_and_shares_read_as_words() {
        assert_eq!(span(0.0), "0 seconds");
        assert_eq!(span(1.0), "1 second");
        assert_eq!(span(89.4), "89 seconds");
        assert_eq!(span(90.0), "1.5 minutes");
        assert_eq!(span(432.0), "7.2 minutes");
        assert_eq!(span(5400.0), "1.5 hours");
        assert_eq!(percent(2_371, 30_000), "7.9%");
        assert_eq!(percent(4_200, 30_000), "14%");
        assert_eq!(percent(1, 0), "0.0%");
    }
}
