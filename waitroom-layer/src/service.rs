//! [`WaitingRoomService`]: decides per request whether the room answers, holds, or passes it on.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::Service;

use crate::body::RoomBody;
use crate::future::{After, ResponseFuture};
use crate::gate;
use crate::layer::Shared;
use crate::paths::Route;

/// The service made by [`WaitingRoomLayer`](crate::WaitingRoomLayer). Generic over request bodies; its
/// responses carry a [`RoomBody`]: the inner body untouched, or a page the room wrote.
///
/// Refusals are responses (a holding page, a JSON status), never errors: `Error` is the inner service's.
pub struct WaitingRoomService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: Clone> Clone for WaitingRoomService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S> std::fmt::Debug for WaitingRoomService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoomService")
            .field("room", &self.shared.room)
            .finish_non_exhaustive()
    }
}

impl<S> WaitingRoomService<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for WaitingRoomService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<RoomBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // The clone stays; the service that was polled ready goes with this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        let (parts, body) = req.into_parts();
        if let Some(bypass) = &shared.bypass
            && bypass(&parts)
        {
            let fut = inner.call(Request::from_parts(parts, body));
            return ResponseFuture::call(shared, fut, After::Untouched);
        }
        match shared.paths.route(parts.uri.path()) {
            Route::Unprotected => {
                let fut = inner.call(Request::from_parts(parts, body));
                ResponseFuture::call(shared, fut, After::Strip)
            }
            Route::Endpoint(endpoint) => {
                let jar = shared.room.cookies().read(&parts.headers);
                let fut = Box::pin(gate::endpoint(
                    shared.clone(),
                    endpoint,
                    parts,
                    jar.session,
                ));
                let fut = Box::pin(async move { gate::Decision::Reply(fut.await) });
                ResponseFuture::check(shared, fut, inner, body)
            }
            Route::Protected => {
                let room = &shared.room;
                let jar = room.cookies().read(&parts.headers);
                if let Some(session) = &jar.session
                    && let Some(claims) = room.tokens().check(&jar.tokens, &session.id)
                {
                    room.touch_active(&session.id);
                    let session = session.id.clone();
                    if room.tokens().renewal_due(&claims) {
                        let fut = Box::pin(gate::renew(shared.clone(), parts, session));
                        return ResponseFuture::check(shared, fut, inner, body);
                    }
                    let fut = inner.call(Request::from_parts(parts, body));
                    let after = After::Track {
                        session,
                        cookies: Vec::new(),
                    };
                    return ResponseFuture::call(shared, fut, after);
                }
                let fut = Box::pin(gate::hold(shared.clone(), parts, jar.session));
                ResponseFuture::check(shared, fut, inner, body)
            }
        }
    }
}
