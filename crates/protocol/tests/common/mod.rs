//! Helpers of the hostile-client tests: a one-layer server over loopback TCP and a
//! normal client.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::TcpListener;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use he::Params;
use kernels::Method;
use net::{Link, TcpChannel};
use protocol::{
    query, serve_tcp, LayerMethod, LayerRequest, LayerShape, Msg, ServeOptions, ServedLayer,
    ServedLayers, ServerSessionReport, PROTOCOL_VERSION,
};

pub const T: Duration = Duration::from_secs(20);
pub const MAX: usize = 64 << 20;
pub const SHAPE: LayerShape = LayerShape::Matvec { rows: 2, cols: 8 };

pub fn params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Params::preset("n8192").unwrap())
}

pub fn layers() -> Vec<ServedLayer> {
    layers_with(Method::Heliks)
}

/// The one layer, W = all ones, served with `method`.
pub fn layers_with(method: Method) -> Vec<ServedLayer> {
    vec![ServedLayer {
        shape: SHAPE,
        method: Some(LayerMethod::Matvec(method)),
        weights: vec![1; 16],
    }]
}

pub type Reports = Arc<Mutex<Vec<ServerSessionReport>>>;

/// A one-layer server taking one session at a time, for `sessions` connections.
pub fn server(
    model: ServedLayers,
    sessions: usize,
    opts: ServeOptions,
) -> (String, Reports, thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let reports: Reports = Arc::default();
    let r = reports.clone();
    let opts = ServeOptions {
        max_concurrent: 1,
        stop_after: Some(sessions),
        ..opts
    };
    let h = thread::spawn(move || {
        serve_tcp(l, params(), Arc::new(model), &opts, move |rep| {
            r.lock().unwrap().push(rep)
        })
        .unwrap();
    });
    (addr, reports, h)
}

pub fn opts() -> ServeOptions {
    ServeOptions {
        timeout: T,
        ..ServeOptions::new(MAX)
    }
}

/// Waits until `n` sessions have been reported (their slots are free by then).
pub fn wait_for<T>(reports: &Mutex<Vec<T>>, n: usize) {
    let t = Instant::now();
    while reports.lock().unwrap().len() < n {
        assert!(t.elapsed() < T, "{n} session(s) not reported");
        thread::sleep(Duration::from_millis(10));
    }
}

pub fn client(addr: &str) -> TcpChannel {
    TcpChannel::connect(addr, MAX, T, Link::NONE).unwrap()
}

pub fn hello(layers: Vec<LayerRequest>) -> Msg {
    Msg::Hello {
        version: PROTOCOL_VERSION,
        inputs: 1,
        layers,
        reveal: false,
    }
}

pub fn request() -> Vec<LayerRequest> {
    vec![LayerRequest {
        shape: SHAPE,
        method: None,
    }]
}

/// A normal client's query; the result W·x = 36 per row is checked when revealed.
pub fn normal(addr: &str, reveal: bool) -> protocol::Result<protocol::LayerOutcome> {
    let mut ch = client(addr);
    query(
        &mut ch,
        params(),
        request()[0],
        &[vec![1, 2, 3, 4, 5, 6, 7, 8]],
        reveal,
        &mut |_| {},
    )
}
