//! The responses the room writes itself. Every one carries `Cache-Control: no-store` and `Waitroom-State`.

use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, RETRY_AFTER, SET_COOKIE,
};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};

use crate::http::gate::Handover;
use crate::room::estimate::EtaBasis;
use crate::room::{Status, Stopped, ViewState};

/// The header naming the room's state on every response the room makes.
pub const STATE_HEADER: HeaderName = HeaderName::from_static("waitroom-state");

/// A response the room wrote, before its body is wrapped for the service's body type.
pub(crate) type Reply = Response<Bytes>;

pub(crate) fn reply(
    status: StatusCode,
    state: &'static str,
    content_type: &'static str,
    body: impl Into<Bytes>,
    cookies: Vec<HeaderValue>,
) -> Reply {
    let mut res = Response::new(body.into());
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    stamp(h, state);
    for c in cookies {
        h.append(SET_COOKIE, c);
    }
    res
}

/// Adds the headers every room response carries (`state` is one of the room's fixed names: no copy, no check
/// beyond `from_static`'s).
pub(crate) fn stamp(h: &mut HeaderMap, state: &'static str) {
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(STATE_HEADER, HeaderValue::from_static(state));
}

/// The JSON status body: [`Status`]'s fields as its `Serialize` writes them, then `next`, then `session` and
/// `token` when the answer hands them to a client without cookies (absent otherwise: a browser's body is as before).
///
/// Written by hand: this is the waiting crowd's poll, and serde's map writer (which the extra `next` field would
/// need) escapes every key on every poll. Only the free-text fields go through `serde_json`'s string escaping; a
/// test checks the bytes against serde's own output.
fn write_status(out: &mut Vec<u8>, s: &Status, next: Option<&str>, handover: &Handover) {
    fn text(out: &mut Vec<u8>, v: Option<&str>) {
        match v {
            // Printable ASCII without `"` or `\` is written as it is (what serde would write).
            Some(v)
                if v.bytes()
                    .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\') =>
            {
                quoted(out, v);
            }
            // Writing a string into a `Vec` cannot fail.
            Some(v) => serde_json::to_writer(&mut *out, v).unwrap_or(()),
            None => out.extend_from_slice(b"null"),
        }
    }
    // The room's own fixed names (`ViewState`, `EtaBasis`, `Stopped`): plain lowercase ASCII, written as they are
    // (`every_fixed_name_is_written_as_serde_writes_it` checks them all).
    fn name(out: &mut Vec<u8>, v: Option<&'static str>) {
        match v {
            Some(v) => quoted(out, v),
            None => out.extend_from_slice(b"null"),
        }
    }
    fn quoted(out: &mut Vec<u8>, v: &str) {
        out.push(b'"');
        out.extend_from_slice(v.as_bytes());
        out.push(b'"');
    }
    fn num(out: &mut Vec<u8>, v: Option<u64>) {
        match v {
            Some(n) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
            None => out.extend_from_slice(b"null"),
        }
    }
    fn flag(out: &mut Vec<u8>, v: bool) {
        out.extend_from_slice(if v { b"true" } else { b"false" });
    }
    out.extend_from_slice(b"{\"event\":");
    text(out, Some(&s.event));
    out.extend_from_slice(b",\"name\":");
    text(out, Some(&s.name));
    out.extend_from_slice(b",\"state\":");
    name(out, Some(s.state.as_str()));
    out.extend_from_slice(b",\"position\":");
    num(out, s.position);
    out.extend_from_slice(b",\"number\":");
    num(out, s.number);
    out.extend_from_slice(b",\"eta_seconds\":");
    num(out, s.eta_seconds);
    out.extend_from_slice(b",\"eta_low_seconds\":");
    num(out, s.eta_low_seconds);
    out.extend_from_slice(b",\"eta_high_seconds\":");
    num(out, s.eta_high_seconds);
    out.extend_from_slice(b",\"eta_basis\":");
    name(out, s.eta_basis.map(EtaBasis::as_str));
    out.extend_from_slice(b",\"reach_position\":");
    num(out, s.reach_position);
    out.extend_from_slice(b",\"beyond_reach\":");
    flag(out, s.beyond_reach);
    out.extend_from_slice(b",\"in_line\":");
    num(out, Some(s.in_line));
    out.extend_from_slice(b",\"refresh_seconds\":");
    num(out, Some(s.refresh_seconds));
    out.extend_from_slice(b",\"opens_at\":");
    text(out, s.opens_at.as_deref());
    out.extend_from_slice(b",\"stopped\":");
    name(out, s.stopped.map(Stopped::as_str));
    out.extend_from_slice(b",\"store_ok\":");
    flag(out, s.store_ok);
    out.extend_from_slice(b",\"updated_at\":");
    text(out, Some(&s.updated_at));
    out.extend_from_slice(b",\"next\":");
    text(out, next);
    if let Some(session) = &handover.session {
        out.extend_from_slice(b",\"session\":");
        text(out, Some(session));
    }
    if let Some(token) = &handover.token {
        out.extend_from_slice(b",\"token\":");
        text(out, Some(token));
    }
    out.push(b'}');
}

/// The JSON status, with where to go next.
pub(crate) fn status_json(
    http_status: StatusCode,
    status: &Status,
    next: Option<&str>,
    handover: &Handover,
    cookies: Vec<HeaderValue>,
) -> Reply {
    // Sized for the whole status (about 350 bytes) so the body is written once, not regrown.
    let mut body = Vec::with_capacity(512);
    write_status(&mut body, status, next, handover);
    let mut res = reply(
        http_status,
        status.state.as_str(),
        "application/json",
        body,
        cookies,
    );
    if matches!(
        http_status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        res.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(status.refresh_seconds));
    }
    res
}

/// The HTTP status of a JSON answer on a protected path: the asked resource is not served.
pub(crate) fn held_status(status: &Status) -> StatusCode {
    match status.state {
        ViewState::SoldOut | ViewState::Closed => StatusCode::GONE,
        ViewState::NotInLine if !status.store_ok => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::TOO_MANY_REQUESTS,
    }
}

/// A holding page, with its template's `Content-Security-Policy` when it has one.
pub(crate) fn html(
    status: &Status,
    page: String,
    csp: Option<&HeaderValue>,
    cookies: Vec<HeaderValue>,
) -> Reply {
    let mut res = reply(
        StatusCode::OK,
        status.state.as_str(),
        "text/html; charset=utf-8",
        page,
        cookies,
    );
    if let Some(csp) = csp {
        res.headers_mut()
            .insert(CONTENT_SECURITY_POLICY, csp.clone());
    }
    res
}

/// `303 See Other` to a same-site path.
pub(crate) fn see_other(state: &'static str, to: &str, cookies: Vec<HeaderValue>) -> Reply {
    let mut res = reply(
        StatusCode::SEE_OTHER,
        state,
        "text/plain; charset=utf-8",
        Bytes::new(),
        cookies,
    );
    res.headers_mut().insert(
        LOCATION,
        HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static("/")),
    );
    res
}

/// A JSON problem body (RFC 9457).
pub(crate) fn problem(status: StatusCode, state: &'static str, title: &str, detail: &str) -> Reply {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    reply(
        status,
        state,
        "application/problem+json",
        body.to_string(),
        Vec::new(),
    )
}

/// A problem document with a stable `code` (one per reason, like the verifier's `Refusal` codes) for clients to
/// match on.
pub(crate) fn problem_coded(
    status: StatusCode,
    state: &'static str,
    code: &'static str,
    title: &str,
    detail: &str,
) -> Reply {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": title,
        "status": status.as_u16(),
        "code": code,
        "detail": detail,
    });
    reply(
        status,
        state,
        "application/problem+json",
        body.to_string(),
        Vec::new(),
    )
}

/// `503` with `Retry-After` (code `not_open_yet`) for a join before the pre-queue opens at `at_ms`: nobody takes a
/// place before then. A browser's navigation gets a short page saying when (no script; it reloads itself then).
pub(crate) fn not_open_yet(at_ms: u64, now_ms: u64, html: bool) -> Reply {
    let secs = at_ms.saturating_sub(now_ms).div_ceil(1000).max(1);
    let when = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms.min(253_402_300_799_000)),
    );
    let mut r = if html {
        let page = format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta http-equiv=\"refresh\" content=\"{}\"><title>The line is not open yet</title></head>\
             <body><h1>The line is not open yet</h1><p>It opens at <time datetime=\"{when}\">{when}</time>. \
             This page reloads itself then.</p></body></html>",
            secs.min(3600)
        );
        let mut r = reply(
            StatusCode::SERVICE_UNAVAILABLE,
            ViewState::NotInLine.as_str(),
            "text/html; charset=utf-8",
            page,
            Vec::new(),
        );
        r.headers_mut().insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
        );
        r
    } else {
        problem_coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ViewState::NotInLine.as_str(),
            "not_open_yet",
            "The line is not open yet",
            &format!("The line opens at {when}; come back then."),
        )
    };
    r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
    r
}

/// 431 for a request whose session cookie the room could not read (more `waitroom_session` values than it tries,
/// none of the tried ones valid). Never a new session: its `Set-Cookie` would overwrite the person's real one.
pub(crate) fn unreadable_session() -> Reply {
    problem_coded(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        crate::room::ViewState::NotInLine.as_str(),
        "session_cookie_unreadable",
        "Too many session cookies",
        "The request carries more session cookies than the waiting room reads, and none of those it read is \
         valid. Clear this site's cookies and reload.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_room_response_is_stamped() {
        let r = problem(StatusCode::NOT_FOUND, "not_in_line", "Not found", "x");
        assert_eq!(r.headers()[CACHE_CONTROL], "no-store");
        assert_eq!(r.headers()[STATE_HEADER], "not_in_line");
    }

    /// The room's fixed names go into the JSON without the escaping check: each is what serde writes for it.
    #[test]
    fn every_fixed_name_is_written_as_serde_writes_it() {
        fn same<T: serde::Serialize>(v: T, name: &'static str) {
            assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{name}\""));
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
        }
        use ViewState::*;
        // Every variant: a new one fails these matches until it is listed here too.
        let listed = |s: ViewState| match s {
            Prequeue | Waiting | Admitted | SoldOut | Closed | Paused | NotInLine | Returning
            | Missed => s,
        };
        for s in [
            Prequeue, Waiting, Admitted, SoldOut, Closed, Paused, NotInLine, Returning, Missed,
        ] {
            same(listed(s), s.as_str());
        }
        let listed = |b: EtaBasis| match b {
            EtaBasis::Measured | EtaBasis::Configured => b,
        };
        for b in [EtaBasis::Measured, EtaBasis::Configured] {
            same(listed(b), b.as_str());
        }
        let listed = |s: Stopped| match s {
            Stopped::Paused | Stopped::SeatsHeld | Stopped::NotOpen => s,
        };
        for s in [Stopped::Paused, Stopped::SeatsHeld, Stopped::NotOpen] {
            same(listed(s), s.as_str());
        }
    }

    /// The hand-written status body is byte for byte what serde writes for the same status and `next`.
    #[test]
    fn the_status_body_is_serde_s_json() {
        #[derive(serde::Serialize)]
        struct Body<'a> {
            #[serde(flatten)]
            status: &'a Status,
            next: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            session: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            token: Option<&'a str>,
        }
        let full = Status {
            event: "tour-2026".into(),
            name: "The \"Big\" <Night> \\ caf\u{e9} \u{1}\n\u{1F3B5}".into(),
            state: ViewState::Waiting,
            position: Some(41_200),
            number: Some(u64::MAX),
            eta_seconds: Some(1_236),
            eta_low_seconds: Some(0),
            eta_high_seconds: Some(2_000),
            eta_basis: Some(EtaBasis::Measured),
            reach_position: Some(17_861),
            beyond_reach: true,
            in_line: 580_000,
            refresh_seconds: 20,
            opens_at: Some("2026-11-30T10:00:00Z".into()),
            stopped: Some(Stopped::SeatsHeld),
            store_ok: false,
            updated_at: "2026-11-30T09:59:58Z".into(),
        };
        let empty = Status {
            state: ViewState::NotInLine,
            position: None,
            number: None,
            eta_seconds: None,
            eta_low_seconds: None,
            eta_high_seconds: None,
            eta_basis: None,
            reach_position: None,
            beyond_reach: false,
            in_line: 0,
            opens_at: None,
            stopped: None,
            store_ok: true,
            ..full.clone()
        };
        let states = [
            ViewState::Prequeue,
            ViewState::Admitted,
            ViewState::SoldOut,
            ViewState::Closed,
            ViewState::Paused,
        ];
        let mut cases = vec![
            (full.clone(), None),
            (empty, Some("/seats?x=\"1\"&y=\u{e9}")),
        ];
        for state in states {
            let eta_basis = Some(EtaBasis::Configured);
            cases.push((
                Status {
                    state,
                    eta_basis,
                    ..full.clone()
                },
                Some("/"),
            ));
        }
        let handovers = [
            (None, None),
            (Some("AAAAAAAAAAAAAAAAAAAAAA.3.tag"), None),
            (Some("AAAAAAAAAAAAAAAAAAAAAA.3.tag"), Some("a.b.c")),
            (None, Some("a.b.c")),
        ];
        for (status, next) in &cases {
            for (session, token) in handovers {
                let handover = Handover {
                    session: session.map(str::to_owned),
                    token: token.map(str::to_owned),
                };
                let mut ours = Vec::new();
                write_status(&mut ours, status, *next, &handover);
                let serde = serde_json::to_vec(&Body {
                    status,
                    next: *next,
                    session,
                    token,
                })
                .unwrap();
                assert_eq!(
                    String::from_utf8(ours).unwrap(),
                    String::from_utf8(serde).unwrap()
                );
            }
        }
    }
}
