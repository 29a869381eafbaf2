//! A time-compressed rehearsal of an on-sale, driving the real room (the same `WaitingRoom` the layer uses) with a
//! manual clock.
//!
//! The crowd is simulated person by person: arrivals (most before the opening, a tail after), a random draw or FIFO,
//! people in line giving up (they stop polling and are skipped at the head), admitted people who hold seats after a
//! minute, pay at the end of a visit of varying length (gamma-distributed, mean 4 minutes) or leave without buying
//! (their holds expire; a few close the tab and idle out), and an inventory that feeds the room every second. Ten
//! minutes of on-sale run in seconds.
//!
//! What is simplified, and why it changes nothing the room decides: a waiting session's poll only matters to the
//! room through its liveness mark, which is read when the session reaches the head. So the rehearsal sends the polls
//! of sessions within a window ahead of the head (larger than the head moves in an abandon grace period) through
//! `WaitingRoom::locate`, and skips the polls of people further back. Two kinds of poll are sent wherever the person
//! is: a followed person's polls until the page first shows them an estimate (the estimate at join), and, once the
//! room is sold out, every poll of everyone still in line until each has heard it. The cost of a poll itself is
//! measured by the benchmarks, not here.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use waitroom_layer::store::{SessionState, Store};
use waitroom_layer::{
    EtaBasis, Fairness, Inventory, ManualClock, MemoryStore, StoreError, ViewState, WaitingRoom,
};

/// Everything a rehearsal can vary. [`Params::default`] is the seed's on-sale.
#[derive(Debug, Clone)]
pub struct Params {
    /// People who come for the on-sale (before `scale`).
    pub crowd: u64,
    /// Multiplies the crowd, the seats, the capacity and `admit_per_minute` together, so the ratios (people per
    /// seat, seats per place inside) and the minutes (when seats run out) stay those of the unscaled sale.
    pub scale: f64,
    /// Seats on sale.
    pub seats: u64,
    /// Most sessions active at once.
    pub capacity: u64,
    /// A cap on admissions per minute (before `scale`), on top of the capacity: smooths the opening, when the whole
    /// capacity would otherwise go in at once. `None` (the seed's room): the capacity alone.
    pub admit_per_minute: Option<u64>,
    /// Minutes from the first arrival to the opening (the pre-queue window).
    pub prequeue_minutes: f64,
    /// Share of the crowd that arrives before the opening.
    pub early_share: f64,
    /// Mean minutes after the opening at which the late share arrives (exponential).
    pub late_mean_minutes: f64,
    /// A random draw at the opening (else first come, first served).
    pub random_draw: bool,
    /// Mean visit length in minutes (gamma-distributed, shape 4).
    pub visit_minutes: f64,
    /// Share of admitted people who buy.
    pub buy_share: f64,
    /// Shares of orders of 1, 2, 3 and 4 seats (they need not add up to one: they are taken relative to their
    /// sum). The seed's: 10%, 15%, 40%, 35%, three seats an order on average.
    pub order_sizes: [f64; 4],
    /// Share of admitted people who close the tab without finishing (they idle out after `idle_minutes`).
    pub tab_close_share: f64,
    /// Share of non-buyers who hold seats before leaving (the holds expire).
    pub non_buyer_hold_share: f64,
    /// Seconds into a visit at which seats are held.
    pub hold_after_seconds: u64,
    /// Share of people in line who give up per minute of waiting.
    pub give_up_per_minute: f64,
    /// Seconds between polls of the holding page.
    pub poll_seconds: u64,
    /// Idle timeout of an active session, in minutes.
    pub idle_minutes: f64,
    /// Stop this many minutes after the opening at the latest.
    pub max_minutes_after_open: u64,
    /// Seed of the random generator (runs are repeatable).
    pub seed: u64,
    /// Every this many sessions, one is followed for the estimate-accuracy and fairness figures.
    pub sample_every: u64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            crowd: 600_000,
            scale: 1.0,
            seats: 48_000,
            capacity: 8_000,
            admit_per_minute: None,
            prequeue_minutes: 30.0,
            early_share: 0.85,
            late_mean_minutes: 3.0,
            random_draw: true,
            visit_minutes: 4.0,
            buy_share: 0.9,
            order_sizes: [0.10, 0.15, 0.40, 0.35],
            tab_close_share: 0.02,
            non_buyer_hold_share: 0.5,
            hold_after_seconds: 60,
            give_up_per_minute: 0.01,
            poll_seconds: 20,
            idle_minutes: 10.0,
            max_minutes_after_open: 45,
            seed: 2026,
            sample_every: 25,
        }
    }
}

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
}

/// A small, fast, seeded generator (SplitMix64): rehearsals are repeatable.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
    /// Gamma with shape `k` (an integer) and the given mean.
    pub fn gamma(&mut self, k: u32, mean: f64) -> f64 {
        (0..k).map(|_| self.exp(mean / f64::from(k))).sum()
    }
}

#[derive(Debug, Clone)]
struct Person {
    sid: String,
    arrive_s: u64,
    give_up_s: u64,
    buys: bool,
    tab_close: bool,
    holds_anyway: bool,
    qty: u64,
    visit_s: u64,
    number: u64,
    admitted_s: Option<u64>,
    bought: u64,
    held: u64,
    /// Estimates shown to a followed person: (when, seconds, basis).
    followed: Vec<(u64, u64, EtaBasis)>,
    /// The first estimate a followed person was shown (at join, or at the first poll with a place in line).
    first_shown: Option<(u64, u64, EtaBasis)>,
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

const START_MS: u64 = 1_800_000_000_000;

/// Runs a rehearsal on the embedded store.
///
/// # Errors
/// Never with the embedded store; see [`run_on`].
pub async fn run(p: &Params) -> Result<Report, StoreError> {
    run_on(p, Arc::new(MemoryStore::new()), "rehearsal").await
}

/// Runs a rehearsal on `store` (an on-sale id `event` not used before in that store).
///
/// # Errors
/// When the store fails; also (as [`StoreError::Unavailable`], naming the reason) when the parameters make no room
/// or no order size.
pub async fn run_on(p: &Params, store: Arc<dyn Store>, event: &str) -> Result<Report, StoreError> {
    let mut rng = Rng::new(p.seed);
    let crowd = (p.crowd as f64 * p.scale).round() as u64;
    let seats = (p.seats as f64 * p.scale).round() as u64;
    let capacity = ((p.capacity as f64 * p.scale).round() as u64).max(1);
    let open_s = (p.prequeue_minutes * 60.0).round() as u64;
    let clock = ManualClock::new(START_MS);
    let fairness = if p.random_draw {
        Fairness::RandomAtOpen {
            opens_at: UNIX_EPOCH + Duration::from_millis(START_MS + open_s * 1000),
        }
    } else {
        Fairness::Fifo
    };
    let mut b = WaitingRoom::builder(event)
        .capacity(capacity)
        .fairness(fairness)
        .poll_interval(Duration::from_secs(p.poll_seconds))
        .idle_timeout(Duration::from_secs_f64(p.idle_minutes * 60.0))
        .expected_visit(Duration::from_secs_f64(p.visit_minutes * 60.0))
        .clock(Arc::new(clock.clone()))
        .shared_store(store)
        .session_cache_capacity(crowd + 1_000)
        .background(false);
    if let Some(apm) = p.admit_per_minute {
        b = b.admit_per_minute(((apm as f64 * p.scale).round() as u64).max(1));
    }
    if !p.random_draw {
        b = b.opens_at(UNIX_EPOCH + Duration::from_millis(START_MS + open_s * 1000));
    }
    let room = b
        .build()
        .await
        .map_err(|e| StoreError::unavailable(e.to_string()))?;
    room.set_inventory(Inventory {
        total: seats,
        sold: 0,
        held: 0,
    })
    .await?;

    // The crowd.
    let order_total: f64 = p.order_sizes.iter().map(|s| s.max(0.0)).sum();
    if !(order_total > 0.0 && order_total.is_finite()) {
        return Err(StoreError::unavailable(
            "the order sizes' shares must add up to more than zero",
        ));
    }
    let order_cumulative: [f64; 3] =
        std::array::from_fn(|k| p.order_sizes[..=k].iter().map(|s| s.max(0.0)).sum::<f64>());
    let mut people: Vec<Person> = (0..crowd)
        .map(|i| {
            let arrive_s = if rng.unit() < p.early_share {
                (rng.unit() * open_s as f64) as u64
            } else {
                open_s + rng.exp(p.late_mean_minutes * 60.0) as u64
            };
            let give_up_after = if p.give_up_per_minute > 0.0 {
                rng.exp(60.0 / p.give_up_per_minute)
            } else {
                f64::MAX
            };
            // Orders of 1 to 4 seats (the seed's: three on average).
            let u = rng.unit() * order_total;
            let qty = 1 + order_cumulative.iter().filter(|&&c| u >= c).count() as u64;
            let buys = rng.unit() < p.buy_share;
            Person {
                sid: format!("r{i:021}"),
                arrive_s,
                // People give up only once the line is moving (after the opening).
                give_up_s: arrive_s
                    .max(open_s)
                    .saturating_add(give_up_after.min(1e12) as u64),
                buys,
                tab_close: !buys && rng.unit() < p.tab_close_share / (1.0 - p.buy_share).max(1e-9),
                holds_anyway: rng.unit() < p.non_buyer_hold_share,
                qty,
                visit_s: (rng.gamma(4, p.visit_minutes * 60.0) as u64)
                    .max(p.hold_after_seconds + 5),
                number: 0,
                admitted_s: None,
                bought: 0,
                held: 0,
                followed: Vec::new(),
                first_shown: None,
            }
        })
        .collect();
    let mut arrivals: Vec<usize> = (0..people.len()).collect();
    arrivals.sort_by_key(|&i| people[i].arrive_s);
    let by_sid: std::collections::HashMap<String, usize> = people
        .iter()
        .enumerate()
        .map(|(i, q)| (q.sid.clone(), i))
        .collect();
    // Line number -> person (index 0 unused).
    let mut by_number: Vec<usize> = vec![usize::MAX];
    let mut next_arrival = 0usize;
    let mut sold = 0u64;
    let mut held = 0u64;
    // (second, person, event): 0 = hold, 1 = end of visit
    let mut agenda: std::collections::BTreeMap<u64, Vec<(usize, u8)>> = Default::default();
    let mut minutes = Vec::new();
    let mut max_active = 0u64;
    let mut sold_out_at: Option<u64> = None;
    let mut no_seat_at: Option<u64> = None;
    let mut most_sold_at: Option<u64> = None;
    let mut told_within: Option<u64> = None;
    // From the moment the room turns sold out: the people then still in line who have not yet polled since, and
    // whether every poll since was answered "sold out".
    let mut sold_out_line: Option<Vec<usize>> = None;
    let mut last_told = 0u64;
    let mut everyone_told = true;
    // Followed people not yet shown an estimate.
    let mut unshown: Vec<usize> = (0..people.len())
        .filter(|&i| (i as u64).is_multiple_of(p.sample_every))
        .collect();
    let mut reach_halfway: Option<u64> = None;
    let mut last_admitted_minute = 0u64;
    let mut last_orders_minute = 0u64;
    let mut orders = 0u64;
    let window = capacity * 2 + 5_000;
    let end_s = open_s + p.max_minutes_after_open * 60;
    let poll = p.poll_seconds.max(1);
    let mut drawn = !p.random_draw;

    for t in 0..=end_s {
        clock.set_ms(START_MS + t * 1000);
        // Arrivals.
        while next_arrival < arrivals.len() && people[arrivals[next_arrival]].arrive_s <= t {
            let i = arrivals[next_arrival];
            next_arrival += 1;
            let pl = room.join(&people[i].sid, None).await?;
            if let Some(n) = pl.number {
                people[i].number = n;
                if by_number.len() as u64 <= n {
                    by_number.resize(n as usize + 1, usize::MAX);
                }
                by_number[n as usize] = i;
                if (i as u64).is_multiple_of(p.sample_every) {
                    let st = room.status(Some(&pl));
                    if let (Some(e), Some(b)) = (st.eta_seconds, st.eta_basis) {
                        people[i].followed.push((t, e, b));
                        if st.state == ViewState::Waiting {
                            people[i].first_shown = Some((t, e, b));
                        }
                    }
                }
            }
        }
        // Polls of the people near the head (see the module docs), who have not given up. Before the draw nobody
        // knows who will be near the head, so in the last abandon-grace period before the opening everyone in the
        // pre-queue polls.
        let served = room.snapshot().served;
        if !drawn && t + 3 * poll >= open_s {
            for q in people.iter().filter(|q| q.arrive_s <= t && q.number == 0) {
                if (t - q.arrive_s) % poll == 0 {
                    room.locate(&q.sid, None).await?;
                }
            }
        }
        if drawn {
            let hi = (served + window).min(by_number.len() as u64 - 1);
            for n in served + 1..=hi {
                let i = by_number[n as usize];
                if i == usize::MAX {
                    continue;
                }
                let q = &people[i];
                if t < q.give_up_s && t >= q.arrive_s && (t - q.arrive_s).is_multiple_of(poll) {
                    room.locate(&q.sid, Some(q.number)).await?;
                }
            }
        }
        // The first estimate a followed person is shown, at their first poll with a place in line (joins that got
        // one are recorded above). Only the followed people poll here, so this adds one liveness mark or two for
        // one person in `sample_every`, who would poll anyway.
        if drawn {
            let mut still = Vec::with_capacity(unshown.len());
            for &i in &unshown {
                let q = &people[i];
                if q.first_shown.is_some() || q.admitted_s.is_some() || t >= q.give_up_s {
                    continue;
                }
                if t <= q.arrive_s || !(t - q.arrive_s).is_multiple_of(poll) {
                    still.push(i);
                    continue;
                }
                let pl = room
                    .locate(&q.sid, (q.number > 0).then_some(q.number))
                    .await?;
                let st = room.status(pl.as_ref());
                match (st.state, st.eta_seconds, st.eta_basis) {
                    (ViewState::Waiting, Some(e), Some(b)) => {
                        people[i].first_shown = Some((t, e, b))
                    }
                    _ => still.push(i),
                }
            }
            unshown = still;
        }
        // Once the room is sold out, each person still in line hears it at their own next poll.
        if let (Some(line), Some(so)) = (sold_out_line.as_mut(), sold_out_at)
            && !line.is_empty()
        {
            let mut still = Vec::with_capacity(line.len());
            for &i in line.iter() {
                let q = &people[i];
                if t >= q.give_up_s {
                    continue; // gave up before hearing it: no longer in line
                }
                if !(t - q.arrive_s).is_multiple_of(poll) {
                    still.push(i);
                    continue;
                }
                let pl = room
                    .locate(&q.sid, (q.number > 0).then_some(q.number))
                    .await?;
                everyone_told &= room.status(pl.as_ref()).state == ViewState::SoldOut;
                last_told = t;
            }
            *line = still;
            if line.is_empty() {
                told_within = everyone_told.then_some(last_told.max(so) - so);
            }
        }
        // Seats: holds and ends of visits due now.
        if let Some(due) = agenda.remove(&t) {
            for (i, what) in due {
                let q = &mut people[i];
                if what == 0 {
                    if q.buys || q.holds_anyway {
                        let available = seats - sold - held;
                        q.held = q.qty.min(available);
                        held += q.held;
                    }
                } else if q.buys && q.held > 0 {
                    held -= q.held;
                    sold += q.held;
                    q.bought = q.held;
                    orders += 1;
                    room.finish(&q.sid, q.held as u32).await?;
                } else {
                    // Left without buying: the hold expires; most say so, a few just close the tab.
                    held -= q.held;
                    q.held = 0;
                    if !q.tab_close {
                        room.finish(&q.sid, 0).await?;
                    }
                }
            }
            room.set_inventory(Inventory {
                total: seats,
                sold,
                held,
            })
            .await?;
        }
        if sold * 100 >= seats * 95 && most_sold_at.is_none() {
            most_sold_at = Some(t);
        }
        if sold + held >= seats && no_seat_at.is_none() {
            no_seat_at = Some(t);
        }
        if sold >= seats && sold_out_at.is_none() {
            sold_out_at = Some(t);
        }
        if reach_halfway.is_none() && sold * 2 >= seats {
            let snap = room.snapshot();
            reach_halfway = waitroom_layer::estimate_reach(&snap);
        }
        // Every two minutes after the opening, what the followed people still in line are shown now.
        if drawn && t > open_s && (t - open_s).is_multiple_of(120) {
            let served = room.snapshot().served;
            for q in people
                .iter_mut()
                .filter(|q| !q.followed.is_empty() && q.admitted_s.is_none())
            {
                if q.number > served && t < q.give_up_s {
                    let pl = waitroom_layer::Placement {
                        session: q.sid.clone(),
                        state: SessionState::Waiting,
                        number: Some(q.number),
                    };
                    let st = room.status(Some(&pl));
                    if let (Some(e), Some(b)) = (st.eta_seconds, st.eta_basis) {
                        q.followed.push((t, e, b));
                    }
                }
            }
        }
        // The door.
        let report = room.tick_now().await?;
        // The draw runs at the first tick or join after the opening, whichever comes first.
        if !drawn && room.snapshot().drawn {
            drawn = true;
            // Everyone in the pre-queue now has a number: learn them once.
            for (i, q) in people.iter_mut().enumerate() {
                if q.arrive_s <= t
                    && q.number == 0
                    && let Some(pl) = room.locate(&q.sid, None).await?
                    && let Some(n) = pl.number
                {
                    q.number = n;
                    if by_number.len() as u64 <= n {
                        by_number.resize(n as usize + 1, usize::MAX);
                    }
                    by_number[n as usize] = i;
                    if (i as u64).is_multiple_of(p.sample_every)
                        && pl.state == SessionState::Waiting
                    {
                        let st = room.status(Some(&pl));
                        if let (Some(e), Some(b)) = (st.eta_seconds, st.eta_basis) {
                            q.followed.push((t, e, b));
                        }
                    }
                }
            }
        }
        for sid in &report.admitted {
            let i = by_sid[sid.as_str()];
            let q = &mut people[i];
            q.admitted_s = Some(t);
            if t >= q.give_up_s {
                continue; // gave up moments ago: never claims; the place frees after the arrival window
            }
            room.claim(sid).await?;
            agenda
                .entry(t + p.hold_after_seconds)
                .or_default()
                .push((i, 0));
            agenda.entry(t + q.visit_s).or_default().push((i, 1));
        }
        let snap = room.snapshot();
        max_active = max_active.max(snap.active);
        if sold_out_at.is_some() && sold_out_line.is_none() && snap.settings.sold_out() {
            // From this snapshot on, the room answers "sold out": who is still in line to hear it (their polls
            // from the next second on, above, tell them).
            let line: Vec<usize> = (0..people.len())
                .filter(|&i| {
                    let q = &people[i];
                    q.admitted_s.is_none() && q.arrive_s <= t && t < q.give_up_s
                })
                .collect();
            if line.is_empty() {
                told_within = Some(t - sold_out_at.unwrap_or(t));
            }
            sold_out_line = Some(line);
        }
        if t % 60 == 59 {
            let c = snap.counters;
            minutes.push(Minute {
                minute: (t as i64 + 1 - open_s as i64) / 60,
                waiting: snap.waiting(),
                active: snap.active,
                admitted: c.admitted - last_admitted_minute,
                orders: orders - last_orders_minute,
                sold,
                held,
                available: seats - sold - held,
            });
            last_admitted_minute = c.admitted;
            last_orders_minute = orders;
        }
        if sold_out_line.as_ref().is_some_and(Vec::is_empty) && snap.active == 0 {
            break;
        }
    }

    // Steady state: from minute 3 after the opening until the seats run short.
    let steady: Vec<Minute> = minutes
        .iter()
        .copied()
        .filter(|m| {
            m.minute > 3
                && no_seat_at.is_none_or(|s| (m.minute as u64) * 60 <= s.saturating_sub(open_s))
        })
        .collect();
    let avg = |f: &dyn Fn(&Minute) -> u64| {
        if steady.is_empty() {
            0.0
        } else {
            steady.iter().map(|m| f(m) as f64).sum::<f64>() / steady.len() as f64
        }
    };
    // Estimates against waits.
    let mut abs_err = Vec::new();
    let mut rel_err = Vec::new();
    let mut measured = 0u64;
    for q in &people {
        let Some(adm) = q.admitted_s else { continue };
        for &(at, est, basis) in q.followed.iter().filter(|f| f.0 < adm) {
            let actual = (adm - at) as f64;
            abs_err.push((est as f64 - actual).abs());
            rel_err.push((est as f64 - actual).abs() / actual.max(60.0));
            measured += u64::from(basis == EtaBasis::Measured);
        }
    }
    let eta_checked = abs_err.len() as u64;
    let mut join_err = Vec::new();
    let mut join_measured = 0u64;
    for q in &people {
        if let (Some(adm), Some((at, est, basis))) = (q.admitted_s, q.first_shown)
            && at < adm
        {
            join_err.push((est as f64 - (adm - at) as f64).abs());
            join_measured += u64::from(basis == EtaBasis::Measured);
        }
    }
    let eta_join_checked = join_err.len() as u64;
    // Fairness among the pre-queue.
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for (i, q) in people.iter().enumerate() {
        if q.arrive_s < open_s && (i as u64).is_multiple_of(5) {
            xs.push(q.arrive_s as f64);
            ys.push(if q.bought > 0 { 1.0 } else { 0.0 });
        }
    }
    let last_buyer = people
        .iter()
        .filter(|q| q.bought > 0)
        .map(|q| q.number)
        .max()
        .unwrap_or(0);
    let snap = room.snapshot();
    Ok(Report {
        joined: snap.counters.joined,
        sold_out_after_seconds: sold_out_at.map(|s| s.saturating_sub(open_s)),
        no_seat_available_after_seconds: no_seat_at.map(|s| s.saturating_sub(open_s)),
        most_sold_after_seconds: most_sold_at.map(|s| s.saturating_sub(open_s)),
        max_active,
        capacity,
        steady_admissions_per_minute: avg(&|m| m.admitted),
        steady_orders_per_minute: avg(&|m| m.orders),
        minutes,
        orders,
        eta_checked,
        eta_median_abs_error_seconds: percentile(&mut abs_err.clone(), 0.5),
        eta_p90_abs_error_seconds: percentile(&mut abs_err, 0.9),
        eta_median_rel_error: percentile(&mut rel_err, 0.5),
        eta_measured_share: if eta_checked == 0 {
            0.0
        } else {
            measured as f64 / eta_checked as f64
        },
        eta_join_checked,
        eta_join_median_abs_error_seconds: percentile(&mut join_err.clone(), 0.5),
        eta_join_p90_abs_error_seconds: percentile(&mut join_err, 0.9),
        eta_join_measured_share: if eta_join_checked == 0 {
            0.0
        } else {
            join_measured as f64 / eta_join_checked as f64
        },
        fairness_arrival_vs_ticket: pearson(&xs, &ys),
        sold_out_told_within_seconds: told_within,
        reach_halfway: reach_halfway.map(|r| (r, last_buyer)),
    })
}
