//! Time, from one place.
//!
//! Everything in waitroom that reads the time (token lifetimes, the door's pace, idle expiry) reads it from a
//! [`Clock`]. Production uses [`SystemClock`]; tests and the rehearsal use [`ManualClock`] and move it by hand, so
//! ten minutes of on-sale run in milliseconds against the real logic.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time, in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;

    /// Whole seconds since the Unix epoch (what JWT claims use).
    fn now_secs(&self) -> u64 {
        self.now_ms() / 1000
    }
}

/// A clock shared by every part of a room or verifier.
pub type SharedClock = Arc<dyn Clock>;

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A manual clock standing at `start_ms` milliseconds since the Unix epoch.
    pub fn new(start_ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(start_ms)))
    }

    /// A manual clock standing at the current wall-clock time.
    pub fn starting_now() -> Self {
        Self::new(SystemClock.now_ms())
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }

    /// Sets the clock to `ms` milliseconds since the Unix epoch (it may go backwards; tests decide).
    pub fn set_ms(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told_and_clones_share_it() {
        let c = ManualClock::new(1_000);
        let d = c.clone();
        assert_eq!(c.now_ms(), 1_000);
        d.advance(Duration::from_millis(2_500));
        assert_eq!(c.now_ms(), 3_500);
        assert_eq!(c.now_secs(), 3);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_secs() > 1_577_836_800);
    }
}
