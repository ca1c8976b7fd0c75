"""nbstream models as ONNX graphs, for ONNX Runtime and the other runtimes (Java, C#, JavaScript,
the edge): ``to_onnx`` (``pip install 'nbstream[onnx]'``; onnxruntime to run them), and
``write_onnx``, which writes the same model to a file holding no copy of its tables.

The graph has one input, ``X`` (N, n_features), and two outputs, ``label`` (N,) and
``probabilities`` (N, n_classes), made of the standard operators of operator set ``OPSET``: a
threshold for Bernoulli's binarize, a product with the log-probability tables for the count
models, Gaussian terms from direct differences, a table lookup for categories, then softmax and
argmax.

>>> import numpy as np, onnxruntime, nbstream
>>> model = nbstream.MultinomialNB().fit([[3, 0], [0, 4]], ["ham", "spam"])
>>> graph = to_onnx(model)
>>> session = onnxruntime.InferenceSession(graph.SerializeToString())
>>> labels, proba = session.run(None, {"X": np.array([[2.0, 1.0]])})
>>> labels.tolist(), bool(np.allclose(proba, model.predict_proba([[2, 1]]), rtol=0, atol=1e-12))
(['ham'], True)
"""

from .builder import IR_VERSION, OPSET
from .export import INPUT, LABEL, PROBABILITIES, NotExportable, to_onnx, write_onnx

__all__ = ["INPUT", "IR_VERSION", "LABEL", "OPSET", "PROBABILITIES", "NotExportable", "to_onnx", "write_onnx"]
