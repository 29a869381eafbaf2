//! Store-outage tracking: whether the store answers, what a failure does to the door, the throttled warning.

use std::sync::atomic::Ordering;

use super::WaitingRoom;
use super::builder::StoreOutage;
use super::liveness::FLUSH_EVERY_MS;
use crate::error::StoreError;

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
                self.inner.store_unreachable.store(false, Ordering::Relaxed);
                if !self.inner.store_ok.swap(true, Ordering::Relaxed) {
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

    pub(super) fn observe<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        self.note_store(r.as_ref().map(|_| ()));
        r
    }
}
