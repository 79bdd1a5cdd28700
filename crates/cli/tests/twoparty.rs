//! The `helina` binary as a user runs it: `helina server` and `helina client` as two
//! processes over loopback TCP, with a relay between them that counts what the sockets
//! carried. A client that sends random bytes instead of a handshake is logged as an
//! error and the server keeps accepting; the good client's `--json` bytes and rounds
//! equal the relay's counts, and its reconstructed result matches the reference.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_helina");

#[derive(Default, Debug)]
struct Seen {
    up: u64,
    down: u64,
    up_flights: u64,
    last: Option<bool>,
}

/// A relay on a fresh port in front of `target`, for one connection.
fn relay(target: String) -> (String, Arc<Mutex<Seen>>, thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s2 = seen.clone();
    let h = thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        let s = TcpStream::connect(target).unwrap();
        let pump = |mut from: TcpStream, mut to: TcpStream, up: bool, seen: Arc<Mutex<Seen>>| {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let k = match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => k,
                };
                {
                    let mut g = seen.lock().unwrap();
                    if up {
                        g.up += k as u64;
                        if g.last != Some(true) {
                            g.up_flights += 1;
                        }
                    } else {
                        g.down += k as u64;
                    }
                    g.last = Some(up);
                }
                if to.write_all(&buf[..k]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        };
        let (c2, sb) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        let seen_b = s2.clone();
        let t = thread::spawn(move || pump(sb, c2, false, seen_b));
        pump(c, s, true, s2);
        t.join().unwrap();
    });
    (addr, seen, h)
}

fn field(v: &serde_json::Value, path: &[&str]) -> u64 {
    let mut v = v;
    for k in path {
        v = &v[*k];
    }
    v.as_u64().unwrap_or_else(|| panic!("no {path:?} in {v}"))
}

#[test]
fn server_and_client_processes_over_tcp() {
    let mut server = Command::new(BIN)
        .args(["server", "--listen", "127.0.0.1:0", "--sessions", "3"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(server.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    // "helina server: listening on 127.0.0.1:PORT (...)"
    let addr = first
        .split_whitespace()
        .nth(4)
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    // 1. Random bytes instead of a handshake.
    {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(&[0, 0, 0, 5, 0xde, 0xad, 0xbe, 0xef, 0x01])
            .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf); // the server's Abort, then its close
        assert!(!buf.is_empty());
    }
    // 2. The sample matvec layer through a counting relay, with --json and --reveal.
    let (via, seen, rh) = relay(addr.clone());
    let out = Command::new(BIN)
        .args(["client", "--connect", &via, "--reveal", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    rh.join().unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["matches_reference"], serde_json::Value::Bool(true));
    let s = seen.lock().unwrap();
    assert_eq!(field(&j, &["bytes_sent"]), s.up);
    assert_eq!(field(&j, &["bytes_received"]), s.down);
    assert_eq!(field(&j, &["rounds"]), s.up_flights);
    let phases = ["setup", "offline", "online"];
    let sum = |k: &str| phases.iter().map(|p| field(&j, &[p, k])).sum::<u64>();
    assert_eq!(sum("bytes_sent"), s.up);
    assert_eq!(sum("bytes_received"), s.down);
    assert_eq!(sum("rounds"), s.up_flights);
    // 3. The sample conv layer with a method the client asks for; no reveal.
    let out = Command::new(BIN)
        .args([
            "client",
            "--connect",
            &addr,
            "--layer",
            "conv",
            "--method",
            "ensei",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["method"], "ensei");
    assert_eq!(field(&j, &["outputs"]), 4 * 16 * 16);
    let status = server.wait().unwrap();
    assert!(status.success());
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("session failed: malformed message"), "{rest}");
    assert_eq!(rest.matches(": served ").count(), 2, "{rest}");
}
