"""Types of the Rust extension (python/src/lib.rs); users import :mod:`helina`."""

from typing import Any, Callable, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str
#: The most inputs one session runs (a session's default size).
MAX_INPUTS_PER_SESSION: int

#: Called with each stage's description and the index of the input it belongs to.
Stage = Callable[[str, Optional[int]], Any]

class HelinaError(Exception): ...
class InputError(HelinaError): ...
class ModelError(HelinaError): ...
class ProtocolError(HelinaError): ...

def infer(
    model_path: Any,
    x: npt.NDArray[Any],
    calibration: Optional[npt.NDArray[Any]] = ...,
    input_range: Optional[Tuple[float, float]] = ...,
    tolerance: float = ...,
    params: Optional[str] = ...,
    method: str = ...,
    nonlinear: str = ...,
    garbler: str = ...,
    progress: Optional[Stage] = ...,
    faithful_truncation: bool = ...,
    session_inputs: Optional[int] = ...,
) -> Tuple[npt.NDArray[np.float32], str]: ...

class Model:
    @staticmethod
    def from_onnx(
        onnx: Any,
        calibration: Optional[npt.NDArray[Any]] = ...,
        input_range: Optional[Tuple[float, float]] = ...,
        tolerance: float = ...,
        params: Optional[str] = ...,
        method: str = ...,
        faithful_truncation: bool = ...,
        session_inputs: Optional[int] = ...,
    ) -> "Model": ...
    @staticmethod
    def load(path: str, session_inputs: Optional[int] = ...) -> "Model": ...
    def save(self, path: str) -> None: ...
    def plan(self) -> str: ...

class Client:
    def __init__(
        self,
        addr: str,
        params: Optional[str] = ...,
        timeout: float = ...,
        tls_ca: Optional[str] = ...,
        tls_server_name: Optional[str] = ...,
        tls_cert: Optional[str] = ...,
        tls_key: Optional[str] = ...,
    ) -> None: ...
    def infer(
        self, x: npt.NDArray[Any], progress: Optional[Stage] = ...
    ) -> npt.NDArray[np.float32]: ...
    def infer_each(
        self,
        x: npt.NDArray[Any],
        on_output: Callable[[int, npt.NDArray[np.float32]], Any],
        progress: Optional[Stage] = ...,
    ) -> None: ...
    def last_report(self) -> Optional[str]: ...

class Server:
    def __init__(
        self,
        model_path: Any,
        calibration: Optional[npt.NDArray[Any]] = ...,
        input_range: Optional[Tuple[float, float]] = ...,
        tolerance: float = ...,
        params: Optional[str] = ...,
        method: str = ...,
        nonlinear: str = ...,
        garbler: str = ...,
        max_clients: int = ...,
        timeout: float = ...,
        session_timeout: Optional[float] = ...,
        tls_cert: Optional[str] = ...,
        tls_key: Optional[str] = ...,
        tls_client_ca: Optional[str] = ...,
        metrics: Optional[str] = ...,
        drain_timeout: float = ...,
        faithful_truncation: bool = ...,
        session_inputs: Optional[int] = ...,
    ) -> None: ...
    @property
    def metrics_address(self) -> Optional[str]: ...
    def shutdown(self) -> None: ...
    def listen(self, addr: str) -> str: ...
    def serve(self, addr: Optional[str] = ..., sessions: Optional[int] = ...) -> None: ...
    def plan(self) -> str: ...
