//! The on-sale, one second at a time, through the real room on a manual clock.
//!
//! Each second runs the same steps in the same order ([`Simulation::second`]): arrivals join, the people near the
//! head (and the followed and the told) poll, the seats due are held or paid for, the milestones are noted, the
//! followed people still in line are re-estimated, the door ticks and the admitted claim their places, and the
//! minute's row is written.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use waitroom_layer::store::{SessionState, Store, TickReport};
use waitroom_layer::{
    Fairness, Inventory, ManualClock, Placement, Snapshot, Status, StoreError, ViewState,
    WaitingRoom,
};

use super::Params;
use super::crowd::{Person, Shown, crowd};
use super::report::Minute;

/// The manual clock's reading at the first second (the first arrival), in milliseconds since the epoch.
const START_MS: u64 = 1_800_000_000_000;

/// The room's arrival window (its default), in seconds.
const ROOM_ARRIVAL_WINDOW_S: u64 = 60;

/// What is due for an admitted person at a second of the agenda.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// `hold_after_seconds` into the visit: buyers (and some non-buyers) hold their seats.
    Hold,
    /// The visit ends: a buyer pays for the held seats, anyone else leaves (the hold expires).
    EndOfVisit,
}

/// The seats, as the shop counts them.
#[derive(Debug)]
pub(super) struct Seats {
    pub total: u64,
    pub sold: u64,
    pub held: u64,
    /// Orders completed.
    pub orders: u64,
}

impl Seats {
    fn available(&self) -> u64 {
        self.total - self.sold - self.held
    }

    fn inventory(&self) -> Inventory {
        Inventory {
            total: self.total,
            sold: self.sold,
            held: self.held,
        }
    }
}

/// When things first happened, in seconds since the first arrival.
#[derive(Debug, Default)]
pub(super) struct Milestones {
    /// 95% of the seats sold.
    pub most_sold_at: Option<u64>,
    /// No seat available (all sold or held).
    pub no_seat_at: Option<u64>,
    /// The last seat sold.
    pub sold_out_at: Option<u64>,
    /// The room's reach estimate when half the seats were sold, as a line number.
    pub reach_halfway: Option<u64>,
}

/// Telling the line "sold out".
#[derive(Debug)]
pub(super) struct SoldOutNews {
    /// From the moment the room turns sold out: the people then still in line who have not polled since.
    line: Option<Vec<usize>>,
    /// The last second one of them heard it.
    last_told: u64,
    /// Every poll since the room turned sold out was answered "sold out".
    everyone_told: bool,
    /// Seconds from the last seat sold until the last of them heard it, once all have (and all heard "sold out").
    pub told_within: Option<u64>,
}

/// The per-minute table and the highest active count.
#[derive(Debug, Default)]
pub(super) struct Table {
    pub minutes: Vec<Minute>,
    pub max_active: u64,
    /// The room's admissions counter and the orders at the end of the last row.
    admitted_before: u64,
    orders_before: u64,
}

/// A rehearsal under way: the room, the crowd, and what the run has counted so far.
pub(super) struct Simulation<'p> {
    pub p: &'p Params,
    pub(super) room: WaitingRoom,
    clock: ManualClock,
    /// The capacity in force (after `scale`).
    pub capacity: u64,
    /// The opening, in seconds since the first arrival.
    pub open_s: u64,
    /// The last second of the run.
    end_s: u64,
    /// Seconds between polls.
    poll: u64,
    /// How far behind the head people's polls are sent (see the module docs).
    window: u64,
    pub people: Vec<Person>,
    /// The people in order of arrival, and the next one to arrive.
    arrivals: Vec<usize>,
    next_arrival: usize,
    /// When each one-shot visitor sends its request, in order, and the next one.
    one_shots: Vec<u64>,
    next_one_shot: usize,
    by_sid: HashMap<String, usize>,
    /// Line number -> person (`usize::MAX`: nobody known; index 0 unused).
    by_number: Vec<usize>,
    /// Second -> what is due then, and for whom.
    agenda: BTreeMap<u64, Vec<(usize, Due)>>,
    /// The pre-queue has its line numbers (always, in FIFO).
    drawn: bool,
    /// Followed people not yet shown an estimate.
    unshown: Vec<usize>,
    /// People whose turn passed while they were away, until they are let in or told it passed for good.
    missed: Vec<usize>,
    pub seats: Seats,
    pub milestones: Milestones,
    pub news: SoldOutNews,
    pub table: Table,
}

impl<'p> Simulation<'p> {
    /// Builds the room on `store` for on-sale `event`, gives it the seats, and draws the crowd.
    pub async fn start(
        p: &'p Params,
        store: Arc<dyn Store>,
        event: &str,
    ) -> Result<Self, StoreError> {
        let crowd_size = (p.crowd as f64 * p.scale).round() as u64;
        let seats = Seats {
            total: (p.seats as f64 * p.scale).round() as u64,
            sold: 0,
            held: 0,
            orders: 0,
        };
        let capacity = ((p.capacity as f64 * p.scale).round() as u64).max(1);
        let open_s = (p.prequeue_minutes * 60.0).round() as u64;
        let clock = ManualClock::new(START_MS);
        let opens_at = UNIX_EPOCH + Duration::from_millis(START_MS + open_s * 1000);
        let mut b = WaitingRoom::builder(event)
            .capacity(capacity)
            .fairness(if p.random_draw {
                Fairness::RandomAtOpen { opens_at }
            } else {
                Fairness::Fifo
            })
            .poll_interval(Duration::from_secs(p.poll_seconds))
            .return_window(Duration::from_secs_f64(
                p.return_window_minutes.max(0.0) * 60.0,
            ))
            .idle_timeout(Duration::from_secs_f64(p.idle_minutes * 60.0))
            .expected_visit(Duration::from_secs_f64(p.visit_minutes * 60.0))
            .clock(Arc::new(clock.clone()))
            .shared_store(store)
            .session_cache_capacity(crowd_size + 1_000)
            .background(false);
        if let Some(apm) = p.admit_per_minute {
            b = b.admit_per_minute(((apm as f64 * p.scale).round() as u64).max(1));
        }
        if !p.random_draw {
            b = b.opens_at(opens_at);
        }
        let room = b
            .build()
            .await
            .map_err(|e| StoreError::config(e.to_string()))?;
        room.set_inventory(seats.inventory()).await?;

        let people = crowd(p, crowd_size, open_s)?;
        let one_shots = super::crowd::one_shots(
            p.seed,
            (crowd_size as f64 * p.one_shot_share.max(0.0)).round() as u64,
            open_s,
        );
        let mut arrivals: Vec<usize> = (0..people.len()).collect();
        arrivals.sort_by_key(|&i| people[i].arrive_s);
        let by_sid = people
            .iter()
            .enumerate()
            .map(|(i, q)| (q.sid.clone(), i))
            .collect();
        let unshown = (0..people.len())
            .filter(|&i| (i as u64).is_multiple_of(p.sample_every))
            .collect();
        Ok(Self {
            p,
            room,
            clock,
            capacity,
            open_s,
            end_s: open_s + p.max_minutes_after_open * 60,
            poll: p.poll_seconds.max(1),
            window: capacity * 2 + 5_000,
            people,
            arrivals,
            next_arrival: 0,
            one_shots,
            next_one_shot: 0,
            by_sid,
            by_number: vec![usize::MAX],
            agenda: BTreeMap::new(),
            drawn: !p.random_draw,
            unshown,
            missed: Vec::new(),
            seats,
            milestones: Milestones::default(),
            news: SoldOutNews {
                line: None,
                last_told: 0,
                everyone_told: true,
                told_within: None,
            },
            table: Table::default(),
        })
    }

    /// Runs every second until the line has heard "sold out" and the checkout is empty, or the time is up.
    pub async fn run(&mut self) -> Result<(), StoreError> {
        for t in 0..=self.end_s {
            let over = self.second(t).await?;
            if over || t == self.end_s {
                // The last minute may be cut short: its row too, so the table adds up to the run.
                if t % 60 != 59 {
                    let snap = self.room.snapshot();
                    self.minute_row(t, &snap);
                }
                break;
            }
        }
        Ok(())
    }

    /// One-shot visitors sent so far.
    pub fn one_shots_sent(&self) -> u64 {
        self.next_one_shot as u64
    }

    /// The people the room has counted as joined.
    pub fn joined(&self) -> u64 {
        self.room.snapshot().counters.joined
    }

    /// The room's running totals.
    pub fn counters(&self) -> waitroom_layer::store::Counters {
        self.room.snapshot().counters
    }

    /// Second `t`, step by step; `true` when the rehearsal is over.
    async fn second(&mut self, t: u64) -> Result<bool, StoreError> {
        self.clock.set_ms(START_MS + t * 1000);
        self.arrivals(t).await?;
        self.near_head_polls(t).await?;
        self.returns(t).await?;
        self.first_estimates(t).await?;
        self.sold_out_polls(t).await?;
        self.seats_due(t).await?;
        self.milestones(t);
        self.re_estimates(t);
        self.door(t).await?;
        let snap = self.room.snapshot();
        self.table.max_active = self.table.max_active.max(snap.active);
        self.watch_sold_out(t, &snap);
        if t % 60 == 59 {
            self.minute_row(t, &snap);
        }
        Ok(self.news.line.as_ref().is_some_and(Vec::is_empty) && snap.active == 0)
    }

    /// Person `i` is one of those followed for the estimate-accuracy and fairness figures.
    fn followed(&self, i: usize) -> bool {
        (i as u64).is_multiple_of(self.p.sample_every)
    }

    /// Person `i` has line number `n`.
    fn numbered(&mut self, i: usize, n: u64) {
        self.people[i].number = n;
        if self.by_number.len() as u64 <= n {
            self.by_number.resize(n as usize + 1, usize::MAX);
        }
        self.by_number[n as usize] = i;
    }

    /// Records the estimate `status` shows followed person `i` at second `t`, if it shows one; returns it.
    fn follow(&mut self, i: usize, t: u64, status: &Status) -> Option<Shown> {
        let shown = Shown::of(t, status)?;
        self.people[i].followed.push(shown);
        Some(shown)
    }

    /// The people due by `t` join (and learn their line number, if the line has numbers yet).
    async fn arrivals(&mut self, t: u64) -> Result<(), StoreError> {
        while let Some(&i) = self.arrivals.get(self.next_arrival)
            && self.people[i].arrive_s <= t
        {
            self.next_arrival += 1;
            let pl = self.room.join(&self.people[i].sid, None).await?;
            let Some(n) = pl.number else { continue };
            self.numbered(i, n);
            if self.followed(i) {
                let st = self.room.status(Some(&pl));
                if let Some(shown) = self.follow(i, t, &st)
                    && st.state == ViewState::Waiting
                {
                    self.people[i].first_shown = Some(shown);
                    self.people[i].first_position = st.position;
                }
            }
        }
        // One-shot visitors: a ticket each, never redeemed.
        while let Some(&at) = self.one_shots.get(self.next_one_shot)
            && at <= t
        {
            self.next_one_shot += 1;
            self.room.ticket(&WaitingRoom::new_session_id()).await?;
        }
        Ok(())
    }

    /// Polls of the people near the head (see the module docs), who have not given up. Before the draw nobody
    /// knows who will be near the head, so in the last abandon-grace period before the opening everyone in the
    /// pre-queue polls.
    async fn near_head_polls(&mut self, t: u64) -> Result<(), StoreError> {
        let served = self.room.snapshot().served;
        let poll = self.poll;
        if !self.drawn && t + 3 * poll >= self.open_s {
            // Everyone who joined before the draw is in the pre-queue: their pages poll with the pre-queue mark
            // their cookie carries, as a browser's do.
            for q in self
                .people
                .iter()
                .filter(|q| q.arrive_s <= t && q.number == 0)
            {
                if (t - q.arrive_s).is_multiple_of(poll) {
                    self.room.locate_marked(&q.sid, None, true).await?;
                }
            }
        }
        if self.drawn {
            // The window counts people, not numbers: numbers nobody holds (one-shot tickets) are passed over.
            let mut people = 0;
            let last = self.by_number.len() as u64 - 1;
            for n in served + 1..=last {
                if people >= self.window {
                    break;
                }
                let i = self.by_number[n as usize];
                if i == usize::MAX {
                    continue;
                }
                people += 1;
                let q = &self.people[i];
                if t < q.give_up_s
                    && t >= q.arrive_s
                    && !q.away_at(t)
                    && (t - q.arrive_s).is_multiple_of(poll)
                {
                    self.room.locate(&q.sid, Some(q.number)).await?;
                }
            }
        }
        Ok(())
    }

    /// The first estimate a followed person is shown, at their first poll with a place in line (joins that got
    /// one are recorded on arrival). Only the followed people poll here, so this adds one liveness mark or two
    /// for one person in `sample_every`, who would poll anyway.
    async fn first_estimates(&mut self, t: u64) -> Result<(), StoreError> {
        if !self.drawn {
            return Ok(());
        }
        let unshown = std::mem::take(&mut self.unshown);
        let mut still = Vec::with_capacity(unshown.len());
        for i in unshown {
            let q = &self.people[i];
            if q.first_shown.is_some() || q.admitted_s.is_some() || t >= q.give_up_s {
                continue;
            }
            if t <= q.arrive_s || !(t - q.arrive_s).is_multiple_of(self.poll) {
                still.push(i);
                continue;
            }
            let pl = self
                .room
                .locate(&q.sid, (q.number > 0).then_some(q.number))
                .await?;
            let st = self.room.status(pl.as_ref());
            match Shown::of(t, &st) {
                Some(shown) if st.state == ViewState::Waiting => {
                    self.people[i].first_shown = Some(shown);
                    self.people[i].first_position = st.position;
                }
                _ => still.push(i),
            }
        }
        self.unshown = still;
        Ok(())
    }

    /// Once the room is sold out, each person still in line hears it at their own next poll.
    async fn sold_out_polls(&mut self, t: u64) -> Result<(), StoreError> {
        let Some(so) = self.milestones.sold_out_at else {
            return Ok(());
        };
        let Some(line) = self.news.line.take_if(|line| !line.is_empty()) else {
            return Ok(());
        };
        let mut still = Vec::with_capacity(line.len());
        for i in line {
            let q = &self.people[i];
            if t >= q.give_up_s {
                continue; // gave up before hearing it: no longer in line
            }
            if q.away_at(t) || !(t - q.arrive_s).is_multiple_of(self.poll) {
                still.push(i);
                continue;
            }
            let pl = self
                .room
                .locate(&q.sid, (q.number > 0).then_some(q.number))
                .await?;
            let told = self.room.status(pl.as_ref()).state == ViewState::SoldOut;
            self.news.everyone_told &= told;
            self.news.last_told = t;
            if told {
                self.people[i].told_sold_out_s = Some(t);
            }
        }
        if still.is_empty() {
            self.news.told_within = self
                .news
                .everyone_told
                .then_some(self.news.last_told.max(so) - so);
        }
        self.news.line = Some(still);
        Ok(())
    }

    /// The people whose turn passed while they were away: a page polls at once when its person comes back, then
    /// every poll interval until the door lets them in (ahead of the line, within the return window) or it tells
    /// them their turn passed for good.
    async fn returns(&mut self, t: u64) -> Result<(), StoreError> {
        let missed = std::mem::take(&mut self.missed);
        let mut still = Vec::with_capacity(missed.len());
        for i in missed {
            let q = &self.people[i];
            let Some((_, back)) = q.away else { continue };
            if (q.admitted_s.is_some() && !q.lapsed) || t >= q.give_up_s {
                continue; // let in, or gave up while away: never comes back
            }
            let due = match q.returned_s {
                None => t >= back,
                Some(r) => (t - r).is_multiple_of(self.poll),
            };
            if !due {
                still.push(i);
                continue;
            }
            let pl = self.room.locate(&q.sid, Some(q.number)).await?;
            match pl.map(|p| p.state) {
                Some(SessionState::Returning) => {
                    self.people[i].returned_s.get_or_insert(t);
                    still.push(i);
                }
                Some(SessionState::Missed) => still.push(i), // not back yet by the room's clock
                _ => {} // told its turn passed (or let in already)
            }
        }
        self.missed = still;
        Ok(())
    }

    /// Seats: the holds and ends of visits due at `t`, then the inventory the room sees.
    async fn seats_due(&mut self, t: u64) -> Result<(), StoreError> {
        let Some(due) = self.agenda.remove(&t) else {
            return Ok(());
        };
        for (i, what) in due {
            let q = &mut self.people[i];
            match what {
                Due::Hold => {
                    if q.buys || q.holds_anyway {
                        q.held = q.qty.min(self.seats.available());
                        self.seats.held += q.held;
                    }
                }
                Due::EndOfVisit if q.buys && q.held > 0 => {
                    self.seats.held -= q.held;
                    self.seats.sold += q.held;
                    q.bought = q.held;
                    self.seats.orders += 1;
                    self.room.finish(&q.sid, q.held as u32).await?;
                }
                Due::EndOfVisit => {
                    // Left without buying: the hold expires; most say so, a few just close the tab.
                    self.seats.held -= q.held;
                    q.held = 0;
                    if !q.tab_close {
                        self.room.finish(&q.sid, 0).await?;
                    }
                }
            }
        }
        self.room.set_inventory(self.seats.inventory()).await?;
        Ok(())
    }

    /// Notes the first second each milestone is reached.
    fn milestones(&mut self, t: u64) {
        let (s, m) = (&self.seats, &mut self.milestones);
        if s.sold * 100 >= s.total * 95 && m.most_sold_at.is_none() {
            m.most_sold_at = Some(t);
        }
        if s.sold + s.held >= s.total && m.no_seat_at.is_none() {
            m.no_seat_at = Some(t);
        }
        if s.sold >= s.total && m.sold_out_at.is_none() {
            m.sold_out_at = Some(t);
        }
        if m.reach_halfway.is_none() && s.sold * 2 >= s.total {
            m.reach_halfway = waitroom_layer::estimate_reach(&self.room.snapshot());
        }
    }

    /// Every two minutes after the opening, what the followed people still in line are shown now.
    fn re_estimates(&mut self, t: u64) {
        if !(self.drawn && t > self.open_s && (t - self.open_s).is_multiple_of(120)) {
            return;
        }
        let served = self.room.snapshot().served;
        for i in 0..self.people.len() {
            let q = &self.people[i];
            if q.followed.is_empty() || q.admitted_s.is_some() || q.number <= served {
                continue;
            }
            if t < q.give_up_s {
                let pl = Placement {
                    session: q.sid.clone(),
                    state: SessionState::Waiting,
                    number: Some(q.number),
                };
                let st = self.room.status(Some(&pl));
                self.follow(i, t, &st);
            }
        }
    }

    /// The door ticks; at the draw the pre-queue learns its numbers; the admitted claim their places.
    async fn door(&mut self, t: u64) -> Result<(), StoreError> {
        let report = self.room.tick_now().await?;
        // The draw runs at the first tick or join after the opening, whichever comes first.
        if !self.drawn && self.room.snapshot().drawn {
            self.drawn = true;
            self.learn_numbers(t).await?;
        }
        for sid in &report.missed {
            let i = self.by_sid[sid.as_str()];
            let q = &mut self.people[i];
            // A skip at the head, or an admission not claimed within the arrival window (let in while away): either
            // way the room keeps the turn for the return window, and the page polls when its person is back.
            if q.admitted_s.is_some() {
                q.lapsed = true;
            }
            if q.away.is_some() && !self.missed.contains(&i) {
                self.missed.push(i);
            }
        }
        self.admit(t, report).await
    }

    /// Everyone in the pre-queue has a number once the draw ran: learn them once. Asked with the pre-queue mark, as
    /// a browser's first poll after the draw asks: the room answers from its copy of the draw's numbers, read while
    /// this runs; one it has not read yet (no number in the answer) is asked of the store.
    async fn learn_numbers(&mut self, t: u64) -> Result<(), StoreError> {
        for i in 0..self.people.len() {
            let q = &self.people[i];
            if q.arrive_s > t || q.number != 0 {
                continue;
            }
            let mut pl = self.room.locate_marked(&q.sid, None, true).await?;
            if pl.as_ref().is_some_and(|p| p.number.is_none()) {
                pl = self.room.locate(&q.sid, None).await?;
            }
            if let Some(pl) = pl
                && let Some(n) = pl.number
            {
                self.numbered(i, n);
                if self.followed(i) && pl.state == SessionState::Waiting {
                    let st = self.room.status(Some(&pl));
                    self.follow(i, t, &st);
                }
            }
        }
        Ok(())
    }

    /// The people the door let in at `t` claim their places, and their hold and end of visit go on the agenda.
    async fn admit(&mut self, t: u64, report: TickReport) -> Result<(), StoreError> {
        for sid in &report.admitted {
            let i = self.by_sid[sid.as_str()];
            let q = &mut self.people[i];
            q.admitted_s = Some(t);
            q.let_in_again |= q.lapsed;
            q.lapsed = false;
            if t >= q.give_up_s {
                continue; // gave up moments ago: never claims; the place frees after the arrival window
            }
            if q.away_at(t)
                && q.away
                    .is_some_and(|(_, back)| back > t + ROOM_ARRIVAL_WINDOW_S)
            {
                // Let in while away but within the grace (it had polled lately), and back only after the arrival
                // window: does not claim; the place frees at the end of the window and the room keeps the turn
                // (`report.missed` in `door`): back within the return window, the page polls and the door lets
                // them in again. (Back within the arrival window: claims at once, as below.)
                continue;
            }
            let end_of_visit = t + q.visit_s;
            self.room.claim(sid).await?;
            let hold = t + self.p.hold_after_seconds;
            self.agenda.entry(hold).or_default().push((i, Due::Hold));
            self.agenda
                .entry(end_of_visit)
                .or_default()
                .push((i, Due::EndOfVisit));
        }
        Ok(())
    }

    /// Once the last seat is sold and the room answers "sold out": who is still in line to hear it (their polls
    /// from the next second on tell them, in [`Self::sold_out_polls`]).
    fn watch_sold_out(&mut self, t: u64, snap: &Snapshot) {
        let Some(so) = self.milestones.sold_out_at else {
            return;
        };
        if self.news.line.is_some() || !snap.settings.sold_out() {
            return;
        }
        let line: Vec<usize> = (0..self.people.len())
            .filter(|&i| {
                let q = &self.people[i];
                q.admitted_s.is_none() && q.arrive_s <= t && t < q.give_up_s
            })
            .collect();
        if line.is_empty() {
            self.news.told_within = Some(t - so);
        }
        self.news.line = Some(line);
    }

    /// The row of the minute ending at second `t` (or cut short at `t`, the run's last second).
    fn minute_row(&mut self, t: u64, snap: &Snapshot) {
        let admitted = snap.counters.admitted;
        // The minute `t` is in, counted from 1 for the first after the opening (0 the one before).
        let since_open = t as i64 + 1 - self.open_s as i64;
        self.table.minutes.push(Minute {
            minute: -((-since_open).div_euclid(60)),
            waiting: snap.waiting(),
            numbers_out: snap.last_number.saturating_sub(snap.served),
            active: snap.active,
            admitted: admitted - self.table.admitted_before,
            orders: self.seats.orders - self.table.orders_before,
            sold: self.seats.sold,
            held: self.seats.held,
            available: self.seats.available(),
        });
        self.table.admitted_before = admitted;
        self.table.orders_before = self.seats.orders;
    }
}
