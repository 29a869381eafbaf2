//! The session cookie: a random session id, the line number once assigned (or the pre-queue mark), and an
//! HMAC-SHA256 tag over both.
//!
//! Value: `<session_id>.<mark>.<tag>` where `mark` is the line number once the session has one, `p` while it waits
//! in the pre-queue for the draw, `0` otherwise, `<number>t<seconds>` (or `pt<seconds>`) for a **ticket**, a first
//! contact's place that the store has not recorded yet (the number, or the pre-queue, and when it was given out,
//! in seconds since the Unix epoch; see "Tickets" in `crate::store`), and `tag` is the base64url (no padding) HMAC-SHA256 of
//! `event NUL session_id NUL mark` under the room's cookie secret. So a waiting session's poll is answered from
//! the cookie and the shared counters, with nothing kept per session in the instance's memory. The
//! verify crate reads the session id as everything before the first `.`, so the same cookie binds the admission
//! token to the browser.
//!
//! A cookie that is too long, not UTF-8, malformed, or whose tag does not verify (checked in constant time) is
//! treated as no cookie at all: the store is never asked about it.
//!
//! # Clients without a cookie jar
//! An app or a script names its session with the `X-Waitroom-Session` header instead
//! ([`waitroom_verify::SESSION_HEADER`]): the same sealed value, checked the same way. The header is read only when
//! the request carries **no** session cookie at all (the cookie wins, as in the verify crate: a request with both is
//! a browser's, and the header is not looked at even when the cookie is forged), and only when it comes on exactly
//! one header line (two lines are ambiguous and count as no session). How the request named its session is its
//! [`Carrier`]: it decides what the room may put in its answers (see `http::gate`).
//!
//! On an admitted session's requests the tag is checked once per token: the room's verifier remembers the cookie
//! value that passed with a token, and the same token with the very same value (compared in constant time) skips
//! the HMAC (`Tokens::check_with_cookie`). Any other value is checked in full.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use http::header::AUTHORIZATION;
use http::header::COOKIE;
use http::{HeaderMap, HeaderValue};
use sha2::Sha256;
use waitroom_verify::session::{cookie_pairs_of, cookie_text};
use waitroom_verify::{CookieNames, SESSION_HEADER, session_id_from_cookie_value};

/// Longest session cookie value read (a real one is about 70 characters).
pub(crate) const MAX_SESSION_VALUE: usize = 160;
/// Longest token read (from a cookie or `Authorization`).
pub(crate) const MAX_TOKEN_LEN: usize = 4096;
/// Most token candidates tried (cookies first, then `Authorization: Bearer`).
pub(crate) const MAX_CANDIDATES: usize = 3;
/// Most session cookie values tried. Stale values at other paths, or values tossed in from a sibling subdomain,
/// may come before the real one: each is checked in turn and the first whose tag verifies wins. A request with
/// more than this many session values and none of the first verifying is refused (431) rather than treated as a
/// new visitor, so a stuffed `Cookie` header can never push a person out of line.
pub(crate) const MAX_SESSION_CANDIDATES: usize = 8;
/// Length of the tag, base64url without padding (32 bytes).
const TAG_LEN: usize = 43;

/// A session cookie whose tag verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCookie {
    /// The session id.
    pub id: String,
    /// The line number the room gave this session, if any.
    pub number: Option<u64>,
    /// The room put this session in the pre-queue (it waits for the draw, with no number yet).
    pub prequeue: bool,
    /// A ticket not redeemed yet: when it was given out (seconds since the Unix epoch).
    pub issued: Option<u64>,
}

/// A session cookie whose tag verified, borrowed from the request's headers (the hot paths read it without
/// copying the id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionRef<'h> {
    /// The session id.
    pub id: &'h str,
    /// The line number the room gave this session, if any.
    pub number: Option<u64>,
    /// The room put this session in the pre-queue.
    pub prequeue: bool,
    /// A ticket not redeemed yet: when it was given out (seconds since the Unix epoch).
    pub issued: Option<u64>,
}

impl SessionRef<'_> {
    /// The cookie, owned (for work that outlives the request's headers).
    pub(crate) fn owned(self) -> SessionCookie {
        SessionCookie {
            id: self.id.to_owned(),
            number: self.number,
            prequeue: self.prequeue,
            issued: self.issued,
        }
    }
}

/// How a request named its session (whether or not the value verifies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Carrier {
    /// A session cookie: a browser (or a client with a cookie jar). The room answers with `Set-Cookie` only.
    Cookie,
    /// No session cookie, and the `X-Waitroom-Session` header: an app. The room answers with the values in the
    /// answers (JSON fields and response headers), not in cookies.
    Header,
    /// Neither: a newcomer. The room sets the cookie and also says the session value in its answers (the client
    /// may be an app on its first request); never a token.
    #[default]
    Nothing,
}

/// What the room read from a request's cookies, borrowed from the request's headers. Nothing in it is checked
/// yet: [`CookieCodec::session`] gives the first session cookie whose tag verifies.
#[derive(Debug, Default)]
pub(crate) struct Jar<'h> {
    /// Session cookie values in the order found (a stale cookie at another path may come first).
    pub sessions: Candidates<'h, MAX_SESSION_CANDIDATES>,
    /// Token candidates in the order found (cookies first, then `Authorization: Bearer`).
    pub tokens: Candidates<'h, MAX_CANDIDATES>,
    /// More session cookie values came than [`MAX_SESSION_CANDIDATES`]: the ones past it were not read.
    pub overflow: bool,
    /// The `X-Waitroom-Session` value, read only without a session cookie and from a single header line.
    pub header: Option<&'h str>,
    /// How the request named its session.
    pub carrier: Carrier,
}

/// The request carried a session cookie the room could not read (more session values than it tries, none of the
/// tried ones valid): answered 431, never with a new session that would overwrite the real one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unreadable;

/// At most `N` cookie values, without allocating.
#[derive(Debug)]
pub(crate) struct Candidates<'h, const N: usize> {
    slots: [&'h str; N],
    len: usize,
}

impl<const N: usize> Default for Candidates<'_, N> {
    fn default() -> Self {
        Self {
            slots: [""; N],
            len: 0,
        }
    }
}

impl<'h, const N: usize> Candidates<'h, N> {
    fn push(&mut self, token: &'h str) {
        if let Some(slot) = self.slots.get_mut(self.len) {
            *slot = token;
            self.len += 1;
        }
    }

    fn is_full(&self) -> bool {
        self.len == N
    }

    /// The candidates, in order.
    pub(crate) fn as_slice(&self) -> &[&'h str] {
        &self.slots[..self.len]
    }
}

/// Whether `id` is a well-formed session id: 16 to 64 characters of `[A-Za-z0-9_-]`, the rule of the verify
/// crate's [`session_id_from_cookie_value`] (one rule for both sides of the session binding).
pub fn valid_session_id(id: &str) -> bool {
    session_id_from_cookie_value(id) == Some(id)
}

/// Seals and opens session cookies, and writes `Set-Cookie` lines.
#[derive(Clone)]
pub(crate) struct CookieCodec {
    mac: Hmac<Sha256>,
    event: String,
    pub(crate) names: CookieNames,
    secure: bool,
    session_max_age: Duration,
    /// `; Domain=<domain>` when the room shares its cookies with a domain (see `RoomBuilder::cookie_domain`).
    domain: String,
}

impl std::fmt::Debug for CookieCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CookieCodec")
            .field("secret", &"[redacted]")
            .field("names", &self.names)
            .field("secure", &self.secure)
            .finish_non_exhaustive()
    }
}

impl CookieCodec {
    pub(crate) fn new(
        secret: &[u8],
        event: &str,
        names: CookieNames,
        secure: bool,
        session_max_age: Duration,
    ) -> Self {
        Self {
            mac: <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
                .expect("HMAC takes keys of any length"),
            event: event.to_owned(),
            names,
            secure,
            session_max_age,
            domain: String::new(),
        }
    }

    /// Whether the room's cookies carry `Secure`.
    pub(crate) fn secure(&self) -> bool {
        self.secure
    }

    /// Sets the cookies' `Domain` (none: host-only cookies).
    pub(crate) fn with_domain(mut self, domain: Option<String>) -> Self {
        self.domain = domain.map(|d| format!("; Domain={d}")).unwrap_or_default();
        self
    }

    fn tag(&self, id: &str, mark: &str) -> Hmac<Sha256> {
        let mut mac = self.mac.clone();
        mac.update(self.event.as_bytes());
        mac.update(&[0]);
        mac.update(id.as_bytes());
        mac.update(&[0]);
        mac.update(mark.as_bytes());
        mac
    }

    /// The cookie value for `id` with its line number, or its place in the pre-queue.
    pub(crate) fn seal(&self, id: &str, number: Option<u64>, prequeue: bool) -> String {
        self.seal_ticket(id, number, prequeue, None)
    }

    /// [`seal`](Self::seal), as a ticket given out at `issued` (seconds since the Unix epoch) when it is `Some`.
    pub(crate) fn seal_ticket(
        &self,
        id: &str,
        number: Option<u64>,
        prequeue: bool,
        issued: Option<u64>,
    ) -> String {
        let mut mark = match (number, prequeue) {
            (Some(n), _) => itoa::Buffer::new().format(n).to_owned(),
            (None, true) => "p".to_owned(),
            (None, false) => "0".to_owned(),
        };
        if let Some(t) = issued
            && mark != "0"
        {
            mark.push('t');
            mark.push_str(itoa::Buffer::new().format(t));
        }
        let tag = self.tag(id, &mark).finalize().into_bytes();
        // Built in place (no formatting machinery): this runs for every first contact.
        let mut v = String::with_capacity(id.len() + mark.len() + 2 + 43);
        v.push_str(id);
        v.push('.');
        v.push_str(&mark);
        v.push('.');
        URL_SAFE_NO_PAD.encode_string(tag, &mut v);
        v
    }

    /// Opens a cookie value; `None` unless it is well formed and its tag verifies.
    pub(crate) fn open<'v>(&self, value: &'v str) -> Option<SessionRef<'v>> {
        if value.len() > MAX_SESSION_VALUE {
            return None;
        }
        let value = value.trim_matches('"');
        let (id, rest) = value.split_once('.')?;
        let (n, tag) = rest.split_once('.')?;
        // One spelling per value: digits without leading zeros.
        let canonical = |d: &str| {
            !d.is_empty()
                && d.len() <= 20
                && d.bytes().all(|b| b.is_ascii_digit())
                && !(d.len() > 1 && d.starts_with('0'))
        };
        let (place, issued) = match n.split_once('t') {
            Some((place, t)) if canonical(t) && place != "0" => (place, Some(t.parse().ok()?)),
            Some(_) => return None,
            None => (n, None),
        };
        let prequeue = place == "p";
        if !valid_session_id(id) || !(prequeue || canonical(place)) || tag.len() != TAG_LEN {
            return None;
        }
        let number: u64 = if prequeue { 0 } else { place.parse().ok()? };
        // The expected tag is encoded (on the stack: this runs on every protected request) and compared in
        // constant time with the text. Encoding is canonical, so this accepts what decoding and comparing the
        // bytes would, for less work.
        let mut expected = [0u8; TAG_LEN];
        URL_SAFE_NO_PAD
            .encode_slice(self.tag(id, n).finalize().into_bytes(), &mut expected)
            .ok()?;
        let tag: &[u8; TAG_LEN] = tag.as_bytes().try_into().ok()?;
        if !constant_time_eq::constant_time_eq_n(&expected, tag) {
            return None;
        }
        Some(SessionRef {
            id,
            number: (number > 0).then_some(number),
            prequeue,
            issued,
        })
    }

    /// Reads the session cookie values and the token candidates from `headers`: every `Cookie` line the server
    /// accepted, each of any length (the server's header limit bounds the work, one `memchr` pass; past it the
    /// server answers 431 itself), so a session cookie behind kilobytes of other cookies is still found. Values
    /// that cannot be a session cookie (too long, not visible ASCII) are skipped. Nothing is verified here: see
    /// [`session`](Self::session).
    pub(crate) fn read<'h>(&self, headers: &'h HeaderMap) -> Jar<'h> {
        let mut jar = Jar::default();
        let mut session_cookie = false;
        let pairs = headers
            .get_all(COOKIE)
            .iter()
            .flat_map(|v| cookie_pairs_of(v.as_bytes()));
        for (name, value) in pairs {
            if name == self.names.session.as_bytes() {
                session_cookie = true;
                if value.len() <= MAX_SESSION_VALUE
                    && let Some(v) = cookie_text(value)
                {
                    if jar.sessions.is_full() {
                        jar.overflow = true;
                    } else {
                        jar.sessions.push(v);
                    }
                }
            } else if name == self.names.token.as_bytes()
                && !jar.tokens.is_full()
                && !value.is_empty()
                && value.len() <= MAX_TOKEN_LEN
                && let Some(token) = cookie_text(value)
            {
                jar.tokens.push(token);
            }
        }
        if !jar.tokens.is_full()
            && let Some(auth) = headers.get(AUTHORIZATION)
            && auth.len() <= MAX_TOKEN_LEN + 7
            && let Ok(auth) = auth.to_str()
            && let Some(token) = auth
                .strip_prefix("Bearer ")
                .or_else(|| auth.strip_prefix("bearer "))
        {
            let token = token.trim();
            if !token.is_empty() {
                jar.tokens.push(token);
            }
        }
        if session_cookie {
            jar.carrier = Carrier::Cookie;
        } else {
            let mut lines = headers.get_all(SESSION_HEADER).iter();
            if let Some(first) = lines.next() {
                jar.carrier = Carrier::Header;
                if lines.next().is_none()
                    && first.len() <= MAX_SESSION_VALUE
                    && let Some(v) = cookie_text(first.as_bytes().trim_ascii())
                {
                    jar.header = Some(v);
                }
            }
        }
        jar
    }

    /// The first of the jar's session cookies whose tag verifies; without a session cookie, the
    /// `X-Waitroom-Session` header's value if its tag verifies. [`Unreadable`] when none of the tried session cookies
    /// verifies and more were left unread.
    pub(crate) fn session<'h>(&self, jar: &Jar<'h>) -> Result<Option<SessionRef<'h>>, Unreadable> {
        match jar.carrier {
            Carrier::Cookie => match jar.sessions.as_slice().iter().find_map(|v| self.open(v)) {
                Some(s) => Ok(Some(s)),
                None if jar.overflow => Err(Unreadable),
                None => Ok(None),
            },
            Carrier::Header => Ok(jar.header.and_then(|v| self.open(v))),
            Carrier::Nothing => Ok(None),
        }
    }

    /// The request's session (as [`session`](Self::session)) and how the request named it.
    pub(crate) fn read_session<'h>(
        &self,
        headers: &'h HeaderMap,
    ) -> Result<(Option<SessionRef<'h>>, Carrier), Unreadable> {
        let jar = self.read(headers);
        Ok((self.session(&jar)?, jar.carrier))
    }

    /// A `Set-Cookie` line: `name=value` and the room's attributes (path, domain, max age, `HttpOnly`,
    /// `SameSite=Lax`, `Secure`), built in place (no formatting machinery: this runs for every first contact).
    fn cookie_line(&self, name: &str, value: &str, max_age_secs: u64) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        let mut v = String::with_capacity(name.len() + value.len() + self.domain.len() + 80);
        v.push_str(name);
        v.push('=');
        v.push_str(value);
        v.push_str("; Path=/");
        v.push_str(&self.domain);
        v.push_str("; Max-Age=");
        v.push_str(itoa::Buffer::new().format(max_age_secs));
        v.push_str("; HttpOnly; SameSite=Lax");
        v.push_str(secure);
        v
    }

    /// `Set-Cookie` for the session cookie.
    pub(crate) fn set_session(&self, id: &str, number: Option<u64>, prequeue: bool) -> HeaderValue {
        self.set_sealed(&self.seal(id, number, prequeue))
    }

    /// `Set-Cookie` for the session cookie with a value made by [`seal`](Self::seal).
    pub(crate) fn set_sealed(&self, sealed: &str) -> HeaderValue {
        let v = self.cookie_line(&self.names.session, sealed, self.session_max_age.as_secs());
        HeaderValue::try_from(v).expect("cookie names are validated tokens and values are ASCII")
    }

    /// `Set-Cookie` for the token cookie, living `max_age`.
    pub(crate) fn set_token(&self, token: &str, max_age: Duration) -> HeaderValue {
        let v = self.cookie_line(&self.names.token, token, max_age.as_secs());
        HeaderValue::try_from(v).unwrap_or_else(|_| self.clear_token())
    }

    /// A `Cookie` request line carrying `token`: what the browser will send from its next request on, added to
    /// the request the token was issued on.
    pub(crate) fn token_request_cookie(&self, token: &str) -> Option<HeaderValue> {
        HeaderValue::try_from(format!("{}={}", self.names.token, token)).ok()
    }

    /// `Set-Cookie` that removes the token cookie.
    pub(crate) fn clear_token(&self) -> HeaderValue {
        HeaderValue::try_from(self.cookie_line(&self.names.token, "", 0))
            .expect("cookie names are validated tokens")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> CookieCodec {
        CookieCodec::new(
            b"0123456789abcdef0123456789abcdef",
            "ev",
            CookieNames::default(),
            true,
            Duration::from_secs(3600),
        )
    }

    const SID: &str = "AAAAAAAAAAAAAAAAAAAAAA";

    #[test]
    fn seal_and_open_round_trip() {
        let c = codec();
        let v = c.seal(SID, Some(42), false);
        assert_eq!(
            c.open(&v),
            Some(SessionRef {
                id: SID,
                number: Some(42),
                prequeue: false,
                issued: None,
            })
        );
        let v = c.seal(SID, None, false);
        assert!(v.starts_with(&format!("{SID}.0.")));
        assert_eq!(c.open(&v).unwrap().number, None);
        let v = c.seal(SID, None, true);
        assert!(v.starts_with(&format!("{SID}.p.")));
        assert_eq!(
            c.open(&v),
            Some(SessionRef {
                id: SID,
                number: None,
                prequeue: true,
                issued: None,
            })
        );
        // The pre-queue mark is under the tag too: neither can pass for the other.
        assert_eq!(c.open(&v.replacen(".p.", ".0.", 1)), None);
        let none = c.seal(SID, None, false);
        assert_eq!(c.open(&none.replacen(".0.", ".p.", 1)), None);
        assert_eq!(c.open(&v.replacen(".p.", ".P.", 1)), None);
    }

    /// A value signed over `mark` by this codec (as only the room could make it).
    fn signed(c: &CookieCodec, mark: &str) -> String {
        signed_as(c, SID, mark)
    }

    fn signed_as(c: &CookieCodec, id: &str, mark: &str) -> String {
        let tag = URL_SAFE_NO_PAD.encode(c.tag(id, mark).finalize().into_bytes());
        format!("{id}.{mark}.{tag}")
    }

    #[test]
    fn a_session_id_of_the_wrong_shape_does_not_open_even_under_a_valid_tag() {
        let c = codec();
        for id in [
            "",
            "short",
            "AAAAAAAAAAAAAAA",
            "AAAAAAAAAAAAAAAAAAAAA/",
            "AAAAAAAAAAAAAAAAAAAA AA",
        ] {
            assert_eq!(
                c.open(&signed_as(&c, id, "7")),
                None,
                "{id:?} must not open"
            );
        }
        let longest = "A".repeat(64);
        assert_eq!(
            c.open(&signed_as(&c, &longest, "7")).map(|s| s.id),
            Some(longest.as_str())
        );
        assert_eq!(c.open(&signed_as(&c, &"A".repeat(65), "7")), None);
    }

    /// A request stuffed with more session values than are tried, none verifying, is unreadable (answered 431), not
    /// a new visitor whose fresh session would push the real one out; as many as are tried, it is a new visitor; and
    /// no more token candidates are kept than are tried.
    #[test]
    fn more_unverifiable_session_values_than_are_tried_are_unreadable() {
        let c = codec();
        let forged = format!("{SID}.1.{}", "A".repeat(TAG_LEN));
        let jar_of = |n: usize, extra: &str| {
            let mut line: Vec<String> = (0..n)
                .map(|_| format!("{}={forged}", c.names.session))
                .collect();
            line.extend((0..n).map(|i| format!("{}=token-{i}", c.names.token)));
            if !extra.is_empty() {
                line.push(extra.to_owned());
            }
            let mut h = HeaderMap::new();
            h.insert(COOKIE, line.join("; ").parse().unwrap());
            h
        };
        let h = jar_of(MAX_SESSION_CANDIDATES + 1, "");
        let jar = c.read(&h);
        assert_eq!(c.session(&jar), Err(Unreadable));
        assert_eq!(jar.tokens.as_slice().len(), MAX_CANDIDATES);
        let h = jar_of(MAX_SESSION_CANDIDATES, "");
        assert_eq!(c.session(&c.read(&h)), Ok(None));
        // The real one among as many as are tried is found.
        let real = c.seal(SID, Some(3), false);
        let h = jar_of(
            MAX_SESSION_CANDIDATES - 1,
            &format!("{}={real}", c.names.session),
        );
        assert_eq!(c.session(&c.read(&h)).unwrap().unwrap().number, Some(3));
    }

    /// A bearer token as long as a token cookie may be is read; one byte longer is not (the same bound either way).
    #[test]
    fn a_bearer_token_is_read_up_to_the_longest_token() {
        let c = codec();
        for (len, read) in [(MAX_TOKEN_LEN, true), (MAX_TOKEN_LEN + 1, false)] {
            let mut h = HeaderMap::new();
            h.insert(
                AUTHORIZATION,
                format!("Bearer {}", "t".repeat(len)).parse().unwrap(),
            );
            assert_eq!(
                c.read(&h).tokens.as_slice().len(),
                usize::from(read),
                "{len}"
            );
        }
    }

    #[test]
    fn the_codecs_secure_flag_is_what_its_cookies_say_and_debug_keeps_the_secret() {
        for secure in [true, false] {
            let c = CookieCodec::new(
                b"0123456789abcdef0123456789abcdef",
                "ev",
                CookieNames::default(),
                secure,
                Duration::from_secs(3600),
            );
            assert_eq!(c.secure(), secure);
            let line = c.set_sealed(&c.seal(SID, Some(1), false));
            assert_eq!(
                line.to_str().unwrap().contains("; Secure"),
                secure,
                "{line:?}"
            );
            let debug = format!("{c:?}");
            assert!(
                debug.contains("CookieCodec") && debug.contains("[redacted]"),
                "{debug}"
            );
            assert!(!debug.contains("0123456789abcdef"), "{debug}");
        }
    }

    #[test]
    fn only_one_spelling_of_a_mark_opens_even_under_a_valid_tag() {
        let c = codec();
        // Canonical marks open, with what they say (numbers of every length up to u64's 20 digits).
        for (mark, number, prequeue, issued) in [
            ("7", Some(7), false, None),
            ("10", Some(10), false, None),
            ("12345", Some(12_345), false, None),
            ("18446744073709551615", Some(u64::MAX), false, None),
            ("0", None, false, None),
            ("p", None, true, None),
            ("42t1767261600", Some(42), false, Some(1_767_261_600)),
            ("pt0", None, true, Some(0)),
            ("pt5", None, true, Some(5)),
        ] {
            let v = signed(&c, mark);
            assert_eq!(
                c.open(&v),
                Some(SessionRef {
                    id: SID,
                    number,
                    prequeue,
                    issued,
                }),
                "{mark}"
            );
        }
        // Any other spelling is no cookie, even signed: leading zeros, empty parts, a 21st digit, signs, letters,
        // a ticket of line number 0, a time with leading zeros.
        for mark in [
            "",
            "00",
            "07",
            "012",
            "1x",
            "x1",
            "+1",
            "-1",
            " 1",
            "P",
            "pp",
            "123456789012345678901",
            "t5",
            "5t",
            "0t5",
            "5t05",
            "5t5t5",
            "5tx",
            "p5",
            "18446744073709551616",
        ] {
            assert_eq!(c.open(&signed(&c, mark)), None, "{mark:?} must not open");
        }
    }

    #[test]
    fn a_ticket_carries_its_number_and_time_under_the_tag() {
        let c = codec();
        let v = c.seal_ticket(SID, Some(42), false, Some(1_767_261_600));
        assert!(v.starts_with(&format!("{SID}.42t1767261600.")), "{v}");
        assert_eq!(
            c.open(&v),
            Some(SessionRef {
                id: SID,
                number: Some(42),
                prequeue: false,
                issued: Some(1_767_261_600),
            })
        );
        let p = c.seal_ticket(SID, None, true, Some(5));
        assert_eq!(
            c.open(&p).map(|r| (r.prequeue, r.issued)),
            Some((true, Some(5)))
        );
        // Neither the time nor the number can change under the tag, nor the ticket pass for a redeemed place.
        for forged in [
            v.replacen("t1767261600.", "t1767261601.", 1),
            v.replacen(".42t", ".43t", 1),
            v.replacen("t1767261600.", ".", 1),
            v.replacen("t1767261600.", "t01767261600.", 1),
            v.replacen("t1767261600.", "t.", 1),
            p.replacen(".pt5.", ".0t5.", 1),
        ] {
            assert_eq!(c.open(&forged), None, "{forged}");
        }
        let plain = c.seal(SID, Some(42), false);
        assert_eq!(c.open(&plain).unwrap().issued, None);
        assert_eq!(c.open(&plain.replacen(".42.", ".42t5.", 1)), None);
    }

    #[test]
    fn forged_and_garbled_cookies_are_no_cookie() {
        let c = codec();
        let good = c.seal(SID, Some(42), false);
        // Another number under the same tag.
        assert_eq!(c.open(&good.replacen(".42.", ".1.", 1)), None);
        // Leading zeros would give a second spelling of the same number.
        assert_eq!(c.open(&good.replacen(".42.", ".042.", 1)), None);
        // Another secret.
        let other = CookieCodec::new(
            b"another secret",
            "ev",
            CookieNames::default(),
            true,
            Duration::from_secs(1),
        );
        assert_eq!(other.open(&good), None);
        // Another on-sale.
        let other = CookieCodec::new(
            b"0123456789abcdef0123456789abcdef",
            "ev2",
            CookieNames::default(),
            true,
            Duration::from_secs(1),
        );
        assert_eq!(other.open(&good), None);
        for bad in [
            "",
            SID,
            "short.1.x",
            &format!("{SID}.1"),
            &format!("{SID}.x.{}", "A".repeat(43)),
            &format!("{SID}.1.{}", "A".repeat(43)),
            &format!("{SID}.1.{}", "*".repeat(43)),
            &format!("{SID}.99999999999999999999999.{}", "A".repeat(43)),
            &"A".repeat(10_000),
        ] {
            assert_eq!(c.open(bad), None, "{bad}");
        }
        // Any other character anywhere in the tag.
        let tag_at = good.rfind('.').unwrap() + 1;
        for i in tag_at..good.len() {
            for ch in [b'A', b'Q', b'g', b'w', b'0', b'-', b'_'] {
                let mut b = good.clone().into_bytes();
                if b[i] != ch {
                    b[i] = ch;
                    assert_eq!(c.open(std::str::from_utf8(&b).unwrap()), None, "{i} {ch}");
                }
            }
        }
        // A second spelling of the same 32 bytes: the last character's two spare bits set.
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut b = good.clone().into_bytes();
        let last = b.len() - 1;
        let v = ALPHABET.iter().position(|&x| x == b[last]).unwrap();
        b[last] = ALPHABET[v ^ 1];
        assert_eq!(c.open(std::str::from_utf8(&b).unwrap()), None);
    }

    #[test]
    fn reads_cookies_from_several_lines_and_bearer() {
        let c = codec();
        let good = c.seal(SID, Some(7), false);
        let mut h = HeaderMap::new();
        h.append(
            COOKIE,
            HeaderValue::from_static("a=b; waitroom_session=forged"),
        );
        h.append(
            COOKIE,
            HeaderValue::try_from(format!("waitroom_session={good}; waitroom_token=t1")).unwrap(),
        );
        h.append(
            COOKIE,
            HeaderValue::from_bytes(b"waitroom_token=\xff\xfe").unwrap(),
        );
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer t2"));
        let jar = c.read(&h);
        assert_eq!(c.session(&jar).unwrap().unwrap().number, Some(7));
        assert_eq!(jar.tokens.as_slice(), ["t1", "t2"]);
    }

    #[test]
    fn reads_a_cookie_sent_as_one_header_among_many_as_http2_clients_do() {
        let c = codec();
        let good = c.seal(SID, Some(9), false);
        let mut h = HeaderMap::new();
        for i in 0..30 {
            h.append(
                COOKIE,
                HeaderValue::try_from(format!("site_cookie_{i}={}", "v".repeat(300))).unwrap(),
            );
        }
        h.append(
            COOKIE,
            HeaderValue::try_from(format!("waitroom_session={good}")).unwrap(),
        );
        h.append(COOKIE, HeaderValue::from_static("waitroom_token=t1"));
        let jar = c.read(&h);
        assert_eq!(c.session(&jar).unwrap().unwrap().number, Some(9));
        assert_eq!(jar.tokens.as_slice(), ["t1"]);
    }

    proptest::proptest! {
        /// Arbitrary bytes as `Cookie` lines and as session cookie values: no panic, and nothing but a cookie the
        /// room sealed itself opens.
        #[test]
        fn arbitrary_cookie_bytes_never_panic_and_never_open(
            lines in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..400), 0..12),
            value in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
        ) {
            let c = codec();
            let mut h = HeaderMap::new();
            for line in &lines {
                if let Ok(v) = HeaderValue::from_bytes(line) {
                    h.append(COOKIE, v);
                }
            }
            let jar = c.read(&h);
            proptest::prop_assert!(matches!(c.session(&jar), Ok(None) | Err(Unreadable)));
            if let Ok(text) = std::str::from_utf8(&value) {
                proptest::prop_assert_eq!(c.open(text), None);
            }
        }
    }

    #[test]
    fn set_cookie_lines_carry_the_attributes() {
        let c = codec();
        let v = c.set_session(SID, Some(3), false);
        let v = v.to_str().unwrap();
        assert!(v.starts_with("waitroom_session="));
        for attr in [
            "Path=/",
            "HttpOnly",
            "SameSite=Lax",
            "Secure",
            "Max-Age=3600",
        ] {
            assert!(v.contains(attr), "{v}");
        }
        assert!(c.clear_token().to_str().unwrap().contains("Max-Age=0"));
    }
}
