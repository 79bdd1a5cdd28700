"""The Python package against independent references: the float model's outputs as
onnxruntime computed them (committed beside the fixtures), the plaintext fixed-point
reference (checked inside helina, exposed in the report) and the test labels."""

import os
import pathlib
import threading

import numpy as np
import pytest

import helina

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures"


def fixture(name):
    model = str(FIXTURES / f"{name}.onnx")
    load = lambda part: np.load(FIXTURES / f"{name}-{part}.npy")
    return model, load("calibration"), load("test"), load("test-reference"), load("test-labels")


def test_infer_agrees_with_float_and_fixed_reference():
    model, calib, x, ref, labels = fixture("digits-cnn-bn")
    stages = []
    r = helina.infer(model, x[:4], calibration=calib, report=True, progress=stages.append)
    assert r.logits.shape == (4, 10)
    assert r.logits.dtype == np.float32
    # within the plan's tolerance of onnxruntime's float outputs, same labels
    assert np.max(np.abs(r.logits - ref[:4])) <= 0.05
    assert (r.labels == np.argmax(ref[:4], axis=1)).all()
    assert (r.labels == labels[:4]).sum() >= 3
    # bit for bit the plaintext fixed-point reference
    assert r.matches_fixed_reference is True
    assert r.float_max_abs_err <= 0.05
    assert r.report["params"].startswith("n")
    assert len(r.report["outputs"]) == 4
    assert all(o["total_bytes"] > 0 for o in r.report["outputs"])
    assert stages, "the progress callback was never called"


def test_residual_block_with_pools():
    model, calib, x, ref, _ = fixture("residual-pools")
    r = helina.infer(model, x[:2], calibration=calib, report=True)
    assert r.matches_fixed_reference is True
    assert np.max(np.abs(r.logits - ref[:2])) <= 0.05


def test_one_input_without_batch_axis():
    model, calib, x, ref, _ = fixture("digits-mlp")
    logits = helina.infer(model, x[0].astype(np.float64), calibration=calib)
    assert logits.shape == (1, 10)
    assert np.max(np.abs(logits[0] - ref[0])) <= 0.05


def test_client_and_server_over_tcp():
    model, calib, x, ref, _ = fixture("digits-mlp")
    # faithful truncation: a run's results are then the same as another's
    server = helina.Server(model, calibration=calib, faithful_truncation=True)
    plan = server.plan
    assert plan["accuracy"]["max_abs_err"] <= 0.025
    addr = server.listen("127.0.0.1:0")
    done = server.serve_in_background(sessions=1)
    r = helina.Client(addr).infer(x[:3], report=True)
    done.join(60)
    assert not done.is_alive()
    assert r.logits.shape == (3, 10)
    assert np.max(np.abs(r.logits - ref[:3])) <= 0.05
    assert r.report["params"] == plan["params"]
    assert r.matches_fixed_reference is None  # the client cannot see the weights
    # the same plan run locally gives the same fixed-point outputs, bit for bit
    local = helina.infer(model, x[:3], calibration=calib, report=True, faithful_truncation=True)
    assert [o["fixed"] for o in r.report["outputs"]] == [o["fixed"] for o in local.report["outputs"]]


def test_residual_cifar_session_of_32_inputs_locally_and_streamed_over_tcp():
    """The CIFAR-sized residual fixture, all 32 test inputs in one session: locally
    (bit for bit the fixed-point reference, within the tolerance of onnxruntime), then
    from a server to a client that takes the results one by one as they arrive
    (``infer_iter``), equal to the local session's logits."""
    model, calib, x, ref, _ = fixture("residual-cifar")
    # faithful truncation: the two sessions' results are then equal
    local = helina.infer(model, x, calibration=calib, report=True, faithful_truncation=True)
    assert local.matches_fixed_reference is True
    assert np.max(np.abs(local.logits - ref)) <= 0.05
    server = helina.Server(model, calibration=calib, faithful_truncation=True)
    addr = server.listen("127.0.0.1:0")
    done = server.serve_in_background(sessions=1)
    seen = []
    for i, logits in helina.Client(addr).infer_iter(x):
        assert logits.shape == (10,)
        assert np.array_equal(logits, local.logits[i])
        seen.append(i)
    done.join(120)
    assert not done.is_alive()
    assert seen == list(range(32))


def test_bad_inputs_raise_input_error():
    model, calib, x, _, _ = fixture("digits-mlp")
    with pytest.raises(helina.InputError, match="shape"):
        helina.infer(model, x[:2, :, :4], calibration=calib)
    with pytest.raises(helina.InputError):
        helina.infer(model, x[:2] * 1000.0, calibration=calib)
    bad = x[:2].copy()
    bad[0, 0] = np.nan
    with pytest.raises(helina.InputError):
        helina.infer(model, bad, calibration=calib)
    with pytest.raises(helina.InputError):
        helina.infer(model, np.array(["a", "b"]), calibration=calib)


def test_sessions_sized_by_session_inputs():
    """A model planned for sessions of one input serves one input (within the tolerance
    of onnxruntime) and refuses a session of two; a bad size is an input error."""
    model, calib, x, ref, _ = fixture("digits-mlp")
    m = helina.Model.from_onnx(model, calibration=calib, session_inputs=1)
    server = helina.Server(m)
    addr = server.listen("127.0.0.1:0")
    done = server.serve_in_background(sessions=2)
    r = helina.Client(addr).infer(x[:1], report=True)
    assert np.max(np.abs(r.logits - ref[:1])) <= 0.05
    with pytest.raises(helina.HelinaError, match="more inputs than its sessions"):
        helina.Client(addr).infer(x[:2])
    done.join(60)
    assert not done.is_alive()
    # the default plan takes the two-input session
    wide = helina.Model.from_onnx(model, calibration=calib)
    assert helina.infer(wide, x[:2]).shape == (2, 10)
    for bad in [0, helina.MAX_INPUTS_PER_SESSION + 1, 1.5]:
        with pytest.raises(helina.InputError):
            helina.Model.from_onnx(model, calibration=calib, session_inputs=bad)
    with pytest.raises(helina.InputError):
        helina.Server(m, session_inputs=2)


def test_server_refuses_out_of_range_client_input():
    model, calib, x, _, _ = fixture("digits-mlp")
    server = helina.Server(model, calibration=calib)
    addr = server.listen("127.0.0.1:0")
    done = server.serve_in_background(sessions=1)
    with pytest.raises(helina.InputError):
        helina.Client(addr).infer(x[:1] * 1000.0)
    done.join(60)


def test_model_errors():
    model, calib, _, _, _ = fixture("digits-mlp")
    with pytest.raises(helina.ModelError):
        helina.Server(model)
    with pytest.raises(helina.ModelError):
        helina.infer(str(FIXTURES / "make_fixtures.py"), np.zeros((1, 1, 8, 8)), calibration=calib)
    with pytest.raises(helina.HelinaError):
        helina.infer(model, np.zeros((1, 1, 8, 8)), calibration=calib, method="no-such-method")


def test_unreachable_server_raises_protocol_error():
    with pytest.raises(helina.ProtocolError):
        helina.Client("127.0.0.1:1", timeout=5).infer(np.zeros((1, 1, 8, 8), np.float32))


def test_silent_ot_and_garbled_circuits_give_the_same_outputs():
    model, calib, x, _, _ = fixture("digits-cnn")
    # garbled circuits truncate faithfully; so does this silent-OT run
    ot = helina.infer(model, x[:2], calibration=calib, report=True, faithful_truncation=True)
    gc = helina.infer(model, x[:2], calibration=calib, nonlinear="gc", garbler="client", report=True)
    assert ot.matches_fixed_reference and gc.matches_fixed_reference
    assert [o["fixed"] for o in ot.report["outputs"]] == [o["fixed"] for o in gc.report["outputs"]]
    methods = lambda r: {l["method"] for l in r.report["layers"] if l["kind"] in ("relu", "maxpool", "relu+maxpool", "truncate")}
    assert methods(ot) == {"ot"} and methods(gc) == {"gc"}
    # per inference (offline + online) silent OT sends far fewer bytes than garbling
    per_input = lambda r: r.report["outputs"][1]["total_bytes"]
    assert per_input(ot) * 3 < per_input(gc)
    with pytest.raises(helina.HelinaError, match="nonlinear"):
        helina.infer(model, x[:1], calibration=calib, nonlinear="mpc")


def test_sklearn_pipeline_labels_come_from_the_graph():
    model = str(FIXTURES / "sklearn-pipeline.onnx")
    calib = np.load(FIXTURES / "sklearn-pipeline-calibration.npy")
    x = np.load(FIXTURES / "sklearn-pipeline-test.npy")[:3]
    import json

    ref = json.loads((FIXTURES / "sklearn-pipeline-test-reference.json").read_text())
    r = helina.infer(model, x, calibration=calib, report=True)
    assert list(r.labels) == ref["label"][:3]
    probs = r.graph_outputs["probabilities"]
    assert probs.shape == (3, 10)
    assert np.max(np.abs(probs - np.asarray(ref["probabilities"][:3]))) <= 0.02
    assert r.matches_fixed_reference


def test_tls_metrics_and_drain():
    trustme = pytest.importorskip("trustme")
    import tempfile
    import urllib.request

    model, calib, x, ref, _ = fixture("digits-mlp")
    ca, stranger = trustme.CA(), trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    with tempfile.TemporaryDirectory() as d:
        path = lambda name: os.path.join(d, name)
        leaf.cert_chain_pems[0].write_to_path(path("server.pem"))
        leaf.private_key_pem.write_to_path(path("server.key"))
        ca.cert_pem.write_to_path(path("ca.pem"))
        stranger.cert_pem.write_to_path(path("stranger.pem"))
        server = helina.Server(
            model,
            calibration=calib,
            tls_cert=path("server.pem"),
            tls_key=path("server.key"),
            metrics="127.0.0.1:0",
            drain_timeout=30,
            faithful_truncation=True,
        )
        addr = server.listen("127.0.0.1:0")
        serving = server.serve_in_background()
        # over TLS: the results of a local run, bit for bit
        r = helina.Client(addr, tls_ca=path("ca.pem")).infer(x[:2], report=True)
        local = helina.infer(model, x[:2], calibration=calib, report=True, faithful_truncation=True)
        assert [o["fixed"] for o in r.report["outputs"]] == [
            o["fixed"] for o in local.report["outputs"]
        ]
        # a client trusting another CA is refused with the TLS failure named
        with pytest.raises(helina.ProtocolError, match="certificate"):
            helina.Client(addr, tls_ca=path("stranger.pem")).infer(x[:1])
        # the metrics saw the session
        text = urllib.request.urlopen(f"http://{server.metrics_address}/metrics").read().decode()
        assert "helina_inferences_total 2" in text
        assert 'helina_sessions_finished_total{outcome="ok"} 1' in text
        # drain: serve returns, a new client is told the server is shutting down
        server.shutdown()
        serving.join(30)
        assert not serving.is_alive()


def test_compiled_model_is_saved_loaded_and_served_without_calibration(tmp_path):
    model, calib, x, ref, _ = fixture("digits-cnn-bn")
    m = helina.Model.from_onnx(model, calibration=calib, faithful_truncation=True)
    assert repr(m).startswith("helina.Model(input (") and "fractional bits" in repr(m)
    path = tmp_path / "digits.helina"
    m.save(path)
    loaded = helina.Model.load(path)
    assert loaded.plan["layers"] == m.plan["layers"]
    assert loaded.plan["frac_bits"] == m.plan["frac_bits"]
    # a server of the loaded model needs no calibration data
    server = helina.Server(loaded)
    addr = server.listen("127.0.0.1:0")
    done = server.serve_in_background(sessions=1)
    r = helina.Client(addr).infer(x[:3], report=True)
    done.join(60)
    assert not done.is_alive()
    assert np.max(np.abs(r.logits - ref[:3])) <= 0.05
    # the same fixed-point results as the model planned from ONNX, run locally
    local = helina.infer(m, x[:3], report=True)
    assert local.matches_fixed_reference is True
    assert [o["fixed"] for o in r.report["outputs"]] == [o["fixed"] for o in local.report["outputs"]]
    # a path to the saved file works wherever a model goes
    assert np.array_equal(helina.infer(str(path), x[:1]), local.logits[:1])
    # a damaged file is refused, saying why
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    bad = tmp_path / "bad.helina"
    bad.write_bytes(bytes(data))
    with pytest.raises(helina.ModelError, match="checksum"):
        helina.Model.load(bad)
    bad.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(helina.ModelError, match="truncated"):
        helina.Model.load(bad)
