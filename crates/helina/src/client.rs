//! A client of a model server: connects, sends its inputs privately, gets logits.

use std::time::Duration;

use net::{Link, TcpChannel};
pub use protocol::Phase as Progress;

use crate::error::{Error, Result};
use crate::report::{Inference, Output};

/// How a client talks to a server.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// The parameter preset the client expects (an assertion: the server's plan names
    /// the set; a different one is refused). `None` takes the server's.
    pub expect_params: Option<String>,
    /// Every frame must be done within this time.
    pub timeout: Duration,
    /// Link emulation.
    pub link: Link,
    /// Frame size limit.
    pub max_frame: usize,
    /// TLS: the CA the server's certificate must chain to (and the client's own
    /// certificate, if the server asks for one); `None`: plain TCP.
    pub tls: Option<net::ClientTls>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            expect_params: None,
            timeout: Duration::from_secs(600),
            link: Link::NONE,
            max_frame: net::DEFAULT_MAX_FRAME,
            tls: None,
        }
    }
}

/// A client of the model served at an address.
#[derive(Clone, Debug)]
pub struct Client {
    addr: String,
    opts: ClientOptions,
}

impl Client {
    /// A client of the server at `addr` (`host:port`); nothing is sent yet.
    pub fn new(addr: &str, opts: ClientOptions) -> Self {
        Self {
            addr: addr.to_string(),
            opts,
        }
    }

    /// One session: the inputs (floats in the model's input shape; the server's plan
    /// says the shape and the range they must be in) privately, the logits back.
    /// `progress` hears of each stage.
    pub fn infer(
        &self,
        inputs: &[Vec<f32>],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Inference> {
        let mut outputs = Vec::with_capacity(inputs.len());
        let mut inference = self.infer_each(inputs, progress, &mut |_, o| outputs.push(o))?;
        inference.outputs = outputs;
        Ok(inference)
    }

    /// One session whose outputs are handed to `on_output(k, output)` as each input's
    /// result is ready, instead of being kept: the returned report's `outputs` is empty,
    /// and the client holds one input's data at a time whatever the batch (a session may
    /// run up to [`protocol::MAX_INPUTS_PER_SESSION`] inputs).
    pub fn infer_each(
        &self,
        inputs: &[Vec<f32>],
        progress: &mut dyn FnMut(Progress),
        on_output: &mut dyn FnMut(usize, Output),
    ) -> Result<Inference> {
        let expect = self
            .opts
            .expect_params
            .as_deref()
            .map(he::Params::preset)
            .transpose()?;
        let (max, timeout, link) = (self.opts.max_frame, self.opts.timeout, self.opts.link);
        let connected = match &self.opts.tls {
            Some(tls) => TcpChannel::connect_tls(&self.addr, tls, max, timeout, link),
            None => TcpChannel::connect(&self.addr, max, timeout, link),
        };
        let mut ch = connected.map_err(|e| match e {
            // a server that fails TLS is not a wrong address: keep the error typed
            e @ (net::NetError::Tls { .. } | net::NetError::TlsConfig { .. }) => Error::Net(e),
            e => Error::Option {
                option: "server address",
                detail: format!("connecting to {}: {e}", self.addr),
            },
        })?;
        let request = protocol::ClientRequest {
            layers: Vec::new(),
            reveal: false,
            expect,
        };
        // outputs are decoded as they come (the program is the plan's); a failure to
        // decode one is reported after the session
        let mut failed: Option<Error> = None;
        let out = protocol::client::run_each(
            &mut ch,
            &request,
            protocol::Inputs::Float(inputs),
            progress,
            &mut |plan, k, o| {
                if failed.is_none() {
                    match Output::from_client_output(&plan.program, o) {
                        Ok(o) => on_output(k, o),
                        Err(e) => failed = Some(e),
                    }
                }
            },
        )?;
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(Inference::summary(&out, Vec::new()))
    }
}
