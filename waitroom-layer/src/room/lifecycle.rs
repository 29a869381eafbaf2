//! The lifecycle stream: [`RoomEvent`]s (a session joined, was let in, finished, ...; not to be confused with the
//! on-sale, whose id is the room's `event`), which the app subscribes to with
//! [`WaitingRoom::subscribe`](crate::WaitingRoom::subscribe), for its own analytics.
//!
//! # Where events come from
//! Each instance reports what it did itself: a join or a finish is reported by the instance that handled the
//! request; admissions, expiries, abandonments and turn-aways by the instance whose admission tick made them (the tick
//! is atomic in the store, so each one is reported once across instances). Closing (or selling out) with a long line
//! turns away up to [`TURN_AWAY_PER_TICK`](crate::store::TURN_AWAY_PER_TICK) (2,000) sessions a tick, one event
//! each, within the default buffer; a subscriber that reads slower than ticks come needs a larger one, or reads
//! [`Counters::turned_away`](crate::store::Counters). [`RoomEventKind::SoldOut`] is seen by
//! every instance when its snapshot of the shared numbers flips, so each instance reports it once. To see every
//! event of a multi-instance on-sale, subscribe on every instance.
//!
//! # A bounded buffer
//! The stream is a [`tokio::sync::broadcast`] channel of [`RoomBuilder::event_buffer`](crate::RoomBuilder::event_buffer)
//! events (default 4,096). A subscriber that falls behind loses the **oldest** events: its next `recv` returns
//! `Err(RecvError::Lagged(n))` with how many it missed, then goes on with the oldest event still held. The room
//! never waits for a subscriber; with no subscriber, emitting costs one atomic load.
//!
//! Events carry the whole session id (the app's own analytics need it to join its own data). Do not log it:
//! log [`fingerprint`](crate::fingerprint)`(session)` instead.

use serde::Serialize;

/// What happened, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoomEvent {
    /// When, in milliseconds since the Unix epoch, by the room's clock.
    pub at_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub kind: RoomEventKind,
}

/// The kinds of [`RoomEvent`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RoomEventKind {
    /// A join call put the session in line (or in the pre-queue).
    Joined {
        /// The session.
        session: String,
        /// Its line number (none in the pre-queue, before the draw).
        number: Option<u64>,
    },
    /// The session reached the head and was let in.
    Admitted {
        /// The session.
        session: String,
    },
    /// The order service finished the session (through this instance).
    Finished {
        /// The session.
        session: String,
        /// Seats its order bought (0 when it left without buying).
        seats: u32,
    },
    /// An active session idled out.
    Expired {
        /// The session.
        session: String,
    },
    /// A waiting session was away (it had not polled for the abandon grace) when its turn came: the door skipped
    /// it and let the next present person in; or it was let in and did not come for its pass within the arrival
    /// window, and its place went to the next present person. It keeps its turn for the return window.
    Missed {
        /// The session.
        session: String,
    },
    /// A session that missed its turn came back within the return window (to this instance): it is let in at the
    /// next free place, ahead of the head of the line.
    Returned {
        /// The session.
        session: String,
    },
    /// A session that missed its turn came back after the return window (to this instance): it is told its turn
    /// passed, and its next protected request joins at the back.
    ReturnedLate {
        /// The session.
        session: String,
    },
    /// A session that missed its turn did not come back within the return window; its join ends here.
    Abandoned {
        /// The session.
        session: String,
    },
    /// A session still in line (or in the pre-queue) when the on-sale closed or sold out was turned away.
    TurnedAway {
        /// The session.
        session: String,
    },
    /// Every seat is sold.
    SoldOut,
}

impl RoomEventKind {
    /// The session the event is about, if any.
    pub fn session(&self) -> Option<&str> {
        match self {
            Self::Joined { session, .. }
            | Self::Admitted { session }
            | Self::Finished { session, .. }
            | Self::Expired { session }
            | Self::Missed { session }
            | Self::Returned { session }
            | Self::ReturnedLate { session }
            | Self::Abandoned { session }
            | Self::TurnedAway { session } => Some(session),
            Self::SoldOut => None,
        }
    }

    /// The kind's wire name (`joined`, `admitted`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Joined { .. } => "joined",
            Self::Admitted { .. } => "admitted",
            Self::Finished { .. } => "finished",
            Self::Expired { .. } => "expired",
            Self::Missed { .. } => "missed",
            Self::Returned { .. } => "returned",
            Self::ReturnedLate { .. } => "returned_late",
            Self::Abandoned { .. } => "abandoned",
            Self::TurnedAway { .. } => "turned_away",
            Self::SoldOut => "sold_out",
        }
    }
}

/// Default size of the event buffer.
pub(crate) const DEFAULT_EVENT_BUFFER: usize = 4_096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_flat_with_a_type() {
        let e = RoomEvent {
            at_ms: 7,
            kind: RoomEventKind::Finished {
                session: "s".into(),
                seats: 2,
            },
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"at_ms":7,"type":"finished","session":"s","seats":2}"#
        );
        assert_eq!(e.kind.session(), Some("s"));
        assert_eq!(RoomEventKind::SoldOut.name(), "sold_out");
    }
}
