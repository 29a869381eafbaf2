//! Benchmarks: `cargo bench -p waitroom-verify`.
//!
//! - `verify/full_*`: a full check (header, signature, claims, time, deny list) with the cache off.
//! - `verify/cached_eddsa`: a repeat presentation of a token already verified (cache hit + time and deny checks).
//! - `sign/*`: the room's side, for scale.
//! - `layer/*`: a whole request through an axum `Router` (oneshot), bare vs. behind `VerifyLayer` (cached token),
//!   and a refused request.

use std::hint::black_box;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use criterion::{Criterion, criterion_group, criterion_main};
use http::Request;
use tower::ServiceExt;
use waitroom_verify::{Claims, Clock, SigningKey, SystemClock, Verifier, VerifyLayer};

const SID: &str = "bench-session-0123456789";

fn claims() -> Claims {
    Claims::new(
        "room",
        "sale",
        SID,
        SystemClock.now_secs(),
        Duration::from_secs(600),
    )
    .with_max_qty(4)
}

fn verifier(key: &SigningKey, cache: u64) -> Verifier {
    Verifier::builder()
        .keys(key)
        .issuer("room")
        .audience("sale")
        .cache_capacity(cache)
        .build()
        .unwrap()
}

fn verify(c: &mut Criterion) {
    let mut g = c.benchmark_group("verify");
    for key in [
        SigningKey::generate_ed25519("ed").unwrap(),
        SigningKey::generate_es256("es").unwrap(),
        SigningKey::hs256("hs", [7u8; 32]).unwrap(),
    ] {
        let token = key.sign(&claims()).unwrap();
        let v = verifier(&key, 0);
        let name = format!("full_{}", key.algorithm().as_str().to_ascii_lowercase());
        g.bench_function(name, |b| {
            b.iter(|| v.verify_for_session_shared(black_box(&token), SID).unwrap())
        });
    }
    let key = SigningKey::generate_ed25519("ed").unwrap();
    let token = key.sign(&claims()).unwrap();
    let v = verifier(&key, 10_000);
    v.verify(&token).unwrap();
    g.bench_function("cached_eddsa", |b| {
        b.iter(|| v.verify_for_session_shared(black_box(&token), SID).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("sign");
    let c = claims();
    g.bench_function("eddsa", |b| b.iter(|| key.sign(black_box(&c)).unwrap()));
    g.finish();
}

fn layer(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let key = SigningKey::generate_ed25519("ed").unwrap();
    let token = key.sign(&claims()).unwrap();
    let cookie = format!("waitroom_session={SID}.12.mac; waitroom_token={token}");
    async fn handler() -> &'static str {
        "ok"
    }
    let bare = Router::new().route("/buy", get(handler));
    let guarded = Router::new()
        .route("/buy", get(handler))
        .layer(VerifyLayer::new(verifier(&key, 10_000)));
    let request = |cookie: &str| {
        Request::get("/buy")
            .header("cookie", cookie)
            .body(Body::empty())
            .unwrap()
    };
    let run = |router: &Router, cookie: &str, want: u16| {
        let res = rt
            .block_on(router.clone().oneshot(request(cookie)))
            .unwrap();
        assert_eq!(res.status(), want);
    };
    run(&guarded, &cookie, 200); // warm the cache

    let mut g = c.benchmark_group("layer");
    g.bench_function("bare_handler", |b| b.iter(|| run(&bare, &cookie, 200)));
    g.bench_function("verify_layer_cached", |b| {
        b.iter(|| run(&guarded, &cookie, 200))
    });
    g.bench_function("verify_layer_refused", |b| {
        b.iter(|| run(&guarded, "waitroom_token=x.y.z", 401))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = verify, layer
}
criterion_main!(benches);
