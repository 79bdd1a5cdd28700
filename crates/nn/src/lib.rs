//! Networks: ONNX import, IR, quantisation, fixed-point reference.
