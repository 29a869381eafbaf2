//! Operator controls: capacity, the per-minute cap, pause and resume, open now, close, the seats.

use waitroom_verify::fingerprint;

use super::WaitingRoom;
use crate::error::StoreError;
use crate::store::{AuditEntry, Inventory, Placement, SessionDetail, Settings, SettingsChange};

/// Most sessions one fingerprint lookup returns (a fingerprint is 24 bits of the id's SHA-256: with 600,000
/// sessions about 3.5% of fingerprints are shared by two or more).
pub(crate) const FINGERPRINT_MATCHES: usize = 10;

impl WaitingRoom {
    async fn change(&self, change: SettingsChange) -> Result<Settings, StoreError> {
        let r = self
            .call(|| self.inner.store.update(self.event(), &change))
            .await;
        match &r {
            Ok(_) => tracing::info!(event = %self.event(), change = ?change, "settings changed"),
            Err(e) => {
                tracing::warn!(event = %self.event(), change = ?change, error = %e, "settings change failed")
            }
        }
        let s = r?;
        let _ = self.refresh().await;
        Ok(s)
    }

    /// Sets the capacity (every instance sharing the store sees it at its next refresh).
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn set_capacity(&self, capacity: u64) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Capacity { capacity }).await
    }

    /// Sets or clears the per-minute admission cap.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn set_admit_per_minute(
        &self,
        per_minute: Option<u64>,
    ) -> Result<Settings, StoreError> {
        self.change(SettingsChange::AdmitPerMinute { per_minute })
            .await
    }

    /// Pauses the door.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn pause(&self) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Pause).await
    }

    /// Resumes the door.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn resume(&self) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Resume).await
    }

    /// Opens the door now (with a random draw, the draw runs at the next tick).
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn open_now(&self) -> Result<Settings, StoreError> {
        self.change(SettingsChange::OpenNow {
            now_ms: self.now_ms(),
        })
        .await
    }

    /// Closes the on-sale, for good: nobody new joins (a join answers [`SessionState::TurnedAway`](crate::store::SessionState::TurnedAway) and takes no
    /// place) or is let in, and the admission tick turns away everyone still in line or in the pre-queue
    /// ([`TURN_AWAY_PER_TICK`](crate::store::TURN_AWAY_PER_TICK) a tick; each hears "closed" at its next poll).
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn close(&self) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Close).await
    }

    /// Reports the seats: the door stops when none is available, lets in no more people within a minute than there
    /// are seats available, and the room turns sold out when all are sold. The counts are absolute and replace the
    /// last report; see [`finish`](Self::finish) for orders still on their way to the room.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn set_inventory(&self, inventory: Inventory) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Inventory { inventory }).await
    }

    /// Sets the on-sale's timetable (every value replaces the one in force; `None` clears it): when the door opens
    /// (with a random draw, when the draw runs), when the pre-queue opens (before it a new join takes no place)
    /// and when the on-sale closes by itself (the first tick at or after it closes the on-sale, as
    /// [`close`](Self::close) does). Times are ms since the Unix epoch. Shared through the store, like every other
    /// setting.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn set_schedule(
        &self,
        opens_at_ms: Option<u64>,
        prequeue_opens_at_ms: Option<u64>,
        closes_at_ms: Option<u64>,
    ) -> Result<Settings, StoreError> {
        self.change(SettingsChange::Schedule {
            opens_at_ms,
            prequeue_opens_at_ms,
            closes_at_ms,
        })
        .await
    }

    /// Closes the on-sale when its scheduled closing time has come (called by the tick; every instance may, the
    /// change is idempotent).
    pub(super) async fn close_when_due(&self) {
        let snap = self.inner.snap.load();
        let s = &snap.settings;
        if !s.closed && s.closes_at_ms.is_some_and(|t| self.now_ms() >= t) {
            tracing::info!(event = %self.event(), "the scheduled closing time has come: closing");
            let _ = self.close().await;
        }
    }

    /// One session as an operator sees it: its placement and when it was let in.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn inspect(&self, session: &str) -> Result<Option<SessionDetail>, StoreError> {
        self.observe(self.inner.store.inspect(self.event(), session).await)
    }

    /// The sessions whose fingerprint (what the logs show for a session: the first 6 hex digits of its id's
    /// SHA-256) is `fp`, at most 10. Scans every session record: for customer support, not
    /// for a hot path.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn find_by_fingerprint(&self, fp: &str) -> Result<Vec<String>, StoreError> {
        let fp = fp.to_ascii_lowercase();
        let matches = move |id: &str| fingerprint(id).to_string() == fp;
        self.observe(
            self.inner
                .store
                .find_sessions(self.event(), &matches, FINGERPRINT_MATCHES)
                .await,
        )
    }

    /// Moves a waiting session to the front of the line (customer support): the next place that frees is its
    /// (before anyone in line; several moved go in the order they were moved). Every instance stops answering it
    /// from its cookie's old number at its next refresh. Returns its placement (waiting, no number), or `None`
    /// when it is not waiting with a line number (or 1,000 moved sessions are still ahead of the head).
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn move_to_front(&self, session: &str) -> Result<Option<Placement>, StoreError> {
        let r = self.observe(
            self.inner
                .store
                .move_to_front(self.event(), session, self.now_ms())
                .await,
        )?;
        self.inner.cache.invalidate(session);
        let _ = self.refresh().await;
        Ok(r)
    }

    /// Records an admin action in the on-sale's audit log (kept in the store, so every instance reads the same
    /// log) and as a `tracing` event at `info`.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn audit(&self, who: &str, action: &str, detail: &str) -> Result<(), StoreError> {
        tracing::info!(event = %self.event(), operator = who, action, detail, "admin action");
        let entry = AuditEntry {
            at_ms: self.now_ms(),
            who: who.to_owned(),
            action: action.to_owned(),
            detail: detail.to_owned(),
        };
        self.observe(self.inner.store.audit(self.event(), &entry).await)
    }

    /// The last `limit` admin actions, newest first.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn audit_log(&self, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.observe(self.inner.store.audit_log(self.event(), limit).await)
    }
}
