//! Just enough of the Redis protocol (RESP2) to send one command and read its reply, std only.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends one command to `addr` (`host:port`) over a fresh connection and returns the reply as text: integers and
/// simple strings as written, bulk strings as their content (a nil as the empty string), arrays as their items
/// joined by newlines. `None` when the server cannot be reached or answers with an error.
pub(crate) fn command(addr: &str, args: &[&str]) -> Option<String> {
    let stream = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(1)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    let mut w = stream.try_clone().ok()?;
    let mut req = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        req.extend_from_slice(a.as_bytes());
        req.extend_from_slice(b"\r\n");
    }
    w.write_all(&req).ok()?;
    let mut r = BufReader::new(stream);
    read_reply(&mut r)
}

/// [`command`] to the server on `127.0.0.1:<port>`.
pub(crate) fn on(port: u16, args: &[&str]) -> Option<String> {
    command(&format!("127.0.0.1:{port}"), args)
}

fn read_reply(r: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1.min(line.len()));
    match kind {
        "+" | ":" => Some(rest.to_owned()),
        "-" => None,
        "$" => {
            let n: i64 = rest.parse().ok()?;
            if n < 0 {
                return Some(String::new());
            }
            let mut buf = vec![0; n as usize + 2];
            r.read_exact(&mut buf).ok()?;
            buf.truncate(n as usize);
            String::from_utf8(buf).ok()
        }
        "*" => {
            let n: i64 = rest.parse().ok()?;
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_reply(r)?);
            }
            Some(items.join("\n"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::read_reply;

    fn read(bytes: &str) -> Option<String> {
        read_reply(&mut bytes.as_bytes())
    }

    #[test]
    fn simple_strings_and_integers_read_as_written() {
        assert_eq!(read("+PONG\r\n").as_deref(), Some("PONG"));
        assert_eq!(read(":42\r\n").as_deref(), Some("42"));
    }

    #[test]
    fn bulk_strings_read_as_their_content_and_nil_as_empty() {
        assert_eq!(read("$5\r\nhe\r\no\r\n").as_deref(), Some("he\r\no"));
        assert_eq!(read("$-1\r\n").as_deref(), Some(""));
    }

    #[test]
    fn arrays_read_as_items_joined_by_newlines() {
        assert_eq!(read("*2\r\n$1\r\na\r\n:7\r\n").as_deref(), Some("a\n7"));
    }

    #[test]
    fn an_error_reply_reads_as_none() {
        assert_eq!(read("-ERR wrong\r\n"), None);
    }
}
