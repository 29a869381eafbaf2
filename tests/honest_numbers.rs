//! Honest numbers through the real room (issue 6): wait estimates checked against the waits people had in a
//! simulated sale, estimates that move both ways, and the reach of the remaining seats.

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

/// Every followed session's estimate, shown when it got its position and every two minutes after, against the wait
/// it then had until admission. The bound, a median absolute error under one minute: the estimate is the position
/// over the measured pace of the head, or capacity over the expected visit before anything is measured and, during
/// the first visit after the opening, while departures are still ramping up and the measured rate is below it. What
/// it cannot foresee is a change of pace after it was shown (the slow tail when seats run short), which shows in the
/// 90th percentile, printed here with the relative errors: in this small sale most waits are a few minutes, where a
/// few seconds' bias is a large share.
///
/// FIFO is the same run every time (the crowd is seeded): median 5 s, bound one minute. With the draw, the order
/// comes from the room's secret random draw, different in every run, and 85% of the line gets its number at one
/// instant, before anything is measured: which of the followed people land in the slow tail changes with each
/// draw, and so does the median. Over 34 runs on 2026-11-30 (17 of commit 8191212, 17 of the current code) it
/// ranged 7–65 s, p90 84–182 s: the bound is a minute and a half, so the test fails on a broken estimate, not
/// on an unlucky draw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimates_match_the_waits_people_had() {
    for random in [false, true] {
        let r = run(&small_sale(random)).await.unwrap();
        println!(
            "{}: {} followed, median |error| {:.0} s, p90 {:.0} s, median relative {:.0}%, {:.0}% measured",
            if random { "random draw" } else { "fifo" },
            r.eta_checked,
            r.eta_median_abs_error_seconds,
            r.eta_p90_abs_error_seconds,
            r.eta_median_rel_error * 100.0,
            r.eta_measured_share * 100.0
        );
        assert!(
            r.eta_checked >= 50,
            "too few followed sessions: {}",
            r.eta_checked
        );
        let bound = if random { 90.0 } else { 60.0 };
        assert!(
            r.eta_median_abs_error_seconds < bound,
            "median error {:.0} s (bound {bound} s)",
            r.eta_median_abs_error_seconds
        );
        assert!(r.max_active <= r.capacity);
    }
}

/// The reach estimate made when half the seats are sold lands within 25% of the last line number that actually got
/// a seat (the tail depends on how many people inside leave without buying and how many holds expire, which the
/// estimate only knows as averages so far).
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
