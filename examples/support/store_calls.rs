//! The rehearsal's `--count-store-calls`: a store that passes every call on and counts, per kind, the calls, the
//! time they took (wall time, as the room waited for them: a round trip to Redis included) and the longest.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use waitroom_layer::StoreError;
use waitroom_layer::store::{
    DrawCursor, DrawnPage, Join, Placement, Reclaim, Redeem, Restore, Return, SessionDetail,
    Settings, SettingsChange, Snapshot, Store, Tick, TickReport, Ticket, Touches,
};

/// Calls, seconds in all and the longest call (seconds), per kind of call.
type Tally = BTreeMap<&'static str, (u64, f64, f64)>;

/// A store that counts and times the calls made to `inner` (see the module docs).
#[derive(Debug)]
pub struct StoreCalls {
    inner: Arc<dyn Store>,
    tally: Mutex<Tally>,
}

impl StoreCalls {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            tally: Mutex::default(),
        }
    }

    fn note(&self, kind: &'static str, started: Instant) {
        let took = started.elapsed().as_secs_f64();
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        let e = tally.entry(kind).or_default();
        e.0 += 1;
        e.1 += took;
        e.2 = e.2.max(took);
    }

    /// One line per kind of call, then the total.
    pub fn report(&self) -> String {
        let tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::from("store calls (kind: calls, seconds in all, mean, longest):\n");
        let (mut calls, mut secs) = (0, 0.0);
        for (kind, (n, s, longest)) in tally.iter() {
            calls += n;
            secs += s;
            out.push_str(&format!(
                "  {kind:>14}: {n:>9} {s:>8.2} s {:>8.1} µs {:>8.1} ms\n",
                s * 1e6 / *n as f64,
                longest * 1e3
            ));
        }
        out.push_str(&format!("  {:>14}: {calls:>9} {secs:>8.2} s", "all"));
        out
    }
}

macro_rules! timed {
    ($self:ident, $kind:literal, $call:expr) => {{
        let started = Instant::now();
        let r = $call.await;
        $self.note($kind, started);
        r
    }};
}

#[async_trait]
impl Store for StoreCalls {
    async fn init(&self, e: &str, d: &Settings) -> Result<Settings, StoreError> {
        timed!(self, "init", self.inner.init(e, d))
    }
    async fn join(&self, e: &str, j: &Join) -> Result<Placement, StoreError> {
        timed!(self, "join", self.inner.join(e, j))
    }
    async fn ticket(&self, e: &str, now: u64) -> Result<Ticket, StoreError> {
        timed!(self, "ticket", self.inner.ticket(e, now))
    }
    async fn tickets(&self, e: &str, n: usize, now: u64) -> Result<Vec<Ticket>, StoreError> {
        timed!(self, "tickets", self.inner.tickets(e, n, now))
    }
    async fn line_tickets(&self, e: &str, n: usize, known: u64) -> Result<Option<u64>, StoreError> {
        timed!(self, "line_tickets", self.inner.line_tickets(e, n, known))
    }
    fn ticket_batch(&self) -> usize {
        self.inner.ticket_batch()
    }
    async fn redeem(&self, e: &str, r: &Redeem) -> Result<Option<Placement>, StoreError> {
        timed!(self, "redeem", self.inner.redeem(e, r))
    }
    async fn lookup(&self, e: &str, s: &str) -> Result<Option<Placement>, StoreError> {
        timed!(self, "lookup", self.inner.lookup(e, s))
    }
    async fn come_back(
        &self,
        e: &str,
        s: &str,
        now: u64,
        window: u64,
    ) -> Result<(Option<Placement>, Option<Return>), StoreError> {
        timed!(self, "come_back", self.inner.come_back(e, s, now, window))
    }
    async fn drawn_numbers(
        &self,
        e: &str,
        from: &DrawCursor,
        most: usize,
    ) -> Result<Option<DrawnPage>, StoreError> {
        timed!(
            self,
            "drawn_numbers",
            self.inner.drawn_numbers(e, from, most)
        )
    }
    async fn claim(
        &self,
        e: &str,
        s: &str,
        now: u64,
        idle: u64,
    ) -> Result<Option<Placement>, StoreError> {
        timed!(self, "claim", self.inner.claim(e, s, now, idle))
    }
    async fn touch(&self, e: &str, t: &Touches) -> Result<(), StoreError> {
        timed!(self, "touch", self.inner.touch(e, t))
    }
    async fn tick(&self, e: &str, t: &Tick) -> Result<TickReport, StoreError> {
        timed!(self, "tick", self.inner.tick(e, t))
    }
    async fn finish(&self, e: &str, s: &str, seats: u32, now: u64) -> Result<bool, StoreError> {
        timed!(self, "finish", self.inner.finish(e, s, seats, now))
    }
    async fn snapshot(&self, e: &str) -> Result<Snapshot, StoreError> {
        timed!(self, "snapshot", self.inner.snapshot(e))
    }
    async fn update(&self, e: &str, c: &SettingsChange) -> Result<Settings, StoreError> {
        timed!(self, "update", self.inner.update(e, c))
    }
    async fn restore(&self, e: &str, r: &Restore) -> Result<Settings, StoreError> {
        timed!(self, "restore", self.inner.restore(e, r))
    }
    async fn reclaim(&self, e: &str, r: &Reclaim) -> Result<Option<Placement>, StoreError> {
        timed!(self, "reclaim", self.inner.reclaim(e, r))
    }
    async fn finished_since(
        &self,
        e: &str,
        cursor: &str,
        now: u64,
        lookback: u64,
    ) -> Result<(Vec<String>, String), StoreError> {
        timed!(
            self,
            "finished_since",
            self.inner.finished_since(e, cursor, now, lookback)
        )
    }
    async fn inspect(&self, e: &str, s: &str) -> Result<Option<SessionDetail>, StoreError> {
        timed!(self, "inspect", self.inner.inspect(e, s))
    }
    async fn find_sessions(
        &self,
        e: &str,
        matches: &(dyn for<'s> Fn(&'s str) -> bool + Send + Sync),
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        timed!(
            self,
            "find_sessions",
            self.inner.find_sessions(e, matches, limit)
        )
    }
    async fn move_to_front(
        &self,
        e: &str,
        s: &str,
        now: u64,
    ) -> Result<Option<Placement>, StoreError> {
        timed!(self, "move_to_front", self.inner.move_to_front(e, s, now))
    }
    async fn audit(
        &self,
        e: &str,
        entry: &waitroom_layer::store::AuditEntry,
    ) -> Result<(), StoreError> {
        timed!(self, "audit", self.inner.audit(e, entry))
    }
    async fn audit_log(
        &self,
        e: &str,
        limit: usize,
    ) -> Result<Vec<waitroom_layer::store::AuditEntry>, StoreError> {
        timed!(self, "audit_log", self.inner.audit_log(e, limit))
    }
}
