"""MNIST IDX files to Parquet: id int64, label int64, pixels fixed_size_list<uint8>[784].

    python scripts/mnist_to_parquet.py ../shared/data/mnist data/mnist
writes data/mnist/train.parquet (60,000 rows) and data/mnist/test.parquet (10,000 rows).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.datasets import load_mnist, mnist_table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("idx_dir", type=Path, help="folder with the four MNIST .gz files")
    parser.add_argument("out_dir", type=Path, help="folder to write train.parquet and test.parquet to")
    parser.add_argument("--row-group-size", type=int, default=10_000)
    args = parser.parse_args()
    mnist = load_mnist(args.idx_dir)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for split, first_id in (("train", 0), ("test", 60_000)):
        table = mnist_table(mnist[f"{split}_images"], mnist[f"{split}_labels"], first_id)
        pq.write_table(table, args.out_dir / f"{split}.parquet", row_group_size=args.row_group_size)
        print(f"{args.out_dir / f'{split}.parquet'}: {table.num_rows:,} rows")


if __name__ == "__main__":
    main()
