//! The holding page: what a person in line sees.
//!
//! The default page is small (about 5 KB), accessible (one `h1`, an `aria-live` region, a labelled `<progress>`,
//! readable without colour) and works without JavaScript (`<noscript>` meta refresh). With JavaScript it polls
//! `{base}/status` every `refresh_seconds` with ±20 % jitter (no request is held open) and, when the person is let
//! in, goes on to the page they asked for with no click.
//!
//! Replace it with [`PageTemplate::from_template`] (a string with `{{placeholders}}`, see [`PLACEHOLDERS`]) or
//! [`PageTemplate::from_fn`] (a closure from [`PageContext`] to HTML).

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;
use serde::Serialize;

use crate::error::BuildError;
use crate::room::{Status, ViewState};

/// What a holding page is rendered from.
#[derive(Debug, Clone, Serialize)]
pub struct PageContext {
    /// The status of the person's session.
    pub status: Status,
    /// Where the person goes when let in (a same-site path).
    pub next: String,
    /// The status endpoint to poll (with `return_to` already in its query).
    pub status_url: String,
    /// The join endpoint (for a "join again" link).
    pub join_url: String,
    /// The default page's script (`{base}/holding.js`, served by the room): it polls `status_url` and moves on when
    /// the person is let in.
    pub script_url: String,
    /// How long an admitted session may idle before its place is given away, in whole minutes.
    pub idle_timeout_minutes: u64,
}

/// The placeholders a string template may use. Each is replaced HTML-escaped, except `status_json`, which is
/// the JSON status made safe to embed in a `<script type="application/json">` element.
pub const PLACEHOLDERS: &[&str] = &[
    "name",
    "state",
    "headline",
    "message",
    "next_steps",
    "store_note",
    "position",
    "eta",
    "progress_value",
    "progress_max",
    "opens_at",
    "updated_at",
    "refresh_seconds",
    "status_url",
    "join_url",
    "script_url",
    "next",
    "status_json",
];

#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    Slot(usize),
}

type PageFn = dyn Fn(&PageContext) -> String + Send + Sync;

/// The holding page's template: the default, a string with placeholders, or a closure.
///
/// Pages from the default template are sent with a strict `Content-Security-Policy` ([`DEFAULT_CSP`]: no inline
/// script, scripts and requests only to the site itself, no framing); the page's script is served by the room at
/// `{base}/holding.js`. A custom template is sent without one unless it is given its own
/// ([`with_content_security_policy`](Self::with_content_security_policy): it may need other sources); a template
/// that uses the room's script (`{{script_url}}`) and no inline script can take [`DEFAULT_CSP`] as it is.
#[derive(Clone)]
pub struct PageTemplate {
    kind: Kind,
    csp: Option<HeaderValue>,
}

/// The `Content-Security-Policy` of pages made from the default template.
pub const DEFAULT_CSP: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; \
img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The default page's script: reads the status embedded in the page, polls the status endpoint with jitter, keeps
/// the position, estimate, progress and message current (the message says how many people are ahead and, from the
/// status's `beyond_reach`, whether the seats left are likely to run out first: [`REACH_SENTENCE`], the same words
/// the page is rendered with), and moves on when the person is let in.
///
/// It wakes up by itself: it polls at once when the page becomes visible again (`visibilitychange`), is restored
/// from the back-forward cache (`pageshow` with `persisted`) or the network comes back (`online`), so a person
/// whose turn came while the tab slept is back in the room within one round trip (and let in ahead of the line,
/// within the return window). A failed poll is not the end: it tries again after 2, 4, 8, ... seconds, never
/// longer apart than the refresh interval. When a poll says `missed`, it says so in place ([`MISSED_HEADLINE`],
/// [`MISSED_MESSAGE`]) and stops; its link joins the line again, at the back.
pub(crate) const HOLDING_SCRIPT: &str = r#"(function(){
var d=JSON.parse(document.getElementById("wr-data").textContent),$=function(i){return document.getElementById(i)};
var m=document.querySelector("main"),w=d.state==="waiting";
document.querySelectorAll("[data-show]").forEach(function(e){e.hidden=!w});
var n=$("wr-note");n.hidden=!n.getAttribute("data-note");$("wr-next").hidden=d.state!=="admitted"&&d.state!=="missed";
function t(iso){try{return new Date(iso).toLocaleTimeString([],{hour:"2-digit",minute:"2-digit",second:"2-digit"})}catch(e){return iso}}
function eta(l,h){if(h==null)return "–";if(h<60)return "less than a minute";var a=Math.max(Math.ceil(l/60),1),b=Math.ceil(h/60);if(b>=120){var H=Math.ceil(b/60);return a<60?"about "+a+" minutes to "+H+" hours":Math.floor(a/60)>=H?"about "+H+" hours":"about "+Math.floor(a/60)+" to "+H+" hours"}return a>=b?(b===1?"about a minute":"about "+b+" minutes"):"about "+a+" to "+b+" minutes"}
$("wr-updated").textContent=t(d.updated_at);
if(d.state==="admitted"&&d.next){location.replace(d.next);return}
if(d.state==="missed")$("wr-next").textContent="Join the line again";
if(d.state==="sold_out"||d.state==="closed"||d.state==="missed")return;
var timer=0,busy=false,fails=0,done=false;
function again(s){clearTimeout(timer);timer=setTimeout(poll,(s||d.refresh_seconds||20)*1000*(0.8+Math.random()*0.4))}
function gone(j){done=true;clearTimeout(timer);m.setAttribute("data-state","missed");document.querySelectorAll("[data-show]").forEach(function(e){e.hidden=true});
$("wr-headline").textContent="Your turn passed while you were away";$("wr-message").textContent="Your turn came while this page was not open. We kept it for you for a while, but that time has passed, so your place in line is gone. You can join the line again, at the back.";var x=$("wr-next");x.textContent="Join the line again";x.hidden=false;$("wr-updated").textContent=t(j.updated_at)}
function poll(){if(busy||done)return;busy=true;clearTimeout(timer);fetch(d.status_url,{credentials:"same-origin",cache:"no-store",headers:{Accept:"application/json"}}).then(function(r){return r.json()}).then(function(j){busy=false;fails=0;
if(j.state==="admitted"&&j.next){done=true;location.replace(j.next);return}
if(j.state==="missed"){gone(j);return}
if(j.state!==d.state){done=true;location.reload();return}
if(j.position!=null){$("wr-position").textContent=j.position;$("wr-eta").textContent=eta(j.eta_low_seconds,j.eta_high_seconds);
var p=$("wr-progress");if(j.number){p.max=j.number;p.value=j.number-j.position}
var g=$("wr-message");if(g&&j.state==="waiting")g.textContent=(j.position===1?"You are next.":"There are "+(j.position-1)+" people ahead of you.")+(j.beyond_reach?" The tickets left may run out before your turn.":"")}
n.hidden=j.store_ok;n.textContent=j.store_ok?"":"Status temporarily unknown: we cannot reach the line right now. You keep your place; this page keeps trying.";
$("wr-updated").textContent=t(j.updated_at);again(j.refresh_seconds)}).catch(function(){busy=false;fails++;n.hidden=false;n.textContent="Status temporarily unknown: this page keeps trying.";again(Math.min(Math.pow(2,fails),d.refresh_seconds||20))})}
function now(){if(document.visibilityState!=="hidden")poll()}
document.addEventListener("visibilitychange",now);
addEventListener("pageshow",function(e){if(e.persisted)poll()});
addEventListener("online",now);
again(1.5);
})();
"#;

#[derive(Clone)]
enum Kind {
    Pieces(Arc<[Piece]>),
    Fn(Arc<PageFn>),
}

impl fmt::Debug for PageTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Pieces(p) => write!(f, "PageTemplate::Template({} pieces)", p.len()),
            Kind::Fn(_) => f.write_str("PageTemplate::Fn"),
        }
    }
}

impl Default for PageTemplate {
    fn default() -> Self {
        let mut t = Self::from_template(DEFAULT_TEMPLATE).expect("the default template is valid");
        t.csp = Some(HeaderValue::from_static(DEFAULT_CSP));
        t
    }
}

impl PageTemplate {
    /// A template string with `{{placeholder}}` slots (see [`PLACEHOLDERS`]).
    ///
    /// # Errors
    /// [`BuildError::Invalid`] naming an unknown placeholder or an unclosed `{{`.
    pub fn from_template(template: &str) -> Result<Self, BuildError> {
        let mut pieces = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                return Err(BuildError::invalid(
                    "page",
                    "a `{{` is never closed by `}}`",
                ));
            };
            let name = after[..close].trim();
            let Some(i) = PLACEHOLDERS.iter().position(|p| *p == name) else {
                return Err(BuildError::invalid(
                    "page",
                    format!(
                        "unknown placeholder `{{{{{name}}}}}`; known: {}",
                        PLACEHOLDERS.join(", ")
                    ),
                ));
            };
            pieces.push(Piece::Slot(i));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        Ok(Self {
            kind: Kind::Pieces(pieces.into()),
            csp: None,
        })
    }

    /// A closure that writes the whole page. It must escape what it interpolates ([`escape_html`] helps).
    pub fn from_fn(f: impl Fn(&PageContext) -> String + Send + Sync + 'static) -> Self {
        Self {
            kind: Kind::Fn(Arc::new(f)),
            csp: None,
        }
    }

    /// Sends `policy` as the `Content-Security-Policy` of this template's pages (replacing the default
    /// template's [`DEFAULT_CSP`]).
    ///
    /// ```
    /// use waitroom_layer::{DEFAULT_CSP, PageTemplate};
    /// let t = PageTemplate::from_template("<p>{{position}}</p><script src=\"{{script_url}}\"></script>")?
    ///     .with_content_security_policy(DEFAULT_CSP)?;
    /// assert_eq!(t.content_security_policy(), Some(DEFAULT_CSP));
    /// # Ok::<(), waitroom_layer::BuildError>(())
    /// ```
    ///
    /// # Errors
    /// [`BuildError::Invalid`] when `policy` is empty or cannot be a header value (a line break, a control
    /// character).
    pub fn with_content_security_policy(mut self, policy: &str) -> Result<Self, BuildError> {
        let value = HeaderValue::from_str(policy.trim())
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                BuildError::invalid(
                    "content_security_policy",
                    "a policy such as `default-src 'none'; script-src 'self'`, on one line",
                )
            })?;
        self.csp = Some(value);
        Ok(self)
    }

    /// The `Content-Security-Policy` sent with its pages: [`DEFAULT_CSP`] for the default template, the one given
    /// with [`with_content_security_policy`](Self::with_content_security_policy), or none.
    pub fn content_security_policy(&self) -> Option<&str> {
        self.csp.as_ref().and_then(|v| v.to_str().ok())
    }

    /// The policy as the header value sent.
    pub(crate) fn content_security_policy_header(&self) -> Option<&HeaderValue> {
        self.csp.as_ref()
    }

    /// Renders the page for `ctx`.
    pub fn render(&self, ctx: &PageContext) -> String {
        match &self.kind {
            Kind::Fn(f) => f(ctx),
            Kind::Pieces(pieces) => {
                let values = Values::new(ctx);
                let mut out = String::with_capacity(6 * 1024);
                for p in pieces.iter() {
                    match p {
                        Piece::Text(t) => out.push_str(t),
                        Piece::Slot(i) => {
                            let name = PLACEHOLDERS[*i];
                            if name == "status_json" {
                                out.push_str(&values.status_json);
                            } else {
                                escape_into(&mut out, &values.get(name));
                            }
                        }
                    }
                }
                out
            }
        }
    }
}

/// Escapes `s` for HTML text and attribute values.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// `HH:MM UTC` from an RFC 3339 time (the page's script rewrites it in the reader's time zone).
fn clock_time(rfc3339: &str) -> String {
    rfc3339
        .get(11..16)
        .map_or_else(|| rfc3339.to_owned(), |t| format!("{t} UTC"))
}

/// A wait in words: "about 4 to 6 minutes", "about 2 to 4 hours". The holding page's script words a wait the same
/// way (`{base}/holding.js`), so the text does not change when the script takes over.
pub fn eta_words(low: u64, high: u64) -> String {
    if high < 60 {
        return "less than a minute".into();
    }
    let a = low.div_ceil(60).max(1);
    let b = high.div_ceil(60);
    if b >= 120 {
        let hours = b.div_ceil(60);
        return if a < 60 {
            format!("about {a} minutes to {hours} hours")
        } else if a / 60 >= hours {
            format!("about {hours} hours")
        } else {
            format!("about {} to {hours} hours", a / 60)
        };
    }
    if a >= b {
        if b == 1 {
            "about a minute".into()
        } else {
            format!("about {b} minutes")
        }
    } else {
        format!("about {a} to {b} minutes")
    }
}

struct Values<'a> {
    ctx: &'a PageContext,
    status_json: String,
}

impl<'a> Values<'a> {
    fn new(ctx: &'a PageContext) -> Self {
        #[derive(Serialize)]
        struct Data<'a> {
            #[serde(flatten)]
            status: &'a Status,
            next: &'a str,
            status_url: &'a str,
        }
        let json = serde_json::to_string(&Data {
            status: &ctx.status,
            next: &ctx.next,
            status_url: &ctx.status_url,
        })
        .unwrap_or_else(|_| "{}".into());
        // Safe inside <script>: no `<` can close the element or open a comment.
        let status_json = json.replace('<', "\\u003c").replace('>', "\\u003e");
        Self { ctx, status_json }
    }

    fn get(&self, name: &str) -> String {
        let s = &self.ctx.status;
        match name {
            "name" => s.name.clone(),
            "state" => s.state.as_str().into(),
            "headline" => headline(s).into(),
            "message" => message(s),
            "next_steps" => next_steps(self.ctx),
            "store_note" => {
                if s.store_ok {
                    String::new()
                } else {
                    "Status temporarily unknown: we cannot reach the line right now, so these figures are the last \
                     known ones. You keep your place; this page keeps trying."
                        .into()
                }
            }
            "position" => s.position.map_or_else(|| "–".into(), |p| p.to_string()),
            "eta" => match (s.eta_low_seconds, s.eta_high_seconds) {
                (Some(l), Some(h)) => eta_words(l, h),
                _ => "–".into(),
            },
            "progress_value" => match (s.number, s.position) {
                (Some(n), Some(p)) => n.saturating_sub(p).to_string(),
                _ => "0".into(),
            },
            "progress_max" => s.number.unwrap_or(1).max(1).to_string(),
            "opens_at" => s.opens_at.clone().unwrap_or_default(),
            "updated_at" => s.updated_at.clone(),
            "refresh_seconds" => s.refresh_seconds.to_string(),
            "status_url" => self.ctx.status_url.clone(),
            "join_url" => self.ctx.join_url.clone(),
            "script_url" => self.ctx.script_url.clone(),
            "next" => self.ctx.next.clone(),
            _ => String::new(),
        }
    }
}

/// The headline when a person's turn passed while they were away (rendered, and written by the page's script).
pub(crate) const MISSED_HEADLINE: &str = "Your turn passed while you were away";

/// The message when a person's turn passed while they were away.
pub(crate) const MISSED_MESSAGE: &str = "Your turn came while this page was not open. We kept it for you for a \
while, but that time has passed, so your place in line is gone. You can join the line again, at the back.";

fn headline(s: &Status) -> &'static str {
    match s.state {
        ViewState::Prequeue => "You are in the pre-queue",
        ViewState::Waiting => "You are in line",
        ViewState::Paused => "You are in line; the line is paused",
        ViewState::Admitted => "It is your turn",
        ViewState::SoldOut => "Sold out",
        ViewState::Closed => "This sale is closed",
        ViewState::NotInLine => "You are not in line yet",
        ViewState::Returning => "Welcome back: your turn is kept",
        ViewState::Missed => MISSED_HEADLINE,
    }
}

/// The sentence a waiting person's message ends with when the seats left are likely to run out before their turn
/// (`beyond_reach`). The page's script writes the same words when a poll says so, and removes them when it no
/// longer does.
pub(crate) const REACH_SENTENCE: &str = "The tickets left may run out before your turn.";

fn message(s: &Status) -> String {
    match s.state {
        ViewState::Prequeue => {
            let at = s.opens_at.as_deref().map_or_else(|| "opening".into(), clock_time);
            format!(
                "The draw happens at {at}. Everyone who arrives before then gets a place in line by random draw; \
                 arriving earlier or later before then makes no difference."
            )
        }
        ViewState::Waiting => {
            let mut m = match s.position {
                Some(1) => "You are next.".to_owned(),
                Some(p) => format!("There are {} people ahead of you.", p - 1),
                None => "You have a place in line.".to_owned(),
            };
            if s.beyond_reach {
                m.push(' ');
                m.push_str(REACH_SENTENCE);
            }
            m
        }
        ViewState::Paused => {
            "Nobody is being let in at the moment. You keep your place, and the line moves again by itself.".into()
        }
        ViewState::Admitted => "Taking you there now.".into(),
        ViewState::SoldOut => "Every ticket has been sold. Thank you for waiting.".into(),
        ViewState::Closed => "Nobody new is being let in.".into(),
        ViewState::NotInLine => "We could not put you in line just now; this page tries again by itself.".into(),
        ViewState::Returning => "Your turn came while you were away, and we kept it: you go in at the next free \
                                 place, ahead of the line."
            .into(),
        ViewState::Missed => MISSED_MESSAGE.into(),
    }
}

fn next_steps(ctx: &PageContext) -> String {
    match ctx.status.state {
        ViewState::SoldOut | ViewState::Closed => "You can close this page.".into(),
        ViewState::Missed => "Follow the link below to join the line again.".into(),
        ViewState::Admitted => "If nothing happens, follow the link below.".into(),
        _ => format!(
            "Keep this page open; there is no need to refresh. When it is your turn, it takes you on by itself. \
             You then have {} minutes of inactivity before your place is given to the next person.",
            ctx.idle_timeout_minutes.max(1)
        ),
    }
}

/// The default holding page.
pub const DEFAULT_TEMPLATE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<noscript><meta http-equiv="refresh" content="{{refresh_seconds}}"></noscript>
<title>{{headline}} · {{name}}</title>
<style>
:root{color-scheme:light dark;--fg:#1b1b1f;--bg:#f6f6f8;--card:#fff;--accent:#3454d1;--muted:#5c5f66}
@media (prefers-color-scheme:dark){:root{--fg:#eceef2;--bg:#15161a;--card:#1f2127;--accent:#8aa2ff;--muted:#a3a7b0}}
body{margin:0;font:1rem/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:34rem;margin:8vh auto;padding:2rem;background:var(--card);border-radius:12px;box-shadow:0 2px 12px #0002}
h1{font-size:1.5rem;margin:.2rem 0 1rem}.event{color:var(--muted);margin:0}
dl{display:grid;grid-template-columns:auto 1fr;gap:.3rem 1rem;margin:1.2rem 0}dt{color:var(--muted)}dd{margin:0;font-weight:600}
progress{width:100%;height:.8rem;accent-color:var(--accent)}
.note{border-left:4px solid #c77700;padding:.3rem .8rem}.small{color:var(--muted);font-size:.9rem}
a{color:var(--accent)}
</style>
</head>
<body>
<main data-state="{{state}}">
<p class="event">{{name}}</p>
<h1 id="wr-headline">{{headline}}</h1>
<div role="status" aria-live="polite">
<p id="wr-message">{{message}}</p>
<dl data-show="waiting">
<dt>Your place</dt><dd id="wr-position">{{position}}</dd>
<dt>Estimated wait</dt><dd id="wr-eta">{{eta}}</dd>
</dl>
<label data-show="waiting" class="small" for="wr-progress">Progress through the line</label>
<progress data-show="waiting" id="wr-progress" value="{{progress_value}}" max="{{progress_max}}"></progress>
<p class="note" id="wr-note" data-note="{{store_note}}">{{store_note}}</p>
</div>
<p>{{next_steps}}</p>
<p class="small">Last updated <time id="wr-updated" datetime="{{updated_at}}">{{updated_at}}</time>. <a id="wr-next" href="{{next}}">Continue</a></p>
</main>
<script type="application/json" id="wr-data">{{status_json}}</script>
<script src="{{script_url}}" defer></script>
</body>
</html>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: ViewState) -> Status {
        Status {
            event: "ev".into(),
            name: "Tour <2026>".into(),
            state,
            position: Some(3),
            number: Some(10),
            eta_seconds: Some(300),
            eta_low_seconds: Some(240),
            eta_high_seconds: Some(360),
            eta_basis: None,
            reach_position: None,
            beyond_reach: false,
            in_line: 5,
            refresh_seconds: 20,
            opens_at: Some("2026-03-01T10:00:00Z".into()),
            stopped: None,
            store_ok: true,
            updated_at: "2026-03-01T09:00:00Z".into(),
        }
    }

    fn ctx(state: ViewState) -> PageContext {
        PageContext {
            status: status(state),
            next: "/checkout".into(),
            status_url: "/waitroom/status?return_to=%2Fcheckout".into(),
            join_url: "/waitroom/join?return_to=%2Fcheckout".into(),
            script_url: "/waitroom/holding.js".into(),
            idle_timeout_minutes: 10,
        }
    }

    #[test]
    fn default_page_shows_position_eta_progress_and_escapes() {
        let html = PageTemplate::default().render(&ctx(ViewState::Waiting));
        assert!(html.contains("Tour &lt;2026&gt;"));
        assert!(!html.contains("Tour <2026>"));
        assert!(html.contains(r#"id="wr-position">3<"#));
        assert!(html.contains("about 4 to 6 minutes"));
        assert!(html.contains(r#"value="7" max="10""#));
        assert!(html.contains(r#"<meta http-equiv="refresh" content="20">"#));
        assert!(html.contains("There are 2 people ahead of you."));
        // The JSON island cannot close the script element.
        assert!(html.contains(r#""name":"Tour \u003c2026\u003e""#));
        assert!(html.len() < 8 * 1024, "{}", html.len());
    }

    #[test]
    fn variants_say_what_applies() {
        let t = PageTemplate::default();
        let html = t.render(&ctx(ViewState::Prequeue));
        assert!(html.contains("The draw happens at 10:00 UTC"));
        assert!(html.contains("arriving earlier or later before then makes no difference"));
        assert!(t.render(&ctx(ViewState::SoldOut)).contains("Sold out"));
        assert!(t.render(&ctx(ViewState::Closed)).contains("closed"));
        assert!(t.render(&ctx(ViewState::Paused)).contains("paused"));
        let mut c = ctx(ViewState::Waiting);
        c.status.store_ok = false;
        assert!(t.render(&c).contains("Status temporarily unknown"));
    }

    #[test]
    fn the_reach_sentence_is_rendered_and_the_script_writes_the_same_words() {
        let t = PageTemplate::default();
        let mut c = ctx(ViewState::Waiting);
        assert!(!t.render(&c).contains(REACH_SENTENCE));
        c.status.beyond_reach = true;
        assert!(t.render(&c).contains(&format!(
            "There are 2 people ahead of you. {REACH_SENTENCE}"
        )));
        // The script rewrites the message from each poll: the same words as the page it updates.
        assert!(HOLDING_SCRIPT.contains(&format!("\" {REACH_SENTENCE}\"")));
        assert!(HOLDING_SCRIPT.contains("\"You are next.\""));
        assert!(HOLDING_SCRIPT.contains("\"There are \"+(j.position-1)+\" people ahead of you.\""));
        c.status.position = Some(1);
        assert!(t.render(&c).contains("You are next."));
    }

    #[test]
    fn a_missed_turn_is_told_plainly_in_the_page_and_by_the_script() {
        let t = PageTemplate::default();
        let html = t.render(&ctx(ViewState::Missed));
        assert!(html.contains(MISSED_HEADLINE) && html.contains(MISSED_MESSAGE));
        assert!(html.contains("join the line again"));
        // The script writes the same words when a poll says `missed` (it does not reload: a reload would join).
        assert!(HOLDING_SCRIPT.contains(&format!("\"{MISSED_HEADLINE}\"")));
        assert!(HOLDING_SCRIPT.contains(&format!("\"{MISSED_MESSAGE}\"")));
        let html = t.render(&ctx(ViewState::Returning));
        assert!(html.contains("we kept it"), "{html}");
    }

    #[test]
    fn custom_templates() {
        let t = PageTemplate::from_template("<p>{{ name }} #{{position}}</p>").unwrap();
        assert_eq!(
            t.render(&ctx(ViewState::Waiting)),
            "<p>Tour &lt;2026&gt; #3</p>"
        );
        assert!(PageTemplate::from_template("{{nope}}").is_err());
        assert!(PageTemplate::from_template("{{name").is_err());
        let t = PageTemplate::from_fn(|c| format!("pos {}", c.status.position.unwrap_or(0)));
        assert_eq!(t.render(&ctx(ViewState::Waiting)), "pos 3");
    }

    #[test]
    fn eta_in_words() {
        assert_eq!(eta_words(0, 30), "less than a minute");
        assert_eq!(eta_words(50, 70), "about 1 to 2 minutes");
        assert_eq!(eta_words(240, 360), "about 4 to 6 minutes");
        assert_eq!(eta_words(300, 300), "about 5 minutes");
        assert_eq!(eta_words(7200, 10800), "about 2 to 3 hours");
        assert_eq!(eta_words(0, 300), "about 1 to 5 minutes");
        assert_eq!(eta_words(60, 60), "about a minute");
        // Capacity 1, 4-minute visits, 40 ahead: hours, not "128 to 214 minutes".
        assert_eq!(eta_words(7680, 12800), "about 2 to 4 hours");
        assert_eq!(eta_words(1800, 7800), "about 30 minutes to 3 hours");
        assert_eq!(eta_words(10800, 10800), "about 3 hours");
    }

    /// The page's script words a wait exactly as the server's page does: its `eta` function, taken from
    /// [`HOLDING_SCRIPT`], run under Node.js over a table of waits. Node.js is required (`apt-get install nodejs`;
    /// `.ci/run` installs it).
    #[test]
    fn the_script_words_waits_as_the_server_does() {
        let waits: Vec<(u64, u64)> = vec![
            (0, 30),
            (50, 70),
            (240, 360),
            (300, 300),
            (7200, 10800),
            (0, 300),
            (60, 60),
            (7680, 12800),
            (1800, 7800),
            (10800, 10800),
            (3600, 7140),
            (3500, 7300),
            (0, 0),
            (59, 61),
            (7000, 7200),
            (45, 59),
            (61, 7_199),
            (7_140, 7_260),
            (20_000, 90_000),
        ];
        let start = HOLDING_SCRIPT
            .find("function eta(")
            .expect("the script has eta");
        let len = HOLDING_SCRIPT[start..].find("\n").expect("eta is one line");
        let eta = &HOLDING_SCRIPT[start..start + len];
        let table: Vec<String> = waits.iter().map(|(l, h)| format!("[{l},{h}]")).collect();
        let program = format!(
            "{eta};console.log(JSON.stringify([{}].map(function(w){{return eta(w[0],w[1])}})))",
            table.join(",")
        );
        let out = std::process::Command::new("node")
            .arg("-e")
            .arg(&program)
            .output()
            .expect("Node.js runs the page's script in this test: apt-get install nodejs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed: Vec<String> = serde_json::from_slice(&out.stdout).expect("a JSON list");
        assert_eq!(printed.len(), waits.len());
        for ((low, high), words) in waits.iter().zip(&printed) {
            assert_eq!(&eta_words(*low, *high), words, "{low}..{high}");
        }
    }
}
