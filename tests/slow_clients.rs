//! Issue 21, finding 6: the demo's servers (`waitroom::demo::serve`, under the all-in-one demo, the gateway and the
//! order service) close connections that send their request head too slowly or not at all, close idle kept-alive
//! connections, and serve at most `max_connections` at once. Real TCP against the real server; every wait is
//! bounded and fails with a message (no sleeps, no timed asserts: the bounds are many times the timeout).

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use waitroom::demo::{ServerLimits, serve};

/// The header-read timeout of these tests.
const TIMEOUT: Duration = Duration::from_secs(1);
/// Far longer than the timeout: a server that never closes fails here, not by hanging.
const BOUND: Duration = Duration::from_secs(15);

async fn server(max_connections: usize) -> String {
    let limits = ServerLimits {
        header_read_timeout: TIMEOUT,
        max_connections,
        ..ServerLimits::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let app = Router::new().route("/", get(|| async { "ok" }));
    tokio::spawn(async move { serve(listener, app, limits).await.unwrap() });
    addr
}

/// Reads until the server closes the connection (within `BOUND`); returns what it sent.
async fn until_closed(conn: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let read = tokio::time::timeout(BOUND, conn.read_to_end(&mut got)).await;
    assert!(
        read.is_ok(),
        "the server kept the connection open for {BOUND:?}"
    );
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
    let addr = server(16).await;
    let mut conn = TcpStream::connect(&addr).await.unwrap();
    let said = until_closed(&mut conn).await;
    assert!(!said.contains("200 OK"), "{said}");
}

#[tokio::test]
async fn a_connection_that_sends_its_head_a_byte_at_a_time_is_closed() {
    let addr = server(16).await;
    let mut conn = TcpStream::connect(&addr).await.unwrap();
    let head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    // One byte per tenth of the timeout; each pause is a bounded wait for the server to close, not a sleep.
    let mut sent = 0;
    let mut buf = [0u8; 256];
    let closed = loop {
        if sent == head.len() {
            break false;
        }
        if conn.write_all(&head[sent..=sent]).await.is_err() {
            break true;
        }
        sent += 1;
        match tokio::time::timeout(TIMEOUT / 10, conn.read(&mut buf)).await {
            Err(_) => continue,
            Ok(Ok(0) | Err(_)) => break true,
            Ok(Ok(_)) => {
                // An error response before the close is fine; the close must follow.
                until_closed(&mut conn).await;
                break true;
            }
        }
    };
    assert!(
        closed,
        "the whole head ({} bytes, {:?} at this pace) went through without the server closing",
        head.len(),
        TIMEOUT / 10 * head.len() as u32
    );
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let addr = server(16).await;
    let mut conn = TcpStream::connect(&addr).await.unwrap();
    conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(BOUND, conn.read(&mut buf))
        .await
        .expect("no answer")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // Kept alive, then idle: closed.
    until_closed(&mut conn).await;
}

#[tokio::test]
async fn past_the_connection_limit_a_new_connection_waits_for_one_to_close() {
    let addr = server(2).await;
    let mut idle = [
        TcpStream::connect(&addr).await.unwrap(),
        TcpStream::connect(&addr).await.unwrap(),
    ];
    // A third asks at once; it is served only once one of the idle two is closed (header timeout).
    let mut third = TcpStream::connect(&addr).await.unwrap();
    third
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let mut closed = 0;
    for c in &mut idle {
        // Closed: the read answers at once with the end of the stream (an open one would block).
        let mut b = [0u8; 16];
        if matches!(c.try_read(&mut b), Ok(0)) {
            closed += 1;
        }
    }
    assert!(
        closed >= 1,
        "the third connection was served while both idle ones were still open"
    );
}
