//! The memory estimates `SilentParams::session_memory_bytes` and
//! `OtSpec::precompute_bytes` against the peak resident memory of this process (its
//! only test, so nothing else runs beside it).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use gc::{NonlinSpec, Nonlinear};
use net::{Link, MemChannel};
use ot::{client_online, server_online, OtSession, OtSpec, Role, SilentParams};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Peak and current resident set size in bytes (Linux), `None` elsewhere.
fn rss() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

#[test]
fn estimates_bound_the_peak_memory() {
    let p = 1099511480321u64;
    let spec = |count: usize| {
        OtSpec::faithful(NonlinSpec {
            p,
            op: Nonlinear::Relu,
            trunc_bits: 12,
            count,
        })
    };
    // the estimates themselves
    let d = SilentParams::DEFAULT;
    let leaves = 16 * (d.trees << d.depth) as u64;
    assert!(d.session_memory_bytes() >= 2 * leaves);
    assert!(d.session_memory_bytes() < 160 << 20);
    assert!(SilentParams::with_depth(13).session_memory_bytes() > d.session_memory_bytes());
    let (small, big) = (
        spec(1000).precompute_bytes(),
        spec(100_000).precompute_bytes(),
    );
    assert!(
        small > 0 && big > 20 * small && big < 100 << 20,
        "{small} {big}"
    );
    let bad = OtSpec::faithful(NonlinSpec {
        p,
        op: Nonlinear::Relu,
        trunc_bits: 12,
        count: ot::protocol::MAX_INPUTS + 1,
    });
    assert_eq!(bad.precompute_bytes(), u64::MAX);

    // both parties of a session with the default parameters in this process, two
    // layers that need refills in both directions
    let Some((_, before)) = rss() else {
        return;
    };
    let count = 12_000;
    let spec = spec(count);
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let c: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
    let s: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
    let (mut cch, mut sch) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(600), Link::NONE);
    let h = std::thread::spawn(move || {
        let mut sess = OtSession::new(&mut sch, Role::Server, d).unwrap();
        for _ in 0..2 {
            let pre = sess.server_offline(&mut sch, &spec).unwrap();
            server_online(&mut sch, pre, &s).unwrap();
        }
        sess.stats()
    });
    let mut sess = OtSession::new(&mut cch, Role::Client, d).unwrap();
    for _ in 0..2 {
        let pre = sess.client_offline(&mut cch, &spec).unwrap();
        client_online(&mut cch, pre, &c).unwrap();
    }
    let stats = h.join().unwrap();
    assert!(stats.batches_sc >= 2 && stats.batches_cs >= 2, "{stats:?}");
    let (peak, _) = rss().unwrap();
    // both parties' sessions; the online phase's working set (shares, messages,
    // circuit values) is a few MB at this size
    let bound = 2 * (d.session_memory_bytes() + spec.precompute_bytes()) + (16 << 20);
    println!(
        "peak resident memory grew by {:.1} MB for two sessions and two layers; estimate {:.1} MB \
         (session {:.1} MB, layer {:.1} MB)",
        (peak - before) as f64 / 1e6,
        bound as f64 / 1e6,
        d.session_memory_bytes() as f64 / 1e6,
        spec.precompute_bytes() as f64 / 1e6
    );
    assert!(
        peak - before <= bound,
        "peak grew by {} B, estimate {} B",
        peak - before,
        bound
    );
}
