//! What the room writes to the log.
//!
//! - `logs_never_show_a_session_id_or_a_token`: with everything at TRACE, a whole visit (join, polls, admission,
//!   token issue, a refused token in the room and in a verify layer, a finish, an operator action) shows the
//!   `DEBUG` spans with the on-sale id and the session's short fingerprint, never a session id or a token.
//! - `at_info_thousands_of_joins_and_polls_log_nothing`: at the default level the per-request work is silent.
//!
//! The tests run on current-thread runtimes, so the server, the client and the room all log to the subscriber
//! installed for the test's thread.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use reqwest::redirect::Policy;
use serde_json::Value;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use waitroom_layer::{FINISH_HEADER, ManualClock, WaitingRoom, WaitingRoomLayer, fingerprint};
use waitroom_verify::VerifyLayer;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn cookie(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers().get_all("set-cookie").iter().find_map(|v| {
        v.to_str()
            .unwrap()
            .split(';')
            .next()
            .and_then(|p| p.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    })
}

#[tokio::test]
async fn logs_never_show_a_session_id_or_a_token() {
    let logs = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(
            "waitroom=trace,waitroom_layer=trace,waitroom_verify=trace",
        ))
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("tour-2026")
        .capacity(1)
        .idle_timeout(Duration::from_secs(60))
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .metrics(true)
        .admin_token("a-long-enough-admin-secret")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .route(
            "/checkout/buy",
            get(|| async { ([(FINISH_HEADER, "finish; seats=2")], "bought") }),
        )
        .merge(
            Router::new()
                .route("/api/order", get(|| async { "ordered" }))
                .layer(VerifyLayer::new(room.verifier().clone())),
        )
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let at = |p: &str| format!("{url}{p}");
    let b = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(Policy::none())
        .build()
        .unwrap();

    // Join, poll, get in, get the pass.
    let res = b.get(at("/checkout")).send().await.unwrap();
    let session_cookie = cookie(&res, "waitroom_session").unwrap();
    let session = session_cookie.split('.').next().unwrap().to_owned();
    let second = reqwest::Client::new()
        .get(at("/checkout"))
        .send()
        .await
        .unwrap();
    let other_session = cookie(&second, "waitroom_session").unwrap();
    let other_session = other_session.split('.').next().unwrap().to_owned();
    room.tick_now().await.unwrap();
    let res = b
        .get(at("/waitroom/status"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let token = cookie(&res, "waitroom_token").unwrap();
    let st: Value = res.json().await.unwrap();
    assert_eq!(st["state"], "admitted");
    assert_eq!(
        b.get(at("/checkout"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "seat map"
    );
    // Someone replays the pass with another session: refused.
    let res = reqwest::Client::new()
        .get(at("/checkout"))
        .header(
            "cookie",
            format!("waitroom_session={session_cookie}x; waitroom_token={token}"),
        )
        .send()
        .await
        .unwrap();
    assert_ne!(res.text().await.unwrap(), "seat map");
    let forged = format!(
        "waitroom_session={}; waitroom_token={token}",
        cookie(&second, "waitroom_session").unwrap()
    );
    let res = reqwest::Client::new()
        .get(at("/checkout"))
        .header("cookie", forged)
        .send()
        .await
        .unwrap();
    assert_ne!(res.text().await.unwrap(), "seat map");
    // The order service's verify layer refuses the other session, which has no pass.
    let res = reqwest::Client::new()
        .get(at("/api/order"))
        .header(
            "cookie",
            format!(
                "waitroom_session={}",
                cookie(&second, "waitroom_session").unwrap()
            ),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    // Buy (finish), an operator raises the capacity, the line moves on.
    assert_eq!(
        b.get(at("/checkout/buy"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "bought"
    );
    let res = reqwest::Client::new()
        .post(at("/waitroom/admin/capacity"))
        .bearer_auth("a-long-enough-admin-secret")
        .json(&serde_json::json!({"capacity": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = reqwest::Client::new()
        .post(at("/waitroom/admin/pause"))
        .bearer_auth("wrong-admin-secret-xxxxxxxx")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    room.tick_now().await.unwrap();
    clock.advance(Duration::from_secs(120));
    room.tick_now().await.unwrap();
    reqwest::get(at("/waitroom/metrics")).await.unwrap();

    drop(_guard);
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    // The visit was logged...
    for what in [
        "waitroom.join",
        "joined",
        "poll",
        "admitted",
        "token issued",
        "token refused",
        "finished",
        "settings changed",
        "refused an admin call",
    ] {
        assert!(text.contains(what), "no `{what}` in the log:\n{text}");
    }
    assert!(text.contains(&fingerprint(&session).to_string()));
    // Join, admission, token issue, refusal and finish are DEBUG spans, each with the on-sale id and the session's
    // fingerprint (the verify layer's refusal with the audience it expects).
    let me = fingerprint(&session).to_string();
    let other = fingerprint(&other_session).to_string();
    for (span, on_sale, who) in [
        ("waitroom.join{", "event=tour-2026", &me),
        ("waitroom.admit{", "event=tour-2026", &me),
        ("waitroom.token{", "event=tour-2026", &me),
        ("waitroom.refusal{", "event=tour-2026", &other),
        ("waitroom.finish{", "event=tour-2026", &me),
        ("waitroom.refusal{", "audience=tour-2026", &other),
    ] {
        let session = format!("session={who}");
        assert!(
            text.lines().any(|l| l.contains(" DEBUG ")
                && l.contains(span)
                && l.contains(on_sale)
                && l.contains(&session)),
            "no DEBUG `{span}` with `{on_sale}` and `{session}` in the log:\n{text}"
        );
    }
    // ...without a session id, a token, a piece of one, or the admin secret.
    for secret in [
        session.as_str(),
        other_session.as_str(),
        token.as_str(),
        token.split('.').nth(1).unwrap(),
        token.split('.').nth(2).unwrap(),
        "a-long-enough-admin-secret",
        "wrong-admin-secret",
    ] {
        assert!(
            !text.contains(secret),
            "`{secret}` appears in the log:\n{text}"
        );
    }
}

#[tokio::test]
async fn at_info_thousands_of_joins_and_polls_log_nothing() {
    use tower::{Service, ServiceExt};

    let logs = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new("info"))
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("tour-2026")
        .capacity(100)
        .idle_timeout(Duration::from_secs(60))
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let mut svc = tower::ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(|req: http::Request<String>| async move {
            let mut res = http::Response::new(String::from("seat map"));
            if req.uri().path() == "/checkout/buy" {
                res.headers_mut()
                    .insert(FINISH_HEADER, http::HeaderValue::from_static("finish"));
            }
            Ok::<_, std::convert::Infallible>(res)
        }));
    let request = |path: &str, cookies: &[String]| {
        let mut req = http::Request::get(path).body(String::new()).unwrap();
        if !cookies.is_empty() {
            req.headers_mut().insert(
                "cookie",
                http::HeaderValue::try_from(cookies.join("; ")).unwrap(),
            );
        }
        req
    };
    let set_cookies = |res: &http::Response<_>| -> Vec<String> {
        res.headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
            .collect()
    };

    // 2,000 people join; each polls twice.
    let mut jars = Vec::new();
    for _ in 0..2_000 {
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(request("/checkout", &[]))
            .await
            .unwrap();
        jars.push(set_cookies(&res));
    }
    for _ in 0..2 {
        for jar in &jars {
            let res = svc
                .ready()
                .await
                .unwrap()
                .call(request("/waitroom/status", jar))
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
        }
    }
    // The first hundred are let in, get their pass, use it and buy; a forged pass is refused.
    room.tick_now().await.unwrap();
    for jar in jars.iter_mut().take(100) {
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(request("/waitroom/status", jar))
            .await
            .unwrap();
        jar.extend(set_cookies(&res));
        assert!(jar.iter().any(|c| c.starts_with("waitroom_token=")));
        let res = svc
            .clone()
            .oneshot(request("/checkout/buy", jar))
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    let forged = vec![
        jars[500][0].clone(),
        "waitroom_token=e30.e30.e30".to_owned(),
    ];
    svc.ready()
        .await
        .unwrap()
        .call(request("/checkout", &forged))
        .await
        .unwrap();
    room.tick_now().await.unwrap();
    assert_eq!(room.stats().counters.finished, 100);

    drop(_guard);
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(text.is_empty(), "logged at INFO:\n{text:.2000}");
}
