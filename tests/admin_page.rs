//! The operator's status page in a real browser: headless Chromium (Debian's `chromium`, driven over the DevTools
//! protocol by `waitroom_testkit::chromium`) opens `/waitroom/admin/` on the demo storefront, is refused without a
//! token and with a wrong one, logs in, sees the figures change while a crowd joins, pauses and resumes the door and
//! changes the opening time from the page.
//!
//! Chromium is required: without it this test fails (`apt-get install -y chromium`; `.ci/run` installs it). Set
//! `WAITROOM_UPDATE_SCREENSHOT=1` to rewrite `docs/admin-page.png` from this run.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use serde_json::json;
use waitroom::demo::{OpsOptions, Shop, room_layer_with};
use waitroom::layer::WaitingRoom;
use waitroom::verify::VerifyLayer;
use waitroom_testkit::chromium::Chromium;
use waitroom_testkit::http::browser as client;

const TOKEN: &str = "ada-status-page-secret-0123456789";
/// How long the page may take to show a change (it reads the figures every 2 s).
const SHOWN_WITHIN: Duration = Duration::from_secs(20);

/// The demo storefront with the kit on: capacity 1, the real clock, the door every 50 ms.
async fn storefront() -> (String, WaitingRoom) {
    let room = WaitingRoom::builder("tour-2026-stadium")
        .display_name("The 2026 Stadium Tour")
        .capacity(1)
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
    let ops = OpsOptions {
        admin_tokens: vec![("ada".into(), TOKEN.into())],
        metrics: true,
        metrics_token: None,
    };
    let app = shop
        .router(VerifyLayer::new(room.verifier().clone()))
        .layer(room_layer_with(room.clone(), &ops).unwrap());
    (waitroom_testkit::http::serve(app).await, room)
}

fn text(id: &str) -> String {
    format!("document.getElementById('{id}') && document.getElementById('{id}').textContent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_logs_in_watches_the_line_and_steers_the_door_from_the_page() {
    let _ = waitroom_testkit::chromium::binary();
    let (url, room) = storefront().await;
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let mut b = Chromium::launch();
        let page = format!("{url}/waitroom/admin/");

        // Without a token: the login form and nothing of the page.
        b.navigate(&page);
        let shown = b.eval(
            "({ login: !!document.getElementById('login-form'), door: !!document.getElementById('door-state'), \
             body: document.body.innerText })",
        );
        assert_eq!(shown["login"], true, "{shown}");
        assert_eq!(shown["door"], false, "the page is not reachable without the token: {shown}");
        let blocked = b.eval(&format!(
            "fetch('{url}/waitroom/admin/stats').then(r => r.status)"
        ));
        assert_eq!(blocked, 401);

        // A wrong token is refused.
        b.navigate_by(
            "document.getElementById('token').value = 'ada-status-page-secret-012345678X'; \
             document.getElementById('login-form').requestSubmit(); true",
        );
        let msg = b.eval(&text("login-message"));
        assert!(msg.as_str().unwrap_or("").contains("not right"), "{msg}");
        assert_eq!(b.eval("!!document.getElementById('door-state')"), false);

        // The right one: the live page, its figures read from the room.
        b.navigate_by(&format!(
            "document.getElementById('token').value = '{TOKEN}'; \
             document.getElementById('login-form').requestSubmit(); true"
        ));
        b.wait_for(
            "Number(document.body.dataset.updates) >= 1",
            &text("door-state"),
            SHOWN_WITHIN,
            "the page shows the figures",
        );
        assert_eq!(b.eval(&text("who")), "ada");
        assert_eq!(b.eval(&text("waiting")), "0");
        assert_eq!(b.eval(&text("seats-left")), "48,000");

        // A crowd joins: the page's figures follow without a reload.
        rt.block_on(async {
            // Each one's holding page polls once: a first contact's ticket takes its place in the line then
            // (the first goes straight in: the room had a free place).
            for _ in 0..12 {
                let c = client();
                let res = c.get(format!("{url}/seats")).send().await.unwrap();
                assert_eq!(res.status(), 200);
                let res = c
                    .get(format!("{url}/waitroom/status"))
                    .header("accept", "application/json")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200);
            }
        });
        let waiting = b.wait_for(
            &format!("{} === '11' && {} === '1'", text("waiting"), text("active")),
            &format!("[{}, {}]", text("waiting"), text("active")),
            SHOWN_WITHIN,
            "the page shows 11 waiting and 1 inside",
        );
        assert_eq!(waiting, json!(["11", "1"]));
        let door = b.eval(&text("door-state"));
        assert_eq!(door, "full", "capacity 1 is reached");

        // Pause and resume from the page.
        b.eval("document.getElementById('pause').click(); true");
        b.wait_for(
            &format!("{} === 'paused'", text("door-state")),
            &text("door-state"),
            SHOWN_WITHIN,
            "the page shows the door paused",
        );
        assert!(room.stats().paused, "the room is paused");
        b.eval("document.getElementById('resume').click(); true");
        b.wait_for(
            &format!("{} !== 'paused'", text("door-state")),
            &text("door-why"),
            SHOWN_WITHIN,
            "the page shows the door resumed",
        );
        assert!(!room.stats().paused, "the room is resumed");

        // Change the opening time: in an hour, whole seconds (the page's field is in the browser's local time).
        let target = (room.clock().now_ms() / 1000 + 3600) * 1000;
        b.eval(&format!(
            "(() => {{ const d = new Date({target}); const p = (n) => String(n).padStart(2, '0'); \
             document.getElementById('opens-input').value = d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + \
             p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds()); \
             document.getElementById('schedule-form').requestSubmit(); return true; }})()"
        ));
        let iso = b.eval(&format!(
            "new Date({target}).toISOString().replace('.000Z', 'Z')"
        ));
        b.wait_for(
            &format!("{} === {iso}", text("opens-at")),
            &text("opens-at"),
            SHOWN_WITHIN,
            "the page shows the new opening time",
        );
        assert_eq!(room.snapshot().settings.opens_at_ms, Some(target));
        b.wait_for(
            &format!("{} === 'not open'", text("door-state")),
            &text("door-why"),
            SHOWN_WITHIN,
            "the door waits for its new opening",
        );

        // The audit table names the operator for each action.
        let audit = b.wait_for(
            "document.getElementById('audit-rows').textContent.includes('schedule')",
            "Array.from(document.querySelectorAll('#audit-rows tr')).map(r => r.textContent)",
            SHOWN_WITHIN,
            "the audit log lists the actions",
        );
        let rows: Vec<String> = serde_json::from_value::<Vec<String>>(audit).unwrap();
        for action in ["schedule", "resume", "pause", "login"] {
            assert!(
                rows.iter().any(|r| r.contains("ada") && r.contains(action)),
                "{action} in {rows:?}"
            );
        }

        let png = base64::engine::general_purpose::STANDARD
            .decode(b.screenshot_base64())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "a real PNG");
        if std::env::var_os("WAITROOM_UPDATE_SCREENSHOT").is_some() {
            let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
            std::fs::write(docs.join("admin-page.png"), &png).unwrap();
        }
    })
    .await
    .unwrap();
}
