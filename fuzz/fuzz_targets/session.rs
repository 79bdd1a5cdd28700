//! Whole server sessions fed with the fuzzer's frames, past the first frame: a
//! one-layer session (`protocol::serve`) and a network session
//! (`NetworkServer::serve`), the same session engine, each started with genuine frames up to a stage the first
//! byte picks (none, the Hello, the Hello and the keys) and continued with frames cut
//! from the fuzzer's bytes (a 2-byte length before each). Nothing may panic; every bad
//! frame ends the session with a typed error.
#![no_main]

use std::sync::OnceLock;

use he::{Bfv, GaloisSpec, Params};
use libfuzzer_sys::fuzz_target;
use net::{Channel, Counters, Link, NetError};
use protocol::{
    LayerMethod, LayerRequest, LayerShape, ServedLayers, Msg, NetworkPlan, NetworkServer, ServedLayer,
};

/// A peer whose first frames are genuine and the rest the fuzzer's.
struct Scripted<'a> {
    genuine: Vec<Vec<u8>>,
    data: &'a [u8],
}

impl Channel for Scripted<'_> {
    fn send(&mut self, _frame: &[u8]) -> net::Result<()> {
        Ok(())
    }
    fn recv(&mut self) -> net::Result<Vec<u8>> {
        if !self.genuine.is_empty() {
            return Ok(self.genuine.remove(0));
        }
        if self.data.len() < 2 {
            return Err(NetError::Disconnected);
        }
        let len =
            (u16::from_le_bytes([self.data[0], self.data[1]]) as usize).min(self.data.len() - 2);
        let frame = self.data[2..2 + len].to_vec();
        self.data = &self.data[2 + len..];
        Ok(frame)
    }
    fn counters(&self) -> Counters {
        Counters::default()
    }
}

const SHAPE: LayerShape = LayerShape::Matvec { rows: 2, cols: 8 };

struct Fixture {
    params: Params,
    model: ServedLayers,
    /// Hello and Setup of a one-layer session.
    layer_frames: Vec<Vec<u8>>,
    network: NetworkServer,
    /// Hello and Setup of a network session.
    network_frames: Vec<Vec<u8>>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let params = Params::preset("n8192").expect("preset");
        let method = LayerMethod::Matvec(kernels::Method::Gala);
        let model = ServedLayers::new(vec![ServedLayer {
            shape: SHAPE,
            method: Some(method),
            weights: vec![3; 16],
        }])
        .expect("model");
        let plan = protocol::LayerLayout::new(&SHAPE.with(method).expect("spec"), &params).expect("plan");
        let client = Bfv::keygen(&params, plan.galois()).expect("keys");
        let hello = Msg::Hello {
            version: protocol::PROTOCOL_VERSION,
            inputs: 1,
            layers: vec![LayerRequest {
                shape: SHAPE,
                method: None,
            }],
            reveal: false,
        };
        let setup = Msg::Setup(client.public_keys().clone());
        let layer_frames = vec![
            protocol::encode(&hello).expect("hello"),
            protocol::encode(&setup).expect("setup"),
        ];
        // a two-layer MLP 4 → 3 → 2 with a ReLU, lowered at 6 fractional bits
        let mut net = nn::Network::new("x", vec![4]);
        let h = net
            .push(
                "fc1",
                "h",
                nn::Op::Linear {
                    rows: 3,
                    cols: 4,
                    weight: vec![0.5; 12],
                    bias: None,
                },
                vec![0],
            )
            .expect("fc1");
        let r = net.push("relu", "r", nn::Op::Relu, vec![h]).expect("relu");
        net.push(
            "fc2",
            "y",
            nn::Op::Linear {
                rows: 2,
                cols: 3,
                weight: vec![-0.25; 6],
                bias: None,
            },
            vec![r],
        )
        .expect("fc2");
        let prog = nn::lower(&net, 6, params.p()).expect("program");
        let plan = NetworkPlan::auto(prog.clone(), &params).expect("plan");
        // garbled circuits keep an execution cheap; the silent-OT messages have their
        // own target (ot_messages)
        let network = NetworkServer::new(
            &plan,
            protocol::NonlinearProtocol::GarbledCircuits(gc::Garbler::Server),
        )
        .expect("network server");
        let galois = plan.layers.iter().fold(GaloisSpec::none(), |g, l| {
            g.union(
                &protocol::LayerLayout::new(&l.pick, &params)
                    .expect("plan")
                    .galois(),
            )
        });
        let net_client = Bfv::keygen(&params, galois).expect("keys");
        let net_hello = Msg::Hello {
            version: protocol::PROTOCOL_VERSION,
            inputs: 1,
            layers: Vec::new(),
            reveal: false,
        };
        let network_frames = vec![
            protocol::encode(&net_hello).expect("net hello"),
            protocol::encode(&Msg::Setup(net_client.public_keys().clone())).expect("setup"),
        ];
        Fixture {
            params,
            model,
            layer_frames,
            network,
            network_frames,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let stage = usize::from(which % 3);
    if which & 0x80 == 0 {
        let mut ch = Scripted {
            genuine: f.layer_frames[..stage].to_vec(),
            data: rest,
        };
        let _ = protocol::serve(&mut ch, &f.params, &f.model, &Link::NONE);
    } else {
        let mut ch = Scripted {
            genuine: f.network_frames[..stage].to_vec(),
            data: rest,
        };
        let _ = f.network.serve(&mut ch);
    }
});
