//! Where a request carries its token and its session, and the session-cookie contract shared with the room.
//!
//! # The session-cookie contract
//! The session cookie's value is `<session_id>` or `<session_id>.<anything>`: the room appends its own data
//! (a line number and an HMAC) after the first `.`. The verifier only reads the part before the first `.`
//! ([`session_id_from_cookie_value`]), and accepts it only when it is 16 to 64 characters of `[A-Za-z0-9_-]`.
//!
//! The verifier cannot check the room's HMAC (it does not hold the room's cookie secret), so the binding proves
//! that a token is presented together with the session it was issued to, not that the session cookie is
//! authentic: it stops a token copied into another browser (which has its own session cookie) or replayed
//! without the cookie.
//!
//! # Where things are read
//! - Token: `Authorization: Bearer <token>` when present (an API client says so explicitly), otherwise the token
//!   cookie.
//! - Session: the session cookie when present, otherwise the `X-Waitroom-Session` header (whose value follows
//!   the same contract).
//!
//! # Bounds
//! - Every `Cookie` header is read, however long and however many: the server's header limit bounds the work (a
//!   request over it gets the server's 431), and a site's other cookies in front of ours never hide ours (a
//!   sibling subdomain that stuffs the header cannot block an order). Scanning is `memchr` over the bytes. A
//!   value of ours that is not visible ASCII ([`cookie_text`]) is skipped; the site's other cookies are never
//!   decoded.
//! - A cookie name that appears more than once is resolved to its **first** occurrence with a readable value
//!   ([`cookie_text`]; the room's reader also skips a session cookie whose tag does not verify). Browsers send the
//!   cookie with the most specific path first (RFC 6265 5.4), which is the one the room set; refusing duplicates
//!   instead would lock a browser out in a redirect loop until the stale cookie expired.
//! - Nothing here panics on odd input.

use http::HeaderMap;
use http::header::{AUTHORIZATION, COOKIE};

use crate::error::{ConfigError, Refusal};

/// A short stand-in for a session id in logs, traces and metrics exemplars: the first 6 hex digits of the
/// SHA-256 of the id (24 bits: enough to follow one session through a log, far too few to recover or guess the id).
///
/// Log a session as `session = %fingerprint(id)`, never the id itself: the session id is half of what an
/// admission needs. The digest is computed only when the value is formatted, so a disabled `trace!` costs nothing.
///
/// ```
/// use waitroom_verify::fingerprint;
/// assert_eq!(fingerprint("AAAAAAAAAAAAAAAAAAAAAA").to_string().len(), 6);
/// ```
#[must_use]
pub fn fingerprint(session_id: &str) -> Fingerprint<'_> {
    Fingerprint(session_id)
}

/// A session id that formats as its short fingerprint. Made by [`fingerprint`].
#[derive(Clone, Copy)]
pub struct Fingerprint<'a>(&'a str);

impl std::fmt::Display for Fingerprint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(self.0.as_bytes());
        for b in &digest[..3] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Fingerprint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// The header an API client may use to name its session when it has no cookie jar.
pub const SESSION_HEADER: &str = "x-waitroom-session";

/// Session ids are at least this long.
pub const MIN_SESSION_ID_LEN: usize = 16;

/// Session ids are at most this long.
pub const MAX_SESSION_ID_LEN: usize = 64;

/// The names of the two cookies. Defaults: `waitroom_session` and `waitroom_token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CookieNames {
    /// The session cookie (set by the room).
    pub session: String,
    /// The token cookie (set by the room when it admits the session).
    pub token: String,
}

impl Default for CookieNames {
    fn default() -> Self {
        CookieNames {
            session: "waitroom_session".into(),
            token: "waitroom_token".into(),
        }
    }
}

impl CookieNames {
    /// Custom names.
    ///
    /// # Errors
    /// [`ConfigError::CookieName`] when a name is empty or not an RFC 6265 token.
    pub fn new(session: impl Into<String>, token: impl Into<String>) -> Result<Self, ConfigError> {
        let names = CookieNames {
            session: session.into(),
            token: token.into(),
        };
        names.validate()?;
        Ok(names)
    }

    /// Checks both names are RFC 6265 cookie-name tokens and differ.
    ///
    /// # Errors
    /// [`ConfigError::CookieName`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        for name in [&self.session, &self.token] {
            let ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !ok {
                return Err(ConfigError::CookieName(name.clone()));
            }
        }
        if self.session == self.token {
            return Err(ConfigError::CookieName(self.token.clone()));
        }
        Ok(())
    }
}

/// The session id in a session cookie value (or `X-Waitroom-Session` header): the part before the first `.`,
/// if it is 16..=64 characters of `[A-Za-z0-9_-]`.
#[must_use]
pub fn session_id_from_cookie_value(value: &str) -> Option<&str> {
    let id = value.split_once('.').map_or(value, |(id, _)| id);
    // A table lookup per byte and no early exit: the ids are random, so a chain of range tests per byte would be
    // mispredicted branches on every request (the room reads the id of every request it guards).
    let ok = (MIN_SESSION_ID_LEN..=MAX_SESSION_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .fold(true, |ok, b| ok & SESSION_ID_BYTES[usize::from(b)]);
    ok.then_some(id)
}

/// `[A-Za-z0-9_-]`, the bytes of a session id, as a table.
static SESSION_ID_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
        b += 1;
    }
    t
};

/// The `(name, value)` pairs of the request's `Cookie` headers, in order, as bytes (every header, to its end: see
/// the module's bounds):
/// names and values trimmed, a value's surrounding double quotes removed, pairs without `=` skipped. Compare the
/// name first and read a value you want with [`cookie_text`]: the other cookies of the site are never decoded.
/// The one cookie reader of both crates (the room reads its session cookie and token candidates with it).
///
/// ```
/// use http::{HeaderMap, HeaderValue};
/// let mut h = HeaderMap::new();
/// h.insert("cookie", HeaderValue::from_static("a=1; waitroom_token=\"t\"; b"));
/// let pairs: Vec<_> = waitroom_verify::session::cookie_pairs(&h).collect();
/// assert_eq!(pairs, [(&b"a"[..], &b"1"[..]), (&b"waitroom_token"[..], &b"t"[..])]);
/// ```
pub fn cookie_pairs(headers: &HeaderMap) -> impl Iterator<Item = (&[u8], &[u8])> {
    headers
        .get_all(COOKIE)
        .iter()
        .flat_map(|v| Pairs { rest: v.as_bytes() })
}

/// The `(name, value)` pairs of one `Cookie` header value, with no bound on its length: for a reader that scans
/// every `Cookie` line the server accepted (the server's header limit bounds the work), such as the room's.
pub fn cookie_pairs_of(value: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    Pairs { rest: value }
}

/// The pairs of one `Cookie` header, split with `memchr` (SIMD): a header with a token is ~500 bytes and is read
/// on every admitted request.
struct Pairs<'h> {
    rest: &'h [u8],
}

impl<'h> Iterator for Pairs<'h> {
    type Item = (&'h [u8], &'h [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        while !self.rest.is_empty() {
            let (pair, rest) = match memchr::memchr(b';', self.rest) {
                Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
                None => (self.rest, &b""[..]),
            };
            self.rest = rest;
            if let Some(eq) = memchr::memchr(b'=', pair) {
                let value = pair[eq + 1..].trim_ascii();
                let value = value
                    .strip_prefix(b"\"")
                    .and_then(|v| v.strip_suffix(b"\""))
                    .unwrap_or(value);
                return Some((pair[..eq].trim_ascii(), value));
            }
        }
        None
    }
}

/// A cookie value as text, when every byte is visible ASCII other than a space (`None` otherwise, and the readers
/// here skip such a value). Stricter than `HeaderValue::to_str` (no space, tab or byte above 0x7e), looser than
/// RFC 6265's cookie-octets (`"`, `,` and `\` pass); the token and session checks that follow decide the rest.
/// The check runs over the whole value without an early exit, which the compiler vectorises.
#[must_use]
pub fn cookie_text(value: &[u8]) -> Option<&str> {
    let visible = value
        .iter()
        .fold(true, |ok, &b| ok & (0x21..0x7f).contains(&b));
    if visible {
        std::str::from_utf8(value).ok()
    } else {
        None
    }
}

/// The value of the cookie `name` in the request's `Cookie` headers (bounded as the module says): its `__Host-`
/// form first (`__Host-waitroom_session`, what the room sets behind HTTPS), then its `__Secure-` form (the room with
/// a cookie domain), then the name itself; the first value of the best form found.
#[must_use]
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut found = None;
    for (n, v) in cookie_pairs(headers) {
        if let Some(r) = rank(n, name) {
            keep_best(&mut found, r, v);
            if matches!(found, Some((0, _))) {
                break;
            }
        }
    }
    found.map(|(_, v)| v)
}

/// How well a cookie named `n` answers for `name`: its `__Host-` form (0), its `__Secure-` form (1), the name
/// itself (2). A browser takes a `__Host-` cookie only from the host itself over HTTPS, so a sibling subdomain
/// cannot plant one.
fn rank(n: &[u8], name: &str) -> Option<u8> {
    let name = name.as_bytes();
    if n.strip_prefix(b"__Host-".as_slice()) == Some(name) {
        Some(0)
    } else if n.strip_prefix(b"__Secure-".as_slice()) == Some(name) {
        Some(1)
    } else if n == name {
        Some(2)
    } else {
        None
    }
}

/// Keeps `v` in `slot` if it is of a better form than what the slot holds (the first of each form wins).
fn keep_best<'h>(slot: &mut Option<(u8, &'h str)>, r: u8, v: &'h [u8]) {
    if slot.is_none_or(|(have, _)| r < have)
        && let Some(v) = cookie_text(v)
    {
        *slot = Some((r, v));
    }
}

/// The token a request carries: `Authorization: Bearer` first, then the token cookie.
///
/// # Errors
/// [`Refusal::Missing`] when there is none; [`Refusal::Malformed`] when `Authorization` is not UTF-8, not the
/// `Bearer` scheme, or empty.
pub fn token_from_headers<'a>(
    headers: &'a HeaderMap,
    names: &CookieNames,
) -> Result<&'a str, Refusal> {
    if let Some(auth) = headers.get(AUTHORIZATION) {
        let auth = auth.to_str().map_err(|_| Refusal::Malformed)?;
        let (scheme, token) = auth.trim().split_once(' ').ok_or(Refusal::Malformed)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Refusal::Malformed);
        }
        let token = token.trim();
        return if token.is_empty() {
            Err(Refusal::Malformed)
        } else {
            Ok(token)
        };
    }
    match cookie(headers, &names.token) {
        Some(t) if !t.is_empty() => Ok(t),
        _ => Err(Refusal::Missing),
    }
}

/// The session id a request carries: from the session cookie, else from `X-Waitroom-Session`.
///
/// # Errors
/// [`Refusal::NoSession`] when neither is present with a well-formed session id.
pub fn session_from_headers<'a>(
    headers: &'a HeaderMap,
    names: &CookieNames,
) -> Result<&'a str, Refusal> {
    if let Some(v) = cookie(headers, &names.session) {
        return session_id_from_cookie_value(v).ok_or(Refusal::NoSession);
    }
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| session_id_from_cookie_value(v.trim()))
        .ok_or(Refusal::NoSession)
}

/// A request's token and session id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials<'a> {
    /// The compact JWT.
    pub token: &'a str,
    /// The session id (cookie part before the first `.`).
    pub session_id: &'a str,
}

/// Both the token and the session of a request, token first (a request with neither is `Missing`).
///
/// The same answer as [`token_from_headers`] then [`session_from_headers`], with the `Cookie` headers read once.
///
/// # Errors
/// As [`token_from_headers`], then as [`session_from_headers`].
pub fn credentials<'a>(
    headers: &'a HeaderMap,
    names: &CookieNames,
) -> Result<Credentials<'a>, Refusal> {
    let (token_cookie, session_cookie) = two_cookies(headers, &names.token, &names.session);
    let token = if headers.contains_key(AUTHORIZATION) {
        token_from_headers(headers, names)?
    } else {
        match token_cookie {
            Some(t) if !t.is_empty() => t,
            _ => return Err(Refusal::Missing),
        }
    };
    let session_id = match session_cookie {
        Some(v) => session_id_from_cookie_value(v).ok_or(Refusal::NoSession)?,
        None => session_from_headers(headers, names)?,
    };
    Ok(Credentials { token, session_id })
}

/// The values of the cookies `a` and `b` (each as [`cookie`] finds it), in one pass.
fn two_cookies<'h>(headers: &'h HeaderMap, a: &str, b: &str) -> (Option<&'h str>, Option<&'h str>) {
    let (mut first, mut second) = (None, None);
    for (n, v) in cookie_pairs(headers) {
        if let Some(r) = rank(n, a) {
            keep_best(&mut first, r, v);
        } else if let Some(r) = rank(n, b) {
            keep_best(&mut second, r, v);
        } else {
            continue;
        }
        if matches!((first, second), (Some((0, _)), Some((0, _)))) {
            break;
        }
    }
    (first.map(|(_, v)| v), second.map(|(_, v)| v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn the_host_prefixed_cookie_wins_over_a_tossed_plain_one() {
        let names = CookieNames::default();
        let mut h = HeaderMap::new();
        h.insert(
            http::header::COOKIE,
            HeaderValue::from_static(
                "waitroom_session=tossed-by-a-sibling-0000.0.x; __Host-waitroom_session=the-hosts-own-00000.0.y; waitroom_token=t1; __Secure-waitroom_token=t2",
            ),
        );
        assert_eq!(
            cookie(&h, "waitroom_session"),
            Some("the-hosts-own-00000.0.y")
        );
        let c = credentials(&h, &names).unwrap();
        assert_eq!((c.token, c.session_id), ("t2", "the-hosts-own-00000"));
        // Without a prefixed form, the plain name as before.
        let mut h = HeaderMap::new();
        h.insert(
            http::header::COOKIE,
            HeaderValue::from_static("waitroom_session=plain-session-000000.0.z; waitroom_token=t"),
        );
        assert_eq!(
            credentials(&h, &names).unwrap().session_id,
            "plain-session-000000"
        );
        assert_eq!(cookie(&h, "other"), None);
    }

    const SID: &str = "abcdefghij0123456789";

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn session_id_contract() {
        assert_eq!(session_id_from_cookie_value(SID), Some(SID));
        assert_eq!(
            session_id_from_cookie_value(&format!("{SID}.42.hmacvalue")),
            Some(SID)
        );
        assert_eq!(session_id_from_cookie_value(&format!("{SID}.")), Some(SID));
        assert_eq!(session_id_from_cookie_value("short.x"), None);
        assert_eq!(session_id_from_cookie_value(&"a".repeat(65)), None);
        assert_eq!(
            session_id_from_cookie_value(&"a".repeat(64)),
            Some("a".repeat(64).as_str())
        );
        assert_eq!(session_id_from_cookie_value("abcdefghij012345678 "), None);
        assert_eq!(session_id_from_cookie_value("abcdefghij01234567é9"), None);
        assert_eq!(session_id_from_cookie_value(""), None);
        assert_eq!(session_id_from_cookie_value(".abcdefghij0123456789"), None);
        // Every ASCII byte against the rule the table encodes.
        for b in 0u8..0x80 {
            let id = format!("{}{}", "a".repeat(15), char::from(b));
            let want = b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
            assert_eq!(
                session_id_from_cookie_value(&id).is_some(),
                want,
                "byte {b:#x}"
            );
        }
    }

    #[test]
    fn token_from_cookie_or_bearer() {
        let names = CookieNames::default();
        let h = headers(&[("cookie", b"a=b; waitroom_token=tok1; waitroom_session=x")]);
        assert_eq!(token_from_headers(&h, &names), Ok("tok1"));
        let h = headers(&[
            ("cookie", b"waitroom_token=tok1"),
            ("authorization", b"Bearer tok2"),
        ]);
        assert_eq!(token_from_headers(&h, &names), Ok("tok2"), "bearer wins");
        let h = headers(&[("authorization", b"Basic dXNlcg==")]);
        assert_eq!(token_from_headers(&h, &names), Err(Refusal::Malformed));
        let h = headers(&[("authorization", b"Bearer ")]);
        assert_eq!(token_from_headers(&h, &names), Err(Refusal::Malformed));
        let h = headers(&[("authorization", b"Bearer \xff\xfe")]);
        assert_eq!(token_from_headers(&h, &names), Err(Refusal::Malformed));
        assert_eq!(
            token_from_headers(&HeaderMap::new(), &names),
            Err(Refusal::Missing)
        );
        let h = headers(&[("cookie", b"waitroom_token=")]);
        assert_eq!(token_from_headers(&h, &names), Err(Refusal::Missing));
    }

    #[test]
    fn session_from_cookie_or_header() {
        let names = CookieNames::default();
        let v = format!("waitroom_session={SID}.7.mac");
        let h = headers(&[("cookie", v.as_bytes())]);
        assert_eq!(session_from_headers(&h, &names), Ok(SID));
        let h = headers(&[("x-waitroom-session", SID.as_bytes())]);
        assert_eq!(session_from_headers(&h, &names), Ok(SID));
        let h = headers(&[
            ("cookie", b"waitroom_session=bad"),
            ("x-waitroom-session", SID.as_bytes()),
        ]);
        assert_eq!(
            session_from_headers(&h, &names),
            Err(Refusal::NoSession),
            "a bad cookie is not overridden"
        );
        assert_eq!(
            session_from_headers(&HeaderMap::new(), &names),
            Err(Refusal::NoSession)
        );
    }

    #[test]
    fn duplicates_take_the_first_and_bounds_hold() {
        let names = CookieNames::default();
        let h = headers(&[
            ("cookie", b"waitroom_token=first; waitroom_token=second"),
            ("cookie", b"waitroom_token=third"),
        ]);
        assert_eq!(token_from_headers(&h, &names), Ok("first"));
        let h = headers(&[
            ("cookie", b"\"x\xff=1"),
            ("cookie", b"waitroom_token=\"quoted\""),
        ]);
        assert_eq!(
            token_from_headers(&h, &names),
            Ok("quoted"),
            "non-UTF-8 header skipped"
        );
        // 18 KB of a sibling subdomain's cookies in front of ours (cookie stuffing) do not hide ours.
        let big = format!("pad={}; waitroom_token=t", "x".repeat(18 * 1024));
        let h = headers(&[("cookie", big.as_bytes())]);
        assert_eq!(
            token_from_headers(&h, &names),
            Ok("t"),
            "a long Cookie header is read to its end"
        );
        let mut many: Vec<(&str, &[u8])> = vec![("cookie", b"a=b"); 100];
        many.push(("cookie", b"waitroom_token=late"));
        assert_eq!(
            token_from_headers(&headers(&many), &names),
            Ok("late"),
            "every Cookie header is read"
        );
        let h = headers(&[(
            "cookie",
            b"waitroom_token_x=1; xwaitroom_token=2; nonsense; =3",
        )]);
        assert_eq!(token_from_headers(&h, &names), Err(Refusal::Missing));
    }

    #[test]
    fn credentials_and_custom_names() {
        let names = CookieNames::new("sid", "pass").unwrap();
        let v = format!("sid={SID}; pass=tok");
        let h = headers(&[("cookie", v.as_bytes())]);
        assert_eq!(
            credentials(&h, &names),
            Ok(Credentials {
                token: "tok",
                session_id: SID
            })
        );
        let h = headers(&[("cookie", b"pass=tok")]);
        assert_eq!(credentials(&h, &names), Err(Refusal::NoSession));
        assert_eq!(
            credentials(&HeaderMap::new(), &names),
            Err(Refusal::Missing)
        );
        assert!(CookieNames::new("a b", "t").is_err());
        assert!(CookieNames::new("", "t").is_err());
        assert!(CookieNames::new("same", "same").is_err());
    }

    #[test]
    fn credentials_reads_as_the_two_separate_readers_do() {
        let names = CookieNames::default();
        let sid2 = "zyxwvutsrq9876543210";
        let cases: Vec<Vec<(&str, Vec<u8>)>> = vec![
            vec![("cookie", format!("waitroom_session={SID}.1.x; waitroom_token=t1").into())],
            vec![("cookie", format!("waitroom_token=t1; waitroom_session={SID}").into())],
            vec![(
                "cookie",
                format!("waitroom_token=\"t1\"; waitroom_token=t2; waitroom_session={SID}; waitroom_session={sid2}").into(),
            )],
            vec![("cookie", b"waitroom_token=t1".to_vec()), ("cookie", format!("waitroom_session={SID}").into())],
            vec![("cookie", b"waitroom_token=; waitroom_session=short".to_vec())],
            vec![("cookie", b"waitroom_session=short; waitroom_token=t".to_vec())],
            vec![("cookie", b"waitroom_token=t".to_vec()), ("x-waitroom-session", SID.into())],
            vec![("authorization", b"Bearer abc".to_vec()), ("cookie", format!("waitroom_token=t; waitroom_session={SID}").into())],
            vec![("authorization", b"Basic abc".to_vec()), ("cookie", format!("waitroom_session={SID}").into())],
            vec![("authorization", b"Bearer abc".to_vec()), ("x-waitroom-session", sid2.into())],
            vec![("cookie", b"nothing=here".to_vec())],
            vec![],
        ];
        for case in cases {
            let pairs: Vec<(&str, &[u8])> = case.iter().map(|(n, v)| (*n, v.as_slice())).collect();
            let h = headers(&pairs);
            let separate = token_from_headers(&h, &names).and_then(|token| {
                session_from_headers(&h, &names).map(|session_id| Credentials { token, session_id })
            });
            assert_eq!(credentials(&h, &names), separate, "{pairs:?}");
        }
    }
}
