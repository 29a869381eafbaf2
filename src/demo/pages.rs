//! The storefront's HTML: plain server-rendered pages, no script needed.

use std::fmt::Write as _;

use waitroom_layer::escape_html as esc;

use super::inventory::{Hold, Layout, SeatState};
use super::shop::Order;

const STYLE: &str = r#"<style>
:root{color-scheme:light dark;--fg:#1b1b1f;--bg:#f6f6f8;--card:#fff;--accent:#3454d1;--muted:#5c5f66;--bad:#b3261e}
@media (prefers-color-scheme:dark){:root{--fg:#eceef2;--bg:#15161a;--card:#1f2127;--accent:#8aa2ff;--muted:#a3a7b0;--bad:#ff8a80}}
body{margin:0;font:1rem/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:60rem;margin:4vh auto;padding:2rem;background:var(--card);border-radius:12px;box-shadow:0 2px 12px #0002}
h1{margin:.2rem 0 1rem}.muted{color:var(--muted)}.error{border-left:4px solid var(--bad);padding:.3rem .8rem}
.grid{display:grid;grid-template-columns:2.5rem repeat(var(--cols),1.6rem);gap:3px;align-items:center;margin:1rem 0}
.grid label{display:block;width:1.5rem;height:1.5rem;border-radius:4px;text-align:center;font-size:.7rem;line-height:1.5rem}
.free{background:#5fb878;color:#fff;cursor:pointer}.mine{background:var(--accent);color:#fff}.held{background:#d9a441;color:#fff}
.sold{background:#999;color:#eee}.grid input{display:none}.grid input:checked+span{outline:3px solid var(--fg)}
nav a{margin-right:.6rem}button{font:inherit;padding:.4rem 1rem;border-radius:6px}a{color:var(--accent)}
</style>"#;

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title>{STYLE}</head><body><main>{body}</main></body></html>\n",
        esc(title)
    )
}

/// `14:03:12 UTC` for a time in ms since the Unix epoch.
pub fn clock_time(ms: u64) -> String {
    let secs = ms / 1000 % 86_400;
    format!(
        "{:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The public event page: the same for everyone, so a CDN can serve it to the whole crowd.
pub fn event_page(name: &str, seats: u64, max_per_order: u32, opens_at_ms: Option<u64>) -> String {
    let when = opens_at_ms.map_or_else(
        || "Tickets are on sale now.".to_owned(),
        |ms| format!("Tickets go on sale at {}.", clock_time(ms)),
    );
    page(
        name,
        &format!(
            "<p class=\"muted\">One more date</p><h1>{}</h1><p>{when} {seats} seats, up to {max_per_order} per \
             order.</p><p>Choosing seats reads live availability, so you may wait in a short line first: keep \
             the page open and it takes you to the seat map when it is your turn.</p>\
             <p><a href=\"/seats\"><button>Find seats</button></a></p>",
            esc(name)
        ),
    )
}

/// What the seat map shows.
#[derive(Debug)]
pub struct SeatMapView<'a> {
    /// The on-sale's name.
    pub name: &'a str,
    /// The layout, for labels.
    pub layout: Layout,
    /// The section shown.
    pub section: u32,
    /// Free seats per section.
    pub free_per_section: &'a [u32],
    /// The seats of the section shown.
    pub seats: &'a [(u32, SeatState)],
    /// The viewer's hold.
    pub hold: Option<&'a Hold>,
    /// The viewer's purchase limit.
    pub limit: u32,
    /// Seats neither sold nor held, in all.
    pub available: u64,
    /// A problem to show at the top.
    pub error: Option<&'a str>,
}

/// The seat map: sections with their free seats, the shown section's seats as a form that holds the checked
/// ones, the viewer's hold with a pay button.
pub fn seat_map_page(v: &SeatMapView<'_>) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<p class=\"muted\">{}</p><h1>Choose your seats</h1>",
        esc(v.name)
    );
    if let Some(e) = v.error {
        let _ = write!(b, "<p class=\"error\" id=\"error\">{}</p>", esc(e));
    }
    if let Some(h) = v.hold {
        let labels: Vec<String> = h.seats.iter().map(|&s| v.layout.label(s)).collect();
        let _ = write!(
            b,
            "<section id=\"hold\"><h2>Your hold</h2><p>{}</p><p>Held for you until {}. \
             <form method=\"post\" action=\"/pay\" style=\"display:inline\"><button>Pay for {} seat{}</button></form>\
             </p></section>",
            esc(&labels.join("; ")),
            clock_time(h.until_ms),
            h.seats.len(),
            if h.seats.len() == 1 { "" } else { "s" }
        );
    }
    if v.available == 0 && v.hold.is_none() {
        let _ = write!(
            b,
            "<p id=\"none-left\">No seats are free right now. Seats held by others come back if their hold \
             expires.</p>"
        );
    }
    let _ = write!(
        b,
        "<p id=\"available\">{} seats available. You can hold up to {}.</p><nav>",
        v.available, v.limit
    );
    for (i, free) in v.free_per_section.iter().enumerate() {
        if i as u32 == v.section {
            let _ = write!(b, "<strong>Section {} ({free})</strong> ", i + 1);
        } else {
            let _ = write!(
                b,
                "<a href=\"/seats?section={i}\">Section {} ({free})</a>",
                i + 1
            );
        }
    }
    let cols = v.layout.seats_per_row;
    let _ = write!(
        b,
        "</nav><form method=\"post\" action=\"/holds\"><input type=\"hidden\" name=\"section\" value=\"{}\">\
         <div class=\"grid\" style=\"--cols:{cols}\">",
        v.section
    );
    for (i, (id, state)) in v.seats.iter().enumerate() {
        if (i as u32).is_multiple_of(cols) {
            let row = char::from(b'A' + (i as u32 / cols % 26) as u8);
            let _ = write!(b, "<span class=\"muted\">{row}</span>");
        }
        let n = i as u32 % cols + 1;
        let title = esc(&v.layout.label(*id));
        let (class, input) = match state {
            SeatState::Free => (
                "free",
                format!("<input type=\"checkbox\" name=\"seat\" value=\"{id}\">"),
            ),
            SeatState::Mine => (
                "mine",
                format!("<input type=\"checkbox\" name=\"seat\" value=\"{id}\" checked>"),
            ),
            SeatState::Held => ("held", String::new()),
            SeatState::Sold => ("sold", String::new()),
        };
        let _ = write!(
            b,
            "<label title=\"{title}\" class=\"{class}\" data-seat=\"{id}\">{input}<span>{n}</span></label>"
        );
    }
    let _ = write!(
        b,
        "</div><p class=\"muted\">Green: free. Blue: yours. Amber: held by someone at checkout. Grey: sold.</p>\
         <button>Hold the checked seats</button></form>\
         <form method=\"post\" action=\"/leave\"><p><button>Leave without buying</button> \
         <span class=\"muted\">(gives your place to the next person in line)</span></p></form>"
    );
    page("Choose your seats", &b)
}

/// The order confirmation.
pub fn order_page(name: &str, layout: Layout, order: &Order) -> String {
    let mut b = format!(
        "<p class=\"muted\">{}</p><h1>Your order is confirmed</h1><p id=\"order\">Order <code>{}</code>, paid \
         at {}:</p><ul>",
        esc(name),
        esc(&order.id),
        clock_time(order.at_ms)
    );
    for &s in &order.seats {
        let _ = write!(b, "<li>{}</li>", esc(&layout.label(s)));
    }
    b.push_str(
        "</ul><p>Your place in the waiting room has gone to the next person in line. \
         <a href=\"/\">Back to the event</a></p>",
    );
    page("Order confirmed", &b)
}

/// A short page with a message and a way on.
pub fn message_page(title: &str, message: &str, link: (&str, &str)) -> String {
    page(
        title,
        &format!(
            "<h1>{}</h1><p class=\"error\" id=\"error\">{}</p><p><a href=\"{}\">{}</a></p>",
            esc(title),
            esc(message),
            esc(link.0),
            esc(link.1)
        ),
    )
}
