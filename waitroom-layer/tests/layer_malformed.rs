//! Malformed input thrown at the room layer over raw TCP (so nothing is cleaned up by a client library): bad
//! cookies (huge, non-UTF-8, wrong signature, duplicated), bad `Accept` headers, odd paths and methods. No
//! response may be a 5xx, and the server must keep answering (no panic took a connection task down).
//!
//! The header forms of an app's credentials (`X-Waitroom-Session` with `Authorization: Bearer`) have a table of
//! their own, with the outcome each must get: oversized, forged, duplicated, and the header next to a different
//! session cookie (the cookie wins: the header is not read when a session cookie is present).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use waitroom_layer::{ManualClock, WaitingRoom, WaitingRoomLayer};

/// A row of the table: name, method, request target, header lines.
type Case<'a> = (&'a str, &'a str, Vec<u8>, Vec<Vec<u8>>);

async fn raw(addr: &str, head: &[u8]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    s.write_all(head).await.ok()?;
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.get(9..12)?.parse().ok()?;
    Some((code, text))
}

fn request(method: &str, target: &[u8], headers: &[Vec<u8>]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(method.as_bytes());
    r.push(b' ');
    r.extend_from_slice(target);
    r.extend_from_slice(b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for h in headers {
        r.extend_from_slice(h);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"\r\n");
    r
}

fn h(s: impl AsRef<[u8]>) -> Vec<u8> {
    s.as_ref().to_vec()
}

#[tokio::test]
async fn malformed_input_never_gets_a_5xx_or_a_panic() {
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("ev")
        .capacity(1)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .route("/checkout", get(|| async { "seat map" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // A genuine session cookie and token to garble.
    let (_, first) = raw(&addr, &request("GET", b"/checkout", &[]))
        .await
        .unwrap();
    let session = first
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: waitroom_session="))
        .and_then(|l| l.split(';').next())
        .unwrap()
        .to_owned();
    let token = room
        .issue_token(session.split('.').next().unwrap())
        .unwrap();
    let sid = session.split('.').next().unwrap().to_owned();
    let forged = format!("{sid}.1.{}", "B".repeat(43));
    let huge = "x".repeat(60_000);
    let none_token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.";

    let cookie = |v: &str| h(format!("Cookie: {v}"));
    let table: Vec<Case> = vec![
        (
            "huge cookie",
            "GET",
            h("/checkout"),
            vec![cookie(&format!("waitroom_session={huge}"))],
        ),
        (
            "huge token",
            "GET",
            h("/checkout"),
            vec![cookie(&format!(
                "waitroom_session={session}; waitroom_token={huge}"
            ))],
        ),
        (
            "many cookie pairs",
            "GET",
            h("/checkout"),
            vec![cookie(&"a=b; ".repeat(2_000))],
        ),
        (
            "non-UTF-8 cookie",
            "GET",
            h("/checkout"),
            vec![h(b"Cookie: waitroom_session=\xff\xfe\xfd")],
        ),
        (
            "non-UTF-8 token",
            "GET",
            h("/checkout"),
            vec![
                [
                    h(format!(
                        "Cookie: waitroom_session={session}; waitroom_token="
                    )),
                    h(b"\xc3\x28"),
                ]
                .concat(),
            ],
        ),
        (
            "wrong signature",
            "GET",
            h("/checkout"),
            vec![cookie(&format!(
                "waitroom_session={forged}; waitroom_token={token}"
            ))],
        ),
        (
            "raw session id",
            "GET",
            h("/checkout"),
            vec![cookie(&format!(
                "waitroom_session={sid}; waitroom_token={token}"
            ))],
        ),
        (
            "empty values",
            "GET",
            h("/checkout"),
            vec![cookie("waitroom_session=; waitroom_token=; =; ;;")],
        ),
        (
            "quoted",
            "GET",
            h("/checkout"),
            vec![cookie(&format!("waitroom_session=\"{session}\""))],
        ),
        (
            "duplicated session",
            "GET",
            h("/checkout"),
            vec![cookie(&format!(
                "waitroom_session={forged}; waitroom_session={session}"
            ))],
        ),
        (
            "duplicated headers",
            "GET",
            h("/checkout"),
            (0..50)
                .map(|_| cookie(&format!("waitroom_session={session}; waitroom_token=a.b.c")))
                .collect(),
        ),
        (
            "alg none token",
            "GET",
            h("/checkout"),
            vec![cookie(&format!(
                "waitroom_session={session}; waitroom_token={none_token}"
            ))],
        ),
        (
            "garbage bearer",
            "GET",
            h("/checkout"),
            vec![
                cookie(&format!("waitroom_session={session}")),
                h("Authorization: Bearer ...."),
            ],
        ),
        (
            "non-UTF-8 authorization",
            "GET",
            h("/checkout"),
            vec![h(b"Authorization: Bearer \xff")],
        ),
        (
            "non-UTF-8 accept",
            "GET",
            h("/checkout"),
            vec![h(b"Accept: application/json\xff")],
        ),
        (
            "huge accept",
            "GET",
            h("/checkout"),
            vec![h(format!("Accept: {}", "application/json,".repeat(500)))],
        ),
        (
            "odd accept",
            "GET",
            h("/checkout"),
            vec![h("Accept: application/json;q=banana, */*;q=-1")],
        ),
        (
            "many accepts",
            "GET",
            h("/waitroom/status"),
            (0..20).map(|_| h("Accept: application/json")).collect(),
        ),
        ("nul in path", "GET", h("/checkout/%00"), vec![]),
        ("bad escape in path", "GET", h("/checkout/%ff%"), vec![]),
        (
            "dot segments",
            "GET",
            h("/%2e%2e/checkout/../../etc/passwd"),
            vec![],
        ),
        ("double slashes", "GET", h("//checkout//x"), vec![]),
        ("base with slash", "GET", h("/waitroom/"), vec![]),
        ("status with slash", "GET", h("/waitroom/status/"), vec![]),
        (
            "double slash endpoint",
            "GET",
            h("/waitroom//status"),
            vec![],
        ),
        (
            "bad return_to escape",
            "GET",
            h("/waitroom/status?return_to=%ZZ"),
            vec![],
        ),
        (
            "off-site return_to",
            "GET",
            h("/waitroom/join?return_to=//evil.example"),
            vec![],
        ),
        (
            "header injection return_to",
            "GET",
            h("/waitroom/join?return_to=/%0d%0aSet-Cookie:%20x=1"),
            vec![],
        ),
        (
            "long path",
            "GET",
            h(format!("/checkout/{}", "a".repeat(8_000))),
            vec![],
        ),
        (
            "long query",
            "GET",
            h(format!("/waitroom/join?return_to={}", "%2F".repeat(3_000))),
            vec![],
        ),
        ("asterisk", "OPTIONS", h("*"), vec![]),
        (
            "absolute form",
            "GET",
            h("http://localhost/checkout"),
            vec![],
        ),
        ("odd method", "BLAH", h("/checkout"), vec![]),
        ("delete status", "DELETE", h("/waitroom/status"), vec![]),
        (
            "post jwks",
            "POST",
            h("/waitroom/jwks.json"),
            vec![h("Content-Length: 0")],
        ),
        (
            "unknown endpoint",
            "GET",
            h("/waitroom/../waitroom/x"),
            vec![],
        ),
    ];
    for (name, method, target, headers) in table {
        let (code, text) = raw(&addr, &request(method, &target, &headers))
            .await
            .unwrap_or_else(|| panic!("{name}: no response"));
        assert!(code < 500, "{name}: {code}\n{text}");
        assert!(
            !text.to_ascii_lowercase().contains("set-cookie: x=1"),
            "{name}: header injection"
        );
        assert!(
            !text.contains("evil.example\r\n"),
            "{name}: off-site redirect"
        );
    }
    // Still standing.
    let (code, text) = raw(&addr, &request("GET", b"/", &[])).await.unwrap();
    assert_eq!(code, 200);
    assert!(text.ends_with("home"));
}

#[tokio::test]
async fn the_session_header_passes_only_in_its_one_good_form() {
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("ev")
        .capacity(1)
        // This test follows sessions through the line; going straight in has its own tests (layer_http).
        .straight_in(false)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // Two genuine sessions (as an app gets them: no cookie sent); a token for the first.
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let (_, text) = raw(
            &addr,
            &request("GET", b"/checkout", &[h("Accept: application/json")]),
        )
        .await
        .unwrap();
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix("waitroom-session: "))
            .expect("the session value in a header")
            .to_owned();
        sessions.push(value);
    }
    let (session, other) = (&sessions[0], &sessions[1]);
    let sid = session.split('.').next().unwrap();
    let token = room.issue_token(sid).unwrap();
    let bearer = h(format!("Authorization: Bearer {token}"));
    let header = |v: &str| h(format!("X-Waitroom-Session: {v}"));
    let (head, tag) = session.rsplit_once('.').unwrap();
    let flipped = if tag.starts_with('A') { "B" } else { "A" };
    let forged = format!("{head}.{flipped}{}", &tag[1..]);

    // name, header lines, whether the request reaches the handler.
    let table: Vec<(&str, Vec<Vec<u8>>, bool)> = vec![
        ("the good form", vec![header(session), bearer.clone()], true),
        (
            "the good form, padded with spaces",
            vec![header(&format!("  {session}  ")), bearer.clone()],
            true,
        ),
        ("no bearer", vec![header(session)], false),
        ("a bearer without the header", vec![bearer.clone()], false),
        (
            "oversized header",
            vec![
                header(&format!("{session}{}", "A".repeat(200))),
                bearer.clone(),
            ],
            false,
        ),
        (
            "huge header",
            vec![header(&"A".repeat(60_000)), bearer.clone()],
            false,
        ),
        ("forged tag", vec![header(&forged), bearer.clone()], false),
        ("unsigned id", vec![header(sid), bearer.clone()], false),
        (
            "non-UTF-8 header",
            vec![
                [h("X-Waitroom-Session: "), h(b"\xff\xfe")].concat(),
                bearer.clone(),
            ],
            false,
        ),
        (
            "duplicated header, same value",
            vec![header(session), header(session), bearer.clone()],
            false,
        ),
        (
            "duplicated header, forged first",
            vec![header(&forged), header(session), bearer.clone()],
            false,
        ),
        (
            "header plus a different session cookie (the cookie wins)",
            vec![
                header(session),
                h(format!("Cookie: waitroom_session={other}")),
                bearer.clone(),
            ],
            false,
        ),
        (
            "header plus a forged session cookie (the cookie wins)",
            vec![
                header(session),
                h(format!("Cookie: waitroom_session={forged}")),
                bearer.clone(),
            ],
            false,
        ),
        (
            "header plus the same session cookie",
            vec![
                header(session),
                h(format!("Cookie: waitroom_session={session}")),
                bearer.clone(),
            ],
            true,
        ),
        (
            "another session's header",
            vec![header(other), bearer.clone()],
            false,
        ),
    ];
    for (name, mut headers, passes) in table {
        headers.push(h("Accept: application/json"));
        let (code, text) = raw(&addr, &request("GET", b"/checkout", &headers))
            .await
            .unwrap_or_else(|| panic!("{name}: no response"));
        assert!(code < 500, "{name}: {code}\n{text}");
        assert_eq!(text.ends_with("seat map"), passes, "{name}: {code}\n{text}");
        if !passes {
            assert!(
                !text.contains("waitroom-token:"),
                "{name}: a token handed out"
            );
        }
    }
}
