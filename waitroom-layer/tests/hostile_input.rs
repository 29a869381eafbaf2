//! Hostile input against the room layer over a real axum server: stuffed and tossed cookies, and cross-site
//! requests (issue 21). Each test moves the door by hand on a manual clock; nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use http::StatusCode;
use waitroom_layer::{ManualClock, STATE_HEADER, WaitingRoom, WaitingRoomLayer};
use waitroom_testkit::http::serve;
use waitroom_verify::{OriginCheck, VerifyLayer};

struct Site {
    url: String,
    room: WaitingRoom,
}

impl Site {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

async fn site() -> Site {
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("tour-2026")
        .capacity(1)
        .idle_timeout(Duration::from_secs(60))
        .clock(Arc::new(clock))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .route("/checkout/holds", post(|| async { "held" }))
        .route(
            "/orders",
            post(|| async { "ordered" }).layer(
                VerifyLayer::new(room.verifier().clone()).origin_check(OriginCheck::same_origin()),
            ),
        )
        .layer(layer);
    Site {
        url: serve(app).await,
        room,
    }
}

/// A client with no cookie store: every test writes its `Cookie` header by hand.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn set_cookies(res: &reqwest::Response) -> Vec<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

fn cookie_value(set_cookies: &[String], name: &str) -> Option<String> {
    set_cookies.iter().find_map(|c| {
        c.split(';')
            .next()
            .and_then(|p| p.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    })
}

/// Joins, lets the door admit, and returns the admitted person's session cookie value.
async fn admitted_session(s: &Site) -> String {
    let c = client();
    let res = c.get(s.at("/checkout")).send().await.unwrap();
    let session = cookie_value(&set_cookies(&res), "waitroom_session").expect("a session cookie");
    s.room.tick_now().await.unwrap();
    let res = c
        .get(s.at("/waitroom/status"))
        .header("accept", "application/json")
        .header("cookie", format!("waitroom_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()[STATE_HEADER], "admitted");
    cookie_value(&set_cookies(&res), "waitroom_session").unwrap_or(session)
}

/// A value shaped like a session cookie whose tag does not verify (a stale or tossed one).
fn forged(i: usize) -> String {
    format!("forgedSession{i:06}AAAA.{}.{}", i + 1, "A".repeat(43))
}

/// Sends `GET /checkout` with `cookie` and says whether it reached the handler, and the session `Set-Cookie`.
async fn checkout_with(s: &Site, cookie: &str) -> (StatusCode, String, Option<String>) {
    let (status, body, lines) = checkout_lines(s, cookie).await;
    (status, body, cookie_value(&lines, "waitroom_session"))
}

/// Sends `GET /checkout` with `cookie`; the status, the body and every `Set-Cookie` line.
async fn checkout_lines(s: &Site, cookie: &str) -> (StatusCode, String, Vec<String>) {
    let res = client()
        .get(s.at("/checkout"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    let (status, lines) = (res.status(), set_cookies(&res));
    (status, res.text().await.unwrap(), lines)
}

#[tokio::test]
async fn a_session_cookie_behind_eighteen_kilobytes_of_other_cookies_is_still_read() {
    let s = site().await;
    let session = admitted_session(&s).await;
    let stuffing: String = (0..60)
        .map(|i| format!("site_{i}={}; ", "v".repeat(300)))
        .collect();
    assert!(stuffing.len() > 18_000);
    let (status, body, new_session) =
        checkout_with(&s, &format!("{stuffing}waitroom_session={session}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "seat map", "the admitted person gets in again");
    assert_eq!(
        new_session, None,
        "the real session cookie is not overwritten"
    );
}

/// The order service's `VerifyLayer` reads the cookies as the room does: the same 18 KB of a sibling subdomain's
/// cookies in front of an admitted person's session and token do not block their order.
#[tokio::test]
async fn an_order_behind_eighteen_kilobytes_of_other_cookies_goes_through() {
    let s = site().await;
    let session = admitted_session(&s).await;
    let (status, _, lines) = checkout_lines(&s, &format!("waitroom_session={session}")).await;
    assert_eq!(status, StatusCode::OK);
    let token = cookie_value(&lines, "waitroom_token").expect("the admitted person's token");
    let stuffing: String = (0..60)
        .map(|i| format!("site_{i}={}; ", "v".repeat(300)))
        .collect();
    assert!(stuffing.len() > 18_000);
    let order = |cookie: String| {
        client()
            .post(s.at("/orders"))
            .header("sec-fetch-site", "same-origin")
            .header("cookie", cookie)
            .send()
    };
    let res = order(format!(
        "{stuffing}waitroom_session={session}; waitroom_token={token}"
    ))
    .await
    .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.text().await.unwrap(), "ordered");
    // Spread over 80 Cookie lines (as HTTP/2 may send them; more than the 64 the verifier used to read, within
    // hyper's 100 headers a request), the same.
    let mut req = client()
        .post(s.at("/orders"))
        .header("sec-fetch-site", "same-origin");
    for i in 0..80 {
        req = req.header("cookie", format!("site_{i}=v"));
    }
    let res = req
        .header("cookie", format!("waitroom_session={session}"))
        .header("cookie", format!("waitroom_token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "behind 80 Cookie lines");
}

#[tokio::test]
async fn three_stale_session_cookies_before_the_real_one_do_not_push_the_person_out() {
    let s = site().await;
    let session = admitted_session(&s).await;
    let cookie = format!(
        "waitroom_session={}; waitroom_session={}; waitroom_session={}; waitroom_session={session}",
        forged(1),
        forged(2),
        forged(3)
    );
    let (status, body, new_session) = checkout_with(&s, &cookie).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "seat map", "the one with a valid signature wins");
    assert_eq!(
        new_session, None,
        "the real session cookie is not overwritten"
    );
    // Sent as separate `Cookie` lines, as HTTP/2 clients do, the same.
    let mut req = client().get(s.at("/checkout"));
    for i in 0..5 {
        req = req.header("cookie", format!("waitroom_session={}", forged(i)));
    }
    let res = req
        .header("cookie", format!("waitroom_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(cookie_value(&set_cookies(&res), "waitroom_session"), None);
    assert_eq!(res.text().await.unwrap(), "seat map");
}

#[tokio::test]
async fn more_session_cookies_than_the_room_reads_get_a_clear_431_and_never_a_new_session() {
    let s = site().await;
    let session = admitted_session(&s).await;
    let mut cookie: String = (0..20)
        .map(|i| format!("waitroom_session={}; ", forged(i)))
        .collect();
    cookie.push_str(&format!("waitroom_session={session}"));
    let (status, body, new_session) = checkout_with(&s, &cookie).await;
    assert_eq!(status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert!(body.contains("session_cookie_unreadable"), "{body}");
    assert_eq!(new_session, None, "no Set-Cookie overwrites the real one");
    let res = client()
        .get(s.at("/waitroom/status"))
        .header("accept", "application/json")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_eq!(cookie_value(&set_cookies(&res), "waitroom_session"), None);
}

#[tokio::test]
async fn a_sibling_subdomain_cannot_post_with_the_persons_cookies_and_the_own_page_can() {
    let s = site().await;
    let session = admitted_session(&s).await;
    let post = |site_header: Option<&'static str>, origin: &'static str| {
        let mut req = client()
            .post(s.at("/checkout/holds"))
            .header("cookie", format!("waitroom_session={session}"))
            .header("origin", origin);
        if let Some(v) = site_header {
            req = req.header("sec-fetch-site", v);
        }
        req.send()
    };
    // A form on blog.example.com is same-site (SameSite=Lax sends the cookies) but not same-origin.
    let res = post(Some("same-site"), "https://blog.example.com")
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("\"code\":\"cross_origin\"")
    );
    let res = post(Some("cross-site"), "https://evil.test").await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    // An older browser without Sec-Fetch-Site: the Origin decides.
    let res = post(None, "https://evil.test").await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    // The site's own page.
    let res = post(Some("same-origin"), "http://ignored").await.unwrap();
    assert_eq!(res.text().await.unwrap(), "held");
    let host = s.url.trim_start_matches("http://").to_owned();
    let res = client()
        .post(s.at("/checkout/holds"))
        .header("cookie", format!("waitroom_session={session}"))
        .header("origin", format!("http://{host}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.text().await.unwrap(), "held");
    // The room's own unsafe endpoint too.
    let res = client()
        .post(s.at("/waitroom/join"))
        .header("sec-fetch-site", "cross-site")
        .header("origin", "https://evil.test")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(
        set_cookies(&res).is_empty(),
        "nobody is joined from another site"
    );
}

#[tokio::test]
async fn an_order_service_reached_directly_can_refuse_cross_origin_posts_too() {
    let s = site().await;
    let res = client()
        .post(s.at("/orders"))
        .header("sec-fetch-site", "same-site")
        .header("origin", "https://blog.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("\"code\":\"cross_origin\"")
    );
    // From its own page the request goes on to the token check (no token here: 401).
    let res = client()
        .post(s.at("/orders"))
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

/// A room with its default cookie settings (secure, as behind HTTPS; this test server is plain HTTP, so the tests
/// write their `Cookie` headers by hand), `configure`d, with a seat map behind the room and an order route behind
/// a default `VerifyLayer`.
async fn secure_site(
    configure: impl FnOnce(waitroom_layer::RoomBuilder) -> waitroom_layer::RoomBuilder,
) -> Site {
    let builder = WaitingRoom::builder("tour-2026")
        .capacity(2)
        .idle_timeout(Duration::from_secs(60))
        .clock(Arc::new(ManualClock::starting_now()))
        .background(false);
    let room = configure(builder).build().await.unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .route(
            "/checkout/order",
            get(|| async { "order form" }).layer(VerifyLayer::new(room.verifier().clone())),
        )
        .layer(layer);
    Site {
        url: serve(app).await,
        room,
    }
}

/// The first `Set-Cookie` line for `name` (attributes included).
fn set_cookie_line<'a>(lines: &'a [String], name: &str) -> Option<&'a str> {
    lines
        .iter()
        .find(|l| l.starts_with(&format!("{name}=")))
        .map(String::as_str)
}

#[tokio::test]
async fn behind_https_the_cookies_are_host_prefixed_so_a_sibling_subdomain_cannot_toss_a_session_in()
 {
    let s = secure_site(|b| b).await;
    assert_eq!(s.room.cookie_names().session, "__Host-waitroom_session");
    // The attacker's own session, from the room itself: a valid signature.
    let res = client().get(s.at("/checkout")).send().await.unwrap();
    let lines = set_cookies(&res);
    let line =
        set_cookie_line(&lines, "__Host-waitroom_session").expect("a __Host- session cookie");
    assert!(
        line.contains("; Path=/;") && line.contains("; Secure") && !line.contains("Domain"),
        "{line}"
    );
    let attackers = cookie_value(&lines, "__Host-waitroom_session").unwrap();
    let attackers_id = attackers.split('.').next().unwrap().to_owned();

    // A sibling subdomain tosses it in under the plain name (`Domain=example.com`): the room does not read it; the
    // person gets a session of their own.
    let (_, _, lines) = checkout_lines(&s, &format!("waitroom_session={attackers}")).await;
    let own =
        cookie_value(&lines, "__Host-waitroom_session").expect("a session of the person's own");
    assert_ne!(
        own.split('.').next().unwrap(),
        attackers_id,
        "the tossed session was adopted"
    );
    // Beside the person's own `__Host-` cookie, the tossed one changes nothing.
    let both = format!("waitroom_session={attackers}; __Host-waitroom_session={own}");
    let (_, _, lines) = checkout_lines(&s, &both).await;
    assert_eq!(cookie_value(&lines, "__Host-waitroom_session"), None);

    // Let in: the token cookie is `__Host-` too, and a default VerifyLayer reads both.
    s.room.tick_now().await.unwrap();
    let (_, body, lines) = checkout_lines(&s, &format!("__Host-waitroom_session={own}")).await;
    assert_eq!(body, "seat map");
    let token = cookie_value(&lines, "__Host-waitroom_token").expect("a __Host- token cookie");
    let res = client()
        .get(s.at("/checkout/order"))
        .header(
            "cookie",
            format!("__Host-waitroom_session={own}; __Host-waitroom_token={token}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.text().await.unwrap(), "order form");
}

#[tokio::test]
async fn a_shared_cookie_domain_uses_the_secure_prefix_and_plain_http_keeps_the_plain_names() {
    let s = secure_site(|b| b.cookie_domain("example.com")).await;
    let res = client().get(s.at("/checkout")).send().await.unwrap();
    let lines = set_cookies(&res);
    let line =
        set_cookie_line(&lines, "__Secure-waitroom_session").expect("__Secure- with a domain");
    assert!(
        line.contains("; Domain=example.com;") && line.contains("; Secure"),
        "{line}"
    );

    let s = secure_site(|b| b.cookie_prefix(false)).await;
    let res = client().get(s.at("/checkout")).send().await.unwrap();
    assert!(set_cookie_line(&set_cookies(&res), "waitroom_session").is_some());

    let s = secure_site(|b| b.secure_cookies(false)).await;
    assert_eq!(s.room.cookie_names().session, "waitroom_session");

    let bad = WaitingRoom::builder("tour-2026")
        .cookie_domain("example.com; Path=/evil")
        .build()
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("cookie_domain"), "{bad}");
}
