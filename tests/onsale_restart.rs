//! The one-process demo killed with SIGKILL in the middle of a sale and started again on the same data directory.
//!
//! The demo runs as a child process: this test binary started again on its ignored child test, which serves the
//! on-sale exactly as `examples/onsale.rs` does (`waitroom::demo::start_onsale` with a data directory, the embedded
//! store) on an ephemeral port, prints its address, and logs each commit of its data file. The parent drives a
//! crowd over real HTTP with cookie jars: a line, three admitted at checkout (one holding seats), one finished by
//! paying; it waits until the data file has committed the last join (no sleeps: it reads the child's commit log),
//! kills the child with SIGKILL, starts it again and checks: everyone in line keeps their number, place and order;
//! admitted passes still open the protected routes (and a held seat is still theirs); the finished pass stays
//! refused; the order's confirmation still opens; a newcomer queues behind everyone; the capacity holds.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::cookie::{CookieStore as _, Jar};
use reqwest::redirect::Policy;
use serde_json::Value;

const CHILD_DIR: &str = "WAITROOM_RESTART_CHILD_DIR";
/// The longest any wait here may take (a debug build on a shared 2-core machine).
const WAIT: Duration = Duration::from_secs(60);

/// The child: the demo's on-sale on `$WAITROOM_RESTART_CHILD_DIR`, serving until it is killed.
#[test]
#[ignore = "the child process of the restart test; does nothing on its own"]
fn demo_child_serves_until_killed() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "info,waitroom_layer::store=debug",
        ))
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let options = waitroom::demo::RoomOptions {
            capacity: 3,
            tick_interval: Duration::from_millis(50),
            data_dir: Some(PathBuf::from(dir)),
            // The sale follows buyers through the line; going straight in has its own tests.
            straight_in: false,
            ..Default::default()
        };
        let shop = waitroom::demo::Shop::builder(40)
            .max_per_order(4)
            .payment_latency(Duration::from_millis(10));
        let sale = waitroom::demo::start_onsale(
            &options,
            shop,
            (None, None),
            &waitroom::demo::OpsOptions::default(),
        )
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("listening http://{}", listener.local_addr().unwrap());
        waitroom::demo::serve_behind_room(listener, sale.layer, sale.app)
            .await
            .unwrap();
    });
}

/// A running demo child: its address and the numbers its data file has committed up to.
struct Demo {
    child: Child,
    url: String,
    committed: mpsc::Receiver<u64>,
    committed_up_to: u64,
}

impl Demo {
    fn start(dir: &Path) -> Demo {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "demo_child_serves_until_killed",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (url_tx, url_rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // (libtest's "test ... " may start the line)
                if let Some((_, url)) = line.split_once("listening ") {
                    let _ = url_tx.send(url.trim().to_owned());
                }
            }
        });
        let (tx, committed) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("committed")
                    && let Some(n) = line
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("last_number="))
                {
                    let _ = tx.send(n.parse::<u64>().unwrap());
                } else if line.contains("panicked") || line.contains("ERROR") {
                    eprintln!("child: {line}");
                }
            }
        });
        let url = match url_rx.recv_timeout(WAIT) {
            Ok(url) => url,
            Err(e) => {
                let _ = child.kill();
                panic!("the demo printed no address within {WAIT:?}: {e}");
            }
        };
        Demo {
            child,
            url,
            committed,
            committed_up_to: 0,
        }
    }

    /// Waits until a commit has read the line with `number` given out (every change before that join is in it).
    fn wait_committed(&mut self, number: u64) {
        let deadline = Instant::now() + WAIT;
        while self.committed_up_to < number {
            match self
                .committed
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(n) => self.committed_up_to = self.committed_up_to.max(n),
                Err(e) => panic!(
                    "no commit with number {number} within {WAIT:?} (last {}): {e}",
                    self.committed_up_to
                ),
            }
        }
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

struct Buyer {
    client: reqwest::Client,
    jar: Arc<Jar>,
}

impl Buyer {
    fn new() -> Buyer {
        let jar = Arc::new(Jar::default());
        let client = reqwest::Client::builder()
            .cookie_provider(jar.clone())
            .redirect(Policy::none())
            .build()
            .unwrap();
        Buyer { client, jar }
    }

    /// The cookies this buyer would send to `url`.
    fn cookies(&self, url: &str) -> String {
        self.jar
            .cookies(&url.parse().unwrap())
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    }

    async fn get(&self, url: &str, path: &str) -> (StatusCode, Value) {
        let res = self
            .client
            .get(format!("{url}{path}"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        (res.status(), res.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, url: &str, path: &str, form: &str) -> (StatusCode, Value) {
        let res = self
            .client
            .post(format!("{url}{path}"))
            .header("accept", "application/json")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.to_owned())
            .send()
            .await
            .unwrap();
        (res.status(), res.json().await.unwrap_or(Value::Null))
    }

    async fn status(&self, url: &str) -> Value {
        let (code, json) = self.get(url, "/waitroom/status").await;
        assert_eq!(code, 200);
        json
    }

    /// Polls the status until the state is `state` (a bounded wait; the demo ticks every 50 ms).
    async fn wait_for(&self, url: &str, state: &str) {
        let deadline = Instant::now() + WAIT;
        let mut every = tokio::time::interval(Duration::from_millis(20));
        loop {
            every.tick().await;
            let st = self.status(url).await;
            if st["state"] == state {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not {state} within {WAIT:?}: {st}"
            );
        }
    }
}

fn place(st: &Value) -> (String, u64, u64) {
    (
        st["state"].as_str().unwrap_or_default().to_owned(),
        st["number"].as_u64().unwrap_or(0),
        st["position"].as_u64().unwrap_or(0),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_killed_mid_sale_resumes_with_every_place_and_pass() {
    let dir = std::env::temp_dir().join(format!(
        "waitroom-restart-{}-{}",
        std::process::id(),
        waitroom::layer::WaitingRoom::new_session_id()
    ));
    let mut demo = tokio::task::block_in_place(|| Demo::start(&dir));
    let url = demo.url.clone();

    // Ten buyers ask for the seat map: places 1..10.
    let buyers: Vec<Buyer> = (0..10).map(|_| Buyer::new()).collect();
    for (i, b) in buyers.iter().enumerate() {
        let (code, st) = b.get(&url, "/seats").await;
        assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "buyer {i}");
        assert_eq!(st["number"], i as u64 + 1);
    }
    // The door lets three in; they reach the seat map. Buyer 1 holds two seats; buyer 0 holds and pays.
    for b in &buyers[..3] {
        b.wait_for(&url, "admitted").await;
        assert_eq!(b.get(&url, "/seats").await.0, 200);
    }
    assert_eq!(buyers[1].post(&url, "/holds", "seat=3&seat=4").await.0, 200);
    assert_eq!(buyers[0].post(&url, "/holds", "seat=0&seat=1").await.0, 200);
    let finished_cookies = buyers[0].cookies(&url);
    assert!(
        finished_cookies.contains("waitroom_token="),
        "{finished_cookies}"
    );
    let (code, paid) = buyers[0].post(&url, "/pay", "").await;
    assert_eq!(code, 200, "{paid}");
    let order_url = paid["url"].as_str().unwrap().to_owned();
    // The place frees: buyer 3 is let in and claims its pass.
    buyers[3].wait_for(&url, "admitted").await;
    assert_eq!(buyers[3].get(&url, "/seats").await.0, 200);
    // One more in line, then wait until the data file has committed that join (and so all of the above).
    let fence = Buyer::new();
    let (_, st) = fence.get(&url, "/seats").await;
    let fence_number = st["number"].as_u64().unwrap();
    tokio::task::block_in_place(|| demo.wait_committed(fence_number));
    // The shop's file has the order too (written every 100 ms while something changed).
    let shop_file = dir.join(waitroom::demo::SHOP_FILE);
    let order_id = order_url.trim_start_matches("/orders/").to_owned();
    let deadline = Instant::now() + WAIT;
    let mut every = tokio::time::interval(Duration::from_millis(20));
    while !std::fs::read_to_string(&shop_file).is_ok_and(|s| s.contains(&order_id)) {
        assert!(Instant::now() < deadline, "the shop never saved the order");
        every.tick().await;
    }
    let waiting: Vec<&Buyer> = buyers[4..].iter().chain([&fence]).collect();
    // Each one's first poll redeems its ticket, and a position counts the people ahead as of the room's last
    // snapshot (refreshed in the background a few times a second): read the line until it shows what it holds,
    // these seven at places 1 to 7 in order, so the positions compared after the restart are the settled ones, not
    // one read between a redemption and the next refresh.
    let deadline = Instant::now() + WAIT;
    let settled: Vec<u64> = (1..=waiting.len() as u64).collect();
    let before = loop {
        let mut read = Vec::new();
        for b in &waiting {
            read.push(place(&b.status(&url).await));
        }
        if read.iter().map(|p| p.2).collect::<Vec<_>>() == settled {
            break read;
        }
        assert!(
            Instant::now() < deadline,
            "the line's positions did not settle within {WAIT:?}: {read:?}"
        );
        every.tick().await;
    };
    assert!(before.iter().all(|p| p.0 == "waiting"), "{before:?}");

    // SIGKILL mid-sale, and the same directory again.
    demo.kill();
    let demo = tokio::task::block_in_place(|| Demo::start(&dir));
    let url = demo.url.clone();

    // Everyone in line: the same number, place and order.
    let mut after = Vec::new();
    for b in &waiting {
        after.push(place(&b.status(&url).await));
    }
    assert_eq!(after, before, "the line after the restart");
    assert!(after.windows(2).all(|w| w[0].2 < w[1].2), "order kept");
    // The admitted: their passes open the protected routes, and buyer 1's seats are still held for it.
    for (i, b) in buyers[1..4].iter().enumerate() {
        let (code, me) = b.get(&url, "/api/me").await;
        assert_eq!(code, 200, "buyer {}'s pass after the restart: {me}", i + 1);
    }
    let (code, map) = buyers[1].get(&url, "/seats").await;
    assert_eq!(code, 200);
    assert_eq!(map["seats"][3]["state"], "mine", "the hold survived");
    assert_eq!(map["seats"][0]["state"], "sold", "the sale survived");
    // The finished pass stays refused (sent as it was before the payment cleared it).
    let replay = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let res = replay
        .get(format!("{url}/api/me"))
        .header("accept", "application/json")
        .header("cookie", &finished_cookies)
        .send()
        .await
        .unwrap();
    assert_ne!(res.status(), 200, "a finished pass after the restart");
    // The order's confirmation still opens.
    let (code, order) = Buyer::new().get(&url, &order_url).await;
    assert_eq!(code, 200, "{order}");
    // A newcomer queues behind everyone.
    let newcomer = Buyer::new();
    let (code, st) = newcomer.get(&url, "/seats").await;
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS);
    let (_, number, position) = place(&st);
    let last = after.last().unwrap();
    assert!(
        number > last.1 && position > last.2,
        "newcomer at {number}/{position}, behind {last:?}"
    );
    // The capacity holds: three are inside, so nobody more is let in until one leaves; then exactly one.
    assert_eq!(buyers[4].status(&url).await["state"], "waiting");
    assert_eq!(buyers[1].post(&url, "/leave", "").await.0, 200);
    buyers[4].wait_for(&url, "admitted").await;
    let st = buyers[5].status(&url).await;
    assert_eq!(
        (st["state"].as_str(), st["position"].as_u64()),
        (Some("waiting"), Some(1)),
        "one place freed, one let in"
    );
    demo.kill();
    let _ = std::fs::remove_dir_all(&dir);
}
