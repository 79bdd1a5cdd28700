"""Export a PyTorch model the usual way and run it privately with helina.

    pip install torch onnx numpy ./python   # from the repository root
    python python/examples/torch_export.py

A small CNN learns a toy task (which colour channel of a noisy image is brightest;
any trained model will do), is exported with torch.onnx.export's defaults (weights in
an external data file beside the model), then runs with both parties in this process;
the private logits are compared with PyTorch's own.
"""

import pathlib
import tempfile

import numpy as np
import torch
from torch import nn

import helina

torch.manual_seed(0)
model = nn.Sequential(
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


def data(n):
    """Normalised noisy images whose label is the channel lifted by 0.5."""
    y = torch.randint(0, 3, (n,))
    x = torch.randn(n, 3, 16, 16)
    x[torch.arange(n), y] += 0.5
    return x, y


x, y = data(512)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for _ in range(100):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
model.eval()

path = pathlib.Path(tempfile.mkdtemp()) / "small-cnn.onnx"
torch.onnx.export(model, (x[:1],), str(path))

calibration = x[:32].numpy()  # the server's data, to choose the fixed point
test, labels = data(4)  # the client's private inputs
with torch.no_grad():
    expected = model(test).numpy()

result = helina.infer(str(path), test.numpy(), calibration=calibration, report=True)
print("parameters:", result.report["params"], "fractional bits:", result.report["frac_bits"])
print("private labels:", result.labels, " torch:", expected.argmax(axis=1), " true:", labels.numpy())
print("max |private - torch|:", float(np.max(np.abs(result.logits - expected))))
print("equal to the fixed-point reference bit for bit:", result.matches_fixed_reference)
print("bytes per inference:", [o["total_bytes"] for o in result.report["outputs"]])
