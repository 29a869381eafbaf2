//! A single `redis-server` owned by the test (or an external one named by `REDIS_URL`).

use std::path::PathBuf;
use std::process::Child;

use super::{process, resp};

/// A redis-server process owned by the test (or an external one named by `REDIS_URL`), stopped on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: Option<PathBuf>,
    url: String,
}

impl RedisServer {
    /// Uses `REDIS_URL` if set; otherwise starts a private server.
    ///
    /// # Panics
    /// As [`RedisServer::start`] when it starts one.
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
        let (port, dir, child) = process::spawn_on_free_port("redis", &[]);
        Self {
            child: Some(child),
            port,
            dir: Some(dir),
            url: format!("redis://127.0.0.1:{port}/"),
        }
    }

    /// Starts the server again on its port, in its directory (a restart).
    fn spawn(&mut self) {
        let dir = self.dir.as_ref().expect("a private server has a directory");
        let mut child = process::spawn(self.port, dir, &[]);
        assert!(
            process::answers_ping(self.port, &mut child),
            "redis-server exited at start; is port {} taken?",
            self.port
        );
        self.child = Some(child);
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The port (0 for an external server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server process's id (`None` for an external server).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
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
        if let Some(child) = self.child.take() {
            process::terminate(child);
        }
    }

    /// Starts the server again on the same port and directory (so it reloads its append-only file).
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Kills the server (SIGKILL, nothing flushed), deletes its files and starts it again on the same port: a Redis
    /// that lost every key, as one without persistence (or a fresh replica) comes back.
    ///
    /// # Panics
    /// On an external server.
    pub fn restart_empty(&mut self) {
        assert!(
            !self.is_external(),
            "cannot restart the external Redis at REDIS_URL"
        );
        if let Some(child) = self.child.take() {
            process::kill(child);
        }
        let dir = self.dir.as_ref().expect("a private server has a directory");
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).expect("create the redis-server directory");
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
        resp::command(&self.addr()?, args)
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

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            process::kill(child);
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
