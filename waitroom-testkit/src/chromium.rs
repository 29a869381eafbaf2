//! Headless Chromium driven over the DevTools protocol, for tests that click through a page.
//!
//! Chromium is started with `--remote-debugging-pipe`: it reads protocol messages (JSON, each ended by a NUL
//! byte) on its file descriptor 3 and writes on 4. A shell maps those onto the child's standard input and output,
//! so no WebSocket, no port and no extra crate are needed. Std only (plus `serde_json`); every wait has a timeout
//! and fails with a message.
//!
//! Chromium is required: [`binary`] panics with an install hint when it finds none (`apt-get install -y
//! chromium`, or `CHROMIUM=/path/to/chrome`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one protocol call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long Chromium may take to start and answer its first call (a loaded 2-core machine has taken over 30 s).
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// The Chromium binary: `CHROMIUM`, else Debian's `/usr/bin/chromium` (or `chromium-browser`).
///
/// # Panics
/// When none is found, with the command that installs it.
pub fn binary() -> PathBuf {
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

/// A headless Chromium with one page, driven over the DevTools protocol. Killed (and its profile removed) on drop.
pub struct Chromium {
    child: Child,
    to_browser: ChildStdin,
    from_browser: Receiver<Value>,
    /// Events received while waiting for something else, oldest first.
    events: Vec<Value>,
    next_id: u64,
    session: String,
    profile: PathBuf,
}

impl std::fmt::Debug for Chromium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chromium")
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl Chromium {
    /// Starts headless Chromium with a fresh profile and attaches to its page.
    ///
    /// # Panics
    /// When Chromium is missing or does not answer.
    pub fn launch() -> Self {
        let bin = binary();
        static LAUNCHES: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let profile = std::env::temp_dir().join(format!(
            "waitroom-cdp-{}-{nanos}-{}",
            std::process::id(),
            LAUNCHES.fetch_add(1, Ordering::Relaxed)
        ));
        // fd 3 (commands) is the child's stdin, fd 4 (answers) its stdout; then both are pointed elsewhere.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(&bin)
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
                "--window-size=1200,1000",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "could not run {} ({e}): `apt-get install -y chromium`",
                    bin.display()
                )
            });
        let to_browser = child.stdin.take().expect("a pipe to Chromium");
        let out = child.stdout.take().expect("a pipe from Chromium");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if buf.last() == Some(&0) {
                            buf.pop();
                        }
                        if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                            && tx.send(v).is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
        let mut c = Self {
            child,
            to_browser,
            from_browser: rx,
            events: Vec::new(),
            next_id: 0,
            session: String::new(),
            profile,
        };
        let targets = c.send_within(None, "Target.getTargets", json!({}), START_TIMEOUT);
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["targetId"].as_str())
            .unwrap_or_else(|| panic!("Chromium shows no page: {targets}"))
            .to_owned();
        let attached = c.send(
            None,
            "Target.attachToTarget",
            json!({ "targetId": page, "flatten": true }),
        );
        c.session = attached["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {attached}"))
            .to_owned();
        c.call("Page.enable", json!({}));
        c.call("Runtime.enable", json!({}));
        c
    }

    fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.send_within(session, method, params, CALL_TIMEOUT)
    }

    fn send_within(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).expect("JSON");
        bytes.push(0);
        self.to_browser
            .write_all(&bytes)
            .and_then(|()| self.to_browser.flush())
            .unwrap_or_else(|e| panic!("Chromium went away ({e}) before {method}"));
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from_browser.recv_timeout(left) {
                Ok(v) if v["id"] == id => {
                    if let Some(err) = v.get("error") {
                        panic!("{method} failed: {err}");
                    }
                    return v["result"].clone();
                }
                Ok(v) => {
                    if v.get("method").is_some() {
                        self.events.push(v);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("Chromium did not answer {method} within {timeout:?}")
                }
                Err(RecvTimeoutError::Disconnected) => panic!("Chromium went away during {method}"),
            }
        }
    }

    /// Calls a DevTools method on the page; returns its result.
    ///
    /// # Panics
    /// On a protocol error or when Chromium does not answer within 30 s.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(Some(&session), method, params)
    }

    /// Waits for the page event `method` that arrives after the last [`forget_events`](Self::forget_events).
    ///
    /// # Panics
    /// When it does not come within `timeout`.
    pub fn wait_event(&mut self, method: &str, timeout: Duration) -> Value {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from_browser.recv_timeout(left) {
                Ok(v) if v["method"] == method => return v,
                Ok(v) => {
                    if v.get("method").is_some() {
                        self.events.push(v);
                    }
                }
                Err(_) => panic!("no {method} within {timeout:?}"),
            }
        }
    }

    /// Drops the events received so far (before an action whose event the test then waits for).
    pub fn forget_events(&mut self) {
        while let Ok(v) = self.from_browser.try_recv() {
            drop(v);
        }
        self.events.clear();
    }

    /// Loads `url` and waits for its `load` event.
    pub fn navigate(&mut self, url: &str) {
        self.forget_events();
        let r = self.call("Page.navigate", json!({ "url": url }));
        if let Some(e) = r.get("errorText") {
            panic!("could not load {url}: {e}");
        }
        self.wait_event("Page.loadEventFired", CALL_TIMEOUT);
    }

    /// Runs `action` (script that makes the page navigate, a form submission for instance) and waits for the new
    /// page's `load` event.
    pub fn navigate_by(&mut self, action: &str) {
        self.forget_events();
        self.eval(action);
        self.wait_event("Page.loadEventFired", CALL_TIMEOUT);
    }

    /// Evaluates `expression` in the page (awaiting a promise); returns its value.
    ///
    /// # Panics
    /// When the script throws.
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("the page's script threw: {e}\n  in: {expression}");
        }
        r["result"]["value"].clone()
    }

    /// Waits in the page (no sleep here: the page checks `condition`, a JS expression, every 50 ms) until it is
    /// true; returns `then`'s value at that moment.
    ///
    /// # Panics
    /// When `condition` is still false after `timeout`, with `what` and `then`'s value.
    pub fn wait_for(
        &mut self,
        condition: &str,
        then: &str,
        timeout: Duration,
        what: &str,
    ) -> Value {
        let ms = timeout.as_millis();
        let script = format!(
            "new Promise((resolve) => {{ const end = Date.now() + {ms}; const check = () => {{ \
             let ok = false; try {{ ok = !!({condition}); }} catch (e) {{}} \
             if (ok || Date.now() > end) {{ let v = null; try {{ v = ({then}); }} catch (e) {{ v = String(e); }} \
             resolve({{ ok, v }}); }} else {{ setTimeout(check, 50); }} }}; check(); }})"
        );
        let r = self.eval(&script);
        assert!(
            r["ok"] == json!(true),
            "{what}: not within {timeout:?} (`{condition}`); the page shows: {}",
            r["v"]
        );
        r["v"].clone()
    }

    /// A PNG of the page as it is.
    pub fn screenshot_base64(&mut self) -> String {
        self.call("Page.captureScreenshot", json!({ "format": "png" }))["data"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
