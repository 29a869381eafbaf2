//! The room gateway of the split deployment: the room in front, every request forwarded over HTTP to the order
//! service behind it.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use waitroom_layer::{Inventory, WaitingRoom};

/// The largest request body forwarded (the order service's forms are tiny).
pub const MAX_FORWARDED_BODY: usize = 64 * 1024;
/// The largest response body forwarded.
pub const MAX_RESPONSE_BODY: usize = 8 * 1024 * 1024;

/// Where the gateway forwards to.
#[derive(Debug, Clone)]
pub struct Upstream {
    client: reqwest::Client,
    base: String,
}

impl Upstream {
    /// The order service at `base` (`http://127.0.0.1:3001`). Redirects are passed back to the browser, never
    /// followed; no cookies are kept.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(base: impl Into<String>) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Upstream {
            client,
            base: base.into().trim_end_matches('/').to_owned(),
        })
    }

    /// The upstream's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }
}

/// Hop-by-hop headers (RFC 9110 section 7.6.1) and those the client library sets itself.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if !hop_by_hop(name) {
            to.append(name.clone(), value.clone());
        }
    }
}

fn bad_gateway(why: &str) -> Response {
    tracing::warn!(why, "upstream failed");
    (
        StatusCode::BAD_GATEWAY,
        [(header::CACHE_CONTROL, "no-store")],
        "The order service is not answering; try again in a moment.",
    )
        .into_response()
}

async fn forward(State(up): State<Upstream>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_FORWARDED_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = HeaderMap::new();
    copy_headers(&parts.headers, &mut headers);
    if let Some(host) = parts.headers.get(header::HOST) {
        headers.insert("x-forwarded-host", host.clone());
    }
    let sent = up
        .client
        .request(parts.method, format!("{}{path}", up.base))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let res = match sent {
        Ok(r) => r,
        Err(e) => return bad_gateway(&e.to_string()),
    };
    let status = res.status();
    let mut out_headers = HeaderMap::new();
    copy_headers(res.headers(), &mut out_headers);
    if res
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BODY as u64)
    {
        return bad_gateway("response too large");
    }
    let bytes = match res.bytes().await {
        Ok(b) => b,
        Err(e) => return bad_gateway(&e.to_string()),
    };
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    *response.headers_mut() = out_headers;
    response
}

/// The gateway's app: `GET /healthz` answered here, everything else forwarded to `upstream`. Put the room in
/// front with `.layer(room_layer(room))` or [`serve_behind_room`](super::serve_behind_room): the room answers
/// `/waitroom/*`, holds protected paths, and consumes the finish header (`Waitroom-Command`) the order service puts
/// on its responses.
pub fn router(upstream: Upstream) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .fallback(forward)
        .with_state(upstream)
}

/// Reads the order service's seat counts (`GET /api/inventory`) every `every` and reports them to the room when
/// they change. Several gateways may all do it: they report the same counts. Abort the returned handle to stop.
///
/// # Panics
/// Outside a Tokio runtime.
pub fn spawn_inventory_poll(
    room: &WaitingRoom,
    upstream: Upstream,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    let room = room.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<Inventory> = None;
        let url = format!("{}/api/inventory", upstream.base);
        loop {
            tick.tick().await;
            let counts = match upstream.client.get(&url).send().await {
                Ok(r) if r.status().is_success() => r.json::<Inventory>().await.ok(),
                _ => None,
            };
            let Some(counts) = counts else { continue };
            if last != Some(counts) {
                match room.set_inventory(counts).await {
                    Ok(_) => last = Some(counts),
                    Err(e) => tracing::warn!(error = %e, "could not report the seats to the room"),
                }
            }
        }
    })
}
