//! What the HTTP tests share: a browser-like client and a server on an ephemeral loopback port.

use axum::Router;
use reqwest::redirect::Policy;

/// What a browser's `Accept` says when it navigates (Chromium's): the room and the verify layer answer it with
/// pages and redirects (see `waitroom_verify::negotiate`); a request that sets its own `Accept` replaces it.
pub const BROWSER_ACCEPT: &str =
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

/// A browser: a cookie store, redirects shown to the test rather than followed, and a navigating browser's
/// `Accept`.
pub fn browser() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT,
        reqwest::header::HeaderValue::from_static(BROWSER_ACCEPT),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .cookie_store(true)
        .redirect(Policy::none())
        .build()
        .expect("a reqwest client")
}

/// Serves `app` on 127.0.0.1 at a free port, in the background; returns its base URL.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the server") });
    format!("http://{addr}")
}
