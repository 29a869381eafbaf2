//! The whole layer, driven in process with `tower::ServiceExt::oneshot`, against a bare handler in the same run:
//! - `status_poll`: a waiting session polls `GET /waitroom/status` (answered from memory: the line number is in
//!   its signed cookie);
//! - `pass_through`: an admitted session's request with a valid token reaches the handler, through the room layer
//!   alone and through the room layer then a `VerifyLayer` on the room's verifier (the order service's stack).
//!
//! `cargo bench -p waitroom-layer --bench layer -- --warm-up-time 1 --measurement-time 3`

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::header::{ACCEPT, COOKIE, SET_COOKIE};
use http::{HeaderValue, Request, Response};
use http_body_util::Full;
use tower::{ServiceBuilder, ServiceExt, service_fn};
use waitroom_layer::{ManualClock, WaitingRoom, WaitingRoomLayer};
use waitroom_verify::VerifyLayer;

async fn handler(_req: Request<Full<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"seat map"))))
}

fn cookies_of<B>(res: &Response<B>) -> Vec<String> {
    res.headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
        .collect()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (svc, both, waiting_cookie, admitted_cookie) = rt.block_on(async {
        let clock = ManualClock::starting_now();
        let room = WaitingRoom::builder("bench")
            .capacity(1)
            .idle_timeout(Duration::from_secs(600))
            .clock(Arc::new(clock))
            .background(false)
            .build()
            .await
            .unwrap();
        let layer = WaitingRoomLayer::builder(room.clone())
            .protect_prefix("/checkout")
            .build()
            .unwrap();
        let svc = ServiceBuilder::new()
            .layer(layer.clone())
            .service(service_fn(handler));
        // The order service's stack: the room, then the VerifyLayer on the room's own verifier.
        let both = ServiceBuilder::new()
            .layer(layer)
            .layer(VerifyLayer::new(room.verifier().clone()))
            .service(service_fn(handler));
        let get = |cookie: Option<&str>, path: &str| {
            let mut r = Request::get(path).body(Full::default()).unwrap();
            if let Some(c) = cookie {
                r.headers_mut()
                    .insert(COOKIE, HeaderValue::try_from(c).unwrap());
            }
            r
        };
        // The first session is let in and claims its pass; the second waits behind it.
        let res = svc.clone().oneshot(get(None, "/checkout")).await.unwrap();
        let mut admitted = cookies_of(&res);
        room.tick_now().await.unwrap();
        let res = svc
            .clone()
            .oneshot(get(Some(&admitted.join("; ")), "/waitroom/status"))
            .await
            .unwrap();
        admitted.extend(cookies_of(&res));
        let res = svc.clone().oneshot(get(None, "/checkout")).await.unwrap();
        let waiting = cookies_of(&res).join("; ");
        let admitted = admitted.join("; ");
        assert!(admitted.contains("waitroom_token="));
        (
            svc,
            both,
            HeaderValue::try_from(waiting).unwrap(),
            HeaderValue::try_from(admitted).unwrap(),
        )
    });
    let bare = service_fn(handler);

    let mut g = c.benchmark_group("status_poll");
    g.bench_function("bare_handler", |b| {
        b.to_async(&rt).iter(|| async {
            let mut r = Request::get("/waitroom/status")
                .body(Full::default())
                .unwrap();
            r.headers_mut().insert(COOKIE, waiting_cookie.clone());
            r.headers_mut()
                .insert(ACCEPT, HeaderValue::from_static("application/json"));
            black_box(bare.oneshot(r).await.unwrap())
        })
    });
    g.bench_function("waiting_session_via_layer", |b| {
        b.to_async(&rt).iter(|| async {
            let mut r = Request::get("/waitroom/status")
                .body(Full::default())
                .unwrap();
            r.headers_mut().insert(COOKIE, waiting_cookie.clone());
            r.headers_mut()
                .insert(ACCEPT, HeaderValue::from_static("application/json"));
            let res = svc.clone().oneshot(r).await.unwrap();
            debug_assert_eq!(res.headers()["waitroom-state"], "waiting");
            black_box(res)
        })
    });
    g.finish();

    let mut g = c.benchmark_group("pass_through");
    g.bench_function("bare_handler", |b| {
        b.to_async(&rt).iter(|| async {
            let mut r = Request::get("/checkout").body(Full::default()).unwrap();
            r.headers_mut().insert(COOKIE, admitted_cookie.clone());
            black_box(bare.oneshot(r).await.unwrap())
        })
    });
    g.bench_function("admitted_session_via_layer", |b| {
        b.to_async(&rt).iter(|| async {
            let mut r = Request::get("/checkout").body(Full::default()).unwrap();
            r.headers_mut().insert(COOKIE, admitted_cookie.clone());
            let res = svc.clone().oneshot(r).await.unwrap();
            debug_assert!(res.headers().get("waitroom-state").is_none());
            black_box(res)
        })
    });
    g.bench_function("admitted_session_via_both_layers", |b| {
        b.to_async(&rt).iter(|| async {
            let mut r = Request::get("/checkout").body(Full::default()).unwrap();
            r.headers_mut().insert(COOKIE, admitted_cookie.clone());
            let res = both.clone().oneshot(r).await.unwrap();
            debug_assert_eq!(res.status(), 200);
            black_box(res)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
