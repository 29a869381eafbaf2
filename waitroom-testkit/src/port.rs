//! Free loopback ports.

use std::net::TcpListener;

/// A port that was free on 127.0.0.1 a moment ago (the OS picks it; a server started at once almost always gets it).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
