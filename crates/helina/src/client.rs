//! A client of a model server: connects, sends its inputs privately, gets logits.

use std::time::Duration;

use net::{Link, TcpChannel};
pub use protocol::Phase as Progress;

use crate::error::{Error, Result};
use crate::report::Inference;

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
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            expect_params: None,
            timeout: Duration::from_secs(600),
            link: Link::NONE,
            max_frame: net::DEFAULT_MAX_FRAME,
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
        let expect = self
            .opts
            .expect_params
            .as_deref()
            .map(he::Params::preset)
            .transpose()?;
        let mut ch = TcpChannel::connect(
            &self.addr,
            self.opts.max_frame,
            self.opts.timeout,
            self.opts.link,
        )
        .map_err(|e| Error::Option {
            option: "server address",
            detail: format!("connecting to {}: {e}", self.addr),
        })?;
        let request = protocol::ClientRequest {
            layers: Vec::new(),
            reveal: false,
            expect,
        };
        let out =
            protocol::client::run(&mut ch, &request, protocol::Inputs::Float(inputs), progress)?;
        Inference::from_outcome(&out)
    }
}
