"""Readers for the public datasets the tests, benchmarks and data converters use.

MNIST comes as IDX files (optionally gzipped): a big-endian header (magic number, one
uint32 per dimension) followed by raw uint8 data.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}


def default_data_dir() -> Path:
    """NBSTREAM_DATA_DIR, else ``data/`` in the working directory."""
    return Path(os.environ.get("NBSTREAM_DATA_DIR", "data"))


def read_idx(path) -> np.ndarray:
    """An IDX file as a uint8 array; images are flattened to shape (n_images, rows * cols)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (magic {data[:4].hex()}).")
    n_dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(n_dims))
    offset = 4 + 4 * n_dims
    expected = int(np.prod(shape))
    if len(data) - offset != expected:
        raise ValueError(f"{path}: header promises {expected} bytes of data, file holds {len(data) - offset}.")
    array = np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(shape)
    return array.reshape(shape[0], -1) if n_dims > 1 else array


def load_mnist(directory) -> dict[str, np.ndarray]:
    """The four MNIST arrays: train_images (60000, 784), train_labels (60000,), test_*."""
    directory = Path(directory)
    missing = [name for name in MNIST_FILES.values() if not (directory / name).exists()]
    if missing:
        raise FileNotFoundError(f"MNIST files missing from {directory}: {missing}.")
    return {key: read_idx(directory / name) for key, name in MNIST_FILES.items()}


def read_sms_spam(path) -> tuple[list[str], list[str]]:
    """The SMS Spam Collection: one ``label<TAB>text`` line per message (quotes are text)."""
    labels, texts = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if not line:
                continue
            label, tab, text = line.partition("\t")
            if not tab:
                raise ValueError(f"{path}: line {number} has no TAB between label and text.")
            labels.append(label)
            texts.append(text)
    return labels, texts


def mnist_table(images: np.ndarray, labels: np.ndarray, first_id: int = 0) -> pa.Table:
    """id int64, label int64, pixels fixed_size_list<uint8>[784]: MNIST as a table."""
    pixels = pa.FixedSizeListArray.from_arrays(pa.array(images.reshape(-1), pa.uint8()), images.shape[1])
    return pa.table({"id": pa.array(np.arange(first_id, first_id + len(labels)), pa.int64()),
                     "label": pa.array(labels.astype(np.int64)), "pixels": pixels})
