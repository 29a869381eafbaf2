//! The tick: flush the liveness marks, run the admission tick in the store (in chunks of `admit_chunk` sessions,
//! one short store call each), report what it did, refresh the shared numbers. The background task runs it every `tick_interval`; [`WaitingRoom::tick_now`] runs it at once.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use waitroom_verify::fingerprint;

use super::WaitingRoom;
use super::lifecycle::RoomEventKind;
use super::liveness::FLUSH_EVERY_MS;
use crate::error::StoreError;
use crate::store::{TURN_AWAY_PER_TICK, Tick, TickReport};

impl WaitingRoom {
    /// Reads the shared numbers from the store now.
    ///
    /// # Errors
    /// When the store cannot be reached; the last snapshot stays in force.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        // Every number noted before the read was given out by the store before it: a store that answers a lower
        // `last_number` lost writes (a failover to a replica that lagged) and is given the floor back.
        let seen = self.inner.max_number.load(Ordering::Relaxed);
        let mut snap = self
            .call(|| self.inner.store.snapshot(self.event()))
            .await?;
        if snap.last_number < seen {
            // The restore reads the store again and installs what it reads.
            self.restore_behind(snap.last_number, seen).await?;
            snap = (**self.inner.snap.load()).clone();
        }
        let sold_out = snap.settings.sold_out();
        let admitted = std::mem::take(&mut snap.admitted_lately);
        let restored = self.install_snapshot(snap);
        // Noted once the snapshot that names them is in force (its head at or past their numbers), so no poll
        // meets one of them in the cache of people let in lately while an older head says they still wait; and
        // after a restore, which empties that cache, these admissions (the restored store's) stay noted.
        for (s, number) in admitted {
            self.note_admitted(s, number);
        }
        if restored {
            let reapplied = self.reapply_finishes().await;
            tracing::info!(event = %self.event(), reapplied, "the store was restored; finishes this instance made lately applied again");
        }
        self.record_snapshot();
        self.load_draw_index();
        if sold_out && !self.inner.sold_out_reported.swap(true, Ordering::Relaxed) {
            tracing::info!(event = %self.event(), "sold out");
            self.emit(RoomEventKind::SoldOut);
        }
        Ok(())
    }

    /// Puts a fresh snapshot in force. When it says the store was restored after forgetting the on-sale (a new
    /// `reclaim_upto`), what this instance remembers of places is dropped: those sessions are taken back from
    /// their cookies at their next poll.
    ///
    /// Returns whether it says a new restore happened (by any instance): the caller then applies again the finishes
    /// this instance made lately ([`reapply_finishes`](Self::reapply_finishes)), which the store may have lost.
    pub(super) fn install_snapshot(&self, snap: crate::store::Snapshot) -> bool {
        let before = self.inner.snap.load().reclaim_upto;
        let restored = snap.reclaim_upto.is_some() && snap.reclaim_upto != before;
        if restored {
            self.inner.cache.invalidate_all();
            self.inner.admits.invalidate_all();
            self.inner.drawn.restored();
        }
        self.inner.snap.store(Arc::new(snap));
        restored
    }

    pub(super) async fn run_once(&self, force_flush: bool) -> Result<TickReport, StoreError> {
        let now = self.now_ms();
        let last = self.inner.last_flush_ms.load(Ordering::Relaxed);
        let retry = self.inner.flush_failed.load(Ordering::Relaxed);
        if force_flush || retry || now >= last + FLUSH_EVERY_MS || now < last {
            self.inner.last_flush_ms.store(now, Ordering::Relaxed);
            if let Err(e) = self.flush().await {
                // The liveness marks did not reach the store: a tick now could skip people who polled all along
                // as away (they would miss their turn). No tick until they are sent.
                self.inner.flush_failed.store(true, Ordering::Relaxed);
                let _ = self.refresh().await;
                return Err(e);
            }
            self.inner.flush_failed.store(false, Ordering::Relaxed);
        }
        // Finishes the store could not take before: recorded first, so the places they free are used now.
        if let Err(e) = self.retry_finishes().await {
            let _ = self.refresh().await;
            return Err(e);
        }
        if now < self.inner.hold_ticks_until_ms.load(Ordering::Relaxed) {
            // Just back from an outage: other instances may still hold liveness marks (see HOLD_AFTER_OUTAGE_MS).
            let _ = self.refresh().await;
            return Ok(TickReport::default());
        }
        // A scheduled closing time that has come closes the on-sale before this tick, which then turns people away.
        self.close_when_due().await;
        let config = &self.inner.config;
        let per_tick = config.max_scan_per_tick.max(1);
        let chunk = config.admit_chunk.clamp(1, per_tick);
        let mut tick = Tick {
            now_ms: now,
            arrival_window_ms: config.arrival_window.as_millis() as u64,
            abandon_after_ms: config.abandon_after.as_millis() as u64,
            return_window_ms: config.return_window.as_millis() as u64,
            max_scan: chunk,
        };
        // The tick in chunks: each call looks at `chunk` sessions at most and says whether it stopped with work
        // left; the next call goes on from there (other callers' commands run in between), up to
        // `max_scan_per_tick` sessions a tick. A call that did work but reported no session (finishes applied,
        // empty pre-queue buckets passed) still counts against the calls' bound below.
        let most_calls = per_tick.div_ceil(chunk) + 1;
        let mut report = TickReport::default();
        let mut looked = 0;
        let mut outcome = Ok(());
        let mut answered = false;
        for _ in 0..most_calls {
            tick.max_scan = chunk.min(per_tick - looked);
            let r = match self
                .call(|| self.inner.store.tick(self.event(), &tick))
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    // The chunks before it stand (each call is atomic): reported above, and read below.
                    outcome = Err(e);
                    break;
                }
            };
            answered = true;
            self.report_tick(&r);
            for s in r
                .expired
                .iter()
                .chain(&r.admitted)
                .chain(&r.missed)
                .chain(&r.abandoned)
                .chain(&r.turned_away)
            {
                self.inner.cache.invalidate(s);
            }
            // Not to be claimed from what this instance heard: expired, or let in and not come within the arrival
            // window (missed: its turn kept for the return window, see `Store::tick`).
            for s in r.expired.iter().chain(&r.missed) {
                self.inner.admits.invalidate(s);
            }
            if r.drew {
                tracing::info!(event = %self.event(), "the draw ran; the door is open");
            }
            looked += r.looked_at();
            report.absorb(r);
            // Turning away keeps its pace of TURN_AWAY_PER_TICK a tick (one lifecycle event each).
            if !report.more
                || looked >= per_tick
                || report.turned_away.len() as u64 >= TURN_AWAY_PER_TICK
            {
                break;
            }
        }
        if answered {
            let _ = self.read_finished().await;
        }
        let _ = self.refresh().await;
        outcome.map(|()| report)
    }

    /// Logs and emits what a tick of this instance did.
    fn report_tick(&self, r: &TickReport) {
        if r.admitted.is_empty()
            && r.missed.is_empty()
            && r.abandoned.is_empty()
            && r.expired.is_empty()
            && r.turned_away.is_empty()
        {
            return;
        }
        tracing::debug!(
            event = %self.event(),
            admitted = r.admitted.len(),
            missed = r.missed.len(),
            abandoned = r.abandoned.len(),
            expired = r.expired.len(),
            turned_away = r.turned_away.len(),
            "tick"
        );
        type Make = fn(String) -> RoomEventKind;
        // One `DEBUG` span per session (a span's name is fixed where it is made, hence one function per kind); the
        // fields are only computed when the span is enabled.
        type Log = fn(&str, &str);
        let kinds: [(&[String], Make, Log); 5] = [
            (
                &r.admitted,
                |session| RoomEventKind::Admitted { session },
                |event, s| {
                    tracing::debug_span!("waitroom.admit", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("admitted"));
                },
            ),
            (
                &r.missed,
                |session| RoomEventKind::Missed { session },
                |event, s| {
                    tracing::debug_span!("waitroom.miss", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("missed its turn while away"));
                },
            ),
            (
                &r.abandoned,
                |session| RoomEventKind::Abandoned { session },
                |event, s| {
                    tracing::debug_span!("waitroom.abandon", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("abandoned"));
                },
            ),
            (
                &r.expired,
                |session| RoomEventKind::Expired { session },
                |event, s| {
                    tracing::debug_span!("waitroom.expire", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("expired"));
                },
            ),
            (
                &r.turned_away,
                |session| RoomEventKind::TurnedAway { session },
                |event, s| {
                    tracing::debug_span!("waitroom.turn_away", event = %event, session = %fingerprint(s))
                        .in_scope(|| tracing::debug!("turned away"));
                },
            ),
        ];
        let listening = self.inner.events.receiver_count() > 0;
        for (sessions, make, log) in kinds {
            for s in sessions {
                log(self.event(), s);
                if listening {
                    self.emit(make(s.clone()));
                }
            }
        }
    }

    /// Runs one round of the background work now: flushes liveness and touches, runs the admission tick, refreshes
    /// the shared numbers. Tests and rehearsals with a manual clock call this instead of waiting.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn tick_now(&self) -> Result<TickReport, StoreError> {
        self.run_once(true).await
    }
}
