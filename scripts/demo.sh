#!/usr/bin/env bash
# The main job on the data shipped with the project (the SMS Spam Collection in scripts/data/sms_spam):
#
#   scripts/demo.sh [batch]   train a spam filter on the training messages (Parquet, no broker needed)
#                             and evaluate it on the held-out ones.
#   scripts/demo.sh service   the same messages through Kafka: a local broker (scripts/kafka_broker.py:
#                             Java 17 and Maven), `worker serve` predicting every message and learning
#                             from it, a consumer printing a few predictions, and the prequential accuracy
#                             from the service's /metrics. Everything it started is stopped and its
#                             temporary folder removed when it ends, also on Ctrl-C.
#
# Both set up .venv first with what they need and nothing more (scripts/setup.sh worker: the
# worker command, its Parquet and Kafka libraries; not the tests' tools). Environment:
#   NBSTREAM_DEMO_SKIP_SETUP=1   use the .venv that is there instead (setup reinstalls the project)
#   NBSTREAM_DEMO_TIMEOUT=120    seconds the service demo waits for each of its steps at most
# Results go to stdout, the demo's own notes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly DATA=scripts/data/sms_spam
readonly TIMEOUT="${NBSTREAM_DEMO_TIMEOUT:-120}"
readonly INPUT_TOPIC=sms OUTPUT_TOPIC=sms.predictions GROUP=spam
readonly SHOWN_PREDICTIONS=5

# What is running, for cleanup (empty: nothing of that kind).
workdir=""     # this run's temporary folder
step_pid=""    # the step being waited for (see run_step)
serve_pid=""   # worker serve
broker_dir=""  # the broker's folder, once it is being started

usage() {
    echo "usage: scripts/demo.sh [batch|service]" >&2
}

say() {
    printf '==> %s\n' "$*" >&2
}

fail() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

setup_venv() {
    if [[ "${NBSTREAM_DEMO_SKIP_SETUP:-}" == 1 ]]; then
        [[ -x .venv/bin/worker ]] || fail "NBSTREAM_DEMO_SKIP_SETUP=1 but there is no .venv/bin/worker; run scripts/setup.sh worker"
    else
        say "setting up .venv (scripts/setup.sh worker; the first time it downloads the packages)"
        scripts/setup.sh worker
    fi
}

make_workdir() {
    workdir="$(mktemp -d -t nbstream-demo.XXXXXX)"
}

# ---- batch: train on Parquet, evaluate on the held-out messages ---------------------------------

batch_demo() {
    local model  # kept after the demo, where `worker train` says it wrote it
    model="$(mktemp -d -t nbstream-demo.XXXXXX)/sms.nbs"
    .venv/bin/worker train "$DATA/train.parquet" --label label --text text --ngrams 2 \
        --model multinomial --alpha 0.1 --out "$model"
    .venv/bin/worker evaluate "$model" "$DATA/test.parquet"
}

# ---- service: the same messages through Kafka -----------------------------------------------------

service_demo() {
    local bootstrap metrics_port n_train n_test
    make_workdir
    n_train=$(count_rows "$DATA/train.parquet")
    n_test=$(count_rows "$DATA/test.parquet")
    start_broker
    bootstrap=$(cat "$broker_dir/bootstrap")
    # The training messages first, then the held-out ones (two calls: one call orders its files by
    # name), so the last predictions are of held-out messages by a model that learned the training set.
    produce "$bootstrap" "$DATA/train.parquet"
    produce "$bootstrap" "$DATA/test.parquet"
    metrics_port=$(free_port)
    start_service "$bootstrap" "$metrics_port"
    wait_until_served "$metrics_port" $((n_train + n_test))
    show_predictions "$bootstrap" "$n_train" $((n_train + n_test))
    show_accuracy "$metrics_port"
}

count_rows() {
    .venv/bin/python -c 'import sys, pyarrow.parquet as pq; print(pq.ParquetFile(sys.argv[1]).metadata.num_rows)' "$1"
}

free_port() {
    .venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A broker in $broker_dir, its bootstrap address written to $broker_dir/bootstrap.
start_broker() {
    broker_dir="$workdir/kafka"
    mkdir -p "$broker_dir"
    say "starting a Kafka broker on 127.0.0.1 (Apache Kafka jars; the first run downloads them)"
    run_step .venv/bin/python scripts/kafka_broker.py start --dir "$broker_dir" --timeout "$TIMEOUT" \
        >"$broker_dir/bootstrap" || fail "the Kafka broker did not start"
    say "broker at $(cat "$broker_dir/bootstrap")"
}

produce() {
    local bootstrap=$1 path=$2
    say "producing $path to topic $INPUT_TOPIC"
    run_step .venv/bin/worker produce "$path" --bootstrap "$bootstrap" --topic "$INPUT_TOPIC" \
        --text text --label label --id id
}

start_service() {
    local bootstrap=$1 metrics_port=$2
    # The model of the batch demo (multinomial, word 1- and 2-grams, alpha 0.1). A polled batch is
    # predicted whole before it is learned from, so a backlog polled at once would be predicted by
    # a model that has learned nothing (a null prediction, not judged): 100 messages a poll make
    # each message predicted by the model of every message before its poll, as a live stream would
    # be. Commits every second rather than every 5 s, so that predictions become visible (they
    # are, under exactly-once, when their transaction commits) without a long wait.
    setsid .venv/bin/worker serve --bootstrap "$bootstrap" --input "$INPUT_TOPIC" --output "$OUTPUT_TOPIC" \
        --group "$GROUP" --text-features --ngrams 2 --alpha 0.1 --max-poll-records 100 --checkpoint-interval 1 \
        --metrics-port "$metrics_port" >"$workdir/serve.log" 2>&1 &
    serve_pid=$!
    say "worker serve running (pid $serve_pid, log $workdir/serve.log), metrics at http://127.0.0.1:$metrics_port/metrics"
}

# The value of a metric (the first line whose name and labels are SERIES) from /metrics; empty
# while the service does not answer or does not report it yet.
metric() {
    local port=$1 series=$2
    .venv/bin/python - "$port" "$series" 2>/dev/null <<'EOF' || true
import sys, urllib.request
port, series = sys.argv[1:]
page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
print(next((line.split()[-1] for line in page.splitlines() if line.split(" ")[0] == series), ""))
EOF
}

# Wait until the service has consumed every message and reports a prequential accuracy.
wait_until_served() {
    local port=$1 expected=$2 consumed
    local deadline=$((SECONDS + TIMEOUT))
    say "waiting for the service to predict and learn $expected messages (at most $TIMEOUT s)"
    while true; do
        # (cleanup reports how it ended, with its log)
        kill -0 "$serve_pid" 2>/dev/null || fail "the service exited before it had served every message"
        consumed=$(metric "$port" nbstream_messages_total)
        consumed=${consumed%.*}  # a counter: 5574.0
        if [[ -n "$consumed" && $consumed -ge $expected
              && -n "$(metric "$port" 'nbstream_prequential_accuracy{model="main",window="all"}')" ]]; then
            return
        fi
        if ((SECONDS >= deadline)); then
            tail -n 20 "$workdir/serve.log" >&2
            fail "no prequential accuracy for all $expected messages at /metrics within $TIMEOUT s" \
                "(consumed so far: ${consumed:-none}; the end of the service's log is above)"
        fi
        sleep 0.5
    done
}

# A consumer of the predictions as an application would be: read_committed, so it sees a prediction
# once its transaction has committed. It reads them all and prints the first few of held-out messages.
show_predictions() {
    local bootstrap=$1 first_held_out=$2 expected=$3
    say "a consumer of $OUTPUT_TOPIC (read_committed): the first predictions of held-out messages"
    run_step .venv/bin/python -c "$CONSUMER" "$bootstrap" "$OUTPUT_TOPIC" "$first_held_out" "$expected" \
        "$SHOWN_PREDICTIONS" "$TIMEOUT"
}

readonly CONSUMER='
import sys, time
from kafka import KafkaConsumer
bootstrap, topic = sys.argv[1:3]
first_held_out, expected, shown, timeout = (int(a) for a in sys.argv[3:])
consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, isolation_level="read_committed",
                         auto_offset_reset="earliest", enable_auto_commit=False, group_id=None)
values, deadline = [], time.monotonic() + timeout
while len(values) < expected and time.monotonic() < deadline:
    for records in consumer.poll(timeout_ms=500).values():
        values.extend(record.value.decode() for record in records)
consumer.close()
if len(values) < expected:
    sys.exit(f"error: only {len(values)} of {expected} predictions committed within {timeout} s")
for value in values[first_held_out:first_held_out + shown]:
    print(value)
'

show_accuracy() {
    local port=$1
    echo "prequential accuracy (each message predicted before it is learned from), from /metrics:"
    echo "nbstream_prequential_accuracy{model=\"main\",window=\"all\"}" \
        "$(metric "$port" 'nbstream_prequential_accuracy{model="main",window="all"}')"
    echo "nbstream_prequential_accuracy{model=\"main\",window=\"recent\"}" \
        "$(metric "$port" 'nbstream_prequential_accuracy{model="main",window="recent"}')" \
        "(decayed over about the last 1,000: mostly the held-out messages)"
}

# ---- running steps, and stopping everything ----------------------------------------------------

# Run a step in a session of its own and wait for it. Bash runs a trap only after a foreground
# command has ended, but at once while in `wait`, so Ctrl-C acts immediately; and in its own
# session the step (with any process it starts) is out of the terminal's reach, to be stopped by
# cleanup as a whole process group.
run_step() {
    setsid "$@" &
    step_pid=$!
    local status=0
    wait "$step_pid" || status=$?
    step_pid=""
    return "$status"
}

# SIGTERM to a process (or, given as -PGID, a process group); SIGKILL if it is not gone in SECONDS.
terminate() {
    local target=$1 seconds=$2
    local deadline=$((SECONDS + seconds))
    kill -TERM -- "$target" 2>/dev/null || return 0
    while kill -0 -- "$target" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            kill -KILL -- "$target" 2>/dev/null
            return 0
        fi
        sleep 0.1
    done
}

stop_service() {
    if kill -0 "$serve_pid" 2>/dev/null; then
        say "stopping the service (SIGTERM: it commits what it has done and exits)"
        terminate "$serve_pid" 60
    fi
    local status=0
    wait "$serve_pid" 2>/dev/null || status=$?
    case $status in
        0) say "the service exited with status 0" ;;
        143) say "the service was stopped while starting (SIGTERM before it had connected: nothing to commit)" ;;
        *) say "the service exited with status $status; the end of its log:"
           tail -n 20 "$workdir/serve.log" >&2 ;;
    esac
}

stop_broker() {
    say "stopping the broker"
    .venv/bin/python scripts/kafka_broker.py stop --dir "$broker_dir"
    # A start that was interrupted leaves a broker the launcher had not recorded yet (in a session
    # of its own); its command line names its configuration in this run's folder.
    local pid
    for pid in $(pgrep -f -- "$broker_dir/server.properties"); do
        terminate "$pid" 30
    done
}

on_interrupt() {
    [[ -t 2 ]] && printf '\n' >&2  # past the ^C the terminal echoed, maybe on a progress bar's line
    say "interrupted"
    exit 130
}

cleanup() {
    # Not to be cut short by a second Ctrl-C or a closed pipe: every wait in it is bounded.
    trap '' INT TERM HUP PIPE
    set +e
    if [[ -n "$step_pid" ]]; then
        terminate "-$step_pid" 10
        # A progress bar cut short leaves the terminal's cursor hidden.
        [[ -t 2 ]] && printf '\e[?25h' >&2
    fi
    [[ -n "$serve_pid" ]] && stop_service
    [[ -n "$broker_dir" ]] && stop_broker
    [[ -n "$workdir" ]] && rm -rf "$workdir"
}

main() {
    local mode="${1:-batch}"
    if (($# > 1)) || [[ "$mode" != batch && "$mode" != service ]]; then
        usage
        exit 2
    fi
    trap cleanup EXIT
    trap on_interrupt INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    trap 'exit 141' PIPE
    setup_venv
    "${mode}_demo"
}

main "$@"
