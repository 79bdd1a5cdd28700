//! Benchmark: 10^4 ReLUs with truncation by 12 bits at p = 1099511480321 (40-bit) and
//! p = 1032193 (20-bit), both parties in one process over an in-memory channel.
//!
//! `CARGO_TARGET_DIR=/work/target-ot cargo test -p ot --release --test bench -- --ignored --nocapture`
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use gc::{NonlinSpec, Nonlinear};
use net::{Link, MemChannel};
use ot::{run_over_with, OtSpec, RunOptions, SilentParams, Truncation};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn one(p: u64, f: u32, trunc: Truncation, count: usize, warmup: usize, ns_per_cot: f64) {
    let spec = OtSpec {
        spec: NonlinSpec {
            p,
            op: Nonlinear::Relu,
            trunc_bits: f,
            count,
        },
        trunc,
        inputs_within_quarter: false,
        pooling: None,
        high_bits_drelu: false,
        coarse_drelu_bits: 0,
    };
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let y: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
    let c: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
    let s: Vec<u64> = y.iter().zip(&c).map(|(y, c)| (y + p - c) % p).collect();
    let (cch, sch) = MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(300), Link::NONE);
    let opts = RunOptions {
        params: SilentParams::DEFAULT,
        warmup,
    };
    let (zc, zs, r) = run_over_with(&spec, opts, &c, &s, cch, sch).unwrap();
    let want = gc::reference(&spec.spec, &y);
    let exact = zc
        .iter()
        .zip(&zs)
        .zip(&want)
        .filter(|((a, b), w)| (*a + *b) % p == **w)
        .count();
    let within1 = zc
        .iter()
        .zip(&zs)
        .zip(&want)
        .filter(|((a, b), w)| {
            let g = (*a + *b) % p;
            g == **w || (g + 1) % p == **w
        })
        .count();
    let per_relu_wire = (r.bytes_offline - r.bytes_refill + r.bytes_online) as f64 / count as f64;
    println!(
        "p = {p} ({} bits), {count} x ReLU, trunc {f} ({trunc:?}), warm-up layers {warmup}:\n  \
         online  {:8.1} ms {:10} B, {} flights ({} counted)\n  \
         offline {:8.1} ms {:10} B (silent-OT refill {:.1} ms, {} B)\n  \
         session setup {:8.1} ms {:10} B\n  \
         COTs {} ({:.1} per ReLU), silent OT {:.3} B per COT\n  \
         bytes per ReLU: {:.1} on the wire (offline without refills + online) + {:.1} amortised silent OT = {:.1}\n  \
         exact {exact}/{count}, within one {within1}/{count}\n  \
         end to end with amortised silent OT ({ns_per_cot:.1} ns per COT): {:.1} ms = online + offline without refills + COTs",
        64 - p.leading_zeros(),
        r.online_ms,
        r.bytes_online,
        r.rounds_online,
        r.flights_counted,
        r.offline_ms,
        r.bytes_offline,
        r.refill_ms,
        r.bytes_refill,
        r.setup_ms,
        r.bytes_setup,
        r.cots,
        r.cots_per_element,
        r.bytes_per_cot,
        per_relu_wire,
        r.cots as f64 * r.bytes_per_cot / count as f64,
        r.bytes_per_element,
        r.online_ms + (r.offline_ms - r.refill_ms) + r.cots as f64 * ns_per_cot * 1e-6,
    );
    assert_eq!(within1, count);
    if trunc == Truncation::Faithful {
        assert_eq!(exact, count);
    }
}

#[test]
#[ignore]
fn relu_10k() {
    let (ns, cpu) = silent_rate(SilentParams::DEFAULT, 3);
    println!("silent OT: {ns:.1} ns per COT (both parties, wall), CPU {cpu:.1} ns");
    for p in [1099511480321u64, 1032193] {
        for trunc in [Truncation::Approximate, Truncation::Faithful] {
            one(p, 12, trunc, 10_000, 1, ns);
        }
        one(p, 0, Truncation::Faithful, 10_000, 1, ns);
    }
}

/// CPU time of this process so far (all threads, including finished ones), in
/// seconds; `None` off Linux.
fn cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // fields after the parenthesised command name: utime and stime are the 12th and
    // 13th
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Silent-OT throughput: `batches − 1` refills of direction SC after the session's
/// first batch, consumed in chunks of 100 000 COTs as the layers take them (both
/// parties on this host). Returns the wall time per COT and the CPU time of both
/// parties together per COT, in ns.
fn silent_rate(params: SilentParams, batches: usize) -> (f64, f64) {
    use ot::{OtSession, Role};
    let (mut a, mut b) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(300), Link::NONE);
    let n = params.usable() * batches;
    let chunk = 100_000;
    let (ready, go) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let mut s = OtSession::new(&mut a, Role::Server, params).unwrap();
        ready.send(()).unwrap();
        let t = std::time::Instant::now();
        let mut left = n;
        while left > 0 {
            let k = left.min(chunk);
            s.cot_send(&mut a, k).unwrap();
            left -= k;
        }
        t.elapsed().as_secs_f64()
    });
    let mut c = OtSession::new(&mut b, Role::Client, params).unwrap();
    go.recv().unwrap();
    let cpu0 = cpu_secs();
    let t = std::time::Instant::now();
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk);
        c.cot_receive(&mut b, k).unwrap();
        left -= k;
    }
    let tc = t.elapsed().as_secs_f64();
    let ts = h.join().unwrap();
    let cpu = cpu_secs().zip(cpu0).map(|(a, b)| a - b);
    let cots = (params.usable() * (batches - 1)) as f64;
    (
        tc.max(ts) * 1e9 / cots,
        cpu.map_or(f64::NAN, |c| c * 1e9 / cots),
    )
}

/// The depths around the default, twice in turn (the machine drifts), each over about
/// 3.2 M COTs: the comparison behind [`SilentParams::DEFAULT`]'s depth.
#[test]
#[ignore]
fn silent_throughput() {
    for depth in [10, 11, 12, 10, 11, 12] {
        let params = SilentParams::with_depth(depth);
        let batches = 1 + (1 << (14 - depth));
        let (wall, cpu) = silent_rate(params, batches);
        println!(
            "silent OT t = {}, h = {}: {} batches of {} usable COTs: {:.1} ns per COT (both parties, wall), CPU {:.1} ns per COT (both parties together), {:.3} B per COT",
            params.trees,
            params.depth,
            batches - 1,
            params.usable(),
            wall,
            cpu,
            (params.message_bytes() + 4) as f64 / params.usable() as f64,
        );
    }
}

/// Wall time per COT (both parties on this host) of `rounds` refill rounds that each make
/// `sc` batches of direction SC and `cs` of direction CS (`OtSession::reserve`), every
/// COT then taken: `(1, 0)` is a round of one direction, as most of a layer's refills
/// are; `(1, 1)` a round of both, where each party compresses its sender batch on a
/// second thread while it expands and compresses its receiver batch.
fn round_rate(sc: usize, cs: usize, rounds: usize) -> f64 {
    use ot::{OtSession, Role};
    let params = SilentParams::DEFAULT;
    let u = params.usable();
    // one party's rounds (the server sends direction SC, the client CS): its wall time
    let run = move |ch: &mut MemChannel, role: Role| {
        let mut s = OtSession::new(ch, role, params).unwrap();
        let (mine, theirs) = match role {
            Role::Server => (sc * u, cs * u),
            Role::Client => (cs * u, sc * u),
        };
        let t = std::time::Instant::now();
        for _ in 0..rounds {
            s.reserve(ch, sc * u, cs * u).unwrap();
            if mine > 0 {
                s.cot_send(ch, mine).unwrap();
            }
            if theirs > 0 {
                s.cot_receive(ch, theirs).unwrap();
            }
        }
        t.elapsed().as_secs_f64()
    };
    let (mut a, mut b) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(300), Link::NONE);
    let h = std::thread::spawn(move || run(&mut a, Role::Server));
    let tc = run(&mut b, Role::Client);
    let ts = h.join().unwrap();
    tc.max(ts) * 1e9 / ((sc + cs) * u * rounds) as f64
}

/// Refill rounds of one direction against rounds of both, alternating, 64 batches each
/// time (five times): why a take pairs its first refill with the other direction only
/// when that pool runs low (`ot::session::refill_rounds`) rather than balancing the
/// directions.
#[test]
#[ignore]
fn silent_rounds_one_or_both_directions() {
    for _ in 0..5 {
        let one = round_rate(1, 0, 64);
        let both = round_rate(1, 1, 32);
        println!(
            "silent OT refill rounds: one direction {one:.1} ns per COT, both directions {both:.1} ns per COT (both parties, wall)"
        );
    }
}

/// Steady state of a long session: `layers` consecutive layers of 10^4 ReLUs in one
/// session (after the setup), offline and online each, with every silent-OT refill
/// they trigger; wall time per layer (both parties on this host) and bytes per ReLU.
fn steady(p: u64, f: u32, trunc: Truncation, count: usize, layers: usize) {
    use ot::{OtSession, Role};
    let spec = OtSpec {
        spec: NonlinSpec {
            p,
            op: Nonlinear::Relu,
            trunc_bits: f,
            count,
        },
        trunc,
        inputs_within_quarter: false,
        pooling: None,
        high_bits_drelu: false,
        coarse_drelu_bits: 0,
    };
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let y: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
    let c: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
    let s: Vec<u64> = y.iter().zip(&c).map(|(y, c)| (y + p - c) % p).collect();
    let (mut cch, mut sch) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(300), Link::NONE);
    let (ready, go) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        use net::Channel;
        let mut sess = OtSession::new(&mut sch, Role::Server, SilentParams::DEFAULT).unwrap();
        ready.send(()).unwrap();
        let c0 = sch.counters();
        let t = std::time::Instant::now();
        let mut out = Vec::new();
        for _ in 0..layers {
            let pre = sess.server_offline(&mut sch, &spec).unwrap();
            out = ot::server_online(&mut sch, pre, &s).unwrap();
        }
        let c1 = sch.counters();
        (
            t.elapsed().as_secs_f64(),
            out,
            c1.bytes_sent + c1.bytes_received - c0.bytes_sent - c0.bytes_received,
            sess.stats(),
        )
    });
    let mut sess = OtSession::new(&mut cch, Role::Client, SilentParams::DEFAULT).unwrap();
    go.recv().unwrap();
    let refill0 = sess.stats().refill_ms;
    let cpu0 = cpu_secs();
    let t = std::time::Instant::now();
    let mut out = Vec::new();
    for _ in 0..layers {
        let pre = sess.client_offline(&mut cch, &spec).unwrap();
        out = ot::client_online(&mut cch, pre, &c).unwrap();
    }
    let tc = t.elapsed().as_secs_f64();
    let refill_c = sess.stats().refill_ms - refill0;
    let (ts, sout, bytes, stats) = h.join().unwrap();
    let cpu = cpu_secs().zip(cpu0).map(|(a, b)| a - b);
    let want = gc::reference(&spec.spec, &y);
    let ok = out
        .iter()
        .zip(&sout)
        .zip(&want)
        .filter(|((a, b), w)| {
            let g = (*a + *b) % p;
            g == **w || (g + 1) % p == **w
        })
        .count();
    assert_eq!(ok, count);
    let per = tc.max(ts) / layers as f64;
    println!(
        "steady state p = {p} ({} bits), {count} x ReLU, trunc {f} ({trunc:?}), {layers} layers in one session: \
         {:.1} ms per layer (wall, all refills included, {:.1} ms of it in the client's refills; CPU {:.1} ms both parties), \
         {:.1} B per ReLU on the wire (refills included), {} + {} silent batches, session setup {:.1} ms {} B",
        64 - p.leading_zeros(),
        per * 1e3,
        refill_c / layers as f64,
        cpu.map_or(f64::NAN, |c| c * 1e3 / layers as f64),
        bytes as f64 / (layers * count) as f64,
        stats.batches_sc,
        stats.batches_cs,
        stats.setup_ms,
        stats.setup_bytes,
    );
}

#[test]
#[ignore]
fn relu_10k_steady() {
    for p in [1099511480321u64, 1032193] {
        for trunc in [Truncation::Approximate, Truncation::Faithful] {
            steady(p, 12, trunc, 10_000, 8);
        }
    }
}
