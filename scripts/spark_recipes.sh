#!/usr/bin/env bash
# The recipes of docs/spark.md ("Recipes"), run as written against a standalone cluster and a Spark
# Connect server on this machine (tests/integration/test_spark_cluster.py runs this script, and
# checks that each recipe's lines in the docs are here, unchanged).
#
#   CLUSTER=spark://HOST:PORT CONNECT=sc://HOST:PORT DATA=DIR EXECUTOR_PYTHON=PATH scripts/spark_recipes.sh WORKDIR
#
# DATA holds Parquet with label and pixels; EXECUTOR_PYTHON is the cluster's Python (numpy, pyarrow,
# scipy; no nbstream). The driver is the Python of .venv (nbstream[worker,spark-connect] installed).
# Each recipe leaves its model in WORKDIR; the script ends at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
export PATH="$repo/.venv/bin:$PATH"
work=${1:?a working folder}
mkdir -p "$work"
cd "$work"
master=${CLUSTER:?the spark:// URL of a standalone master}

echo "==> the command line against spark://"
worker train "$DATA" --engine spark --master "$master" --spark-conf spark.pyspark.python="$EXECUTOR_PYTHON" \
    --label label --features pixels --model multinomial --out cli.nbs

echo "==> spark-submit with a packed environment"
python -m venv env && env/bin/pip install --quiet numpy pyarrow scipy venv-pack
env/bin/venv-pack -p env -o env.tar.gz --quiet
PYSPARK_DRIVER_PYTHON="$(command -v python)" PYSPARK_PYTHON=./env/bin/python spark-submit \
    --master "$master" --archives env.tar.gz#env \
    "$(python -c 'import worker, os; print(os.path.dirname(worker.__file__))')/__main__.py" \
    train "$DATA" --engine spark --label label --features pixels --out submit.nbs

echo "==> Spark Connect"
worker train "$DATA" --engine spark --master "$CONNECT" --label label --features pixels --out connect.nbs

echo "==> a notebook's session (Databricks: spark is given)"
python - <<PYTHON
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote("$CONNECT").getOrCreate()
import nbstream.spark

train = spark.read.parquet("$DATA")
pipeline = nbstream.spark.fit(train, label="label", features="pixels", model="multinomial")
pipeline.save("notebook.nbs")
print(nbstream.spark.evaluate(pipeline, train)["accuracy"])
PYTHON
echo "recipes: 4 ran"
