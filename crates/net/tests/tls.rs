//! TLS channels: frames as over plain TCP, an untrusted or misnamed server refused at
//! connect, client certificates when the server asks for them, bad PEM refused. (A byte
//! changed on the path: `crates/protocol/tests/tls.rs`, on whole sessions.)

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use net::{Channel, ClientTls, Link, NetError, ServerTls, TcpChannel};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

const T: Duration = Duration::from_secs(10);

/// A CA and what it signs.
struct Pki {
    ca_pem: String,
    params: CertificateParams,
    key: KeyPair,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let ca_pem = params.self_signed(&key).unwrap().pem();
        Pki {
            ca_pem,
            params,
            key,
        }
    }
    /// A leaf for `names`: (certificate PEM, key PEM).
    fn leaf(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn server_tls(pki: &Pki, client_ca: Option<&Pki>) -> ServerTls {
    let (cert, key) = pki.leaf(&["localhost", "127.0.0.1"]);
    ServerTls::from_pem(
        cert.as_bytes(),
        key.as_bytes(),
        client_ca.map(|c| c.ca_pem.as_bytes()),
    )
    .unwrap()
}

/// A server that echoes frames until the client leaves; its last error.
fn echo_server(tls: ServerTls) -> (String, thread::JoinHandle<NetError>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut ch = TcpChannel::accept_tls(s, &tls, 1 << 20, T, Link::NONE).unwrap();
        loop {
            match ch.recv() {
                Ok(f) => {
                    if let Err(e) = ch.send(&f) {
                        return e;
                    }
                }
                Err(e) => return e,
            }
        }
    });
    (addr, h)
}

#[test]
fn frames_over_tls_are_those_over_tcp_and_counted_without_tls_framing() {
    let pki = Pki::new("helina test CA");
    let (addr, h) = echo_server(server_tls(&pki, None));
    let tls = ClientTls::from_pem(pki.ca_pem.as_bytes(), None).unwrap();
    let mut c = TcpChannel::connect_tls(&addr, &tls, 1 << 20, T, Link::NONE).unwrap();
    assert!(c.is_tls());
    let frames: Vec<Vec<u8>> = vec![vec![], vec![7], (0..200_000u32).map(|i| i as u8).collect()];
    for f in &frames {
        c.send(f).unwrap();
        assert_eq!(&c.recv().unwrap(), f);
    }
    let payload: u64 = frames.iter().map(|f| 4 + f.len() as u64).sum();
    assert_eq!(c.counters().bytes_sent, payload);
    assert_eq!(c.counters().bytes_received, payload);
    c.close(Duration::from_millis(50));
    assert_eq!(h.join().unwrap(), NetError::Disconnected);
}

#[test]
fn a_server_the_client_does_not_trust_is_refused_at_connect() {
    let pki = Pki::new("the server's CA");
    let other = Pki::new("another CA");
    let (addr, _h) = echo_server(server_tls(&pki, None));
    let tls = ClientTls::from_pem(other.ca_pem.as_bytes(), None).unwrap();
    let e = TcpChannel::connect_tls(&addr, &tls, 1 << 20, T, Link::NONE).unwrap_err();
    match e {
        NetError::Tls { detail } => assert!(detail.contains("certificate"), "{detail}"),
        e => panic!("{e:?}"),
    }
}

#[test]
fn a_certificate_for_another_name_is_refused() {
    let pki = Pki::new("helina test CA");
    let (addr, _h) = echo_server(server_tls(&pki, None));
    let tls = ClientTls::from_pem(pki.ca_pem.as_bytes(), None)
        .unwrap()
        .with_server_name("helina.example.com");
    let e = TcpChannel::connect_tls(&addr, &tls, 1 << 20, T, Link::NONE).unwrap_err();
    assert!(matches!(e, NetError::Tls { .. }), "{e:?}");
}

#[test]
fn a_server_asking_for_client_certificates_admits_only_known_clients() {
    let pki = Pki::new("helina test CA");
    let clients = Pki::new("clients CA");
    // a client with a certificate of the clients' CA
    let (addr, h) = echo_server(server_tls(&pki, Some(&clients)));
    let (cert, key) = clients.leaf(&["client-1"]);
    let tls = ClientTls::from_pem(
        pki.ca_pem.as_bytes(),
        Some((cert.as_bytes(), key.as_bytes())),
    )
    .unwrap();
    let mut c = TcpChannel::connect_tls(&addr, &tls, 1 << 20, T, Link::NONE).unwrap();
    c.send(b"hello").unwrap();
    assert_eq!(c.recv().unwrap(), b"hello");
    drop(c);
    h.join().unwrap();
    // a client without one: the server ends the session in the handshake
    let (addr, h) = echo_server(server_tls(&pki, Some(&clients)));
    let tls = ClientTls::from_pem(pki.ca_pem.as_bytes(), None).unwrap();
    let outcome = TcpChannel::connect_tls(&addr, &tls, 1 << 20, T, Link::NONE).and_then(|mut c| {
        c.send(b"hello")?;
        c.recv()
    });
    assert!(outcome.is_err(), "{outcome:?}");
    assert!(matches!(h.join().unwrap(), NetError::Tls { .. }));
}

#[test]
fn bad_pem_is_a_configuration_error() {
    let e = ServerTls::from_pem(b"not a certificate", b"nor a key", None).unwrap_err();
    assert!(matches!(e, NetError::TlsConfig { .. }), "{e:?}");
    let pki = Pki::new("helina test CA");
    let (cert, _) = pki.leaf(&["localhost"]);
    let (_, other_key) = pki.leaf(&["localhost"]);
    let e = ServerTls::from_pem(cert.as_bytes(), other_key.as_bytes(), None).unwrap_err();
    assert!(matches!(e, NetError::TlsConfig { .. }), "{e:?}");
    let e =
        ClientTls::from_pem_files(std::path::Path::new("/nonexistent/ca.pem"), None).unwrap_err();
    match e {
        NetError::TlsConfig { detail } => assert!(detail.contains("/nonexistent/ca.pem")),
        e => panic!("{e:?}"),
    }
}
