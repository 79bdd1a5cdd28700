//! Every message deserialiser the server runs on peer data: the message decoder, then
//! the key material of `Setup` (public key, Galois keys) and the ciphertexts of `Query`
//! and `Response`, as a server built from real keys reads them.
#![no_main]

use std::sync::OnceLock;

use he::{Backend, Bfv, GaloisSpec, Params};
use libfuzzer_sys::fuzz_target;
use protocol::Msg;

fn setup() -> &'static (Params, Bfv) {
    static S: OnceLock<(Params, Bfv)> = OnceLock::new();
    S.get_or_init(|| {
        let params = Params::preset("n4096").expect("preset");
        let client = Bfv::keygen(&params, GaloisSpec::new([1])).expect("keys");
        let server = Bfv::server(&params, client.public_keys()).expect("server");
        (params, server)
    })
}

fuzz_target!(|data: &[u8]| {
    let (params, server) = setup();
    // The first byte picks a path, so the fuzzer reaches the inner decoders directly too.
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => match protocol::decode(rest) {
            Ok(Msg::Setup(keys)) => {
                let _ = Bfv::server(params, &keys);
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
        _ => {
            let _ = server.prepared_from_bytes(rest);
        }
    }
});
