//! The admin API: operators read the figures and turn the knobs of a running on-sale over HTTP.
//!
//! Off unless the layer is built with [`WaitingRoomLayerBuilder::admin_token`](crate::WaitingRoomLayerBuilder::admin_token);
//! then it answers under `{base}/admin/`:
//!
//! | call | body | does |
//! | --- | --- | --- |
//! | `GET stats` | | the room's [`RoomStats`](crate::RoomStats) |
//! | `POST capacity` | `{"capacity": 9000}` | sets the capacity (at least 1) |
//! | `POST admit-per-minute` | `{"per_minute": 1500}` or `{"per_minute": null}` | sets or clears the per-minute cap |
//! | `POST pause` | | stops letting people in |
//! | `POST resume` | | lets people in again |
//! | `POST open-now` | | opens the door now (the draw runs at the next tick) |
//! | `POST close` | | closes the on-sale for good: nobody new joins or is let in, and everyone still in line is turned away |
//! | `POST inventory` | `{"total": 48000, "sold": 120, "held": 3000}` | reports the seats |
//! | `POST schedule` | `{"opens_at": "2026-03-01T10:00:00Z", "prequeue_opens_at": …, "closes_at": null}` | sets the timetable: each field given replaces its value (RFC 3339 text or ms since the epoch; `null` clears it), a field left out keeps its value |
//! | `GET session?fingerprint=3fa9c1` or `?id=<session id>` | | the session(s): fingerprint, state, line number, position, admitted at (never the id) |
//! | `POST session/finish` | `{"fingerprint": "3fa9c1"}` or `{"id": "…"}` | ends an admitted or active session (its place frees, its tokens are refused) |
//! | `POST session/front` | the same | moves a waiting session to the front: the next place that frees is its |
//! | `GET audit?limit=100` | | the last admin actions, newest first: who (the token's name), what, when |
//! | `GET` (the base, `{base}/admin/`) | | the live status page (see below) |
//!
//! Every call needs `Authorization: Bearer <secret>` (or the status page's login cookie, below); the secret is
//! compared in constant time (as SHA-256 digests, so not even its length shows) with every admin token the layer
//! knows. A layer may have several, each with a name
//! ([`admin_token_named`](crate::WaitingRoomLayerBuilder::admin_token_named)): the name is who the audit log
//! records. A missing or wrong secret gets `401` with a JSON problem body and changes nothing.
//! A successful change answers `200` with the stats after the change, is recorded in the audit log (in the store,
//! so every instance reads the same log; the last [`AUDIT_KEEP`](crate::store::AUDIT_KEEP) actions) and logged as
//! a `tracing` event at `info` with the operator's name.
//!
//! # The status page
//!
//! `{base}/admin/` is a small page served by the room (no build step, no CDN; its script and style are
//! `{base}/admin/admin.js` and `admin.css`, under `Content-Security-Policy: default-src 'none'; script-src 'self';
//! …; frame-ancestors 'none'`). Without a login it answers `401` with a login form and nothing else. The form posts
//! the token to `{base}/admin/login`, which checks it like a bearer and sets a login cookie
//! (`waitroom_admin`, `HttpOnly`, `SameSite=Strict`, `Secure` unless the room's cookies are not,
//! `Path={base}/admin`, 8 hours). The cookie holds no secret: it is `<token name>.<expiry>.<HMAC-SHA256 keyed by
//! the token's digest>`, so it is good on every instance that knows the token, expires by itself, and changing
//! the token logs everyone out. A call made with the cookie (rather than a bearer) that changes something must
//! also carry `X-Waitroom-Admin: 1` and come from the page's own origin (`Sec-Fetch-Site`/`Origin`): a page on
//! another site can neither send that header without a CORS preflight the room never grants, nor get the
//! cookie sent.
//!
//! A successful call answers `200` with the stats after the change. Changes go through the store, so every
//! instance sharing it applies them at its next refresh (a few times a second). A bad body gets `400`, a store
//! that cannot be reached `503`; bodies over 4 KiB are refused.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use http::header::{CONTENT_SECURITY_POLICY, COOKIE};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use waitroom_verify::OriginCheck;
use waitroom_verify::fingerprint;
use waitroom_verify::log_gate::LogGate;

use crate::error::BuildError;
use crate::http::layer::Shared;
use crate::http::respond::{self, Reply};
use crate::store::{Inventory, SessionState};

/// The state header value of admin responses.
const STATE: &str = "admin";
/// The most an admin request body may hold.
const MAX_BODY_BYTES: usize = 4 * 1024;
/// The shortest admin secret accepted.
pub(crate) const MIN_ADMIN_TOKEN_BYTES: usize = 16;
/// The status page's login cookie.
pub(crate) const LOGIN_COOKIE: &str = "waitroom_admin";
/// How long a login lasts.
const LOGIN_MS: u64 = 8 * 3600 * 1000;
/// The header a cookie-authenticated change must carry (a cross-site page cannot send it without a preflight).
pub const ADMIN_HEADER: &str = "x-waitroom-admin";
/// Most audit entries one call returns.
const MAX_AUDIT_READ: usize = 1_000;
/// The latest time a timetable may name: the end of the year 9999.
const LATEST_MS: u64 = 253_402_300_799_999;
/// The status page's policy: its own script and style, calls to itself, nothing else, never framed.
const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                        img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const PAGE_HTML: &str = include_str!("admin_page/page.html");
const LOGIN_HTML: &str = include_str!("admin_page/login.html");
const PAGE_JS: &str = include_str!("admin_page/admin.js");
const PAGE_CSS: &str = include_str!("admin_page/admin.css");

/// One admin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdminOp {
    Page,
    Script,
    Style,
    Login,
    Logout,
    Stats,
    Capacity,
    AdmitPerMinute,
    Pause,
    Resume,
    OpenNow,
    Close,
    Inventory,
    Schedule,
    Session,
    SessionFinish,
    SessionFront,
    Audit,
    Unknown,
}

impl AdminOp {
    /// The call named by the path after `{base}/admin/` (`""` is the status page).
    pub(crate) fn from_name(name: &str) -> Self {
        match name {
            "" => Self::Page,
            "admin.js" => Self::Script,
            "admin.css" => Self::Style,
            "login" => Self::Login,
            "logout" => Self::Logout,
            "stats" => Self::Stats,
            "capacity" => Self::Capacity,
            "admit-per-minute" => Self::AdmitPerMinute,
            "pause" => Self::Pause,
            "resume" => Self::Resume,
            "open-now" => Self::OpenNow,
            "close" => Self::Close,
            "inventory" => Self::Inventory,
            "schedule" => Self::Schedule,
            "session" => Self::Session,
            "session/finish" => Self::SessionFinish,
            "session/front" => Self::SessionFront,
            "audit" => Self::Audit,
            _ => Self::Unknown,
        }
    }

    /// The name the audit log records.
    fn name(self) -> &'static str {
        match self {
            Self::Capacity => "capacity",
            Self::AdmitPerMinute => "admit-per-minute",
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::OpenNow => "open-now",
            Self::Close => "close",
            Self::Inventory => "inventory",
            Self::Schedule => "schedule",
            Self::SessionFinish => "session-finish",
            Self::SessionFront => "session-front",
            Self::Login => "login",
            _ => "read",
        }
    }
}

/// A bearer secret guarding the admin API or the metrics (as its SHA-256 digest). Never printed.
pub(crate) struct BearerGuard {
    digest: [u8; 32],
}

impl std::fmt::Debug for BearerGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerGuard { digest: <redacted> }")
    }
}

/// The SHA-256 of the secret in `Authorization: Bearer <secret>`, if the request has one.
fn presented(parts: &Parts) -> Option<[u8; 32]> {
    let value = parts.headers.get(http::header::AUTHORIZATION)?.as_bytes();
    if value.len() > 1024 || value.len() < 7 || !value[..7].eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    Some(Sha256::digest(value[7..].trim_ascii()).into())
}

impl BearerGuard {
    /// A bearer secret for the admin API, or for another endpoint guarded the same way (`field` names the builder
    /// method in the error).
    pub(crate) fn new(field: &'static str, secret: &[u8]) -> Result<Self, BuildError> {
        if secret.len() < MIN_ADMIN_TOKEN_BYTES {
            return Err(BuildError::invalid(
                field,
                format!(
                    "must be at least {MIN_ADMIN_TOKEN_BYTES} bytes (use a random secret, e.g. 32 bytes in base64)"
                ),
            ));
        }
        Ok(Self {
            digest: Sha256::digest(secret).into(),
        })
    }

    /// Whether the request carries the secret as `Authorization: Bearer <secret>`.
    pub(crate) fn authorised(&self, parts: &Parts) -> bool {
        presented(parts).is_some_and(|d| d.ct_eq(&self.digest).into())
    }
}

/// Whether `name` is a valid admin token name: 1 to 32 ASCII letters, digits, `-`, `_` or `@`.
pub(crate) fn valid_token_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'@'))
}

/// The admin tokens, by name (digests only), and the refusal log's pace.
pub(crate) struct AdminTokens {
    tokens: Vec<(String, BearerGuard)>,
    refusal_log: LogGate,
}

impl std::fmt::Debug for AdminTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tokens.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("AdminTokens")
            .field("names", &names)
            .finish_non_exhaustive()
    }
}

/// How a call proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Bearer,
    Cookie,
}

impl AdminTokens {
    /// The tokens; names must be valid and distinct.
    pub(crate) fn new(tokens: Vec<(String, BearerGuard)>) -> Result<Self, BuildError> {
        for (i, (name, _)) in tokens.iter().enumerate() {
            if !valid_token_name(name) {
                return Err(BuildError::invalid(
                    "admin_token_named",
                    format!("`{name}`: a token name is 1 to 32 letters, digits, `-`, `_` or `@`"),
                ));
            }
            if tokens[..i].iter().any(|(n, _)| n == name) {
                return Err(BuildError::invalid(
                    "admin_token_named",
                    format!("two admin tokens are named `{name}`"),
                ));
            }
        }
        Ok(Self {
            tokens,
            refusal_log: LogGate::default(),
        })
    }

    /// The name of the token whose secret `digest` is (every token compared, in constant time).
    fn by_digest(&self, digest: &[u8; 32]) -> Option<&str> {
        let mut found = None;
        for (name, guard) in &self.tokens {
            if bool::from(digest.ct_eq(&guard.digest)) {
                found = Some(name.as_str());
            }
        }
        found
    }

    /// The login ticket of `name` until `expires_ms`: an HMAC keyed by that token's digest.
    fn ticket_mac(&self, name: &str, expires_ms: u64, event: &str) -> Option<Hmac<Sha256>> {
        let (_, guard) = self.tokens.iter().find(|(n, _)| n == name)?;
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&guard.digest)
            .expect("HMAC takes keys of any length");
        mac.update(format!("waitroom-admin-login|{event}|{name}|{expires_ms}").as_bytes());
        Some(mac)
    }

    fn ticket(&self, name: &str, expires_ms: u64, event: &str) -> Option<String> {
        let mac = self.ticket_mac(name, expires_ms, event)?;
        Some(format!(
            "{name}.{expires_ms}.{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        ))
    }

    /// Who the request is: a bearer token's name, or a valid unexpired login cookie's.
    fn who(&self, parts: &Parts, now_ms: u64, event: &str) -> Option<(&str, Via)> {
        if let Some(d) = presented(parts) {
            return self.by_digest(&d).map(|n| (n, Via::Bearer));
        }
        let value = login_cookie(&parts.headers)?;
        let mut it = value.splitn(3, '.');
        let (name, expires, tag) = (it.next()?, it.next()?, it.next()?);
        let expires: u64 = expires.parse().ok()?;
        if expires <= now_ms || expires > now_ms + LOGIN_MS + 60_000 {
            return None;
        }
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let (stored, _) = self.tokens.iter().find(|(n, _)| n == name)?;
        self.ticket_mac(name, expires, event)?
            .verify_slice(&tag)
            .ok()
            .map(|()| (stored.as_str(), Via::Cookie))
    }
}

/// The login cookie's value, if the request has one.
fn login_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(LOGIN_COOKIE)?.strip_prefix('='))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CapacityBody {
    capacity: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PerMinuteBody {
    per_minute: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryBody {
    total: u64,
    sold: u64,
    #[serde(default)]
    held: u64,
}

/// Names one session: by id, or by the fingerprint the logs show.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionBody {
    id: Option<String>,
    fingerprint: Option<String>,
}

fn bad_request(detail: &str) -> Reply {
    respond::problem(StatusCode::BAD_REQUEST, STATE, "Bad request", detail)
}

fn unavailable(e: impl std::fmt::Display) -> Reply {
    respond::problem(
        StatusCode::SERVICE_UNAVAILABLE,
        STATE,
        "Store unavailable",
        &format!("Nothing changed: {e}"),
    )
}

/// The body as `T`, or the 400 detail.
fn parse<T: for<'de> Deserialize<'de>>(body: &[u8], example: &str) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("The body must be JSON like {example} ({e})."))
}

fn unauthorised() -> Reply {
    let mut r = respond::problem(
        StatusCode::UNAUTHORIZED,
        STATE,
        "Unauthorized",
        "Admin calls need `Authorization: Bearer <admin token>`.",
    );
    r.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"waitroom-admin\""),
    );
    r
}

/// Escapes text for HTML.
fn esc(s: &str) -> Cow<'_, str> {
    if !s.contains(['<', '>', '&', '"', '\'']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// An HTML page of the admin (the status page or the login form) under the page's policy.
fn page(status: StatusCode, html: String, cookies: Vec<HeaderValue>) -> Reply {
    let mut r = respond::reply(status, STATE, "text/html; charset=utf-8", html, cookies);
    let h = r.headers_mut();
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(PAGE_CSP));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn asset(content_type: &'static str, body: &'static str) -> Reply {
    let mut r = respond::reply(
        StatusCode::OK,
        STATE,
        content_type,
        Bytes::from_static(body.as_bytes()),
        Vec::new(),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn fill(template: &str, shared: &Shared, message: &str) -> String {
    template
        .replace("{{BASE}}", &esc(shared.paths.base()))
        .replace("{{EVENT}}", &esc(&shared.room.config().event))
        .replace("{{MESSAGE}}", &esc(message))
}

fn login_page(shared: &Shared, status: StatusCode, message: &str) -> Reply {
    page(status, fill(LOGIN_HTML, shared, message), Vec::new())
}

/// The `Set-Cookie` of the login cookie (`value` empty: the cookie is cleared).
fn login_set_cookie(shared: &Shared, value: &str) -> Option<HeaderValue> {
    let secure = if shared.room.cookies().secure() {
        "; Secure"
    } else {
        ""
    };
    let max_age = if value.is_empty() { 0 } else { LOGIN_MS / 1000 };
    HeaderValue::from_str(&format!(
        "{LOGIN_COOKIE}={value}; Path={}/admin; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}",
        shared.paths.base()
    ))
    .ok()
}

/// Reads the body, at most [`MAX_BODY_BYTES`].
async fn read_body<B>(body: B) -> Result<Bytes, Reply>
where
    B: Body + Send,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(_) => Err(respond::problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            STATE,
            "Body too large",
            "Admin bodies are at most 4 KiB.",
        )),
    }
}

/// `POST login`: a form with `token`; a right one gets the login cookie and goes to the page.
async fn login<B>(shared: &Shared, admin: &AdminTokens, parts: &Parts, body: B) -> Reply
where
    B: Body + Send,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let room = &shared.room;
    if !OriginCheck::same_origin().allows(&parts.method, &parts.uri, &parts.headers) {
        return login_page(
            shared,
            StatusCode::FORBIDDEN,
            "Sign in from this page itself.",
        );
    }
    let body = match read_body(body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let token = form_urlencoded::parse(&body)
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
    let now = room.clock().now_ms();
    let Some(name) = admin.by_digest(&digest) else {
        if admin.refusal_log.due_at(now) {
            tracing::warn!(event = %room.config().event, "refused a status-page login with a wrong token (logged at most every 10 s)");
        }
        return login_page(shared, StatusCode::UNAUTHORIZED, "That token is not right.");
    };
    let expires = now + LOGIN_MS;
    let cookie = admin
        .ticket(name, expires, &room.config().event)
        .and_then(|t| login_set_cookie(shared, &t));
    let _ = room.audit(name, "login", "{}").await;
    let mut r = respond::see_other(
        STATE,
        &format!("{}/admin/", shared.paths.base()),
        cookie.into_iter().collect(),
    );
    r.headers_mut()
        .insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}

/// Answers one admin call. `admin` is `None` when the API is off (then everything under `{base}/admin/` is a 404,
/// as for any unknown path).
pub(crate) async fn handle<B>(shared: &Shared, op: AdminOp, parts: Parts, body: B) -> Reply
where
    B: Body + Send,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Some(admin) = &shared.admin else {
        return respond::problem(
            StatusCode::NOT_FOUND,
            "not_in_line",
            "Not found",
            "The waiting room answers `status`, `jwks.json` and `join` here.",
        );
    };
    let room = &shared.room;
    let (get, post) = (
        parts.method == Method::GET || parts.method == Method::HEAD,
        parts.method == Method::POST,
    );
    let now = room.clock().now_ms();
    let event = &room.config().event;
    // What anyone may ask for: the login form's style, the login itself, logging out.
    match op {
        AdminOp::Style if get => return asset("text/css; charset=utf-8", PAGE_CSS),
        AdminOp::Login if post => return login(shared, admin, &parts, body).await,
        AdminOp::Logout if post => {
            let clear = login_set_cookie(shared, "");
            return respond::see_other(
                STATE,
                &format!("{}/admin/", shared.paths.base()),
                clear.into_iter().collect(),
            );
        }
        _ => {}
    }
    let Some((who, via)) = admin.who(&parts, now, event) else {
        if admin.refusal_log.due_at(now) {
            tracing::warn!(
                event = %event,
                path = parts.uri.path(),
                "refused an admin call without the right token (logged at most every 10 s)"
            );
        }
        if op == AdminOp::Page && get {
            return login_page(shared, StatusCode::UNAUTHORIZED, "");
        }
        return unauthorised();
    };
    // A change made with the login cookie must come from the page itself.
    if via == Via::Cookie
        && !get
        && (!parts.headers.contains_key(ADMIN_HEADER)
            || !OriginCheck::same_origin().allows(&parts.method, &parts.uri, &parts.headers))
    {
        return respond::problem_coded(
            StatusCode::FORBIDDEN,
            STATE,
            waitroom_verify::origin::CROSS_ORIGIN_CODE,
            "Cross-origin request refused",
            "A change made with the login cookie must come from the status page (with `X-Waitroom-Admin: 1`).",
        );
    }
    let wrong_method = |allow: &'static str| {
        let mut r = respond::problem(
            StatusCode::METHOD_NOT_ALLOWED,
            STATE,
            "Method not allowed",
            &format!("Use {allow}."),
        );
        r.headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static(allow));
        r
    };
    match op {
        AdminOp::Unknown | AdminOp::Style | AdminOp::Login | AdminOp::Logout => {
            return respond::problem(
                StatusCode::NOT_FOUND,
                STATE,
                "Not found",
                "Admin calls: GET stats, session, audit; POST capacity, admit-per-minute, pause, resume, open-now, \
                 close, inventory, schedule, session/finish, session/front.",
            );
        }
        AdminOp::Page | AdminOp::Script | AdminOp::Stats | AdminOp::Session | AdminOp::Audit
            if !get =>
        {
            return wrong_method("GET");
        }
        AdminOp::Page => {
            return page(StatusCode::OK, fill(PAGE_HTML, shared, who), Vec::new());
        }
        AdminOp::Script => return asset("text/javascript; charset=utf-8", PAGE_JS),
        AdminOp::Stats => return stats_reply(shared),
        AdminOp::Session => return session_reply(shared, &parts).await,
        AdminOp::Audit => return audit_reply(shared, &parts).await,
        _ if !post => return wrong_method("POST"),
        _ => {}
    }
    let body = match read_body(body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (result, detail) = match op {
        AdminOp::Capacity => {
            let b: CapacityBody = match parse(&body, r#"{"capacity": 9000}"#) {
                Ok(b) => b,
                Err(detail) => return bad_request(&detail),
            };
            if b.capacity == 0 {
                return bad_request("The capacity must be at least 1 (pause the door instead).");
            }
            (
                room.set_capacity(b.capacity).await,
                json!({ "capacity": b.capacity }),
            )
        }
        AdminOp::AdmitPerMinute => {
            let b: PerMinuteBody =
                match parse(&body, r#"{"per_minute": 1500} or {"per_minute": null}"#) {
                    Ok(b) => b,
                    Err(detail) => return bad_request(&detail),
                };
            if b.per_minute == Some(0) {
                return bad_request(
                    "The per-minute cap must be at least 1 (pause the door to stop admitting).",
                );
            }
            (
                room.set_admit_per_minute(b.per_minute).await,
                json!({ "per_minute": b.per_minute }),
            )
        }
        AdminOp::Inventory => {
            let b: InventoryBody =
                match parse(&body, r#"{"total": 48000, "sold": 120, "held": 3000}"#) {
                    Ok(b) => b,
                    Err(detail) => return bad_request(&detail),
                };
            if b.sold.saturating_add(b.held) > b.total {
                return bad_request("`sold` plus `held` cannot exceed `total`.");
            }
            (
                room.set_inventory(Inventory {
                    total: b.total,
                    sold: b.sold,
                    held: b.held,
                })
                .await,
                json!({ "total": b.total, "sold": b.sold, "held": b.held }),
            )
        }
        AdminOp::Schedule => {
            let s = room.snapshot().settings.clone();
            let (opens, pre, closes) = match schedule(
                &body,
                (s.opens_at_ms, s.prequeue_opens_at_ms, s.closes_at_ms),
            ) {
                Ok(t) => t,
                Err(detail) => return bad_request(&detail),
            };
            (
                room.set_schedule(opens, pre, closes).await,
                json!({ "opens_at_ms": opens, "prequeue_opens_at_ms": pre, "closes_at_ms": closes }),
            )
        }
        AdminOp::SessionFinish | AdminOp::SessionFront => {
            return session_act(shared, who, op, &body).await;
        }
        AdminOp::Pause => (room.pause().await, json!({})),
        AdminOp::Resume => (room.resume().await, json!({})),
        AdminOp::OpenNow => (room.open_now().await, json!({})),
        AdminOp::Close => (room.close().await, json!({})),
        _ => unreachable!("answered above"),
    };
    match result {
        Ok(_) => {
            if let Err(e) = room.audit(who, op.name(), &detail.to_string()).await {
                tracing::warn!(event = %event, operator = who, error = %e, "the audit log could not record an admin action");
            }
            stats_reply(shared)
        }
        Err(e) => unavailable(e),
    }
}

/// The timetable after the change `body` asks for: each field given replaces its value (RFC 3339 text or ms since
/// the epoch; `null` clears it), a field left out keeps `current`'s.
#[allow(clippy::type_complexity)]
fn schedule(
    body: &[u8],
    current: (Option<u64>, Option<u64>, Option<u64>),
) -> Result<(Option<u64>, Option<u64>, Option<u64>), String> {
    const EXAMPLE: &str = r#"{"opens_at": "2026-03-01T10:00:00Z", "prequeue_opens_at": "2026-03-01T09:30:00Z", "closes_at": null}"#;
    let map: serde_json::Map<String, Value> = serde_json::from_slice(body)
        .map_err(|e| format!("The body must be JSON like {EXAMPLE} ({e})."))?;
    let (mut opens, mut pre, mut closes) = current;
    for (k, v) in &map {
        let t = match v {
            Value::Null => None,
            Value::Number(n) => Some(
                n.as_u64()
                    .ok_or_else(|| format!("`{k}`: ms since the epoch, a whole number"))?,
            ),
            Value::String(s) => Some(
                humantime::parse_rfc3339_weak(s)
                    .map_err(|e| format!("`{k}`: `{s}` is not an RFC 3339 time ({e})"))?
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_err(|_| format!("`{k}`: before 1970"))?
                    .as_millis() as u64,
            ),
            _ => return Err(format!("`{k}`: a time (RFC 3339 text or ms), or null")),
        };
        // Times the room can print (RFC 3339 has four-digit years): a later one would overflow the clock's type.
        if t.is_some_and(|t| t > LATEST_MS) {
            return Err(format!("`{k}`: after the year 9999"));
        }
        match k.as_str() {
            "opens_at" => opens = t,
            "prequeue_opens_at" => pre = t,
            "closes_at" => closes = t,
            _ => return Err(format!("Unknown field `{k}`: the body is like {EXAMPLE}.")),
        }
    }
    if let (Some(p), Some(o)) = (pre, opens)
        && p > o
    {
        return Err("The pre-queue must open before the door does.".into());
    }
    if let (Some(c), Some(o)) = (closes, opens)
        && c <= o
    {
        return Err("The on-sale must close after it opens.".into());
    }
    Ok((opens, pre, closes))
}

/// The session ids named by a lookup (`id` or `fingerprint`), or the reply to give instead.
async fn resolve(
    shared: &Shared,
    id: Option<&str>,
    fp: Option<&str>,
) -> Result<Vec<String>, Reply> {
    match (id, fp) {
        (Some(id), None) => Ok(vec![id.to_owned()]),
        (None, Some(fp)) => {
            if fp.len() != 6 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad_request(
                    "A fingerprint is 6 hex digits, as the logs show it.",
                ));
            }
            shared
                .room
                .find_by_fingerprint(fp)
                .await
                .map_err(unavailable)
        }
        _ => Err(bad_request(
            "Name the session by `id` or by `fingerprint` (one of the two).",
        )),
    }
}

/// `GET session?id=…` or `?fingerprint=…`.
async fn session_reply(shared: &Shared, parts: &Parts) -> Reply {
    let q = parts.uri.query().unwrap_or("");
    let pairs: Vec<(String, String)> = form_urlencoded::parse(q.as_bytes()).into_owned().collect();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let ids = match resolve(shared, get("id"), get("fingerprint")).await {
        Ok(ids) => ids,
        Err(r) => return r,
    };
    let room = &shared.room;
    // Positions count from the head as the store has it now, not as this instance last read it.
    let _ = room.refresh().await;
    let served = room.snapshot().served;
    let mut sessions = Vec::new();
    for id in &ids {
        match room.inspect(id).await {
            Ok(Some(d)) => {
                let p = &d.placement;
                let position = match (p.state, p.number) {
                    (SessionState::Waiting, Some(n)) if n > served => Some(n - served),
                    _ => None,
                };
                sessions.push(json!({
                    "fingerprint": fingerprint(&p.session).to_string(),
                    "state": p.state,
                    "number": p.number,
                    "position": position,
                    "admitted_at_ms": d.admitted_at_ms,
                    "admitted_at": d.admitted_at_ms.map(|t| humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(t)).to_string()),
                }));
            }
            Ok(None) => {}
            Err(e) => return unavailable(e),
        }
    }
    json_reply(&json!({ "sessions": sessions }))
}

/// `POST session/finish` (ends one admitted or active session) and `POST session/front` (moves one waiting
/// session to the front of the line).
async fn session_act(shared: &Shared, who: &str, op: AdminOp, body: &[u8]) -> Reply {
    let b: SessionBody = match parse(body, r#"{"fingerprint": "3fa9c1"} or {"id": "…"}"#) {
        Ok(b) => b,
        Err(detail) => return bad_request(&detail),
    };
    let ids = match resolve(shared, b.id.as_deref(), b.fingerprint.as_deref()).await {
        Ok(ids) => ids,
        Err(r) => return r,
    };
    let [id] = ids.as_slice() else {
        return respond::problem(
            StatusCode::CONFLICT,
            STATE,
            "Not one session",
            &format!(
                "That names {} sessions: name it by its id instead.",
                ids.len()
            ),
        );
    };
    let room = &shared.room;
    let fp = fingerprint(id).to_string();
    let done = if op == AdminOp::SessionFront {
        room.move_to_front(id).await.map(|p| p.is_some())
    } else {
        room.finish(id, 0).await
    };
    match done {
        Ok(true) => {
            let what = if op == AdminOp::SessionFront {
                "an operator moved a session to the front"
            } else {
                "an operator ended a session"
            };
            tracing::info!(event = %room.config().event, operator = who, session = %fp, "{what}");
            let detail = json!({ "session": fp }).to_string();
            if let Err(e) = room.audit(who, op.name(), &detail).await {
                tracing::warn!(operator = who, error = %e, "the audit log could not record an admin action");
            }
            if op == AdminOp::SessionFront {
                json_reply(&json!({ "moved": true, "fingerprint": fp }))
            } else {
                json_reply(&json!({ "finished": true, "fingerprint": fp }))
            }
        }
        Ok(false) if op == AdminOp::SessionFront => respond::problem(
            StatusCode::CONFLICT,
            STATE,
            "Not waiting",
            "Only a session waiting in line with a number can be moved to the front.",
        ),
        Ok(false) => respond::problem(
            StatusCode::CONFLICT,
            STATE,
            "Not admitted",
            "Only an admitted or active session can be ended.",
        ),
        Err(e) => unavailable(e),
    }
}

/// `GET audit?limit=…`.
async fn audit_reply(shared: &Shared, parts: &Parts) -> Reply {
    let q = parts.uri.query().unwrap_or("");
    let limit = form_urlencoded::parse(q.as_bytes())
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(100)
        .min(MAX_AUDIT_READ);
    match shared.room.audit_log(limit).await {
        Ok(entries) => json_reply(&json!({ "entries": entries })),
        Err(e) => unavailable(e),
    }
}

fn json_reply(v: &Value) -> Reply {
    respond::reply(
        StatusCode::OK,
        STATE,
        "application/json",
        Bytes::from(v.to_string()),
        Vec::new(),
    )
}

fn stats_reply(shared: &Shared) -> Reply {
    let body = serde_json::to_vec(&shared.room.stats()).unwrap_or_else(|_| b"{}".to_vec());
    respond::reply(
        StatusCode::OK,
        STATE,
        "application/json",
        Bytes::from(body),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(auth: Option<&str>) -> Parts {
        let mut b = http::Request::post("/waitroom/admin/pause");
        if let Some(a) = auth {
            b = b.header(http::header::AUTHORIZATION, a);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn the_secret_is_checked_and_never_printed() {
        assert!(BearerGuard::new("admin_token", b"short").is_err());
        let admin = BearerGuard::new("admin_token", b"0123456789abcdef-secret").unwrap();
        assert!(admin.authorised(&parts(Some("Bearer 0123456789abcdef-secret"))));
        assert!(admin.authorised(&parts(Some("bearer 0123456789abcdef-secret"))));
        assert!(!admin.authorised(&parts(Some("Bearer 0123456789abcdef-secreT"))));
        assert!(!admin.authorised(&parts(Some("Basic 0123456789abcdef-secret"))));
        assert!(!admin.authorised(&parts(Some("Bearer"))));
        assert!(!admin.authorised(&parts(None)));
        assert!(!format!("{admin:?}").contains("secret"));
        assert_eq!(AdminOp::from_name("open-now"), AdminOp::OpenNow);
        assert_eq!(AdminOp::from_name("open_now"), AdminOp::Unknown);
    }
}
