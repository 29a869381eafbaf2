//! Finishing across processes over a real redis-server: the sink writes the room's finish-stream entry, and a
//! second verifier replica (another axum server) refuses the session through the listener. How soon is printed (a
//! fraction of a second on an idle machine), not asserted: the wait is bounded by [`PATIENCE`], generous for a
//! machine loaded by other builds, and fails with a message.
//! (That the sink's script frees the place in the room's store at once is checked in waitroom-layer's
//! `tests/redis_instances.rs` and `tests/redis_room.rs`, as this crate does not depend on the room.)
#![cfg(feature = "redis")]

use std::time::{Duration, Instant};

use axum::routing::{get, post};
use axum::{Extension, Router};
use waitroom_testkit::redis::RedisServer;
use waitroom_verify::redis::{
    RedisFinishError, RedisFinishListener, RedisFinishSink, finished_stream_key,
};
use waitroom_verify::{
    Admission, Claims, Clock, Finish, FinishSink, SigningKey, SystemClock, Verifier, VerifyLayer,
};

fn event(tag: &str) -> String {
    format!("{tag}-{}-{}", std::process::id(), SystemClock.now_ms())
}

fn verifier(key: &SigningKey, event: &str) -> Verifier {
    Verifier::builder()
        .keys(key)
        .issuer("waitroom")
        .audience(event)
        .build()
        .unwrap()
}

async fn buy(Extension(a): Extension<Admission>) -> &'static str {
    a.finish_with_seats(2);
    "bought"
}

/// One verifier replica: `/seats` checks the token, `/buy` finishes the session.
async fn replica(verifier: Verifier, sink: Option<RedisFinishSink>) -> String {
    let mut layer = VerifyLayer::new(verifier);
    if let Some(sink) = sink {
        layer = layer.finish_sink(sink);
    }
    let app = Router::new()
        .route("/seats", get(|| async { "seat map" }))
        .route("/buy", post(buy))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

struct Visitor {
    client: reqwest::Client,
    cookie: String,
}

impl Visitor {
    fn new(key: &SigningKey, event: &str, session: &str) -> Self {
        let token = key
            .sign(&Claims::new(
                "waitroom",
                event,
                session,
                SystemClock.now_secs(),
                Duration::from_secs(300),
            ))
            .unwrap();
        Self {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookie: format!("waitroom_session={session}; waitroom_token={token}"),
        }
    }

    /// The status and, for a refusal, the problem body's `reason`.
    async fn get(&self, url: String) -> (u16, String) {
        let res = self
            .client
            .get(url)
            .header("cookie", &self.cookie)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body = res.text().await.unwrap();
        let reason = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["reason"].as_str().map(str::to_owned))
            .unwrap_or(body);
        (status, reason)
    }

    async fn buy(&self, base: &str) -> (u16, Duration) {
        let t0 = Instant::now();
        let res = self
            .client
            .post(format!("{base}/buy"))
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), t0.elapsed())
    }
}

/// The longest a cross-replica effect may take before the test fails (the listener blocks on the stream and
/// answers in milliseconds; this is for a loaded machine).
const PATIENCE: Duration = Duration::from_secs(20);

async fn wait_until(what: &str, limit: Duration, mut ok: impl AsyncFnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !ok().await {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t0.elapsed()
}

/// The entries of `key` as `s=<..> n=<..> t=<..>` lines (the id left out).
fn stream(server: &RedisServer, key: &str) -> Vec<String> {
    let raw = server.command(&["XRANGE", key, "-", "+"]);
    let lines: Vec<&str> = raw.lines().collect();
    // Each entry flattens to: id, s, <session>, n, <seats>, t, <ms>.
    lines
        .chunks(7)
        .filter(|c| c.len() == 7)
        .map(|c| format!("{}={} {}={} {}={}", c[1], c[2], c[3], c[4], c[5], c[6]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_on_one_replica_is_refused_on_another_through_the_listener() {
    let server = RedisServer::from_env_or_start();
    let ev = event("replicas");
    let key = SigningKey::generate_ed25519("k1").unwrap();
    let a = verifier(&key, &ev);
    let b = verifier(&key, &ev);
    let listener = RedisFinishListener::spawn(b.clone(), server.url(), &ev).unwrap();
    wait_until(
        "the listener connects",
        Duration::from_secs(5),
        async || listener.is_caught_up(),
    )
    .await;
    assert!(listener.is_connected());

    let sink = RedisFinishSink::connect(server.url()).await.unwrap();
    let site_a = replica(a.clone(), Some(sink.clone())).await;
    let site_b = replica(b.clone(), None).await;
    let session = "replica-session-000000001";
    let v = Visitor::new(&key, &ev, session);
    // Before: both replicas let the token through.
    assert_eq!(v.get(format!("{site_a}/seats")).await.0, 200);
    assert_eq!(v.get(format!("{site_b}/seats")).await.0, 200);

    // The order goes through on A.
    let (status, took) = v.buy(&site_a).await;
    assert_eq!(status, 200);
    let finished_at = Instant::now();
    // The response waited for the write: the entry is there, in the room's format.
    let stream_key = format!("wr:{{{ev}}}:finished");
    assert_eq!(finished_stream_key("wr", &ev).unwrap(), stream_key);
    let entries = stream(&server, &stream_key);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(
        entries[0].starts_with(&format!("s={session} n=2 t=")),
        "{entries:?}"
    );
    let t: u64 = entries[0].rsplit('=').next().unwrap().parse().unwrap();
    assert!(
        t.abs_diff(SystemClock.now_ms()) < 5_000,
        "t is the finish time in ms"
    );
    assert_eq!((sink.recorded(), sink.failed()), (1, 0));
    // A refuses at once (its own deny list); B once its listener reads the entry.
    assert_eq!(
        v.get(format!("{site_a}/seats")).await,
        (401, "finished".into())
    );
    let lag = wait_until("B refuses the finished session", PATIENCE, async || {
        v.get(format!("{site_b}/seats")).await == (401, "finished".into())
    })
    .await;
    assert!(b.is_denied(session));
    assert_eq!(listener.denied(), 1);
    println!(
        "buy on A took {took:?}; B refused {:?} after the response ({lag:?} of polling)",
        finished_at.elapsed()
    );

    // A replica that starts later still refuses it (it reads back over its deny TTL)...
    let c = verifier(&key, &ev);
    let late = RedisFinishListener::spawn(c.clone(), server.url(), &ev).unwrap();
    wait_until(
        "the late listener catches up",
        Duration::from_secs(5),
        async || c.is_denied(session),
    )
    .await;
    assert_eq!(late.denied(), 1);
    // ...and other sessions pass everywhere.
    let other = Visitor::new(&key, &ev, "replica-session-000000002");
    assert_eq!(other.get(format!("{site_b}/seats")).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_events_and_bad_settings() {
    let server = RedisServer::from_env_or_start();
    let ev = event("prefix");
    let sink = RedisFinishSink::builder(server.url())
        .key_prefix("shop")
        .connect()
        .await
        .unwrap();
    let finish = |session: &str, event: &str| Finish {
        session_id: session.into(),
        event: event.into(),
        seats: 1,
        at_ms: 1_800_000_000_000,
    };
    sink.record(&finish("s-1", &ev)).await.unwrap();
    assert_eq!(
        stream(&server, &format!("shop:{{{ev}}}:finished")),
        vec!["s=s-1 n=1 t=1800000000000"]
    );
    // The event comes from each finish (the token's audience): a brace would break the hash tag.
    assert!(matches!(
        sink.record(&finish("s-2", "a}b")).await,
        Err(RedisFinishError::Invalid(_))
    ));
    assert_eq!((sink.recorded(), sink.failed()), (1, 1));
    // As a FinishSink: the write is spawned and the returned future waits for it.
    let fut = FinishSink::finish(&sink, &finish("s-3", &ev), &mut http::HeaderMap::new());
    fut.expect("a future to wait for").await;
    assert_eq!(stream(&server, &format!("shop:{{{ev}}}:finished")).len(), 2);

    assert!(matches!(
        RedisFinishSink::builder(server.url())
            .key_prefix("w{r}")
            .connect()
            .await,
        Err(RedisFinishError::Invalid(_))
    ));
    assert!(matches!(
        RedisFinishSink::connect("nope://x").await,
        Err(RedisFinishError::Invalid(_))
    ));
    let key = SigningKey::generate_ed25519("k").unwrap();
    assert!(matches!(
        RedisFinishListener::spawn(verifier(&key, &ev), server.url(), "a{b"),
        Err(RedisFinishError::Invalid(_))
    ));
    assert!(matches!(
        RedisFinishListener::builder(server.url(), &ev)
            .poll_interval(Duration::ZERO)
            .spawn(verifier(&key, &ev)),
        Err(RedisFinishError::Invalid(_))
    ));
    assert!(
        !format!("{sink:?}").contains("127.0.0.1"),
        "no URL in Debug"
    );
}

/// Redis goes away: a finish still denies the session on its replica and the response leaves within the sink's
/// timeout (the write fails, counted). Redis comes back: the listener resumes and later finishes reach the other
/// replica again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_delays_nothing_and_the_listener_resumes() {
    let mut server = RedisServer::start();
    let ev = event("outage");
    let key = SigningKey::generate_ed25519("k").unwrap();
    let a = verifier(&key, &ev);
    let b = verifier(&key, &ev);
    let listener = RedisFinishListener::spawn(b.clone(), server.url(), &ev).unwrap();
    let sink = RedisFinishSink::builder(server.url())
        .timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let site_a = replica(a.clone(), Some(sink.clone())).await;
    wait_until(
        "the listener connects",
        Duration::from_secs(5),
        async || listener.is_caught_up(),
    )
    .await;

    server.stop();
    let v1 = Visitor::new(&key, &ev, "outage-session-000000001");
    let (status, took) = v1.buy(&site_a).await;
    assert_eq!(status, 200);
    assert!(
        took < Duration::from_secs(3),
        "the response waited {took:?}"
    );
    assert!(a.is_denied("outage-session-000000001"));
    assert_eq!((sink.recorded(), sink.failed()), (0, 1));
    wait_until("the listener notices", Duration::from_secs(5), async || {
        !listener.is_connected()
    })
    .await;

    server.restart();
    let v2 = Visitor::new(&key, &ev, "outage-session-000000002");
    // The sink's connection comes back by itself (the first write may still see the old connection fail).
    wait_until(
        "a finish is recorded again",
        Duration::from_secs(10),
        async || {
            let probe = Finish {
                session_id: "probe".into(),
                event: ev.clone(),
                seats: 0,
                at_ms: 0,
            };
            sink.record(&probe).await.is_ok()
        },
    )
    .await;
    assert_eq!(v2.buy(&site_a).await.0, 200);
    wait_until(
        "B refuses the second session",
        Duration::from_secs(3),
        async || b.is_denied("outage-session-000000002"),
    )
    .await;
    assert!(listener.is_connected());
    assert!(
        !b.is_denied("outage-session-000000001"),
        "that write was lost"
    );
}
