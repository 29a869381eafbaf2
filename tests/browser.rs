//! The demo in a real browser: headless Chromium (Debian's `chromium`) loads the seat map while the room is full,
//! sees the holding page with its position, and, when a place frees, the page's own polling takes it on to the
//! seat map; and the page's script tells a person the seats may run out before their turn when a poll says so.
//!
//! Every wait is bounded and fails with a message: Chromium is killed after [`CHROMIUM_LIMIT`], each test gives up
//! after [`TEST_LIMIT`], and a page that never polls (a policy without `connect-src 'self'`, a broken script) fails
//! with that said instead of hanging.
//!
//! Chromium is required: without it this test fails (`apt-get install chromium`; `.ci/run` installs it). Set
//! `CHROMIUM=/path/to/chrome` to use another binary, and `WAITROOM_UPDATE_SCREENSHOT=1` to rewrite
//! `docs/holding-page.png` from this run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::{self, Next};
use serde_json::Value;
use tokio::sync::Notify;
use waitroom::demo::{Shop, room_layer};
use waitroom::layer::{Fairness, Inventory, STATE_HEADER, WaitingRoom};
use waitroom::verify::VerifyLayer;
use waitroom_testkit::chromium::Chromium;
use waitroom_testkit::http::browser as client;

/// The longest one Chromium run may take (its virtual time runs ahead of the wall clock; a run takes a few seconds
/// on an idle machine, this is for a loaded one).
const CHROMIUM_LIMIT: Duration = Duration::from_secs(90);
/// The longest a whole test may take.
const TEST_LIMIT: Duration = Duration::from_secs(240);
/// How long the holding page has to make its first poll once Chromium has loaded it.
const POLL_LIMIT: Duration = Duration::from_secs(60);

/// Runs `test`, failing with a message if it takes longer than [`TEST_LIMIT`].
async fn bounded(what: &str, test: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(TEST_LIMIT, test).await.is_err() {
        panic!("{what}: not done within {TEST_LIMIT:?}");
    }
}

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
    /// Pages of the room served (an HTML answer that says where the session stands: the holding page).
    held: Arc<AtomicUsize>,
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
    let held = Arc::new(AtomicUsize::new(0));
    let (seen, pages) = (polls.clone(), held.clone());
    let app = shop
        .router(VerifyLayer::new(room.verifier().clone()))
        .layer(room_layer(room.clone()).unwrap())
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            let (seen, pages) = (seen.clone(), pages.clone());
            async move {
                let poll = req.uri().path() == "/waitroom/status";
                let res = next.run(req).await;
                if poll {
                    seen.0.fetch_add(1, Ordering::SeqCst);
                    seen.1.notify_waiters();
                }
                let html = res
                    .headers()
                    .get("content-type")
                    .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
                if html && res.headers().contains_key(STATE_HEADER) {
                    pages.fetch_add(1, Ordering::SeqCst);
                }
                res
            }
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Store {
        url,
        room,
        polls,
        held,
    }
}

/// Joins with `c` at `url` + `path` and waits until the door lets it in (it then holds the only place, and the page
/// it gets contains `expect`).
async fn occupy(url: &str, path: &str, c: &reqwest::Client, expect: &str) {
    let res = c.get(format!("{url}{path}")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut every = tokio::time::interval(Duration::from_millis(50));
    loop {
        every.tick().await;
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
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first visitor was not let in within 10 s: {st}"
        );
    }
}

/// Runs headless Chromium with a fresh profile; returns its standard output. Killed, and the test failed, if it
/// runs longer than [`CHROMIUM_LIMIT`].
async fn run_chromium(args: Vec<String>) -> String {
    let bin = chromium();
    let profile = std::env::temp_dir().join(format!(
        "waitroom-chromium-{}",
        WaitingRoom::new_session_id()
    ));
    let child = tokio::process::Command::new(&bin)
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
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "could not run {} ({e}): `apt-get install -y chromium`",
                bin.display()
            )
        });
    let out = tokio::time::timeout(CHROMIUM_LIMIT, child.wait_with_output()).await;
    let _ = std::fs::remove_dir_all(&profile);
    let out = out
        .unwrap_or_else(|_| panic!("chromium did not finish within {CHROMIUM_LIMIT:?}: {args:?}"))
        .expect("chromium's output");
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
    bounded("the holding page moves on", holding_page_moves_on()).await;
}

async fn holding_page_moves_on() {
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
            tokio::time::timeout(POLL_LIMIT, polls.1.notified())
                .await
                .expect("the holding page never polled the room (can its script connect to this origin?)");
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
    assert!(
        s.polls.0.load(Ordering::SeqCst) > polls_before,
        "the holding page never polled the room (can its script connect to this origin?)"
    );
    leave.await.unwrap();
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
    // Left alone, the page asks once soon after it loads (a place may be freeing), then not again within ten
    // seconds: its interval is ten minutes.
    let (polls, _) = s.visit("").await;
    assert_eq!(
        polls, 1,
        "one early poll, then none of its own within the budget"
    );
    // The tab becomes visible again (Chromium fires `visibilitychange`; headless never hides a page, so the
    // script fires it itself, three seconds in).
    let (polls, _) = s
        .visit("setTimeout(function(){document.dispatchEvent(new Event('visibilitychange'))},3000)")
        .await;
    assert_eq!(
        polls, 2,
        "the early poll and one, at once, on visibilitychange"
    );
    // Restored from the back-forward cache (a `pageshow` that says so); a `pageshow` that is a first load is not.
    let (polls, _) = s
        .visit(
            "setTimeout(function(){window.dispatchEvent(new PageTransitionEvent('pageshow',{persisted:false}));\
             window.dispatchEvent(new PageTransitionEvent('pageshow',{persisted:true}))},3000)",
        )
        .await;
    assert_eq!(
        polls, 2,
        "the early poll and one on a pageshow from the back-forward cache"
    );
    // The network comes back.
    let (polls, _) = s
        .visit("setTimeout(function(){window.dispatchEvent(new Event('online'))},3000)")
        .await;
    assert_eq!(
        polls, 2,
        "the early poll and one when the network comes back"
    );
    // The early poll fails: the page tries again (after about two seconds), and the retry succeeds.
    s.fail_polls.store(1, Ordering::SeqCst);
    let (polls, dom) = s.visit("").await;
    assert_eq!(polls, 2, "a failed poll is tried again");
    // The retry succeeded: the note the failure wrote ("this page keeps trying") is gone.
    assert_eq!(
        text_of(&dom, "wr-note").as_deref(),
        Some(""),
        "the retry succeeded: {dom}"
    );
}

/// The reach sentence, written by the page's own script: a person held at the front of a full room whose page was
/// rendered with plenty of seats left (no sentence) is told, at the page's next poll after the seats ran short,
/// that the tickets left may run out before their turn, in the words the server renders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_says_the_seats_may_run_out_when_a_poll_says_so() {
    bounded("the reach sentence", reach_sentence()).await;
}

async fn reach_sentence() {
    const SENTENCE: &str = "The tickets left may run out before your turn.";
    let _ = chromium();
    // Driven by hand: a background tick between the joins and `tick_now` would let people in that this test then
    // never finishes or claims (it did once in CI: the page showed 19 people ahead instead of none).
    let room = WaitingRoom::builder("reach-page")
        .capacity(25)
        .poll_interval(Duration::from_secs(1))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    // Something measured: 21 visits ended with an order of two seats each (the reach needs 20 departures).
    for i in 0..21 {
        let id = format!("reach-buyer-{i:04}-zzzzzzzz");
        room.join(&id, None).await.unwrap();
    }
    for id in room.tick_now().await.unwrap().admitted {
        room.claim(&id).await.unwrap();
        assert!(room.finish(&id, 2).await.unwrap());
    }
    // A full room: 25 inside.
    for i in 0..25 {
        let id = format!("reach-inside-{i:04}-zzzzzzz");
        room.join(&id, None).await.unwrap();
    }
    for id in room.tick_now().await.unwrap().admitted {
        room.claim(&id).await.unwrap();
    }
    // Plenty of seats: every admission buys two, 10,000 seats reach far down the line.
    let plenty = Inventory {
        total: 10_000,
        sold: 42,
        held: 0,
    };
    room.set_inventory(plenty).await.unwrap();
    room.refresh().await.unwrap();
    let polls = Arc::new(Notify::new());
    let seen = polls.clone();
    let app = axum::Router::new()
        .route("/seats", axum::routing::get(|| async { "seat map" }))
        .layer(room_layer(room.clone()).unwrap())
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            let seen = seen.clone();
            async move {
                let poll = req.uri().path() == "/waitroom/status";
                let res = next.run(req).await;
                if poll {
                    seen.notify_waiters();
                }
                res
            }
        }));
    let url = waitroom_testkit::http::serve(app).await;
    let short = {
        let (room, polls) = (room.clone(), polls.clone());
        tokio::spawn(async move {
            tokio::time::timeout(POLL_LIMIT, polls.notified())
                .await
                .expect("the holding page never polled the room (can its script connect to this origin?)");
            // The seats run short: 10 left, fewer than the 25 inside are expected to buy (two each), so the
            // reach ends before the head of the line.
            room.set_inventory(Inventory {
                total: 10_000,
                sold: 9_990,
                held: 0,
            })
            .await
            .unwrap();
            room.refresh().await.unwrap();
        })
    };
    let dom = run_chromium(vec![
        "--virtual-time-budget=30000".into(),
        "--dump-dom".into(),
        format!("{url}/seats"),
    ])
    .await;
    short.await.unwrap();
    let message = text_of(&dom, "wr-message").expect("the page's message");
    assert!(
        message.contains(SENTENCE),
        "the page did not say the seats may run out: {message:?}"
    );
    assert_eq!(text_of(&dom, "wr-position").as_deref(), Some("1"));
}

/// Runs `f` with a fresh headless Chromium (DevTools over a pipe; every call bounded by the driver) on a blocking
/// thread, within [`TEST_LIMIT`].
async fn with_chromium<T: Send + 'static>(
    f: impl FnOnce(&mut Chromium) -> T + Send + 'static,
) -> T {
    let _ = chromium();
    let run = tokio::task::spawn_blocking(move || {
        let mut b = Chromium::launch();
        f(&mut b)
    });
    tokio::time::timeout(TEST_LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("the browser's part did not end within {TEST_LIMIT:?}"))
        .unwrap()
}

/// A lone visitor on an empty room: the first page the browser shows is the one asked for. The room served no
/// holding page and no status poll came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_visitor_in_an_empty_room_reaches_the_page_without_seeing_the_holding_page() {
    let s = storefront().await;
    let url = s.url.clone();
    let shown = with_chromium(move |b| {
        b.navigate(&format!("{url}/seats"));
        b.eval("({ path: location.pathname, text: document.body.innerText, holding: !!document.getElementById('wr-data') })")
    })
    .await;
    assert_eq!(shown["path"], "/seats", "{shown}");
    assert_eq!(shown["holding"], false, "{shown}");
    assert!(
        shown["text"]
            .as_str()
            .unwrap()
            .contains("Choose your seats"),
        "{shown}"
    );
    assert_eq!(
        s.held.load(Ordering::SeqCst),
        0,
        "the room served a holding page"
    );
    assert_eq!(s.polls.0.load(Ordering::SeqCst), 0, "a status poll came");
    assert_eq!(s.room.stats().active, 1);
}

/// What the page renders, read from the DOM: the elements with `hidden` that still take space or are displayed
/// (none may), and the text a reader sees (`innerText` leaves out what is not rendered).
const RENDERED: &str = "(() => { const bad = []; \
    document.querySelectorAll('main [hidden]').forEach(e => { \
      if (e.getClientRects().length > 0 || getComputedStyle(e).display !== 'none') bad.push(e.id || e.tagName); }); \
    const main = document.querySelector('main'); \
    return { bad, state: main.dataset.state, text: main.innerText }; })()";

/// The sold-out, pre-queue and paused screens show no row that does not apply: no "Your place –", no "Estimated
/// wait –" (a stylesheet `display` once overrode the `hidden` attribute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holding_page_shows_no_row_that_does_not_apply() {
    // Paused, with someone inside: the place shows, the wait does not (nobody knows when the door moves).
    let s = storefront().await;
    occupy(&s.url, "/seats", &client(), "Choose your seats").await;
    s.room.pause().await.unwrap();
    let url = s.url.clone();
    let paused = with_chromium(move |b| {
        b.navigate(&format!("{url}/seats"));
        b.eval(RENDERED)
    })
    .await;
    assert_eq!(paused["state"], "paused", "{paused}");
    assert_eq!(paused["bad"], serde_json::json!([]), "{paused}");
    let text = paused["text"].as_str().unwrap();
    assert!(
        text.contains("Your place") && text.contains("the line is paused"),
        "{text}"
    );
    assert!(
        !text.contains("Estimated wait") && !text.contains('–'),
        "{text}"
    );

    // Sold out: nothing but the news.
    s.room.resume().await.unwrap();
    s.room
        .set_inventory(Inventory {
            total: 10,
            sold: 10,
            held: 0,
        })
        .await
        .unwrap();
    s.room.refresh().await.unwrap();
    let url = s.url.clone();
    let sold = with_chromium(move |b| {
        b.navigate(&format!("{url}/seats"));
        b.eval(RENDERED)
    })
    .await;
    assert_eq!(sold["state"], "sold_out", "{sold}");
    assert_eq!(sold["bad"], serde_json::json!([]), "{sold}");
    let text = sold["text"].as_str().unwrap();
    assert!(text.contains("Every ticket has been sold"), "{text}");
    assert!(
        !text.contains("Your place") && !text.contains("Estimated wait") && !text.contains('–'),
        "{text}"
    );

    // The pre-queue: the draw's time and its countdown, no place and no wait yet.
    let (url, _room) = prequeue_room().await;
    let pre = with_chromium(move |b| {
        b.navigate(&format!("{url}/seats"));
        b.wait_for(
            "document.getElementById('wr-countdown').textContent !== ''",
            "0",
            Duration::from_secs(10),
            "the countdown is written",
        );
        b.eval(RENDERED)
    })
    .await;
    assert_eq!(pre["state"], "prequeue", "{pre}");
    assert_eq!(pre["bad"], serde_json::json!([]), "{pre}");
    let text = pre["text"].as_str().unwrap();
    assert!(
        text.contains("The draw happens at") && text.contains("Opens at"),
        "{text}"
    );
    assert!(
        !text.contains("Your place") && !text.contains("Estimated wait") && !text.contains('–'),
        "{text}"
    );
}

/// A room whose draw is ten minutes away (the real clock), `/seats` behind it. Returns its address and the room.
async fn prequeue_room() -> (String, WaitingRoom) {
    let opens_at = std::time::SystemTime::now() + Duration::from_secs(600);
    let room = WaitingRoom::builder("draw-page")
        .capacity(10)
        .fairness(Fairness::RandomAtOpen { opens_at })
        .poll_interval(Duration::from_secs(5))
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let app = axum::Router::new()
        .route("/seats", axum::routing::get(|| async { "seat map" }))
        .layer(room_layer(room.clone()).unwrap());
    (waitroom_testkit::http::serve(app).await, room)
}

/// Under another time zone (India, UTC+5:30: no whole-hour offset can pass for it) the page writes the draw's
/// time in local time, not UTC, and its countdown moves by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_countdown_shows_the_readers_local_time() {
    let (url, room) = prequeue_room().await;
    let shown = with_chromium(move |b| {
        b.call(
            "Emulation.setTimezoneOverride",
            serde_json::json!({ "timezoneId": "Asia/Kolkata" }),
        );
        b.navigate(&format!("{url}/seats"));
        let cd = "document.getElementById('wr-countdown').textContent";
        let first = b.wait_for(&format!("/^in \\d+:\\d\\d$/.test({cd})"), cd, Duration::from_secs(10), "a countdown");
        // It moves: a second later it says less (wait bounded; the page's own timer writes it).
        let later = b.wait_for(
            &format!("{cd} !== {first}"),
            cd,
            Duration::from_secs(10),
            "the countdown moves",
        );
        b.eval(&format!(
            "({{ opens: document.getElementById('wr-opens').textContent, \
              at: document.getElementById('wr-opens').getAttribute('datetime'), \
              message: document.getElementById('wr-message').textContent, first: {first}, later: {later} }})"
        ))
    })
    .await;
    drop(room);
    // The opening in UTC (`2026-12-02T10:43:07Z`), moved to India's time of day.
    let at = shown["at"].as_str().unwrap();
    let part = |r: std::ops::Range<usize>| at[r].parse::<u64>().expect("an RFC 3339 time");
    let secs = (part(11..13) * 3600 + part(14..16) * 60 + part(17..19) + 5 * 3600 + 1800) % 86_400;
    let (h, m, sec) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let h12 = if h % 12 == 0 { 12 } else { h % 12 };
    let local = format!("{h12:02}:{m:02}:{sec:02}");
    let opens = shown["opens"].as_str().unwrap();
    assert!(
        opens.contains(&local) && !opens.contains("UTC"),
        "{local} in India, shown {opens:?}"
    );
    let message = shown["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("The draw happens at {opens}.")),
        "{message}"
    );
    // Ten minutes away, minus the time the page took: "in 9:5x" or so, then less.
    let (first, later) = (
        shown["first"].as_str().unwrap(),
        shown["later"].as_str().unwrap(),
    );
    assert!(
        first.starts_with("in 9:") || first.starts_with("in 10:"),
        "{first}"
    );
    // Compared as durations ("in 10:00" then "in 9:59" counts down, though not as text).
    let secs = |t: &str| {
        let (m, s) = t
            .trim_start_matches("in ")
            .split_once(':')
            .expect("in M:SS");
        m.parse::<u64>().unwrap() * 60 + s.parse::<u64>().unwrap()
    };
    assert!(secs(later) < secs(first), "{first} then {later}");
}

/// The holding page's own accessibility checks, in light and dark mode: every text it shows has at least WCAG AA
/// contrast (4.5:1) against what is behind it, the progress bar has a label, the page says its language, has one
/// `h1` and a live region.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holding_page_has_labels_and_enough_contrast() {
    let s = storefront().await;
    occupy(&s.url, "/seats", &client(), "Choose your seats").await;
    // Three ahead, so the page shows its progress bar (from place 4); each one's page polls once, so their tickets
    // take their places (the line counts only people who came back).
    for _ in 0..3 {
        let c = client();
        c.get(format!("{}/seats", s.url)).send().await.unwrap();
        let res = c
            .get(format!("{}/waitroom/status", s.url))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "a poll is answered");
    }
    const CHECK: &str = "(() => { \
      const rgb = c => { const m = c.match(/[\\d.]+/g).map(Number); return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 }; }; \
      const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; \
        return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); }; \
      const behind = e => { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.a > 0) return c; } \
        return { r: 255, g: 255, b: 255, a: 1 }; }; \
      const texts = []; \
      document.querySelectorAll('body *').forEach(e => { \
        if (!e.getClientRects().length) return; \
        if (![...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) return; \
        const a = lum(rgb(getComputedStyle(e).color)), b = lum(behind(e)); \
        texts.push({ what: e.id || e.tagName, ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) }); }); \
      const unlabelled = [...document.querySelectorAll('progress, input, select, textarea, button')] \
        .filter(e => e.getClientRects().length && !(e.labels && e.labels.length) && !e.getAttribute('aria-label')) \
        .map(e => e.id || e.tagName); \
      return { texts, unlabelled, shown: [...document.querySelectorAll('progress')].filter(e => e.getClientRects().length).length, \
        lang: document.documentElement.lang, h1: document.querySelectorAll('h1').length, \
        live: !!document.querySelector('[aria-live]') }; })()";
    let url = s.url.clone();
    let (light, dark) = with_chromium(move |b| {
        b.navigate(&format!("{url}/seats"));
        let light = b.eval(CHECK);
        b.call(
            "Emulation.setEmulatedMedia",
            serde_json::json!({ "features": [{ "name": "prefers-color-scheme", "value": "dark" }] }),
        );
        let dark = b.eval(CHECK);
        (light, dark)
    })
    .await;
    for (mode, r) in [("light", &light), ("dark", &dark)] {
        assert_eq!(r["shown"], 1, "{mode}: the progress bar shows: {r}");
        assert_eq!(r["unlabelled"], serde_json::json!([]), "{mode}: {r}");
        assert_eq!(
            (r["lang"].as_str(), r["h1"].as_u64(), r["live"].as_bool()),
            (Some("en"), Some(1), Some(true)),
            "{r}"
        );
        let texts = r["texts"].as_array().unwrap();
        assert!(texts.len() >= 6, "{mode}: the texts were read: {r}");
        for t in texts {
            assert!(
                t["ratio"].as_f64().unwrap() >= 4.5,
                "{mode}: {t} is below AA contrast"
            );
        }
    }
    // The two modes differ (the dark one was applied).
    assert_ne!(light["texts"], dark["texts"]);
}

// =================================================================================================================
// The demo's seat map (issue 23): usable with the keyboard alone, on a 390 px phone, readable (contrast) and named
// (every control has an accessible name), with a pending "Pay" and a confirmed "Leave". Driven over the DevTools
// protocol (`waitroom_testkit::chromium`) with real key events (`Input.dispatchKeyEvent`), not scripted clicks.
// =================================================================================================================
mod seat_map {
    use std::path::Path;
    use std::time::Duration;

    use base64::Engine as _;
    use serde_json::{Value, json};
    use waitroom::demo::{Shop, room_layer};
    use waitroom::layer::WaitingRoom;
    use waitroom::verify::VerifyLayer;
    use waitroom_testkit::chromium::Chromium;

    /// The simulated payment's length (the shop's default is 1.5 s): the test waits for the shop's own count of
    /// payments in progress to see it under way.
    const PAYMENT: Duration = Duration::from_secs(3);
    /// How long the room may take to let the browser in (the door ticks every 50 ms).
    const ADMIT_LIMIT: Duration = Duration::from_secs(20);
    /// A phone's viewport width, CSS pixels (an iPhone 12 to 15).
    const PHONE_WIDTH: u64 = 390;

    struct Demo {
        url: String,
        room: WaitingRoom,
        shop: Shop,
    }

    /// The demo storefront with room to spare (capacity 10), the door every 50 ms, the holding page polling every
    /// second, and a payment that takes [`PAYMENT`].
    async fn demo() -> Demo {
        let room = WaitingRoom::builder("tour-2026-stadium")
            .display_name("The 2026 Stadium Tour")
            .capacity(10)
            .max_qty(4)
            .poll_interval(Duration::from_secs(1))
            .tick_interval(Duration::from_millis(50))
            .secure_cookies(false)
            .build()
            .await
            .unwrap();
        let shop = Shop::builder(48_000)
            .payment_latency(PAYMENT)
            .room(room.clone())
            .build();
        shop.report_inventory().await;
        let app = shop
            .router(VerifyLayer::new(room.verifier().clone()))
            .layer(room_layer(room.clone()).unwrap());
        let url = waitroom_testkit::http::serve(app).await;
        Demo { url, room, shop }
    }

    /// Takes the browser to the seat map: its first visit joins the line; once the room has let it in (the room's
    /// own count), the next visit is the seat map. (If the room lets it straight in, the first visit is.)
    fn enter(b: &mut Chromium, rt: &tokio::runtime::Handle, d: &Demo) {
        let seats = format!("{}/seats", d.url);
        b.navigate(&seats);
        if b.eval("!!document.querySelector('[data-seat]')") == json!(true) {
            return;
        }
        // Off the holding page, so its own script does not navigate meanwhile.
        b.navigate("about:blank");
        let room = d.room.clone();
        rt.block_on(async move {
            let deadline = tokio::time::Instant::now() + ADMIT_LIMIT;
            let mut every = tokio::time::interval(Duration::from_millis(50));
            while room.stats().counters.admitted == 0 {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the room did not let the browser in within {ADMIT_LIMIT:?}"
                );
                every.tick().await;
            }
        });
        b.navigate(&seats);
        let title =
            b.eval("document.querySelector('h1') && document.querySelector('h1').textContent");
        assert_eq!(title, "Choose your seats", "the browser is on the seat map");
    }

    /// One key pressed and released, as a person's keyboard sends it (`shift`: with Shift held).
    fn press(b: &mut Chromium, key: &str, shift: bool) {
        let (code, vk, text) = match key {
            "Tab" => ("Tab", 9, None),
            "Enter" => ("Enter", 13, Some("\r")),
            " " => ("Space", 32, Some(" ")),
            other => panic!("no key {other:?} in this test"),
        };
        let modifiers = if shift { 8 } else { 0 };
        let mut down = json!({
            "type": if text.is_some() { "keyDown" } else { "rawKeyDown" },
            "key": key, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk,
            "modifiers": modifiers,
        });
        if let Some(t) = text {
            down["text"] = json!(t);
            down["unmodifiedText"] = json!(t);
        }
        b.call("Input.dispatchKeyEvent", down);
        b.call(
            "Input.dispatchKeyEvent",
            json!({ "type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk,
                    "nativeVirtualKeyCode": vk, "modifiers": modifiers }),
        );
    }

    /// The focused element: its tag, id, type, whether it is checked, and its text (a seat's: its label's).
    const FOCUSED: &str = "(() => { const e = document.activeElement; if (!e) return null; \
        const l = e.closest('label'); return { tag: e.tagName, id: e.id, type: e.type || '', name: e.name || '', \
        checked: !!e.checked, disabled: !!e.disabled, text: (l || e).textContent.trim() }; })()";

    /// Presses Tab (with Shift: backwards) until `wanted` holds for the focused element, at most `limit` times;
    /// returns how many presses it took.
    fn tab_until(
        b: &mut Chromium,
        shift: bool,
        limit: usize,
        what: &str,
        wanted: impl Fn(&Value) -> bool,
    ) -> usize {
        for n in 1..=limit {
            press(b, "Tab", shift);
            if wanted(&b.eval(FOCUSED)) {
                return n;
            }
        }
        panic!(
            "{what}: not focused within {limit} presses of Tab; focus is on {}",
            b.eval(FOCUSED)
        );
    }

    /// Presses `key` and waits for the page it leads to.
    fn press_and_load(b: &mut Chromium, key: &str) {
        b.forget_events();
        press(b, key, false);
        b.wait_event("Page.loadEventFired", Duration::from_secs(60));
    }

    fn is_free_seat(f: &Value) -> bool {
        f["name"] == "seat" && f["type"] == "checkbox" && f["disabled"] == false
    }

    /// Writes `png` (base64, from Chromium) to `docs/<name>` when `WAITROOM_UPDATE_SCREENSHOT` is set; checks it is a
    /// real PNG either way.
    fn screenshot(b: &mut Chromium, name: &str) {
        let png = base64::engine::general_purpose::STANDARD
            .decode(b.screenshot_base64())
            .expect("a base64 screenshot");
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
            "a real PNG"
        );
        if std::env::var_os("WAITROOM_UPDATE_SCREENSHOT").is_some() {
            let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
            std::fs::write(docs.join(name), png).unwrap();
        }
    }

    /// Tab to a seat, select it (Space), one more, hold them (Enter on the hold button), pay (Enter on Pay) with no
    /// mouse and no script of the test's: real key events only. On the way: the first seat is reached right after
    /// the few controls above the map (not after 96 section links), the focused seat shows a focus ring, and "Pay"
    /// says it is paying while the payment is under way.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_seat_map_can_be_used_with_the_keyboard_alone() {
        let _ = waitroom_testkit::chromium::binary();
        let d = demo().await;
        let rt = tokio::runtime::Handle::current();
        let mut payments = d.shop.payments_in_progress();
        tokio::task::spawn_blocking(move || {
            let mut b = Chromium::launch();
            b.call("Emulation.setFocusEmulationEnabled", json!({ "enabled": true }));
            enter(&mut b, &rt, &d);

            // Above the map: "Leave without buying", the section picker and its button, "Hold the chosen seats".
            // The fifth Tab is the first seat.
            let tabs = tab_until(&mut b, false, 10, "the first free seat", is_free_seat);
            assert_eq!(tabs, 5, "Leave, Section, Show section, Hold, then the first seat");
            let first = b.eval(FOCUSED);
            assert_eq!(first["text"], "1Row A, Seat 1, free", "{first}");
            let ring = b.eval("getComputedStyle(document.activeElement.nextElementSibling).outlineStyle");
            assert_ne!(ring, "none", "the focused seat shows a focus ring");
            press(&mut b, " ", false);
            assert_eq!(b.eval(FOCUSED)["checked"], true, "Space chose the seat");
            assert_eq!(
                b.eval("document.getElementById('chosen').textContent"),
                "1 seat chosen, up to 4.",
                "the count of chosen seats follows"
            );
            tab_until(&mut b, false, 1, "the next seat", is_free_seat);
            press(&mut b, " ", false);
            tab_until(&mut b, true, 3, "the hold button", |f| f["id"] == "hold-button");
            press_and_load(&mut b, "Enter");

            // Held: the hold is listed in words, and Pay is the first thing the keyboard reaches.
            let hold = b.eval("document.getElementById('hold') && document.getElementById('hold').innerText");
            let hold = hold.as_str().unwrap_or_default().to_owned();
            assert!(
                hold.contains("Section 1, Row A, Seat 1") && hold.contains("Section 1, Row A, Seat 2"),
                "the hold lists both seats: {hold:?}"
            );
            tab_until(&mut b, false, 1, "the pay button", |f| f["id"] == "pay");
            assert_eq!(b.eval(FOCUSED)["text"], "Pay for 2 seats");
            // What the page shows once its own submit handler ran: read by a listener of the test's on the window
            // (after the page's, on the document), kept in sessionStorage, which outlives the page. (DevTools
            // answers nothing about the page while its form's navigation is under way.)
            b.eval(
                "window.addEventListener('submit', () => { const p = document.getElementById('pay'); \
                   sessionStorage.setItem('pending', JSON.stringify({ button: p.textContent, \
                     busy: p.closest('form').getAttribute('aria-busy'), disabled: p.getAttribute('aria-disabled'), \
                     status: document.getElementById('pay-status').textContent })); }); true",
            );
            b.forget_events();
            press(&mut b, "Enter", false);
            rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(30), payments.wait_for(|&n| n == 1))
                    .await
                    .expect("the payment did not start within 30 s")
                    .unwrap();
            });
            b.wait_event("Page.loadEventFired", Duration::from_secs(60));
            let pending: Value = serde_json::from_str(
                b.eval("sessionStorage.getItem('pending')").as_str().expect("the pending state was seen"),
            )
            .unwrap();
            assert_eq!(pending["button"], "Paying\u{2026}", "{pending}");
            assert_eq!(pending["busy"], "true", "{pending}");
            assert_eq!(pending["disabled"], "true", "{pending}");
            assert!(
                pending["status"].as_str().unwrap_or("").contains("This takes a few seconds"),
                "{pending}"
            );
            let order = b.eval("document.body.innerText");
            let order = order.as_str().unwrap_or_default();
            assert!(
                order.contains("Your order is confirmed")
                    && order.contains("Section 1, Row A, Seat 1")
                    && order.contains("Section 1, Row A, Seat 2"),
                "the order page: {order}"
            );
            assert_eq!(d.shop.inventory().counts().sold, 2);
        })
        .await
        .unwrap();
    }

    /// At a phone's width (390 CSS px) the event page and the seat map fit: nothing makes the page scroll sideways
    /// (the grid of 25 seats a row, 2 rem each, scrolls inside its own box instead), every control is within the
    /// screen, and each seat is a target of at least 24 by 24 px (WCAG 2.2's minimum).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_seat_map_fits_a_phone_390_px_wide() {
        let _ = waitroom_testkit::chromium::binary();
        let d = demo().await;
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let mut b = Chromium::launch();
            b.call(
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 2, "mobile": true }),
            );
            const FIT: &str = "(() => { const w = document.documentElement.clientWidth; \
                const out = [...document.querySelectorAll('a[href], button, select, h1, p')] \
                  .filter(e => e.getClientRects().length && !e.closest('.seats')) \
                  .filter(e => { const r = e.getBoundingClientRect(); return r.left < 0 || r.right > w + 0.5; }) \
                  .map(e => e.tagName + '#' + e.id + ' ' + e.textContent.slice(0, 40)); \
                return { viewport: w, page: document.documentElement.scrollWidth, out }; })()";
            b.navigate(&format!("{}/", d.url));
            let fit = b.eval(FIT);
            assert_eq!(fit["viewport"], PHONE_WIDTH, "{fit}");
            assert!(fit["page"].as_u64() <= Some(PHONE_WIDTH), "the event page scrolls sideways: {fit}");
            assert_eq!(fit["out"], json!([]), "controls off the screen: {fit}");

            enter(&mut b, &rt, &d);
            let fit = b.eval(FIT);
            assert!(fit["page"].as_u64() <= Some(PHONE_WIDTH), "the seat map scrolls sideways: {fit}");
            assert_eq!(fit["out"], json!([]), "controls off the screen: {fit}");
            let grid = b.eval(
                "(() => { const s = document.querySelector('.seats'); \
                   const sizes = [...document.querySelectorAll('label.seat')].map(l => l.getBoundingClientRect()); \
                   return { box: s.clientWidth, content: s.scrollWidth, overflow: getComputedStyle(s).overflowX, \
                     seats: sizes.length, smallest: Math.min(...sizes.map(r => Math.min(r.width, r.height))) }; })()",
            );
            assert_eq!(grid["seats"], 500, "{grid}");
            assert!(grid["box"].as_u64() <= Some(PHONE_WIDTH), "{grid}");
            assert_eq!(grid["overflow"], "auto", "the grid scrolls in its own box: {grid}");
            assert!(grid["content"].as_u64() > grid["box"].as_u64(), "{grid}");
            assert!(grid["smallest"].as_f64() >= Some(24.0), "a seat smaller than 24 px: {grid}");
            // Sections: one select (96 of them), not a list of links.
            let sections = b.eval("document.querySelectorAll('#section option').length");
            assert_eq!(sections, 96);
            screenshot(&mut b, "seat-map-phone.png");
        })
        .await
        .unwrap();
    }

    /// One run of text on the page: its colours, its size and weight, as the browser computed them.
    #[derive(Debug, serde::Deserialize)]
    struct TextRun {
        text: String,
        fg: String,
        bg: String,
        size: f64,
        weight: u32,
    }

    /// Every visible run of text (including a seat's mark and the tick drawn by CSS) with its colour and the colour
    /// under it (the nearest ancestor's non-transparent background; the page's own at the root).
    const TEXT_RUNS: &str = "(() => { \
        const visible = e => { const r = e.getBoundingClientRect(); const s = getComputedStyle(e); \
          return r.width > 1 && r.height > 1 && s.visibility !== 'hidden' && s.opacity !== '0' && !e.closest('.sr'); }; \
        const under = e => { for (let a = e; a; a = a.parentElement) { const c = getComputedStyle(a).backgroundColor; \
            if (!/rgba\\(.*, 0\\)$/.test(c) && c !== 'transparent') return c; } \
          return getComputedStyle(document.documentElement).backgroundColor; }; \
        const runs = []; \
        for (const e of document.body.querySelectorAll('*')) { \
          const own = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim(); \
          const before = getComputedStyle(e, '::before').content; \
          const text = own || (before && before !== 'none' && before !== 'normal' ? before : ''); \
          if (!text || !visible(e)) continue; const s = getComputedStyle(e); \
          runs.push({ text: text.slice(0, 40), fg: s.color, bg: under(e), size: parseFloat(s.fontSize), \
            weight: parseInt(s.fontWeight, 10) }); } \
        return runs; })()";

    /// `rgb(r, g, b)` or `rgba(r, g, b, a)` as four numbers.
    fn rgba(css: &str) -> [f64; 4] {
        let inner = css
            .trim_start_matches("rgba(")
            .trim_start_matches("rgb(")
            .trim_end_matches(')');
        let v: Vec<f64> = inner
            .split(',')
            .map(|x| x.trim().parse().unwrap_or(f64::NAN))
            .collect();
        assert!(
            v.len() >= 3 && v.iter().all(|x| x.is_finite()),
            "a colour the test cannot read: {css}"
        );
        [v[0], v[1], v[2], v.get(3).copied().unwrap_or(1.0)]
    }

    /// WCAG 2's relative luminance of an sRGB colour.
    fn luminance([r, g, b, _]: [f64; 4]) -> f64 {
        let lin = |c: f64| {
            let c = c / 255.0;
            if c <= 0.040_45 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    }

    /// WCAG 2's contrast ratio of text colour `fg` (blended over `bg` when translucent) on `bg`.
    fn contrast(fg: &str, bg: &str) -> f64 {
        let (f, b) = (rgba(fg), rgba(bg));
        let a = f[3];
        let blended = [0, 1, 2].map(|i| f[i] * a + b[i] * (1.0 - a));
        let (l1, l2) = (
            luminance([blended[0], blended[1], blended[2], 1.0]),
            luminance(b),
        );
        (l1.max(l2) + 0.05) / (l1.min(l2) + 0.05)
    }

    #[test]
    fn the_contrast_formula_gives_wcag_s_reference_figures() {
        // Black on white is 21:1, a colour on itself 1:1, and #767676 on white the well-known 4.54:1.
        assert!((contrast("rgb(0, 0, 0)", "rgb(255, 255, 255)") - 21.0).abs() < 1e-9);
        assert!((contrast("rgb(10, 20, 30)", "rgb(10, 20, 30)") - 1.0).abs() < 1e-9);
        assert!((contrast("rgb(118, 118, 118)", "rgb(255, 255, 255)") - 4.54).abs() < 0.01);
        // Half-transparent black on white is a mid grey.
        let half = contrast("rgba(0, 0, 0, 0.5)", "rgb(255, 255, 255)");
        assert!(half > 3.5 && half < 4.5, "{half}");
    }

    /// Text runs below WCAG AA: 4.5:1, or 3:1 for large text (24 px, or 18.66 px bold).
    fn low_contrast(runs: &[TextRun]) -> Vec<String> {
        runs.iter()
            .filter_map(|r| {
                let large = r.size >= 24.0 || (r.size >= 18.66 && r.weight >= 700);
                let need = if large { 3.0 } else { 4.5 };
                let got = contrast(&r.fg, &r.bg);
                (got < need).then(|| {
                    format!(
                        "{:?}: {} on {} = {got:.2}:1 (needs {need}:1)",
                        r.text, r.fg, r.bg
                    )
                })
            })
            .collect()
    }

    /// How the test gets the browser to one of the pages it checks.
    type Visit = Box<dyn Fn(&mut Chromium)>;

    /// Interactive elements inside interactive elements (a button in a link, say): none.
    const NESTED: &str = "[...document.querySelectorAll(':is(a[href], button, select, textarea, \
        input:not([type=hidden]), [tabindex]) :is(a[href], button, select, textarea, input:not([type=hidden]), \
        [tabindex])')].map(e => e.outerHTML.slice(0, 80))";

    /// Controls in Chromium's accessibility tree (what a screen reader reads) without a name.
    fn unnamed_controls(b: &mut Chromium) -> (Vec<String>, Vec<(String, String)>) {
        let tree = b.call("Accessibility.getFullAXTree", json!({}));
        let mut unnamed = Vec::new();
        let mut named = Vec::new();
        for n in tree["nodes"].as_array().into_iter().flatten() {
            if n["ignored"] == true {
                continue;
            }
            let role = n["role"]["value"].as_str().unwrap_or_default().to_owned();
            if [
                "button", "checkbox", "link", "combobox", "textbox", "radio", "ListBox", "listbox",
            ]
            .contains(&role.as_str())
            {
                let name = n["name"]["value"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                if name.is_empty() {
                    unnamed.push(format!("{role} (node {})", n["backendDOMNodeId"]));
                } else {
                    named.push((role, name));
                }
            }
        }
        (unnamed, named)
    }

    /// Contrast and names, in light and in dark mode, on every demo page a buyer sees: the event page, the seat map
    /// with seats in every state (free, held for the viewer, held by someone else, sold) and an error, the "Leave
    /// without buying?" page and the order. Text is at WCAG AA contrast against what is under it; every control
    /// has an accessible name (Chromium's own computation, from its accessibility tree); each seat is a checkbox
    /// whose name says its row, number and state in words; no interactive element is nested in another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_page_has_readable_text_and_named_controls_in_light_and_dark_mode() {
        let _ = waitroom_testkit::chromium::binary();
        let d = demo().await;
        // Someone else holds two seats and bought two: the map shows every state.
        let now = d.room.clock().now_ms();
        let inv = d.shop.inventory();
        let theirs = inv.hold("someone-else", &[5, 6], 4, now, 300_000).unwrap();
        inv.hold("a-buyer", &[10, 11], 4, now, 300_000).unwrap();
        let bought = inv.hold_of("a-buyer", now).unwrap();
        inv.confirm(inv.purchase("a-buyer", &bought, now).unwrap());
        assert_eq!(theirs.seats, vec![5, 6]);
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let mut b = Chromium::launch();
            b.call("Accessibility.enable", json!({}));
            enter(&mut b, &rt, &d);
            // Hold two seats through the page's own form (what a person does), and ask for one already held, so
            // the page shows an error too.
            b.navigate_by(
                "document.querySelector('input[name=seat][value=\"0\"]').checked = true; \
                 document.querySelector('input[name=seat][value=\"1\"]').checked = true; \
                 document.getElementById('hold-button').click(); true",
            );
            assert!(b.eval("!!document.getElementById('hold')") == json!(true), "the hold is shown");
            let seat_map = format!("{}/seats", d.url);
            let pages: [(&str, Visit); 4] = [
                ("the event page", Box::new({ let u = format!("{}/", d.url); move |b: &mut Chromium| b.navigate(&u) })),
                ("the seat map", Box::new({ let u = seat_map.clone(); move |b: &mut Chromium| b.navigate(&u) })),
                (
                    "the leave page",
                    Box::new(move |b: &mut Chromium| {
                        b.navigate(&seat_map);
                        b.navigate_by("document.getElementById('leave').click(); true");
                    }),
                ),
                ("the seat map with an error", Box::new(|b: &mut Chromium| {
                    b.navigate_by(
                        "document.getElementById('leave-cancel').click(); true",
                    );
                    b.navigate_by(
                        "document.querySelectorAll('input[name=seat]').forEach(i => i.checked = false); \
                         const f = document.querySelector('form[action=\"/holds\"]'); \
                         const x = document.createElement('input'); x.type = 'hidden'; x.name = 'seat'; x.value = '5'; \
                         f.appendChild(x); document.getElementById('hold-button').click(); true",
                    );
                })),
            ];
            for scheme in ["light", "dark"] {
                b.call(
                    "Emulation.setEmulatedMedia",
                    json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
                );
                for (what, go) in &pages {
                    go(&mut b);
                    let runs: Vec<TextRun> = serde_json::from_value(b.eval(TEXT_RUNS)).unwrap();
                    assert!(runs.len() >= 3, "{what} ({scheme}): no text found");
                    let low = low_contrast(&runs);
                    assert!(low.is_empty(), "{what} ({scheme}): text below WCAG AA contrast:\n{}", low.join("\n"));
                    let nested = b.eval(NESTED);
                    assert_eq!(nested, json!([]), "{what}: interactive elements nested in others");
                    let (unnamed, named) = unnamed_controls(&mut b);
                    assert!(unnamed.is_empty(), "{what} ({scheme}): controls without a name: {unnamed:?}");
                    assert!(!named.is_empty(), "{what}: no controls found in the accessibility tree");
                    if what.starts_with("the seat map") {
                        let seats: Vec<&String> =
                            named.iter().filter(|(r, _)| r == "checkbox").map(|(_, n)| n).collect();
                        assert_eq!(seats.len(), 500, "{what}: every seat is a checkbox");
                        for (id, state) in [
                            (0, "held for you"),
                            (2, "free"),
                            (5, "held by someone at checkout"),
                            (10, "sold"),
                        ] {
                            let name = format!("Row A, Seat {}, {state}", id + 1);
                            assert!(seats.contains(&&name), "{what}: no seat named {name:?} among {:?}", &seats[..12]);
                        }
                        assert!(
                            named.iter().any(|(r, n)| r == "combobox" && n == "Section"),
                            "{what}: the section picker is named: {named:?}"
                        );
                    }
                    if what.ends_with("an error") {
                        let error = b.eval("document.getElementById('error').textContent");
                        assert!(error.as_str().unwrap_or("").contains("Someone else got there first"), "{error}");
                    }
                    if scheme == "light" && *what == "the seat map" {
                        screenshot(&mut b, "seat-map.png");
                    }
                }
            }
            // The order page, after paying (no key events here: the keyboard test does that).
            b.navigate(&format!("{}/seats", d.url));
            b.navigate_by("document.getElementById('pay').click(); true");
            for scheme in ["light", "dark"] {
                b.call(
                    "Emulation.setEmulatedMedia",
                    json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
                );
                let runs: Vec<TextRun> = serde_json::from_value(b.eval(TEXT_RUNS)).unwrap();
                let low = low_contrast(&runs);
                assert!(low.is_empty(), "the order page ({scheme}): {}", low.join("\n"));
                let (unnamed, _) = unnamed_controls(&mut b);
                assert!(unnamed.is_empty(), "the order page: {unnamed:?}");
            }
        })
        .await
        .unwrap();
    }

    /// "Leave without buying" asks first, with script turned off (the confirmation is a page of its own): the
    /// keyboard's Enter on it shows what leaving gives up and changes nothing; "No" goes back to the seats with the
    /// hold as it was; "Yes" releases the seats and gives the place to the next person.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leaving_without_buying_is_confirmed_first_even_without_script() {
        let _ = waitroom_testkit::chromium::binary();
        let d = demo().await;
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let mut b = Chromium::launch();
            b.call(
                "Emulation.setFocusEmulationEnabled",
                json!({ "enabled": true }),
            );
            enter(&mut b, &rt, &d);
            b.call(
                "Emulation.setScriptExecutionDisabled",
                json!({ "value": true }),
            );
            // Hold a seat with the keyboard (the page's script is off: plain HTML).
            tab_until(&mut b, false, 10, "the first free seat", is_free_seat);
            press(&mut b, " ", false);
            tab_until(&mut b, true, 2, "the hold button", |f| {
                f["id"] == "hold-button"
            });
            press_and_load(&mut b, "Enter");
            assert_eq!(d.shop.inventory().counts().held, 1);

            tab_until(&mut b, false, 3, "the leave button", |f| f["id"] == "leave");
            press_and_load(&mut b, "Enter");
            let page = b.eval("document.body.innerText");
            let page = page.as_str().unwrap_or_default().to_owned();
            assert!(
                page.contains("Leave without buying?") && page.contains("Section 1, Row A, Seat 1"),
                "the confirmation names what goes: {page}"
            );
            assert_eq!(
                d.shop.inventory().counts().held,
                1,
                "nothing released before the answer"
            );
            assert_eq!(
                d.room.stats().active,
                1,
                "the place is kept before the answer"
            );

            tab_until(&mut b, false, 3, "No", |f| f["id"] == "leave-cancel");
            press_and_load(&mut b, "Enter");
            let back = b.eval(
                "document.getElementById('hold') && document.getElementById('hold').innerText",
            );
            assert!(
                back.as_str()
                    .unwrap_or("")
                    .contains("Section 1, Row A, Seat 1"),
                "back on the seat map with the hold: {back}"
            );

            tab_until(&mut b, false, 3, "the leave button", |f| f["id"] == "leave");
            press_and_load(&mut b, "Enter");
            tab_until(&mut b, false, 3, "Yes", |f| f["id"] == "leave-confirm");
            press_and_load(&mut b, "Enter");
            let event = b.eval("document.querySelector('h1').textContent");
            assert_eq!(event, "The 2026 Stadium Tour", "left for the event page");
            assert_eq!(
                d.shop.inventory().counts().held,
                0,
                "the seat is back on sale"
            );
            let room = d.room.clone();
            rt.block_on(async move {
                let deadline = tokio::time::Instant::now() + ADMIT_LIMIT;
                let mut every = tokio::time::interval(Duration::from_millis(50));
                while room.stats().active != 0 {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "the place was not given up"
                    );
                    every.tick().await;
                }
            });
        })
        .await
        .unwrap();
    }
}
