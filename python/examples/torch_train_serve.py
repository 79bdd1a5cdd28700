"""Train a model in PyTorch, compile it, save it, serve it, query it privately.

    pip install './python[torch]'     # from the repository root
    python python/examples/torch_train_serve.py

A small CNN learns a toy task (which colour channel of a noisy, normalised image is
brightest; any trained model will do). ``helina.compile`` exports it and chooses the
fixed point on the server's calibration data; the compiled model is saved as one
file, loaded by a server (``helina server --model`` takes the same file) and queried by
a client whose images the server never sees.
"""

import pathlib
import tempfile
from typing import Tuple

import numpy as np
import torch
from torch import nn

import helina

torch.manual_seed(0)


def data(n: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Normalised noisy images whose label is the channel lifted by 0.5."""
    y = torch.randint(0, 3, (n,))
    x = torch.randn(n, 3, 16, 16)
    x[torch.arange(n), y] += 0.5
    return x, y


net = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(16, 3),
)
x, y = data(512)
opt = torch.optim.Adam(net.parameters(), lr=0.01)
for _ in range(60):
    opt.zero_grad()
    nn.functional.cross_entropy(net(x), y).backward()  # type: ignore[no-untyped-call]
    opt.step()

# the server's side: compile on its own data, save one file
model = helina.compile(net, calibration=x[:64])
print(model)
path = pathlib.Path(tempfile.mkdtemp()) / "cnn.helina"
model.save(path)

server = helina.Server(helina.Model.load(path))
addr = server.listen("127.0.0.1:0")
serving = server.serve_in_background(sessions=1)

# the client's side: private images in, logits out
test, labels = data(8)
logits = helina.Client(addr).infer(test)
serving.join()

net.eval()
with torch.no_grad():
    expected = net(test)
err = float((logits - expected).abs().max())
print("private labels:", logits.argmax(dim=1).tolist())
print("torch labels:  ", expected.argmax(dim=1).tolist())
print("true labels:   ", labels.tolist())
print(f"max |private - torch| = {err:.4f}")
assert err <= 0.05, err
assert np.array_equal(logits.argmax(dim=1).numpy(), expected.argmax(dim=1).numpy())
