//! Cross-site request refusal (CSRF), shared by the room layer (on by default) and the verify layer (opt-in).
//!
//! `SameSite=Lax` cookies are not enough: a *site* is the registrable domain, so a page on a sibling subdomain
//! (`blog.example.com` next to `shop.example.com`) is same-site and its form posts carry the person's cookies.
//! One form post to `/leave` could end someone's session at checkout. So unsafe-method requests (anything but
//! `GET`, `HEAD`, `OPTIONS`, `TRACE`) must come from the page's own origin:
//!
//! - with `Sec-Fetch-Site` (every current browser sends it): `same-origin` passes; `same-site`, `cross-site` and
//!   `none` pass only when the request's `Origin` is one of the allowed origins;
//! - without it: the `Origin` (or, lacking that, the `Referer`'s origin) must be the request's own (its `Host`)
//!   or an allowed origin; `Origin: null` is refused;
//! - with none of the three headers the request did not come from a browser page (curl, a server, a test
//!   client) and passes: cross-site forgery needs a browser, and browsers send `Origin` on every unsafe request.

use http::header::{HOST, ORIGIN, REFERER};
use http::{HeaderMap, Method, Uri};

/// The stable code of the refusal, for clients to match on (as [`Refusal::code`](crate::Refusal::code)).
pub const CROSS_ORIGIN_CODE: &str = "cross_origin";

/// Which origins may send unsafe-method requests. The request's own origin always may.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginCheck {
    /// Extra allowed origins, lowercased `scheme://host[:port]`.
    allowed: Vec<String>,
}

impl OriginCheck {
    /// Only the request's own origin.
    #[must_use]
    pub fn same_origin() -> Self {
        Self::default()
    }

    /// Also allows `origin` (`https://shop.example.com`; no path, no trailing slash), for a page served from a
    /// sibling host that posts to this one.
    #[must_use]
    pub fn allow_origin(mut self, origin: impl AsRef<str>) -> Self {
        self.allowed
            .push(origin.as_ref().trim_end_matches('/').to_ascii_lowercase());
        self
    }

    fn allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let origin = origin.trim_end_matches('/');
        if self.allowed.iter().any(|a| a.eq_ignore_ascii_case(origin)) {
            return true;
        }
        let Some(host) = host else { return false };
        origin.split_once("://").is_some_and(|(_, authority)| {
            !authority.is_empty() && authority.eq_ignore_ascii_case(host)
        })
    }

    /// Whether a request with this method, URI and headers may pass (see the module docs).
    #[must_use]
    pub fn allows(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> bool {
        if matches!(
            *method,
            Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
        ) {
            return true;
        }
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
        };
        let host = text(HOST).or_else(|| uri.authority().map(http::uri::Authority::as_str));
        let origin = text(ORIGIN).map(str::to_owned).or_else(|| {
            let referer: Uri = text(REFERER)?.parse().ok()?;
            Some(format!(
                "{}://{}",
                referer.scheme_str()?,
                referer.authority()?.as_str()
            ))
        });
        match headers
            .get("sec-fetch-site")
            .map(http::HeaderValue::as_bytes)
        {
            Some(b"same-origin") => true,
            Some(_) => origin.is_some_and(|o| {
                o != "null" && self.allowed.iter().any(|a| a.eq_ignore_ascii_case(&o))
            }),
            None => match origin {
                None => headers.get(ORIGIN).is_none() && headers.get(REFERER).is_none(),
                Some(o) => o != "null" && self.allowed(&o, host),
            },
        }
    }
}

/// The 403 problem document for a refused cross-origin request (`code`: [`CROSS_ORIGIN_CODE`]), not cacheable.
#[must_use]
pub fn cross_origin_response<B: From<bytes::Bytes>>() -> http::Response<B> {
    let body = serde_json::json!({
        "type": format!("urn:waitroom:refusal:{CROSS_ORIGIN_CODE}"),
        "title": "Cross-origin request refused",
        "status": 403,
        "code": CROSS_ORIGIN_CODE,
    });
    let mut res = http::Response::new(B::from(bytes::Bytes::from(body.to_string())));
    *res.status_mut() = http::StatusCode::FORBIDDEN;
    let h = res.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/problem+json"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(check: &OriginCheck, method: Method, headers: &[(&str, &str)]) -> bool {
        let mut h = HeaderMap::new();
        h.insert(HOST, "shop.example.com".parse().unwrap());
        for (k, v) in headers {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        check.allows(&method, &Uri::from_static("/holds"), &h)
    }

    #[test]
    fn unsafe_requests_from_another_origin_are_refused_and_the_own_origin_passes() {
        let c = OriginCheck::same_origin();
        assert!(allows(&c, Method::GET, &[("sec-fetch-site", "cross-site")]));
        assert!(allows(
            &c,
            Method::POST,
            &[("sec-fetch-site", "same-origin")]
        ));
        assert!(!allows(
            &c,
            Method::POST,
            &[
                ("sec-fetch-site", "same-site"),
                ("origin", "https://blog.example.com")
            ]
        ));
        assert!(!allows(
            &c,
            Method::POST,
            &[("sec-fetch-site", "cross-site")]
        ));
        assert!(allows(
            &c,
            Method::POST,
            &[("origin", "https://shop.example.com")]
        ));
        assert!(!allows(
            &c,
            Method::POST,
            &[("origin", "https://evil.test")]
        ));
        assert!(!allows(&c, Method::POST, &[("origin", "null")]));
        assert!(allows(
            &c,
            Method::POST,
            &[("referer", "https://shop.example.com/seats")]
        ));
        assert!(!allows(
            &c,
            Method::DELETE,
            &[("referer", "https://evil.test/x")]
        ));
        assert!(!allows(&c, Method::POST, &[("referer", "not a url")]));
        assert!(allows(&c, Method::POST, &[]), "no browser, no forgery");
        let c = OriginCheck::same_origin().allow_origin("https://blog.example.com/");
        assert!(allows(
            &c,
            Method::POST,
            &[
                ("sec-fetch-site", "same-site"),
                ("origin", "https://blog.example.com")
            ]
        ));
        assert!(allows(
            &c,
            Method::POST,
            &[("origin", "https://BLOG.example.com")]
        ));
    }
}
