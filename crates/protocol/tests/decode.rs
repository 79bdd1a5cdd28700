//! Random frames never panic the decoder or the server: every one is a typed error, and
//! the server answers with a coarse `Abort`.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use he::Params;
use kernels::Method;
use net::{Channel, Link, MemChannel};
use proptest::prelude::*;
use protocol::{serve, LayerMethod, LayerShape, ProtocolError, ServedLayer, ServedLayers};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_frames_are_errors(frame in proptest::collection::vec(any::<u8>(), 0..300)) {
        let params = Params::preset("n4096").unwrap();
        let model = ServedLayers::new(vec![ServedLayer {
            shape: LayerShape::Matvec { rows: 2, cols: 4 },
            method: Some(LayerMethod::Matvec(Method::Gala)),
            weights: vec![1; 8],
        }]).unwrap();
        let (mut client, mut server) = MemChannel::pair(1 << 20, Duration::from_secs(5), Link::NONE);
        client.send(&frame).unwrap();
        let r = serve(&mut server, &params, &model, &Link::NONE);
        prop_assert!(r.is_err());
        prop_assert!(!matches!(r, Err(ProtocolError::Net(_))), "{r:?}");
    }

    #[test]
    fn the_decoder_never_panics(frame in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let _ = protocol::decode(&frame);
    }
}
