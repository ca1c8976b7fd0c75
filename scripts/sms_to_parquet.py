"""SMS Spam Collection to Parquet: id int64, label string (ham/spam), text string.

A deterministic split (a seeded permutation, 20% test) gives train.parquet and test.parquet:

    python scripts/sms_to_parquet.py ../shared/data/sms_spam/SMSSpamCollection scripts/data/sms_spam
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.datasets import read_sms_spam  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("collection", type=Path, help="the SMSSpamCollection file (label<TAB>text lines)")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=20111)
    args = parser.parse_args()
    labels, texts = read_sms_spam(args.collection)
    order = np.random.default_rng(args.seed).permutation(len(labels))
    n_test = int(round(len(labels) * args.test_fraction))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for split, rows in (("test", np.sort(order[:n_test])), ("train", np.sort(order[n_test:]))):
        table = pa.table({"id": pa.array(rows, pa.int64()), "label": pa.array([labels[i] for i in rows]),
                          "text": pa.array([texts[i] for i in rows])})
        pq.write_table(table, args.out_dir / f"{split}.parquet")
        print(f"{args.out_dir / f'{split}.parquet'}: {table.num_rows:,} rows")


if __name__ == "__main__":
    main()
