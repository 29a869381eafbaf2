//! `JwksSource` against a real HTTP server: a small axum app serving a JWKS document the test changes as it goes,
//! and counting the requests it serves.

use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::time::Instant;
use waitroom_verify::jwks::{JwksError, JwksHandle, JwksSource};
use waitroom_verify::{
    Claims, Clock, KeySet, Refusal, SigningKey, SystemClock, Verifier, VerifierBuilder,
};

const JWKS_PATH: &str = "/waitroom/jwks.json";
/// The longest any test waits for something that should happen; a failure says what did not.
const PATIENCE: Duration = Duration::from_secs(10);

/// The room's JWKS endpoint: the document it serves now, how many requests it answered, and how many of the next
/// ones it answers `503`.
#[derive(Default)]
struct Room {
    doc: Mutex<String>,
    served: AtomicUsize,
    fail_next: AtomicUsize,
}

impl Room {
    fn publish(&self, doc: impl Into<String>) {
        *self.doc.lock().unwrap() = doc.into();
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

async fn jwks(State(room): State<Arc<Room>>) -> Response {
    room.served.fetch_add(1, Ordering::SeqCst);
    let failing = room
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if failing {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let doc = room.doc.lock().unwrap().clone();
    ([("content-type", "application/json")], doc).into_response()
}

/// Serves `room` on `listener`; returns the JWKS URL.
fn serve_on(room: &Arc<Room>, listener: tokio::net::TcpListener) -> String {
    let url = format!("http://{}{JWKS_PATH}", listener.local_addr().unwrap());
    let app = Router::new()
        .route(JWKS_PATH, get(jwks))
        .with_state(Arc::clone(room));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// A room publishing `doc` on a free port, and its JWKS URL.
async fn room_serving(doc: String) -> (Arc<Room>, String) {
    let room = Arc::new(Room::default());
    room.publish(doc);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = serve_on(&room, listener);
    (room, url)
}

fn key(kid: &str) -> SigningKey {
    SigningKey::generate_ed25519(kid).unwrap()
}

fn jwks_of(keys: &[&SigningKey]) -> String {
    KeySet::from_keys(keys.iter().map(|k| k.verifying_key()))
        .unwrap()
        .to_jwks_json()
}

fn token(key: &SigningKey) -> String {
    let claims = Claims::new(
        "room",
        "sale",
        "session-0123456789ab",
        SystemClock.now_secs(),
        Duration::from_secs(600),
    );
    key.sign(&claims).unwrap()
}

fn verifier_builder() -> VerifierBuilder {
    Verifier::builder().issuer("room").audience("sale")
}

fn kids(handle: &JwksHandle) -> Vec<String> {
    let mut kids: Vec<String> = handle.verifier().keys().kids().map(str::to_owned).collect();
    kids.sort();
    kids
}

/// Polls `done` until it holds; fails the test with `what` if it does not within [`PATIENCE`].
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_on_the_period() {
    let (k1, k2) = (key("k1"), key("k2"));
    let (room, url) = room_serving(jwks_of(&[&k1])).await;
    let handle = JwksSource::new(&url)
        .refresh_every(Duration::from_millis(100))
        .min_refetch_interval(Duration::from_secs(3600))
        .start(verifier_builder())
        .await
        .unwrap();
    assert_eq!(kids(&handle), ["k1"]);
    assert!(handle.verifier().verify(&token(&k1)).is_ok());

    // The room rotates; no token with the new kid is shown, so only the period can bring it.
    room.publish(jwks_of(&[&k2]));
    eventually("the periodic fetch brings k2", || kids(&handle) == ["k2"]).await;
    assert!(handle.verifier().verify(&token(&k2)).is_ok());
    assert_eq!(
        handle.verifier().verify(&token(&k1)).unwrap_err(),
        Refusal::UnknownKid
    );
}

#[tokio::test]
async fn an_unknown_kid_fetches_the_keys_again_at_most_once_per_min_interval() {
    let (k1, k2, stranger) = (key("k1"), key("k2"), key("stranger"));
    let (room, url) = room_serving(jwks_of(&[&k1])).await;
    let min_interval = Duration::from_millis(300);
    let handle = JwksSource::new(&url)
        .refresh_every(Duration::from_secs(3600))
        .min_refetch_interval(min_interval)
        .start(verifier_builder())
        .await
        .unwrap();
    let verifier = handle.verifier().clone();
    assert_eq!(room.served(), 1, "one fetch at start");

    // The room adds k2 and signs with it: the first such token is refused, and makes the source look again.
    room.publish(jwks_of(&[&k1, &k2]));
    let t2 = token(&k2);
    assert_eq!(verifier.verify(&t2).unwrap_err(), Refusal::UnknownKid);
    eventually("the unknown kid brings k2", || verifier.verify(&t2).is_ok()).await;

    // A stream of tokens with a kid the room never published: fetches keep at least `min_interval` apart.
    let t_stranger = token(&stranger);
    let (start, served_before) = (Instant::now(), room.served());
    let deadline = start + PATIENCE;
    while start.elapsed() < Duration::from_millis(1500) || room.served() < served_before + 2 {
        assert!(
            Instant::now() < deadline,
            "unknown kids made fewer than two fetches in {PATIENCE:?}"
        );
        assert_eq!(
            verifier.verify(&t_stranger).unwrap_err(),
            Refusal::UnknownKid
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (elapsed, fetched) = (start.elapsed(), room.served() - served_before);
    // One fetch may already be on its way at the start, then one per interval at most.
    let allowed = (elapsed.as_millis() / min_interval.as_millis()) as usize + 2;
    assert!(
        fetched <= allowed,
        "{fetched} fetches in {elapsed:?} with a minimum interval of {min_interval:?}"
    );
    assert!(verifier.verify(&token(&k1)).is_ok(), "the keys are kept");
}

#[tokio::test]
async fn start_tries_again_until_the_room_answers() {
    let k1 = key("k1");
    let (room, url) = room_serving(jwks_of(&[&k1])).await;
    room.fail_next.store(2, Ordering::SeqCst);
    let handle = JwksSource::new(&url)
        .start_retry(Duration::from_millis(10), Duration::from_millis(50))
        .start_timeout(PATIENCE)
        .start(verifier_builder())
        .await
        .unwrap();
    assert_eq!(room.served(), 3, "two 503s, then the document");
    assert_eq!(kids(&handle), ["k1"]);
}

#[tokio::test]
async fn start_waits_for_a_room_that_is_not_listening_yet() {
    let k1 = key("k1");
    // A free port, closed again: nothing listens there until the room comes up below.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{addr}{JWKS_PATH}");
    let starting = tokio::spawn(
        JwksSource::new(&url)
            .start_retry(Duration::from_millis(20), Duration::from_millis(100))
            .start_timeout(PATIENCE)
            .start(verifier_builder()),
    );
    // Pacing only: let a few attempts meet a closed port first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!starting.is_finished(), "start gave up on a closed port");

    let room = Arc::new(Room::default());
    room.publish(jwks_of(&[&k1]));
    serve_on(&room, tokio::net::TcpListener::bind(addr).await.unwrap());
    let handle = tokio::time::timeout(PATIENCE, starting)
        .await
        .expect("start did not finish once the room listened")
        .unwrap()
        .unwrap();
    assert_eq!(kids(&handle), ["k1"]);
    assert_eq!(room.served(), 1);
}

#[tokio::test]
async fn start_gives_up_at_its_deadline_and_keeps_the_last_failure_as_source() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let started = tokio::time::timeout(
        PATIENCE,
        JwksSource::new(format!("http://user:secret@{addr}{JWKS_PATH}?token=secret"))
            .start_retry(Duration::from_millis(10), Duration::from_millis(20))
            .start_timeout(Duration::from_millis(300))
            .start(verifier_builder()),
    )
    .await
    .expect("start ran past its deadline");
    let e = started.unwrap_err();
    let JwksError::StartTimeout { last, .. } = &e else {
        panic!("expected StartTimeout, got {e:?}");
    };
    assert!(matches!(**last, JwksError::Fetch { .. }), "{last:?}");
    let fetch = e.source().expect("the last failure is the source");
    assert!(
        fetch.source().is_some(),
        "the reqwest error is kept under the fetch error"
    );
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    assert!(
        !text.contains("secret"),
        "credentials in the error chain: {text}"
    );
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_current_keys() {
    let (k1, k2) = (key("k1"), key("k2"));
    let (room, url) = room_serving(jwks_of(&[&k1])).await;
    let handle = JwksSource::new(&url)
        .refresh_every(Duration::from_millis(50))
        .min_refetch_interval(Duration::from_millis(50))
        .start(verifier_builder())
        .await
        .unwrap();

    room.publish("not a JWKS");
    let served = room.served();
    eventually("two fetches of the broken document", || {
        room.served() >= served + 2
    })
    .await;
    assert_eq!(kids(&handle), ["k1"]);
    assert!(handle.verifier().verify(&token(&k1)).is_ok());

    room.publish(r#"{"keys":[]}"#);
    let served = room.served();
    eventually("two fetches of the empty document", || {
        room.served() >= served + 2
    })
    .await;
    assert_eq!(kids(&handle), ["k1"]);

    room.publish(jwks_of(&[&k2]));
    eventually("the mended document brings k2", || kids(&handle) == ["k2"]).await;
}

#[tokio::test]
async fn the_refresh_task_stops_when_its_handle_is_dropped() {
    let (k0, k1) = (key("k0"), key("k1"));
    let (room, url) = room_serving(jwks_of(&[&k1])).await;
    let period = Duration::from_millis(20);
    // A verifier built beforehand with keys of its own: `start_with` replaces them.
    let verifier = verifier_builder().keys(&k0).build().unwrap();
    let handle = JwksSource::new(&url)
        .refresh_every(period)
        .start_with(verifier.clone())
        .await
        .unwrap();
    assert_eq!(kids(&handle), ["k1"]);
    eventually("the task fetches on its period", || room.served() >= 4).await;

    drop(handle);
    let at_drop = room.served();
    // Fifty periods: a running task would fetch about fifty times; an aborted one at most the fetch in flight.
    let watch_until = Instant::now() + period * 50;
    while Instant::now() < watch_until {
        assert!(
            room.served() <= at_drop + 1,
            "fetched {} times after the handle was dropped",
            room.served() - at_drop
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        verifier.verify(&token(&k1)).is_ok(),
        "the verifier keeps its keys"
    );
}
