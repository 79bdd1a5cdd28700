//! Silent COT correlations, random / chosen / 1-of-2^k OT against their definitions.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use net::{Link, MemChannel};
use ot::{OtSession, Role, SilentParams};

fn pair(params: SilentParams) -> (OtSession, OtSession, MemChannel, MemChannel) {
    let (mut a, mut b) =
        MemChannel::pair(net::DEFAULT_MAX_FRAME, Duration::from_secs(120), Link::NONE);
    let h = std::thread::spawn(move || {
        let s = OtSession::new(&mut a, Role::Server, params).unwrap();
        (s, a)
    });
    let c = OtSession::new(&mut b, Role::Client, params).unwrap();
    let (s, a) = h.join().unwrap();
    (s, c, a, b)
}

#[test]
fn cot_correlation_both_directions_across_batches() {
    let params = SilentParams::with_depth(8);
    let (mut s, mut c, mut sch, mut cch) = pair(params);
    // more than one batch's worth forces a refill inside the call
    let n = params.usable() + 1000;
    let h = std::thread::spawn(move || {
        let sc = s.cot_send(&mut sch, n).unwrap();
        let cs = s.cot_receive(&mut sch, n).unwrap();
        (sc, cs)
    });
    let sc_r = c.cot_receive(&mut cch, n).unwrap();
    let cs_s = c.cot_send(&mut cch, n).unwrap();
    let ((d_s, v_sc), (b_cs, w_cs)) = h.join().unwrap();
    let (b_sc, w_sc) = sc_r;
    let (d_c, v_cs) = cs_s;
    assert_ne!(d_s, d_c);
    assert_eq!(d_s & 1, 1);
    for i in 0..n {
        assert_eq!(w_sc[i], v_sc[i] ^ if b_sc[i] { d_s } else { 0 }, "SC {i}");
        assert_eq!(w_cs[i], v_cs[i] ^ if b_cs[i] { d_c } else { 0 }, "CS {i}");
    }
    let ones = b_sc.iter().filter(|&&b| b).count();
    assert!(
        ones > n / 3 && ones < 2 * n / 3,
        "choice bits look biased: {ones}/{n}"
    );
    let mut sorted = v_sc.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), n, "sender outputs repeat");
    assert!(v_sc.iter().all(|&x| x != 0));
}

/// Runs `server` and `client` closures on a fresh session pair.
fn with_sessions<A: Send + 'static, B>(
    params: SilentParams,
    server: impl FnOnce(&mut OtSession, &mut MemChannel) -> A + Send + 'static,
    client: impl FnOnce(&mut OtSession, &mut MemChannel) -> B,
) -> (A, B) {
    let (mut s, mut c, mut sch, mut cch) = pair(params);
    let h = std::thread::spawn(move || server(&mut s, &mut sch));
    let b = client(&mut c, &mut cch);
    (h.join().unwrap(), b)
}

#[test]
fn random_ot_matches_definition() {
    let n = 5000;
    let (pairs, (b, m)) = with_sessions(
        SilentParams::with_depth(6),
        move |s, ch| s.rot_send(ch, n).unwrap(),
        move |c, ch| c.rot_receive(ch, n).unwrap(),
    );
    for i in 0..n {
        assert_eq!(m[i], pairs[i][b[i] as usize]);
        assert_ne!(m[i], pairs[i][1 - b[i] as usize]);
    }
    // the other direction too
    let (got, sent) = with_sessions(
        SilentParams::with_depth(6),
        move |s, ch| s.rot_receive(ch, 100).unwrap(),
        move |c, ch| c.rot_send(ch, 100).unwrap(),
    );
    for i in 0..100 {
        assert_eq!(got.1[i], sent[i][got.0[i] as usize]);
    }
}

#[test]
fn chosen_ot_and_kot_match_definition() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
    for k in 1..=8usize {
        let inst = 64;
        let msgs: Vec<Vec<u128>> = (0..inst)
            .map(|_| (0..1 << k).map(|_| rng.random()).collect())
            .collect();
        let choices: Vec<u8> = (0..inst)
            .map(|_| rng.random_range(0..1u32 << k) as u8)
            .collect();
        let m2 = msgs.clone();
        let ch2 = choices.clone();
        let ((), got) = with_sessions(
            SilentParams::with_depth(5),
            move |s, ch| s.kot_send(ch, k, &m2).unwrap(),
            move |c, ch| c.kot_receive(ch, k, &ch2).unwrap(),
        );
        for i in 0..inst {
            assert_eq!(
                got[i], msgs[i][choices[i] as usize],
                "k = {k}, instance {i}"
            );
        }
    }
    let msgs: Vec<[u128; 2]> = (0..300).map(|i| [i as u128, (i as u128) << 64]).collect();
    let choices: Vec<bool> = (0..300).map(|i| i % 3 == 0).collect();
    let (m2, c2) = (msgs.clone(), choices.clone());
    let ((), got) = with_sessions(
        SilentParams::with_depth(5),
        move |s, ch| s.ot_send(ch, &m2).unwrap(),
        move |c, ch| c.ot_receive(ch, &c2).unwrap(),
    );
    for i in 0..300 {
        assert_eq!(got[i], msgs[i][choices[i] as usize]);
    }
    // bad arguments are errors
    let ((), e) = with_sessions(
        SilentParams::with_depth(5),
        |_, _| (),
        |c, ch| c.kot_receive(ch, 3, &[8]).unwrap_err(),
    );
    assert!(matches!(e, ot::OtError::InvalidSpec(_)));
}

/// 10⁶ COTs of the default parameters (two batches; about a second in debug).
#[test]
fn cot_correlation_million() {
    let params = SilentParams::DEFAULT;
    let (mut s, mut c, mut sch, mut cch) = pair(params);
    let n = 1_000_000;
    let h = std::thread::spawn(move || s.cot_send(&mut sch, n).unwrap());
    let (b, w) = c.cot_receive(&mut cch, n).unwrap();
    let (d, v) = h.join().unwrap();
    let bad = (0..n)
        .filter(|&i| w[i] != v[i] ^ if b[i] { d } else { 0 })
        .count();
    assert_eq!(bad, 0);
    let ones = b.iter().filter(|&&x| x).count();
    assert!((ones as f64 / n as f64 - 0.5).abs() < 0.01, "{ones}");
    let mut sorted = v.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), n);
}
