//! [`RoomEndpoints`]: the room's own endpoints as a stand-alone service, for `route_layer` set-ups.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use tower::Service;

use crate::http::admin;
use crate::http::body::RoomBody;
use crate::http::gate;
use crate::http::layer::Shared;
use crate::http::paths::Endpoint;

/// Answers `{base}/status`, `{base}/jwks.json`, `{base}/join` and `{base}/holding.js` (and the same without the
/// base when mounted with a prefix-stripping `nest_service`), plus the metrics path and `{base}/admin/...` when those
/// are on; anything else gets a 404 JSON problem. Made by
/// [`WaitingRoomLayer::endpoints`](crate::WaitingRoomLayer::endpoints); shares the layer's room.
#[derive(Clone)]
pub struct RoomEndpoints {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RoomEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomEndpoints")
            .field("base", &self.shared.paths.base())
            .finish()
    }
}

impl RoomEndpoints {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

impl<B> Service<Request<B>> for RoomEndpoints
where
    // The admin API reads its JSON body (bounded).
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<RoomBody<Empty<Bytes>>>;
    type Error = Infallible;
    /// Boxed: the endpoints are `async fn`s over the room.
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send + 'static>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        let (parts, body) = req.into_parts();
        let ep = shared.paths.endpoint_of(parts.uri.path());
        if let Endpoint::Admin(op) = ep {
            return Box::pin(async move {
                let reply = admin::handle(&shared, op, parts, body).await;
                Ok(reply.map(RoomBody::room))
            });
        }
        let (session, carrier) = match gate::endpoint_now(&shared, ep, &parts) {
            gate::Answer::Now(reply) => {
                return Box::pin(std::future::ready(Ok(reply.map(RoomBody::room))));
            }
            gate::Answer::Later(session, carrier) => (session, carrier),
        };
        Box::pin(async move {
            let reply = gate::endpoint(shared, ep, parts, session, carrier).await;
            Ok(reply.map(RoomBody::room))
        })
    }
}
