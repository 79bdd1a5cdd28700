//! Sessions over TLS: a single-layer session (public demo weights, the output revealed
//! so that the client can check it) gives the plaintext result over TLS as over TCP;
//! through a relay that flips one bit of the server's stream, every TLS session ends
//! with a TLS error and none with a result, while over plain TCP some sessions end
//! with a wrong result and no error at all.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use common::{opts, params, server, wait_for, MAX, SHAPE, T};
use net::{ClientTls, Link, NetError, ServerTls, TcpChannel};
use protocol::{query, LayerRequest, ProtocolError, ServeOptions, ServedLayers};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// A CA, and a server certificate for 127.0.0.1 signed by it: (server TLS, client TLS).
fn pki() -> (ServerTls, ClientTls) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &Issuer::from_params(&ca, &ca_key))
        .unwrap();
    (
        ServerTls::from_pem(leaf.pem().as_bytes(), key.serialize_pem().as_bytes(), None).unwrap(),
        ClientTls::from_pem(ca_pem.as_bytes(), None).unwrap(),
    )
}

/// A relay in front of `target` for one connection, flipping one bit of the server's
/// stream at byte `at` (none if `None`).
fn relay(target: String, at: Option<usize>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    thread::spawn(move || {
        let (client, _) = l.accept().unwrap();
        let upstream = TcpStream::connect(target).unwrap();
        let (mut c_r, mut u_w) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
        thread::spawn(move || {
            let _ = std::io::copy(&mut c_r, &mut u_w);
            let _ = u_w.shutdown(std::net::Shutdown::Write);
        });
        let (mut u_r, mut c_w) = (upstream, client);
        let mut buf = [0u8; 4096];
        let mut seen = 0usize;
        loop {
            let k = match u_r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => k,
            };
            if let Some(at) = at.filter(|a| (seen..seen + k).contains(a)) {
                buf[at - seen] ^= 0x04;
            }
            seen += k;
            if c_w.write_all(&buf[..k]).is_err() {
                break;
            }
        }
        let _ = c_w.shutdown(std::net::Shutdown::Write);
    });
    addr
}

const X: [u64; 8] = [3, 1, 4, 1, 5, 9, 2, 6];

/// The one session: its revealed output, or the error.
fn session(addr: &str, tls: Option<&ClientTls>) -> Result<Vec<u64>, ProtocolError> {
    let mut ch = match tls {
        Some(t) => TcpChannel::connect_tls(addr, t, MAX, T, Link::NONE)?,
        None => TcpChannel::connect(addr, MAX, T, Link::NONE)?,
    };
    let out = query(
        &mut ch,
        params(),
        LayerRequest {
            shape: SHAPE,
            method: None,
        },
        &[X.to_vec()],
        true,
        &mut |_| {},
    )?;
    Ok(out.revealed.unwrap().remove(0))
}

/// Runs `offsets.len() + 1` sessions (a clean one first) through flipping relays:
/// the results of the flipped ones, at `fractions` of the clean one's server stream.
fn through_relays(
    tls: Option<(ServerTls, ClientTls)>,
    fractions: &[f64],
) -> Vec<Result<Vec<u64>, ProtocolError>> {
    let (stls, ctls) = match tls {
        Some((s, c)) => (Some(s), Some(c)),
        None => (None, None),
    };
    let want = vec![X.iter().sum::<u64>(); 2]; // W = all ones
    let n = fractions.len() + 1;
    let (addr, reports, h) = server(
        ServedLayers::public_demo(common::layers()).unwrap(),
        n,
        ServeOptions {
            tls: stls,
            ..opts()
        },
    );
    assert_eq!(
        session(&relay(addr.clone(), None), ctls.as_ref()).unwrap(),
        want
    );
    wait_for(&reports, 1);
    let sent = reports.lock().unwrap()[0].counters.bytes_sent as f64;
    let out = fractions
        .iter()
        .map(|f| {
            session(
                &relay(addr.clone(), Some((f * sent) as usize)),
                ctls.as_ref(),
            )
        })
        .collect();
    h.join().unwrap();
    out
}

/// Flips spread over the server's stream: the plan, the response's ciphertext, the
/// share.
const FRACTIONS: [f64; 12] = [
    0.001, 0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.995,
];

#[test]
fn a_flipped_bit_ends_every_tls_session_with_a_tls_error() {
    for r in through_relays(Some(pki()), &FRACTIONS) {
        match r {
            Err(ProtocolError::Net(NetError::Tls { .. }))
            | Err(ProtocolError::PeerAborted(_))
            | Err(ProtocolError::Net(NetError::Disconnected)) => {}
            r => panic!("a tampered TLS session ended with {r:?}"),
        }
    }
}

#[test]
fn over_plain_tcp_a_flipped_bit_can_change_the_result_silently() {
    let want = vec![X.iter().sum::<u64>(); 2];
    let wrong = through_relays(None, &FRACTIONS)
        .into_iter()
        .filter(|r| matches!(r, Ok(v) if *v != want))
        .count();
    assert!(wrong > 0, "no flipped session gave a wrong result");
}
