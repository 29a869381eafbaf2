//! One `redis-server` process: started with the given arguments, stopped gracefully.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{INSTALL_HINT, scratch_dir};
use crate::port::free_port;

/// Runs `redis-server` on `port` (bound to 127.0.0.1, append-only persistence on, no RDB snapshots) with its files
/// in `dir`; `extra` arguments come last (a cluster node's `--cluster-enabled yes`, for instance).
///
/// # Panics
/// When `redis-server` is not on the `PATH` (with [`INSTALL_HINT`]) or cannot be started.
pub(crate) fn spawn(port: u16, dir: &Path, extra: &[&str]) -> Child {
    spawn_program("redis-server", port, dir, extra)
}

/// Runs `redis-server <conf> --sentinel` (a sentinel reads and rewrites its configuration file, so it gets one of
/// its own).
///
/// # Panics
/// As [`spawn`].
pub(crate) fn spawn_sentinel(conf: &Path) -> Child {
    let child = Command::new("redis-server")
        .arg(conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_HINT}"),
        Err(e) => panic!("could not start redis-server --sentinel: {e}"),
    }
}

fn spawn_program(program: &str, port: u16, dir: &Path, extra: &[&str]) -> Child {
    let child = Command::new(program)
        .args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", "yes"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_HINT}"),
        Err(e) => panic!("could not start redis-server: {e}"),
    }
}

/// Stops the process gracefully (SIGTERM: the append-only file is flushed) and waits up to 10 s for it to exit,
/// then kills it.
pub(crate) fn terminate(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops (SIGSTOP) or continues (SIGCONT) the process: a stopped node answers nothing and receives nothing.
/// SIGKILL ends a stopped process too, so [`kill`] needs no SIGCONT first.
///
/// # Panics
/// When `kill` fails.
pub(crate) fn pause(child: &Child, stop: bool) {
    let sig = if stop { "-STOP" } else { "-CONT" };
    let pid = child.id().to_string();
    let ok = Command::new("kill")
        .args([sig, &pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid} failed");
}

/// Starts `redis-server` on a free port with its files in a fresh scratch directory named after `kind`, and waits
/// for its `PING`. A port found free may be taken by another test's server before this one binds it (it then exits
/// at once): then it tries other ports, up to 5 in all. Returns the port, the directory and the process.
///
/// # Panics
/// As [`spawn`], or when no port of 5 works.
pub(crate) fn spawn_on_free_port(kind: &str, extra: &[&str]) -> (u16, PathBuf, Child) {
    for _ in 0..5 {
        let port = free_port();
        let dir = scratch_dir(kind, port);
        let mut child = spawn(port, &dir, extra);
        if answers_ping(port, &mut child) {
            return (port, dir, child);
        }
    }
    panic!("redis-server ({kind}) would not start on 5 free ports");
}

/// Waits up to 10 s for `child`, started on `port`, to answer `PING`: `false` as soon as it has exited instead (a
/// port taken between [`free_port`](crate::port) and its bind, by another test's server: the caller may try other
/// ports).
///
/// # Panics
/// When it neither answers nor exits within 10 s.
pub(crate) fn answers_ping(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if super::resp::on(port, &["PING"]).is_some_and(|r| r == "PONG") {
            return true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "redis on port {port} did not answer PING within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the process at once and reaps it (for drops, where nothing needs to be flushed).
pub(crate) fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::{INSTALL_HINT, kill, spawn_program};

    #[test]
    fn a_missing_redis_server_fails_with_the_install_hint() {
        let missing = "waitroom-testkit-no-such-redis-server";
        let outcome = std::panic::catch_unwind(|| {
            kill(spawn_program(missing, 1, &std::env::temp_dir(), &[]));
        });
        let message = outcome.expect_err("spawning a missing program panics");
        let message = message
            .downcast_ref::<String>()
            .expect("a formatted panic message");
        assert_eq!(message, INSTALL_HINT);
        assert!(message.contains("apt-get install redis-server"));
    }
}
