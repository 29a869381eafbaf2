//! Hooks for abuse control: who may join, which account a request belongs to, which requests skip the room.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use http::request::Parts;

/// The future a [`JoinGuard`] returns: `Ok(())` lets the join go ahead; `Err(response)` refuses it with that
/// response (the room adds `Cache-Control: no-store` and `Waitroom-State: not_in_line`).
pub type GuardFuture = Pin<Box<dyn Future<Output = Result<(), Response<Bytes>>> + Send + 'static>>;

/// Decides whether a request may join the line: a bot check, a captcha verification, a per-client cap.
///
/// It runs only when a request would take a new place (not on polls, not for sessions already in line). Any
/// `Fn(&Parts) -> impl Future<Output = Result<(), Response<Bytes>>>` is a guard; copy what the future needs out
/// of `parts` before the `async move` block:
///
/// ```
/// use bytes::Bytes;
/// use http::{Response, StatusCode, request::Parts};
/// let guard = |parts: &Parts| {
///     let solved = parts.headers.contains_key("x-captcha-token");
///     async move {
///         if solved {
///             Ok(())
///         } else {
///             Err(Response::builder().status(StatusCode::FORBIDDEN).body(Bytes::from("solve the captcha")).unwrap())
///         }
///     }
/// };
/// # fn takes<G: waitroom_layer::JoinGuard>(_: G) {}
/// # takes(guard);
/// ```
pub trait JoinGuard: Send + Sync + 'static {
    /// Checks one join attempt.
    fn check(&self, parts: &Parts) -> GuardFuture;
}

impl<F, Fut> JoinGuard for F
where
    F: Fn(&Parts) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Response<Bytes>>> + Send + 'static,
{
    fn check(&self, parts: &Parts) -> GuardFuture {
        Box::pin(self(parts))
    }
}

/// The account a request belongs to, when the app knows it (an account holds one place whichever browser it uses).
pub(crate) type AccountKeyFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// Requests that never see the room (health checks, monitoring).
pub(crate) type BypassFn = Arc<dyn Fn(&Parts) -> bool + Send + Sync>;
