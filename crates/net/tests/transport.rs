//! Framing, limits, failures and counters over real loopback sockets and in memory.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use net::{Channel, Link, MemChannel, NetError, TcpChannel};

const T: Duration = Duration::from_secs(5);

/// A listener on an ephemeral loopback port and its address.
fn listener() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap().to_string();
    (l, a)
}

#[test]
fn frames_round_trip_and_counters_match_the_socket() {
    let (l, addr) = listener();
    let server = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut c = TcpChannel::new(s, 1 << 20, T, Link::NONE).unwrap();
        for _ in 0..3 {
            let f = c.recv().unwrap();
            c.send(&f.iter().rev().copied().collect::<Vec<_>>())
                .unwrap();
        }
        c.counters()
    });
    let mut c = TcpChannel::connect(&addr, 1 << 20, T, Link::NONE).unwrap();
    let frames: [&[u8]; 3] = [b"", b"abc", &[7u8; 70_000]];
    for f in frames {
        c.send(f).unwrap();
        let back = c.recv().unwrap();
        assert_eq!(back, f.iter().rev().copied().collect::<Vec<_>>());
    }
    let mine = c.counters();
    let theirs = server.join().unwrap();
    let total: u64 = frames.iter().map(|f| 4 + f.len() as u64).sum();
    assert_eq!(mine.bytes_sent, total);
    assert_eq!(mine.bytes_received, total);
    assert_eq!(theirs.bytes_received, mine.bytes_sent);
    assert_eq!((mine.frames_sent, mine.flights, theirs.flights), (3, 3, 3));
}

/// A raw peer writes `bytes` then closes; returns what our side's recv says.
fn raw_peer(bytes: Vec<u8>, max: usize) -> NetError {
    let (l, addr) = listener();
    let peer = thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&bytes).unwrap();
    });
    let (s, _) = l.accept().unwrap();
    let mut c = TcpChannel::new(s, max, T, Link::NONE).unwrap();
    peer.join().unwrap();
    c.recv().unwrap_err()
}

#[test]
fn bad_frames_are_typed_errors() {
    assert_eq!(
        raw_peer(100u32.to_be_bytes().to_vec(), 50),
        NetError::Oversized { len: 100, max: 50 }
    );
    let mut trunc = 100u32.to_be_bytes().to_vec();
    trunc.extend_from_slice(&[1; 10]);
    assert_eq!(
        raw_peer(trunc, 1000),
        NetError::Truncated {
            expected: 100,
            actual: 10
        }
    );
    assert_eq!(
        raw_peer(vec![0, 0], 1000),
        NetError::Truncated {
            expected: 4,
            actual: 2
        }
    );
    assert_eq!(raw_peer(vec![], 1000), NetError::Disconnected);
    // Random bytes instead of a frame: an error, never a panic.
    let junk: Vec<u8> = (0..64u32).map(|i| (i * 37 % 251) as u8).collect();
    assert!(matches!(
        raw_peer(junk, 1 << 20),
        NetError::Oversized { .. } | NetError::Truncated { .. }
    ));
}

#[test]
fn a_stalled_peer_times_out() {
    let (l, addr) = listener();
    let _peer = TcpStream::connect(addr).unwrap();
    let (s, _) = l.accept().unwrap();
    let mut c = TcpChannel::new(s, 1000, Duration::from_millis(200), Link::NONE).unwrap();
    let t = Instant::now();
    assert_eq!(c.recv().unwrap_err(), NetError::Timeout { millis: 200 });
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn oversized_sends_are_refused_locally() {
    let (mut a, _b) = MemChannel::pair(10, T, Link::NONE);
    assert_eq!(
        a.send(&[0; 11]).unwrap_err(),
        NetError::Oversized { len: 11, max: 10 }
    );
}

#[test]
fn memory_channel_disconnect_and_timeout() {
    let (mut a, b) = MemChannel::pair(100, Duration::from_millis(50), Link::NONE);
    assert_eq!(a.recv().unwrap_err(), NetError::Timeout { millis: 50 });
    drop(b);
    assert_eq!(a.send(b"x").unwrap_err(), NetError::Disconnected);
    assert_eq!(a.recv().unwrap_err(), NetError::Disconnected);
}

#[test]
fn link_emulation_delays_by_bytes_and_rtt() {
    let link = Link::preset("gala-wan").unwrap();
    // 1 MB at 200 Mbit/s = 40 ms, plus half of the 13 ms RTT.
    let d = link.delay(1_000_000);
    assert!((d.as_secs_f64() - 0.0465).abs() < 1e-3, "{d:?}");
    let (mut a, mut b) = MemChannel::pair(2 << 20, T, link);
    let t = Instant::now();
    a.send(&vec![0; 1_000_000]).unwrap();
    b.recv().unwrap();
    assert!(t.elapsed() >= Duration::from_millis(45));
    let c = Link::custom("100mbit", "13ms").unwrap();
    assert_eq!(c.bandwidth_bps, Some(100e6));
    assert_eq!(c.rtt, Duration::from_millis(13));
    assert_eq!(
        Link::custom("100MB", "1s").unwrap().bandwidth_bps,
        Some(800e6)
    );
    assert!(matches!(
        Link::custom("fast", "13ms"),
        Err(NetError::BadLink { .. })
    ));
    assert!(matches!(
        Link::custom("10mbit", "13 parsecs"),
        Err(NetError::BadLink { .. })
    ));
    assert!(matches!(
        Link::preset("moon"),
        Err(NetError::BadLink { .. })
    ));
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// A peer that announces a frame and then sends one byte every 100 ms is cut off when
/// the frame's time is up (not after the frame: each byte alone would arrive well
/// within a per-read timeout), and the announced length is not allocated up front.
#[test]
fn a_dripping_peer_is_cut_off_at_the_frame_deadline() {
    let (l, addr) = listener();
    let drip = thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&(200u32 << 20).to_be_bytes()).unwrap();
        for _ in 0..40 {
            if s.write_all(b"x").is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    });
    let (s, _) = l.accept().unwrap();
    let before = peak_rss_kb();
    let mut c = TcpChannel::new(s, 256 << 20, Duration::from_millis(600), Link::NONE).unwrap();
    let t = Instant::now();
    let e = c.recv().unwrap_err();
    let took = t.elapsed();
    assert_eq!(e, NetError::Timeout { millis: 600 });
    assert!(took < Duration::from_millis(1500), "{took:?}");
    // 200 MiB announced, a handful of bytes received: far less than that allocated
    assert!(
        peak_rss_kb() < before + 50_000,
        "{before} → {}",
        peak_rss_kb()
    );
    drop(c);
    drip.join().unwrap();
}

/// A session deadline stops a peer that keeps every frame in time but never ends.
#[test]
fn the_session_deadline_ends_a_chatty_peer() {
    let (l, addr) = listener();
    let chatty = thread::spawn(move || {
        let mut c = TcpChannel::connect(&addr, 1 << 10, T, Link::NONE).unwrap();
        for _ in 0..50 {
            if c.send(b"still here").is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
    });
    let (s, _) = l.accept().unwrap();
    let mut c = TcpChannel::new(s, 1 << 10, T, Link::NONE).unwrap();
    c.set_deadline(Some(Instant::now() + Duration::from_millis(400)));
    let t = Instant::now();
    let e = loop {
        if let Err(e) = c.recv() {
            break e;
        }
    };
    assert!(
        matches!(e, NetError::Deadline { millis } if (390..=400).contains(&millis)),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_millis(900));
    drop(c);
    chatty.join().unwrap();
    // in memory too
    let (mut a, _b) = MemChannel::pair(1 << 10, T, Link::NONE);
    a.set_deadline(Some(Instant::now() + Duration::from_millis(50)));
    assert!(matches!(a.recv(), Err(NetError::Deadline { .. })));
}
