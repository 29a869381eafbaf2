//! A real `redis-server` for tests, started on a free port in a fresh directory and stopped on drop. Std only, so
//! any test crate can include it with `#[path = ".../support/redis_server.rs"] mod redis_server;`.
//!
//! - [`RedisServer::start`] always starts a private server (tests that stop and restart it need their own).
//! - [`RedisServer::from_env_or_start`] uses `REDIS_URL` when it is set, else starts one.
//!
//! When `redis-server` is not on the `PATH` (and `REDIS_URL` is unset), the test fails with a message saying how to
//! install it: it never skips silently.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A redis-server process owned by the test (or an external one named by `REDIS_URL`).
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: Option<PathBuf>,
    url: String,
}

const INSTALL_HINT: &str = "redis-server is not on the PATH and REDIS_URL is not set: \
     install it (`apt-get install redis-server`) or point REDIS_URL at a Redis you can flush";

impl RedisServer {
    /// Uses `REDIS_URL` if set; otherwise starts a private server.
    pub fn from_env_or_start() -> Self {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => Self {
                child: None,
                port: 0,
                dir: None,
                url,
            },
            _ => Self::start(),
        }
    }

    /// Starts a private `redis-server` on a free port, append-only persistence on, in a fresh temporary directory.
    ///
    /// # Panics
    /// When `redis-server` cannot be run (with an `apt-get install redis-server` hint) or does not come up.
    pub fn start() -> Self {
        let port = free_port();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "waitroom-redis-{}-{port}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create the redis-server directory");
        let mut server = Self {
            child: None,
            port,
            dir: Some(dir),
            url: format!("redis://127.0.0.1:{port}/"),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let dir = self.dir.as_ref().expect("a private server has a directory");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "yes"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_HINT}"),
            Err(e) => panic!("could not start redis-server: {e}"),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "redis-server exited at start ({status}); is port {} taken?",
                    self.port
                );
            }
            if self.try_command(&["PING"]).is_some_and(|r| r == "PONG") {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server did not answer PING within 10 s on port {}",
            self.port
        );
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The port (0 for an external server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether this is an external server from `REDIS_URL` (which cannot be stopped or restarted).
    pub fn is_external(&self) -> bool {
        self.dir.is_none()
    }

    /// Stops the server gracefully (SIGTERM: the append-only file is flushed) and waits for it to exit.
    ///
    /// # Panics
    /// On an external server.
    pub fn stop(&mut self) {
        assert!(
            !self.is_external(),
            "cannot stop the external Redis at REDIS_URL"
        );
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Starts the server again on the same port and directory (so it reloads its append-only file).
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Sends one command over a fresh connection and returns the reply as text (integers and simple strings as
    /// written, bulk strings as their content, arrays as their items joined by newlines).
    ///
    /// # Panics
    /// When the server does not answer or answers with an error.
    pub fn command(&self, args: &[&str]) -> String {
        match self.try_command(args) {
            Some(r) => r,
            None => panic!("redis command {args:?} failed"),
        }
    }

    fn try_command(&self, args: &[&str]) -> Option<String> {
        let addr = self.addr()?;
        let stream =
            TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(1)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .ok()?;
        let mut w = stream.try_clone().ok()?;
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a.as_bytes());
            req.extend_from_slice(b"\r\n");
        }
        w.write_all(&req).ok()?;
        let mut r = BufReader::new(stream);
        read_reply(&mut r)
    }

    fn addr(&self) -> Option<String> {
        if self.port != 0 {
            return Some(format!("127.0.0.1:{}", self.port));
        }
        // redis://[user:pass@]host:port/db
        let rest = self.url.strip_prefix("redis://")?;
        let rest = rest.rsplit('@').next()?;
        let hostport = rest.split('/').next()?;
        Some(if hostport.contains(':') {
            hostport.to_owned()
        } else {
            format!("{hostport}:6379")
        })
    }
}

fn read_reply(r: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1.min(line.len()));
    match kind {
        "+" | ":" => Some(rest.to_owned()),
        "-" => None,
        "$" => {
            let n: i64 = rest.parse().ok()?;
            if n < 0 {
                return Some(String::new());
            }
            let mut buf = vec![0; n as usize + 2];
            r.read_exact(&mut buf).ok()?;
            buf.truncate(n as usize);
            String::from_utf8(buf).ok()
        }
        "*" => {
            let n: i64 = rest.parse().ok()?;
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_reply(r)?);
            }
            Some(items.join("\n"))
        }
        _ => None,
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
