//! Which kind of answer a client gets: one rule for the room (`waitroom-layer`) and for this crate's refusals.
//!
//! A request gets **HTML** when its `Accept` header names `text/html` or `application/xhtml+xml` (in any case,
//! with any parameters, in any of its values): what a browser sends when it navigates to a page. The room then
//! shows its holding page, and a refused request is redirected (`303`) to the room's join URL.
//!
//! Every other request gets **JSON**: `Accept: application/json`, `*/*` alone (curl's default, and `fetch()`'s),
//! any other type, or no `Accept` at all. The room then answers its JSON status (`429` with `Retry-After` while in
//! line on a protected path), and a refused request gets `401` with an `application/problem+json` body.
//!
//! Why `*/*` gets JSON: a client that names no HTML type is a script, an API client or a page's `fetch()`. A holding
//! page is no use to it, and a redirect to a join page is worse: `fetch()` follows it and reads a `200` page where
//! it expected a refusal. Browsers always name `text/html` when they navigate, so nobody who reads pages loses the
//! page. Quality values are not weighed: naming `text/html` at all asks for HTML.
//!
//! ```
//! use http::{HeaderMap, HeaderValue, header::ACCEPT};
//! use waitroom_verify::negotiate::wants_html;
//!
//! let mut h = HeaderMap::new();
//! assert!(!wants_html(&h)); // no Accept: JSON
//! h.insert(ACCEPT, HeaderValue::from_static("*/*"));
//! assert!(!wants_html(&h)); // curl: JSON
//! h.insert(ACCEPT, HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"));
//! assert!(wants_html(&h)); // a browser: HTML
//! ```

use http::HeaderMap;
use http::header::ACCEPT;

/// Whether the client gets HTML rather than JSON (see the [module](self) for the rule): its `Accept` names
/// `text/html` or `application/xhtml+xml`.
#[must_use]
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        // Both HTML types contain `html`: a value without it (`application/json`, `*/*`: every poll of a page's
        // script) names neither, and is not split and compared range by range.
        .filter(|v| {
            v.as_bytes()
                .windows(4)
                .any(|w| w.eq_ignore_ascii_case(b"html"))
        })
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|range| range.split(';').next().unwrap_or("").trim())
        .any(|t| {
            t.eq_ignore_ascii_case("text/html") || t.eq_ignore_ascii_case("application/xhtml+xml")
        })
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn accept(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(ACCEPT, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn a_browser_navigating_gets_html() {
        assert!(wants_html(&accept(&[
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        ])));
        assert!(wants_html(&accept(&["TEXT/HTML; charset=utf-8"])));
        assert!(wants_html(&accept(&["application/xhtml+xml"])));
        assert!(wants_html(&accept(&[
            "text/html,application/xhtml+xml,application/json;q=0.9"
        ])));
        assert!(wants_html(&accept(&["application/json", "text/html"])));
        assert!(wants_html(&accept(&["text/plain", "TEXT/HTML"])));
    }

    #[test]
    fn everyone_else_gets_json_curl_included() {
        assert!(!wants_html(&HeaderMap::new()));
        assert!(!wants_html(&accept(&["*/*"])));
        assert!(!wants_html(&accept(&["application/json"])));
        assert!(!wants_html(&accept(&["application/problem+json"])));
        assert!(!wants_html(&accept(&["text/plain"])));
        assert!(!wants_html(&accept(&["text/htmlx, text/*"])));
        assert!(!wants_html(&accept(&[
            "application/json",
            "text/plain;q=0.5"
        ])));
        assert!(!wants_html(&accept(&["application/xml, text/xhtml"])));
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_bytes(b"text/html\xff").unwrap());
        assert!(!wants_html(&h), "an unreadable Accept names nothing");
    }
}
