"""``helina.compile``: a PyTorch module (or an ONNX model) to a compiled :class:`Model`.

PyTorch is optional (``pip install 'helina[torch]'``): it is imported only when a
module is compiled.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import numpy as np

from ._helina import ModelError

if TYPE_CHECKING:
    from . import Model, _require_fixed_point

#: Exporters tried by ``exporter="auto"``, in order: TorchScript's (fast, what most
#: models were exported with), then torch.export's ("dynamo", for what TorchScript
#: cannot trace).
EXPORTERS = ("torchscript", "dynamo")


def compile(  # noqa: A001 - the public name, as helina.compile
    model: Any,
    calibration: Any = None,
    *,
    example: Any = None,
    input_range: Optional[Sequence[float]] = None,
    tolerance: float = 0.05,
    params: Optional[str] = None,
    method: str = "auto",
    exporter: str = "auto",
    faithful_truncation: bool = False,
    session_inputs: Optional[int] = None,
) -> "Model":
    """Compiles ``model`` for private inference: a ``torch.nn.Module``, or an ONNX model
    (a path or ``bytes``). Returns a :class:`helina.Model` (save it with
    :meth:`Model.save`, serve it with :class:`Server` or ``helina server --model``).

    A module is exported with ``torch.onnx.export`` in evaluation mode (its training
    mode is restored after), on ``example`` (one input with its batch axis; default: the
    first calibration input); ``exporter`` is ``"torchscript"``, ``"dynamo"`` or
    ``"auto"`` (TorchScript's, then dynamo's where it fails). The fixed point is chosen
    on ``calibration`` (numpy or torch inputs like the real ones, not those you test
    on) or on ``input_range=(lo, hi)``, so that every logit is within ``tolerance`` of
    the float model's; the planner truncates approximately where that holds
    (``faithful_truncation=True``: never). ``session_inputs``: the most inputs one
    session of the model may run (see :meth:`Model.from_onnx`).

    >>> import torch, helina
    >>> _ = torch.manual_seed(0)
    >>> net = torch.nn.Sequential(
    ...     torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    >>> model = helina.compile(net, calibration=torch.randn(64, 16))
    >>> x = torch.randn(3, 16)
    >>> logits = helina.infer(model, x)  # private: both parties in this process
    >>> logits.shape
    torch.Size([3, 4])
    >>> bool((logits - net(x)).abs().max() < 0.05)
    True
    """
    from . import Model, _require_fixed_point

    if isinstance(model, (str, bytes, os.PathLike)):
        return Model.from_onnx(
            model,
            calibration=calibration,
            input_range=input_range,
            tolerance=tolerance,
            params=params,
            method=method,
            faithful_truncation=faithful_truncation,
            session_inputs=session_inputs,
        )
    _require_fixed_point(calibration, input_range, "helina.compile")
    onnx = export(model, _example(model, example, calibration), exporter=exporter)
    return Model.from_onnx(
        onnx,
        calibration=calibration,
        input_range=input_range,
        tolerance=tolerance,
        params=params,
        method=method,
        faithful_truncation=faithful_truncation,
        session_inputs=session_inputs,
    )


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:
        raise ModelError(
            "compiling a PyTorch module needs PyTorch: pip install 'helina[torch]' "
            "(or export it to ONNX and give the path)"
        ) from e
    return torch


def _example(model: Any, example: Any, calibration: Any) -> Any:
    """One input of ``model`` with its batch axis, as a float32 tensor."""
    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise ModelError(
            "helina.compile takes a torch.nn.Module, an ONNX path or ONNX bytes, "
            f"not {type(model).__name__}"
        )
    source = example if example is not None else calibration
    if source is None:
        raise ModelError("with input_range=, give example= (one input of the model's shape)")
    if isinstance(source, torch.Tensor):
        t = source.detach().cpu().to(torch.float32)
    else:
        t = torch.from_numpy(np.ascontiguousarray(np.asarray(source, dtype=np.float32)))
    if example is None:
        t = t[:1]  # the first calibration input
    return t


def export(model: Any, example: Any, *, exporter: str = "auto") -> bytes:
    """The ONNX bytes of ``model`` (a ``torch.nn.Module``) traced on ``example``, as
    ``torch.onnx.export`` writes them (see :func:`compile` for ``exporter``)."""
    torch = _torch()
    if exporter not in ("auto",) + EXPORTERS:
        raise ModelError(f"unknown exporter {exporter!r}: auto, {', '.join(EXPORTERS)}")
    tried = EXPORTERS if exporter == "auto" else (exporter,)
    failures: List[str] = []
    training = model.training
    model.eval()
    try:
        for name in tried:
            buffer = io.BytesIO()
            try:
                with torch.no_grad(), warnings.catch_warnings():
                    # TorchScript's exporter is deprecated in favour of dynamo's; both
                    # are what users have, and "auto" falls back to dynamo's
                    warnings.simplefilter("ignore")
                    _run_exporter(torch, model, example, buffer, dynamo=name == "dynamo")
            except Exception as e:  # the exporter's own errors vary by version
                failures.append(f"{name}: {type(e).__name__}: {e}")
                continue
            return buffer.getvalue()
    finally:
        model.train(training)
    raise ModelError("torch.onnx.export failed: " + "; ".join(failures))


def _run_exporter(
    torch: Any, model: Any, example: Any, buffer: io.BytesIO, *, dynamo: bool
) -> None:
    names = {"input_names": ["input"], "output_names": ["logits"]}
    if dynamo:
        # the dynamo exporter reports its stages on stdout unless told not to
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            torch.onnx.export(model, (example,), buffer, dynamo=True, verbose=False, **names)
    else:
        torch.onnx.export(model, (example,), buffer, dynamo=False, **names)

