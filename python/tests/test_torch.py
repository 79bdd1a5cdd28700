"""From a PyTorch module to a private service: helina.compile against PyTorch's own
outputs on inputs the calibration never saw, a saved model served by the ``helina``
binary without calibration data, torch tensors in and out, the progress bar.

PyTorch is the optional extra ``helina[torch]``; without it these tests are skipped,
unless ``HELINA_REQUIRE_TORCH`` is set (as ``.ci/run`` does), when they fail."""

import json
import os
import pathlib
import re
import subprocess

import numpy as np
import pytest

import helina

if os.environ.get("HELINA_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


class SmallCnn(nn.Module):
    """A small CNN with every kind of layer users export: convolutions, batch norm,
    ReLU, max and average pooling, a residual add, flatten, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.body = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))

    def forward(self, x):
        y = self.pool(self.stem(x))
        return self.head(torch.relu(y + self.body(y)))


def small_cnn(seed):
    torch.manual_seed(seed)
    net = SmallCnn()
    # batch norm with statistics of its own, as a trained model has
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    net.train()  # compile must export it in evaluation mode and leave it as it was
    return net


def normalised(seed, n):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 12, 12, generator=g)


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_compile_agrees_with_torch_on_unseen_inputs(exporter):
    net = small_cnn(1)
    calibration, unseen = normalised(2, 32), normalised(3, 6)
    model = helina.compile(net, calibration=calibration, exporter=exporter, tolerance=0.05)
    assert net.training, "compile left the module in evaluation mode"
    text = model.summary()
    assert text.startswith("helina.Model(input (3, 12, 12)") and "input range" in text
    assert len(text.splitlines()) >= 4 + len(model.plan["layers"]), text
    net.eval()
    with torch.no_grad():
        expected = net(unseen)
    r = helina.infer(model, unseen, report=True)
    assert r.matches_fixed_reference is True
    assert np.max(np.abs(r.logits - expected.numpy())) <= 0.05
    # torch in, torch out; numpy in, numpy out; each run within the tolerance (the
    # planner's approximate truncations differ from run to run by a unit at most)
    logits = helina.infer(model, unseen)
    assert isinstance(logits, torch.Tensor) and logits.dtype == torch.float32
    assert np.max(np.abs(logits.numpy() - expected.numpy())) <= 0.05
    as_numpy = helina.infer(model, unseen.numpy())
    assert isinstance(as_numpy, np.ndarray)
    assert np.max(np.abs(as_numpy - expected.numpy())) <= 0.05


def test_compile_refuses_what_it_cannot_compile():
    with pytest.raises(helina.ModelError, match="calibration"):
        helina.compile(small_cnn(1))
    with pytest.raises(helina.ModelError, match="torch.nn.Module"):
        helina.compile(object(), calibration=np.zeros((2, 3)))
    with pytest.raises(helina.ModelError, match="exporter"):
        helina.compile(small_cnn(1), calibration=normalised(2, 4), exporter="jit")
    with pytest.raises(helina.ModelError, match="example"):
        helina.compile(small_cnn(1), input_range=(-4.0, 4.0))


def test_compile_on_an_input_range_with_an_example():
    net = small_cnn(4).eval()
    model = helina.compile(net, input_range=(-4.0, 4.0), example=normalised(5, 1))
    assert model.plan["input_range"]["lo"] <= -4.0
    unseen = normalised(6, 2)
    with torch.no_grad():
        expected = net(unseen).numpy()
    assert np.max(np.abs(helina.infer(model, unseen.numpy()) - expected)) <= 0.05


def helina_binary():
    """The ``helina`` binary: ``HELINA_BIN``, else one built in this checkout."""
    given = os.environ.get("HELINA_BIN")
    if given:
        return given
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "helina"
        if p.exists():
            return str(p)
    pytest.skip("no helina binary (cargo build, or set HELINA_BIN)")


def test_saved_model_served_by_the_binary_without_calibration(tmp_path):
    """The issue's acceptance: compile from torch, save, ``helina server --model p``
    with no calibration serves a helina.Client whose logits equal helina.infer's bit
    for bit; a corrupted file is refused, saying why."""
    net = small_cnn(7)
    # faithful truncation: the remote run's results equal the local one's
    model = helina.compile(net, calibration=normalised(8, 32), faithful_truncation=True)
    saved = tmp_path / "cnn.helina"
    model.save(saved)
    x = normalised(9, 4)
    local = helina.infer(helina.Model.load(saved), x.numpy())

    server = subprocess.Popen(
        [helina_binary(), "server", "--listen", "127.0.0.1:0", "--sessions", "1",
         "--session-timeout", "900", "--model", str(saved)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        addr = None
        lines = []
        for line in server.stderr:
            lines.append(line)
            m = re.search(r"listening on (\S+)", line)
            if m:
                addr = m.group(1)
                break
        assert addr, "".join(lines)
        remote = helina.Client(addr).infer(x)
        assert isinstance(remote, torch.Tensor)
        assert np.array_equal(remote.numpy(), local)
        assert server.wait(120) == 0
    finally:
        if server.poll() is None:
            server.kill()
        server.stderr.close()

    data = bytearray(saved.read_bytes())
    data[len(data) // 2] ^= 0x01
    saved.write_bytes(bytes(data))
    with pytest.raises(helina.ModelError, match="checksum"):
        helina.Model.load(saved)


def test_progress_bar_for_a_batch(capsys):
    pytest.importorskip("tqdm")
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    model = helina.compile(net, calibration=np.random.default_rng(1).normal(size=(32, 8)))
    x = np.random.default_rng(2).normal(size=(5, 8))
    stages = []
    helina.infer(model, x, progress=stages.append)  # a callable: stages, no bar
    assert any("input 4" in s for s in stages), stages
    assert capsys.readouterr().err == ""
    helina.infer(model, x, progress=True)
    err = capsys.readouterr().err
    assert "helina" in err and "/5" in err, err
    helina.infer(model, x)  # not a terminal: no bar
    assert capsys.readouterr().err == ""


def test_cli_infer_runs_a_model_compiled_in_python(tmp_path):
    net = small_cnn(10)
    model = helina.compile(net, calibration=normalised(11, 32), faithful_truncation=True)
    saved = tmp_path / "cnn.helina"
    model.save(saved)
    x = normalised(12, 3).numpy()
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run(
        [helina_binary(), "infer", "--json", "--model", str(saved), "--input",
         str(tmp_path / "x.npy")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    logits = np.array([o["logits"] for o in report["outputs"]], dtype=np.float32)
    assert np.array_equal(logits, helina.infer(model, x))
