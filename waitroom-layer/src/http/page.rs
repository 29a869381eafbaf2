//! The holding page: what a person in line sees.
//!
//! The default page is small, accessible (one `h1`, an `aria-live` region, labelled figures, readable without
//! colour, AA contrast in light and dark mode) and works without JavaScript (`<noscript>` meta refresh, times in
//! UTC). With JavaScript it asks `{base}/status` a second or two after it loads, then every `refresh_seconds` with
//! ±20 % jitter (no request is held open), writes times in the reader's time zone with a live countdown to the
//! opening or the draw, shows progress from where the person joined and, when the person is let in, goes on to the
//! page they asked for with no click. Its words come from a [`PageText`] picked by `Accept-Language`.
//!
//! Replace it with [`PageTemplate::from_template`] (a string with `{{placeholders}}`, see [`PLACEHOLDERS`]) or
//! [`PageTemplate::from_fn`] (a closure from [`PageContext`] to HTML).

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;
use serde::Serialize;

use crate::error::BuildError;
use crate::http::page_text::{ENGLISH, PageText};
use crate::room::{Status, Stopped, ViewState};

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
    /// The page's words, in the language the request asked for among those registered
    /// ([`WaitingRoomLayerBuilder::page_text`](crate::WaitingRoomLayerBuilder::page_text)).
    #[serde(serialize_with = "text_ref")]
    pub text: Arc<PageText>,
}

fn text_ref<S: serde::Serializer>(t: &Arc<PageText>, s: S) -> Result<S::Ok, S::Error> {
    t.as_ref().serialize(s)
}

/// The placeholders a string template may use. Each is replaced HTML-escaped, except `status_json`, which is
/// the JSON status (with `next`, `status_url` and the page's words as `text`) made safe to embed in a
/// `<script type="application/json">` element. The words and labels come from the request's [`PageText`];
/// `opens_at_text` and `updated_text` are those times in UTC (the default page's script rewrites them in the
/// reader's time zone); `*_hidden` are `hidden` (an attribute) when that part of the page does not apply, else
/// empty. `progress_value` and `progress_max` count the numbers served since the line began (the default page's
/// script shows progress from where the person joined instead).
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
    "lang",
    "opens_at_text",
    "updated_text",
    "label_place",
    "label_wait",
    "label_opens",
    "label_progress",
    "label_updated",
    "link_text",
    "place_hidden",
    "wait_hidden",
    "opens_hidden",
    "note_hidden",
    "next_hidden",
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

/// The default page's script: reads the status and the page's words ([`PageText`]) embedded in the page, polls the
/// status endpoint (first 1.2 to 1.8 s after the page loads: a place may be freeing; then every `refresh_seconds`
/// with jitter), keeps the place, wait, message and progress current with the same words the server wrote
/// (including the sentence that the seats left may run out first, from the status's `beyond_reach`), writes the
/// opening and update times in the reader's time zone with a countdown to the opening that moves every second, and
/// moves on when the person is let in. The progress bar measures from the place the person first had (kept in
/// `sessionStorage` for the line number).
///
/// It wakes up by itself: it polls at once when the page becomes visible again (`visibilitychange`), is restored
/// from the back-forward cache (`pageshow` with `persisted`) or the network comes back (`online`), so a person
/// whose turn came while the tab slept is back in the room within one round trip (and let in ahead of the line,
/// within the return window). A failed poll is not the end: it tries again after 2, 4, 8, ... seconds, never
/// longer apart than the refresh interval. When a poll says `missed`, it says so in place and stops; its link joins
/// the line again, at the back. When the state or the reason the door is stopped changes, it reloads the page.
pub(crate) const HOLDING_SCRIPT: &str = r#"(function(){
var d=JSON.parse(document.getElementById("wr-data").textContent),T=d.text,$=function(i){return document.getElementById(i)};
var m=document.querySelector("main"),opens=null,zero=false,first=null;
function num(n){return String(n).replace(/\B(?=(\d{3})+(?!\d))/g,T.thousands_separator)}
function fill(t,o){return t.replace(/\{(\w+)\}/g,function(x,k){return o.hasOwnProperty(k)?o[k]:x})}
function eta(l,h){if(h==null)return null;if(h<60)return T.eta_under_minute;var a=Math.max(Math.ceil(l/60),1),b=Math.ceil(h/60);if(b>=120){var H=Math.ceil(b/60);return a<60?fill(T.eta_minutes_to_hours,{a:num(a),h:num(H)}):Math.floor(a/60)>=H?fill(T.eta_hours,{h:num(H)}):fill(T.eta_hours_range,{a:num(Math.floor(a/60)),h:num(H)})}return a>=b?(b===1?T.eta_one_minute:fill(T.eta_minutes,{b:num(b)})):fill(T.eta_minutes_range,{a:num(a),b:num(b)})}
function ahead(p){return p<=1?T.next_in_line:p===2?T.ahead_one:fill(T.ahead_many,{n:num(p-1)})}
function clock(iso){var t=new Date(iso);if(isNaN(t))return iso;var o={hour:"2-digit",minute:"2-digit",second:"2-digit"};try{if(Math.abs(t-Date.now())>72e6){o.weekday="short";o.day="numeric";o.month="short";return t.toLocaleString(T.lang,o)}return t.toLocaleTimeString(T.lang,o)}catch(e){return iso}}
function message(j){var s=j.state,x;if(s==="prequeue")return fill(T.prequeue,{time:j.opens_at?clock(j.opens_at):""});if(s==="paused")return j.stopped==="seats_held"?T.seats_held:T.paused;if(s!=="waiting")return null;x=j.position!=null?ahead(j.position):T.in_line;if(j.beyond_reach)x+=" "+T.reach;if(j.stopped==="not_open"&&j.opens_at)x=fill(T.not_open,{time:clock(j.opens_at)})+" "+x;return x}
function show(id,on){var e=$(id);if(e)e.hidden=!on}
function countdown(){var e=$("wr-countdown");if(!e)return;if(!opens){e.hidden=true;return}var s=Math.max(0,Math.ceil((new Date(opens)-Date.now())/1000)),h=Math.floor(s/3600),n=Math.floor(s%3600/60),p=function(v){return(v<10?"0":"")+v};e.textContent=fill(T.countdown,{countdown:(h?h+":"+p(n):n)+":"+p(s%60)});e.hidden=false;if(s===0&&!zero){zero=true;setTimeout(poll,1000)}}
function progress(j){var p=$("wr-progress"),on=j.state==="waiting"&&j.position!=null&&j.number!=null,st=null;if(on){var k="wr-start:"+j.event+":"+j.number;try{st=+sessionStorage.getItem(k)||null}catch(e){}st=Math.max(st||first||j.position,j.position);first=st;try{sessionStorage.setItem(k,st)}catch(e){}if(st<=1)on=false;else{p.max=st-1;p.value=st-j.position}}show("wr-progress",on);show("wr-progress-label",on)}
function render(j){var g=message(j);if(g!=null)$("wr-message").textContent=g;show("wr-place-row",j.position!=null);if(j.position!=null)$("wr-position").textContent=num(j.position);var w=eta(j.eta_low_seconds,j.eta_high_seconds);show("wr-wait-row",w!=null);if(w!=null)$("wr-eta").textContent=w;
opens=j.opens_at&&(j.state==="prequeue"||j.state==="waiting"||j.state==="paused")?j.opens_at:null;show("wr-opens-row",!!opens);if(opens){var o=$("wr-opens");o.textContent=clock(opens);o.setAttribute("datetime",opens)}countdown();progress(j);var u=$("wr-updated");u.textContent=clock(j.updated_at);u.setAttribute("datetime",j.updated_at)}
var n=$("wr-note");render(d);setInterval(countdown,1000);
if(d.state==="admitted"&&d.next){location.replace(d.next);return}
if(d.state==="sold_out"||d.state==="closed"||d.state==="missed")return;
var timer=0,busy=false,fails=0,done=false;
function again(s){clearTimeout(timer);timer=setTimeout(poll,(s||d.refresh_seconds||20)*1000*(0.8+Math.random()*0.4))}
function gone(j){done=true;clearTimeout(timer);opens=null;m.setAttribute("data-state","missed");["wr-place-row","wr-wait-row","wr-opens-row","wr-progress","wr-progress-label"].forEach(function(i){show(i,false)});
$("wr-headline").textContent=T.headline_missed;$("wr-message").textContent=T.missed;$("wr-steps").textContent=T.steps_missed;var x=$("wr-next");x.textContent=T.link_join_again;x.hidden=false;$("wr-updated").textContent=clock(j.updated_at)}
function poll(){if(busy||done)return;busy=true;clearTimeout(timer);fetch(d.status_url,{credentials:"same-origin",cache:"no-store",headers:{Accept:"application/json"}}).then(function(r){return r.json()}).then(function(j){busy=false;fails=0;
if(j.state==="admitted"&&j.next){done=true;location.replace(j.next);return}
if(j.state==="missed"){gone(j);return}
if(j.state!==d.state||j.stopped!==d.stopped){done=true;location.reload();return}
render(j);n.hidden=j.store_ok;n.textContent=j.store_ok?"":T.store_note;again(j.refresh_seconds)}).catch(function(){busy=false;fails++;n.hidden=false;n.textContent=T.store_note_retrying;again(Math.min(Math.pow(2,fails),d.refresh_seconds||20))})}
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

/// A time as the server writes it, in UTC (the reader's time zone is not known here): `10:00:00 UTC`, with the
/// date when it is not within 20 hours of `now` (both RFC 3339). This is the page without JavaScript; the default
/// page's script replaces it with the reader's local time.
fn utc_time(text: &PageText, rfc3339: &str, now: &str) -> String {
    let secs = |t: &str| {
        humantime::parse_rfc3339(t)
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs())
    };
    let near = match (secs(rfc3339), secs(now)) {
        (Some(a), Some(b)) => a.abs_diff(b) <= 72_000,
        _ => true,
    };
    let time = if near {
        rfc3339.get(11..19).map(str::to_owned)
    } else {
        rfc3339
            .get(..10)
            .zip(rfc3339.get(11..16))
            .map(|(d, t)| format!("{d} {t}"))
    };
    text.utc_time
        .replace("{time}", time.as_deref().unwrap_or(rfc3339))
}

/// A wait in words, in English: "about 4 to 6 minutes", "about 2 to 4 hours" ([`PageText::eta_words`] in another
/// language). The holding page's script words a wait the same way (`{base}/holding.js`), so the text does not change
/// when the script takes over.
pub fn eta_words(low: u64, high: u64) -> String {
    ENGLISH.eta_words(low, high)
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
            text: &'a PageText,
        }
        let json = serde_json::to_string(&Data {
            status: &ctx.status,
            next: &ctx.next,
            status_url: &ctx.status_url,
            text: &ctx.text,
        })
        .unwrap_or_else(|_| "{}".into());
        // Safe inside <script>: no `<` can close the element or open a comment.
        let status_json = json.replace('<', "\\u003c").replace('>', "\\u003e");
        Self { ctx, status_json }
    }

    fn get(&self, name: &str) -> String {
        let s = &self.ctx.status;
        let t = &*self.ctx.text;
        let hidden = |shown: bool| {
            if shown {
                String::new()
            } else {
                "hidden".into()
            }
        };
        match name {
            "name" => s.name.clone(),
            "state" => s.state.as_str().into(),
            "headline" => headline(t, s).into(),
            "message" => message(t, s),
            "next_steps" => next_steps(self.ctx),
            "store_note" => {
                if s.store_ok {
                    String::new()
                } else {
                    t.store_note.clone()
                }
            }
            "position" => s.position.map_or_else(|| "–".into(), |p| t.number(p)),
            "eta" => match (s.eta_low_seconds, s.eta_high_seconds) {
                (Some(l), Some(h)) => t.eta_words(l, h),
                _ => "–".into(),
            },
            "progress_value" => match (s.number, s.position) {
                (Some(n), Some(p)) => n.saturating_sub(p).to_string(),
                _ => "0".into(),
            },
            "progress_max" => s.number.unwrap_or(1).max(1).to_string(),
            "opens_at" => s.opens_at.clone().unwrap_or_default(),
            "opens_at_text" => s
                .opens_at
                .as_deref()
                .map(|o| utc_time(t, o, &s.updated_at))
                .unwrap_or_default(),
            "updated_at" => s.updated_at.clone(),
            "updated_text" => utc_time(t, &s.updated_at, &s.updated_at),
            "refresh_seconds" => s.refresh_seconds.to_string(),
            "status_url" => self.ctx.status_url.clone(),
            "join_url" => self.ctx.join_url.clone(),
            "script_url" => self.ctx.script_url.clone(),
            "next" => self.ctx.next.clone(),
            "lang" => t.lang.clone(),
            "label_place" => t.label_place.clone(),
            "label_wait" => t.label_wait.clone(),
            "label_opens" => t.label_opens.clone(),
            "label_progress" => t.label_progress.clone(),
            "label_updated" => t.label_updated.clone(),
            "link_text" => match s.state {
                ViewState::Missed => t.link_join_again.clone(),
                _ => t.link_continue.clone(),
            },
            "place_hidden" => hidden(s.position.is_some()),
            "wait_hidden" => hidden(s.eta_high_seconds.is_some()),
            "opens_hidden" => hidden(s.opens_at.is_some() && opening_matters(s.state)),
            "note_hidden" => hidden(!s.store_ok),
            "next_hidden" => hidden(matches!(s.state, ViewState::Admitted | ViewState::Missed)),
            _ => String::new(),
        }
    }
}

/// Whether the opening time is news in this state (someone in line or about to join).
fn opening_matters(state: ViewState) -> bool {
    matches!(
        state,
        ViewState::Prequeue | ViewState::Waiting | ViewState::Paused
    )
}

fn headline<'t>(t: &'t PageText, s: &Status) -> &'t str {
    match s.state {
        ViewState::Prequeue => &t.headline_prequeue,
        ViewState::Waiting => &t.headline_waiting,
        ViewState::Paused if s.stopped == Some(Stopped::SeatsHeld) => &t.headline_seats_held,
        ViewState::Paused => &t.headline_paused,
        ViewState::Admitted => &t.headline_admitted,
        ViewState::SoldOut => &t.headline_sold_out,
        ViewState::Closed => &t.headline_closed,
        ViewState::NotInLine => &t.headline_not_in_line,
        ViewState::Returning => &t.headline_returning,
        ViewState::Missed => &t.headline_missed,
    }
}

/// The message under the headline; the page's script writes the same from a poll (its `message`).
fn message(t: &PageText, s: &Status) -> String {
    let at = |o: &str| utc_time(t, o, &s.updated_at);
    match s.state {
        ViewState::Prequeue => {
            let time = s.opens_at.as_deref().map(at).unwrap_or_default();
            t.prequeue.replace("{time}", &time)
        }
        ViewState::Waiting => {
            let mut m = s.position.map_or_else(|| t.in_line.clone(), |p| t.ahead(p));
            if s.beyond_reach {
                m.push(' ');
                m.push_str(&t.reach);
            }
            if let (Some(Stopped::NotOpen), Some(o)) = (s.stopped, s.opens_at.as_deref()) {
                m = format!("{} {m}", t.not_open.replace("{time}", &at(o)));
            }
            m
        }
        ViewState::Paused if s.stopped == Some(Stopped::SeatsHeld) => t.seats_held.clone(),
        ViewState::Paused => t.paused.clone(),
        ViewState::Admitted => t.admitted.clone(),
        ViewState::SoldOut => t.sold_out.clone(),
        ViewState::Closed => t.closed.clone(),
        ViewState::NotInLine => t.not_in_line.clone(),
        ViewState::Returning => t.returning.clone(),
        ViewState::Missed => t.missed.clone(),
    }
}

fn next_steps(ctx: &PageContext) -> String {
    let t = &*ctx.text;
    match ctx.status.state {
        ViewState::SoldOut | ViewState::Closed => t.steps_done.clone(),
        ViewState::Missed => t.steps_missed.clone(),
        ViewState::Admitted => t.steps_admitted.clone(),
        _ => t
            .steps_wait
            .replace("{minutes}", &t.minutes(ctx.idle_timeout_minutes.max(1))),
    }
}

/// The default holding page.
pub const DEFAULT_TEMPLATE: &str = r#"<!doctype html>
<html lang="{{lang}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<noscript><meta http-equiv="refresh" content="{{refresh_seconds}}"></noscript>
<title>{{headline}} · {{name}}</title>
<style>
[hidden]{display:none!important}
:root{color-scheme:light dark;--fg:#1b1b1f;--bg:#f6f6f8;--card:#fff;--accent:#3454d1;--muted:#5c5f66}
@media (prefers-color-scheme:dark){:root{--fg:#eceef2;--bg:#15161a;--card:#1f2127;--accent:#8aa2ff;--muted:#a3a7b0}}
body{margin:0;font:1rem/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:34rem;margin:8vh auto;padding:2rem;background:var(--card);border-radius:12px;box-shadow:0 2px 12px #0002}
h1{font-size:1.5rem;margin:.2rem 0 1rem}.event{color:var(--muted);margin:0}
dl{margin:1.2rem 0}dl div{display:flex;flex-wrap:wrap;gap:.1rem 1rem;margin:.3rem 0}dt{color:var(--muted);min-width:9rem}dd{margin:0;font-weight:600;font-variant-numeric:tabular-nums}
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
<dl>
<div id="wr-place-row" {{place_hidden}}><dt>{{label_place}}</dt><dd id="wr-position">{{position}}</dd></div>
<div id="wr-wait-row" {{wait_hidden}}><dt>{{label_wait}}</dt><dd id="wr-eta">{{eta}}</dd></div>
</dl>
<p class="note" id="wr-note" {{note_hidden}}>{{store_note}}</p>
</div>
<dl>
<div id="wr-opens-row" {{opens_hidden}}><dt>{{label_opens}}</dt><dd><time id="wr-opens" datetime="{{opens_at}}">{{opens_at_text}}</time> <span id="wr-countdown" hidden></span></dd></div>
</dl>
<label id="wr-progress-label" class="small" for="wr-progress" hidden>{{label_progress}}</label>
<progress id="wr-progress" value="0" max="1" hidden></progress>
<p id="wr-steps">{{next_steps}}</p>
<p class="small">{{label_updated}} <time id="wr-updated" datetime="{{updated_at}}">{{updated_text}}</time>. <a id="wr-next" href="{{next}}" {{next_hidden}}>{{link_text}}</a></p>
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
            text: Arc::new(PageText::english()),
        }
    }

    /// The `hidden` attribute on the element with `id`, in a rendered page.
    fn hidden(html: &str, id: &str) -> bool {
        let at = html.find(&format!("id=\"{id}\"")).expect(id);
        let tag_end = at + html[at..].find('>').unwrap();
        html[at..tag_end].contains("hidden")
    }

    #[test]
    fn default_page_shows_position_eta_and_escapes() {
        let html = PageTemplate::default().render(&ctx(ViewState::Waiting));
        assert!(html.contains("Tour &lt;2026&gt;"));
        assert!(!html.contains("Tour <2026>"));
        assert!(html.contains(r#"id="wr-position">3<"#));
        assert!(html.contains("about 4 to 6 minutes"));
        assert!(html.contains(r#"<meta http-equiv="refresh" content="20">"#));
        assert!(html.contains("There are 2 people ahead of you."));
        assert!(html.contains(r#"<html lang="en">"#));
        // The JSON island cannot close the script element, and it carries the page's words for the script.
        assert!(html.contains(r#""name":"Tour \u003c2026\u003e""#));
        assert!(html.contains(r#""ahead_many":"There are {n} people ahead of you.""#));
        // The words travel with the page: about 5 KB of them, in a page that stays small.
        assert!(html.len() < 14 * 1024, "{}", html.len());
        // Hidden by the stylesheet too (an author `display` would otherwise override the attribute).
        assert!(html.contains("[hidden]{display:none!important}"));
    }

    #[test]
    fn what_does_not_apply_is_hidden() {
        let t = PageTemplate::default();
        let html = t.render(&ctx(ViewState::Waiting));
        assert!(!hidden(&html, "wr-place-row") && !hidden(&html, "wr-wait-row"));
        assert!(hidden(&html, "wr-note") && hidden(&html, "wr-next"));
        for state in [ViewState::SoldOut, ViewState::Closed, ViewState::NotInLine] {
            let mut c = ctx(state);
            (
                c.status.position,
                c.status.eta_low_seconds,
                c.status.eta_high_seconds,
            ) = (None, None, None);
            let html = t.render(&c);
            for id in [
                "wr-place-row",
                "wr-wait-row",
                "wr-opens-row",
                "wr-progress",
                "wr-note",
            ] {
                assert!(hidden(&html, id), "{state:?}: {id} shows");
            }
        }
        // Paused: the place stays, no wait, the opening row only before an opening.
        let mut c = ctx(ViewState::Paused);
        c.status.stopped = Some(Stopped::Paused);
        (c.status.eta_low_seconds, c.status.eta_high_seconds) = (None, None);
        let html = t.render(&c);
        assert!(!hidden(&html, "wr-place-row") && hidden(&html, "wr-wait-row"));
        assert!(html.contains("the line is paused"));
        c.status.stopped = Some(Stopped::SeatsHeld);
        let html = t.render(&c);
        assert!(
            html.contains("Every seat left is held by people at checkout"),
            "{html}"
        );
        assert!(html.contains("every seat is held right now"));
    }

    #[test]
    fn variants_say_what_applies() {
        let t = PageTemplate::default();
        let html = t.render(&ctx(ViewState::Prequeue));
        // Without the script: the time in UTC, with seconds.
        assert!(html.contains("The draw happens at 10:00:00 UTC"));
        assert!(html.contains(
            r#"<time id="wr-opens" datetime="2026-03-01T10:00:00Z">10:00:00 UTC</time>"#
        ));
        assert!(html.contains("arriving earlier or later before then makes no difference"));
        assert!(t.render(&ctx(ViewState::SoldOut)).contains("Sold out"));
        assert!(t.render(&ctx(ViewState::Closed)).contains("closed"));
        let mut c = ctx(ViewState::Waiting);
        c.status.store_ok = false;
        let html = t.render(&c);
        assert!(html.contains("Status temporarily unknown") && !hidden(&html, "wr-note"));
        // In line before the opening: when, and the wait starts then.
        let mut c = ctx(ViewState::Waiting);
        c.status.stopped = Some(Stopped::NotOpen);
        assert!(t.render(&c).contains(
            "The line opens at 10:00:00 UTC; the wait below starts then. There are 2 people ahead of you."
        ));
        // An opening more than a day away is dated.
        c.status.opens_at = Some("2026-03-04T10:00:00Z".into());
        assert!(t.render(&c).contains(">2026-03-04 10:00 UTC<"));
    }

    #[test]
    fn plurals_and_separators() {
        let t = PageTemplate::default();
        let mut c = ctx(ViewState::Waiting);
        c.status.position = Some(2);
        assert!(t.render(&c).contains("There is 1 person ahead of you."));
        c.status.position = Some(48_001);
        let html = t.render(&c);
        assert!(html.contains("There are 48,000 people ahead of you."));
        assert!(html.contains(r#"id="wr-position">48,001<"#));
        c.idle_timeout_minutes = 1;
        assert!(
            t.render(&c)
                .contains("You then have 1 minute of inactivity")
        );
    }

    #[test]
    fn the_page_speaks_the_language_it_is_given() {
        let mut c = ctx(ViewState::Waiting);
        c.text = Arc::new(PageText::german());
        c.status.position = Some(1_235);
        let html = PageTemplate::default().render(&c);
        assert!(html.contains(r#"<html lang="de">"#));
        assert!(html.contains("1.234 Personen sind vor Ihnen."));
        assert!(html.contains(">Ihr Platz<") && html.contains("etwa 4 bis 6 Minuten"));
        // A custom template gets the same words.
        let custom = PageTemplate::from_template("{{label_place}}: {{position}}").unwrap();
        assert_eq!(custom.render(&c), "Ihr Platz: 1.235");
    }

    #[test]
    fn the_reach_sentence_is_rendered() {
        let t = PageTemplate::default();
        let mut c = ctx(ViewState::Waiting);
        let reach = &c.text.reach.clone();
        assert!(
            t.render(&c)
                .contains(r#"id="wr-message">There are 2 people ahead of you.</p>"#)
        );
        c.status.beyond_reach = true;
        assert!(t.render(&c).contains(&format!(
            r#"id="wr-message">There are 2 people ahead of you. {reach}</p>"#
        )));
        c.status.position = Some(1);
        assert!(t.render(&c).contains("You are next."));
    }

    #[test]
    fn a_missed_turn_is_told_plainly() {
        let t = PageTemplate::default();
        let c = ctx(ViewState::Missed);
        let html = t.render(&c);
        assert!(html.contains(&c.text.headline_missed) && html.contains(&c.text.missed));
        assert!(html.contains("join the line again") && !hidden(&html, "wr-next"));
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

    /// One line of the page's script: the one that starts with `prefix`.
    fn script_line(prefix: &str) -> &'static str {
        let start = HOLDING_SCRIPT
            .find(prefix)
            .unwrap_or_else(|| panic!("the script has {prefix}"));
        let len = HOLDING_SCRIPT[start..].find('\n').expect("one line");
        &HOLDING_SCRIPT[start..start + len]
    }

    /// The page's script words a wait, a place and a message exactly as the server's page does, in English and
    /// in German: its functions, taken from [`HOLDING_SCRIPT`], run under Node.js over a table of statuses.
    /// Node.js is required (`apt-get install nodejs`; `.ci/run` installs it).
    #[test]
    fn the_script_words_waits_places_and_messages_as_the_server_does() {
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
            (600_000, 900_000),
        ];
        let mut statuses = Vec::new();
        for position in [1, 2, 3, 1_001, 48_001] {
            for (stopped, beyond) in [(None, false), (None, true), (Some(Stopped::NotOpen), false)]
            {
                let mut s = status(ViewState::Waiting);
                // Within the day, so both sides write a time alone (the script's is local: UTC under Node here).
                s.opens_at = Some("2026-03-01T10:00:00Z".into());
                (s.position, s.stopped, s.beyond_reach) = (Some(position), stopped, beyond);
                statuses.push(s);
            }
        }
        for stopped in [Stopped::Paused, Stopped::SeatsHeld] {
            let mut s = status(ViewState::Paused);
            s.stopped = Some(stopped);
            statuses.push(s);
        }
        for text in [PageText::english(), PageText::german()] {
            let functions: Vec<&str> = [
                "function num(",
                "function fill(",
                "function eta(",
                "function ahead(",
                "function message(",
            ]
            .into_iter()
            .map(script_line)
            .collect();
            let table: Vec<String> = waits.iter().map(|(l, h)| format!("[{l},{h}]")).collect();
            // The script's clock, pinned: the time as the server writes it (the words around it are compared).
            let program = format!(
                "var T={};function clock(iso){{return T.utc_time.replace('{{time}}',iso.slice(11,19))}}\n{}\n\
                 console.log(JSON.stringify({{etas:[{}].map(function(w){{return eta(w[0],w[1])}}),\
                 messages:{}.map(message)}}))",
                serde_json::to_string(&text).unwrap(),
                functions.join("\n"),
                table.join(","),
                serde_json::to_string(&statuses).unwrap(),
            );
            let out = std::process::Command::new("node")
                .arg("-e")
                .arg(&program)
                .env("TZ", "UTC")
                .output()
                .expect("Node.js runs the page's script in this test: apt-get install nodejs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
            for ((low, high), words) in waits.iter().zip(printed["etas"].as_array().unwrap()) {
                assert_eq!(
                    text.eta_words(*low, *high),
                    words.as_str().unwrap(),
                    "{} {low}..{high}",
                    text.lang
                );
            }
            for (s, words) in statuses.iter().zip(printed["messages"].as_array().unwrap()) {
                assert_eq!(
                    message(&text, s),
                    words.as_str().unwrap(),
                    "{} {s:?}",
                    text.lang
                );
            }
        }
    }
}
