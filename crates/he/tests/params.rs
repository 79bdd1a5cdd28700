#![allow(clippy::unwrap_used)]
//! Parameter validation on both sides of every bound.

use he::{HeError, Moduli, Params, ParamsBuilder, P32};

#[test]
fn presets_build_and_respect_the_security_bound() {
    for name in he::PRESETS {
        let p = Params::preset(name).unwrap();
        assert!(p.log_q() <= he::max_log_q_128(p.n()).unwrap(), "{name}");
        assert_eq!(p.p() % (2 * p.n() as u64), 1, "{name}");
    }
    let n4096 = Params::preset("n4096").unwrap();
    assert_eq!((n4096.n(), n4096.log_q(), n4096.p_bits()), (4096, 109, 20));
    let n8192 = Params::preset("n8192").unwrap();
    assert_eq!((n8192.n(), n8192.log_q(), n8192.p_bits()), (8192, 218, 20));
    assert_eq!(Params::preset("n8192-p32").unwrap().p(), 4_293_918_721);
    assert!(matches!(
        Params::preset("n2048"),
        Err(HeError::UnknownPreset { .. })
    ));
}

#[test]
fn security_bound_is_checked_on_both_sides() {
    let p = he::batching_prime(20, 8192).unwrap();
    let ok = ParamsBuilder::new()
        .degree(8192)
        .plaintext(p)
        .moduli(Moduli::Bits(vec![54, 54, 55, 55]))
        .build();
    assert_eq!(ok.unwrap().log_q(), 218);
    let bad = ParamsBuilder::new()
        .degree(8192)
        .plaintext(p)
        .moduli(Moduli::Bits(vec![54, 54, 55, 56]))
        .build();
    assert_eq!(
        bad.unwrap_err(),
        HeError::InsecureModulus {
            n: 8192,
            log_q: 219,
            max_log_q: 218
        }
    );
    // GAZELLE/GALA's n = 2048 with a 60-bit q is above the 54-bit bound.
    let p2048 = he::batching_prime(20, 2048).unwrap();
    let gala = ParamsBuilder::new()
        .degree(2048)
        .plaintext(p2048)
        .moduli(Moduli::Bits(vec![60]))
        .build();
    assert!(matches!(
        gala,
        Err(HeError::InsecureModulus {
            n: 2048,
            log_q: 60,
            max_log_q: 54
        })
    ));
}

#[test]
fn batching_and_moduli_are_checked() {
    // 65537 ≡ 1 mod 2^17 supports n=8192; 65539 is not ≡ 1 mod 16384.
    let mk = |p: u64| {
        ParamsBuilder::new()
            .degree(8192)
            .plaintext(p)
            .moduli(Moduli::Bits(vec![44, 58, 58, 58]))
            .build()
    };
    assert!(mk(65537).is_ok());
    assert_eq!(
        mk(65539).unwrap_err(),
        HeError::NoBatching {
            p: 65539,
            n: 8192,
            two_n: 16384
        }
    );
    // 2^32 - 2^20 + 1 = 4293918721 is a batching prime for n = 8192.
    assert!(mk(P32).is_ok());
    // A composite ≡ 1 mod 2n: 16385 = 5 · 29 · 113.
    assert!(matches!(mk(16385), Err(HeError::NoBatching { .. })));
    // Explicit moduli must be NTT-friendly primes.
    let bad = ParamsBuilder::new()
        .degree(4096)
        .plaintext(he::batching_prime(20, 4096).unwrap())
        .moduli(Moduli::Explicit(vec![(1 << 36) + 1]))
        .build();
    assert!(matches!(bad, Err(HeError::InvalidModulus { index: 0, .. })));
    let bad = ParamsBuilder::new()
        .degree(3000)
        .plaintext(12289)
        .moduli(Moduli::Bits(vec![40]))
        .build();
    assert_eq!(bad.unwrap_err(), HeError::UnsupportedDegree { n: 3000 });
    // p too close to q.
    let bad = ParamsBuilder::new()
        .degree(4096)
        .plaintext(he::batching_prime(30, 4096).unwrap())
        .moduli(Moduli::Bits(vec![36, 36]))
        .build();
    assert!(matches!(bad, Err(HeError::PlaintextTooLarge { .. })));
}

#[test]
fn spec_round_trip_and_hash_includes_the_ntt_backend() {
    let p = Params::preset("n8192").unwrap();
    let q = Params::from_spec(&p.spec()).unwrap();
    assert_eq!(p, q);
    assert_eq!(p.hash(), q.hash());
    assert_ne!(p.hash(), Params::preset("n8192-p32").unwrap().hash());
    assert_eq!(he::NTT_BACKEND, "tfhe-ntt");
    assert_eq!(p.hash().len(), 32);
}

#[test]
fn error_messages_name_the_limit() {
    let e = HeError::InsecureModulus {
        n: 8192,
        log_q: 219,
        max_log_q: 218,
    };
    assert_eq!(
        e.to_string(),
        "insecure parameters: log2 q = 219 bits exceeds the 128-bit security bound of 218 bits for n = 8192"
    );
}

#[test]
fn the_network_moduli_are_the_presets_plaintext_moduli() {
    // nn::CANDIDATE_MODULI names these (p, preset) pairs; nn does not depend on he.
    for (p, name) in [
        (1_032_193u64, "n8192"),
        (16_760_833, "n8192-p24"),
        (268_369_921, "n8192-p28"),
        (4_293_918_721, "n8192-p32"),
        (68_719_230_977, "n8192-p36"),
        (1_099_511_480_321, "n8192-p40"),
        (17_592_186_028_033, "n8192-p44"),
    ] {
        let params = he::Params::preset(name).unwrap();
        assert_eq!(params.p(), p, "{name}");
        assert!(params.log_q_at(0) <= 218.0);
    }
}
