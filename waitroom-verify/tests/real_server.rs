//! The layer in front of a real axum server on an ephemeral port, driven over HTTP.

use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use waitroom_verify::{
    Admission, Claims, Clock, FINISH_HEADER, KeySet, ManualClock, SigningKey, Verifier,
    VerifyLayer, parse_finish_command,
};

const SID: &str = "real-server-session-0001";

#[tokio::test]
async fn order_flow_over_http() {
    // The room publishes its JWKS; the order service loads it.
    let key = SigningKey::generate_ed25519("2025-06").unwrap();
    let jwks = KeySet::from(&key).to_jwks_json();
    let clock = ManualClock::starting_now();
    let verifier = Verifier::builder()
        .keys(KeySet::from_jwks_json(&jwks).unwrap())
        .issuer("room")
        .audience("final-2025")
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();

    async fn me(Extension(a): Extension<Admission>) -> Json<serde_json::Value> {
        Json(
            serde_json::json!({ "session": a.session_id(), "event": a.event(), "max_qty": a.max_qty() }),
        )
    }
    async fn order(Extension(a): Extension<Admission>) -> &'static str {
        a.finish_with_seats(a.max_qty().unwrap_or(1));
        "ordered"
    }
    let app = Router::new()
        .route("/me", get(me))
        .route("/order", post(order))
        .layer(VerifyLayer::new(verifier).join_url("/waitroom/join"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let token = key
        .sign(
            &Claims::new(
                "room",
                "final-2025",
                SID,
                clock.now_secs(),
                Duration::from_secs(600),
            )
            .with_max_qty(2),
        )
        .unwrap();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = |p: &str| format!("http://{addr}{p}");
    let cookie = format!("waitroom_session={SID}.3.c2lnbmF0dXJl; waitroom_token={token}");

    let res = client
        .get(url("/me"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({"session": SID, "event": "final-2025", "max_qty": 2})
    );

    let res = client
        .get(url("/me?from=mail"))
        .header(
            "cookie",
            format!("waitroom_session=someone-else-0000000000; waitroom_token={token}"),
        )
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(
        res.headers()["location"],
        "/waitroom/join?return_to=%2Fme%3Ffrom%3Dmail"
    );

    let res = client
        .post(url("/order"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        parse_finish_command(&res.headers()[FINISH_HEADER.as_str()]),
        Some(2)
    );

    let res = client
        .get(url("/me"))
        .bearer_auth(&token)
        .header("x-waitroom-session", SID)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"],
        "Bearer error=\"invalid_token\""
    );
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["reason"], "finished");
}
