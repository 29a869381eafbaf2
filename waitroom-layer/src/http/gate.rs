//! What the room decides for a request it has to think about: a protected request without a valid token (join
//! or hold, or let in an admitted session), a token due for renewal, and the room's own endpoints.
//!
//! # What goes where: cookies or answers
//! How a request named its session ([`Carrier`]) decides how the room hands over a session value or a token:
//! - [`Carrier::Cookie`] (a browser): `Set-Cookie` only, as always. Nothing secret appears in a JSON body or a
//!   response header that the page's script could read: the token cookie stays `HttpOnly`.
//! - [`Carrier::Header`] (an app sending `X-Waitroom-Session`): no cookies. The JSON answers carry `session` (the
//!   value to send back, when it is new or changed) and, once admitted, `token`; the same values come in the
//!   [`SESSION_VALUE_HEADER`] and [`TOKEN_HEADER`] response headers, which is how a token renewed on a protected
//!   request (or issued on one that passes) reaches it. A finish says `Waitroom-State: finished`.
//! - [`Carrier::Nothing`] (a newcomer, browser or app): the cookie, and the session value in the answers too (an
//!   app's first request); never a token, which goes only to a request that named its session by the header.

use std::sync::Arc;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::request::Parts;
use http::{HeaderName, HeaderValue, Method, StatusCode};

use crate::http::layer::Shared;
use crate::http::page::PageContext;
use crate::http::paths::{Endpoint, safe_return_to};
use crate::http::respond::{self, Reply};
use crate::room::cookie::{Carrier, SessionCookie, SessionRef};
use crate::room::{Status, ViewState, WaitingRoom};
use crate::store::{Placement, Return, SessionState};
use waitroom_verify::{negotiate, percent};

/// The response header that gives a client without cookies its session value (what it sends back in
/// `X-Waitroom-Session`), when the room made a new one or changed it.
pub const SESSION_VALUE_HEADER: HeaderName = HeaderName::from_static("waitroom-session");

/// The response header that gives a client without cookies its admission token (what it sends back as
/// `Authorization: Bearer`): on the status that admits it, and on a protected request that renews it.
pub const TOKEN_HEADER: HeaderName = HeaderName::from_static("waitroom-token");

/// The outcome of a check.
pub(crate) enum Decision {
    /// Let the request through to the inner service, adding these headers (`Set-Cookie` lines, or the values for
    /// a client without cookies) to its response; a finish command in the response ends `session`.
    Pass {
        parts: Parts,
        session: String,
        headers: Vec<(HeaderName, HeaderValue)>,
        carrier: Carrier,
    },
    /// Let the request through untracked: the store cannot be reached and the room fails open
    /// ([`StoreOutage::FailOpen`](crate::StoreOutage::FailOpen)); a finish command in the response is dropped.
    PassOpen { parts: Parts },
    /// Answer with the room's own response.
    Reply(Reply),
}

/// Where a session stands after the room looked (and maybe joined).
struct Placed {
    session: String,
    placement: Option<Placement>,
    cookies: Vec<HeaderValue>,
    store_ok: bool,
    /// Whether a token cookie was set (the session is admitted and has claimed its place).
    admitted: bool,
    /// The token just issued: the request it was issued on goes on with it, and with its check (the browser has
    /// only the `Set-Cookie` so far, so a `VerifyLayer` further in would otherwise find no token on this request).
    /// Checked only then: a poll that hears it is admitted does not pass. (The check a poll made used to sit in the
    /// verifier's cache for the browser's next request; that request pays it now when it comes to this instance,
    /// and nobody pays it when it goes to another, which checks it anyway, or never comes.)
    issued: Option<String>,
    /// The session value just sealed (a `Set-Cookie` for it is in `cookies`).
    sealed: Option<String>,
}

/// What a client without cookies is told in the answer: its session value and its token.
#[derive(Default)]
pub(crate) struct Handover {
    pub(crate) session: Option<String>,
    pub(crate) token: Option<String>,
}

impl Handover {
    /// What `carrier` may be told of `placed`; for a client that named its session by the header, the
    /// `Set-Cookie` lines go (it has no jar).
    fn of(placed: &mut Placed, carrier: Carrier) -> Self {
        match carrier {
            Carrier::Cookie => Self::default(),
            Carrier::Nothing => Self {
                session: placed.sealed.clone(),
                token: None,
            },
            Carrier::Header => {
                placed.cookies.clear();
                Self {
                    session: placed.sealed.clone(),
                    token: placed.issued.clone(),
                }
            }
        }
    }

    /// The same, as response headers.
    pub(crate) fn headers(&self) -> impl Iterator<Item = (HeaderName, HeaderValue)> + '_ {
        let session = self.session.as_deref().map(|v| (SESSION_VALUE_HEADER, v));
        let token = self.token.as_deref().map(|v| (TOKEN_HEADER, v));
        session
            .into_iter()
            .chain(token)
            .filter_map(|(n, v)| Some((n, HeaderValue::from_str(v).ok()?)))
    }
}

enum Look {
    Placed(Placed),
    Refused(Reply),
}

/// Looks the session up; with `join`, puts it in line when it is not (a finished session under a new id, at the
/// back). An admitted session claims its place and gets a token cookie.
/// With `tell_late`, a session whose turn passed while it was away and that comes back after the return window is
/// told so first (its placement stays `Abandoned`, answered `missed`); it joins at the back with its next request.
async fn place(
    shared: &Shared,
    parts: &Parts,
    cookie: Option<SessionCookie>,
    join: bool,
    tell_late: bool,
) -> Look {
    let room = &shared.room;
    let cookies_codec = room.cookies();
    // What the cookie says of the place: (line number, pre-queue mark, ticket's time).
    let (mut session, hint, fresh) = match cookie {
        Some(c) => (c.id, (c.number, c.prequeue, c.issued), false),
        None => (WaitingRoom::new_session_id(), (None, false, None), true),
    };
    // The cookie's session, to tell whether the answer names another (a new id after a finish, or an account's
    // place adopted). A first contact keeps no copy: its answer carries a new cookie anyway (`fresh && join`).
    let original = (!fresh).then(|| session.clone());
    let mut placed = Placed {
        session: String::new(),
        placement: None,
        cookies: Vec::new(),
        store_ok: true,
        admitted: false,
        issued: None,
        sealed: None,
    };
    // Back after the return window, and not told yet: this answer tells it (no join now).
    let mut late = false;
    if !fresh {
        match room.locate_counted(&session, hint.0, hint.1, hint.2).await {
            Ok((p, counted)) => {
                placed.placement = p;
                late = tell_late && counted == Some(Return::TooLate);
            }
            Err(_) => {
                // The store is out of reach: the cookie's word for the place stands.
                placed.store_ok = false;
                placed.placement = match hint {
                    (Some(n), _, _) => Some(Placement {
                        session: session.clone(),
                        state: SessionState::Waiting,
                        number: Some(n),
                    }),
                    (None, true, _) => Some(Placement {
                        session: session.clone(),
                        state: SessionState::PreQueue,
                        number: None,
                    }),
                    (None, false, _) => None,
                };
            }
        }
    }
    // A session in the deny list finished, whatever the store says yet (a finish written as a bare stream entry
    // reaches the store's records at the next tick, the deny list possibly before): it gets no new token.
    if let Some(p) = placed.placement.as_mut()
        && p.state.is_active()
        && room.finished_recently(&p.session)
    {
        p.state = SessionState::Finished;
    }
    let (door_shut_for_good, prequeue_opens_at_ms) = room.with_snapshot(|snap| {
        (
            snap.settings.turning_away(),
            snap.settings.prequeue_opens_at_ms,
        )
    });
    let needs_join = placed.store_ok
        && !late
        && placed
            .placement
            .as_ref()
            .is_none_or(|p| p.state.is_terminal());
    let mut joined = false;
    // A ticket given out by this request: when (seconds since the Unix epoch).
    let mut ticket = None;
    if join && needs_join && !door_shut_for_good {
        if placed
            .placement
            .as_ref()
            .is_some_and(|p| p.state == SessionState::Finished)
        {
            // The verifier refuses every token of a finished session id: come back under a new one.
            session = WaitingRoom::new_session_id();
        }
        // Before the pre-queue opens nobody takes a place: come back then.
        if let Some(at) = prequeue_opens_at_ms.filter(|&t| t > room.clock().now_ms()) {
            return Look::Refused(respond::not_open_yet(
                at,
                room.clock().now_ms(),
                negotiate::wants_html(&parts.headers),
            ));
        }
        if let Some(guard) = &shared.join_guard
            && let Err(mut refusal) = guard.check(parts).await
        {
            respond::stamp(refusal.headers_mut(), ViewState::NotInLine.as_str());
            return Look::Refused(refusal);
        }
        let account = shared.account_key.as_ref().and_then(|f| f(parts));
        // A session the store does not know (a first contact, or a ticket past its grace) gets a ticket: nothing
        // is written until it comes back. One the store knows (its last visit ended) and an account's join are
        // written at once (an account holds one place, which the store must know).
        let taken = if account.is_none() && placed.placement.is_none() {
            room.ticket(&session).await.map(|(p, issued)| {
                ticket = issued;
                p
            })
        } else {
            room.join(&session, account.as_deref()).await
        };
        match taken {
            Ok(p) => {
                // With an account key, the account's place may belong to another browser's session: adopt it.
                session.clone_from(&p.session);
                // Straight through when there is room: a newcomer with a free place and nobody ahead goes in on
                // this request (the admission tick runs now instead of at its interval). A ticket is in no store
                // yet: no tick can let it in.
                let p = match ticket {
                    None => room.let_in_at_once(&p).await.unwrap_or(p),
                    Some(_) => p,
                };
                placed.placement = Some(p);
                joined = true;
            }
            Err(_) => {
                placed.store_ok = false;
                placed.placement = None;
            }
        }
    }
    // What the cookie says of the place: the line number, or the pre-queue mark. A turned-away session keeps what
    // its cookie says (its later polls are answered from it while the on-sale stays closed or sold out).
    let mark = match &placed.placement {
        Some(p) if p.state == SessionState::TurnedAway && !joined => hint,
        Some(p) => (p.number, p.state == SessionState::PreQueue, ticket),
        None => (None, false, None),
    };
    if (fresh && join)
        || original.as_ref().is_some_and(|o| *o != session)
        || ((joined || !fresh) && mark != hint && placed.placement.is_some())
    {
        let sealed = cookies_codec.seal_ticket(&session, mark.0, mark.1, mark.2);
        placed.cookies.push(cookies_codec.set_sealed(&sealed));
        placed.sealed = Some(sealed);
    }
    // An active session gets its pass again; an admitted one comes for it, unless the on-sale closed or sold out
    // in the meantime (nobody new is let in then; `WaitingRoom::status` says the same).
    if placed.placement.as_ref().is_some_and(|p| {
        p.state == SessionState::Active
            || (p.state == SessionState::Admitted && !door_shut_for_good)
    }) {
        let number = placed.placement.as_ref().and_then(|p| p.number);
        match room.claim(&session).await {
            Ok(Some(mut p)) if p.state == SessionState::Active => {
                // A claim from what this instance heard names no number; the session's stays what it was.
                p.number = p.number.or(number);
                if let Some(token) = room.issue_token(&session) {
                    placed
                        .cookies
                        .push(cookies_codec.set_token(&token, room.tokens().lifetime()));
                    placed.issued = Some(token);
                    placed.admitted = true;
                }
                placed.placement = Some(p);
            }
            Ok(p) => placed.placement = p,
            Err(_) => placed.store_ok = false,
        }
    }
    placed.session = session;
    Look::Placed(placed)
}

fn status_of(room: &WaitingRoom, placed: &Placed) -> Status {
    let mut st = room.status(placed.placement.as_ref());
    st.store_ok &= placed.store_ok;
    st
}

/// The path and query a request asked for, if it is a safe place to send the browser back to.
fn asked_for(parts: &Parts) -> String {
    parts
        .uri
        .path_and_query()
        .and_then(|pq| safe_return_to(pq.as_str()))
        .unwrap_or("/")
        .to_owned()
}

/// The `return_to` query parameter, if it is a same-site path.
fn return_to(parts: &Parts) -> Option<String> {
    let q = parts.uri.query()?;
    if q.len() > 4096 {
        return None;
    }
    let raw = q.split('&').find_map(|kv| kv.strip_prefix("return_to="))?;
    let decoded = percent::decode_query_value(raw)?;
    safe_return_to(&decoded).map(str::to_owned)
}

/// The JSON status for `carrier`: the cookies, or the session value and token in the body and headers.
fn status_reply(
    http_status: StatusCode,
    status: &Status,
    next: Option<&str>,
    mut placed: Placed,
    carrier: Carrier,
) -> Reply {
    let handover = Handover::of(&mut placed, carrier);
    let mut res = respond::status_json(http_status, status, next, &handover, placed.cookies);
    for (name, value) in handover.headers() {
        res.headers_mut().insert(name, value);
    }
    res
}

/// The holding answer: the JSON status, or the holding page. `next` (where the client goes once let in) is worked
/// out only for an answer that names it: the page, or the JSON of a session let in (a first contact's JSON, the
/// opening's whole crowd, needs none).
fn held_reply(
    shared: &Shared,
    parts: &Parts,
    placed: Placed,
    next: impl FnOnce() -> String,
    carrier: Carrier,
) -> Reply {
    let status = status_of(&shared.room, &placed);
    if !negotiate::wants_html(&parts.headers) {
        let next = (status.state == ViewState::Admitted).then(next);
        return status_reply(
            respond::held_status(&status),
            &status,
            next.as_deref(),
            placed,
            carrier,
        );
    }
    let next = next();
    let base = shared.paths.base();
    let enc = percent::encode(&next);
    let ctx = PageContext {
        next,
        status_url: format!("{base}/status?return_to={enc}"),
        join_url: format!("{base}/join?return_to={enc}"),
        script_url: format!("{base}/holding.js"),
        idle_timeout_minutes: shared.room.config().idle_timeout.as_secs().div_ceil(60),
        text: shared.texts.pick(&parts.headers),
        status,
    };
    let page = shared.page.render(&ctx);
    respond::html(
        &ctx.status,
        page,
        shared.page.content_security_policy_header(),
        placed.cookies,
    )
}

/// A protected request without a valid token: let an admitted session in (with a fresh token), or join and hold.
pub(crate) async fn hold(
    shared: Arc<Shared>,
    parts: Parts,
    cookie: Option<SessionCookie>,
    carrier: Carrier,
) -> Decision {
    let mut placed = match place(&shared, &parts, cookie, true, true).await {
        Look::Placed(p) => p,
        Look::Refused(r) => return Decision::Reply(r),
    };
    if placed.admitted {
        // The request goes on as the client's next ones will: with its new token, as a cookie for a browser or
        // as `Authorization: Bearer` (with its session in `X-Waitroom-Session`) for a client without cookies (for
        // a verify layer anywhere further in, in this process or behind a proxy), and as the room's checked
        // marker (for one on the room's own verifier, which then does not check it again).
        let mut parts = parts;
        let handover = Handover::of(&mut placed, carrier);
        if let Some(token) = placed.issued {
            let verified = shared
                .room
                .tokens()
                .check(&[token.as_str()], &placed.session)
                .ok();
            if carrier == Carrier::Cookie {
                if let Some(line) = shared.room.cookies().token_request_cookie(&token) {
                    parts.headers.append(http::header::COOKIE, line);
                }
            } else if let Ok(bearer) = HeaderValue::try_from(format!("Bearer {token}")) {
                parts.headers.insert(AUTHORIZATION, bearer);
            }
            if let Some(verified) = verified {
                parts.extensions.insert(verified);
            }
        }
        if carrier != Carrier::Cookie
            && let Some(sealed) = placed.sealed.as_deref()
            && let Ok(v) = HeaderValue::from_str(sealed)
        {
            parts
                .headers
                .insert(HeaderName::from_static(waitroom_verify::SESSION_HEADER), v);
        }
        let mut headers: Vec<_> = placed
            .cookies
            .into_iter()
            .map(|c| (http::header::SET_COOKIE, c))
            .collect();
        headers.extend(handover.headers());
        return Decision::Pass {
            parts,
            session: placed.session,
            headers,
            carrier,
        };
    }
    if !placed.store_ok && shared.room.fails_open() {
        return Decision::PassOpen { parts };
    }
    Decision::Reply(held_reply(
        &shared,
        &parts,
        placed,
        || asked_for(&parts),
        carrier,
    ))
}

/// A valid token past half its life: the session claims again (its idle deadline moves) and, while still active,
/// gets a fresh token. The request passes either way: the token it brought is valid.
/// A browser gets the fresh token as a cookie, a client that named its session by the header in the
/// [`TOKEN_HEADER`] response header.
pub(crate) async fn renew(
    shared: Arc<Shared>,
    parts: Parts,
    session: String,
    carrier: Carrier,
) -> Decision {
    let room = &shared.room;
    let mut headers = Vec::new();
    if let Ok(Some(p)) = room.claim(&session).await
        && p.state == SessionState::Active
        && let Some(token) = room.issue_token(&session)
    {
        if carrier == Carrier::Header {
            if let Ok(v) = HeaderValue::from_str(&token) {
                headers.push((TOKEN_HEADER, v));
            }
        } else {
            headers.push((
                http::header::SET_COOKIE,
                room.cookies().set_token(&token, room.tokens().lifetime()),
            ));
        }
    }
    Decision::Pass {
        parts,
        session,
        headers,
        carrier,
    }
}

/// How a room endpoint is answered: at once, or by [`endpoint`] with the request's session cookie.
pub(crate) enum Answer {
    /// The answer, made without a store call.
    Now(Reply),
    /// Take [`endpoint`] with this session (cookie or header) and how the request named it.
    Later(Option<SessionCookie>, Carrier),
}

/// Reads the session cookie for a room endpoint and answers a waiting session's status poll at once
/// ([`status_now`]); anything else is for [`endpoint`].
pub(crate) fn endpoint_now(shared: &Shared, endpoint: Endpoint, parts: &Parts) -> Answer {
    if let Some(refusal) = shared.cross_origin(parts) {
        return Answer::Now(refusal);
    }
    let Ok((session, carrier)) = shared.room.cookies().read_session(&parts.headers) else {
        return Answer::Now(respond::unreadable_session());
    };
    if endpoint == Endpoint::Status
        && let Some(cookie) = session
        && let Some(reply) = status_now(shared, parts, cookie, carrier)
    {
        return Answer::Now(reply);
    }
    Answer::Later(session.map(SessionRef::owned), carrier)
}

/// The status poll of a session that local memory knows to be waiting (the hot path: about 30,000 a second in the
/// seed's crowd), answered without a store call and without a future: what [`endpoint`] answers for it. `None`:
/// take [`endpoint`].
fn status_now(
    shared: &Shared,
    parts: &Parts,
    cookie: SessionRef<'_>,
    carrier: Carrier,
) -> Option<Reply> {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return None;
    }
    let room = &shared.room;
    if cookie.issued.is_some() {
        // A ticket coming back: the store writes its place (see `place`).
        return None;
    }
    let (state, number) = room.locate_local(cookie.id, cookie.number, cookie.prequeue)?;
    // The status does not read the session (an empty string does not allocate).
    let placement = Placement {
        session: String::new(),
        state,
        number,
    };
    let status = room.status(Some(&placement));
    if status.state == ViewState::Admitted {
        return None;
    }
    room.note_poll(Some(cookie.id));
    // As in `place`: the cookie learns the line number (or the pre-queue mark) the room knows; a drawn number
    // from this instance's index at that person's moment after the draw (see `room/drawn.rs`).
    let prequeue = state == SessionState::PreQueue;
    let cookies = if state == SessionState::TurnedAway
        || (placement.number, prequeue) == (cookie.number, cookie.prequeue)
        || (cookie.prequeue && cookie.number.is_none() && room.reseal_later(cookie.id, number))
    {
        Vec::new()
    } else if carrier != Carrier::Cookie {
        // A new value for a client without cookies: [`endpoint`] hands it over.
        return None;
    } else {
        vec![
            room.cookies()
                .set_session(cookie.id, placement.number, prequeue),
        ]
    };
    Some(respond::status_json(
        StatusCode::OK,
        &status,
        None,
        &Handover::default(),
        cookies,
    ))
}

/// The room's own endpoints.
pub(crate) async fn endpoint(
    shared: Arc<Shared>,
    endpoint: Endpoint,
    parts: Parts,
    cookie: Option<SessionCookie>,
    carrier: Carrier,
) -> Reply {
    let get_like = parts.method == Method::GET || parts.method == Method::HEAD;
    let state = ViewState::NotInLine.as_str();
    match endpoint {
        Endpoint::Jwks if get_like => respond::reply(
            StatusCode::OK,
            "jwks",
            "application/jwk-set+json",
            shared.room.tokens().jwks(),
            Vec::new(),
        ),
        Endpoint::Script if get_like => respond::reply(
            StatusCode::OK,
            state,
            "text/javascript; charset=utf-8",
            Bytes::from_static(crate::http::page::HOLDING_SCRIPT.as_bytes()),
            Vec::new(),
        ),
        Endpoint::Metrics
            if get_like
                && shared
                    .metrics_auth
                    .as_ref()
                    .is_some_and(|a| !a.authorised(&parts)) =>
        {
            let mut r = respond::problem(
                StatusCode::UNAUTHORIZED,
                "metrics",
                "Unauthorized",
                "The metrics endpoint needs `Authorization: Bearer <metrics token>`.",
            );
            r.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"waitroom-metrics\""),
            );
            r
        }
        Endpoint::Metrics if get_like => respond::reply(
            StatusCode::OK,
            "metrics",
            crate::room::metrics::METRICS_CONTENT_TYPE,
            shared.room.metrics_text(),
            Vec::new(),
        ),
        Endpoint::Status if get_like => {
            shared
                .room
                .note_poll(cookie.as_ref().map(|c| c.id.as_str()));
            let next = return_to(&parts).unwrap_or_else(|| "/".into());
            let placed = match place(&shared, &parts, cookie, false, false).await {
                Look::Placed(p) => p,
                Look::Refused(r) => return r,
            };
            let status = status_of(&shared.room, &placed);
            let next = (status.state == ViewState::Admitted).then_some(next.as_str());
            status_reply(StatusCode::OK, &status, next, placed, carrier)
        }
        Endpoint::Join if get_like || parts.method == Method::POST => {
            let next = return_to(&parts).unwrap_or_else(|| "/".into());
            let placed = match place(&shared, &parts, cookie, true, false).await {
                Look::Placed(p) => p,
                Look::Refused(r) => return r,
            };
            if placed.admitted && negotiate::wants_html(&parts.headers) {
                return respond::see_other(ViewState::Admitted.as_str(), &next, placed.cookies);
            }
            if !negotiate::wants_html(&parts.headers) {
                let status = status_of(&shared.room, &placed);
                let next = (status.state == ViewState::Admitted).then_some(next.as_str());
                return status_reply(StatusCode::OK, &status, next, placed, carrier);
            }
            held_reply(&shared, &parts, placed, || next, carrier)
        }
        // The layer and the endpoint service send admin calls to `admin::handle` with their body; never here.
        Endpoint::Unknown | Endpoint::Admin(_) => respond::problem(
            StatusCode::NOT_FOUND,
            state,
            "Not found",
            "The waiting room answers `status`, `jwks.json` and `join` here.",
        ),
        // `join` takes a form's POST too; the others only read.
        ep => {
            let (allow, detail) = if matches!(ep, Endpoint::Join) {
                ("GET, HEAD, POST", "Use GET or POST.")
            } else {
                ("GET, HEAD", "Use GET.")
            };
            let mut r = respond::problem(
                StatusCode::METHOD_NOT_ALLOWED,
                state,
                "Method not allowed",
                detail,
            );
            r.headers_mut()
                .insert(http::header::ALLOW, HeaderValue::from_static(allow));
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_to_is_decoded_and_checked() {
        let parts = |uri: &str| http::Request::get(uri).body(()).unwrap().into_parts().0;
        assert_eq!(
            return_to(&parts("/waitroom/join?return_to=%2Fcheckout%3Fx%3D1")),
            Some("/checkout?x=1".into())
        );
        assert_eq!(
            return_to(&parts("/waitroom/join?return_to=https%3A%2F%2Fevil")),
            None
        );
        assert_eq!(
            return_to(&parts("/waitroom/join?return_to=%2F%2Fevil")),
            None
        );
        assert_eq!(return_to(&parts("/waitroom/join?return_to=%ff")), None);
        assert_eq!(return_to(&parts("/waitroom/join?return_to=%")), None);
        // A query of up to 4,096 bytes is read; a longer one is not.
        let padded = |len: usize| {
            let q = "return_to=%2Fcheckout&pad=";
            format!("/waitroom/join?{q}{}", "x".repeat(len - q.len()))
        };
        assert_eq!(return_to(&parts(&padded(4096))), Some("/checkout".into()));
        assert_eq!(return_to(&parts(&padded(4097))), None);
        assert_eq!(percent::encode("/a b?c=1"), "%2Fa%20b%3Fc%3D1");
        assert_eq!(asked_for(&parts("/checkout?x=1")), "/checkout?x=1");
    }
}
