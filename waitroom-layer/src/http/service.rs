//! [`WaitingRoomService`]: decides per request whether the room answers, holds, or passes it on.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::Service;

use crate::http::admin;
use crate::http::body::RoomBody;
use crate::http::future::{After, ResponseFuture, Tracked};
use crate::http::gate;
use crate::http::layer::Shared;
use crate::http::paths::{Endpoint, Route};
use crate::http::respond;
use crate::room::cookie::Carrier;
use waitroom_verify::Verified;

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
    // The admin API reads its JSON body (bounded); every HTTP body type of axum and hyper qualifies.
    ReqBody: http_body::Body + Send + 'static,
    ReqBody::Data: Send,
    ReqBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<RoomBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // The inner service that was polled ready is called here when the request passes at once; it goes into the
        // response future (a clone staying here) only where the room decides first, and it is not touched when the
        // room answers by itself.
        let shared = self.shared.clone();
        let (parts, body) = req.into_parts();
        if let Some(bypass) = &shared.bypass
            && bypass(&parts)
        {
            let fut = self.inner.call(Request::from_parts(parts, body));
            return ResponseFuture::call(shared, fut, After::Untouched);
        }
        match shared.paths.route(parts.uri.path()) {
            Route::Unprotected => {
                let fut = self.inner.call(Request::from_parts(parts, body));
                ResponseFuture::call(shared, fut, After::Strip)
            }
            Route::Endpoint(Endpoint::Admin(op)) => {
                let s = shared.clone();
                let fut = Box::pin(async move {
                    gate::Decision::Reply(admin::handle(&s, op, parts, body).await)
                });
                ResponseFuture::reply_later(shared, fut)
            }
            Route::Endpoint(endpoint) => {
                let (session, carrier) = match gate::endpoint_now(&shared, endpoint, &parts) {
                    gate::Answer::Now(reply) => return ResponseFuture::reply(shared, reply),
                    gate::Answer::Later(session, carrier) => (session, carrier),
                };
                // One allocation for the whole check (the endpoint's future lives inside this one).
                let s = shared.clone();
                let fut = Box::pin(async move {
                    gate::Decision::Reply(
                        gate::endpoint(s, endpoint, parts, session, carrier).await,
                    )
                });
                ResponseFuture::check(shared, fut, take_ready(&mut self.inner), body)
            }
            Route::Protected => {
                if let Some(refusal) = shared.cross_origin(&parts) {
                    return ResponseFuture::reply(shared, refusal);
                }
                let room = &shared.room;
                let jar = room.cookies().read(&parts.headers);
                // The token first, with the session cookie as presented: a token that passed before with this very
                // cookie skips the cookie's HMAC (see `Tokens::check_with_cookie`). Anything else takes the full
                // path below, which reads the session first.
                if let Some(&cookie) = jar.sessions.as_slice().first()
                    && let Ok(verified) =
                        room.tokens()
                            .check_with_cookie(jar.tokens.as_slice(), cookie, |v| {
                                room.cookies().open(v).map(|s| s.id)
                            })
                {
                    return admit(
                        shared,
                        &mut self.inner,
                        parts,
                        body,
                        verified,
                        Carrier::Cookie,
                    );
                }
                // The session cookie, or without one the `X-Waitroom-Session` header (the cookie wins).
                let carrier = jar.carrier;
                let Ok(session) = room.cookies().session(&jar) else {
                    return ResponseFuture::reply(shared, respond::unreadable_session());
                };
                if let Some(session) = session {
                    match room.tokens().check(jar.tokens.as_slice(), session.id) {
                        Ok(verified) => {
                            return admit(shared, &mut self.inner, parts, body, verified, carrier);
                        }
                        Err(Some(refusal)) => room.note_refusal(refusal, session.id),
                        Err(None) => {}
                    }
                }
                if room.fails_open() {
                    // No valid token, the store is down and the room fails open (`StoreOutage::FailOpen`): through,
                    // with no store call and no token; a finish command is dropped.
                    let fut = self.inner.call(Request::from_parts(parts, body));
                    return ResponseFuture::call(shared, fut, After::Strip);
                }
                let session = session.map(|s| s.owned());
                let fut = Box::pin(gate::hold(shared.clone(), parts, session, carrier));
                ResponseFuture::check(shared, fut, take_ready(&mut self.inner), body)
            }
        }
    }
}

/// The inner service that was polled ready, for a response future that may call it later; a clone stays behind
/// (and is polled ready before the next call).
fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

/// A request with a valid token for its session: marked active, renewed when due, otherwise passed on with the
/// token's claims tracked (the finish command in the response) and the [`Verified`] marker in its extensions.
fn admit<S, ReqBody, ResBody>(
    shared: Arc<Shared>,
    inner: &mut S,
    mut parts: http::request::Parts,
    body: ReqBody,
    verified: Verified,
    carrier: Carrier,
) -> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ReqBody: Send + 'static,
{
    let room = &shared.room;
    // The token's subject is the session.
    let id = verified.claims().sub.as_str();
    room.touch_active(id);
    if room.tokens().renewal_due(&verified) {
        let fut = Box::pin(gate::renew(shared.clone(), parts, id.to_owned(), carrier));
        return ResponseFuture::check(shared, fut, take_ready(inner), body);
    }
    // Tracked by the claims (no copy of the id).
    let after = After::Track {
        session: Tracked::Token(verified.claims().clone()),
        headers: Vec::new(),
        carrier,
    };
    // A VerifyLayer further in that uses the room's verifier takes this instead of checking the token a second
    // time (see `waitroom_verify::verified`).
    parts.extensions.insert(verified);
    let fut = inner.call(Request::from_parts(parts, body));
    ResponseFuture::call(shared, fut, after)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use bytes::Bytes;
    use http::header::{ACCEPT, COOKIE, SET_COOKIE};
    use http::{HeaderValue, StatusCode};
    use http_body_util::{BodyExt, Full};
    use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
    use waitroom_verify::{Admission, FINISH_HEADER, ManualClock, Verified};

    use crate::{RoomBody, STATE_HEADER, WaitingRoom, WaitingRoomLayer};

    type Res = http::Response<RoomBody<Full<Bytes>>>;

    async fn handler(
        req: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<Full<Bytes>>, Infallible> {
        let mut res = http::Response::new(Full::new(Bytes::from(format!(
            "inner {}",
            req.uri().path()
        ))));
        if req.uri().path() == "/checkout/done" {
            res.headers_mut()
                .insert(FINISH_HEADER, HeaderValue::from_static("finish; seats=2"));
        }
        if req.uri().path() == "/public/finish" {
            res.headers_mut()
                .insert(FINISH_HEADER, HeaderValue::from_static("finish"));
        }
        Ok(res)
    }

    async fn room(clock: &ManualClock, capacity: u64) -> WaitingRoom {
        WaitingRoom::builder("ev")
            .capacity(capacity)
            .idle_timeout(Duration::from_secs(60))
            // These tests follow a session through the holding page; going straight in is tested in layer_http.
            .straight_in(false)
            .clock(std::sync::Arc::new(clock.clone()))
            .background(false)
            .secure_cookies(false)
            .build()
            .await
            .unwrap()
    }

    /// A browser's navigation (`Accept` names `text/html`: the room answers with pages).
    fn get(path: &str, cookies: &[String]) -> http::Request<Full<Bytes>> {
        let mut req = http::Request::get(path)
            .header(http::header::ACCEPT, "text/html,*/*;q=0.8")
            .body(Full::default())
            .unwrap();
        if !cookies.is_empty() {
            req.headers_mut()
                .insert(COOKIE, HeaderValue::try_from(cookies.join("; ")).unwrap());
        }
        req
    }

    /// The `name=value` pairs a response sets (a tiny cookie jar).
    fn absorb(jar: &mut Vec<String>, res: &Res) {
        for v in res.headers().get_all(SET_COOKIE) {
            let pair = v.to_str().unwrap().split(';').next().unwrap().to_owned();
            let name = pair.split('=').next().unwrap().to_owned();
            jar.retain(|c| !c.starts_with(&format!("{name}=")));
            if !v.to_str().unwrap().contains("Max-Age=0") {
                jar.push(pair);
            }
        }
    }

    async fn body(res: Res) -> String {
        String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn holds_then_admits_then_passes_then_finishes() {
        let clock = ManualClock::starting_now();
        let room = room(&clock, 1).await;
        let layer = WaitingRoomLayer::builder(room.clone())
            .protect_prefix("/checkout")
            .build()
            .unwrap();
        let mut svc = ServiceBuilder::new()
            .layer(layer)
            .service(service_fn(handler));
        let mut jar = Vec::new();

        // Unprotected: untouched (but a stray finish command is stripped).
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get("/public/finish", &[]))
            .await
            .unwrap();
        assert!(res.headers().get(FINISH_HEADER).is_none());
        assert_eq!(body(res).await, "inner /public/finish");

        // First visit: a session cookie and the holding page.
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get("/checkout", &jar))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()[STATE_HEADER], "waiting");
        assert_eq!(res.headers()["cache-control"], "no-store");
        absorb(&mut jar, &res);
        assert!(jar[0].starts_with("waitroom_session="));
        assert!(body(res).await.contains("You are next."));

        // Admitted at the next tick; the status poll claims and sets the token.
        room.tick_now().await.unwrap();
        let mut req = get("/waitroom/status?return_to=%2Fcheckout", &jar);
        req.headers_mut()
            .insert(ACCEPT, HeaderValue::from_static("application/json"));
        let res = svc.ready().await.unwrap().call(req).await.unwrap();
        assert_eq!(res.headers()[STATE_HEADER], "admitted");
        absorb(&mut jar, &res);
        let json: serde_json::Value = serde_json::from_str(&body(res).await).unwrap();
        assert_eq!(json["state"], "admitted");
        assert_eq!(json["next"], "/checkout");
        assert!(jar.iter().any(|c| c.starts_with("waitroom_token=")));

        // The token opens the protected routes.
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get("/checkout/x", &jar))
            .await
            .unwrap();
        assert_eq!(body(res).await, "inner /checkout/x");

        // Finish through the response: the header is consumed, the place freed, the token refused.
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get("/checkout/done", &jar))
            .await
            .unwrap();
        assert!(res.headers().get(FINISH_HEADER).is_none());
        assert_eq!(room.stats().active, 0);
        let before = jar.clone();
        absorb(&mut jar, &res);
        assert!(!jar.iter().any(|c| c.starts_with("waitroom_token=")));
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get("/checkout/x", &before))
            .await
            .unwrap();
        assert_ne!(body(res).await, "inner /checkout/x");
    }

    #[tokio::test]
    async fn an_admitted_request_passes_both_layers_with_the_room_s_check() {
        let clock = ManualClock::starting_now();
        let room = room(&clock, 1).await;
        let layer = WaitingRoomLayer::builder(room.clone())
            .protect_prefix("/checkout")
            .build()
            .unwrap();
        let verify = waitroom_verify::VerifyLayer::new(room.verifier().clone());
        let mut svc = ServiceBuilder::new()
            .layer(layer)
            .layer(verify)
            .service(service_fn(|req: http::Request<Full<Bytes>>| async move {
                assert!(
                    req.extensions().get::<Verified>().is_none(),
                    "the verify layer takes the marker out"
                );
                let who = req
                    .extensions()
                    .get::<Admission>()
                    .map_or("none", Admission::session_id)
                    .to_owned();
                Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from(who))))
            }));
        let mut jar = Vec::new();
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get("/checkout", &jar))
            .await
            .unwrap();
        absorb(&mut jar, &res);
        room.tick_now().await.unwrap();
        let mut req = get("/waitroom/status", &jar);
        req.headers_mut()
            .insert(ACCEPT, HeaderValue::from_static("application/json"));
        let res = svc.ready().await.unwrap().call(req).await.unwrap();
        absorb(&mut jar, &res);
        let session = jar[0]
            .strip_prefix("waitroom_session=")
            .and_then(|v| v.split('.').next())
            .unwrap()
            .to_owned();
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get("/checkout/x", &jar))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(body(res).await, session);
        // Finished on the verifier: the marker does not get it past the deny list (nor does the room).
        room.verifier().deny_session(&session);
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get("/checkout/x", &jar))
            .await
            .unwrap();
        assert_ne!(body(res).await, session);
    }

    #[tokio::test]
    async fn curl_s_accept_gets_json_from_the_room_as_from_the_verifier() {
        let clock = ManualClock::starting_now();
        let room = room(&clock, 1).await;
        let layer = WaitingRoomLayer::builder(room.clone())
            .protect_prefix("/checkout")
            .build()
            .unwrap();
        let mut svc = ServiceBuilder::new()
            .layer(layer)
            .service(service_fn(handler));
        let curl = |path: &str| {
            http::Request::get(path)
                .header(ACCEPT, "*/*")
                .body(Full::<Bytes>::default())
                .unwrap()
        };
        // The room: held in line, told so in JSON with when to ask again.
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(curl("/checkout"))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()["content-type"], "application/json");
        assert!(res.headers().contains_key("retry-after"));
        // The verifier, for the same request: 401 JSON, not a redirect to the join page.
        let mut verify = ServiceBuilder::new()
            .layer(waitroom_verify::VerifyLayer::new(room.verifier().clone()))
            .service(service_fn(handler));
        let res = verify
            .ready()
            .await
            .unwrap()
            .call(curl("/checkout"))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(res.headers()["content-type"], "application/problem+json");
    }

    #[tokio::test]
    async fn serves_jwks_and_refuses_unknown_endpoints() {
        let clock = ManualClock::starting_now();
        let room = room(&clock, 1).await;
        let svc = ServiceBuilder::new()
            .layer(WaitingRoomLayer::new(room))
            .service(service_fn(handler));
        let res = svc
            .clone()
            .oneshot(get("/waitroom/jwks.json", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let jwks: serde_json::Value = serde_json::from_str(&body(res).await).unwrap();
        assert_eq!(jwks["keys"][0]["kty"], "OKP");
        let res = svc
            .clone()
            .oneshot(get("/waitroom/nope", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        let mut req = get("/waitroom/status", &[]);
        *req.method_mut() = http::Method::DELETE;
        let res = svc.oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[tokio::test]
    async fn an_account_holds_one_place_across_browsers() {
        let clock = ManualClock::starting_now();
        let room = room(&clock, 1).await;
        let layer = WaitingRoomLayer::builder(room.clone())
            .account_key(|parts| {
                parts
                    .headers
                    .get("x-account")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            })
            .build()
            .unwrap();
        let svc = ServiceBuilder::new()
            .layer(layer)
            .service(service_fn(handler));
        let mut first = Vec::new();
        let mut req = get("/seats", &first);
        req.headers_mut()
            .insert("x-account", HeaderValue::from_static("alice"));
        let res = svc.clone().oneshot(req).await.unwrap();
        absorb(&mut first, &res);
        let mut second = Vec::new();
        let mut req = get("/seats", &second);
        req.headers_mut()
            .insert("x-account", HeaderValue::from_static("alice"));
        let res = svc.clone().oneshot(req).await.unwrap();
        absorb(&mut second, &res);
        // The second browser took over the account's place: same session, same number.
        assert_eq!(first, second);
        room.refresh().await.unwrap();
        assert_eq!(room.stats().waiting, 1);
    }
}
