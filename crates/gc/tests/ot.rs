#![allow(clippy::unwrap_used)]
//! OT: Chou-Orlandi base OT and IKNP extension over an in-memory channel.

use std::time::Duration;

use gc::ot::{BaseOt, ChouOrlandi, IknpReceiver, IknpSender};
use net::{Link, MemChannel, DEFAULT_MAX_FRAME};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn pair() -> (MemChannel, MemChannel) {
    MemChannel::pair(DEFAULT_MAX_FRAME, Duration::from_secs(60), Link::NONE)
}

#[test]
fn base_ot_delivers_chosen_keys() {
    let (mut a, mut b) = pair();
    let choices: Vec<bool> = (0..128).map(|i| i % 3 == 1).collect();
    let ch2 = choices.clone();
    let h = std::thread::spawn(move || {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        ChouOrlandi.send(&mut a, &mut rng, 128).unwrap()
    });
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let got = ChouOrlandi.receive(&mut b, &mut rng, &ch2).unwrap();
    let pairs = h.join().unwrap();
    for ((pair, c), k) in pairs.iter().zip(&choices).zip(&got) {
        assert_eq!(pair[*c as usize], *k);
        assert_ne!(pair[!*c as usize], *k);
    }
}

#[test]
fn base_ot_rejects_bad_point() {
    let (mut a, mut b) = pair();
    let h = std::thread::spawn(move || {
        use net::Channel;
        a.send(&[0xffu8; 32]).unwrap(); // not a canonical Ristretto encoding
        a
    });
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let r = ChouOrlandi.receive(&mut b, &mut rng, &[true; 4]);
    assert!(
        matches!(r, Err(gc::GcError::InvalidPoint { index: 0 })),
        "{r:?}"
    );
    drop(h.join().unwrap());
}

fn chosen(n: usize, seed: u64) {
    let (mut a, mut b) = pair();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let msgs: Vec<[u128; 2]> = (0..n).map(|_| [rng.random(), rng.random()]).collect();
    let choices: Vec<bool> = (0..n).map(|_| rng.random()).collect();
    let m2 = msgs.clone();
    let h = std::thread::spawn(move || {
        let mut rng = ChaCha20Rng::seed_from_u64(seed + 1);
        let mut s = IknpSender::setup(&mut ChouOrlandi, &mut a, &mut rng, None).unwrap();
        s.send(&mut a, &m2).unwrap();
        // a second extension on the same setup
        let pads = s.extend_random(&mut a, 3).unwrap();
        (pads, s.delta())
    });
    let mut rng2 = ChaCha20Rng::seed_from_u64(seed + 2);
    let mut r = IknpReceiver::setup(&mut ChouOrlandi, &mut b, &mut rng2).unwrap();
    let got = r.receive(&mut b, &choices).unwrap();
    let c3 = [true, false, true];
    let pads_r = r.extend_random(&mut b, &c3).unwrap();
    let (pads, _delta) = h.join().unwrap();
    assert_eq!(got.len(), n);
    for i in 0..n {
        let c = choices[i] as usize;
        assert_eq!(got[i], msgs[i][c], "OT {i}");
        assert_ne!(
            got[i],
            msgs[i][1 - c],
            "receiver holds the other message at {i}"
        );
    }
    for i in 0..3 {
        assert_eq!(pads_r[i], pads[i][c3[i] as usize]);
        assert_ne!(pads_r[i], pads[i][1 - c3[i] as usize]);
    }
}

#[test]
fn iknp_odd_lengths() {
    for (k, n) in [1usize, 127, 128, 129, 1000].into_iter().enumerate() {
        chosen(n, 10 * k as u64);
    }
}

#[test]
fn iknp_100k() {
    chosen(100_000, 99);
}

#[test]
fn iknp_cot_correlation() {
    let (mut a, mut b) = pair();
    let n = 777;
    let choices: Vec<bool> = (0..n).map(|i| (i * 7) % 5 < 2).collect();
    let h = std::thread::spawn(move || {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let mut s = IknpSender::setup(&mut ChouOrlandi, &mut a, &mut rng, Some(0xabc1)).unwrap();
        (s.extend_cot(&mut a, n).unwrap(), s.delta())
    });
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let mut r = IknpReceiver::setup(&mut ChouOrlandi, &mut b, &mut rng).unwrap();
    let t = r.extend_cot(&mut b, &choices).unwrap();
    let (q, delta) = h.join().unwrap();
    assert_eq!(delta, 0xabc1);
    for i in 0..n {
        assert_eq!(q[i], t[i] ^ if choices[i] { delta } else { 0 });
    }
}

#[test]
fn iknp_length_mismatch_is_typed() {
    let (mut a, mut b) = pair();
    let h = std::thread::spawn(move || {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let mut s = IknpSender::setup(&mut ChouOrlandi, &mut a, &mut rng, None).unwrap();
        s.extend_cot(&mut a, 1000)
    });
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let mut r = IknpReceiver::setup(&mut ChouOrlandi, &mut b, &mut rng).unwrap();
    let _ = r.extend_cot(&mut b, &[true; 300]).unwrap();
    let res = h.join().unwrap();
    assert!(
        matches!(res, Err(gc::GcError::Length { expected, actual, .. }) if expected == 128 * 128 && actual == 128 * 48),
        "{res:?}"
    );
}
