//! [`VerifyService`]: the middleware made by [`VerifyLayer`](crate::VerifyLayer).

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tower::Service;

use crate::admission::Admission;
use crate::future::ResponseFuture;
use crate::layer::Shared;
use crate::response::refusal_response;
use crate::session::{credentials, fingerprint, session_from_headers};
use crate::verified::Verified;

/// Checks each request's token and session, then either calls the inner service with an
/// [`Admission`] in the request extensions, or answers with a refusal response.
///
/// - Generic over request bodies; the inner service's response body `B` must be `From<Bytes>` (refusals are
///   built in it; `axum::body::Body` qualifies).
/// - `Error = S::Error`: a refusal is a response, never an error.
/// - `poll_ready` only forwards to the inner service; the decision is made in `call`, which is synchronous
///   (a cached check is a cache lookup; a full check is one signature verification, tens of microseconds).
/// - A [`Verified`] marker in the request extensions (put there by a room layer in front that checked the
///   request's token for its session with the same verifier) stands in for reading and looking up the
///   credentials; the time checks and the deny list still run. See [`verified`](crate::verified).
/// - A request with a token but no session is refused as [`Refusal::NoSession`](crate::Refusal::NoSession) before
///   any cryptography.
#[derive(Clone)]
pub struct VerifyService<S> {
    inner: S,
    pub(crate) shared: Arc<Shared>,
}

impl<S: fmt::Debug> fmt::Debug for VerifyService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyService")
            .field("inner", &self.inner)
            .field("join_url", &self.shared.join_url)
            .finish_non_exhaustive()
    }
}

impl<S> VerifyService<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        VerifyService { inner, shared }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for VerifyService<S>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    B: From<Bytes>,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        if let Some(check) = &shared.origin_check
            && !check.allows(req.method(), req.uri(), req.headers())
        {
            return ResponseFuture::reply(crate::origin::cross_origin_response());
        }
        let verifier = &shared.finisher.verifier;
        // A token the room layer in front already checked for this request's session with this verifier (see
        // `crate::verified`): it stands for the request's credentials. The marker is taken out either way, so the
        // handler never sees it.
        let checked = req
            .extensions_mut()
            .remove::<Verified>()
            .and_then(|v| verifier.check_vouched(v))
            .unwrap_or_else(|| {
                credentials(req.headers(), &shared.cookie_names)
                    .and_then(|c| verifier.verify_for_session_shared(c.token, c.session_id))
            });
        match checked {
            Ok(claims) => {
                let (admission, cell) = Admission::bound(claims, Arc::clone(&shared.finisher));
                req.extensions_mut().insert(admission);
                // The service that was driven to readiness, called now (no clone: the call is not deferred).
                ResponseFuture::call(self.inner.call(req), cell)
            }
            Err(refusal) => {
                // A `DEBUG` span with the on-sale id(s) this verifier expects and the fingerprint of the request's
                // session when it names one (never the id or the token); nothing is computed when it is disabled.
                let span = tracing::debug_span!(
                    "waitroom.refusal",
                    audience = %verifier.audiences().join(","),
                    session = tracing::field::Empty,
                    reason = refusal.code(),
                );
                if !span.is_disabled()
                    && let Ok(id) = session_from_headers(req.headers(), &shared.cookie_names)
                {
                    span.record("session", tracing::field::display(fingerprint(id)));
                }
                span.in_scope(|| {
                    tracing::debug!(path = req.uri().path(), "waitroom: request refused");
                });
                ResponseFuture::reply(refusal_response(
                    refusal,
                    req.headers(),
                    req.uri(),
                    &shared.join_url,
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use axum::body::Body;
    use axum::routing::{get, post};
    use axum::{Extension, Router};
    use bytes::Bytes;
    use http::header::{
        ACCEPT, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, COOKIE, LOCATION, WWW_AUTHENTICATE,
    };
    use http::{HeaderMap, StatusCode};
    use http_body_util::Full;
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    use crate::admission::{FINISH_HEADER, Finish, FinishFuture, FinishSink, parse_finish_command};
    use crate::{Admission, Claims, ManualClock, SigningKey, Verified, Verifier, VerifyLayer};

    const START_MS: u64 = 1_800_000_000_000;
    const ALICE: &str = "alice-session-0123456789";
    const BOB: &str = "bob-session-0123456789";

    struct App {
        key: SigningKey,
        clock: ManualClock,
        verifier: Verifier,
        layer: VerifyLayer,
    }

    impl App {
        fn new() -> Self {
            let key = SigningKey::generate_ed25519("2025-a").unwrap();
            let clock = ManualClock::new(START_MS);
            let verifier = Verifier::builder()
                .keys(&key)
                .issuer("room")
                .audience("sale")
                .clock(Arc::new(clock.clone()))
                .build()
                .unwrap();
            App {
                key,
                clock,
                verifier: verifier.clone(),
                layer: VerifyLayer::new(verifier).join_url("/line/join"),
            }
        }

        fn token(&self, sub: &str) -> String {
            let claims = Claims::new(
                "room",
                "sale",
                sub,
                START_MS / 1000,
                Duration::from_secs(600),
            )
            .with_max_qty(4);
            self.key.sign(&claims).unwrap()
        }

        fn router(&self) -> Router {
            async fn show(Extension(a): Extension<Admission>) -> String {
                format!(
                    "{} {} {:?} {}",
                    a.session_id(),
                    a.event(),
                    a.max_qty(),
                    a.expires_at()
                )
            }
            async fn buy(Extension(a): Extension<Admission>) -> &'static str {
                a.finish_with_seats(3);
                "bought"
            }
            Router::new()
                .route("/show", get(show))
                .route("/buy", post(buy))
                .layer(self.layer.clone())
        }
    }

    fn cookie_request(method: &str, uri: &str, session: &str, token: &str) -> Request<Body> {
        Request::builder()
            .method(method)
            .uri(uri)
            .header(
                COOKIE,
                format!("waitroom_session={session}.17.mac; waitroom_token={token}"),
            )
            .body(Body::empty())
            .unwrap()
    }

    async fn body_text(res: http::Response<Body>) -> String {
        String::from_utf8(
            axum::body::to_bytes(res.into_body(), 64 * 1024)
                .await
                .unwrap()
                .to_vec(),
        )
        .unwrap()
    }

    async fn problem(res: http::Response<Body>) -> serde_json::Value {
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(res.headers()[CONTENT_TYPE], "application/problem+json");
        assert_eq!(res.headers()[CACHE_CONTROL], "no-store");
        let body: serde_json::Value = serde_json::from_str(&body_text(res).await).unwrap();
        assert_eq!(body["status"], 401);
        body
    }

    #[tokio::test]
    async fn valid_token_passes_and_handler_sees_the_admission() {
        let app = App::new();
        let res = app
            .router()
            .oneshot(cookie_request("GET", "/show", ALICE, &app.token(ALICE)))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.headers().get(FINISH_HEADER).is_none());
        let exp = START_MS / 1000 + 600;
        assert_eq!(body_text(res).await, format!("{ALICE} sale Some(4) {exp}"));
    }

    #[tokio::test]
    async fn bearer_with_session_header_passes() {
        let app = App::new();
        let req = Request::get("/show")
            .header(AUTHORIZATION, format!("Bearer {}", app.token(BOB)))
            .header("x-waitroom-session", BOB)
            .body(Body::empty())
            .unwrap();
        let res = app.router().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn another_sessions_cookie_is_refused() {
        let app = App::new();
        let stolen = app.token(ALICE);
        let res = app
            .router()
            .oneshot(cookie_request("GET", "/show", BOB, &stolen))
            .await
            .unwrap();
        assert_eq!(problem(res).await["reason"], "session_mismatch");
        // Same for a browser, as a redirect.
        let mut req = cookie_request("GET", "/show?x=1", BOB, &stolen);
        req.headers_mut()
            .insert(ACCEPT, "text/html,*/*;q=0.8".parse().unwrap());
        let res = app.router().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            res.headers()[LOCATION],
            "/line/join?return_to=%2Fshow%3Fx%3D1"
        );
    }

    #[tokio::test]
    async fn after_finish_the_same_token_is_refused() {
        let app = App::new();
        let router = app.router();
        let token = app.token(ALICE);
        let res = router
            .clone()
            .oneshot(cookie_request("GET", "/show", ALICE, &token))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "verified once, so now cached");
        let res = router
            .clone()
            .oneshot(cookie_request("POST", "/buy", ALICE, &token))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(parse_finish_command(&res.headers()[FINISH_HEADER]), Some(3));
        let res = router
            .clone()
            .oneshot(cookie_request("GET", "/show", ALICE, &token))
            .await
            .unwrap();
        let body = problem(res).await;
        assert_eq!(body["reason"], "finished");
        assert_eq!(body["join_url"], "/line/join");
        // Other sessions are unaffected.
        let res = router
            .oneshot(cookie_request("GET", "/show", BOB, &app.token(BOB)))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn browser_and_api_refusals_have_the_right_status_and_headers() {
        let app = App::new();
        let router = app.router();
        // API client, no token at all.
        let res = router
            .clone()
            .oneshot(Request::get("/show").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.headers()[WWW_AUTHENTICATE], "Bearer");
        assert_eq!(problem(res).await["reason"], "missing_token");
        // API client, token but no session.
        let req = Request::get("/show")
            .header(AUTHORIZATION, format!("Bearer {}", app.token(ALICE)))
            .body(Body::empty())
            .unwrap();
        let res = router.clone().oneshot(req).await.unwrap();
        assert_eq!(
            res.headers()[WWW_AUTHENTICATE],
            "Bearer error=\"invalid_token\""
        );
        assert_eq!(problem(res).await["reason"], "missing_session");
        // API client, expired token (the layer reads the verifier's clock).
        app.clock.advance(Duration::from_secs(3600));
        let res = router
            .clone()
            .oneshot(cookie_request("GET", "/show", ALICE, &app.token(ALICE)))
            .await
            .unwrap();
        let body = problem(res).await;
        assert_eq!(
            (body["reason"].as_str(), body["title"].as_str()),
            (Some("expired"), Some("Admission token expired"))
        );
        // Browser: 303 to the join URL, whatever the reason, with no body and no caching.
        let req = Request::get("/show?seat=12&row=a%20b")
            .header(ACCEPT, "text/html")
            .header(COOKIE, "waitroom_token=garbage")
            .body(Body::empty())
            .unwrap();
        let res = router.oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            res.headers()[LOCATION],
            "/line/join?return_to=%2Fshow%3Fseat%3D12%26row%3Da%2520b"
        );
        assert_eq!(res.headers()[CACHE_CONTROL], "no-store");
        assert!(res.headers().get(WWW_AUTHENTICATE).is_none());
        assert!(body_text(res).await.is_empty());
    }

    #[derive(Debug, Default)]
    struct SlowSink {
        seen: Mutex<Vec<Finish>>,
        completed: Arc<AtomicBool>,
    }

    impl FinishSink for SlowSink {
        fn finish(&self, finish: &Finish, headers: &mut HeaderMap) -> Option<FinishFuture> {
            self.seen.lock().unwrap().push(finish.clone());
            headers.insert("x-sink", "slow".parse().unwrap());
            let completed = Arc::clone(&self.completed);
            Some(Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                completed.store(true, Ordering::SeqCst);
            }))
        }
    }

    #[tokio::test]
    async fn generic_bodies_and_async_sink_complete_before_the_response() {
        // Drive the service directly: a non-axum request body, a plain service_fn, ServiceBuilder.
        let app = App::new();
        let sink = Arc::new(SlowSink::default());
        let completed = Arc::clone(&sink.completed);
        let layer = app.layer.clone().shared_finish_sink(sink.clone());
        let mut svc = ServiceBuilder::new().layer(layer).service(service_fn(
            |req: Request<Full<Bytes>>| async move {
                let admission = req
                    .extensions()
                    .get::<Admission>()
                    .expect("admission")
                    .clone();
                admission.finish_with_seats(2);
                Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok"))))
            },
        ));
        let req = Request::post("/buy")
            .header(
                COOKIE,
                format!(
                    "waitroom_session={ALICE}; waitroom_token={}",
                    app.token(ALICE)
                ),
            )
            .body(Full::new(Bytes::from_static(b"{}")))
            .unwrap();
        let res = svc.ready().await.unwrap().call(req).await.unwrap();
        assert!(
            completed.load(Ordering::SeqCst),
            "the sink's future ran before the response was returned"
        );
        assert_eq!(res.headers()["x-sink"], "slow");
        assert!(
            res.headers().get(FINISH_HEADER).is_none(),
            "a custom sink replaces the header sink"
        );
        let seen = sink.seen.lock().unwrap().clone();
        assert_eq!((seen.len(), seen[0].seats, seen[0].at_ms), (1, 2, START_MS));
        // The refusal body is built in the inner service's body type.
        let req = Request::get("/x").body(Full::new(Bytes::new())).unwrap();
        let res = svc.ready().await.unwrap().call(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }

    /// Sends `req` through the layer of `app` (with a handler that reports what it saw) after putting `marker`
    /// in its extensions, as a room layer in front would.
    async fn through_with_marker(
        app: &App,
        mut req: Request<Body>,
        marker: Option<Verified>,
    ) -> http::Response<Body> {
        if let Some(m) = marker {
            req.extensions_mut().insert(m);
        }
        let svc = ServiceBuilder::new()
            .layer(app.layer.clone())
            .service(service_fn(|req: Request<Body>| async move {
                assert!(
                    req.extensions().get::<Verified>().is_none(),
                    "the marker is taken out before the handler"
                );
                let a = req.extensions().get::<Admission>().expect("admission");
                Ok::<_, Infallible>(http::Response::new(Body::from(a.session_id().to_owned())))
            }));
        svc.oneshot(req).await.unwrap()
    }

    fn verifier_of(app: &App) -> &Verifier {
        &app.verifier
    }

    /// The marker a room layer in front would hand on after checking `token` for `session` with `verifier`.
    fn vouch(verifier: &Verifier, token: &str, session: &str) -> Verified {
        verifier.verify_for_session_vouched(token, session).unwrap()
    }

    /// `GET /show` with `session`'s cookie and `token`, carrying `marker`.
    async fn show_with_marker(
        app: &App,
        session: &str,
        token: &str,
        marker: Verified,
    ) -> http::Response<Body> {
        through_with_marker(
            app,
            cookie_request("GET", "/show", session, token),
            Some(marker),
        )
        .await
    }

    #[tokio::test]
    async fn a_marker_from_the_same_verifier_is_accepted() {
        let app = App::new();
        let token = app.token(ALICE);
        let marker = vouch(verifier_of(&app), &token, ALICE);
        assert!(!format!("{marker:?}").contains(&token), "no token in Debug");
        let res = show_with_marker(&app, ALICE, &token, marker).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(body_text(res).await, ALICE);
    }

    #[tokio::test]
    async fn a_marker_for_another_audience_is_refused() {
        // The room in front verifies for audience "other" (with the same key); this layer accepts only "sale".
        let app = App::new();
        let room_verifier = Verifier::builder()
            .keys(&app.key)
            .issuer("room")
            .audience("other")
            .clock(Arc::new(app.clock.clone()))
            .build()
            .unwrap();
        let claims = Claims::new(
            "room",
            "other",
            ALICE,
            START_MS / 1000,
            Duration::from_secs(600),
        );
        let token = app.key.sign(&claims).unwrap();
        let marker = vouch(&room_verifier, &token, ALICE);
        let res = show_with_marker(&app, ALICE, &token, marker).await;
        assert_eq!(problem(res).await["reason"], "wrong_audience");
    }

    #[tokio::test]
    async fn a_marker_for_a_finished_session_is_refused() {
        let app = App::new();
        let token = app.token(ALICE);
        let marker = vouch(verifier_of(&app), &token, ALICE);
        verifier_of(&app).deny_session(ALICE);
        let res = show_with_marker(&app, ALICE, &token, marker).await;
        assert_eq!(problem(res).await["reason"], "finished");
        // And an expired one, by the verifier's clock.
        let token = app.token(BOB);
        let marker = vouch(verifier_of(&app), &token, BOB);
        app.clock.advance(Duration::from_secs(3600));
        let res = show_with_marker(&app, BOB, &token, marker).await;
        assert_eq!(problem(res).await["reason"], "expired");
    }

    #[tokio::test]
    async fn a_marker_stands_for_the_request_s_credentials() {
        // The room in front read the session (HMAC-checked) and the token: the layer does not read them again.
        let app = App::new();
        let token = app.token(ALICE);
        let marker = vouch(verifier_of(&app), &token, ALICE);
        let req = Request::get("/show").body(Body::empty()).unwrap();
        let res = through_with_marker(&app, req, Some(marker)).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(body_text(res).await, ALICE);
    }

    #[tokio::test]
    async fn with_a_marker_the_layer_agrees_with_the_room() {
        let app = App::new();
        let good = app.token(ALICE);
        // The same claims signed by another key with the same kid: a forgery, sent as `Authorization` beside the
        // good token cookie. The room found the good token among the request's candidates and vouched for it.
        let forger = SigningKey::generate_ed25519("2025-a").unwrap();
        let forged = forger
            .sign(&verifier_of(&app).verify(&good).unwrap())
            .unwrap();
        let request = || {
            Request::get("/show")
                .header(AUTHORIZATION, format!("Bearer {forged}"))
                .header(
                    COOKIE,
                    format!("waitroom_session={ALICE}; waitroom_token={good}"),
                )
                .body(Body::empty())
                .unwrap()
        };
        let marker = vouch(verifier_of(&app), &good, ALICE);
        let res = through_with_marker(&app, request(), Some(marker)).await;
        assert_eq!(res.status(), StatusCode::OK);
        // On its own the layer reads `Authorization` first, and the forgery is refused.
        let res = through_with_marker(&app, request(), None).await;
        assert_eq!(problem(res).await["reason"], "bad_signature");
    }

    #[tokio::test]
    async fn a_marker_from_before_a_key_rotation_is_not_trusted() {
        let app = App::new();
        let token = app.token(ALICE);
        let marker = vouch(verifier_of(&app), &token, ALICE);
        let other = SigningKey::generate_ed25519("2025-b").unwrap();
        verifier_of(&app)
            .replace_keys(crate::KeySet::from(&other))
            .unwrap();
        let res = show_with_marker(&app, ALICE, &token, marker).await;
        assert_eq!(problem(res).await["reason"], "unknown_kid");
    }

    #[test]
    fn check_vouched_is_used_only_by_the_same_verifier() {
        let app = App::new();
        let token = app.token(ALICE);
        let v = verifier_of(&app);
        let marker = v.verify_for_session_vouched(&token, ALICE).unwrap();
        assert!(matches!(
            v.clone().check_vouched(marker.clone()),
            Some(Ok(c)) if c.sub == ALICE
        ));
        let twin = App::new();
        assert!(verifier_of(&twin).check_vouched(marker).is_none());
    }

    #[tokio::test]
    async fn readiness_and_errors_are_forwarded() {
        let app = App::new();
        #[derive(Clone)]
        struct NotReady;
        impl tower::Service<Request<Body>> for NotReady {
            type Response = http::Response<Body>;
            type Error = &'static str;
            type Future = std::future::Ready<Result<http::Response<Body>, &'static str>>;
            fn poll_ready(
                &mut self,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<(), Self::Error>> {
                std::task::Poll::Ready(Err("inner not ready"))
            }
            fn call(&mut self, _: Request<Body>) -> Self::Future {
                std::future::ready(Err("inner failed"))
            }
        }
        let mut svc = ServiceBuilder::new()
            .layer(app.layer.clone())
            .service(NotReady);
        assert_eq!(svc.ready().await.err(), Some("inner not ready"));
        let res = svc
            .call(cookie_request("GET", "/", ALICE, &app.token(ALICE)))
            .await;
        assert_eq!(res.err(), Some("inner failed"));
        // A refused request never reaches the inner service, so its error does not show.
        let res = svc
            .call(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
}
