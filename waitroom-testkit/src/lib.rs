//! Fixtures shared by the waitroom crates' integration tests, so that each crate's tests (also as packaged on
//! crates.io) use one copy rather than reaching into another crate's `tests/` folder.
//!
//! - [`redis`]: a real `redis-server` started on a free port in a fresh directory and stopped on drop
//!   ([`redis::RedisServer`]), or the one named by `REDIS_URL`. Std only. Built so that a cluster of nodes or
//!   sentinels can be added beside the single server (`redis/cluster.rs`, `redis/sentinel.rs`) on the same process
//!   and protocol helpers.
//! - `http` (feature `http`): a browser-like client and an axum server on an ephemeral loopback port.
//! - `chromium` (feature `chromium`): headless Chromium driven over the DevTools protocol on a pipe, for tests that
//!   log in, click and read a page.
//!
//! Tests never skip silently: when `redis-server` is not on the `PATH` and `REDIS_URL` is unset, the fixture
//! panics with a hint saying how to install it.
#![forbid(unsafe_code)]

#[cfg(feature = "chromium")]
pub mod chromium;
#[cfg(feature = "http")]
pub mod http;
pub mod redis;

mod port;
