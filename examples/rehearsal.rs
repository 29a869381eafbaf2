//! Rehearse the on-sale before the day: the seed's stadium on-sale, time-compressed, through the real room.
//!
//! `cargo run --release --example rehearsal` (every parameter is a flag: `--help`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

#[path = "support/store_calls.rs"]
mod store_calls;

use clap::Parser;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use waitroom::rehearsal::{Minute, Params, Report, run_on};
use waitroom_layer::MemoryStore;
use waitroom_layer::store::Store;

#[derive(Debug, Parser)]
#[command(about = "Rehearse an on-sale through the real waiting room, with a manual clock")]
struct Args {
    /// People who come for the on-sale.
    #[arg(long, default_value_t = 600_000)]
    crowd: u64,
    /// Multiplies the crowd, the seats, the capacity and --admit-per-minute together (not the crowd alone): the
    /// ratios and the minutes stay those of the unscaled sale. To grow only the crowd, use --crowd.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Seats on sale.
    #[arg(long, default_value_t = 48_000)]
    seats: u64,
    /// Most sessions active at once.
    #[arg(long, default_value_t = 8_000)]
    capacity: u64,
    /// Minutes of pre-queue before the opening.
    #[arg(long, default_value_t = 30.0)]
    prequeue_minutes: f64,
    /// Share of the crowd arriving before the opening.
    #[arg(long, default_value_t = 0.85)]
    early_share: f64,
    /// Most admissions per minute on top of the capacity (smooths the opening burst); none by default.
    #[arg(long)]
    admit_per_minute: Option<u64>,
    /// Mean minutes after the opening for late arrivals.
    #[arg(long, default_value_t = 3.0)]
    late_mean_minutes: f64,
    /// Fairness: `random` (a draw at the opening) or `fifo`.
    #[arg(long, default_value = "random")]
    fairness: String,
    /// Mean visit length, minutes.
    #[arg(long, default_value_t = 4.0)]
    visit_minutes: f64,
    /// Share of admitted people who buy.
    #[arg(long, default_value_t = 0.9)]
    buy_share: f64,
    /// Shares of orders of 1, 2, 3 and 4 seats, comma-separated (taken relative to their sum).
    #[arg(long, default_value = "0.10,0.15,0.40,0.35", value_parser = order_sizes)]
    order_sizes: OrderSizes,
    /// Share of the non-buyers (admitted people who do not buy) who hold seats before leaving (the holds expire).
    #[arg(long, default_value_t = 0.5)]
    non_buyer_hold_share: f64,
    /// Seconds into a visit at which seats are held.
    #[arg(long, default_value_t = 60)]
    hold_after_seconds: u64,
    /// Share of admitted people who close the tab (they idle out).
    #[arg(long, default_value_t = 0.02)]
    tab_close_share: f64,
    /// Share of people in line giving up per minute.
    #[arg(long, default_value_t = 0.01)]
    give_up_per_minute: f64,
    /// Seconds between polls.
    #[arg(long, default_value_t = 20)]
    poll_seconds: u64,
    /// Share of people who step away once while in line (their page stops polling), at a random moment in
    /// their first 10 minutes after the opening.
    #[arg(long, default_value_t = 0.0)]
    step_away_share: f64,
    /// One-shot visitors (one request each, never back: bots, crawlers, link previews), as a share of the crowd
    /// (above 1 for a flood); each takes a ticket and never redeems it.
    #[arg(long, default_value_t = 0.0)]
    one_shot_share: f64,
    /// Mean minutes away (exponential) of those who step away.
    #[arg(long, default_value_t = 5.0)]
    away_minutes: f64,
    /// Minutes a turn that came while the person was away is kept for them.
    #[arg(long, default_value_t = 10.0)]
    return_window_minutes: f64,
    /// Idle timeout, minutes.
    #[arg(long, default_value_t = 10.0)]
    idle_minutes: f64,
    /// Stop this many minutes after the opening at the latest.
    #[arg(long, default_value_t = 45)]
    max_minutes_after_open: u64,
    /// Random seed.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// `memory` (embedded) or `redis`.
    #[arg(long, default_value = "memory")]
    store: String,
    /// Redis URL for `--store redis`.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Count and time the room's store calls, per kind, and print them after the run (where a Redis run's time
    /// goes: each call is a round trip).
    #[arg(long)]
    count_store_calls: bool,
    /// Where to write the chart (`rehearsal.svg`); the default is the directory the demo's examples write into,
    /// which the repository ignores.
    #[arg(long, default_value = ".waitroom")]
    out: PathBuf,
}

#[derive(Debug, Clone, Copy)]
struct OrderSizes([f64; 4]);

fn order_sizes(s: &str) -> Result<OrderSizes, String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>().map_err(|e| format!("`{x}`: {e}")))
        .collect::<Result<_, _>>()?;
    let shares: [f64; 4] = v
        .try_into()
        .map_err(|_| "four shares: orders of 1, 2, 3 and 4 seats".to_owned())?;
    if shares.iter().any(|x| !x.is_finite() || *x < 0.0) || shares.iter().sum::<f64>() <= 0.0 {
        return Err("shares are non-negative and not all zero".into());
    }
    Ok(OrderSizes(shares))
}

/// Okabe and Ito's colours, told apart with any colour vision (and each line also has its own style).
const BLUE: RGBColor = RGBColor(0x00, 0x72, 0xB2);
const VERMILLION: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
const BLUISH_GREEN: RGBColor = RGBColor(0x00, 0x9E, 0x73);
const REDDISH_PURPLE: RGBColor = RGBColor(0xCC, 0x79, 0xA7);
const GREY: RGBColor = RGBColor(0x59, 0x59, 0x59);

/// One line of the chart: its colour, dash (`None`: solid) and figure per minute.
struct Line {
    color: RGBColor,
    dash: Option<(u32, u32)>,
    value: fn(&Minute) -> u64,
}

/// The chart, three panels over the same minutes, each on its own scale, so 580,000 in line do not flatten the
/// 8,000 inside: the line; the checkout (inside, against the capacity); the seats (sold, held, left). A vertical
/// mark in each at "seats ran out" and "sold out" (the last seat sold). Numbers on the axes read `48,000`.
fn chart(report: &Report, path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (960, 820)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(44);
    title.draw(&Text::new(
        "On-sale rehearsal, minute by minute",
        (12, 10),
        ("sans-serif", 24).into_font().color(&BLACK),
    ))?;
    let rows: Vec<&Minute> = report.minutes.iter().filter(|m| m.minute >= -5).collect();
    let first = rows.first().map_or(0, |m| m.minute) as f64;
    let marks: Vec<(f64, &str)> = [
        (report.no_seat_available_after_seconds, "seats ran out"),
        (report.sold_out_after_seconds, "sold out"),
    ]
    .into_iter()
    .filter_map(|(s, what)| Some((s? as f64 / 60.0, what)))
    .collect();
    // The run stops once the line has heard "sold out", which may be within a minute the table has no row for.
    let last = marks
        .iter()
        .map(|(x, _)| x.ceil())
        .fold(rows.last().map_or(1, |m| m.minute) as f64, f64::max);
    let inside = format!(
        "People inside the checkout (orange; dotted: the capacity, {})",
        waitroom::rehearsal::grouped(report.capacity)
    );
    // Each panel's caption names its lines, their colours and styles (no legend box to cover the lines).
    let panels: [(&str, Vec<Line>, Option<u64>); 3] = [
        (
            "People in line (blue)",
            vec![Line {
                color: BLUE,
                dash: None,
                value: |m| m.waiting,
            }],
            None,
        ),
        (
            &inside,
            vec![Line {
                color: VERMILLION,
                dash: None,
                value: |m| m.active,
            }],
            Some(report.capacity),
        ),
        (
            "Seats: sold (black), left to choose (green, dashed), held by people paying (purple, dotted)",
            vec![
                Line {
                    color: BLACK,
                    dash: None,
                    value: |m| m.sold,
                },
                Line {
                    color: BLUISH_GREEN,
                    dash: Some((10, 6)),
                    value: |m| m.available,
                },
                Line {
                    color: REDDISH_PURPLE,
                    dash: Some((3, 4)),
                    value: |m| m.held,
                },
            ],
            None,
        ),
    ];
    let areas = body.split_evenly((3, 1));
    for (area, (caption, lines, capacity)) in areas.iter().zip(panels) {
        let top = lines
            .iter()
            .flat_map(|l| rows.iter().map(|m| (l.value)(m)))
            .chain(capacity)
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let mut c = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(first..last, 0f64..top * 1.08)?;
        c.configure_mesh()
            .x_desc("minutes after the opening")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| waitroom::rehearsal::grouped(y.round() as u64))
            .label_style(("sans-serif", 13))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for &(x, what) in &marks {
            let style = GREY.stroke_width(1);
            c.draw_series(DashedLineSeries::new(
                vec![(x, 0.0), (x, top * 1.08)],
                4,
                4,
                style,
            ))?;
            // The words end at the mark, so the last one stays inside the chart.
            c.draw_series(std::iter::once(Text::new(
                format!("{what} "),
                (x, top * 1.04),
                ("sans-serif", 13)
                    .into_font()
                    .color(&GREY)
                    .pos(Pos::new(HPos::Right, VPos::Center)),
            )))?;
        }
        if let Some(cap) = capacity {
            let style = GREY.stroke_width(1);
            c.draw_series(DashedLineSeries::new(
                vec![(first, cap as f64), (last, cap as f64)],
                2,
                3,
                style,
            ))?;
        }
        for l in lines {
            let style = l.color.stroke_width(3);
            let points: Vec<(f64, f64)> = rows
                .iter()
                .map(|m| (m.minute as f64, (l.value)(m) as f64))
                .collect();
            match l.dash {
                None => c.draw_series(LineSeries::new(points, style))?,
                Some((dash, gap)) => {
                    c.draw_series(DashedLineSeries::new(points, dash, gap, style))?
                }
            };
        }
    }
    root.present()?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let p = Params {
        crowd: a.crowd,
        scale: a.scale,
        seats: a.seats,
        capacity: a.capacity,
        prequeue_minutes: a.prequeue_minutes,
        early_share: a.early_share,
        late_mean_minutes: a.late_mean_minutes,
        random_draw: match a.fairness.as_str() {
            "random" => true,
            "fifo" => false,
            other => {
                return Err(format!("--fairness must be `random` or `fifo`, not `{other}`").into());
            }
        },
        visit_minutes: a.visit_minutes,
        admit_per_minute: a.admit_per_minute,
        buy_share: a.buy_share,
        order_sizes: a.order_sizes.0,
        non_buyer_hold_share: a.non_buyer_hold_share,
        hold_after_seconds: a.hold_after_seconds,
        max_minutes_after_open: a.max_minutes_after_open,
        tab_close_share: a.tab_close_share,
        give_up_per_minute: a.give_up_per_minute,
        poll_seconds: a.poll_seconds,
        step_away_share: a.step_away_share,
        away_minutes: a.away_minutes,
        one_shot_share: a.one_shot_share,
        return_window_minutes: a.return_window_minutes,
        idle_minutes: a.idle_minutes,
        seed: a.seed,
        ..Params::default()
    };
    let event = format!("rehearsal-{}", std::process::id());
    let store: Arc<dyn Store> = match a.store.as_str() {
        "memory" => Arc::new(MemoryStore::new()),
        "redis" => redis_store(&a.redis).await?,
        other => return Err(format!("--store must be `memory` or `redis`, not `{other}`").into()),
    };
    println!(
        "rehearsal: {} people, {} seats, capacity {}{}, {} draw, visits ~{} min, store {}",
        (p.crowd as f64 * p.scale) as u64,
        (p.seats as f64 * p.scale) as u64,
        (p.capacity as f64 * p.scale) as u64,
        p.admit_per_minute
            .map(|n| format!(
                " and at most {} admissions a minute",
                (n as f64 * p.scale) as u64
            ))
            .unwrap_or_default(),
        a.fairness,
        p.visit_minutes,
        a.store
    );
    let calls = a
        .count_store_calls
        .then(|| Arc::new(store_calls::StoreCalls::new(store.clone())));
    let store: Arc<dyn Store> = match &calls {
        Some(c) => c.clone(),
        None => store,
    };
    let started = Instant::now();
    let r = run_on(&p, store, &event).await;
    if let Some(c) = &calls {
        println!("{}", c.report());
    }
    let wall = started.elapsed();
    if a.store == "redis" {
        // The rehearsal's on-sale is a throwaway: leave nothing behind in that Redis, whatever happened.
        let deleted = purge_redis(&a.redis, &event).await?;
        println!("redis: deleted the {deleted} keys of on-sale `{event}`");
    }
    let r = r?;

    println!();
    println!("{}", r.summary());
    println!("{}", r.table());
    std::fs::create_dir_all(&a.out)?;
    let path = a.out.join("rehearsal.svg");
    chart(&r, &path)?;
    println!("The chart: {}", path.display());
    println!("(the rehearsal took {:.1} s)", wall.as_secs_f64());
    Ok(())
}

#[cfg(feature = "redis")]
async fn redis_store(url: &str) -> Result<Arc<dyn Store>, Box<dyn std::error::Error>> {
    Ok(Arc::new(
        waitroom_layer::store::RedisStore::connect(url).await?,
    ))
}

#[cfg(feature = "redis")]
async fn purge_redis(url: &str, event: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let store = waitroom_layer::store::RedisStore::connect(url).await?;
    Ok(store.purge(event).await?)
}

#[cfg(not(feature = "redis"))]
async fn purge_redis(_url: &str, _event: &str) -> Result<u64, Box<dyn std::error::Error>> {
    Ok(0)
}

#[cfg(not(feature = "redis"))]
async fn redis_store(_url: &str) -> Result<Arc<dyn Store>, Box<dyn std::error::Error>> {
    Err("this build has no Redis store: run with `--features redis`".into())
}
