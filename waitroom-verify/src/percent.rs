//! Percent-encoding (RFC 3986), shared by this crate's join redirect and the room's links, query and path reading.
//! Not part of the stable API: the room crate uses it.

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Appends `input` to `out`, percent-encoding everything but RFC 3986 unreserved characters (so the result is safe
/// as a query value).
pub fn encode_into(input: &str, out: &mut String) {
    for b in input.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
}

/// `input` percent-encoded (see [`encode_into`]).
#[must_use]
pub fn encode(input: &str) -> String {
    let mut out = String::with_capacity(input.len() * 3 / 2);
    encode_into(input, &mut out);
    out
}

/// Decodes a query value (`+` is a space). `None` when an escape is malformed or the result is not UTF-8.
#[must_use]
pub fn decode_query_value(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (h, l) = (hex(*b.get(i + 1)?)?, hex(*b.get(i + 2)?)?);
                out.push(h << 4 | l);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Decodes the escapes of ASCII characters in a path (`%2e` is `.`, `%2F` is `/`) and leaves every other byte as it
/// is, malformed escapes and escapes of non-ASCII bytes included: what a path is compared by.
#[must_use]
pub fn decode_ascii(raw: &str) -> String {
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
            && (h << 4 | l) < 0x80
        {
            out.push(char::from(h << 4 | l));
            i += 3;
            continue;
        }
        // `raw` is a valid str; copy the char starting here.
        let ch = raw[i..].chars().next().unwrap_or('?');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_keeps_only_unreserved_characters() {
        assert_eq!(encode("/a b?c=1&d~e.f_g-h"), "%2Fa%20b%3Fc%3D1%26d~e.f_g-h");
        assert_eq!(encode("é"), "%C3%A9");
    }

    #[test]
    fn a_query_value_decodes_back_to_what_was_encoded() {
        for s in ["/checkout?x=1&y=a b", "é/ü", ""] {
            assert_eq!(decode_query_value(&encode(s)).as_deref(), Some(s));
        }
        assert_eq!(decode_query_value("a+b").as_deref(), Some("a b"));
        assert_eq!(decode_query_value("%2").as_deref(), None);
        assert_eq!(decode_query_value("%zz").as_deref(), None);
        assert_eq!(decode_query_value("%ff").as_deref(), None, "not UTF-8");
    }

    #[test]
    fn a_path_decodes_only_ascii_escapes() {
        assert_eq!(decode_ascii("/%2e%2E/a%2Fb"), "/../a/b");
        assert_eq!(decode_ascii("/%C3%A9/%2"), "/%C3%A9/%2");
        assert_eq!(decode_ascii("/é%41"), "/éA");
    }
}
