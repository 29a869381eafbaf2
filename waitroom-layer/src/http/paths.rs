//! Which paths the room guards, which it answers itself, and which it leaves alone.
//!
//! - The room's own endpoints live under a base path (default `/waitroom`): `{base}/status`, `{base}/jwks.json`,
//!   `{base}/join`, `{base}/holding.js`.
//! - Protected paths are given by prefix (`/checkout` guards `/checkout` and `/checkout/...`, not `/checkouts`) or
//!   by pattern (`/events/*/seats/**`: `*` is one segment, `**` any number of segments, at the end only). With no
//!   rule at all, every path is protected (the `.route_layer()` case, where the router already chose).
//! - Before matching, a path with percent-escapes, `//` or dot segments is normalised (escapes of ASCII decoded,
//!   empty and `.` segments dropped, `..` applied), so `/%63heckout` and `/public/../checkout` are guarded like
//!   `/checkout`. The room errs on the side of guarding.

use std::borrow::Cow;

use crate::error::BuildError;
use crate::http::admin::AdminOp;

/// One of the room's own endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `GET {base}/status`
    Status,
    /// `GET {base}/jwks.json`
    Jwks,
    /// `{base}/join`
    Join,
    /// `GET {base}/holding.js`: the default holding page's script.
    Script,
    /// The metrics path, when metrics are on.
    Metrics,
    /// `{base}/admin/...` (answered only when the admin API is on).
    Admin(AdminOp),
    /// Anything else under the base path.
    Unknown,
}

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// The room answers it.
    Endpoint(Endpoint),
    /// Needs an admission.
    Protected,
    /// Passes untouched.
    Unprotected,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Lit(String),
    One,
    Rest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    Prefix(String),
    Pattern(Vec<Seg>),
}

/// The path rules of one layer.
#[derive(Debug, Clone)]
pub(crate) struct Paths {
    base: String,
    rules: Vec<Rule>,
    /// Where metrics are served, when they are on.
    metrics: Option<String>,
}

impl Paths {
    pub(crate) fn new(base: &str) -> Result<Self, BuildError> {
        let base = base.trim_end_matches('/');
        if !base.starts_with('/')
            || base.len() < 2
            || base.len() > 128
            || base.contains(['?', '#', '%', '*', ' '])
            || base.contains("//")
        {
            return Err(BuildError::invalid(
                "base_path",
                format!(
                    "`{base}` must be an absolute path such as `/waitroom`, without `?`, `#`, `%`, `*`"
                ),
            ));
        }
        Ok(Self {
            base: base.to_owned(),
            rules: Vec::new(),
            metrics: None,
        })
    }

    /// Serves metrics at `path` (an absolute path; anywhere, the base path included).
    pub(crate) fn set_metrics(&mut self, path: &str) -> Result<(), BuildError> {
        let p = path.trim_end_matches('/');
        if !p.starts_with('/')
            || p.len() < 2
            || p.len() > 128
            || p.contains(['?', '#', '%', '*', ' '])
            || p.contains("//")
            || p.contains("/.")
        {
            return Err(BuildError::invalid(
                "metrics_path",
                format!(
                    "`{path}` must be an absolute path such as `/waitroom/metrics`, without `?`, `#`, `%`, `*`"
                ),
            ));
        }
        self.metrics = Some(p.to_owned());
        Ok(())
    }

    /// The endpoint of a path the router already stripped of the base (`/status`, `/metrics`), or gave whole.
    pub(crate) fn endpoint_of(&self, raw_path: &str) -> Endpoint {
        if let Route::Endpoint(ep) = self.route(raw_path) {
            return ep;
        }
        let path = normalise(raw_path);
        if let Some(m) = &self.metrics
            && strip_segment_prefix(m, &self.base) == Some(&*path)
        {
            return Endpoint::Metrics;
        }
        endpoint(&path)
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn add_prefix(&mut self, prefix: &str) -> Result<(), BuildError> {
        let p = prefix.trim_end_matches('/');
        if !prefix.starts_with('/') || prefix.contains(['?', '#', '%', '*']) {
            return Err(BuildError::invalid(
                "protect_prefix",
                format!(
                    "`{prefix}` must be an absolute path such as `/checkout`, without `?`, `#`, `%`, `*`"
                ),
            ));
        }
        self.rules.push(Rule::Prefix(p.to_owned()));
        Ok(())
    }

    pub(crate) fn add_pattern(&mut self, pattern: &str) -> Result<(), BuildError> {
        let bad = |why: &str| {
            Err(BuildError::invalid(
                "protect_pattern",
                format!("`{pattern}`: {why}"),
            ))
        };
        if !pattern.starts_with('/') || pattern.contains(['?', '#', '%']) {
            return bad("must be an absolute path without `?`, `#`, `%`");
        }
        let parts: Vec<&str> = pattern[1..].split('/').filter(|s| !s.is_empty()).collect();
        let mut segs = Vec::with_capacity(parts.len());
        for (i, s) in parts.iter().enumerate() {
            segs.push(match *s {
                "*" => Seg::One,
                "**" if i + 1 == parts.len() => Seg::Rest,
                "**" => return bad("`**` may only end a pattern"),
                s if s.contains('*') => return bad("`*` must be a whole segment"),
                s => Seg::Lit(s.to_owned()),
            });
        }
        self.rules.push(Rule::Pattern(segs));
        Ok(())
    }

    /// Where `raw_path` goes.
    pub(crate) fn route(&self, raw_path: &str) -> Route {
        let path = normalise(raw_path);
        if let Some(m) = &self.metrics
            && path.trim_end_matches('/') == m
        {
            return Route::Endpoint(Endpoint::Metrics);
        }
        if let Some(rest) = strip_segment_prefix(&path, &self.base) {
            return Route::Endpoint(endpoint(rest));
        }
        if self.protects(&path) {
            Route::Protected
        } else {
            Route::Unprotected
        }
    }

    fn protects(&self, path: &str) -> bool {
        if self.rules.is_empty() {
            return true;
        }
        self.rules.iter().any(|r| match r {
            Rule::Prefix(p) => p.is_empty() || strip_segment_prefix(path, p).is_some(),
            Rule::Pattern(segs) => pattern_matches(segs, path),
        })
    }
}

/// Which endpoint a path relative to the base names (`rest` is `""` or starts with `/`). Also used by the
/// stand-alone endpoint service, which may see the path with the base already stripped.
pub(crate) fn endpoint(rest: &str) -> Endpoint {
    match rest.trim_end_matches('/') {
        "/status" => Endpoint::Status,
        "/jwks.json" => Endpoint::Jwks,
        "/join" => Endpoint::Join,
        "/holding.js" => Endpoint::Script,
        r => match r.strip_prefix("/admin/") {
            Some(op) => Endpoint::Admin(AdminOp::from_name(op)),
            None if r == "/admin" => Endpoint::Admin(AdminOp::Unknown),
            None => Endpoint::Unknown,
        },
    }
}

/// `path` minus `prefix` when `prefix` is a whole-segment prefix of it.
fn strip_segment_prefix<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

fn pattern_matches(segs: &[Seg], path: &str) -> bool {
    let mut parts = path.split('/').filter(|s| !s.is_empty());
    for seg in segs {
        match seg {
            Seg::Rest => return true,
            Seg::One => {
                if parts.next().is_none() {
                    return false;
                }
            }
            Seg::Lit(l) => {
                if parts.next() != Some(l.as_str()) {
                    return false;
                }
            }
        }
    }
    parts.next().is_none()
}

/// Normalises a path for matching (see the module docs). Paths with nothing to normalise are borrowed.
pub(crate) fn normalise(raw: &str) -> Cow<'_, str> {
    // One pass over the bytes (every request asks): a `%`, or a `/` followed by `/` or `.`.
    let b = raw.as_bytes();
    let needs = b.first() != Some(&b'/')
        || b.iter()
            .enumerate()
            .any(|(i, &c)| c == b'%' || (c == b'/' && matches!(b.get(i + 1), Some(b'/' | b'.'))));
    if !needs {
        return Cow::Borrowed(raw);
    }
    let decoded = waitroom_verify::percent::decode_ascii(raw);
    let mut out: Vec<&str> = Vec::new();
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    let mut s = String::with_capacity(decoded.len() + 1);
    for seg in &out {
        s.push('/');
        s.push_str(seg);
    }
    if s.is_empty() {
        s.push('/');
    }
    Cow::Owned(s)
}

/// Whether `target` is a same-site path the room may send a browser to: starts with one `/`, no scheme or
/// authority, no backslash, no control characters, bounded. Returns it cleaned of any fragment.
pub(crate) fn safe_return_to(target: &str) -> Option<&str> {
    let target = target.split('#').next().unwrap_or("");
    let ok = target.starts_with('/')
        && !target.starts_with("//")
        && !target.starts_with("/\\")
        && target.len() <= 1024
        && !target
            .bytes()
            .any(|b| b == b'\\' || b.is_ascii_control() || b == b' ' || b >= 0x80);
    ok.then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Arbitrary text as a request path: no panic; the route of a path is the route of its normalised form
        /// (what the app routes on), so no spelling of a protected path slips past; anything under a protected
        /// prefix that stays under it after normalising is protected; and `return_to` accepts only same-site paths.
        #[test]
        fn arbitrary_paths_route_as_their_normal_form(
            raw in "[ -~]{0,40}",
            tail in "[/a-z.%0-9]{0,20}",
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80),
        ) {
            let mut p = Paths::new("/waitroom").unwrap();
            p.add_prefix("/checkout").unwrap();
            p.add_pattern("/events/*/seats/**").unwrap();
            for path in [raw.clone(), String::from_utf8_lossy(&bytes).into_owned(), format!("/checkout/{tail}")] {
                let normal = normalise(&path).into_owned();
                proptest::prop_assert!(normal.starts_with('/'), "{normal:?}");
                proptest::prop_assert_eq!(p.route(&path), p.route(&normal), "{:?} -> {:?}", path, normal);
                if normal == "/checkout" || normal.starts_with("/checkout/") {
                    proptest::prop_assert_eq!(p.route(&path), Route::Protected, "{:?}", path);
                }
                if let Some(to) = safe_return_to(&path) {
                    proptest::prop_assert!(to.starts_with('/') && !to.starts_with("//") && !to.contains('\\'));
                }
            }
        }
    }

    #[test]
    fn routes_endpoints_protected_and_the_rest() {
        let mut p = Paths::new("/waitroom").unwrap();
        p.add_prefix("/checkout").unwrap();
        p.add_pattern("/events/*/seats/**").unwrap();
        assert_eq!(
            p.route("/waitroom/status"),
            Route::Endpoint(Endpoint::Status)
        );
        assert_eq!(
            p.route("/waitroom/jwks.json"),
            Route::Endpoint(Endpoint::Jwks)
        );
        assert_eq!(p.route("/waitroom/join"), Route::Endpoint(Endpoint::Join));
        assert_eq!(p.route("/waitroom/x"), Route::Endpoint(Endpoint::Unknown));
        assert_eq!(p.route("/waitroomx"), Route::Unprotected);
        assert_eq!(p.route("/checkout"), Route::Protected);
        assert_eq!(p.route("/checkout/pay"), Route::Protected);
        assert_eq!(p.route("/checkouts"), Route::Unprotected);
        assert_eq!(p.route("/events/42/seats"), Route::Protected);
        assert_eq!(p.route("/events/42/seats/A/1"), Route::Protected);
        assert_eq!(p.route("/events/42"), Route::Unprotected);
        assert_eq!(p.route("/"), Route::Unprotected);
        // Normalised before matching.
        assert_eq!(p.route("/%63heckout"), Route::Protected);
        assert_eq!(p.route("//checkout"), Route::Protected);
        assert_eq!(p.route("/public/../checkout/x"), Route::Protected);
        assert_eq!(p.route("/./checkout"), Route::Protected);
        assert_eq!(p.route("/%2e%2e/checkout"), Route::Protected);
        assert_eq!(p.route("/%ff%"), Route::Unprotected);
        assert_eq!(p.route("%"), Route::Unprotected);
    }

    #[test]
    fn metrics_and_admin_paths() {
        let mut p = Paths::new("/waitroom").unwrap();
        p.add_prefix("/ops").unwrap();
        assert_eq!(
            p.route("/waitroom/metrics"),
            Route::Endpoint(Endpoint::Unknown)
        );
        p.set_metrics("/ops/metrics").unwrap();
        assert_eq!(p.route("/ops/metrics"), Route::Endpoint(Endpoint::Metrics));
        assert_eq!(p.route("/ops/metrics/"), Route::Endpoint(Endpoint::Metrics));
        assert_eq!(p.route("/ops/other"), Route::Protected);
        p.set_metrics("/waitroom/metrics").unwrap();
        assert_eq!(
            p.route("/waitroom/metrics"),
            Route::Endpoint(Endpoint::Metrics)
        );
        assert_eq!(p.endpoint_of("/metrics"), Endpoint::Metrics);
        assert_eq!(
            p.route("/waitroom/admin/capacity"),
            Route::Endpoint(Endpoint::Admin(AdminOp::Capacity))
        );
        assert_eq!(
            p.endpoint_of("/admin/pause"),
            Endpoint::Admin(AdminOp::Pause)
        );
        assert_eq!(
            p.route("/waitroom/admin"),
            Route::Endpoint(Endpoint::Admin(AdminOp::Unknown))
        );
        assert!(p.set_metrics("metrics").is_err());
        assert!(p.set_metrics("/m?x").is_err());
    }

    #[test]
    fn no_rules_protects_everything_but_the_endpoints() {
        let p = Paths::new("/wr/").unwrap();
        assert_eq!(p.base(), "/wr");
        assert_eq!(p.route("/anything"), Route::Protected);
        assert_eq!(p.route("/wr/status"), Route::Endpoint(Endpoint::Status));
    }

    #[test]
    fn refuses_bad_rules() {
        assert!(Paths::new("waitroom").is_err());
        assert!(Paths::new("/").is_err());
        let mut p = Paths::new("/w").unwrap();
        assert!(p.add_prefix("checkout").is_err());
        assert!(p.add_pattern("/a/**/b").is_err());
        assert!(p.add_pattern("/a/b*").is_err());
    }

    #[test]
    fn return_to_must_be_a_same_site_path() {
        assert_eq!(safe_return_to("/checkout?x=1#frag"), Some("/checkout?x=1"));
        for bad in [
            "https://evil.example/",
            "//evil.example",
            "/\\evil.example",
            "javascript:alert(1)",
            "",
            "/a\r\nSet-Cookie: x",
            "/caf\u{e9}",
        ] {
            assert_eq!(safe_return_to(bad), None, "{bad:?}");
        }
    }
}
