//! Store-outage tracking: whether the store answers, what a failure does to the door, the throttled warning; and
//! what the room does when the store forgot the on-sale (restore it, take people back: see "When the store
//! forgets" in [`crate::store`]).

use std::future::Future;
use std::sync::atomic::Ordering;

use super::WaitingRoom;
use super::builder::StoreOutage;
use super::liveness::FLUSH_EVERY_MS;
use crate::error::StoreError;
use crate::store::Restore;

/// How long after the store comes back the door stays shut: two flush intervals, so every instance sharing the
/// store has sent the liveness marks it kept during the outage.
const HOLD_AFTER_OUTAGE_MS: u64 = 2 * FLUSH_EVERY_MS;

impl WaitingRoom {
    /// Whether the store answered at the last attempt.
    pub fn store_ok(&self) -> bool {
        self.inner.store_ok.load(Ordering::Relaxed)
    }

    /// Whether a protected request without a valid token passes now: the store could not be reached at the last
    /// attempt (an unreadable answer does not open the door) and the room was built with [`StoreOutage::FailOpen`].
    pub(crate) fn fails_open(&self) -> bool {
        self.inner.config.store_outage == StoreOutage::FailOpen
            && self.inner.store_unreachable.load(Ordering::Relaxed)
    }

    fn note_store(&self, r: Result<(), &StoreError>) {
        match r {
            Ok(()) => {
                // Read before written: every store call passes here, and a write each (even of the same value)
                // would pull the flags' cache line from core to core.
                if self.inner.store_unreachable.load(Ordering::Relaxed) {
                    self.inner.store_unreachable.store(false, Ordering::Relaxed);
                }
                if !self.inner.store_ok.load(Ordering::Relaxed)
                    && !self.inner.store_ok.swap(true, Ordering::Relaxed)
                {
                    let now = self.now_ms();
                    self.inner
                        .hold_ticks_until_ms
                        .store(now + HOLD_AFTER_OUTAGE_MS, Ordering::Relaxed);
                    tracing::info!(event = %self.event(), "store reachable again");
                }
            }
            Err(e) => {
                self.inner.metrics.store_errors.inc();
                self.inner.store_ok.store(false, Ordering::Relaxed);
                self.inner
                    .store_unreachable
                    .store(e.is_unavailable(), Ordering::Relaxed);
                // Once per interval (the first error at once; a clock that went back counts as a new interval).
                if self.inner.store_log.due_at(self.now_ms()) {
                    match self.inner.config.store_outage {
                        StoreOutage::FailClosed => {
                            tracing::warn!(event = %self.event(), error = %e,
                            "store unavailable; answering from the last snapshot, nobody new gets in")
                        }
                        StoreOutage::FailOpen => tracing::warn!(event = %self.event(), error = %e,
                            "store unavailable; answering from the last snapshot, failing open: protected paths are unprotected until it answers"),
                    }
                }
            }
        }
    }

    /// Runs a store call; when the store answers that it does not know the on-sale ([`StoreError::Forgotten`]:
    /// a Redis restarted without persistence, say), restores it from this instance's view and runs the call once
    /// more. Either way the outcome is observed (see [`observe`](Self::observe)).
    pub(super) async fn call<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        match timed(&self.inner.metrics, f()).await {
            Err(e) if e.is_forgotten() => {
                if let Err(e) = self.restore_store().await {
                    return self.observe(Err(e));
                }
                self.observe(f().await)
            }
            // Behind this instance's view (`Store::line_tickets`): the floor back, then once more.
            Err(StoreError::Behind { store_last }) => {
                let seen = self.inner.max_number.load(Ordering::Relaxed);
                self.restore_behind(store_last, seen).await?;
                self.observe(f().await)
            }
            r => self.observe(r),
        }
    }

    /// The longest store call this instance has made since it started, from the call to the answer (a round trip
    /// to Redis and any wait for it included, the system clock's time whatever the room's clock), and how many
    /// took over 5 ms: what the rehearsal reports, and `waitroom_store_calls_over_5ms_total`.
    pub fn longest_store_call(&self) -> (std::time::Duration, u64) {
        let m = &self.inner.metrics;
        (
            std::time::Duration::from_micros(
                m.store_call_longest_us
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
            m.store_calls_over_5ms.get(),
        )
    }

    /// Gives the on-sale back to a store that forgot it: its settings as last in force, the line's numbers from
    /// this instance's last snapshot (and the highest number it has seen) as floors, the counters; nobody is let
    /// in for the hold ([`restore_hold_ms`](Self::restore_hold_ms)), while the people in line come back with their
    /// cookies ([`Store::reclaim`](crate::store::Store::reclaim), on their next poll). Another instance may have
    /// restored it already: the store keeps the first restore.
    pub(super) async fn restore_store(&self) -> Result<(), StoreError> {
        self.restore(false).await
    }

    /// Gives the number floor back to a store that knows the on-sale but lost its latest writes: it answered
    /// `store_last` as its highest number after this instance had seen `seen` (see "When the store forgets" in
    /// [`crate::store`]).
    pub(super) async fn restore_behind(
        &self,
        store_last: u64,
        seen: u64,
    ) -> Result<(), StoreError> {
        tracing::warn!(
            event = %self.event(),
            store_last,
            seen,
            "the store is behind this instance's view (writes lost in a failover?); keeping the lost numbers for their owners"
        );
        // The finishes this instance made lately are applied again once the restored snapshot is installed (by
        // this instance's refresh, or any other's).
        self.observe(self.restore(true).await)
    }

    async fn restore(&self, behind: bool) -> Result<(), StoreError> {
        let _one = self.inner.restoring.lock().await;
        let snap = self.snapshot();
        let c = &self.inner.config;
        let hold_ms = self.restore_hold_ms();
        let restore = Restore {
            settings: snap.settings.clone(),
            drawn: snap.drawn,
            last_number: snap
                .last_number
                .max(self.inner.max_number.load(Ordering::Relaxed)),
            served: snap.served,
            counters: snap.counters,
            now_ms: self.now_ms(),
            hold_ms,
            late_ms: hold_ms + c.abandon_after.as_millis() as u64,
            behind,
        };
        self.inner.store.restore(self.event(), &restore).await?;
        self.inner.metrics.store_restores.inc();
        tracing::warn!(
            event = %self.event(),
            last_number = restore.last_number,
            served = restore.served,
            hold_ms,
            "the store had forgotten the on-sale; restored it from this instance's last view, taking people back from their cookies"
        );
        // A read now, so this instance's polls start taking people back at once.
        if let Ok(snap) = self.inner.store.snapshot(self.event()).await
            && self.install_snapshot(snap)
        {
            self.reapply_finishes().await;
        }
        Ok(())
    }

    /// How long a restored store lets nobody in: one poll interval with the holding page's jitter (+20 %), plus a
    /// second, so every browser still polling has come back with its number first.
    pub(crate) fn restore_hold_ms(&self) -> u64 {
        let poll = self.inner.config.poll_interval.as_millis() as u64;
        poll + poll / 5 + 1_000
    }

    /// Notes the highest line number seen (a floor for a restore).
    pub(super) fn note_number(&self, n: u64) {
        if n > self.inner.max_number.load(Ordering::Relaxed) {
            self.inner.max_number.fetch_max(n, Ordering::Relaxed);
        }
    }

    pub(super) fn observe<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        self.note_store(r.as_ref().map(|_| ()));
        r
    }
}

/// Awaits a store call, keeping the longest this instance has seen and counting those over 5 ms (see
/// [`WaitingRoom::longest_store_call`]).
pub(super) async fn timed<T>(m: &super::metrics::RoomMetrics, call: impl Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let out = call.await;
    let us = started.elapsed().as_micros() as u64;
    // Read first: a new longest is rare, and a write each call would move the line between cores.
    if us
        > m.store_call_longest_us
            .load(std::sync::atomic::Ordering::Relaxed)
    {
        m.store_call_longest_us
            .fetch_max(us, std::sync::atomic::Ordering::Relaxed);
    }
    if us > 5_000 {
        m.store_calls_over_5ms.inc();
    }
    out
}
