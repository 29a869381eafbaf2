//! What a handler sees after a request passed ([`Admission`]), and how it finishes the session.
//!
//! # Finishing
//! When the order goes through, the handler calls [`Admission::finish_with_seats`] (or [`Admission::finish`]
//! when it ends the visit without buying). Then:
//! 1. at once, the verifier denies the session: every later request with its token is refused with
//!    [`Refusal::Finished`](crate::Refusal::Finished), cached or not;
//! 2. when the handler's response passes back through the layer, the [`Finish`] is handed to the layer's
//!    [`FinishSink`], which may add response headers and may return a future that the layer awaits before the
//!    response leaves (so a store write can complete first).
//!
//! The default sink, [`HeaderSink`], adds `Waitroom-Command: finish; seats=<n>` ([`FINISH_HEADER`]), which the
//! room layer reads (with [`parse_finish_command`]) and removes on the way out.
//!
//! # The sink contract
//! [`FinishSink::finish`] is synchronous and must not block; it receives the finish and the response headers.
//! It returns `None` when its work is done, or `Some(future)` for asynchronous work the response should wait
//! for. Finish before returning the response: a finish that arrives after the response has left (a handler that
//! kept a clone of the `Admission` in a background task), or whose response never completes (client gone, inner
//! service error), still denies the session at once, and the sink is called with a detached header map; a future
//! it returns then is dropped without being polled. A sink whose delivery must survive that case should start its
//! work inside `finish` (spawn a task, send on a channel) rather than in the returned future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::claims::Claims;
use crate::verifier::Verifier;

/// The response header by which a verifier tells the room layer that a session finished:
/// `Waitroom-Command: finish; seats=<n>`.
pub const FINISH_HEADER: HeaderName = HeaderName::from_static("waitroom-command");

/// A session that finished: who, for which on-sale, how many seats were bought, and when (ms, verifier clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    /// The session id (the token's `sub`).
    pub session_id: String,
    /// The on-sale id (the token's `aud`).
    pub event: String,
    /// Seats bought by the order (0 when the visit ended without a purchase).
    pub seats: u32,
    /// When, in milliseconds since the Unix epoch by the verifier's clock.
    pub at_ms: u64,
}

/// Asynchronous work a [`FinishSink`] wants finished before the response leaves.
pub type FinishFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where finishes go, so the room learns that a session left. Object-safe; see the module docs for the contract.
pub trait FinishSink: Send + Sync + fmt::Debug + 'static {
    /// Handles one finish. `response_headers` are those of the response that carried it (or a detached map when
    /// there is none). Return `Some(future)` for work the response should wait for.
    fn finish(&self, finish: &Finish, response_headers: &mut HeaderMap) -> Option<FinishFuture>;
}

/// The default sink: adds `Waitroom-Command: finish; seats=<n>` to the response for the room layer to consume.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeaderSink;

impl FinishSink for HeaderSink {
    fn finish(&self, finish: &Finish, response_headers: &mut HeaderMap) -> Option<FinishFuture> {
        response_headers.insert(FINISH_HEADER, finish_command(finish.seats));
        None
    }
}

/// The [`FINISH_HEADER`] value for `seats`: `finish; seats=<n>`.
#[must_use]
pub fn finish_command(seats: u32) -> HeaderValue {
    HeaderValue::try_from(format!("finish; seats={seats}"))
        .expect("digits and ASCII are a valid header value")
}

/// Reads a [`FINISH_HEADER`] value: `finish` (0 seats) or `finish; seats=<n>`, case-insensitive, whitespace
/// around `;` and `=` allowed, unknown parameters ignored. `None` for anything else (including values over 128
/// bytes, a repeated or non-numeric `seats`).
#[must_use]
pub fn parse_finish_command(value: &HeaderValue) -> Option<u32> {
    if value.len() > 128 {
        return None;
    }
    let text = value.to_str().ok()?;
    let mut parts = text.split(';');
    if !parts.next()?.trim().eq_ignore_ascii_case("finish") {
        return None;
    }
    let mut seats = None;
    for param in parts {
        let (name, val) = param.split_once('=')?;
        if name.trim().eq_ignore_ascii_case("seats") {
            let val = val.trim();
            if seats.is_some() || val.is_empty() || !val.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            seats = Some(val.parse().ok()?);
        }
    }
    Some(seats.unwrap_or(0))
}

enum CellState {
    /// The request is in the handler; no finish yet.
    Open,
    /// Finished; waiting for the response to carry it.
    Pending(Finish),
    /// The finish went to the sink.
    Delivered,
    /// The response left without a finish.
    Closed,
}

/// What finishing a session needs: the verifier (its deny list) and the sink. One per layer, shared by every
/// admission it makes (one reference count per request instead of two).
pub(crate) struct Finisher {
    pub(crate) verifier: Verifier,
    pub(crate) sink: Arc<dyn FinishSink>,
}

/// Shared between an [`Admission`] (and its clones) and the layer's response future.
pub(crate) struct FinishCell {
    finisher: Arc<Finisher>,
    state: Mutex<CellState>,
}

impl FinishCell {
    fn lock(&self) -> std::sync::MutexGuard<'_, CellState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Finishes `claims`' session; true when this call did it (false if already finished).
    fn finish(&self, claims: &Claims, seats: u32) -> bool {
        let mut state = self.lock();
        let late = match &*state {
            CellState::Open => false,
            CellState::Closed => true,
            CellState::Pending(_) | CellState::Delivered => return false,
        };
        self.finisher.verifier.deny_session(&claims.sub);
        let finish = Finish {
            session_id: claims.sub.clone(),
            event: claims.aud.clone(),
            seats,
            at_ms: self.finisher.verifier.clock().now_ms(),
        };
        if late {
            *state = CellState::Delivered;
            drop(state);
            tracing::debug!(session = %crate::session::fingerprint(&finish.session_id), "finish after the response left; detached sink call");
            let _ = self.finisher.sink.finish(&finish, &mut HeaderMap::new());
        } else {
            *state = CellState::Pending(finish);
        }
        true
    }

    fn is_finished(&self) -> bool {
        matches!(*self.lock(), CellState::Pending(_) | CellState::Delivered)
    }

    /// The response is passing: hands a pending finish to the sink with the response headers.
    pub(crate) fn on_response(&self, headers: &mut HeaderMap) -> Option<FinishFuture> {
        let mut state = self.lock();
        match std::mem::replace(&mut *state, CellState::Closed) {
            CellState::Pending(finish) => {
                *state = CellState::Delivered;
                drop(state);
                self.finisher.sink.finish(&finish, headers)
            }
            CellState::Open | CellState::Closed => None,
            CellState::Delivered => {
                *state = CellState::Delivered;
                None
            }
        }
    }
}

impl Drop for FinishCell {
    fn drop(&mut self) {
        let state = std::mem::replace(
            self.state.get_mut().unwrap_or_else(|e| e.into_inner()),
            CellState::Closed,
        );
        if let CellState::Pending(finish) = state {
            tracing::debug!(session = %crate::session::fingerprint(&finish.session_id), "finish without a response; detached sink call");
            let _ = self.finisher.sink.finish(&finish, &mut HeaderMap::new());
        }
    }
}

/// A verified request's admission, put in the request extensions by the layer (`Extension<Admission>` in axum).
///
/// Cheap to clone; clones share the finish state (the first finish counts).
#[derive(Clone)]
pub struct Admission {
    claims: Arc<Claims>,
    cell: Arc<FinishCell>,
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("session_id", &self.session_id())
            .field("event", &self.event())
            .field("expires_at", &self.expires_at())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl Admission {
    /// An admission outside the layer (for tests of handlers, or other integrations): finishing denies the session
    /// on `verifier` and, as no response will carry it, calls `sink` with a detached header map when the last
    /// clone is dropped.
    #[must_use]
    pub fn new(
        claims: impl Into<Arc<Claims>>,
        verifier: Verifier,
        sink: Arc<dyn FinishSink>,
    ) -> Self {
        Self::bound(claims.into(), Arc::new(Finisher { verifier, sink })).0
    }

    pub(crate) fn bound(claims: Arc<Claims>, finisher: Arc<Finisher>) -> (Self, Arc<FinishCell>) {
        let cell = Arc::new(FinishCell {
            finisher,
            state: Mutex::new(CellState::Open),
        });
        (
            Admission {
                claims,
                cell: Arc::clone(&cell),
            },
            cell,
        )
    }

    /// The session id (the token's `sub`, equal to the request's session).
    #[must_use]
    pub fn session_id(&self) -> &str {
        &self.claims.sub
    }

    /// The on-sale id (the token's `aud`).
    #[must_use]
    pub fn event(&self) -> &str {
        &self.claims.aud
    }

    /// All the token's claims (including `max_qty` and application claims).
    #[must_use]
    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// The purchase limit, if the room set one.
    #[must_use]
    pub fn max_qty(&self) -> Option<u32> {
        self.claims.max_qty
    }

    /// When the token expires, in seconds since the Unix epoch (`exp`).
    #[must_use]
    pub fn expires_at(&self) -> u64 {
        self.claims.exp
    }

    /// Ends the session without a purchase (0 seats). See [`finish_with_seats`](Self::finish_with_seats).
    pub fn finish(&self) -> bool {
        self.finish_with_seats(0)
    }

    /// Ends the session: its order bought `seats` seats. The session's tokens are refused from now on and the
    /// finish goes to the sink (see the module docs). Returns `true` when this call finished the session,
    /// `false` when it was already finished (the first finish counts).
    pub fn finish_with_seats(&self, seats: u32) -> bool {
        self.cell.finish(&self.claims, seats)
    }

    /// Whether the session was finished through this admission.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.cell.is_finished()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::keys::SigningKey;
    use std::sync::Mutex as StdMutex;
    use std::time::Duration;

    #[derive(Debug, Default)]
    struct Recorder(StdMutex<Vec<Finish>>);
    impl FinishSink for Recorder {
        fn finish(&self, finish: &Finish, headers: &mut HeaderMap) -> Option<FinishFuture> {
            self.0.lock().unwrap().push(finish.clone());
            headers.insert("x-recorded", HeaderValue::from_static("1"));
            None
        }
    }

    fn setup() -> (Verifier, Arc<Claims>) {
        let key = SigningKey::generate_ed25519("k").unwrap();
        let verifier = Verifier::builder()
            .keys(&key)
            .issuer("room")
            .audience("sale")
            .clock(Arc::new(ManualClock::new(5_000_000)))
            .build()
            .unwrap();
        let claims = Claims::new(
            "room",
            "sale",
            "session-0123456789",
            5_000,
            Duration::from_secs(60),
        )
        .with_max_qty(4);
        (verifier, Arc::new(claims))
    }

    #[test]
    fn finish_header_round_trip() {
        for seats in [0, 1, 4, u32::MAX] {
            assert_eq!(parse_finish_command(&finish_command(seats)), Some(seats));
        }
        let p = |s: &'static str| parse_finish_command(&HeaderValue::from_static(s));
        assert_eq!(finish_command(3), "finish; seats=3");
        assert_eq!(p("finish"), Some(0));
        assert_eq!(p("FINISH ;  Seats = 2 ; v=1"), Some(2));
        assert_eq!(p("finish; other=x"), Some(0));
        assert_eq!(p("finished; seats=2"), None);
        assert_eq!(p("finish; seats=-1"), None);
        assert_eq!(p("finish; seats=+1"), None);
        assert_eq!(p("finish; seats="), None);
        assert_eq!(p("finish; seats=4294967296"), None);
        assert_eq!(p("finish; seats=1; seats=2"), None);
        assert_eq!(p("finish; junk"), None);
        assert_eq!(p(""), None);
        assert_eq!(
            parse_finish_command(&HeaderValue::from_bytes(b"finish; seats=\xff").unwrap()),
            None
        );
        let long = format!("finish; seats=1; pad={}", "x".repeat(200));
        assert_eq!(
            parse_finish_command(&HeaderValue::try_from(long).unwrap()),
            None
        );
    }

    #[test]
    fn finish_denies_at_once_and_reaches_the_response() {
        let (verifier, claims) = setup();
        let sink = Arc::new(Recorder::default());
        let finisher = Arc::new(Finisher {
            verifier: verifier.clone(),
            sink: sink.clone(),
        });
        let (admission, cell) = Admission::bound(claims, finisher);
        assert_eq!(
            (
                admission.session_id(),
                admission.event(),
                admission.max_qty()
            ),
            ("session-0123456789", "sale", Some(4))
        );
        assert_eq!(admission.expires_at(), 5_060);
        assert!(!admission.is_finished());
        assert!(admission.clone().finish_with_seats(3));
        assert!(!admission.finish(), "the first finish counts");
        assert!(admission.is_finished());
        assert!(verifier.is_denied("session-0123456789"));
        assert!(
            sink.0.lock().unwrap().is_empty(),
            "delivered with the response, not before"
        );
        let mut headers = HeaderMap::new();
        assert!(cell.on_response(&mut headers).is_none());
        assert_eq!(headers["x-recorded"], "1");
        let got = sink.0.lock().unwrap().clone();
        assert_eq!(
            got,
            vec![Finish {
                session_id: "session-0123456789".into(),
                event: "sale".into(),
                seats: 3,
                at_ms: 5_000_000
            }]
        );
        drop((admission, cell));
        assert_eq!(
            sink.0.lock().unwrap().len(),
            1,
            "no second delivery on drop"
        );
        assert!(
            format!(
                "{:?}",
                Admission::new(Claims::clone(&got_claims()), verifier, sink)
            )
            .contains("finished")
        );
    }

    fn got_claims() -> Arc<Claims> {
        setup().1
    }

    #[test]
    fn late_or_orphan_finishes_still_reach_the_sink() {
        let (verifier, claims) = setup();
        let sink = Arc::new(Recorder::default());
        // Late: the response already left.
        let finisher = Arc::new(Finisher {
            verifier: verifier.clone(),
            sink: sink.clone(),
        });
        let (admission, cell) = Admission::bound(Arc::clone(&claims), Arc::clone(&finisher));
        let mut headers = HeaderMap::new();
        assert!(cell.on_response(&mut headers).is_none());
        assert!(headers.is_empty());
        assert!(admission.finish_with_seats(1));
        assert_eq!(sink.0.lock().unwrap().len(), 1);
        // Orphan: finished, but no response ever passes.
        let (admission, cell) = Admission::bound(claims, finisher);
        admission.finish();
        drop(cell);
        assert_eq!(sink.0.lock().unwrap().len(), 1);
        drop(admission);
        assert_eq!(sink.0.lock().unwrap().len(), 2);
    }

    #[test]
    fn header_sink_writes_the_command() {
        let mut headers = HeaderMap::new();
        let f = Finish {
            session_id: "s".into(),
            event: "e".into(),
            seats: 2,
            at_ms: 0,
        };
        assert!(HeaderSink.finish(&f, &mut headers).is_none());
        assert_eq!(parse_finish_command(&headers[FINISH_HEADER]), Some(2));
    }
}
