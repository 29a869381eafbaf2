//! What the HTTP tests share: a browser-like client and a server on an ephemeral loopback port.

use axum::Router;
use reqwest::redirect::Policy;

/// A browser: a cookie store, and redirects shown to the test rather than followed.
pub fn browser() -> reqwest::Client {
    reqwest::Client::builder()
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
