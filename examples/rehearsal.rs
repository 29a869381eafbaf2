//! Rehearse the on-sale before the day: the seed's stadium on-sale, time-compressed, through the real room.
//!
//! `cargo run --release --example rehearsal` (every parameter is a flag: `--help`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use plotters::prelude::*;
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

type Series = (&'static str, RGBColor, fn(&Minute) -> u64);

fn chart(report: &Report, path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let first = report.minutes.first().map_or(0, |m| m.minute);
    let last = report.minutes.last().map_or(1, |m| m.minute);
    let ymax = report
        .minutes
        .iter()
        .map(|m| m.waiting.max(m.available + m.held + m.sold))
        .max()
        .unwrap_or(1) as f64;
    let mut c = ChartBuilder::on(&root)
        .caption("On-sale rehearsal: line, inside, seats", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(first as f64..last as f64, 0f64..ymax * 1.05)?;
    c.configure_mesh()
        .x_desc("minutes after the opening")
        .y_desc("people / seats")
        .draw()?;
    let series: [Series; 4] = [
        ("waiting", BLUE, |m| m.waiting),
        ("active (inside)", RED, |m| m.active),
        ("seats available", GREEN, |m| m.available),
        ("seats sold", BLACK, |m| m.sold),
    ];
    for (name, color, f) in series {
        c.draw_series(LineSeries::new(
            report
                .minutes
                .iter()
                .map(|m| (m.minute as f64, f(m) as f64)),
            color.stroke_width(2),
        ))?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    c.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
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
    let started = Instant::now();
    let r = run_on(&p, store, &event).await;
    let wall = started.elapsed();
    if a.store == "redis" {
        // The rehearsal's on-sale is a throwaway: leave nothing behind in that Redis, whatever happened.
        let deleted = purge_redis(&a.redis, &event).await?;
        println!("redis: deleted the {deleted} keys of on-sale `{event}`");
    }
    let r = r?;

    println!("\n minute  waiting   active  admitted  orders     sold    held  available");
    for m in r.minutes.iter().filter(|m| m.minute >= -1) {
        println!(
            "{:>7} {:>8} {:>8} {:>9} {:>7} {:>8} {:>7} {:>10}",
            m.minute, m.waiting, m.active, m.admitted, m.orders, m.sold, m.held, m.available
        );
    }
    println!();
    match r.no_seat_available_after_seconds {
        Some(s) => println!(
            "seats ran out:             {:.1} minutes after the opening (all sold or held)",
            s as f64 / 60.0
        ),
        None => println!("seats ran out:             not within the run"),
    }
    if let Some(s) = r.most_sold_after_seconds {
        println!(
            "95% of the seats sold:     {:.1} minutes after the opening",
            s as f64 / 60.0
        );
    }
    match r.sold_out_after_seconds {
        Some(s) => println!(
            "last seat sold:            {:.1} minutes after the opening (expired holds resold)",
            s as f64 / 60.0
        ),
        None => println!("last seat sold:            not within the run"),
    }
    println!(
        "highest active / capacity: {} / {}",
        r.max_active, r.capacity
    );
    println!(
        "admissions per minute:     {:.0} (steady state, minute 3 until the seats run short)",
        r.steady_admissions_per_minute
    );
    println!(
        "orders per minute:         {:.0} (same span); {} orders in all",
        r.steady_orders_per_minute, r.orders
    );
    println!(
        "wait estimate at join:     median error {:.0} s, 90th percentile {:.0} s ({} followed; {:.0}% measured, {:.0}% configured)",
        r.eta_join_median_abs_error_seconds,
        r.eta_join_p90_abs_error_seconds,
        r.eta_join_checked,
        r.eta_join_measured_share * 100.0,
        (1.0 - r.eta_join_measured_share) * 100.0
    );
    println!(
        "                           (the first estimate each followed person saw: at join, or for the pre-queue at the first poll after the draw)"
    );
    println!(
        "all wait estimates:        median error {:.0} s, 90th percentile {:.0} s, median relative {:.0}% ({} checked: at join and every 2 minutes after; {:.0}% measured, {:.0}% configured)",
        r.eta_median_abs_error_seconds,
        r.eta_p90_abs_error_seconds,
        r.eta_median_rel_error * 100.0,
        r.eta_checked,
        r.eta_measured_share * 100.0,
        (1.0 - r.eta_measured_share) * 100.0
    );
    println!(
        "fairness:                  correlation of pre-queue arrival time with getting a ticket = {:+.3}",
        r.fairness_arrival_vs_ticket
    );
    match (r.sold_out_told_within_seconds, r.sold_out_after_seconds) {
        (Some(t), _) => println!(
            "sold out told to the line: {t} s after the last seat, the last person still in line heard it at their own poll"
        ),
        (None, Some(_)) => {
            println!(
                "sold out told to the line: NOT to everyone: a poll was answered otherwise, or the run ended first"
            )
        }
        (None, None) => {}
    }
    if r.stepped_away > 0 {
        println!(
            "stepped away:              {} people; {} turns passed while someone was away (those who gave up \
             included)",
            r.stepped_away, r.missed_turns
        );
        println!(
            "came back:                 {} within the window ({} let in: median {:.0} s, longest {} s from \
             their return to the door), {} after it",
            r.returned_in_time,
            r.returned_let_in,
            r.return_wait_median_seconds,
            r.return_wait_max_seconds,
            r.returned_late
        );
    }
    if let Some((est, actual)) = r.reach_halfway {
        println!(
            "reach estimated halfway:   line number {est}; the last buyer's number was {actual}"
        );
    }
    std::fs::create_dir_all(&a.out)?;
    let path = a.out.join("rehearsal.svg");
    chart(&r, &path)?;
    println!("chart:                     {}", path.display());
    println!("wall time:                 {:.1} s", wall.as_secs_f64());
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
