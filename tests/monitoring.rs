//! The monitoring kit in `docs/monitoring/`: the Grafana dashboard and the Prometheus alert rules name only metrics
//! the room really exports (read from a real `/waitroom/metrics` scrape of a room that has run a small sale), and
//! the rules pass `promtool check rules` and their unit tests (`promtool test rules`).
//!
//! promtool is required: Debian's `prometheus` package provides it (`apt-get install -y prometheus`; `.ci/run`
//! installs it). Without it the promtool test fails with that hint.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use serde_json::Value;
use waitroom::layer::{Inventory, ManualClock, WaitingRoom, WaitingRoomLayer};

fn monitoring() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/monitoring")
}

fn promtool() -> PathBuf {
    if let Some(p) = std::env::var_os("PROMTOOL") {
        return PathBuf::from(p);
    }
    for p in ["/usr/bin/promtool", "/usr/local/bin/promtool"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "this test needs promtool and found none: `apt-get install -y prometheus` (Debian's package ships \
         /usr/bin/promtool), or set PROMTOOL=/path/to/promtool"
    );
}

fn run_promtool(args: &[&str]) {
    let out = Command::new(promtool())
        .current_dir(monitoring())
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("could not run promtool ({e}): `apt-get install -y prometheus`")
        });
    assert!(
        out.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_alert_rules_pass_promtool_and_fire_on_their_unit_tests() {
    run_promtool(&["check", "rules", "prometheus-alerts.yml"]);
    run_promtool(&["test", "rules", "prometheus-alerts.test.yml"]);
}

/// Every `waitroom_*` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("waitroom_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

/// Every `expr` and templating `query` string in the dashboard.
fn queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "query" | "definition", Value::String(s)) => out.push(s.clone()),
                    _ => queries(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

/// The metric names of a real scrape: a room that has sold, capped, measured its head and reported seats, so the
/// series that appear only then are there.
async fn scraped_names() -> BTreeSet<String> {
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("tour-2026")
        .capacity(2)
        .admit_per_minute(100)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .build()
        .await
        .unwrap();
    room.set_inventory(Inventory {
        total: 100,
        sold: 0,
        held: 0,
    })
    .await
    .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .metrics(true)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .layer(layer);
    let url = waitroom_testkit::http::serve(app).await;
    for i in 0..40 {
        room.join(&format!("fan-{i:03}-0123456789abcdef"), None)
            .await
            .unwrap();
    }
    // Two minutes of a sale: every 5 s those inside buy a seat and the next two go in.
    for _ in 0..24 {
        clock.advance(Duration::from_secs(5));
        let r = room.tick_now().await.unwrap();
        for s in &r.admitted {
            room.finish(s, 1).await.unwrap();
        }
    }
    assert!(
        room.stats().head_rate_per_minute.is_some(),
        "the head is measured: {:?}",
        room.stats()
    );
    let text = reqwest::get(format!("{url}/waitroom/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn every_dashboard_query_and_alert_names_a_metric_the_room_exports() {
    let exported = scraped_names().await;
    for must in [
        "waitroom_waiting",
        "waitroom_head_rate_per_minute",
        "waitroom_seats_available",
        "waitroom_door_open",
    ] {
        assert!(exported.contains(must), "{must} in {exported:?}");
    }

    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(monitoring().join("grafana-dashboard.json")).unwrap(),
    )
    .expect("the dashboard is valid JSON");
    assert!(dash["panels"].as_array().is_some_and(|p| p.len() >= 8));
    let mut qs = Vec::new();
    queries(&dash, &mut qs);
    assert!(qs.len() >= 20, "{qs:?}");
    let mut used = BTreeSet::new();
    for q in &qs {
        let names = metric_names(q);
        assert!(!names.is_empty(), "a query names no waitroom metric: {q}");
        for n in names {
            assert!(
                exported.contains(&n),
                "the dashboard asks for `{n}`, which the room does not export ({q})"
            );
            used.insert(n);
        }
    }

    let rules = std::fs::read_to_string(monitoring().join("prometheus-alerts.yml")).unwrap();
    let names = metric_names(&rules);
    assert!(names.len() >= 8, "{names:?}");
    for n in names {
        assert!(
            exported.contains(&n),
            "an alert rule asks for `{n}`, which the room does not export"
        );
    }
    // The line, the door, the seats and the store all have a panel.
    for n in [
        "waitroom_waiting",
        "waitroom_active",
        "waitroom_capacity",
        "waitroom_tail_eta_seconds",
        "waitroom_seats_sold",
        "waitroom_store_up",
    ] {
        assert!(used.contains(n), "no panel shows {n}");
    }
}
