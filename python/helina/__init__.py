"""helina: two-party private inference of PyTorch and ONNX networks from Python.

The server holds a model, the client a private input; the client learns the logits,
the server learns nothing about the input, the client nothing about the weights beyond
the output (semi-honest, 128-bit security).

From a PyTorch model to a private service::

    model = helina.compile(net, calibration=x_calib)   # a torch.nn.Module, or ONNX
    model.save("net.helina")                             # one versioned file
    helina.Server(helina.Model.load("net.helina")).serve("0.0.0.0:7000")

and on the client's side::

    logits = helina.Client("server:7000").infer(x)

* :func:`compile` exports a ``torch.nn.Module`` with ``torch.onnx.export`` (PyTorch is
  the optional extra ``helina[torch]``) or takes an ONNX model, and chooses the fixed
  point on calibration inputs; :class:`Model` is the result, saved and loaded as one
  ``.helina`` file that a server (``helina server --model net.helina`` too) loads
  without calibration data.
* :func:`infer` runs both parties in this process (to try a model, to measure it, to
  check the fixed point against the float model).
* :class:`Server` serves a model to clients over TCP or TLS; :class:`Client` is the
  other party (of a ``helina server`` or a :class:`Server`); :meth:`Client.infer_iter`
  streams a long batch's results as they arrive.

Inputs are numpy arrays or torch tensors of shape ``(batch, *input_shape)`` (a single
input may omit the batch axis); logits come back as numpy, or as torch when the inputs
were torch. Batches show a progress bar when tqdm is installed and standard error is a
terminal (``progress=``). The fixed point is chosen by agreement with the float model
on calibration inputs (``calibration=``, separate from the inputs you test on) or on an
input range (``input_range=(lo, hi)``); the server refuses inputs outside the range it
planned for.

Errors are :class:`HelinaError` and its subclasses :class:`InputError`,
:class:`ModelError` and :class:`ProtocolError`.
"""

from __future__ import annotations

import importlib
import json
import queue
import sys
import threading
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Literal,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

import numpy as np

from . import _helina
from ._compile import compile
from ._helina import (
    MAX_INPUTS_PER_SESSION,
    HelinaError,
    InputError,
    ModelError,
    ProtocolError,
    __version__,
)

__all__ = [
    "compile",
    "infer",
    "Model",
    "Result",
    "Client",
    "Server",
    "HelinaError",
    "InputError",
    "ModelError",
    "ProtocolError",
    "MAX_INPUTS_PER_SESSION",
    "__version__",
]

#: ``None``: a progress bar (tqdm) for batches when tqdm is installed and standard error
#: is a terminal; ``True``: always a bar (tqdm needed); ``False``: none; a callable: called
#: with the description of each stage of the session instead.
Progress = Union[None, bool, Callable[[str], Any]]
#: A session's report, as the JSON of the Rust library decodes.
Report = Dict[str, Any]


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _like(x: Any, logits: np.ndarray) -> Any:
    """``logits`` as a torch tensor where the input ``x`` was one, else as is."""
    if _is_torch(x):
        import torch

        return torch.from_numpy(logits)
    return logits


class _Progress:
    """What a session tells of its progress: the user's callback, or a tqdm bar over the
    ``total`` inputs (see :data:`Progress`)."""

    def __init__(self, progress: Progress, total: int):
        self.callback = progress if callable(progress) else None
        self.bar: Any = None
        self.total = total
        if progress is True or (progress is None and total > 1 and sys.stderr.isatty()):
            try:  # optional, and without type stubs of its own
                tqdm = importlib.import_module("tqdm.auto").tqdm
            except ImportError:
                if progress is True:
                    raise HelinaError("progress=True draws a bar with tqdm: pip install tqdm")
                return
            self.bar = tqdm(total=total, unit="input", desc="helina", leave=False)

    def __call__(self, stage: str, index: Optional[int]) -> None:
        if self.callback is not None:
            self.callback(stage)
        if index is not None:  # input `index` started: those before it are done
            self.done(index)

    def done(self, inputs: int) -> None:
        """``inputs`` inputs have their results."""
        if self.bar is not None and inputs > self.bar.n:
            self.bar.update(min(inputs, self.total) - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _floats(x: Any, name: str) -> np.ndarray:
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype not in (np.float32, np.float64):
        if np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_):
            a = a.astype(np.float32)
        else:
            raise InputError(f"{name}: an array of numbers is needed, got dtype {a.dtype}")
    return np.ascontiguousarray(a)


def _batch(xs: np.ndarray) -> int:
    """Inputs in ``xs`` (an array without a batch axis is one input)."""
    return int(xs.shape[0]) if xs.ndim >= 2 else 1


def _require_fixed_point(calibration: Any, input_range: Any, who: str) -> None:
    """Refuses to plan without calibration inputs or an input range."""
    if calibration is None and input_range is None:
        raise ModelError(
            f"{who} needs calibration inputs (calibration=) or an input range "
            "(input_range=) to choose its fixed point"
        )


def _session_inputs(n: Optional[int]) -> Optional[int]:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_INPUTS_PER_SESSION:
        raise InputError(
            f"session_inputs {n!r}: give a whole number from 1 to {MAX_INPUTS_PER_SESSION}"
        )
    return n


def _range(input_range: Optional[Sequence[float]]) -> Optional[Tuple[float, float]]:
    if input_range is None:
        return None
    lo, hi = input_range
    return float(lo), float(hi)


@dataclass
class Result:
    """What a private inference returned.

    ``logits`` has shape ``(batch, classes)``; ``report`` is the session's report as a
    dict (parameter set, fixed point, per input time and bytes, per layer what each
    party did and, for :func:`infer`, the check against the float model and the
    plaintext fixed-point reference).
    """

    logits: np.ndarray
    report: Report = field(repr=False)

    @property
    def labels(self) -> np.ndarray:
        """The graph's ``label`` output when it has one (a classifier's head, e.g. from
        skl2onnx: ints or strings), else the argmax of each row of ``logits``."""
        g = self.graph_outputs
        if "label" in g:
            labels: np.ndarray = g["label"].reshape(len(self.logits), -1)[:, 0]
            return labels
        argmax: np.ndarray = np.argmax(self.logits, axis=1)
        return argmax

    @property
    def graph_outputs(self) -> Dict[str, np.ndarray]:
        """The graph's own outputs by name (e.g. ``label`` and ``probabilities``),
        computed by the client's head from the private logits; each a numpy array whose
        first axis is the batch."""
        rows: Dict[str, List[np.ndarray]] = {}
        for o in self.report.get("outputs", []):
            for g in o.get("graph_outputs", []):
                dtype = object if g["dtype"] == "string" else g["dtype"]
                a = np.asarray(g["values"], dtype=dtype).reshape(g["shape"])
                rows.setdefault(g["name"], []).append(a)
        return {k: np.concatenate(v, axis=0) for k, v in rows.items()}

    @property
    def matches_fixed_reference(self) -> Optional[bool]:
        """Whether every output equals the plaintext fixed-point reference bit for bit
        (``None`` where the client alone cannot tell: a remote server's weights)."""
        checks = self.report.get("checks")
        if checks is None:
            return None
        return all(c["matches_fixed_reference"] for c in checks)

    @property
    def float_max_abs_err(self) -> Optional[float]:
        """max |private − float| over the batch (``None`` for a remote server)."""
        checks = self.report.get("checks")
        if checks is None:
            return None
        return max((c["float_max_abs_err"] for c in checks), default=0.0)


class Model:
    """A compiled model: an ONNX network with its fixed point (chosen on calibration
    inputs or an input range) and a method per linear layer. Save it once, and a
    server loads it without calibration data::

        model = helina.Model.from_onnx("model.onnx", calibration=x_calib)
        model.save("model.helina")
        server = helina.Server(helina.Model.load("model.helina"))

    ``helina server --model model.helina`` serves the same file; :func:`compile` makes
    one from a PyTorch module.

    >>> import os, tempfile, numpy as np, torch, helina
    >>> _ = torch.manual_seed(0); np.random.seed(0)
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    >>> model = helina.compile(net, calibration=np.random.randn(32, 8), faithful_truncation=True)
    >>> path = os.path.join(tempfile.mkdtemp(), "net.helina")
    >>> model.save(path)
    >>> loaded = helina.Model.load(path)
    >>> loaded.plan["frac_bits"] == model.plan["frac_bits"]
    True
    >>> x = np.random.randn(2, 8)
    >>> bool((helina.infer(loaded, x) == helina.infer(model, x)).all())
    True
    """

    def __init__(self, inner: Any):
        self._inner = inner

    @staticmethod
    def from_onnx(
        onnx: Any,
        *,
        calibration: Any = None,
        input_range: Optional[Sequence[float]] = None,
        tolerance: float = 0.05,
        params: Optional[str] = None,
        method: str = "auto",
        faithful_truncation: bool = False,
        session_inputs: Optional[int] = None,
    ) -> "Model":
        """Plans the ONNX model at path ``onnx`` (or given as ``bytes``) on
        ``calibration`` inputs (like the real ones, not those you test on) or an
        ``input_range=(lo, hi)``; ``tolerance`` is the largest |private − float| accepted
        on any logit. The planner uses Cheetah's approximate truncation (a third fewer
        OTs and bytes per ReLU) where the calibration error stays within it, and on
        those layers a sign test that skips up to 3 more low bits where it still does
        (a ReLU's smallest positive inputs may then come out 0);
        ``faithful_truncation=True`` truncates faithfully everywhere (a run's result is
        then the same for the same input, run after run).

        ``session_inputs`` is the most inputs one session may run (default 4096): the
        server's responses are re-randomised for that many, so a smaller number sends
        fewer bytes per inference; a server refuses a longer session."""
        _require_fixed_point(calibration, input_range, "a model")
        return Model(
            _helina.Model.from_onnx(
                onnx if isinstance(onnx, bytes) else str(onnx),
                calibration=None if calibration is None else _floats(calibration, "calibration"),
                input_range=_range(input_range),
                tolerance=float(tolerance),
                params=params,
                method=method,
                faithful_truncation=bool(faithful_truncation),
                session_inputs=_session_inputs(session_inputs),
            )
        )

    @staticmethod
    def load(path: Any, *, session_inputs: Optional[int] = None) -> "Model":
        """Reads a model written by :meth:`save`, its sessions planned for at most
        ``session_inputs`` inputs (see :meth:`from_onnx`). A file of another format
        version, truncated or changed is refused with a :class:`ModelError` saying
        which."""
        return Model(
            _helina.Model.load(str(path), session_inputs=_session_inputs(session_inputs))
        )

    def save(self, path: Any) -> None:
        """Writes the model as one versioned, checksummed ``.helina`` file."""
        self._inner.save(str(path))

    @property
    def plan(self) -> Report:
        """The plan: parameter set, fractional bits, input shape and range, agreement
        with float on the calibration inputs, the method of every linear layer."""
        plan: Report = json.loads(self._inner.plan())
        return plan

    def __repr__(self) -> str:
        p = self.plan
        acc = p.get("accuracy") or {}
        err = acc.get("max_abs_err")
        return (
            f"helina.Model(input {tuple(p['input_shape'])}, {p['params']}, "
            f"{p['frac_bits']} fractional bits, p = {p['p']}, "
            f"{len(p['layers'])} linear layers"
            + (f", max |Δ| vs float {err:.4f} on calibration" if err is not None else "")
            + ")"
        )

    def summary(self) -> str:
        """What ``helina inspect`` says of the plan, as text: parameter set and fixed
        point, the input range, agreement with float, planning time, and the method of
        every linear layer."""
        p = self.plan
        lines = [repr(self)]
        r = p.get("input_range")
        if r:
            basis = r.get("basis")
            kind = basis if isinstance(basis, str) else next(iter(basis or {}), "")
            lines.append(f"  input range [{r['lo']:.4g}, {r['hi']:.4g}] ({kind})")
        acc = p.get("accuracy")
        if acc:
            lines.append(
                f"  float agreement on calibration: max |Δ| {acc['max_abs_err']:.4f} "
                f"(tolerance {acc['tolerance']})"
            )
        t = p.get("planning") or {}
        if t:
            lines.append(
                f"  planned in {t.get('fixed_point_ms', 0) / 1e3:.2f} s (fixed point) + "
                f"{t.get('methods_ms', 0) / 1e3:.2f} s (methods)"
            )
        width = max((len(name) for name, _ in p["layers"]), default=0)
        lines += [f"  {name:<{width}}  {method}" for name, method in p["layers"]]
        return "\n".join(lines)


def _model_arg(model: Any) -> Any:
    if isinstance(model, Model):
        return model._inner
    if isinstance(model, bytes):
        return model
    return str(model)


def _compiled(model: Any) -> bool:
    return isinstance(model, Model) or str(model).endswith(".helina")


@overload
def infer(
    model: Any,
    x: Any,
    *,
    calibration: Any = ...,
    input_range: Optional[Sequence[float]] = ...,
    tolerance: float = ...,
    params: Optional[str] = ...,
    method: str = ...,
    nonlinear: str = ...,
    garbler: str = ...,
    progress: Progress = ...,
    report: Literal[True],
    faithful_truncation: bool = ...,
) -> Result: ...


@overload
def infer(
    model: Any,
    x: np.ndarray,
    *,
    calibration: Any = ...,
    input_range: Optional[Sequence[float]] = ...,
    tolerance: float = ...,
    params: Optional[str] = ...,
    method: str = ...,
    nonlinear: str = ...,
    garbler: str = ...,
    progress: Progress = ...,
    report: Literal[False] = ...,
    faithful_truncation: bool = ...,
) -> np.ndarray: ...


@overload
def infer(
    model: Any,
    x: Any,
    *,
    calibration: Any = ...,
    input_range: Optional[Sequence[float]] = ...,
    tolerance: float = ...,
    params: Optional[str] = ...,
    method: str = ...,
    nonlinear: str = ...,
    garbler: str = ...,
    progress: Progress = ...,
    report: Literal[False] = ...,
    faithful_truncation: bool = ...,
) -> Any: ...


def infer(
    model: Any,
    x: Any,
    *,
    calibration: Any = None,
    input_range: Optional[Sequence[float]] = None,
    tolerance: float = 0.05,
    params: Optional[str] = None,
    method: str = "auto",
    nonlinear: str = "ot",
    garbler: str = "server",
    progress: Progress = None,
    report: bool = False,
    faithful_truncation: bool = False,
) -> Any:
    """Private inference of ``model`` on ``x`` with both parties here: a :class:`Model`,
    a ``.helina`` file, or an ONNX model (a path or bytes) planned here.

    ``calibration`` (inputs like ``x``, but not the ones you test on) or
    ``input_range=(lo, hi)`` chooses the fixed point; without either the inputs
    themselves are used (and the plan is only as safe as they are representative).
    ``tolerance`` is the largest |private − float| accepted on any logit.
    ``nonlinear`` is how ReLU, MaxPool and truncation run: ``"ot"`` (silent OT and
    millionaire comparisons, the default) or ``"gc"`` (garbled circuits, garbled by
    ``garbler``; they truncate faithfully). ``faithful_truncation=True``: no
    approximate truncation (see :meth:`Model.from_onnx`) when planning here.
    A model planned here is planned for one session of ``x``'s inputs (see
    ``session_inputs`` in :meth:`Model.from_onnx`).
    ``progress``: see :data:`Progress`. Returns the logits (``(batch,
    classes)``, numpy, or torch when ``x`` is a torch tensor), or a :class:`Result`
    (numpy) with ``report=True``.

    >>> import numpy as np, torch, helina
    >>> _ = torch.manual_seed(0); np.random.seed(0)
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    >>> model = helina.compile(net, calibration=np.random.randn(32, 8))
    >>> r = helina.infer(model, np.random.randn(2, 8), report=True)
    >>> r.logits.shape, r.matches_fixed_reference
    ((2, 3), True)
    """
    xs = _floats(x, "x")
    calib = None if calibration is None else _floats(calibration, "calibration")
    if calib is None and input_range is None and not _compiled(model):
        calib = xs
    bar = _Progress(progress, _batch(xs))
    try:
        logits, text = _helina.infer(
            _model_arg(model),
            xs,
            calibration=calib,
            input_range=_range(input_range),
            tolerance=float(tolerance),
            params=params,
            method=method,
            nonlinear=nonlinear,
            garbler=garbler,
            progress=bar,
            faithful_truncation=bool(faithful_truncation),
            # one session of these inputs (at most a session's limit)
            session_inputs=max(1, min(_batch(xs), MAX_INPUTS_PER_SESSION)),
        )
    finally:
        bar.close()
    if report:
        return Result(logits, json.loads(text))
    return _like(x, logits)


class Client:
    """A client of a helina server at ``addr`` (``host:port``).

    ``params`` asserts the parameter set the server plans (the client always takes it
    from the server's plan); ``timeout`` is the frame timeout in seconds.

    TLS: ``tls_ca`` is the CA file (PEM) the server's certificate must chain to (the
    session then runs over TLS), ``tls_server_name`` the name it must carry (default:
    the host of ``addr``), ``tls_cert``/``tls_key`` this client's certificate for
    servers that admit only known clients. A server that fails the check is refused
    with a :class:`ProtocolError` naming the TLS failure.

    >>> import numpy as np, torch, helina
    >>> _ = torch.manual_seed(0); np.random.seed(0)
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    >>> server = helina.Server(helina.compile(net, calibration=np.random.randn(32, 8)))
    >>> addr = server.listen("127.0.0.1:0")
    >>> serving = server.serve_in_background(sessions=1)
    >>> x = torch.randn(4, 8)
    >>> logits = helina.Client(addr).infer(x)
    >>> serving.join()
    >>> bool((logits - net(x)).abs().max() < 0.05)
    True
    """

    def __init__(
        self,
        addr: str,
        *,
        params: Optional[str] = None,
        timeout: float = 600.0,
        tls_ca: Optional[str] = None,
        tls_server_name: Optional[str] = None,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
    ):
        self._inner = _helina.Client(
            addr,
            params=params,
            timeout=float(timeout),
            tls_ca=tls_ca,
            tls_server_name=tls_server_name,
            tls_cert=tls_cert,
            tls_key=tls_key,
        )
        self.addr = addr

    @overload
    def infer(self, x: Any, *, progress: Progress = ..., report: Literal[True]) -> Result: ...

    @overload
    def infer(
        self, x: np.ndarray, *, progress: Progress = ..., report: Literal[False] = ...
    ) -> np.ndarray: ...

    @overload
    def infer(self, x: Any, *, progress: Progress = ..., report: Literal[False] = ...) -> Any: ...

    def infer(self, x: Any, *, progress: Progress = None, report: bool = False) -> Any:
        """Logits of ``x`` (shape ``(batch, *input_shape)``), computed privately with
        the server in one session. Returns a :class:`Result` with ``report=True``."""
        xs = _floats(x, "x")
        bar = _Progress(progress, _batch(xs))
        try:
            logits = self._inner.infer(xs, progress=bar)
        finally:
            bar.close()
        if report:
            return Result(logits, self.last_report or {})
        return _like(x, logits)

    def infer_iter(self, x: Any, *, progress: Progress = None) -> Iterator[Tuple[int, Any]]:
        """Yields ``(index, logits)`` for each input of ``x`` as soon as its result
        arrives, in one session: a batch of any size (up to 4096 inputs a session) runs
        in the memory of one input, and the first results are usable while the rest are
        computed. The session runs on a background thread; leaving the loop early ends
        the session with an error on the server's side.

        >>> for i, logits in client.infer_iter(x):  # doctest: +SKIP
        ...     print(i, logits.argmax())
        """
        xs = _floats(x, "x")
        bar = _Progress(progress, _batch(xs))
        results: "queue.Queue[Optional[Tuple[int, np.ndarray]]]" = queue.Queue(maxsize=16)
        failure: List[BaseException] = []
        stop = threading.Event()

        def on_output(k: int, logits: np.ndarray) -> None:
            if stop.is_set():
                raise HelinaError("the consumer stopped reading the results")
            results.put((k, logits))

        def run() -> None:
            try:
                self._inner.infer_each(xs, on_output, progress=bar)
            except BaseException as e:  # raised in the consumer below
                failure.append(e)
            finally:
                results.put(None)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        received = 0
        try:
            while True:
                item = results.get()
                if item is None:
                    break
                received += 1
                bar.done(received)
                yield item[0], _like(x, item[1])
        finally:
            bar.close()
            stop.set()
            while t.is_alive():
                try:
                    results.get(timeout=0.05)
                except queue.Empty:
                    pass
            t.join()
        if failure:
            raise failure[0]

    @property
    def last_report(self) -> Optional[Report]:
        """The report of the last session, as a dict."""
        text = self._inner.last_report()
        return None if text is None else json.loads(text)


class Server:
    """A server of ``model``: a :class:`Model` (or a ``.helina`` file), or an ONNX model
    planned on ``calibration`` or ``input_range``; the weights encoded once for all
    sessions.

    ``nonlinear`` (``"ot"`` or ``"gc"``, with ``garbler``) is how the nonlinear
    layers run; the plan tells clients. ``max_clients`` sessions run at once (more are
    refused as busy); ``timeout`` is the frame timeout and ``session_timeout`` the
    limit of a whole session, seconds (default: derived from the plan for each
    session, a generous multiple of its predicted time).

    Production: ``tls_cert``/``tls_key`` (PEM files) serve over TLS, ``tls_client_ca``
    admits only clients whose certificate chains to that CA; ``metrics="host:port"``
    serves Prometheus metrics at ``http://host:port/metrics`` (and ``/healthz``);
    :meth:`shutdown` (or Ctrl-C in :meth:`serve`) drains: running sessions finish within
    ``drain_timeout`` seconds, new clients are told the server is shutting down.
    ``session_inputs``: the most inputs a session may run, for a model planned here
    (see :meth:`Model.from_onnx`; a :class:`Model` keeps its own).
    """

    def __init__(
        self,
        model: Any,
        *,
        calibration: Any = None,
        input_range: Optional[Sequence[float]] = None,
        tolerance: float = 0.05,
        params: Optional[str] = None,
        method: str = "auto",
        nonlinear: str = "ot",
        garbler: str = "server",
        max_clients: int = 4,
        timeout: float = 60.0,
        session_timeout: Optional[float] = None,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
        tls_client_ca: Optional[str] = None,
        metrics: Optional[str] = None,
        drain_timeout: float = 60.0,
        faithful_truncation: bool = False,
        session_inputs: Optional[int] = None,
    ):
        if not _compiled(model):
            _require_fixed_point(calibration, input_range, "a server")
        self._inner = _helina.Server(
            _model_arg(model),
            calibration=None if calibration is None else _floats(calibration, "calibration"),
            input_range=_range(input_range),
            tolerance=float(tolerance),
            params=params,
            method=method,
            nonlinear=nonlinear,
            garbler=garbler,
            max_clients=int(max_clients),
            timeout=float(timeout),
            session_timeout=None if session_timeout is None else float(session_timeout),
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_client_ca=tls_client_ca,
            metrics=metrics,
            drain_timeout=float(drain_timeout),
            faithful_truncation=bool(faithful_truncation),
            session_inputs=_session_inputs(session_inputs),
        )
        self.address: Optional[str] = None
        self._failure: Optional[HelinaError] = None

    @property
    def plan(self) -> Report:
        """The plan: parameter set, fractional bits, input range, agreement with float
        on the calibration inputs, the method of every linear layer."""
        plan: Report = json.loads(self._inner.plan())
        return plan

    @property
    def metrics_address(self) -> Optional[str]:
        """``host:port`` of the metrics endpoint (``None`` without ``metrics=``)."""
        return self._inner.metrics_address

    def shutdown(self) -> None:
        """Drains: no new sessions (new clients are told the server is shutting down),
        the running ones finish within ``drain_timeout``, then :meth:`serve` returns."""
        self._inner.shutdown()

    def listen(self, addr: str = "127.0.0.1:0") -> str:
        """Binds ``addr`` (port 0 picks a free one) and returns the address bound."""
        self.address = self._inner.listen(addr)
        return self.address

    def serve(self, addr: Optional[str] = None, *, sessions: Optional[int] = None) -> None:
        """Serves clients on ``addr`` (or the address :meth:`listen` bound) until
        ``sessions`` sessions have ended, or forever. Blocks; the GIL is released."""
        if addr is not None:
            self.listen(addr)
        # served on a thread so that Ctrl-C reaches this one (joined in short waits):
        # the first Ctrl-C drains, a second one leaves at once
        t = self.serve_in_background(sessions=sessions)
        draining = False
        while t.is_alive():
            try:
                t.join(0.2)
            except KeyboardInterrupt:
                if draining:
                    raise
                draining = True
                self.shutdown()
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def serve_in_background(self, *, sessions: Optional[int] = None) -> threading.Thread:
        """:meth:`serve` on a daemon thread (call :meth:`listen` first); join the thread
        to wait for the ``sessions`` to end."""
        if self.address is None:
            self.listen()

        def run() -> None:
            try:
                self._inner.serve(None, sessions)
            except HelinaError as e:
                self._failure = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t
