"""nbstream.mlflow.load_model reads the snapshot its MLmodel names only inside the model's folder: a
forged path that leads out (by "..", as an absolute path, through a symbolic link) is refused before
anything is opened, even when it names a snapshot that would load."""

from __future__ import annotations

import os

import pytest

import nbstream
import nbstream.mlflow


@pytest.fixture
def model_folder(tmp_path):
    model = nbstream.MultinomialNB().fit([[3, 0], [0, 4]], ["ham", "spam"])
    nbstream.mlflow.save_model(model, tmp_path / "model")
    nbstream.save(model, tmp_path / "elsewhere.nbs")  # a valid snapshot outside the model's folder
    return tmp_path / "model"


def forge(folder, snapshot: str) -> None:
    """The MLmodel file of ``folder`` with its nbstream flavor's snapshot path replaced."""
    mlmodel = folder / "MLmodel"
    mlmodel.write_text(mlmodel.read_text().replace("snapshot: data/model.nbs", f"snapshot: {snapshot}"))


def test_the_snapshot_inside_the_folder_loads(model_folder):
    assert nbstream.mlflow.load_model(str(model_folder)).classes_.tolist() == ["ham", "spam"]


@pytest.mark.parametrize("snapshot", ["../elsewhere.nbs", "data/../../elsewhere.nbs", "ABSOLUTE"])
def test_a_path_out_of_the_folder_is_refused(model_folder, snapshot):
    forge(model_folder, str(model_folder.parent / "elsewhere.nbs") if snapshot == "ABSOLUTE" else snapshot)

    with pytest.raises(ValueError, match=r"refused the nbstream flavor's snapshot path .*: it leads out of the "
                                         r"model's folder \(symbolic links followed\)\.$"):
        nbstream.mlflow.load_model(str(model_folder))


def test_a_symbolic_link_out_of_the_folder_is_refused_before_it_is_opened(model_folder, monkeypatch):
    (model_folder / "data" / "model.nbs").unlink()
    os.symlink(model_folder.parent / "elsewhere.nbs", model_folder / "data" / "model.nbs")
    opened = []
    monkeypatch.setattr(nbstream.mlflow, "load_snapshot", opened.append)

    with pytest.raises(ValueError, match="'data/model.nbs': it leads out of the model's folder"):
        nbstream.mlflow.load_model(str(model_folder))
    assert opened == []
