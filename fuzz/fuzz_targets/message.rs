//! Every message deserialiser the server runs on peer data: the message decoder, then
//! the key material of `Setup` (public key, Galois keys) and the ciphertexts of `Query`
//! and `Response`, as a server built from real keys reads them. A public key that
//! passes the border is used as the server uses it: to encrypt flooded zeros and
//! re-randomise a ciphertext with them.
#![no_main]

use std::sync::OnceLock;

use he::{Backend, Bfv, GaloisSpec, Params, PublicKeys};
use libfuzzer_sys::fuzz_target;
use protocol::Msg;

fn setup() -> &'static (Params, Bfv, PublicKeys) {
    static S: OnceLock<(Params, Bfv, PublicKeys)> = OnceLock::new();
    S.get_or_init(|| {
        let params = Params::preset("n4096").expect("preset");
        let client = Bfv::keygen(&params, GaloisSpec::new([1])).expect("keys");
        let server = Bfv::server(&params, client.public_keys()).expect("server");
        let keys = client.public_keys().clone();
        (params, server, keys)
    })
}

/// Uses a server instance the way a session does: flooded zeros from its public key,
/// added to a ciphertext of its own, switched to the last level.
fn exercise(b: &Bfv) {
    if let (Ok(zero), Ok(pt)) = (b.encrypt_zero_flood(20), b.encode(&[1, 2, 3])) {
        if let Ok(sum) = b.add_plain(&zero, &pt) {
            let _ = b.switch_to_last(&sum);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (params, server, keys) = setup();
    // The first byte picks a path, so the fuzzer reaches the inner decoders directly too.
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => match protocol::decode(rest) {
            Ok(Msg::Setup(keys)) => {
                if let Ok(b) = Bfv::server(params, &keys) {
                    exercise(&b);
                }
            }
            Ok(Msg::Query { cts, .. }) | Ok(Msg::Response { cts, .. }) => {
                for c in cts {
                    let _ = server.deserialize(&c);
                }
            }
            _ => {}
        },
        1 => {
            let _ = server.deserialize(rest);
        }
        2 => {
            // a public key alone, beside the genuine Galois keys
            let k = PublicKeys {
                public_key: rest.to_vec(),
                ..keys.clone()
            };
            if let Ok(b) = Bfv::server(params, &k) {
                exercise(&b);
            }
        }
        _ => {
            let _ = server.prepared_from_bytes(rest);
        }
    }
});
