"""The estimators need only numpy (and threadpoolctl): the library (its routes out to scikit-learn, ONNX
and MLflow included) imports and works with the optional dependencies absent."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.paths import REPO

BLOCKED = ["scipy", "pyarrow", "kafka", "typer", "rich", "prometheus_client", "orjson", "sklearn", "onnx",
           "onnxruntime", "mlflow", "pandas"]

PROGRAM = f"""
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Block())
import tempfile, pathlib
import nbstream, nbstream.onnx, nbstream.mlflow, nbstream.interop.sklearn
model = nbstream.BernoulliNB().partial_fit([[1, 0], [0, 1]], ["a", "b"])
path = nbstream.save(model, pathlib.Path(tempfile.mkdtemp()) / "m.nbs")
print(nbstream.load(path).predict([[1, 0]]).tolist())
"""


def test_the_library_works_without_the_worker_s_dependencies():
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['a']"


def test_the_worker_names_the_extra_it_needs():
    program = PROGRAM.split("import tempfile")[0] + "import worker\nworker.main()\n"
    result = subprocess.run([sys.executable, "-c", program, "--help"], capture_output=True, text=True, cwd=REPO,
                            timeout=60)
    assert result.returncode == 1
    assert "install it with: pip install 'nbstream[worker]'" in result.stderr
