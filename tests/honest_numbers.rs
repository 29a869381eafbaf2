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

/// Every followed session's estimate against the wait it then had until admission. Two figures: the estimate shown
/// at join, and all estimates (at join and every two minutes after, which are closer to admission and flatter the
/// median). Both are bounded.
///
/// "At join": for a session that joined once the line had numbers (after the opening, or from the start in FIFO,
/// whose joins are numbered at once) the estimate its join answered; for a pre-queued session the estimate its page got
/// at its first poll with a place in line, up to one poll interval (20 s) after the draw (see
/// `Report::eta_join_checked`).
///
/// The estimate is the position over the measured pace of the head, or capacity over the expected visit before
/// anything is measured and, during the first visit after the opening, while departures are still ramping up and
/// the measured rate is below it. What it cannot foresee is a change of pace after it was shown (the slow tail when
/// seats run short), which shows in the 90th percentile. FIFO is the same run every time (the crowd is seeded).
/// With the draw the order comes from the room's secret random draw, different in every run, and 85% of the line
/// gets its number at one instant, before anything is measured: which of the followed people land in the slow tail
/// changes with each draw, and so does the median.
///
/// In every run the estimate shown at join comes from configuration (0% measured): most of the line gets its place
/// before anything is measured, and through the first visit after the opening the configured rate is used. That rate,
/// capacity over the expected visit, is the steady pace, and departures lag it at the opening (the whole capacity goes
/// in at once, places free only as those visits end): with the rehearsal's shape-4 gamma visits, 3/8 of a visit (90 s
/// of 4 minutes), which is what the point estimate assumes (so this checks the case where the assumption holds; fixed
/// visits would run about 30 s short, exponential ones 90 s long, both within the range shown). The configured estimate
/// adds what is left of that lag (waitroom-layer's `estimate` module docs); without it the estimate shown at join ran
/// short: FIFO 76 s median, 88 s p90 every run, the draw 66–88 s median, 76–100 s p90 over 17 runs (2026-11-30). With
/// it (2026-11-30, 42 runs): FIFO 0 s median, 13 s p90 every run (about half the followed people go in with the first
/// wave at the opening, told exactly the time until it; the rest, admitted as its places free, are told up to about
/// 13 s too long: the lag counts in full from the opening, and the very first places free a little sooner than the
/// renewal formula says); the draw 2–17 s median (6 s on average), 6–58 s p90. The bound, 30 s at the median for both,
/// is the worst of those runs with room to spare, and under half of what the missing lag cost: losing the lag (or the
/// time until the opening, or a wrong rate) fails it.
///
/// All estimates together, re-estimates included, moved the same way (the re-estimates made during the first wave
/// are configured too): FIFO 5 s -> 3 s median; the draw 7–65 s over 34 runs and 10–56 s over 17 before, 3–17 s
/// (7 s on average) over the 42 runs after, p90 7–161 s (the slow tail). Same bound: 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimates_match_the_waits_people_had() {
    for random in [false, true] {
        let r = run(&small_sale(random)).await.unwrap();
        println!(
            "{}: at join: {} followed, median |error| {:.0} s, p90 {:.0} s, {:.0}% measured; \
             all estimates: {} checked, median |error| {:.0} s, p90 {:.0} s, median relative {:.0}%, {:.0}% measured",
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
        assert!(
            r.eta_join_median_abs_error_seconds < 30.0,
            "median error at join {:.0} s (bound 30 s)",
            r.eta_join_median_abs_error_seconds
        );
        // All estimates, re-estimates included.
        assert!(
            r.eta_median_abs_error_seconds < 30.0,
            "median error of all estimates {:.0} s (bound 30 s)",
            r.eta_median_abs_error_seconds
        );
        assert!(r.max_active <= r.capacity);
        // "Within one poll": after the room turns sold out, each person still in line hears it at their page's
        // next poll. The simulated pages poll exactly every 20 s; a real page waits 0.8 to 1.2 intervals (jitter),
        // so the bound is one interval and a fifth, plus the simulation's one-second step.
        let poll = small_sale(random).poll_seconds;
        let told = r
            .sold_out_told_within_seconds
            .expect("everyone still in line was told sold out, by their own polls");
        println!("sold out told to the last person in line {told} s after the last seat");
        assert!(told <= poll + poll / 5 + 1, "sold out told after {told} s");
    }
}

/// The default rehearsal's arithmetic (issue 8), at a tenth of its size: `scale` multiplies the crowd, the seats and
/// the capacity together (60,000 people, 4,800 seats, capacity 800), so the ratios and the minutes are the full
/// sale's. The run stops 12 minutes after the opening (the seats are gone by then; the slow tail of resold holds is
/// not what is checked here), which keeps it near 2 s in release and within CI's time in debug.
///
/// - Admissions settle near capacity over the mean visit (200 a minute here, 2,000 at full scale), within 12.5%.
///   Over 22 runs (2026-11-30) the steady figure ranged 183–203 a minute, 194 on average (a spread of about 4.5
///   a minute: the bound's low end, 175, is four of them below the average): slightly
///   under 200 because the 2% who close the tab keep their place for the 10-minute idle timeout instead of a
///   4-minute visit (0.98 × 4 + 0.02 × 10 = 4.12 minutes a place: 194 a minute). The full-scale default run gives
///   1,975–1,987.
/// - Active never exceeds the capacity.
/// - The seats run out (all sold or held) 6 to 9 minutes after the opening. Observed: 7.2–7.6 minutes over those
///   12 runs, 7.0–7.9 over 15 runs at a twentieth, 7.4 at full scale. Sooner than the seed's "8 to 10 minutes"
///   (16,000 orders at 2,000 a minute from a standing start): the room lets the whole capacity in at the opening,
///   and a held seat is gone from the count, non-buyers' holds included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_sale_at_a_tenth_keeps_its_arithmetic() {
    let p = Params {
        scale: 0.1,
        max_minutes_after_open: 12,
        ..Params::default()
    };
    let r = run(&p).await.unwrap();
    let expected = r.capacity as f64 / p.visit_minutes;
    let seats_out = r.no_seat_available_after_seconds.map(|s| s as f64 / 60.0);
    println!(
        "a tenth of the default sale: {:.1} admissions a minute in the steady state (capacity over the visit: \
         {expected:.0}), highest active {} / {}, seats out after {seats_out:.1?} minutes",
        r.steady_admissions_per_minute, r.max_active, r.capacity
    );
    assert_eq!(r.capacity, 800);
    assert!(
        (r.steady_admissions_per_minute - expected).abs() <= expected * 0.125,
        "steady admissions {:.1} a minute, expected {expected:.0} ± 12.5%",
        r.steady_admissions_per_minute
    );
    assert!(
        r.max_active <= r.capacity,
        "{} > {}",
        r.max_active,
        r.capacity
    );
    let out = seats_out.expect("the seats ran out within the run");
    assert!(
        (6.0..=9.0).contains(&out),
        "seats out after {out:.1} minutes"
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
///   in; every return within the window is counted once, and so is every late one.
/// - Nobody waits on a return for long while places free: the door serves the returning queue before the head, at
///   the next tick with a free place. The median wait from a return to the door is bounded by a poll interval
///   (20 s); a return while every seat is held waits for seats like everyone else, so the longest is not bounded.
///   Observed: 9 returns within the window, 8 let in, median 3 s, longest 46 s.
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
        "step away: {} people, {} turns missed, {} back in time ({} let in, median {:.0} s, longest {} s), {} late; \
         admissions {:.1} a minute against {:.1}",
        away.stepped_away,
        away.missed_turns,
        away.returned_in_time,
        away.returned_let_in,
        away.return_wait_median_seconds,
        away.return_wait_max_seconds,
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
    assert!(
        away.return_wait_median_seconds <= 20.0,
        "median wait from a return to the door {:.0} s",
        away.return_wait_median_seconds
    );
}

/// The reach estimate made when half the seats are sold lands within 25% of the last line number that actually got
/// a seat (the tail depends on how many people inside leave without buying and how many holds expire, which the
/// estimate only knows as averages so far). Over 12 runs (release, 2026-11-30) the error was 7-12%, always short
/// of the last buyer (876-916 against 965-1,024): the bound is twice the worst of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reach_halfway_is_close_to_the_last_buyer() {
    let r = run(&small_sale(true)).await.unwrap();
    let (estimate, last) = r.reach_halfway.expect("a reach estimate halfway");
    let err = (estimate as f64 - last as f64).abs() / last as f64;
    println!(
        "reach halfway: estimated line number {estimate}, last buyer {last}, error {:.0}%",
        err * 100.0
    );
    assert!(err < 0.25, "reach {estimate} vs last buyer {last}");
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
