//! The lifecycle event stream: every kind shows up with the right session, and a slow subscriber loses the oldest.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use waitroom_layer::{
    Clock as _, Inventory, ManualClock, RoomEvent, RoomEventKind, SessionState, ViewState,
    WaitingRoom,
};

async fn room(clock: &ManualClock, buffer: usize) -> WaitingRoom {
    WaitingRoom::builder("events")
        .capacity(1)
        .idle_timeout(Duration::from_secs(30))
        .poll_interval(Duration::from_secs(5))
        .abandon_after(Duration::from_secs(15))
        .arrival_window(Duration::from_secs(10))
        .event_buffer(buffer)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .build()
        .await
        .unwrap()
}

fn drain(rx: &mut tokio::sync::broadcast::Receiver<RoomEvent>) -> Vec<RoomEventKind> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(e) => out.push(e.kind),
            Err(TryRecvError::Empty) => return out,
            Err(e) => panic!("{e}"),
        }
    }
}

#[tokio::test]
async fn every_lifecycle_event_is_reported_once() {
    let clock = ManualClock::starting_now();
    let room = room(&clock, 64).await;
    let mut rx = room.subscribe();
    let [a, b, c] = [(); 3].map(|_| WaitingRoom::new_session_id());
    let mut numbers = Vec::new();
    for s in [&a, &b, &c] {
        numbers.push(room.join(s, None).await.unwrap().number);
    }
    room.tick_now().await.unwrap();
    room.claim(&a).await.unwrap();
    assert_eq!(
        drain(&mut rx),
        vec![
            RoomEventKind::Joined {
                session: a.clone(),
                number: numbers[0]
            },
            RoomEventKind::Joined {
                session: b.clone(),
                number: numbers[1]
            },
            RoomEventKind::Joined {
                session: c.clone(),
                number: numbers[2]
            },
            RoomEventKind::Admitted { session: a.clone() },
        ]
    );

    // C keeps polling; B went away. A idles out; B's turn passes while it is away; C is let in.
    clock.advance(Duration::from_secs(20));
    room.locate(&c, numbers[2]).await.unwrap();
    room.tick_now().await.unwrap();
    assert!(drain(&mut rx).is_empty());
    clock.advance(Duration::from_secs(15));
    room.locate(&c, numbers[2]).await.unwrap();
    room.tick_now().await.unwrap();
    let mut got = drain(&mut rx);
    got.sort_by_key(|k| k.name());
    assert_eq!(
        got,
        vec![
            RoomEventKind::Admitted { session: c.clone() },
            RoomEventKind::Expired { session: a.clone() },
            RoomEventKind::Missed { session: b.clone() },
        ]
    );

    room.claim(&c).await.unwrap();
    assert!(room.finish(&c, 2).await.unwrap());
    // Finishing again is not a second finish.
    assert!(!room.finish(&c, 2).await.unwrap());
    room.set_inventory(Inventory {
        total: 10,
        sold: 10,
        held: 0,
    })
    .await
    .unwrap();
    room.tick_now().await.unwrap();
    assert_eq!(
        drain(&mut rx),
        vec![
            RoomEventKind::Finished {
                session: c.clone(),
                seats: 2
            },
            RoomEventKind::SoldOut,
        ]
    );
}

/// A turn that passes while the person is away: `missed` when the door skips them, `returned` when they come back
/// within the window (and `admitted` when let in, ahead of the line), `abandoned` when the window passes without
/// them, `returned_late` when they come back after it; the counters and the metrics say the same.
#[tokio::test]
async fn missed_turns_and_returns_are_reported() {
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("events-return")
        .capacity(1)
        .idle_timeout(Duration::from_secs(300))
        .poll_interval(Duration::from_secs(5))
        .abandon_after(Duration::from_secs(15))
        .return_window(Duration::from_secs(60))
        .clock(Arc::new(clock.clone()))
        .background(false)
        .build()
        .await
        .unwrap();
    let mut rx = room.subscribe();
    let [a, b, c, d] = [(); 4].map(|_| WaitingRoom::new_session_id());
    let mut n = Vec::new();
    for s in [&a, &b, &c, &d] {
        n.push(room.join(s, None).await.unwrap().number);
    }
    room.tick_now().await.unwrap();
    room.claim(&a).await.unwrap();
    drain(&mut rx);
    // B and D are away; C polls. A finishes: B's turn passes, C goes in.
    clock.advance(Duration::from_secs(20));
    room.locate(&c, n[2]).await.unwrap();
    room.finish(&a, 0).await.unwrap();
    room.tick_now().await.unwrap();
    room.claim(&c).await.unwrap();
    let mut got = drain(&mut rx);
    got.sort_by_key(|k| k.name());
    assert_eq!(
        got,
        vec![
            RoomEventKind::Admitted { session: c.clone() },
            RoomEventKind::Finished {
                session: a.clone(),
                seats: 0
            },
            RoomEventKind::Missed { session: b.clone() },
        ]
    );
    // B comes back within the window; its first answer says so.
    let p = room.locate(&b, n[1]).await.unwrap().unwrap();
    assert_eq!(p.state, SessionState::Returning);
    assert_eq!(room.status(Some(&p)).state, ViewState::Returning);
    room.locate(&b, n[1]).await.unwrap();
    assert_eq!(
        drain(&mut rx),
        vec![RoomEventKind::Returned { session: b.clone() }],
        "one return, however often it polls"
    );
    // C finishes: B goes in before D (who is away anyway); then D's turn passes.
    room.finish(&c, 0).await.unwrap();
    room.tick_now().await.unwrap();
    room.claim(&b).await.unwrap();
    room.finish(&b, 0).await.unwrap();
    room.tick_now().await.unwrap();
    let got: Vec<_> = drain(&mut rx)
        .into_iter()
        .filter(|e| !matches!(e, RoomEventKind::Finished { .. }))
        .collect();
    assert_eq!(
        got,
        vec![
            RoomEventKind::Admitted { session: b.clone() },
            RoomEventKind::Missed { session: d.clone() },
        ]
    );
    // The window passes without D; D comes back after it.
    clock.advance(Duration::from_secs(60));
    room.tick_now().await.unwrap();
    let p = room.locate(&d, n[3]).await.unwrap().unwrap();
    assert_eq!(room.status(Some(&p)).state, ViewState::Missed);
    room.locate(&d, n[3]).await.unwrap();
    assert_eq!(
        drain(&mut rx),
        vec![
            RoomEventKind::Abandoned { session: d.clone() },
            RoomEventKind::ReturnedLate { session: d.clone() },
        ]
    );
    room.refresh().await.unwrap();
    let c = room.stats().counters;
    assert_eq!(
        (c.missed, c.returned, c.returned_late, c.abandoned),
        (2, 1, 1, 1)
    );
    let text = room.metrics_text();
    for line in [
        "waitroom_missed_total{event=\"events-return\"} 2",
        "waitroom_returned_total{event=\"events-return\"} 1",
        "waitroom_returned_late_total{event=\"events-return\"} 1",
        "waitroom_abandoned_total{event=\"events-return\"} 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

/// Closing turns the line away: one event per session turned away, the count in the stats and the metrics, the
/// page says "closed", and a join afterwards takes no place (no `joined` event).
#[tokio::test]
async fn closing_turns_the_line_away() {
    let clock = ManualClock::starting_now();
    let room = room(&clock, 64).await;
    let [a, b, c, d] = [(); 4].map(|_| WaitingRoom::new_session_id());
    for s in [&a, &b, &c] {
        room.join(s, None).await.unwrap();
    }
    room.tick_now().await.unwrap();
    let mut rx = room.subscribe();
    room.close().await.unwrap();
    let r = room.tick_now().await.unwrap();
    assert_eq!(r.turned_away, vec![b.clone(), c.clone()]);
    assert!(r.admitted.is_empty());
    assert_eq!(
        drain(&mut rx),
        vec![
            RoomEventKind::TurnedAway { session: b.clone() },
            RoomEventKind::TurnedAway { session: c.clone() },
        ]
    );
    let p = room.locate(&b, None).await.unwrap().unwrap();
    assert_eq!(p.state, SessionState::TurnedAway);
    assert_eq!(room.status(Some(&p)).state, ViewState::Closed);
    let late = room.join(&d, None).await.unwrap();
    assert_eq!((late.state, late.number), (SessionState::TurnedAway, None));
    assert_eq!(room.status(Some(&late)).state, ViewState::Closed);
    assert!(drain(&mut rx).is_empty(), "a refused join is no join");
    room.tick_now().await.unwrap();
    let stats = room.stats();
    assert_eq!(
        (
            stats.counters.joined,
            stats.counters.turned_away,
            stats.waiting
        ),
        (3, 2, 0)
    );
    let metrics = room.metrics_text();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("waitroom_turned_away_total") && l.ends_with(" 2")),
        "{metrics}"
    );
    // The one inside is not turned away.
    let inside = room.locate(&a, None).await.unwrap().unwrap();
    assert_eq!(inside.state, SessionState::Admitted);
}

#[tokio::test]
async fn a_slow_subscriber_loses_the_oldest_events() {
    let clock = ManualClock::starting_now();
    let room = room(&clock, 2).await;
    let mut rx = room.subscribe();
    let sessions: Vec<String> = (0..5).map(|_| WaitingRoom::new_session_id()).collect();
    for s in &sessions {
        room.join(s, None).await.unwrap();
    }
    assert!(matches!(rx.recv().await, Err(RecvError::Lagged(3))));
    let next = rx.recv().await.unwrap();
    assert_eq!(next.kind.session(), Some(sessions[3].as_str()));
    assert_eq!(next.at_ms, clock.now_ms());
}

#[tokio::test]
async fn a_zero_event_buffer_is_refused() {
    let err = WaitingRoom::builder("events")
        .event_buffer(0)
        .background(false)
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("event_buffer"), "{err}");
}
