//! A throttle for repeating warnings (a store or Redis that keeps failing): at most one line per interval.
//! Not part of the stable API: the room crate uses it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `last_ms` before anything was logged.
const NEVER: u64 = u64::MAX;

/// Says when a repeating warning is due: the first time at once, then at most once per interval. A clock that went
/// back counts as a new interval (a warning is never silenced for as long as the clock jumped).
#[derive(Debug)]
pub struct LogGate {
    last_ms: AtomicU64,
    every_ms: u64,
}

impl LogGate {
    /// The house interval: ten seconds.
    pub const EVERY: Duration = Duration::from_secs(10);

    /// A gate letting one line through per `every`.
    #[must_use]
    pub const fn new(every: Duration) -> Self {
        Self {
            last_ms: AtomicU64::new(NEVER),
            every_ms: every.as_millis() as u64,
        }
    }

    /// Whether to log now, at `now_ms` (milliseconds on any clock the caller keeps to). Of several threads asking
    /// at once, one is told yes.
    pub fn due_at(&self, now_ms: u64) -> bool {
        let last = self.last_ms.load(Ordering::Relaxed);
        (last == NEVER || now_ms >= last.saturating_add(self.every_ms) || now_ms < last)
            && self
                .last_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// [`due_at`](Self::due_at) on the system clock.
    pub fn due(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.due_at(now)
    }
}

impl Default for LogGate {
    fn default() -> Self {
        Self::new(Self::EVERY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_warning_goes_out_at_once_then_one_per_interval() {
        let gate = LogGate::default();
        assert!(gate.due_at(0));
        assert!(!gate.due_at(1));
        assert!(!gate.due_at(9_999));
        assert!(gate.due_at(10_000));
        assert!(!gate.due_at(19_999));
    }

    #[test]
    fn a_clock_that_went_back_starts_a_new_interval() {
        let gate = LogGate::new(Duration::from_secs(10));
        assert!(gate.due_at(50_000));
        assert!(gate.due_at(20_000));
        assert!(!gate.due_at(20_001));
    }
}
