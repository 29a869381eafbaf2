//! Apps and API clients: the room layer and a verify layer over a real axum server, driven by an HTTP client with
//! **no cookie store**. The client names its session with `X-Waitroom-Session` and shows its pass as
//! `Authorization: Bearer`; the room hands both over in its answers (`session` and `token` in the JSON, the
//! `Waitroom-Session` and `Waitroom-Token` response headers), never in cookies.
//!
//! Every test builds a room with a manual clock and no background task, and moves the door by hand with
//! `room.tick_now()`, so nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Extension;
use axum::routing::{get, post};
use http::{Method, StatusCode};
use serde_json::Value;
use tower_http::cors::{AllowOrigin, CorsLayer};
use waitroom_layer::{
    ManualClock, SESSION_HEADER, SESSION_VALUE_HEADER, STATE_HEADER, TOKEN_HEADER, WaitingRoom,
    WaitingRoomLayer,
};
use waitroom_testkit::http::{browser, serve};
use waitroom_verify::origin::OriginCheck;
use waitroom_verify::{Admission, KeySet, Verifier, VerifyLayer};

const IDLE: Duration = Duration::from_secs(60);

struct Site {
    url: String,
    room: WaitingRoom,
    clock: ManualClock,
}

impl Site {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

/// The storefront: `/checkout/...` behind the room; `/checkout/mine` answers with the session the verify layer
/// saw; `/checkout/buy` is the order service (its own verifier from the room's JWKS) and finishes the session.
async fn site(capacity: u64, cors: bool) -> Site {
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("tour-2026")
        .capacity(capacity)
        .idle_timeout(IDLE)
        .poll_interval(Duration::from_secs(5))
        // These tests follow an app through the line; going straight in has its own tests.
        .straight_in(false)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let jwks = String::from_utf8(room.jwks_json().to_vec()).unwrap();
    let order_verifier = Verifier::builder()
        .keys(KeySet::from_jwks_json(&jwks).unwrap())
        .issuer("waitroom")
        .audience("tour-2026")
        .leeway(Duration::ZERO)
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    let mut layer = WaitingRoomLayer::builder(room.clone()).protect_prefix("/checkout");
    if cors {
        // A browser app on another origin: the room's check of unsafe cross-origin requests (CSRF) must list it,
        // as the CORS layer does.
        layer = layer.origin_check(OriginCheck::same_origin().allow_origin("https://app.example"));
    }
    let layer = layer.build().unwrap();
    let mut app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        // What a request brought inward: its pass, its cookies, its session header.
        .route(
            "/checkout/echo",
            get(|h: http::HeaderMap| async move {
                let one = |n: &str| h.get(n).map(|v| v.to_str().unwrap().to_owned());
                axum::Json(serde_json::json!({
                    "authorization": one("authorization"),
                    "cookie": one("cookie"),
                    "session": one(SESSION_HEADER),
                }))
            }),
        )
        .route(
            "/checkout/mine",
            get(|Extension(a): Extension<Admission>| async move { a.session_id().to_owned() })
                .layer(VerifyLayer::new(room.verifier().clone())),
        )
        .route(
            "/checkout/buy",
            post(|Extension(a): Extension<Admission>| async move {
                a.finish_with_seats(2);
                format!("bought for {}", a.session_id())
            })
            .layer(VerifyLayer::new(order_verifier)),
        )
        .layer(layer);
    if cors {
        // A browser app on another origin: it may send the session header and read the room's headers.
        app = app.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::exact(http::HeaderValue::from_static(
                    "https://app.example",
                )))
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([
                    http::header::AUTHORIZATION,
                    http::header::ACCEPT,
                    http::HeaderName::from_static(SESSION_HEADER),
                ])
                .expose_headers([SESSION_VALUE_HEADER, TOKEN_HEADER, STATE_HEADER]),
        );
    }
    Site {
        url: serve(app).await,
        room,
        clock,
    }
}

/// A client with no cookie store (reqwest keeps none unless asked).
fn app_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// What an app keeps: its session value and, once admitted, its token.
#[derive(Clone, Default)]
struct Creds {
    session: Option<String>,
    token: Option<String>,
}

impl Creds {
    fn sign(&self, mut req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        req = req.header("accept", "application/json");
        if let Some(s) = &self.session {
            req = req.header(SESSION_HEADER, s);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        req
    }

    /// Takes what a response hands over (headers), as an app does after every response.
    fn absorb(&mut self, res: &reqwest::Response) {
        if let Some(v) = res.headers().get(SESSION_VALUE_HEADER.as_str()) {
            self.session = Some(v.to_str().unwrap().to_owned());
        }
        if let Some(v) = res.headers().get(TOKEN_HEADER.as_str()) {
            self.token = Some(v.to_str().unwrap().to_owned());
        }
    }
}

fn header(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

fn session_id(sealed: &str) -> &str {
    sealed.split('.').next().unwrap()
}

/// Joins with `POST {base}/join`, then is admitted on the next tick and takes its token from the status.
async fn join_and_admit(c: &reqwest::Client, s: &Site) -> Creds {
    let mut creds = Creds::default();
    let res = creds
        .sign(c.post(s.at("/waitroom/join")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    creds.absorb(&res);
    let json: Value = res.json().await.unwrap();
    assert_eq!(json["session"].as_str(), creds.session.as_deref());
    assert_eq!(json["state"], "waiting");
    assert!(
        json["next"].is_null(),
        "where to go next only once admitted: {json}"
    );
    s.room.tick_now().await.unwrap();
    let res = creds
        .sign(c.get(s.at("/waitroom/status?return_to=%2Fcheckout")))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&res, STATE_HEADER.as_str()).unwrap(), "admitted");
    assert!(
        res.headers().get("set-cookie").is_none(),
        "a header client gets no cookies"
    );
    let from_header = header(&res, TOKEN_HEADER.as_str()).expect("the token in a header");
    creds.absorb(&res);
    let json: Value = res.json().await.unwrap();
    assert_eq!(json["token"].as_str(), Some(from_header.as_str()));
    assert_eq!(json["next"], "/checkout");
    creds
}

/// Whether a request reached the storefront's handler (the room answers with `Waitroom-State`).
async fn passes(c: &reqwest::Client, s: &Site, creds: &Creds, path: &str) -> bool {
    let res = creds.sign(c.get(s.at(path))).send().await.unwrap();
    !res.headers().contains_key(STATE_HEADER.as_str()) && res.status() == 200
}

#[tokio::test]
async fn an_app_goes_from_the_line_to_a_finished_order_with_headers_only() {
    let s = site(1, false).await;
    let c = app_client();
    let mut app = Creds::default();

    // First protected request: held (429 JSON), told its session in the body and in a header.
    let res = app.sign(c.get(s.at("/checkout"))).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&res, STATE_HEADER.as_str()).unwrap(), "waiting");
    app.absorb(&res);
    let json: Value = res.json().await.unwrap();
    let session = json["session"]
        .as_str()
        .expect("the session value")
        .to_owned();
    assert_eq!(app.session.as_deref(), Some(session.as_str()));
    assert!(json.get("token").is_none(), "no token before admission");

    // A poll with the header: the same session (still in line: no new value, no token).
    let res = app
        .sign(c.get(s.at("/waitroom/status")))
        .send()
        .await
        .unwrap();
    let json: Value = res.json().await.unwrap();
    assert_eq!(json["state"], "waiting");
    assert_eq!(json["position"], 1);
    assert!(json.get("token").is_none());

    // Admitted at the next tick: the poll hands over the token.
    s.room.tick_now().await.unwrap();
    let res = app
        .sign(c.get(s.at("/waitroom/status")))
        .send()
        .await
        .unwrap();
    assert!(res.headers().get("set-cookie").is_none());
    app.absorb(&res);
    let json: Value = res.json().await.unwrap();
    assert_eq!(json["state"], "admitted");
    assert_eq!(json["token"].as_str(), app.token.as_deref());
    assert!(app.token.is_some());

    // The protected routes, through the room and a verify layer: the session the verify layer saw is ours.
    let res = app
        .sign(c.get(s.at("/checkout/mine")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), session_id(&session));

    // Renewal: past half the token's life, a protected request passes and brings a fresh token in a header.
    s.clock.advance(IDLE / 2 + Duration::from_secs(1));
    let res = app.sign(c.get(s.at("/checkout"))).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("set-cookie").is_none());
    let renewed = header(&res, TOKEN_HEADER.as_str()).expect("a renewed token");
    assert_ne!(Some(&renewed), app.token.as_ref());
    assert_eq!(res.headers()["cache-control"], "no-store");
    app.absorb(&res);
    assert!(passes(&c, &s, &app, "/checkout").await);

    // The order: the order service finishes the session; the app is told its token is done.
    let res = app
        .sign(c.post(s.at("/checkout/buy")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, STATE_HEADER.as_str()).unwrap(), "finished");
    assert!(res.headers().get("set-cookie").is_none());
    assert!(res.headers().get("waitroom-command").is_none());
    assert_eq!(
        res.text().await.unwrap(),
        format!("bought for {}", session_id(&session))
    );
    assert_eq!(s.room.stats().active, 0);

    // The finished token opens nothing: the app is back at the back under a new session.
    let res = app.sign(c.get(s.at("/checkout"))).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let json: Value = res.json().await.unwrap();
    let fresh = json["session"].as_str().expect("a new session value");
    assert_ne!(session_id(fresh), session_id(&session));
}

#[tokio::test]
async fn a_protected_request_with_room_to_spare_passes_and_hands_over_the_session() {
    let s = site(1, false).await;
    let c = app_client();
    // Head of an empty line: admitted on its next request once the door has moved.
    let mut app = Creds::default();
    let res = app.sign(c.get(s.at("/checkout"))).send().await.unwrap();
    app.absorb(&res);
    s.room.tick_now().await.unwrap();
    // The protected request itself lets it in: the token comes in the response header, and the request went on
    // with it (the verify layer further in saw the session).
    let res = app
        .sign(c.get(s.at("/checkout/mine")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("set-cookie").is_none());
    app.absorb(&res);
    assert!(app.token.is_some());
    assert_eq!(
        res.text().await.unwrap(),
        session_id(app.session.as_deref().unwrap())
    );
    assert!(passes(&c, &s, &app, "/checkout").await);
}

/// The request that lets an app in goes on inward as the app's next requests will: its new pass as
/// `Authorization: Bearer`, its session value in `X-Waitroom-Session`, and no cookie. A verify layer further in
/// that checks for itself (not on the room's own verifier) sees what it will see next time. (A newcomer's first
/// request that goes straight in: `layer_http`'s straight-in tests.)
#[tokio::test]
async fn the_request_that_lets_an_app_in_goes_on_with_its_pass_and_session_in_headers() {
    let s = site(1, false).await;
    let c = app_client();
    let mut app = Creds::default();
    let res = app.sign(c.get(s.at("/checkout"))).send().await.unwrap();
    app.absorb(&res);
    s.room.tick_now().await.unwrap();
    let res = app
        .sign(c.get(s.at("/checkout/echo")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    app.absorb(&res);
    let session = app.session.clone().expect("a session value");
    let seen: Value = res.json().await.unwrap();
    assert_eq!(
        seen["authorization"],
        format!("Bearer {}", app.token.as_deref().expect("a pass")),
        "{seen}"
    );
    assert_eq!(seen["session"], session.as_str(), "{seen}");
    assert!(seen["cookie"].is_null(), "{seen}");
}

#[tokio::test]
async fn the_room_refuses_what_an_app_cannot_prove() {
    let s = site(2, false).await;
    let c = app_client();
    let alice = join_and_admit(&c, &s).await;
    assert!(passes(&c, &s, &alice, "/checkout").await);
    // Bob waits (capacity 2, but the door moves only on a tick).
    let mut bob = Creds::default();
    let res = bob
        .sign(c.post(s.at("/waitroom/join")))
        .send()
        .await
        .unwrap();
    bob.absorb(&res);

    let refused = async |creds: &Creds, what: &str| {
        let res = creds.sign(c.get(s.at("/checkout"))).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{what}");
        assert!(header(&res, TOKEN_HEADER.as_str()).is_none(), "{what}");
        res.json::<Value>().await.unwrap()
    };

    // Another session's token.
    let stolen = Creds {
        session: bob.session.clone(),
        token: alice.token.clone(),
    };
    let json = refused(&stolen, "another session's token").await;
    assert!(json.get("session").is_none(), "Bob stays Bob");
    assert_eq!(json["state"], "waiting");

    // A forged session header: Alice's id under a made-up tag, and her bare id (unsigned) with her token.
    let sealed = alice.session.clone().unwrap();
    let (head, tag) = sealed.rsplit_once('.').unwrap();
    let flipped = if tag.starts_with('A') { "B" } else { "A" };
    for forged in [
        format!("{head}.{flipped}{}", &tag[1..]),
        session_id(&sealed).to_owned(),
    ] {
        let forged = Creds {
            session: Some(forged),
            token: alice.token.clone(),
        };
        let json = refused(&forged, "a forged session header").await;
        let new = json["session"].as_str().expect("a newcomer's session");
        assert_ne!(session_id(new), session_id(&sealed));
    }

    // A bearer without the session header.
    let bare = Creds {
        session: None,
        token: alice.token.clone(),
    };
    refused(&bare, "a bearer without a session").await;

    // Alice's own credentials still pass.
    assert!(passes(&c, &s, &alice, "/checkout").await);
    assert_eq!(s.room.stats().active, 1);
}

#[tokio::test]
async fn a_browser_is_told_nothing_it_could_leak_to_a_script() {
    let s = site(1, false).await;
    let b = browser();
    // Its first request is a navigation: the cookie and the page.
    let res = b.get(s.at("/checkout")).send().await.unwrap();
    assert!(res.headers().get(SESSION_VALUE_HEADER.as_str()).is_none());
    assert!(res.headers().get("set-cookie").is_some());
    s.room.tick_now().await.unwrap();
    // The page's poll: admitted with a token cookie; neither value in the body nor in a header.
    let res = b
        .get(s.at("/waitroom/status"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert!(
        res.headers()
            .get_all("set-cookie")
            .iter()
            .any(|c| c.to_str().unwrap().starts_with("waitroom_token="))
    );
    assert!(res.headers().get(TOKEN_HEADER.as_str()).is_none());
    assert!(res.headers().get(SESSION_VALUE_HEADER.as_str()).is_none());
    let json: Value = res.json().await.unwrap();
    assert_eq!(json["state"], "admitted");
    assert!(json.get("token").is_none() && json.get("session").is_none());
    // Past half the token's life: the renewal is a cookie, not a header.
    s.clock.advance(IDLE / 2 + Duration::from_secs(1));
    let res = b.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(res.text().await.unwrap(), "seat map");
    // (reqwest's jar took the renewed cookie; the response carried no token header.)
    let res = b.get(s.at("/checkout")).send().await.unwrap();
    assert!(res.headers().get(TOKEN_HEADER.as_str()).is_none());
}

#[tokio::test]
async fn a_newcomer_without_cookies_is_told_its_session_but_never_a_token_it_did_not_ask_for() {
    let s = site(1, false).await;
    let c = app_client();
    // Joined with no cookie and no header: the session value is in the answer (and a cookie, in case it is a
    // browser).
    let res = c
        .post(s.at("/waitroom/join"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert!(res.headers().get("set-cookie").is_some());
    let json: Value = res.json().await.unwrap();
    assert!(json["session"].is_string());
    // After the door moved, a poll that names no session (no cookie, no header) is a stranger's: no token.
    s.room.tick_now().await.unwrap();
    let res = c
        .get(s.at("/waitroom/status"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert!(res.headers().get(TOKEN_HEADER.as_str()).is_none());
    let json: Value = res.json().await.unwrap();
    assert!(json.get("token").is_none());
}

#[tokio::test]
async fn the_room_s_json_endpoints_work_behind_tower_http_s_cors_layer() {
    let s = site(1, true).await;
    let c = app_client();
    // The browser's preflight for a cross-origin status poll with the session header.
    let res = c
        .request(Method::OPTIONS, s.at("/waitroom/status"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "x-waitroom-session")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        header(&res, "access-control-allow-origin").unwrap(),
        "https://app.example"
    );
    assert!(
        header(&res, "access-control-allow-headers")
            .unwrap()
            .contains("x-waitroom-session")
    );
    // The join and the poll, cross-origin, with the session header.
    let mut app = Creds::default();
    let res = app
        .sign(c.post(s.at("/waitroom/join")))
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    app.absorb(&res);
    assert_eq!(
        header(&res, "access-control-allow-origin").unwrap(),
        "https://app.example"
    );
    s.room.tick_now().await.unwrap();
    let res = app
        .sign(c.get(s.at("/waitroom/status")))
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        header(&res, "access-control-allow-origin").unwrap(),
        "https://app.example"
    );
    let exposed = header(&res, "access-control-expose-headers").unwrap();
    assert!(exposed.contains("waitroom-token"), "{exposed}");
    app.absorb(&res);
    let json: Value = res.json().await.unwrap();
    assert_eq!(json["state"], "admitted");
    assert!(app.token.is_some());
    // Another origin is not granted (the browser would not let its script read the answer).
    let res = c
        .request(Method::OPTIONS, s.at("/waitroom/status"))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "x-waitroom-session")
        .send()
        .await
        .unwrap();
    assert_ne!(
        header(&res, "access-control-allow-origin").as_deref(),
        Some("https://evil.example")
    );
    assert!(passes(&c, &s, &app, "/checkout").await);
}
