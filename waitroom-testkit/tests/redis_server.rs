//! The single-server fixture against a real redis-server: it answers, keeps its data over a restart (the
//! append-only file), and leaves nothing behind when dropped.

use waitroom_testkit::redis::RedisServer;

#[test]
fn a_started_server_answers_on_its_own_port() {
    let server = RedisServer::start();
    assert!(!server.is_external());
    assert_ne!(server.port(), 0);
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    assert_eq!(server.command(&["PING"]), "PONG");
}

#[test]
fn replies_read_as_text() {
    let server = RedisServer::start();
    assert_eq!(server.command(&["SET", "k", "v\r\nw"]), "OK");
    assert_eq!(server.command(&["GET", "k"]), "v\r\nw");
    assert_eq!(server.command(&["GET", "absent"]), "");
    assert_eq!(server.command(&["RPUSH", "l", "a", "b"]), "2");
    assert_eq!(server.command(&["LRANGE", "l", "0", "-1"]), "a\nb");
}

#[test]
fn a_restarted_server_keeps_what_was_written_before_the_stop() {
    let mut server = RedisServer::start();
    let port = server.port();
    server.command(&["SET", "kept", "yes"]);
    server.restart();
    assert_eq!(server.port(), port);
    assert_eq!(server.command(&["GET", "kept"]), "yes");
}

#[test]
#[should_panic(expected = "redis command")]
fn an_error_reply_panics_with_the_command() {
    let server = RedisServer::start();
    server.command(&["NOSUCHCOMMAND"]);
}

#[test]
fn a_dropped_server_stops_listening() {
    let server = RedisServer::start();
    let addr = format!("127.0.0.1:{}", server.port());
    drop(server);
    assert!(std::net::TcpStream::connect(addr).is_err());
}
