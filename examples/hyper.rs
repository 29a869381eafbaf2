//! The waiting room on plain hyper 1, no axum: a `service_fn` behind the room layer and a verify layer, served by
//! hyper-util's auto builder (HTTP/1 and HTTP/2) through `TowerToHyperService`. Request bodies are hyper's own
//! `Incoming`; responses are `Full<Bytes>` from the app, wrapped by the layers.
//!
//! ```text
//! cargo run --example hyper            # http://127.0.0.1:3000/checkout
//! ```
//!
//! Routes: `/` (open), `/checkout` (the seat map, behind the room), `POST /checkout/buy` (the order: the verify
//! layer checks the pass, the handler finishes the session), and the room's own `/waitroom/status`, `/join`,
//! `/jwks.json`, `/holding.js`. A browser goes through with cookies; an app with `X-Waitroom-Session` and
//! `Authorization: Bearer` (see the README's "Apps and API clients").

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
use waitroom::layer::{WaitingRoom, WaitingRoomLayer};
use waitroom::verify::{Admission, VerifyLayer};

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *res.status_mut() = status;
    res
}

/// The order handler, behind the verify layer: the admission is in the extensions; one seat, then finished.
async fn buy(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let Some(admission) = req.extensions().get::<Admission>().cloned() else {
        return Ok(text(StatusCode::UNAUTHORIZED, "no admission"));
    };
    if req.method() != Method::POST {
        return Ok(text(StatusCode::METHOD_NOT_ALLOWED, "POST to buy"));
    }
    admission.finish_with_seats(1);
    Ok(text(StatusCode::OK, "order placed"))
}

/// The whole site as one Tower service over hyper's types: the room layer outside, a verify layer on the order
/// route, plain `service_fn`s inside.
fn site(
    room: &WaitingRoom,
) -> impl Service<
    Request<Incoming>,
    Response = Response<impl http_body::Body<Data = Bytes, Error = Infallible> + Send + 'static>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    let orders = ServiceBuilder::new()
        .layer(VerifyLayer::new(room.verifier().clone()))
        .service(service_fn(buy));
    let app = service_fn(move |req: Request<Incoming>| {
        let orders = orders.clone();
        async move {
            match req.uri().path() {
                "/" => Ok(text(StatusCode::OK, "home, never queued")),
                "/checkout" => Ok(text(StatusCode::OK, "seat map")),
                "/checkout/buy" => orders.oneshot(req).await,
                _ => Ok(text(StatusCode::NOT_FOUND, "not found")),
            }
        }
    });
    let room_layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .expect("a valid layer");
    ServiceBuilder::new().layer(room_layer).service(app)
}

/// Serves `room`'s site on `listener` with hyper until the process ends.
async fn serve(listener: TcpListener, room: WaitingRoom) {
    let site = site(&room);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let service = TowerToHyperService::new(site.clone());
        tokio::spawn(async move {
            if let Err(e) = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                eprintln!("connection: {e}");
            }
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let room = WaitingRoom::builder("tour-2026")
        .display_name("The 2026 tour")
        .capacity(2)
        .idle_timeout(Duration::from_secs(120))
        .secure_cookies(false) // plain http on localhost
        .build()
        .await?;
    let listener = TcpListener::bind("127.0.0.1:3000").await?;
    println!("hyper + waitroom on http://127.0.0.1:3000/checkout");
    serve(listener, room).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::Value;
    use waitroom::layer::{ManualClock, SESSION_HEADER, SESSION_VALUE_HEADER, TOKEN_HEADER};
    use waitroom_testkit::http::browser;

    use super::*;

    async fn started(clock: &ManualClock) -> (String, WaitingRoom) {
        let room = WaitingRoom::builder("tour-2026")
            .capacity(1)
            .idle_timeout(Duration::from_secs(60))
            // The story walks through the line: nobody goes straight in on an empty room.
            .straight_in(false)
            .clock(Arc::new(clock.clone()))
            .background(false)
            .secure_cookies(false)
            .build()
            .await
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve(listener, room.clone()));
        (url, room)
    }

    #[tokio::test]
    async fn a_browser_and_an_app_each_go_from_the_line_to_a_finished_order_on_plain_hyper() {
        let clock = ManualClock::starting_now();
        let (url, room) = started(&clock).await;
        let at = |p: &str| format!("{url}{p}");

        // The open page is never queued.
        let b = browser();
        let res = b.get(at("/")).send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "home, never queued");

        // A browser: the holding page and a cookie, then admitted, then the order.
        let res = b.get(at("/checkout")).send().await.unwrap();
        assert_eq!(res.headers()["waitroom-state"], "waiting");
        assert!(res.text().await.unwrap().contains("<html"));
        room.tick_now().await.unwrap();
        let res = b
            .get(at("/waitroom/status"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        let json: Value = res.json().await.unwrap();
        assert_eq!(json["state"], "admitted");
        assert!(
            json.get("token").is_none(),
            "a browser's token stays a cookie"
        );
        let res = b.get(at("/checkout")).send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "seat map");
        let res = b.post(at("/checkout/buy")).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert!(
            res.headers()
                .get_all("set-cookie")
                .iter()
                .any(|c| c.to_str().unwrap().contains("Max-Age=0")),
            "the token cookie is cleared"
        );
        assert_eq!(res.text().await.unwrap(), "order placed");
        room.refresh().await.unwrap();
        assert_eq!(room.stats().active, 0);

        // An app with no cookie jar: join, poll, token, seat map, order, told it is finished.
        let app = reqwest::Client::new();
        let res = app
            .post(at("/waitroom/join"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        let json: Value = res.json().await.unwrap();
        let session = json["session"].as_str().unwrap().to_owned();
        room.tick_now().await.unwrap();
        let res = app
            .get(at("/waitroom/status"))
            .header("accept", "application/json")
            .header(SESSION_HEADER, &session)
            .send()
            .await
            .unwrap();
        assert!(res.headers().get("set-cookie").is_none());
        assert!(res.headers().contains_key(TOKEN_HEADER));
        let json: Value = res.json().await.unwrap();
        assert_eq!(json["state"], "admitted");
        assert!(json.get("session").is_none() || json["session"].is_string());
        let session = json["session"].as_str().map_or(session, str::to_owned);
        let token = json["token"].as_str().unwrap().to_owned();
        let res = app
            .get(at("/checkout"))
            .header(SESSION_HEADER, &session)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.text().await.unwrap(), "seat map");
        let res = app
            .post(at("/checkout/buy"))
            .header(SESSION_HEADER, &session)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["waitroom-state"], "finished");
        assert!(!res.headers().contains_key(SESSION_VALUE_HEADER));
        assert_eq!(res.text().await.unwrap(), "order placed");
        // The finished pass opens nothing.
        let res = app
            .get(at("/checkout"))
            .header("accept", "application/json")
            .header(SESSION_HEADER, &session)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 429);
    }
}
