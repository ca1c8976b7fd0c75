#!/usr/bin/env bash
# The main job on the data shipped with the project: train a spam filter on the SMS Spam
# Collection (Parquet, no broker needed) and evaluate it on the held-out messages.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
out="$(mktemp -d)/sms.nbs"
.venv/bin/worker train scripts/data/sms_spam/train.parquet --label label --text text --ngrams 2 \
    --model multinomial --alpha 0.1 --out "$out"
.venv/bin/worker evaluate "$out" scripts/data/sms_spam/test.parquet
