//! The demo in a real browser: headless Chromium (Debian's `chromium`) loads the seat map while the room is full,
//! sees the holding page with its position, and, when a place frees, the page's own polling takes it on to the
//! seat map.
//!
//! Chromium is required: without it this test fails (`apt-get install chromium`; `.ci/run` installs it). Set
//! `CHROMIUM=/path/to/chrome` to use another binary, and `WAITROOM_UPDATE_SCREENSHOT=1` to rewrite
//! `docs/holding-page.png` from this run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::{self, Next};
use serde_json::Value;
use tokio::sync::Notify;
use waitroom::demo::{Shop, room_layer};
use waitroom::layer::WaitingRoom;
use waitroom::verify::VerifyLayer;
use waitroom_testkit::http::browser as client;

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(p);
    }
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "this test needs headless Chromium and found none: `apt-get install -y chromium` \
         (or set CHROMIUM=/path/to/chrome)"
    );
}

struct Store {
    url: String,
    room: WaitingRoom,
    /// Status polls seen, and a signal on each.
    polls: Arc<(AtomicUsize, Notify)>,
}

/// The demo storefront on an ephemeral port: capacity 1, the real clock and background door (every 50 ms), the
/// holding page polling every second.
async fn storefront() -> Store {
    let room = WaitingRoom::builder("tour-2026-stadium")
        .display_name("The 2026 Stadium Tour")
        .capacity(1)
        .max_qty(4)
        .poll_interval(Duration::from_secs(1))
        .tick_interval(Duration::from_millis(50))
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let shop = Shop::builder(48_000)
        .payment_latency(Duration::ZERO)
        .room(room.clone())
        .build();
    shop.report_inventory().await;
    let polls = Arc::new((AtomicUsize::new(0), Notify::new()));
    let seen = polls.clone();
    let app = shop
        .router(VerifyLayer::new(room.verifier().clone()))
        .layer(room_layer(room.clone()).unwrap())
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            let seen = seen.clone();
            async move {
                let poll = req.uri().path() == "/waitroom/status";
                let res = next.run(req).await;
                if poll {
                    seen.0.fetch_add(1, Ordering::SeqCst);
                    seen.1.notify_waiters();
                }
                res
            }
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Store { url, room, polls }
}

/// Joins with `c` at `url` + `path` and waits until the door lets it in (it then holds the only place, and the page
/// it gets contains `expect`).
async fn occupy(url: &str, path: &str, c: &reqwest::Client, expect: &str) {
    let res = c.get(format!("{url}{path}")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    for _ in 0..100 {
        let st: Value = c
            .get(format!("{url}/waitroom/status"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if st["state"] == "admitted" {
            let res = c.get(format!("{url}{path}")).send().await.unwrap();
            assert!(res.text().await.unwrap().contains(expect));
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the first visitor was never let in");
}

/// Runs headless Chromium with a fresh profile; returns its standard output.
async fn run_chromium(args: Vec<String>) -> String {
    let bin = chromium();
    let profile = std::env::temp_dir().join(format!(
        "waitroom-chromium-{}",
        WaitingRoom::new_session_id()
    ));
    let out = tokio::task::spawn_blocking(move || {
        let out = Command::new(&bin)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(&args)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "could not run {} ({e}): `apt-get install -y chromium`",
                    bin.display()
                )
            });
        let _ = std::fs::remove_dir_all(&profile);
        out
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of the element with `id`, from a dumped DOM.
fn text_of(dom: &str, id: &str) -> Option<String> {
    let start = dom.find(&format!("id=\"{id}\""))?;
    let open = start + dom[start..].find('>')? + 1;
    let close = open + dom[open..].find('<')?;
    Some(dom[open..close].trim().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holding_page_shows_a_position_and_moves_on_by_itself() {
    let _ = chromium();

    // The room is full: the browser is held, with its place in line.
    let s = storefront().await;
    let first = client();
    occupy(&s.url, "/seats", &first, "Choose your seats").await;
    let dom = run_chromium(vec![
        "--virtual-time-budget=2000".into(),
        "--dump-dom".into(),
        format!("{}/seats", s.url),
    ])
    .await;
    assert_eq!(
        text_of(&dom, "wr-headline").as_deref(),
        Some("You are in line"),
        "{dom}"
    );
    assert_eq!(text_of(&dom, "wr-position").as_deref(), Some("1"));
    assert!(!dom.contains("data-seat"), "no seat map while in line");

    // A screenshot of the holding page, with a crowd ahead of it.
    for _ in 0..39 {
        client()
            .get(format!("{}/seats", s.url))
            .send()
            .await
            .unwrap();
    }
    let dir = std::env::temp_dir().join(format!("waitroom-shot-{}", WaitingRoom::new_session_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shot = dir.join("holding-page.png");
    run_chromium(vec![
        "--window-size=1000,700".into(),
        "--virtual-time-budget=2000".into(),
        format!("--screenshot={}", shot.display()),
        format!("{}/seats", s.url),
    ])
    .await;
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "a real PNG"
    );
    if std::env::var_os("WAITROOM_UPDATE_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::copy(&shot, docs.join("holding-page.png")).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);

    // A fresh room, full again. This time the place frees while the browser's holding page is polling: as soon
    // as the page asks for news, the first visitor leaves. The page must see it is let in and go on by itself.
    let s = storefront().await;
    let first = client();
    occupy(&s.url, "/seats", &first, "Choose your seats").await;
    let polls_before = s.polls.0.load(Ordering::SeqCst);
    let leave = {
        let (polls, url, first) = (s.polls.clone(), s.url.clone(), first.clone());
        tokio::spawn(async move {
            polls.1.notified().await;
            let res = first
                .post(format!("{url}/leave"))
                .header("accept", "application/json")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
        })
    };
    let dom = run_chromium(vec![
        // Virtual time runs ahead of the wall clock while the page is idle; a long budget leaves the page many
        // polls (one a virtual second) after the place frees.
        "--virtual-time-budget=120000".into(),
        "--dump-dom".into(),
        format!("{}/seats", s.url),
    ])
    .await;
    leave.await.unwrap();
    assert!(
        s.polls.0.load(Ordering::SeqCst) > polls_before,
        "the holding page polled the room"
    );
    assert!(
        dom.contains("Choose your seats") && dom.contains("data-seat=\"0\""),
        "the page moved on to the seat map: {dom}"
    );
    assert_eq!(s.room.stats().active, 1, "the browser holds the place now");
}

/// A room whose holding page polls only every ten minutes on its own, with one more script on its page (from the
/// site itself, so the page's `Content-Security-Policy` stays the default): `/wake.js`, whose text the test sets.
/// Status polls are counted; while `fail_polls` is above zero, a poll is answered `502` (and the count goes down),
/// as a flaky network or proxy would.
struct Sleeper {
    url: String,
    polls: Arc<AtomicUsize>,
    fail_polls: Arc<AtomicUsize>,
    wake: Arc<std::sync::Mutex<String>>,
}

async fn sleeper() -> Sleeper {
    use axum::response::IntoResponse;
    use waitroom::layer::{DEFAULT_CSP, DEFAULT_TEMPLATE, PageTemplate, WaitingRoomLayer};
    let room = WaitingRoom::builder("sleepy-tab")
        .capacity(1)
        .poll_interval(Duration::from_secs(600))
        .tick_interval(Duration::from_millis(50))
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let template = DEFAULT_TEMPLATE.replace(
        "</body>",
        "<script src=\"/wake.js\" defer></script>\n</body>",
    );
    let page = PageTemplate::from_template(&template)
        .unwrap()
        .with_content_security_policy(DEFAULT_CSP)
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/seats")
        .page(page)
        .build()
        .unwrap();
    let wake = Arc::new(std::sync::Mutex::new(String::new()));
    let script = wake.clone();
    let polls = Arc::new(AtomicUsize::new(0));
    let fail_polls = Arc::new(AtomicUsize::new(0));
    let (seen, failing) = (polls.clone(), fail_polls.clone());
    let app = axum::Router::new()
        .route("/seats", axum::routing::get(|| async { "seat map" }))
        .layer(layer)
        .route(
            "/wake.js",
            axum::routing::get(move || {
                let js = script.lock().unwrap().clone();
                async move { ([("content-type", "text/javascript")], js) }
            }),
        )
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            let (seen, failing) = (seen.clone(), failing.clone());
            async move {
                if req.uri().path() == "/waitroom/status" {
                    seen.fetch_add(1, Ordering::SeqCst);
                    if failing
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok()
                    {
                        return (axum::http::StatusCode::BAD_GATEWAY, "bad gateway")
                            .into_response();
                    }
                }
                next.run(req).await
            }
        }));
    let url = waitroom_testkit::http::serve(app).await;
    // Someone holds the only place, so the browser is held.
    occupy(&url, "/seats", &client(), "seat map").await;
    polls.store(0, Ordering::SeqCst);
    Sleeper {
        url,
        polls,
        fail_polls,
        wake,
    }
}

impl Sleeper {
    /// Loads the held page with `wake` as its extra script, lets ten virtual seconds pass (the page's own timer
    /// would poll only after eight minutes or more), returns the status polls made and the page.
    async fn visit(&self, wake: &str) -> (usize, String) {
        *self.wake.lock().unwrap() = wake.to_owned();
        self.polls.store(0, Ordering::SeqCst);
        let dom = run_chromium(vec![
            "--virtual-time-budget=10000".into(),
            "--dump-dom".into(),
            format!("{}/seats", self.url),
        ])
        .await;
        assert_eq!(
            text_of(&dom, "wr-headline").as_deref(),
            Some("You are in line"),
            "{dom}"
        );
        (self.polls.load(Ordering::SeqCst), dom)
    }
}

/// A tab that comes back to the foreground asks at once (and so does a page restored from the back-forward cache,
/// or one whose network comes back): a person whose turn came while the tab slept is back within one round trip,
/// not after the page's next timer (which a browser may have put off for minutes). One failed poll is not the end:
/// the page tries again two seconds later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holding_page_polls_at_once_when_it_wakes_up() {
    let _ = chromium();
    let s = sleeper().await;
    // Left alone, the page does not poll within ten seconds: its interval is ten minutes.
    let (polls, _) = s.visit("").await;
    assert_eq!(polls, 0, "no poll of its own within the budget");
    // The tab becomes visible again (Chromium fires `visibilitychange`; headless never hides a page, so the
    // script fires it itself, three seconds in).
    let (polls, _) = s
        .visit("setTimeout(function(){document.dispatchEvent(new Event('visibilitychange'))},3000)")
        .await;
    assert_eq!(polls, 1, "one poll, at once, on visibilitychange");
    // Restored from the back-forward cache (a `pageshow` that says so); a `pageshow` that is a first load is not.
    let (polls, _) = s
        .visit(
            "setTimeout(function(){window.dispatchEvent(new PageTransitionEvent('pageshow',{persisted:false}));\
             window.dispatchEvent(new PageTransitionEvent('pageshow',{persisted:true}))},3000)",
        )
        .await;
    assert_eq!(
        polls, 1,
        "one poll on a pageshow from the back-forward cache"
    );
    // The network comes back.
    let (polls, _) = s
        .visit("setTimeout(function(){window.dispatchEvent(new Event('online'))},3000)")
        .await;
    assert_eq!(polls, 1, "one poll when the network comes back");
    // The wake-up's poll fails: the page tries again (after about two seconds), and says it keeps trying.
    s.fail_polls.store(1, Ordering::SeqCst);
    let (polls, dom) = s
        .visit("setTimeout(function(){document.dispatchEvent(new Event('visibilitychange'))},3000)")
        .await;
    assert_eq!(polls, 2, "a failed poll is tried again");
    assert!(
        !dom.contains("this page keeps trying"),
        "the retry succeeded: {dom}"
    );
}
