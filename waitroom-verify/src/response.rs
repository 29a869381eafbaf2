//! The responses a refused request gets. The body type is the inner service's response body `B`, built with
//! `B: From<Bytes>` (so `axum::body::Body`, `http_body_util::Full<Bytes>` and `String`-like bodies all work).
//!
//! Who is a browser is [`negotiate`](crate::negotiate)'s rule, the room's too.
//!
//! - A browser (`Accept` naming `text/html` or `application/xhtml+xml`) gets `303 See Other` to the room's join
//!   URL with `return_to=<original path and query, percent-encoded>` and `Cache-Control: no-store`, empty body.
//! - Anyone else (`Accept: */*` as curl sends it, `application/json`, no `Accept`) gets `401 Unauthorized`, `Content-Type: application/problem+json`, `Cache-Control: no-store`,
//!   `WWW-Authenticate: Bearer error="invalid_token"` (just `Bearer` when no token was sent, as RFC 6750 3.1
//!   asks) and a body `{"type":"urn:waitroom:refusal:<code>","title":..,"status":401,"reason":"<code>","join_url":..}`.

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Response, StatusCode, Uri};

use crate::error::Refusal;

/// `return_to` targets longer than this fall back to the bare path (or `/`).
pub const MAX_RETURN_TO_BYTES: usize = 2048;

pub use crate::negotiate::wants_html;

/// The join URL with `return_to` for this request.
#[must_use]
pub fn join_location(join_url: &str, uri: &Uri) -> String {
    let target = match uri.path_and_query().map(|pq| pq.as_str()) {
        Some(pq) if pq.len() <= MAX_RETURN_TO_BYTES => pq,
        _ if uri.path().len() <= MAX_RETURN_TO_BYTES => uri.path(),
        _ => "/",
    };
    let mut location = String::with_capacity(join_url.len() + 11 + target.len() * 3);
    location.push_str(join_url);
    location.push(if join_url.contains('?') { '&' } else { '?' });
    location.push_str("return_to=");
    crate::percent::encode_into(target, &mut location);
    location
}

/// The response for `refusal` of a request with these headers and URI.
pub fn refusal_response<B: From<Bytes>>(
    refusal: Refusal,
    headers: &HeaderMap,
    uri: &Uri,
    join_url: &str,
) -> Response<B> {
    let no_store = HeaderValue::from_static("no-store");
    if wants_html(headers) {
        let location = join_location(join_url, uri);
        let mut res = Response::new(B::from(Bytes::new()));
        *res.status_mut() = StatusCode::SEE_OTHER;
        // The join URL was validated and the rest is percent-encoded, so this cannot fail; stay safe anyway.
        let location =
            HeaderValue::try_from(location).unwrap_or_else(|_| HeaderValue::from_static("/"));
        res.headers_mut().insert(LOCATION, location);
        res.headers_mut().insert(CACHE_CONTROL, no_store);
        return res;
    }
    let body = serde_json::json!({
        "type": format!("urn:waitroom:refusal:{}", refusal.code()),
        "title": refusal.title(),
        "status": 401,
        "reason": refusal.code(),
        "join_url": join_url,
    });
    let mut res = Response::new(B::from(Bytes::from(body.to_string())));
    *res.status_mut() = StatusCode::UNAUTHORIZED;
    let h = res.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    h.insert(CACHE_CONTROL, no_store);
    h.insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static(if refusal == Refusal::Missing {
            "Bearer"
        } else {
            "Bearer error=\"invalid_token\""
        }),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    use http::header::ACCEPT;

    fn headers(accept: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_static(accept));
        h
    }

    #[test]
    fn location_encodes_return_to() {
        let uri: Uri = "/checkout/pay?seat=a%20b&x=%2F".parse().unwrap();
        let loc = join_location("/waitroom/join", &uri);
        assert!(
            loc.starts_with("/waitroom/join?return_to=%2Fcheckout%2Fpay%3Fseat%3D"),
            "{loc}"
        );
        assert!(
            !loc[loc.find('=').unwrap() + 1..].contains(['/', '?', '&', '=']),
            "{loc}"
        );
        assert_eq!(
            join_location("https://q.example/join?e=1", &"/".parse().unwrap()),
            "https://q.example/join?e=1&return_to=%2F"
        );
        let long: Uri = format!("/p?{}", "a".repeat(MAX_RETURN_TO_BYTES))
            .parse()
            .unwrap();
        assert_eq!(join_location("/j", &long), "/j?return_to=%2Fp");
    }

    #[test]
    fn browser_and_api_responses() {
        let uri: Uri = "/buy?n=2".parse().unwrap();
        let res: Response<String> =
            refusal_response_string(Refusal::Expired, &headers("text/html"), &uri);
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        assert_eq!(res.headers()[LOCATION], "/join?return_to=%2Fbuy%3Fn%3D2");
        assert_eq!(res.headers()[CACHE_CONTROL], "no-store");
        assert!(res.body().is_empty());

        let res =
            refusal_response_string(Refusal::SessionMismatch, &headers("application/json"), &uri);
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(res.headers()[CONTENT_TYPE], "application/problem+json");
        assert_eq!(
            res.headers()[WWW_AUTHENTICATE],
            "Bearer error=\"invalid_token\""
        );
        let body: serde_json::Value = serde_json::from_str(res.body()).unwrap();
        assert_eq!(body["reason"], "session_mismatch");
        assert_eq!(body["status"], 401);
        assert_eq!(body["type"], "urn:waitroom:refusal:session_mismatch");
        let res = refusal_response_string(Refusal::Missing, &HeaderMap::new(), &uri);
        assert_eq!(res.headers()[WWW_AUTHENTICATE], "Bearer");
    }

    fn refusal_response_string(r: Refusal, h: &HeaderMap, uri: &Uri) -> Response<String> {
        refusal_response::<Bytes>(r, h, uri, "/join")
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
    }
}
