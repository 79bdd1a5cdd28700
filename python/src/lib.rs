//! Python bindings of helina: numpy arrays in, logits out. The module `helina._helina`
//! is wrapped by the Python package `helina` (`python/helina/__init__.py`), which is
//! what users import. Every call that runs the protocol releases the GIL; errors become
//! Python exceptions carrying the Rust message (`HelinaError` and its subclasses
//! `InputError`, `ModelError`, `ProtocolError`), never a crash of the interpreter.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use numpy::{IntoPyArray, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pyo3::create_exception!(
    _helina,
    HelinaError,
    PyException,
    "Anything that went wrong in helina (the message is the Rust error's)."
);
pyo3::create_exception!(
    _helina,
    InputError,
    HelinaError,
    "An input that cannot be used: wrong shape, outside the model's input range, not finite."
);
pyo3::create_exception!(
    _helina,
    ModelError,
    HelinaError,
    "A model that cannot be imported or planned (unsupported ONNX, no fixed point meets the tolerance)."
);
pyo3::create_exception!(
    _helina,
    ProtocolError,
    HelinaError,
    "The two-party session failed (connection refused, the peer aborted, a timeout)."
);

/// The Python exception of a helina error.
fn py_err(e: helina::Error) -> PyErr {
    use helina::Error as E;
    use nn::NnError as N;
    let msg = e.to_string();
    match &e {
        E::InputShape { .. } => InputError::new_err(msg),
        E::Model(m)
            if matches!(
                **m,
                N::InputOutOfRange { .. } | N::NonFinite { .. } | N::Length { .. }
            ) =>
        {
            InputError::new_err(msg)
        }
        E::Model(_) | E::SavedModel { .. } => ModelError::new_err(msg),
        E::Protocol(p) if is_input(p) => InputError::new_err(msg),
        E::Protocol(_) | E::Net(_) | E::Thread { .. } => ProtocolError::new_err(msg),
        E::Option { option, .. } if *option == "server address" => ProtocolError::new_err(msg),
        _ => HelinaError::new_err(msg),
    }
}

/// Whether a session error is about the client's own input (its values, its length,
/// or more inputs than a session takes).
fn is_input(e: &protocol::ProtocolError) -> bool {
    use protocol::ProtocolError as P;
    e.is_input() || matches!(e, P::InputLength { .. } | P::TooManyInputs { .. })
}

/// A float array of shape `(batch, *sample)` (or `sample` alone, one input) as rows;
/// with `sample = None` the first dimension is the batch.
fn rows(x: &Bound<'_, PyAny>, sample: Option<&[usize]>) -> PyResult<Vec<Vec<f32>>> {
    let (shape, data): (Vec<usize>, Vec<f32>) =
        if let Ok(a) = x.extract::<PyReadonlyArrayDyn<'_, f32>>() {
            (a.shape().to_vec(), a.as_array().iter().copied().collect())
        } else if let Ok(a) = x.extract::<PyReadonlyArrayDyn<'_, f64>>() {
            (
                a.shape().to_vec(),
                a.as_array().iter().map(|&v| v as f32).collect(),
            )
        } else {
            return Err(InputError::new_err(
                "inputs must be a numpy array of float32 or float64",
            ));
        };
    match sample {
        Some(sample) => helina::array::batch(&shape, &data, sample).map_err(py_err),
        None => {
            let len: usize = shape.iter().skip(1).product();
            if shape.len() < 2 || len == 0 {
                return Err(InputError::new_err(format!(
                    "inputs of shape {shape:?}: give an array of shape (batch, *input_shape)"
                )));
            }
            Ok(data.chunks(len).map(<[f32]>::to_vec).collect())
        }
    }
}

/// Logits as a float32 array of shape `(batch, classes)`.
fn logits<'py>(py: Python<'py>, outputs: &[helina::Output]) -> PyResult<Bound<'py, PyAny>> {
    let classes = outputs.first().map_or(0, |o| o.logits.len());
    let flat: Vec<f32> = outputs.iter().flat_map(|o| o.logits.clone()).collect();
    let a = numpy::ndarray::Array2::from_shape_vec((outputs.len(), classes), flat)
        .map_err(|e| HelinaError::new_err(e.to_string()))?;
    Ok(a.into_pyarray(py).into_any())
}

/// A progress callback of Python, called with a description of each stage and the
/// index of the input it belongs to (`None` for the session's own stages: handshake,
/// keys, closing), so that `k` inputs are done when input `k` starts. The GIL is taken
/// for the call; an exception in it is ignored.
fn progress(cb: &Option<Py<PyAny>>) -> impl FnMut(helina::Progress) + '_ {
    move |p| {
        if let Some(cb) = cb {
            let input = match p {
                helina::Progress::Offline { input } | helina::Progress::Step { input, .. } => {
                    Some(input)
                }
                _ => None,
            };
            Python::attach(|py| {
                let _ = cb.call1(py, (p.to_string(), input));
            });
        }
    }
}

/// `ot` (silent OT, the default) or `gc` (garbled circuits, garbled by `garbler`).
fn nonlinear(name: &str, garbler: &str) -> PyResult<helina::NonlinearProtocol> {
    let garbler = match garbler {
        "server" => helina::Garbler::Server,
        "client" => helina::Garbler::Client,
        g => {
            return Err(HelinaError::new_err(format!(
                "garbler {g:?}: give \"server\" or \"client\""
            )))
        }
    };
    match name {
        "ot" => Ok(helina::NonlinearProtocol::SilentOt),
        "gc" => Ok(helina::NonlinearProtocol::GarbledCircuits(garbler)),
        n => Err(HelinaError::new_err(format!(
            "nonlinear {n:?}: give \"ot\" (silent OT) or \"gc\" (garbled circuits)"
        ))),
    }
}

/// A model from what Python gave: a `Model` (compiled already), a path to a `.helina`
/// file (loaded), or an ONNX model as a path or bytes (planned with the fixed-point
/// and planning options; `session_inputs`: the most inputs one session runs, `None`
/// for the library's default).
#[allow(clippy::too_many_arguments)]
fn model(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    calibration: Option<&Bound<'_, PyAny>>,
    input_range: Option<(f32, f32)>,
    tolerance: f64,
    params: Option<String>,
    method: &str,
    faithful_truncation: bool,
    nonlinear: Option<helina::NonlinearProtocol>,
    session_inputs: Option<u32>,
) -> PyResult<helina::Model> {
    // a compiled model carries its fixed point: one given beside it is refused
    let refuse_fixed_point = |what: &str| -> PyResult<()> {
        if calibration.is_some() || input_range.is_some() {
            return Err(InputError::new_err(format!(
                "{what} is compiled: its fixed point and input range are in it (no calibration or input_range)"
            )));
        }
        Ok(())
    };
    if let Ok(m) = model.cast::<Model>() {
        refuse_fixed_point("the model")?;
        return Ok(m.get().inner.clone());
    }
    let planning = helina::Planning {
        method: helina::MethodChoice::parse(method).map_err(|e| py_err(e.into()))?,
        session_inputs,
        ..helina::Planning::default()
    };
    let network = if let Ok(bytes) = model.cast::<pyo3::types::PyBytes>() {
        nn::import_bytes(bytes.as_bytes()).map_err(|e| py_err(e.into()))?
    } else {
        let path: std::path::PathBuf = model.extract().map_err(|_| {
            InputError::new_err(
                "model: give a helina.Model, a path (.onnx or .helina) or ONNX bytes",
            )
        })?;
        if path.extension().is_some_and(|e| e == "helina") {
            refuse_fixed_point(&path.display().to_string())?;
            return py
                .detach(|| helina::Model::load(&path, &planning))
                .map_err(py_err);
        }
        nn::import(&path).map_err(|e| py_err(e.into()))?
    };
    let calibration = calibration
        .map(|c| rows(c, Some(network.input_shape())))
        .transpose()?;
    let fixed = helina::FixedPoint {
        params,
        tolerance,
        calibration,
        input_range,
        approximate_truncation: !faithful_truncation,
        ..helina::FixedPoint::default()
    };
    // the protocol the model is planned for, when known (garbled circuits: faithful)
    let fixed = match nonlinear {
        Some(n) => fixed.for_nonlinear(n),
        None => fixed,
    };
    py.detach(|| helina::Model::new(network, &fixed, &planning))
        .map_err(py_err)
}

/// The plan of a model as JSON: parameter set, fractional bits, input range, float
/// agreement, the method of every linear layer, planning time.
fn plan_json(m: &helina::Model, nonlinear: Option<&str>) -> PyResult<String> {
    let prog = m.program();
    let layers: Vec<(String, String)> = m
        .plan
        .layers
        .iter()
        .map(|l| (l.name.clone(), l.pick.method().name().to_string()))
        .collect();
    serde_json::to_string(&serde_json::json!({
        "params": m.params().name(),
        "p": prog.p,
        "frac_bits": prog.frac_bits,
        "input_shape": m.input_shape(),
        "input_range": prog.input_range,
        "nonlinear": nonlinear,
        "accuracy": prog.accuracy,
        "layers": layers,
        "planning": m.timings,
    }))
    .map_err(|e| HelinaError::new_err(e.to_string()))
}

/// A compiled model: an ONNX network with its fixed point and a method per linear
/// layer; saved as one `.helina` file and loaded without calibration data.
#[pyclass(module = "helina._helina", frozen)]
struct Model {
    inner: helina::Model,
}

#[pymethods]
impl Model {
    /// Plans an ONNX model (a path or the file's bytes).
    #[staticmethod]
    #[pyo3(signature = (onnx, calibration=None, input_range=None, tolerance=0.05, params=None, method="auto", faithful_truncation=false, session_inputs=None))]
    #[allow(clippy::too_many_arguments)]
    fn from_onnx(
        py: Python<'_>,
        onnx: &Bound<'_, PyAny>,
        calibration: Option<&Bound<'_, PyAny>>,
        input_range: Option<(f32, f32)>,
        tolerance: f64,
        params: Option<String>,
        method: &str,
        faithful_truncation: bool,
        session_inputs: Option<u32>,
    ) -> PyResult<Self> {
        if onnx.cast::<Model>().is_ok() {
            return Err(InputError::new_err("from_onnx takes an ONNX path or bytes"));
        }
        Ok(Self {
            inner: model(
                py,
                onnx,
                calibration,
                input_range,
                tolerance,
                params,
                method,
                faithful_truncation,
                None,
                session_inputs,
            )?,
        })
    }

    /// Reads a model saved by `save` (no calibration, no fixed-point search), its
    /// sessions planned for at most `session_inputs` inputs.
    #[staticmethod]
    #[pyo3(signature = (path, session_inputs=None))]
    fn load(
        py: Python<'_>,
        path: std::path::PathBuf,
        session_inputs: Option<u32>,
    ) -> PyResult<Self> {
        let planning = helina::Planning {
            session_inputs,
            ..helina::Planning::default()
        };
        let inner = py
            .detach(|| helina::Model::load(&path, &planning))
            .map_err(py_err)?;
        Ok(Self { inner })
    }

    /// Writes the model to `path` (one `.helina` file).
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(&path)).map_err(py_err)
    }

    /// The plan as JSON.
    fn plan(&self) -> PyResult<String> {
        plan_json(&self.inner, None)
    }
}

/// Private inference of the ONNX model at `model_path` on `x` with both parties in
/// this process. Returns `(logits, report_json)`.
#[pyfunction]
#[pyo3(signature = (model_path, x, calibration=None, input_range=None, tolerance=0.05, params=None, method="auto", nonlinear="ot", garbler="server", progress=None, faithful_truncation=false, session_inputs=None))]
#[allow(clippy::too_many_arguments)]
fn infer<'py>(
    py: Python<'py>,
    model_path: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    calibration: Option<&Bound<'py, PyAny>>,
    input_range: Option<(f32, f32)>,
    tolerance: f64,
    params: Option<String>,
    method: &str,
    nonlinear: &str,
    garbler: &str,
    progress: Option<Py<PyAny>>,
    faithful_truncation: bool,
    session_inputs: Option<u32>,
) -> PyResult<(Bound<'py, PyAny>, String)> {
    let protocol = self::nonlinear(nonlinear, garbler)?;
    // one session runs these inputs (the caller's count): a model planned here floods
    // for them, as `helina infer` does
    let m = model(
        py,
        model_path,
        calibration,
        input_range,
        tolerance,
        params,
        method,
        faithful_truncation,
        Some(protocol),
        session_inputs,
    )?;
    let inputs = rows(x, Some(m.input_shape()))?;
    let run = py
        .detach(|| {
            helina::infer_local(
                &m,
                &inputs,
                &helina::LocalOptions {
                    server: helina::ServerOptions {
                        nonlinear: protocol,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                &mut self::progress(&progress),
            )
        })
        .map_err(py_err)?;
    let report = serde_json::to_string(&run).map_err(|e| HelinaError::new_err(e.to_string()))?;
    Ok((logits(py, &run.inference.outputs)?, report))
}

/// A client of a `helina server` (or `helina.Server`).
#[pyclass(module = "helina._helina")]
struct Client {
    inner: helina::Client,
    last: Mutex<Option<String>>,
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (addr, params=None, timeout=600.0, tls_ca=None, tls_server_name=None, tls_cert=None, tls_key=None))]
    fn new(
        addr: &str,
        params: Option<String>,
        timeout: f64,
        tls_ca: Option<std::path::PathBuf>,
        tls_server_name: Option<String>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(InputError::new_err(format!(
                "timeout {timeout}: give seconds > 0"
            )));
        }
        let tls =
            match (tls_ca, tls_cert, tls_key) {
                (None, None, None) => None,
                (Some(ca), cert, key) => {
                    let identity = match (&cert, &key) {
                        (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
                        (None, None) => None,
                        _ => return Err(InputError::new_err("tls_cert and tls_key go together")),
                    };
                    let mut t = helina::ClientTls::from_pem_files(&ca, identity)
                        .map_err(|e| py_err(e.into()))?;
                    if let Some(n) = &tls_server_name {
                        t = t.with_server_name(n);
                    }
                    Some(t)
                }
                (None, _, _) => return Err(InputError::new_err(
                    "a client certificate needs tls_ca (the CA the server's certificate chains to)",
                )),
            };
        Ok(Self {
            inner: helina::Client::new(
                addr,
                helina::ClientOptions {
                    expect_params: params,
                    timeout: Duration::from_secs_f64(timeout),
                    tls,
                    ..Default::default()
                },
            ),
            last: Mutex::new(None),
        })
    }

    /// Logits for `x` (shape `(batch, *input_shape)`), computed privately with the
    /// server; the report of the session is kept (`last_report`).
    #[pyo3(signature = (x, progress=None))]
    fn infer<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inputs = rows(x, None)?;
        let out = py
            .detach(|| self.inner.infer(&inputs, &mut self::progress(&progress)))
            .map_err(py_err)?;
        let report =
            serde_json::to_string(&out).map_err(|e| HelinaError::new_err(e.to_string()))?;
        if let Ok(mut l) = self.last.lock() {
            *l = Some(report);
        }
        logits(py, &out.outputs)
    }

    /// Like `infer`, but each input's logits go to `on_output(index, logits)` as soon as
    /// its result arrives (the GIL is taken for the call) instead of being kept: a
    /// batch of any size runs in the memory of one input. An exception raised by
    /// `on_output` ends the session and is raised here.
    #[pyo3(signature = (x, on_output, progress=None))]
    fn infer_each(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        on_output: Py<PyAny>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let inputs = rows(x, None)?;
        let mut raised: Option<PyErr> = None;
        let out = py.detach(|| {
            self.inner
                .infer_each(&inputs, &mut self::progress(&progress), &mut |k, o| {
                    if raised.is_some() {
                        return;
                    }
                    Python::attach(|py| {
                        let logits = o.logits.clone().into_pyarray(py);
                        if let Err(e) = on_output.call1(py, (k, logits)) {
                            raised = Some(e);
                        }
                    });
                })
        });
        if let Some(e) = raised {
            return Err(e);
        }
        let out = out.map_err(py_err)?;
        let report =
            serde_json::to_string(&out).map_err(|e| HelinaError::new_err(e.to_string()))?;
        if let Ok(mut l) = self.last.lock() {
            *l = Some(report);
        }
        Ok(())
    }

    /// The JSON report of the last session (`None` before the first).
    fn last_report(&self) -> Option<String> {
        self.last.lock().ok().and_then(|l| l.clone())
    }
}

/// A server of one ONNX model (its fixed point planned and its weights encoded once).
#[pyclass(module = "helina._helina")]
struct Server {
    inner: Arc<helina::Server>,
    listener: Mutex<Option<TcpListener>>,
    metrics: Option<String>,
}

#[pymethods]
impl Server {
    #[new]
    #[pyo3(signature = (model_path, calibration=None, input_range=None, tolerance=0.05, params=None, method="auto", nonlinear="ot", garbler="server", max_clients=4, timeout=60.0, session_timeout=None, tls_cert=None, tls_key=None, tls_client_ca=None, metrics=None, drain_timeout=60.0, faithful_truncation=false, session_inputs=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model_path: &Bound<'_, PyAny>,
        calibration: Option<&Bound<'_, PyAny>>,
        input_range: Option<(f32, f32)>,
        tolerance: f64,
        params: Option<String>,
        method: &str,
        nonlinear: &str,
        garbler: &str,
        max_clients: usize,
        timeout: f64,
        session_timeout: Option<f64>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        tls_client_ca: Option<std::path::PathBuf>,
        metrics: Option<String>,
        drain_timeout: f64,
        faithful_truncation: bool,
        session_inputs: Option<u32>,
    ) -> PyResult<Self> {
        let seconds = |what: &str, s: f64| {
            if s.is_finite() && s > 0.0 {
                Ok(Duration::from_secs_f64(s))
            } else {
                Err(InputError::new_err(format!("{what} {s}: give seconds > 0")))
            }
        };
        let protocol = self::nonlinear(nonlinear, garbler)?;
        if session_inputs.is_some() && model_path.cast::<Model>().is_ok() {
            return Err(InputError::new_err(
                "the model is compiled with its session size: give session_inputs to Model.from_onnx or Model.load",
            ));
        }
        let m = model(
            py,
            model_path,
            calibration,
            input_range,
            tolerance,
            params,
            method,
            faithful_truncation,
            Some(protocol),
            session_inputs,
        )?;
        let serve = helina::ServeOptions {
            timeout: seconds("timeout", timeout)?,
            session_timeout: session_timeout
                .map(|s| seconds("session_timeout", s))
                .transpose()?,
            max_concurrent: max_clients.max(1),
            tls: match (tls_cert, tls_key) {
                (Some(c), Some(k)) => Some(
                    helina::ServerTls::from_pem_files(&c, &k, tls_client_ca.as_deref())
                        .map_err(|e| py_err(e.into()))?,
                ),
                (None, None) if tls_client_ca.is_none() => None,
                _ => {
                    return Err(InputError::new_err(
                        "TLS needs tls_cert and tls_key (tls_client_ca is optional)",
                    ))
                }
            },
            drain_timeout: seconds("drain_timeout", drain_timeout)?,
            ..helina::ServerOptions::default().serve
        };
        let mut server = py
            .detach(|| {
                helina::Server::new(
                    m,
                    helina::ServerOptions {
                        serve,
                        nonlinear: protocol,
                    },
                )
            })
            .map_err(py_err)?;
        let metrics = metrics
            .map(|addr| server.serve_metrics(&addr).map(|a| a.to_string()))
            .transpose()
            .map_err(py_err)?;
        Ok(Self {
            inner: Arc::new(server),
            listener: Mutex::new(None),
            metrics,
        })
    }

    /// The address of the metrics endpoint (`http://ADDR/metrics`), if one was asked for.
    #[getter]
    fn metrics_address(&self) -> Option<String> {
        self.metrics.clone()
    }

    /// Drains the server: no new sessions (new clients are told it is shutting down),
    /// the running ones finish within `drain_timeout`, then `serve` returns.
    fn shutdown(&self) {
        self.inner.shutdown_handle().request();
    }

    /// Binds `addr` (`host:port`; port 0 picks one) and returns the address bound.
    fn listen(&self, addr: &str) -> PyResult<String> {
        let l = TcpListener::bind(addr)
            .map_err(|e| ProtocolError::new_err(format!("binding {addr}: {e}")))?;
        let bound = l
            .local_addr()
            .map_err(|e| ProtocolError::new_err(e.to_string()))?
            .to_string();
        if let Ok(mut slot) = self.listener.lock() {
            *slot = Some(l);
        }
        Ok(bound)
    }

    /// Serves clients on the address `listen` bound (or `addr`), `sessions` of them or
    /// forever. Releases the GIL while it serves.
    #[pyo3(signature = (addr=None, sessions=None))]
    fn serve(&self, py: Python<'_>, addr: Option<&str>, sessions: Option<usize>) -> PyResult<()> {
        if let Some(a) = addr {
            self.listen(a)?;
        }
        let listener = self
            .listener
            .lock()
            .ok()
            .and_then(|mut l| l.take())
            .ok_or_else(|| HelinaError::new_err("give an address, or call listen() first"))?;
        let server = self.inner.clone();
        py.detach(move || {
            server.serve_until(listener, sessions, |rep| {
                if let Err(e) = &rep.result {
                    eprintln!("helina server: {}: session failed: {e}", rep.peer);
                }
            })
        })
        .map_err(py_err)
    }

    /// The plan as JSON: parameter set, fractional bits, input range, float agreement,
    /// the method of every linear layer.
    fn plan(&self) -> PyResult<String> {
        plan_json(
            self.inner.model(),
            Some(self.inner.options().nonlinear.name()),
        )
    }
}

/// The extension module.
#[pymodule]
fn _helina(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(infer, m)?)?;
    m.add_class::<Client>()?;
    m.add_class::<Server>()?;
    m.add_class::<Model>()?;
    let py = m.py();
    m.add("HelinaError", py.get_type::<HelinaError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("ProtocolError", py.get_type::<ProtocolError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_INPUTS_PER_SESSION", helina::MAX_INPUTS_PER_SESSION)?;
    Ok(())
}
