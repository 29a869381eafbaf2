//! Honest numbers through the real room (issue 6): wait estimates checked against the waits people had in a
//! simulated sale, estimates that move both ways, the reach of the remaining seats, "sold out" heard within a poll,
//! and the default sale's arithmetic at a tenth of its size (issue 8).

use std::sync::Arc;
use std::time::Duration;

use waitroom::layer::{EtaBasis, Inventory, ManualClock, ViewState, WaitingRoom};
use waitroom::rehearsal::{Params, run};

/// The seed's on-sale at a twentieth of its size (30,000 people, 2,400 seats, capacity 400), FIFO so that people
/// arriving after the opening are shown measured estimates too.
fn small_sale(random_draw: bool) -> Params {
    Params {
        scale: 0.05,
        random_draw,
        sample_every: 5,
        ..Params::default()
    }
}

/// Every followed session's estimate against the wait it then had until admission, over the whole line: the
/// median and the 90th percentile of the error of the estimate shown at join, and of all estimates (at join and
/// every two minutes after). All four are bounded.
///
/// "At join": for a session that joined once the line had numbers (after the opening, or from the start in FIFO,
/// whose joins are numbered at once) the estimate its join answered; for a pre-queued session the estimate its page got
/// at its first poll with a place in line, up to one poll interval (20 s) after the draw (see
/// `Report::eta_join_checked`).
///
/// The estimate is the position over the pace of the head plus what is left of the first wave's lag
/// (waitroom-layer's `estimate` module docs; with the rehearsal's shape-4 gamma visits the lag is the 3/8 of a visit
/// the point estimate assumes). What it cannot foresee is chance, and a change of pace after it was shown.
///
/// The bounds, from the sale's arithmetic (a twentieth: capacity `C` = 400, visits of `V` = 4 minutes, so a pace
/// of `λ = C / V` = 100 places a minute) and its noise:
/// - Chance: a wait of `w` minutes is `λ w` departures; with departures as random as a Poisson stream (visits of
///   shape 4 are more regular than that, so this over-counts), its length has a standard deviation of
///   `σ(w) = sqrt(λ w) / λ`. The longest wait of someone let in while seats last is the time until they run out,
///   about 7.2 minutes (see the next test's arithmetic): `σ` = 16 s. Errors of a normal wait are within `4 σ` but
///   for one in 16,000.
/// - The first-wave lag is counted in full from the opening while the first places free a little sooner than the
///   renewal formula says: up to 13 s too long for the first people after the first wave (the estimate module's
///   arithmetic for shape-4 visits: the renewal density at `V/2` is within 5% of its limit; 5% of `3/8 V`).
/// - One second of rounding up and one second of a snapshot's age.
///
/// So an estimate made while the pace holds is off by at most `4 σ + 13 + 2` s = 80 s, and that bounds the 90th
/// percentile at join, and the median of all estimates. The slow tail (people let in after no seat is available:
/// the door lets someone in only when a held seat comes back, at the end of its holder's visit, so up to one
/// visit later than the pace said) adds up to `V` = 240 s to the estimates made before it, and people in it wait
/// longest so they are re-estimated most often: the 90th percentile of all estimates is bounded by 80 + 240 =
/// 320 s. At join the median is bounded by the same 80 s. An estimate off by half (pace doubled, the lag lost, the
/// time until the opening forgotten) misses them: the followed people wait 2 to 7 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimates_match_the_waits_people_had() {
    for random in [false, true] {
        let p = small_sale(random);
        let r = run(&p).await.unwrap();
        let lambda = r.capacity as f64 / p.visit_minutes;
        let out_minutes = r.no_seat_available_after_seconds.unwrap_or(0) as f64 / 60.0;
        let sigma = 60.0 * (lambda * out_minutes).sqrt() / lambda;
        let steady = 4.0 * sigma + 13.0 + 2.0;
        let tail = steady + p.visit_minutes * 60.0;
        println!(
            "{}: at join: {} followed, median |error| {:.0} s, p90 {:.0} s, {:.0}% measured; \
             all estimates: {} checked, median |error| {:.0} s, p90 {:.0} s, median relative {:.0}%, {:.0}% measured; \
             bounds: {steady:.0} s while the pace holds, {tail:.0} s with the slow tail (σ = {sigma:.1} s)",
            if random { "random draw" } else { "fifo" },
            r.eta_join_checked,
            r.eta_join_median_abs_error_seconds,
            r.eta_join_p90_abs_error_seconds,
            r.eta_join_measured_share * 100.0,
            r.eta_checked,
            r.eta_median_abs_error_seconds,
            r.eta_p90_abs_error_seconds,
            r.eta_median_rel_error * 100.0,
            r.eta_measured_share * 100.0
        );
        assert!(
            r.eta_join_checked >= 50,
            "too few followed sessions: {}",
            r.eta_join_checked
        );
        for (what, error, bound) in [
            (
                "median error at join",
                r.eta_join_median_abs_error_seconds,
                steady,
            ),
            (
                "p90 error at join",
                r.eta_join_p90_abs_error_seconds,
                steady,
            ),
            (
                "median error of all estimates",
                r.eta_median_abs_error_seconds,
                steady,
            ),
            (
                "p90 error of all estimates",
                r.eta_p90_abs_error_seconds,
                tail,
            ),
        ] {
            assert!(error <= bound, "{what} {error:.0} s (bound {bound:.0} s)");
        }
        assert!(r.max_active <= r.capacity);
        // "Within one poll": after the room turns sold out, each person still in line hears it at their page's
        // next poll. The simulated pages poll exactly every 20 s; a real page waits 0.8 to 1.2 intervals (jitter),
        // so the bound is one interval and a fifth, plus the simulation's one-second step.
        let poll = p.poll_seconds;
        let told = r
            .sold_out_told_within_seconds
            .expect("everyone still in line was told sold out, by their own polls");
        println!("sold out told to the last person in line {told} s after the last seat");
        assert!(told <= poll + poll / 5 + 1, "sold out told after {told} s");
    }
}

/// The default rehearsal's arithmetic (issue 8), at a tenth of its size: `scale` multiplies the crowd, the seats and
/// the capacity together (60,000 people, `S` = 4,800 seats, capacity `C` = 800), so the ratios and the minutes are
/// the full sale's. The run stops 12 minutes after the opening (the seats are gone by then; the slow tail of resold
/// holds is not what is checked here), which keeps it near 2 s in release and within CI's time in debug. Both
/// bounds are computed from the parameters below, with their noise; neither is fitted to a run.
///
/// Admissions in the steady state (minutes 4 until the seats run out, `m` minutes): every place that frees is
/// filled at once, so admissions are departures, `λ = C / V'` a minute, where a place is held for `V'`: a visit
/// (`V` = 4 minutes) for the 98% who finish or leave, the idle timeout (10 minutes) for the 2% who close the tab:
/// `V'` = 4.12 minutes, 194 a minute. Model error: the departure rate of shape-4 visits is within 2% of its
/// limit from one visit after the opening (renewal density), and the tab-closers of the first minutes still hold
/// their places (1%): 3% of `λ`. Noise: `m λ` departures, at most as random as a Poisson count, so the average
/// over `m` minutes has `σ = sqrt(m λ) / m`; bound `3% λ + 4 σ` (about 34 a minute with `m` = 4).
///
/// When no seat is left (all sold or held): each person let in holds, a minute into the visit, `h = b q` seats
/// (`b`: the share that holds, buyers and half the non-buyers, 0.95; `q`: three seats an order), and the
/// non-buyers' holds, `ρ` = 0.15 seats per departure, come back at the end of their visits. Departures by `t`
/// minutes after the opening follow the renewal function, `C (t / V - 3/8)` for shape-4 visits, and each lets one
/// more in; so the seats gone by `t` are `h (C + D(t - 1)) - ρ D(t)`, which reaches `S` at
/// `t* = (S - h C (1 - 3/8 - 1/V) - ρ C 3/8) V / (C (h - ρ))` = 7.2 minutes. (The seed's "8 to 10 minutes" assumed
/// 16,000 orders at 2,000 a minute from a standing start; the room lets the whole capacity in at the opening, and
/// a held seat is gone from the count, non-buyers' holds included.) Noise: the seats gone vary by the order sizes of
/// the `A` people let in (`A σ_s²`, `σ_s` the spread of seats held per person) and by the departures
/// (`(h - ρ)² D`, Poisson again); divided by the rate seats go, `C (h - ρ) / V` a minute, that is `σ_t`. Model
/// error: the renewal formula and the tab-closers, a quarter of a minute. Bound: `t* ± (4 σ_t + 0.25)` minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_sale_at_a_tenth_keeps_its_arithmetic() {
    let p = Params {
        scale: 0.1,
        max_minutes_after_open: 12,
        ..Params::default()
    };
    let r = run(&p).await.unwrap();
    assert_eq!(r.capacity, 800);
    let c = r.capacity as f64;
    let v = p.visit_minutes;
    let seats = (p.seats as f64 * p.scale).round();
    let out_seconds = r
        .no_seat_available_after_seconds
        .expect("the seats ran out within the run");
    let out = out_seconds as f64 / 60.0;

    // Steady admissions.
    let place = (1.0 - p.tab_close_share) * v + p.tab_close_share * p.idle_minutes;
    let lambda = c / place;
    let m = ((out_seconds / 60) as f64 - 3.0).max(1.0);
    let steady_bound = 0.03 * lambda + 4.0 * (m * lambda).sqrt() / m;

    // When the seats run out.
    let total: f64 = p.order_sizes.iter().sum();
    let q = p
        .order_sizes
        .iter()
        .enumerate()
        .map(|(i, s)| (i + 1) as f64 * s)
        .sum::<f64>()
        / total;
    let q2 = p
        .order_sizes
        .iter()
        .enumerate()
        .map(|(i, s)| ((i + 1) as f64).powi(2) * s)
        .sum::<f64>()
        / total;
    let holds = p.buy_share + (1.0 - p.buy_share) * p.non_buyer_hold_share;
    let h = holds * q;
    let rho = (1.0 - p.buy_share) * p.non_buyer_hold_share * q;
    let lag = 3.0 / 8.0;
    let tau = p.hold_after_seconds as f64 / 60.0;
    let t_star = (seats - h * c * (1.0 - lag - tau / v) - rho * c * lag) * v / (c * (h - rho));
    let departed = c * (t_star / v - lag);
    let let_in = c + c * ((t_star - tau) / v - lag);
    let spread = holds * q2 - h * h;
    let sigma_t = (let_in * spread + (h - rho).powi(2) * departed).sqrt() / (c * (h - rho) / v);
    let out_bound = 4.0 * sigma_t + 0.25;
    println!(
        "a tenth of the default sale: {:.1} admissions a minute in the steady state (the arithmetic: {lambda:.1} \
         ± {steady_bound:.1} over {m} minutes), highest active {} / {}, no seat left after {out:.2} minutes (the \
         arithmetic: {t_star:.2} ± {out_bound:.2}, σ = {sigma_t:.2})",
        r.steady_admissions_per_minute, r.max_active, r.capacity
    );
    assert!(
        (r.steady_admissions_per_minute - lambda).abs() <= steady_bound,
        "steady admissions {:.1} a minute, the arithmetic says {lambda:.1} ± {steady_bound:.1}",
        r.steady_admissions_per_minute
    );
    assert!(
        r.max_active <= r.capacity,
        "{} > {}",
        r.max_active,
        r.capacity
    );
    assert!(
        (out - t_star).abs() <= out_bound,
        "no seat left after {out:.2} minutes, the arithmetic says {t_star:.2} ± {out_bound:.2}"
    );
}

/// People who step away keep their turn (issue 19), at a twentieth of the seed's sale, FIFO (the same crowd and
/// order every run): 30% of the people step away once, at a random moment in their first ten minutes after the
/// opening, for five minutes on average (exponential), and their page polls at once when they come back. Against
/// the same crowd with nobody stepping away:
///
/// - The door's admissions per minute do not drop: the door never waits for an absent person (it skips them and
///   lets the next present one in), and a returning person takes a place that was free anyway. They may rise: a
///   person let in while away but within the grace, and back only after the arrival window, holds a place for
///   60 s instead of a visit. Observed (2026-12-02, debug): 100 a minute without, 107 with.
/// - Some turns came while people were away, and some of those people came back within the window and were let
///   in; every return within the window is counted once, and so is every late one. Among those let in are people
///   let in before while away who did not come within the arrival window: the room kept their turn (once) and the
///   door lets them in again when they come back.
/// - Nobody from the line's head goes in while someone who came back in time waits: the door serves the returning
///   queue first, at each tick with a free place. (A wait from a return to the door is not bounded by itself: a
///   return while every seat is held waits for seats like everyone else.) Observed (2026-12-06, release): 33
///   returns within the window, 28 let in (20 of them let in again after a lapse), median 21 s, longest 136 s (the
///   door held then: every seat left at checkout), nobody from the head meanwhile; a door that serves the head
///   first lets 1,700 in from the head meanwhile and none of the 34 who came back. (Before the rehearsal brought
///   lapsed people back: 9 returns, 8 let in, median 3 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_who_step_away_keep_their_turn_and_the_door_keeps_its_pace() {
    let base = run(&small_sale(false)).await.unwrap();
    let away = run(&Params {
        step_away_share: 0.3,
        ..small_sale(false)
    })
    .await
    .unwrap();
    println!(
        "step away: {} people, {} turns missed, {} back in time ({} let in, median {:.0} s, longest {} s; {} let in \
         again after a lapse; {} from the head meanwhile), {} late; admissions {:.1} a minute against {:.1}",
        away.stepped_away,
        away.missed_turns,
        away.returned_in_time,
        away.returned_let_in,
        away.return_wait_median_seconds,
        away.return_wait_max_seconds,
        away.lapsed_let_in_again,
        away.head_let_in_while_a_return_waited,
        away.returned_late,
        away.steady_admissions_per_minute,
        base.steady_admissions_per_minute
    );
    assert_eq!((base.stepped_away, base.returned_in_time), (0, 0));
    assert!(
        away.steady_admissions_per_minute >= base.steady_admissions_per_minute * 0.95,
        "admissions fell from {:.1} to {:.1} a minute",
        base.steady_admissions_per_minute,
        away.steady_admissions_per_minute
    );
    assert!(away.max_active <= away.capacity);
    assert!(away.stepped_away > 0 && away.missed_turns > 0);
    assert!(
        away.returned_let_in > 0 && away.returned_let_in <= away.returned_in_time,
        "{away:?}"
    );
    assert!(away.returned_in_time + away.returned_late <= away.missed_turns);
    assert_eq!(
        away.head_let_in_while_a_return_waited, 0,
        "the door let people in from the head while someone who came back in time waited"
    );
    // The summary says the same in words, each figure in its place.
    let summary = away.summary();
    let said = format!(
        "{} came back in time ({} let in: ",
        waitroom::rehearsal::grouped(away.returned_in_time),
        waitroom::rehearsal::grouped(away.returned_let_in)
    );
    let tail = format!(
        "; {} of them let in before while away) and {} too late.",
        waitroom::rehearsal::grouped(away.lapsed_let_in_again),
        waitroom::rehearsal::grouped(away.returned_late)
    );
    assert!(
        summary.contains(&said) && summary.contains(&tail),
        "the summary's returns: {summary}"
    );
    assert!(
        away.lapsed_let_in_again > 0,
        "nobody let in while away and back after the arrival window was let in again ({} back in time, {} let in)",
        away.returned_in_time,
        away.returned_let_in
    );
}

/// The reach estimate made when half the seats are sold, against the line number of the last person who actually
/// bought. The estimate (waitroom-layer's `estimate::reach`) is the numbers served so far plus the admissions the
/// remaining seats will take, `R / s` less those inside now, over the share of numbers not skipped, where `s` is the
/// seats bought per departure measured so far. The bound is the sum of what it cannot know, each term computed from
/// the sale's parameters (a twentieth: `C` = 400, `S` = 2,400 seats, so `R` = 1,200 at half):
/// - Noise in `s`: measured over the `N = R / s` departures so far, each buying `B q` seats (`B` = 0.9 buy, `q`:
///   the order size), its relative standard deviation is `sd(B q) / (s sqrt(N))`; and the seats still to sell are
///   bought by some `R / s` departures to come, as random: how many it takes has the same relative deviation, and
///   the two are independent, so `sqrt(2)` of it; four of those, times the `R / s` admissions it divides.
/// - The tail: the non-buyers inside when the seats run out hold `ρ C` seats (`ρ` = 0.15 a person), which come back
///   at the end of their visits a few at a time; the door lets in one person per seat that comes back (no more in
///   a minute than there are seats), where the estimate counts one per `s`; and a non-buyer among them holds and
///   returns again (a factor `1 / (1 - 0.05)`): at most `ρ C / 0.95` numbers more.
/// - People give up at `g` = 1% a minute of waiting from the opening, so numbers further back are skipped more
///   often than those served so far: at most `g t` more of the numbers still to come, `t` the minutes until the
///   seats run out.
///
/// The bound is their sum over the last buyer's number (about 15%; the estimate fell short by 7-12% over 12 runs
/// and 7-10% over six more, the tail being most of it, and once by 14.4%, past the 13.7% of a bound that left out
/// the sale's own future). An estimate that forgets those inside is off by more than that (31.7%). At halfway
/// almost nobody has been skipped here, so one that forgets the skipped is not told apart (9.6%, as it is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reach_halfway_is_close_to_the_last_buyer() {
    let p = small_sale(true);
    let r = run(&p).await.unwrap();
    let (estimate, last) = r.reach_halfway.expect("a reach estimate halfway");
    let err = (estimate as f64 - last as f64).abs() / last as f64;
    let c = r.capacity as f64;
    let remaining = (p.seats as f64 * p.scale / 2.0).round();
    let total: f64 = p.order_sizes.iter().sum();
    let q = p
        .order_sizes
        .iter()
        .enumerate()
        .map(|(i, s)| (i + 1) as f64 * s)
        .sum::<f64>()
        / total;
    let q2 = p
        .order_sizes
        .iter()
        .enumerate()
        .map(|(i, s)| ((i + 1) as f64).powi(2) * s)
        .sum::<f64>()
        / total;
    let s = p.buy_share * q;
    let sd = (p.buy_share * q2 - s * s).sqrt();
    let admissions = remaining / s;
    // The estimate's `s` and the sale's own future, both as random as `N` departures.
    let noise = 4.0 * std::f64::consts::SQRT_2 * admissions * sd / (s * admissions.sqrt());
    let returning = (1.0 - p.buy_share) * p.non_buyer_hold_share;
    let tail = returning * q * c / (1.0 - returning);
    let out_minutes = r.no_seat_available_after_seconds.unwrap_or(0) as f64 / 60.0;
    let drift = p.give_up_per_minute * out_minutes * (admissions + tail);
    let bound = (noise + tail + drift) / last as f64;
    println!(
        "reach halfway: estimated line number {estimate}, last buyer {last}, error {:.1}% (bound {:.1}%: noise {noise:.0}, \
         tail {tail:.0}, give-ups {drift:.0} numbers)",
        err * 100.0,
        bound * 100.0
    );
    assert!(
        err <= bound,
        "reach {estimate} vs last buyer {last}: {:.1}% (bound {:.1}%)",
        err * 100.0,
        bound * 100.0
    );
}

/// The estimate for a fixed position rises when visits stretch (places free more slowly) and falls when people
/// ahead give up (the head moves faster).
#[tokio::test]
async fn the_estimate_moves_both_ways() {
    let clock = ManualClock::new(1_800_000_000_000);
    let room = WaitingRoom::builder("eta-moves")
        .capacity(100)
        .abandon_after(Duration::from_secs(60))
        .poll_interval(Duration::from_secs(20))
        .clock(Arc::new(clock.clone()))
        .background(false)
        .build()
        .await
        .unwrap();
    room.set_inventory(Inventory {
        total: 1_000_000,
        sold: 0,
        held: 0,
    })
    .await
    .unwrap();
    let ids: Vec<String> = (0..20_000)
        .map(|i| format!("eta-{i:06}-pppppppppppp"))
        .collect();
    for id in &ids {
        room.join(id, None).await.unwrap();
    }
    let mut inside: Inside = Default::default();
    let mut t = 0u64;
    let eta_for = |room: &WaitingRoom, ahead: u64| {
        let snap = room.snapshot();
        let n = snap.served + ahead;
        let p = waitroom::layer::Placement {
            session: ids[(n - 1) as usize].clone(),
            state: waitroom::layer::SessionState::Waiting,
            number: Some(n),
        };
        let st = room.status(Some(&p));
        assert_eq!(st.state, ViewState::Waiting);
        (st.eta_seconds.unwrap(), st.eta_basis.unwrap())
    };
    drive(&room, &clock, &ids, &mut inside, &mut t, 600, 120, 0).await;
    let (steady, basis) = eta_for(&room, 2_000);
    assert_eq!(basis, EtaBasis::Measured);
    // Payment slows: visits stretch from 2 to 4 minutes.
    drive(&room, &clock, &ids, &mut inside, &mut t, 600, 240, 0).await;
    let (slow, _) = eta_for(&room, 2_000);
    // Many people ahead give up: the next 3,000 in line stopped polling.
    let served = room.snapshot().served as usize;
    drive(
        &room,
        &clock,
        &ids,
        &mut inside,
        &mut t,
        240,
        240,
        served + 3_000,
    )
    .await;
    let (after_leaving, _) = eta_for(&room, 2_000);
    println!(
        "eta for position 2,000: steady {steady} s, visits stretched {slow} s, people ahead left {after_leaving} s"
    );
    assert!(
        slow as f64 > steady as f64 * 1.5,
        "stretching visits must raise the estimate: {steady} -> {slow}"
    );
    assert!(
        (after_leaving as f64) < slow as f64 * 0.8,
        "people ahead leaving must lower it: {slow} -> {after_leaving}"
    );
}

type Inside = std::collections::VecDeque<(u64, String)>;

/// Runs the room for `secs` seconds: people near the head poll (those before `give_up_before` gave up), admitted
/// people visit for about `visit` seconds and finish.
#[allow(clippy::too_many_arguments)]
async fn drive(
    room: &WaitingRoom,
    clock: &ManualClock,
    ids: &[String],
    inside: &mut Inside,
    t: &mut u64,
    secs: u64,
    visit: u64,
    give_up_before: usize,
) {
    let start = *t;
    *t += secs;
    for s in start..start + secs {
        clock.set_ms(1_800_000_000_000 + s * 1000);
        let served = room.snapshot().served as usize;
        for id in ids.iter().skip(served.max(give_up_before)).take(3_000) {
            room.locate(id, None).await.unwrap();
        }
        while inside.front().is_some_and(|(end, _)| *end <= s) {
            let (_, id) = inside.pop_front().unwrap();
            room.finish(&id, 1).await.unwrap();
        }
        for id in room.tick_now().await.unwrap().admitted {
            room.claim(&id).await.unwrap();
            // Visits vary between half and one and a half times `visit` (a hash of the id), so places free
            // continuously rather than in waves.
            let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            let len = visit / 2 + h % (visit + 1);
            let at = s + len;
            let i = inside.partition_point(|(end, _)| *end <= at);
            inside.insert(i, (at, id));
        }
    }
}

/// The rehearsal's summary in words (issue 23), checked against the run's own arithmetic: its table, its counts
/// and the sale's parameters. A twentieth of the seed's sale with the random draw: 30,000 people, 2,400 seats,
/// capacity 400.
///
/// - **Who got tickets**: the orders over the people who joined; the table's orders per minute add up to the
///   orders, its last "seats sold so far" is the seats sold, and an order is 1 to 4 seats.
/// - **When the seats ran out / the last seat sold**: the first second with no seat left (sold or held) and with
///   every seat sold; every table row before it shows seats left / seats unsold, every row after the last sale
///   shows them all sold (sold never goes down).
/// - **When the last person heard "sold out"**: the last seat plus the time the line took to hear it, at most one
///   poll interval and a fifth plus the simulation's second (see `estimates_match_the_waits_people_had`).
/// - **The buyers' wait**, median and 90th percentile, from the opening (every buyer was in the pre-queue: 25,000
///   or so in line at the opening, 2,400 seats, and the draw puts later arrivals behind them). The `n`-th buyer
///   cannot be let in before `n` people were: while the table's admissions so far are fewer than `n`, the wait is
///   longer than the row's end. And of the `A` let in by a row's end, each buys with probability 0.9 when seats
///   are left at their hold a minute later, less those who had given up within the grace before their turn
///   (1% a minute, 3 minutes): at least `0.9 (1 - 0.03) A - 4 sqrt(0.09 A)` buyers (four standard deviations of
///   the binomial). Once that reaches `n`, the wait is shorter than that row's end; if no row before the seats ran
///   out gets there, the last seat sold bounds it.
/// - **The wait of those told "sold out"**: a person from the pre-queue still in line at the last sale heard it
///   between the last sale and the last person's hearing it, so waited that long from the opening; a later
///   arrival waited less. Later arrivals are at most 15% of the crowd (plus four standard deviations), under half
///   of those told, so the median and the 90th percentile lie in that span; and since each hears it at their own
///   poll, the median is about half a poll interval into it (derivation at the assert).
///
/// An off-by-one row, a wait counted from arrival for the pre-queue (half an hour more), a share over the seats
/// instead of the people, or a median taken over everyone let in, falls outside these bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_says_in_words_what_the_run_counted() {
    use waitroom::rehearsal::grouped;

    let p = small_sale(true);
    let r = run(&p).await.unwrap();
    let summary = r.summary();
    let table = r.table();
    println!("{summary}\n{table}");

    // Who got tickets.
    assert!(r.joined > 0 && r.orders > 0);
    assert_eq!(r.got_tickets_share(), r.orders as f64 / r.joined as f64);
    assert_eq!(r.minutes.iter().map(|m| m.orders).sum::<u64>(), r.orders);
    assert_eq!(r.minutes.last().unwrap().sold, r.sold);
    assert_eq!(r.sold, r.seats, "the small sale sells out within its run");
    assert!(r.orders <= r.sold && r.sold <= 4 * r.orders);
    let share = r.orders as f64 * 100.0 / r.joined as f64;
    let share = if share < 10.0 {
        format!("{share:.1}%")
    } else {
        format!("{share:.0}%")
    };
    let first = summary.lines().nth(1).unwrap();
    assert!(
        first.starts_with(&format!(
            "- {share} of the crowd got tickets: {} of the {} people",
            grouped(r.orders),
            grouped(r.joined)
        )),
        "{first}"
    );

    // When the seats ran out, and when the last one sold: row k ends at second 60 k - 1 after the opening.
    let out = r
        .no_seat_available_after_seconds
        .expect("the seats ran out");
    let last_sale = r.sold_out_after_seconds.expect("the last seat sold");
    assert!(out <= last_sale);
    for m in r.minutes.iter().filter(|m| m.minute >= 1) {
        let end = (m.minute * 60 - 1) as u64;
        if end < out {
            assert!(
                m.available > 0,
                "seats left at minute {} before they ran out at {out} s",
                m.minute
            );
        }
        if end < last_sale {
            assert!(
                m.sold < r.seats,
                "minute {}: all sold before the last sale at {last_sale} s",
                m.minute
            );
        } else {
            assert_eq!(
                m.sold, r.seats,
                "minute {}: all sold after the last sale",
                m.minute
            );
        }
    }

    // When the last person heard "sold out".
    let within = r
        .sold_out_told_within_seconds
        .expect("everyone in line heard it");
    assert_eq!(
        r.last_heard_sold_out_after_seconds,
        Some(last_sale + within)
    );
    assert!(
        within <= p.poll_seconds + p.poll_seconds / 5 + 1,
        "{within} s"
    );

    // The buyers' wait, median and 90th percentile, between bounds read off the table.
    let at_opening = r.minutes.iter().find(|m| m.minute == 0).unwrap().waiting;
    assert!(
        at_opening > 4 * r.seats,
        "every buyer comes from the pre-queue: {at_opening} in line"
    );
    let grace_give_ups = p.give_up_per_minute * 3.0;
    let rows: Vec<(u64, f64)> = r
        .minutes
        .iter()
        .filter(|m| m.minute >= 1)
        .scan(0u64, |let_in, m| {
            *let_in += m.admitted;
            Some(((m.minute * 60 - 1) as u64, *let_in as f64))
        })
        .collect();
    for (what, q, wait) in [
        ("median", 0.5, r.buyer_wait_median_seconds),
        ("90th percentile", 0.9, r.buyer_wait_p90_seconds),
    ] {
        let n = (q * r.orders as f64).ceil();
        let lower = rows
            .iter()
            .filter(|(_, a)| *a < n)
            .map(|(end, _)| end + 1)
            .max()
            .unwrap_or(0) as f64;
        let upper = rows
            .iter()
            .filter(|(end, _)| end + p.hold_after_seconds <= out)
            .find(|(_, a)| p.buy_share * (1.0 - grace_give_ups) * a - 4.0 * (a * 0.09).sqrt() >= n)
            .map_or(last_sale as f64, |(end, _)| *end as f64);
        println!(
            "buyers' wait, {what}: {wait:.0} s, the table's bounds [{lower:.0}, {upper:.0}] s"
        );
        assert!(
            lower <= wait && wait <= upper,
            "the buyers' {what} wait {wait:.0} s is outside [{lower:.0}, {upper:.0}] s"
        );
    }
    assert!(r.buyer_wait_median_seconds <= r.buyer_wait_p90_seconds);

    // The wait of those told "sold out".
    assert!(r.told_sold_out > 0);
    let late = p.crowd as f64 * p.scale * (1.0 - p.early_share);
    let late = late + 4.0 * (late * p.early_share).sqrt();
    assert!(
        late < 0.5 * r.told_sold_out as f64,
        "later arrivals could be half of those told"
    );
    // Each hears it at their own next poll, a uniform phase within the poll interval: the median of those from the
    // pre-queue is half an interval after the last sale. Later arrivals (a share `f` of those told, at most) may
    // all be below it, so the overall median is at least the pre-queue's `(0.5 - f) / (1 - f)` quantile, less the
    // simulation's one-second step.
    let f = late / r.told_sold_out as f64;
    let poll = p.poll_seconds as f64;
    let median_from = last_sale as f64 + poll * (0.5 - f) / (1.0 - f) - 1.0;
    assert!(
        r.told_sold_out_wait_median_seconds >= median_from,
        "those told sold out: median wait {:.0} s, below {median_from:.0} s (they hear it at their own poll)",
        r.told_sold_out_wait_median_seconds
    );
    let (from, to) = (last_sale as f64, (last_sale + within) as f64);
    for (what, wait) in [
        ("median", r.told_sold_out_wait_median_seconds),
        ("90th percentile", r.told_sold_out_wait_p90_seconds),
    ] {
        assert!(
            from <= wait && wait <= to,
            "those told sold out: {what} wait {wait:.0} s outside [{from:.0}, {to:.0}] s"
        );
    }

    // The words: what each column counts, and no jargon.
    for words in ["let in", "this minute", "so far", "at end"] {
        assert!(
            table.contains(words),
            "the table names its columns: {words:?}"
        );
    }
    assert!(
        table.contains(&grouped(at_opening)),
        "numbers grouped by threes"
    );
    for jargon in ["configured", "reach estimated", "measured, "] {
        assert!(
            !summary.contains(jargon),
            "jargon in the summary: {jargon:?}"
        );
    }
    for words in [
        "seats ran out",
        "heard \"sold out\"",
        "People who bought waited",
        "one in ten",
    ] {
        assert!(
            summary.contains(words),
            "the summary says {words:?}:\n{summary}"
        );
    }
}

/// A flood of one-shot visitors (three for every person, each a ticket never redeemed) changes nothing the people
/// see on the embedded store, which counts the living: the same crowd (the flood is drawn from a stream of its own)
/// waits in the same live line, is let in at the same pace, and is shown the same positions. Only the line's
/// numbers count the flood: at the end of some minute more numbers are out after the head than people are in line.
/// The positions shown against the people actually let in before each person: without a flood about 1 (those who
/// give up ahead, 1 % a minute, are counted until the door skips them), and the same with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_one_shot_visitors_changes_nothing_the_people_see() {
    let base = run(&small_sale(false)).await.unwrap();
    let flood = run(&Params {
        one_shot_share: 3.0,
        ..small_sale(false)
    })
    .await
    .unwrap();
    println!("{}\n{}", flood.summary(), flood.table());
    let crowd = (Params::default().crowd as f64 * 0.05).round() as u64;
    assert_eq!(
        (base.one_shot_visitors, flood.one_shot_visitors),
        (0, 3 * crowd)
    );
    let seen = |r: &waitroom::rehearsal::Report| -> Vec<(i64, u64, u64, u64)> {
        r.minutes
            .iter()
            .map(|m| (m.minute, m.waiting, m.admitted, m.orders))
            .collect()
    };
    assert_eq!(seen(&flood), seen(&base), "the live line and the door");
    assert_eq!(flood.joined, base.joined);
    assert!(base.positions_checked > 0);
    assert_eq!(
        (
            flood.positions_checked,
            flood.position_over_actual_median,
            flood.position_over_actual_p90
        ),
        (
            base.positions_checked,
            base.position_over_actual_median,
            base.position_over_actual_p90
        ),
        "the positions shown"
    );
    assert!(
        (0.9..=1.25).contains(&base.position_over_actual_median),
        "shown positions {:.2} times the people let in before",
        base.position_over_actual_median
    );
    assert!(
        flood
            .minutes
            .iter()
            .any(|m| m.numbers_out > m.waiting + crowd),
        "the numbers count the flood"
    );
}
