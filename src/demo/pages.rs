//! The storefront's HTML: plain server-rendered pages that work without script; one small script
//! ([`SEAT_MAP_SCRIPT`]) adds a pending state to "Pay", a count of the chosen seats and local times.
//!
//! Made to be used with a keyboard and a screen reader and on a phone: the seats are real checkboxes (visually
//! replaced, still focusable), each named in words with its state ("Row A, Seat 3, free"), every state shown by a
//! mark as well as a colour, text at WCAG AA contrast (4.5:1) in light and dark mode, sections chosen from a
//! `<select>`, and the grid scrolling inside its own box on a narrow screen. `tests/browser.rs` checks all of it
//! in headless Chromium.

use std::fmt::Write as _;

use waitroom_layer::escape_html as esc;

use super::inventory::{Hold, Layout, SeatState};
use super::shop::Order;
use crate::numbers::grouped;

/// Where the shop serves [`SEAT_MAP_SCRIPT`] (a public route: it holds nothing private).
pub const SEAT_MAP_SCRIPT_PATH: &str = "/assets/seat-map.js";

/// The seat map's script, served from the site itself so a strict `Content-Security-Policy` (`script-src 'self'`)
/// allows it. Without it everything works; with it:
/// - "Pay" says at once that the payment is under way (the provider takes a few seconds), is marked busy and does
///   not send a second payment when pressed again;
/// - the count of chosen seats is kept up to date (and announced: a polite live region);
/// - times carry the browser's local time next to the UTC the server writes.
pub const SEAT_MAP_SCRIPT: &str = r#""use strict";
document.addEventListener("submit", function (e) {
  var form = e.target;
  var pending = form.getAttribute("data-pending");
  if (!pending) return;
  if (form.getAttribute("aria-busy") === "true") { e.preventDefault(); return; }
  form.setAttribute("aria-busy", "true");
  var button = form.querySelector("button");
  if (button) { button.setAttribute("aria-disabled", "true"); button.textContent = pending; }
  var status = form.querySelector("[role=status]");
  if (status) status.textContent = form.getAttribute("data-pending-status") || pending;
});
function countChosen() {
  var out = document.getElementById("chosen");
  if (!out) return;
  var n = document.querySelectorAll("input[name=seat]:checked").length;
  var limit = out.getAttribute("data-limit");
  out.textContent = n + (n === 1 ? " seat" : " seats") + " chosen, up to " + limit + ".";
}
document.addEventListener("change", function (e) {
  if (e.target && e.target.name === "seat") countChosen();
});
document.querySelectorAll("time[data-ms]").forEach(function (t) {
  var d = new Date(Number(t.getAttribute("data-ms")));
  t.textContent = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" }) +
    " (" + t.textContent + ")";
});
countChosen();
"#;

const STYLE: &str = r#"<style>
:root{color-scheme:light dark;--fg:#1b1b1f;--bg:#f6f6f8;--card:#fff;--accent:#2f4cc0;--muted:#55585f;--bad:#b3261e;
--btn:#1f3fb0;--btn-fg:#fff;--line:#8a8d94;
--free:#e6f4ea;--free-fg:#14532d;--free-edge:#2e7d32;--mine:#1f3fb0;--mine-fg:#fff;
--held:#fff1c2;--held-fg:#5c4300;--held-edge:#9a7000;--sold:#e4e4e7;--sold-fg:#3f3f46}
@media (prefers-color-scheme:dark){:root{--fg:#eceef2;--bg:#15161a;--card:#1f2127;--accent:#9db0ff;--muted:#b0b4bd;
--bad:#ff8a80;--btn:#9db0ff;--btn-fg:#0b1020;--line:#8a8d94;
--free:#12361f;--free-fg:#bff2cd;--free-edge:#5fb878;--mine:#9db0ff;--mine-fg:#0b1020;
--held:#3d2f00;--held-fg:#ffe08a;--held-edge:#d9a441;--sold:#2c2d33;--sold-fg:#c4c6cc}}
*{box-sizing:border-box}
body{margin:0;font:1rem/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:62rem;margin:4vh auto;padding:2rem;background:var(--card);border-radius:12px;box-shadow:0 2px 12px #0002}
@media (max-width:40rem){main{margin:0;padding:1rem;border-radius:0}}
h1{margin:.2rem 0 1rem;line-height:1.2}.muted{color:var(--muted)}.error{border-left:4px solid var(--bad);padding:.3rem .8rem}
a{color:var(--accent)}
:focus-visible{outline:3px solid var(--fg);outline-offset:2px}
.btn,button{display:inline-block;font:inherit;padding:.5rem 1.1rem;border-radius:6px;border:2px solid var(--btn);
background:var(--btn);color:var(--btn-fg);text-decoration:none;cursor:pointer;min-height:2.75rem}
.btn.secondary,button.secondary{background:transparent;color:var(--fg);border-color:var(--line)}
button[aria-disabled=true]{cursor:progress}
[aria-busy=true] button::after{content:"";display:inline-block;width:.8em;height:.8em;margin-left:.5em;
border:2px solid currentColor;border-right-color:transparent;border-radius:50%;animation:spin .8s linear infinite}
@keyframes spin{to{transform:rotate(360deg)}}
@media (prefers-reduced-motion:reduce){[aria-busy=true] button::after{animation:none}}
.sr{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;border:0}
.sections{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:1rem 0}
select{font:inherit;padding:.4rem;min-height:2.75rem;max-width:100%;color:var(--fg);background:var(--card);
border:2px solid var(--line);border-radius:6px}
fieldset{min-width:0;border:0;padding:0;margin:1rem 0}legend{font-weight:600;padding:0}
.seats{overflow-x:auto;max-width:100%;padding:4px 2px;margin:.5rem 0}
.grid{display:grid;grid-template-columns:1.5rem repeat(var(--cols),2rem);gap:4px;align-items:center;width:max-content}
.row{color:var(--muted);text-align:center;font-size:.8rem}
.seat{position:relative;display:block;width:2rem;height:2rem}
.seat input{position:absolute;opacity:0;width:1px;height:1px;margin:0;left:0;top:0}
.seat span[aria-hidden]{display:block;width:100%;height:100%;border-radius:4px;text-align:center;font-size:.75rem;
line-height:calc(2rem - 4px);border:2px solid transparent;user-select:none}
.free span[aria-hidden]{background:var(--free);color:var(--free-fg);border-color:var(--free-edge);cursor:pointer}
.seat input:checked+span[aria-hidden],.chosen span[aria-hidden]{background:var(--mine);color:var(--mine-fg);
border-color:var(--mine);font-weight:700}
.seat input:checked+span[aria-hidden]::before,.chosen span[aria-hidden]::before{content:"\2713"}
.seat input:focus-visible+span[aria-hidden]{outline:3px solid var(--fg);outline-offset:2px}
.held span[aria-hidden]{background:var(--held);color:var(--held-fg);border:2px dashed var(--held-edge)}
.sold span[aria-hidden]{background:var(--sold);color:var(--sold-fg)}
.key{display:flex;flex-wrap:wrap;gap:.4rem 1rem;padding:0;list-style:none;margin:.5rem 0}
.key li{display:flex;align-items:center;gap:.4rem}.key .seat{display:inline-block}
.actions{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center;margin:1rem 0}
</style>"#;

fn page(title: &str, body: &str, script: bool) -> String {
    let script = if script {
        format!("<script src=\"{SEAT_MAP_SCRIPT_PATH}\" defer></script>")
    } else {
        String::new()
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title>{STYLE}{script}</head><body><main>{body}</main></body></html>\n",
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

/// A time for a page: [`clock_time`] in a `<time>` the seat map's script adds the browser's local time to.
fn time_element(ms: u64) -> String {
    format!("<time data-ms=\"{ms}\">{}</time>", clock_time(ms))
}

/// `4 minutes 30 seconds`, `1 minute`, `45 seconds`: a span of time, in words.
fn span_in_words(ms: u64) -> String {
    let secs = ms.div_ceil(1000);
    let (m, s) = (secs / 60, secs % 60);
    let unit = |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    match (m, s) {
        (0, s) => unit(s, "second"),
        (m, 0) => unit(m, "minute"),
        (m, s) => format!("{} {}", unit(m, "minute"), unit(s, "second")),
    }
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
            "<p class=\"muted\">One more date</p><h1>{}</h1><p>{when} {} seats, up to {max_per_order} per \
             order.</p><p>Choosing seats reads live availability, so you may wait in a short line first: keep \
             the page open and it takes you to the seat map when it is your turn.</p>\
             <p><a class=\"btn\" href=\"/seats\">Find seats</a></p>",
            esc(name),
            grouped(seats)
        ),
        false,
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
    /// Now, ms since the Unix epoch (for how long the hold has left).
    pub now_ms: u64,
}

/// A seat's state in words (its accessible name ends with it) and the mark shown on it besides its colour.
fn seat_words(state: SeatState, number: u32) -> (&'static str, String) {
    match state {
        SeatState::Free => ("free", number.to_string()),
        SeatState::Mine => ("held for you", number.to_string()),
        SeatState::Held => ("held by someone at checkout", "H".into()),
        SeatState::Sold => ("sold", "\u{d7}".into()),
    }
}

/// The seat map: the viewer's hold with a pay button, a section picker, the shown section's seats as a form that
/// holds the chosen ones, and a way to leave (confirmed on its own page).
pub fn seat_map_page(v: &SeatMapView<'_>) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<p class=\"muted\">{}</p><h1>Choose your seats</h1>",
        esc(v.name)
    );
    if let Some(e) = v.error {
        let _ = write!(
            b,
            "<p class=\"error\" id=\"error\" role=\"alert\">{}</p>",
            esc(e)
        );
    }
    if let Some(h) = v.hold {
        let n = h.seats.len();
        let _ = write!(
            b,
            "<section id=\"hold\" aria-labelledby=\"hold-title\"><h2 id=\"hold-title\">Your hold</h2><ul>"
        );
        for &s in &h.seats {
            let _ = write!(b, "<li>{}</li>", esc(&v.layout.label(s)));
        }
        let _ = write!(
            b,
            "</ul><p>Held for you for {} more, until {}.</p>\
             <form method=\"post\" action=\"/pay\" class=\"actions\" data-pending=\"Paying\u{2026}\" \
             data-pending-status=\"Paying for your seats. This takes a few seconds; keep this page open.\">\
             <button id=\"pay\">Pay for {n} seat{}</button><span id=\"pay-status\" role=\"status\"></span></form>\
             <p class=\"muted\">The payment takes a few seconds: press once.</p></section>",
            span_in_words(h.until_ms.saturating_sub(v.now_ms)),
            time_element(h.until_ms),
            if n == 1 { "" } else { "s" }
        );
    }
    if v.available == 0 && v.hold.is_none() {
        let _ = write!(
            b,
            "<p id=\"none-left\">No seats are free right now. Seats held by others come back if their hold \
             expires.</p>"
        );
    }
    // Before the seats, so a keyboard reaches it without going through them.
    b.push_str(
        "<form method=\"post\" action=\"/leave\" class=\"actions\"><button class=\"secondary\" id=\"leave\">Leave \
         without buying</button><span class=\"muted\">You are asked to confirm: leaving gives your place to the \
         next person in line.</span></form>",
    );
    let _ = write!(
        b,
        "<p id=\"available\">{} seats available. You can hold up to {}.</p>\
         <form method=\"get\" action=\"/seats\" class=\"sections\"><label for=\"section\">Section</label>\
         <select id=\"section\" name=\"section\">",
        grouped(v.available),
        v.limit
    );
    for (i, free) in v.free_per_section.iter().enumerate() {
        let _ = write!(
            b,
            "<option value=\"{i}\"{}>Section {}: {} free</option>",
            if i as u32 == v.section {
                " selected"
            } else {
                ""
            },
            i + 1,
            grouped(u64::from(*free))
        );
    }
    let cols = v.layout.seats_per_row;
    let _ = write!(
        b,
        "</select><button class=\"secondary\">Show section</button></form>\
         <form method=\"post\" action=\"/holds\"><input type=\"hidden\" name=\"section\" value=\"{section}\">\
         <fieldset><legend>Seats in Section {shown}</legend>\
         <p id=\"chosen\" role=\"status\" data-limit=\"{limit}\">You can choose up to {limit}.</p>\
         <p class=\"actions\"><button id=\"hold-button\">Hold the chosen seats</button></p>\
         <div class=\"seats\"><div class=\"grid\" style=\"--cols:{cols}\">",
        section = v.section,
        shown = v.section + 1,
        limit = v.limit,
    );
    for (i, (id, state)) in v.seats.iter().enumerate() {
        let row = char::from(b'A' + (i as u32 / cols % 26) as u8);
        if (i as u32).is_multiple_of(cols) {
            let _ = write!(b, "<span class=\"row\" aria-hidden=\"true\">{row}</span>");
        }
        let n = i as u32 % cols + 1;
        let (words, mark) = seat_words(*state, n);
        let (class, attrs) = match state {
            SeatState::Free => ("free", ""),
            SeatState::Mine => ("mine free", " checked"),
            SeatState::Held => ("held", " disabled"),
            SeatState::Sold => ("sold", " disabled"),
        };
        let _ = write!(
            b,
            "<label class=\"seat {class}\" data-seat=\"{id}\"><input type=\"checkbox\" name=\"seat\" \
             value=\"{id}\"{attrs}><span aria-hidden=\"true\">{mark}</span><span class=\"sr\">Row {row}, Seat {n}, \
             {words}</span></label>"
        );
    }
    let _ = write!(
        b,
        "</div></div></fieldset></form>\
         <ul class=\"key\" aria-label=\"What the seats show\">\
         <li><span class=\"seat free\"><span aria-hidden=\"true\">7</span></span> free (a number)</li>\
         <li><span class=\"seat chosen\"><span aria-hidden=\"true\">7</span></span> chosen or held by you (a \
         tick)</li>\
         <li><span class=\"seat held\"><span aria-hidden=\"true\">H</span></span> held by someone at checkout (may \
         come back)</li>\
         <li><span class=\"seat sold\"><span aria-hidden=\"true\">\u{d7}</span></span> sold</li></ul>"
    );
    page("Choose your seats", &b, true)
}

/// "Leave without buying?": the confirmation a person gets before their place (and their hold) goes. A page of its
/// own, so it works without script.
pub fn leave_page(name: &str, layout: Layout, hold: Option<&Hold>) -> String {
    let mut b = format!(
        "<p class=\"muted\">{}</p><h1>Leave without buying?</h1>",
        esc(name)
    );
    match hold {
        Some(h) => {
            let _ = write!(b, "<p>Your held seats go back on sale for others:</p><ul>");
            for &s in &h.seats {
                let _ = write!(b, "<li>{}</li>", esc(&layout.label(s)));
            }
            b.push_str("</ul>");
        }
        None => b.push_str("<p>You hold no seats yet.</p>"),
    }
    b.push_str(
        "<p id=\"leave-warning\">Your place goes to the next person in line. To buy later you join the line \
         again, at the back.</p>\
         <form method=\"post\" action=\"/leave\" class=\"actions\"><input type=\"hidden\" name=\"confirm\" \
         value=\"yes\"><button id=\"leave-confirm\">Yes, leave without buying</button>\
         <a class=\"btn secondary\" id=\"leave-cancel\" href=\"/seats\">No, back to the seats</a></form>",
    );
    page("Leave without buying?", &b, false)
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
    page("Order confirmed", &b, false)
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
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::span_in_words;

    #[test]
    fn a_hold_s_time_left_is_said_in_words() {
        assert_eq!(span_in_words(300_000), "5 minutes");
        assert_eq!(span_in_words(60_000), "1 minute");
        assert_eq!(span_in_words(61_000), "1 minute 1 second");
        assert_eq!(span_in_words(270_400), "4 minutes 31 seconds");
        assert_eq!(span_in_words(999), "1 second");
        assert_eq!(span_in_words(0), "0 seconds");
    }
}
