//! The operator's kit over real HTTP: the timetable, one session's lookup and end, the audit log, and the status
//! page's login (cookie, CSRF defence).
//!
//! - On the embedded store: the login cookie and what it may do; bad timetables and lookups are refused.
//! - With the `redis` feature, two instances of one on-sale over a real redis-server (started by
//!   `waitroom-testkit`): a timetable set on one steers the other's door; a session found by its fingerprint on
//!   one is ended there and the other lets the next person in; the audit log written by both is read from either.
//!
//! Rooms run on one shared manual clock with no background task; the door moves with `room.tick_now()` and the
//! shared numbers with `room.refresh()`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use waitroom_layer::{ManualClock, Store, WaitingRoom, WaitingRoomLayer};
use waitroom_testkit::http::serve;

const ALICE: &str = "alice-admin-secret-0123456789";
const BOB: &str = "bob-admin-secret-0123456789ab";

struct Instance {
    url: String,
    room: WaitingRoom,
}

impl Instance {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

/// One room instance over `store` (the embedded one when `None`), on `clock`, with the admin tokens of alice and
/// bob, in front of `/checkout`.
async fn instance(
    event: &str,
    store: Option<Arc<dyn Store>>,
    clock: &ManualClock,
    opens_at_ms: Option<u64>,
) -> Instance {
    let mut b = WaitingRoom::builder(event)
        .capacity(2)
        // This test follows sessions through the line; going straight in has its own tests (layer_http).
        .straight_in(false)
        .idle_timeout(Duration::from_secs(60))
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false);
    if let Some(t) = opens_at_ms {
        b = b.opens_at(std::time::UNIX_EPOCH + Duration::from_millis(t));
    }
    if let Some(s) = store {
        b = b.shared_store(s);
    }
    let room = b.build().await.unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .admin_token_named("alice", ALICE)
        .admin_token_named("bob", BOB)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .layer(layer);
    Instance {
        url: serve(app).await,
        room,
    }
}

async fn post(c: &reqwest::Client, url: String, token: &str, body: Value) -> (u16, Value) {
    let res = c
        .post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn get_json(c: &reqwest::Client, url: String, token: &str) -> (u16, Value) {
    let res = c.get(url).bearer_auth(token).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn cookie_of(res: &reqwest::Response) -> Option<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("waitroom_admin="))
        .map(str::to_owned)
}

#[tokio::test]
async fn the_status_page_needs_a_login_and_its_cookie_changes_nothing_from_another_site() {
    let clock = ManualClock::starting_now();
    let i = instance("page", None, &clock, None).await;
    let c = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // Without a login: a login form, none of the page, and no script.
    let res = c.get(i.at("/waitroom/admin/")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    let html = res.text().await.unwrap();
    assert!(html.contains("id=\"login-form\"") && !html.contains("id=\"door-state\""));
    for path in ["/waitroom/admin/admin.js", "/waitroom/admin/stats"] {
        assert_eq!(
            c.get(i.at(path)).send().await.unwrap().status(),
            401,
            "{path}"
        );
    }

    // A wrong token is refused, and sets no cookie.
    let res = c
        .post(i.at("/waitroom/admin/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=alice-admin-secret-012345678X")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(cookie_of(&res), None);
    assert!(res.text().await.unwrap().contains("not right"));

    // The right one: a cookie that holds no secret, HttpOnly and SameSite=Strict, on the admin path only.
    let res = c
        .post(i.at("/waitroom/admin/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={BOB}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/waitroom/admin/");
    let set = cookie_of(&res).expect("a login cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    assert!(set.contains("Path=/waitroom/admin"), "{set}");
    assert!(
        !set.contains(BOB) && set.starts_with("waitroom_admin=bob."),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();
    let res = c
        .get(i.at("/waitroom/admin/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("id=\"door-state\"") && html.contains(">bob<"));

    // Changes with the cookie need the page's header and its origin.
    let pause = |headers: &[(&str, &str)]| {
        let mut r = c
            .post(i.at("/waitroom/admin/pause"))
            .header("cookie", &cookie)
            .header("content-type", "application/json")
            .body("{}");
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r.send()
    };
    assert_eq!(pause(&[]).await.unwrap().status(), 403);
    assert_eq!(
        pause(&[("x-waitroom-admin", "1"), ("sec-fetch-site", "cross-site")])
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        pause(&[
            ("x-waitroom-admin", "1"),
            ("origin", "https://evil.example")
        ])
        .await
        .unwrap()
        .status(),
        403
    );
    assert!(!i.room.stats().paused, "nothing changed");
    let res = pause(&[("x-waitroom-admin", "1"), ("sec-fetch-site", "same-origin")])
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(i.room.stats().paused);

    // A tampered cookie, or one past its 8 hours, is no login.
    let tampered = cookie.replacen("bob.", "alice.", 1);
    for bad in [tampered.as_str(), "waitroom_admin=bob.1.AAAA"] {
        let res = c
            .get(i.at("/waitroom/admin/stats"))
            .header("cookie", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{bad}");
    }
    clock.advance(Duration::from_secs(8 * 3600 + 1));
    let res = c
        .get(i.at("/waitroom/admin/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "the login expired");

    // The audit log names bob for the login and the pause; the refused calls left nothing.
    let (_, log) = get_json(&c, i.at("/waitroom/admin/audit"), ALICE).await;
    let what: Vec<(&str, &str)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["who"].as_str().unwrap(), e["action"].as_str().unwrap()))
        .collect();
    assert_eq!(what, [("bob", "pause"), ("bob", "login")]);
}

#[tokio::test]
async fn bad_timetables_and_lookups_are_refused_and_change_nothing() {
    let clock = ManualClock::starting_now();
    let i = instance("bad", None, &clock, None).await;
    let c = reqwest::Client::new();
    let now = clock_ms(&i);
    let before = i.room.stats();
    for body in [
        json!({"opens_at": "tomorrow"}),
        json!({"opens_at": -5}),
        json!({"opens_at": u64::MAX}),
        json!({"closes_at": "10000-01-01T00:00:00Z"}),
        json!({"prequeue_opens_at": 253_402_300_800_000u64}),
        json!({"opens_at": true}),
        json!({"opening": now}),
        json!({"opens_at": now + 60_000, "prequeue_opens_at": now + 120_000}),
        json!({"opens_at": now + 60_000, "closes_at": now + 60_000}),
        json!([1, 2]),
    ] {
        let (status, problem) =
            post(&c, i.at("/waitroom/admin/schedule"), ALICE, body.clone()).await;
        assert_eq!(status, 400, "{body}: {problem}");
    }
    for q in [
        "",
        "?fingerprint=xyz",
        "?fingerprint=abcdef0",
        "?id=a&fingerprint=abcdef",
    ] {
        let (status, _) = get_json(&c, i.at(&format!("/waitroom/admin/session{q}")), ALICE).await;
        assert_eq!(status, 400, "{q}");
    }
    let (status, _) = post(
        &c,
        i.at("/waitroom/admin/session/finish"),
        ALICE,
        json!({"id": "nobody-0123456789abcdef"}),
    )
    .await;
    assert_eq!(status, 409, "only an admitted session can be ended");
    i.room.refresh().await.unwrap();
    assert_eq!(i.room.stats(), before);
    let (_, log) = get_json(&c, i.at("/waitroom/admin/audit"), ALICE).await;
    assert_eq!(log["entries"], json!([]), "refused calls are not audited");
}

fn clock_ms(i: &Instance) -> u64 {
    i.room.clock().now_ms()
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use waitroom_layer::RedisStore;
    use waitroom_testkit::redis::RedisServer;
    use waitroom_verify::fingerprint;

    fn event(tag: &str) -> String {
        format!(
            "kit-{tag}-{}-{}",
            std::process::id(),
            WaitingRoom::new_session_id()
        )
    }

    async fn pair(
        server: &RedisServer,
        ev: &str,
        clock: &ManualClock,
        opens: Option<u64>,
    ) -> (Instance, Instance) {
        let mut v = Vec::new();
        for _ in 0..2 {
            let store: Arc<dyn Store> = Arc::new(RedisStore::connect(server.url()).await.unwrap());
            v.push(instance(ev, Some(store), clock, opens).await);
        }
        let b = v.pop().unwrap();
        (v.pop().unwrap(), b)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_timetable_set_on_one_instance_steers_the_door_of_the_other() {
        let server = RedisServer::from_env_or_start();
        let clock = ManualClock::starting_now();
        let t0 = waitroom_layer::Clock::now_ms(&clock);
        let ev = event("sched");
        let (a, b) = pair(&server, &ev, &clock, Some(t0 + 60_000)).await;
        let c = reqwest::Client::new();

        // On A: the pre-queue opens in 30 s, the door in 120 s (not 60), the on-sale closes in 600 s.
        let (status, stats) = post(
            &c,
            a.at("/waitroom/admin/schedule"),
            ALICE,
            json!({
                "prequeue_opens_at": t0 + 30_000,
                "opens_at": t0 + 120_000,
                "closes_at": humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(t0 + 600_000)).to_string(),
            }),
        )
        .await;
        assert_eq!(status, 200, "{stats}");
        assert_eq!(stats["opens_at_ms"], t0 + 120_000);
        b.room.refresh().await.unwrap();
        let seen = b.room.stats();
        assert_eq!(
            (
                seen.opens_at_ms,
                seen.prequeue_opens_at_ms,
                seen.closes_at_ms
            ),
            (Some(t0 + 120_000), Some(t0 + 30_000), Some(t0 + 600_000)),
            "B reads A's timetable from the store"
        );
        assert_eq!(seen.door.state, "not_open");

        // Before the pre-queue opens, B gives no place: come back in 30 s.
        let res = c
            .post(b.at("/waitroom/join"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        assert_eq!(res.headers()["retry-after"], "30");
        let problem: Value = res.json().await.unwrap();
        assert_eq!(problem["code"], "not_open_yet");
        // A browser navigating to a protected page gets a page saying when.
        let res = waitroom_testkit::http::browser()
            .get(b.at("/checkout"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        assert_eq!(res.headers()["retry-after"], "30");
        let page = res.text().await.unwrap();
        assert!(page.contains("The line is not open yet"), "{page}");
        assert_eq!(b.room.stats().waiting, 0);

        // Once it opens, B takes joins; at the old opening time nobody goes in, at the new one they do.
        clock.advance(Duration::from_secs(30));
        b.room.join("early-bird-0123456789ab", None).await.unwrap();
        b.room.join("second-bird-0123456789a", None).await.unwrap();
        clock.advance(Duration::from_secs(31));
        assert!(
            b.room.tick_now().await.unwrap().admitted.is_empty(),
            "the old time opens nothing"
        );
        clock.advance(Duration::from_secs(60));
        let r = b.room.tick_now().await.unwrap();
        assert_eq!(r.admitted.len(), 2, "the new time opens the door: {r:?}");

        // At the closing time, the next tick (of either instance) closes the on-sale.
        clock.advance(Duration::from_secs(480));
        a.room.tick_now().await.unwrap();
        b.room.refresh().await.unwrap();
        let st = b.room.stats();
        assert!(st.closed, "{st:?}");
        assert_eq!(st.door.state, "closed");
        assert!(st.door.why.contains("scheduled"), "{}", st.door.why);
        let (_, log) = get_json(&c, b.at("/waitroom/admin/audit"), BOB).await;
        assert_eq!(log["entries"][0]["action"], "schedule");
        assert_eq!(log["entries"][0]["who"], "alice");
        assert_eq!(log["entries"][0]["at_ms"], t0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_operator_finds_a_session_by_fingerprint_on_one_instance_and_ends_it_for_both() {
        let server = RedisServer::from_env_or_start();
        let clock = ManualClock::starting_now();
        let ev = event("session");
        let (a, b) = pair(&server, &ev, &clock, None).await;
        let c = reqwest::Client::new();
        let ids: Vec<String> = (0..3)
            .map(|i| format!("customer-{i}-0123456789abc"))
            .collect();
        for id in &ids {
            a.room.join(id, None).await.unwrap();
        }
        clock.advance(Duration::from_secs(1));
        let t_in = waitroom_layer::Clock::now_ms(&clock);
        let r = a.room.tick_now().await.unwrap();
        assert_eq!(r.admitted, ids[..2], "capacity 2, in line order");

        // B finds the first customer by the fingerprint its support ticket quotes: admitted, and since when.
        let fp = fingerprint(&ids[0]).to_string();
        let (status, found) = get_json(
            &c,
            b.at(&format!("/waitroom/admin/session?fingerprint={fp}")),
            BOB,
        )
        .await;
        assert_eq!(status, 200);
        let s = &found["sessions"][0];
        assert_eq!(
            (s["fingerprint"].as_str(), s["state"].as_str()),
            (Some(fp.as_str()), Some("admitted"))
        );
        assert_eq!(s["admitted_at_ms"], t_in);
        assert!(
            !found.to_string().contains(&ids[0]),
            "the id is never shown"
        );
        // The third waits at position 1.
        let (_, third) = get_json(
            &c,
            b.at(&format!("/waitroom/admin/session?id={}", ids[2])),
            BOB,
        )
        .await;
        assert_eq!(third["sessions"][0]["state"], "waiting");
        assert_eq!(third["sessions"][0]["position"], 1);
        assert_eq!(third["sessions"][0]["admitted_at_ms"], Value::Null);

        // B ends it: its place frees, and A's next tick lets the third customer in.
        let (status, done) = post(
            &c,
            b.at("/waitroom/admin/session/finish"),
            BOB,
            json!({"fingerprint": fp}),
        )
        .await;
        assert_eq!(status, 200, "{done}");
        let (status, _) = post(
            &c,
            b.at("/waitroom/admin/session/finish"),
            BOB,
            json!({"fingerprint": fp}),
        )
        .await;
        assert_eq!(status, 409, "ended already");
        let r = a.room.tick_now().await.unwrap();
        assert_eq!(r.admitted, [ids[2].clone()]);
        assert!(a.room.finished_recently(&ids[0]), "A refuses its tokens");

        // The audit log (read from A) names bob, the call and the fingerprint, never the id.
        let (_, log) = get_json(&c, a.at("/waitroom/admin/audit?limit=5"), ALICE).await;
        let e = &log["entries"][0];
        assert_eq!(
            (e["who"].as_str(), e["action"].as_str()),
            (Some("bob"), Some("session-finish"))
        );
        assert!(e["detail"].as_str().unwrap().contains(&fp));
        assert!(!log.to_string().contains(&ids[0]));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_admin_change_is_audited_with_its_operator_and_read_from_either_instance() {
        let server = RedisServer::from_env_or_start();
        let clock = ManualClock::starting_now();
        let ev = event("audit");
        let (a, b) = pair(&server, &ev, &clock, None).await;
        let c = reqwest::Client::new();
        let t0 = waitroom_layer::Clock::now_ms(&clock);
        assert_eq!(
            post(&c, a.at("/waitroom/admin/pause"), ALICE, json!({}))
                .await
                .0,
            200
        );
        clock.advance(Duration::from_secs(5));
        assert_eq!(
            post(
                &c,
                b.at("/waitroom/admin/capacity"),
                BOB,
                json!({"capacity": 7})
            )
            .await
            .0,
            200
        );
        clock.advance(Duration::from_secs(5));
        assert_eq!(
            post(&c, b.at("/waitroom/admin/resume"), BOB, json!({}))
                .await
                .0,
            200
        );
        // Refused and read-only calls leave nothing.
        assert_eq!(
            post(
                &c,
                a.at("/waitroom/admin/close"),
                "not-a-token-0123456789",
                json!({})
            )
            .await
            .0,
            401
        );
        assert_eq!(
            get_json(&c, a.at("/waitroom/admin/stats"), ALICE).await.0,
            200
        );
        for i in [&a, &b] {
            let (status, log) = get_json(&c, i.at("/waitroom/admin/audit"), ALICE).await;
            assert_eq!(status, 200);
            let got: Vec<(String, String, u64, String)> = log["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["who"].as_str().unwrap().to_owned(),
                        e["action"].as_str().unwrap().to_owned(),
                        e["at_ms"].as_u64().unwrap(),
                        e["detail"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            assert_eq!(
                got,
                [
                    ("bob".into(), "resume".into(), t0 + 10_000, "{}".into()),
                    (
                        "bob".into(),
                        "capacity".into(),
                        t0 + 5_000,
                        "{\"capacity\":7}".into()
                    ),
                    ("alice".into(), "pause".into(), t0, "{}".into()),
                ]
            );
        }
    }

    /// The session id in a browser's session cookie (`<id>.<number>.<tag>`).
    fn session_id(c: &reqwest::Response) -> String {
        let set = c
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("waitroom_session="))
            .expect("a session cookie")
            .to_owned();
        set["waitroom_session=".len()..]
            .split(['.', ';'])
            .next()
            .unwrap()
            .to_owned()
    }

    async fn status(b: &reqwest::Client, i: &Instance) -> Value {
        b.get(i.at("/waitroom/status"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_moved_to_the_front_on_one_instance_goes_in_next_on_the_other() {
        let server = RedisServer::from_env_or_start();
        let clock = ManualClock::starting_now();
        let ev = event("front");
        let (a, b) = pair(&server, &ev, &clock, None).await;
        let c = reqwest::Client::new();
        // Five browsers join on A; capacity 2: two go in, three wait at positions 1, 2, 3.
        let people: Vec<reqwest::Client> =
            (0..5).map(|_| waitroom_testkit::http::browser()).collect();
        let mut ids = Vec::new();
        for p in &people {
            let res = p.get(a.at("/checkout")).send().await.unwrap();
            ids.push(session_id(&res));
        }
        let r = a.room.tick_now().await.unwrap();
        assert_eq!(r.admitted, ids[..2]);
        assert_eq!(status(&people[4], &a).await["position"], 3);

        // Support moves the last one to the front, on B.
        let (code, body) = post(
            &c,
            b.at("/waitroom/admin/session/front"),
            BOB,
            json!({"id": ids[4]}),
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let (code, _) = post(
            &c,
            b.at("/waitroom/admin/session/front"),
            BOB,
            json!({"id": ids[0]}),
        )
        .await;
        assert_eq!(code, 409, "an admitted session cannot be moved");
        // A learns at its next refresh: the cookie's old number no longer answers for it.
        a.room.refresh().await.unwrap();
        let st = status(&people[4], &a).await;
        assert_eq!(
            (st["state"].as_str(), &st["position"]),
            (Some("waiting"), &Value::Null),
            "{st}"
        );
        assert_eq!(
            status(&people[2], &a).await["position"],
            1,
            "nobody else moves"
        );
        assert_eq!(status(&people[3], &a).await["position"], 2);

        // The next place that frees is its own.
        assert!(a.room.finish(&ids[0], 0).await.unwrap());
        let r = a.room.tick_now().await.unwrap();
        assert_eq!(r.admitted, [ids[4].clone()]);
        assert_eq!(status(&people[4], &a).await["state"], "admitted");
        assert_eq!(status(&people[2], &a).await["position"], 1);
        let res = people[4].get(a.at("/checkout")).send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "seat map");

        let (_, log) = get_json(&c, a.at("/waitroom/admin/audit?limit=1"), ALICE).await;
        let e = &log["entries"][0];
        assert_eq!(
            (e["who"].as_str(), e["action"].as_str()),
            (Some("bob"), Some("session-front"))
        );
        assert!(
            e["detail"]
                .as_str()
                .unwrap()
                .contains(&fingerprint(&ids[4]).to_string())
        );
    }
}
