//! The store's errors: configuration mistakes are configuration errors, outages keep Redis's error as their source.

use std::error::Error as _;
use std::time::Duration;

use ::redis::RedisError;

use super::{RedisStore, SEEN_SLOT_MS, seen_keep_ms, store_error};
use crate::error::StoreError;

/// A local port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

fn expect_config(r: Result<RedisStore, StoreError>, says: &str) -> StoreError {
    let e = r.expect_err("the builder must refuse");
    assert!(
        matches!(e, StoreError::Config { .. }),
        "expected a configuration error, got {e:?}"
    );
    assert!(!e.is_unavailable(), "{e} must not count as an outage");
    assert!(
        e.to_string().contains(says),
        "`{e}` should mention `{says}`"
    );
    e
}

#[tokio::test]
async fn a_brace_in_the_key_prefix_is_a_configuration_error_not_an_outage() {
    let url = format!("redis://127.0.0.1:{}/", closed_port());
    for prefix in ["w{r", "wr}"] {
        let r = RedisStore::builder(&url).key_prefix(prefix).connect().await;
        expect_config(r, "key prefix");
    }
}

#[tokio::test]
async fn a_draw_size_out_of_range_is_a_configuration_error() {
    let url = format!("redis://127.0.0.1:{}/", closed_port());
    for bits in [0, 17] {
        let r = RedisStore::builder(&url)
            .draw_buckets_log2(bits)
            .connect()
            .await;
        expect_config(r, "draw_buckets_log2");
    }
}

#[tokio::test]
async fn a_zero_timeout_is_a_configuration_error() {
    let url = format!("redis://127.0.0.1:{}/", closed_port());
    let r = RedisStore::builder(&url)
        .timeout(Duration::ZERO)
        .connect()
        .await;
    expect_config(r, "timeouts");
    let r = RedisStore::builder(&url)
        .connect_timeout(Duration::ZERO)
        .connect()
        .await;
    expect_config(r, "timeouts");
}

#[tokio::test]
async fn a_malformed_url_is_a_configuration_error_that_keeps_its_cause_and_not_the_password() {
    let r = RedisStore::builder("rediss-nope://:hunter2@127.0.0.1:6379/")
        .connect()
        .await;
    let e = expect_config(r, "invalid Redis URL");
    let source = e.source().expect("the URL error is kept");
    assert!(source.downcast_ref::<RedisError>().is_some(), "{source:?}");
    assert!(!format!("{e} {e:?}").contains("hunter2"), "{e:?}");
}

#[tokio::test]
async fn an_unreachable_redis_is_an_outage_with_the_redis_error_as_its_source() {
    let url = format!("redis://:hunter2@127.0.0.1:{}/", closed_port());
    let e = RedisStore::builder(url)
        .connect_timeout(Duration::from_millis(500))
        .connect()
        .await
        .expect_err("nothing listens there");
    assert!(e.is_unavailable(), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("store unavailable: connecting to Redis: "),
        "{e}"
    );
    let source = e.source().expect("the Redis error is kept");
    assert!(source.downcast_ref::<RedisError>().is_some(), "{source:?}");
    assert!(!format!("{e} {e:?}").contains("hunter2"), "{e:?}");
}

#[test]
fn a_failed_command_is_an_outage_that_names_redis_and_keeps_its_error() {
    let e = store_error(RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "Redis did not answer within 1s",
    )));
    assert_eq!(
        e.to_string(),
        "store unavailable: redis: Redis did not answer within 1s"
    );
    let source = e.source().expect("kept").downcast_ref::<RedisError>();
    assert!(source.is_some_and(RedisError::is_timeout), "{e:?}");
}

#[test]
fn a_liveness_mark_outlives_the_grace_by_more_than_a_slot() {
    // A mark made at the very start of its slot is read until the grace has passed from the slot's end: it must be
    // kept at least the grace plus one whole slot after it was made, whatever the grace (zero included), and one
    // more slot for the clocks of the room and of Redis (`PEXPIRE` runs on Redis's; the slot on the room's).
    for grace in [0, 1, 9_999, 10_000, 60_000, 180_000, 3_600_000] {
        let keep = seen_keep_ms(grace);
        assert!(
            keep >= grace + 2 * SEEN_SLOT_MS,
            "a grace of {grace} ms keeps its marks {keep} ms"
        );
    }
}

/// The scripts' slot length (`SEEN_SLOT` in `prelude.lua`, which the joins' bitmaps use) is the room's, which the
/// marks and the tick use: a mismatch would read the joins of the wrong slots.
#[test]
fn the_scripts_slot_length_is_the_rooms() {
    let prelude = include_str!("scripts/prelude.lua");
    assert!(
        prelude.contains(&format!("local SEEN_SLOT = {SEEN_SLOT_MS}\n")),
        "prelude.lua's SEEN_SLOT is not SEEN_SLOT_MS ({SEEN_SLOT_MS})"
    );
}
