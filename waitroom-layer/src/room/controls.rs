//! Operator controls: capacity, the per-minute cap, pause and resume, open now, close, the seats.

use super::WaitingRoom;
use crate::error::StoreError;
use crate::store::{Inventory, Settings, SettingsChange};

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
}
