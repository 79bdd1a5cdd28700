"""A scikit-learn pipeline, exported by skl2onnx, run privately.

    pip install ./python scikit-learn skl2onnx     # from the repository root
    python python/examples/sklearn_pipeline.py

A StandardScaler and an MLP classifier learn the digits bundled with scikit-learn
(8x8 images, string class names); skl2onnx writes the pipeline as ONNX with its
classifier head (label and probabilities). helina compiles it on training data and
predicts held-out digits privately: the client's head turns the private logits into
the pipeline's own labels.
"""

import numpy as np
from skl2onnx import to_onnx  # type: ignore[import-untyped]
from sklearn.datasets import load_digits  # type: ignore[import-untyped]
from sklearn.model_selection import train_test_split  # type: ignore[import-untyped]
from sklearn.neural_network import MLPClassifier  # type: ignore[import-untyped]
from sklearn.pipeline import make_pipeline  # type: ignore[import-untyped]
from sklearn.preprocessing import StandardScaler  # type: ignore[import-untyped]

import helina

digits = load_digits()
names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
x = digits.data.astype(np.float32)
y = names[digits.target]
x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0)

pipeline = make_pipeline(StandardScaler(), MLPClassifier((32,), max_iter=300, random_state=0))
pipeline.fit(x_train, y_train)
onnx = to_onnx(
    pipeline,
    x_train[:1],
    options={MLPClassifier: {"zipmap": False}},
    target_opset={"": 17, "ai.onnx.ml": 3},
).SerializeToString()

model = helina.compile(onnx, calibration=x_train[:64])
print(model)
test = x_test[:16]
result = helina.infer(model, test, report=True)
expected = pipeline.predict(test)
print("private:", result.labels.tolist())
print("sklearn:", expected.tolist())
agree = float(np.mean(result.labels == expected))
print(f"labels equal to scikit-learn's: {agree:.0%}; true: {float(np.mean(result.labels == y_test[:16])):.0%}")
assert result.matches_fixed_reference
assert agree >= 15 / 16, agree
