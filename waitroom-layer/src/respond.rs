//! The responses the room writes itself. Every one carries `Cache-Control: no-store` and `Waitroom-State`.

use bytes::Bytes;
use http::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, RETRY_AFTER, SET_COOKIE,
};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use serde::Serialize;

use crate::room::{Status, ViewState};

/// The header naming the room's state on every response the room makes.
pub const STATE_HEADER: HeaderName = HeaderName::from_static("waitroom-state");

/// A response the room wrote, before its body is wrapped for the service's body type.
pub(crate) type Reply = Response<Bytes>;

/// Whether the client asked for JSON rather than HTML. Anything unreadable counts as HTML (a browser).
pub(crate) fn wants_json(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(ACCEPT) else {
        return false;
    };
    if accept.len() > 1024 {
        return false;
    }
    let Ok(accept) = accept.to_str() else {
        return false;
    };
    let accept = accept.to_ascii_lowercase();
    (accept.contains("application/json") || accept.contains("+json"))
        && !accept.contains("text/html")
}

pub(crate) fn finish(
    status: StatusCode,
    state: &str,
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

/// Adds the headers every room response carries.
pub(crate) fn stamp(h: &mut HeaderMap, state: &str) {
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        STATE_HEADER,
        HeaderValue::from_str(state).unwrap_or(HeaderValue::from_static("unknown")),
    );
}

#[derive(Serialize)]
struct StatusBody<'a> {
    #[serde(flatten)]
    status: &'a Status,
    next: Option<&'a str>,
}

/// The JSON status, with where to go next.
pub(crate) fn status_json(
    http_status: StatusCode,
    status: &Status,
    next: Option<&str>,
    cookies: Vec<HeaderValue>,
) -> Reply {
    // Sized for the whole status (about 350 bytes) so the body is written once, not regrown.
    let mut body = Vec::with_capacity(512);
    if serde_json::to_writer(&mut body, &StatusBody { status, next }).is_err() {
        body = b"{}".to_vec();
    }
    let mut res = finish(
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
    let mut res = finish(
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
pub(crate) fn see_other(state: &str, to: &str, cookies: Vec<HeaderValue>) -> Reply {
    let mut res = finish(
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
pub(crate) fn problem(status: StatusCode, state: &str, title: &str, detail: &str) -> Reply {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    finish(
        status,
        state,
        "application/problem+json",
        body.to_string(),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_chosen_only_when_asked_for() {
        let mut h = HeaderMap::new();
        assert!(!wants_json(&h));
        h.insert(ACCEPT, HeaderValue::from_static("application/json"));
        assert!(wants_json(&h));
        h.insert(
            ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml,application/json;q=0.9"),
        );
        assert!(!wants_json(&h));
        h.insert(ACCEPT, HeaderValue::from_static("application/problem+json"));
        assert!(wants_json(&h));
        h.insert(
            ACCEPT,
            HeaderValue::from_bytes(b"application/json\xff").unwrap(),
        );
        assert!(!wants_json(&h));
    }

    #[test]
    fn every_room_response_is_stamped() {
        let r = problem(StatusCode::NOT_FOUND, "not_in_line", "Not found", "x");
        assert_eq!(r.headers()[CACHE_CONTROL], "no-store");
        assert_eq!(r.headers()[STATE_HEADER], "not_in_line");
    }
}
