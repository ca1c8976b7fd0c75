#!/usr/bin/env bash
# Create .venv and install nbstream with the given extras (default: test). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# (without the build backend's notice that an editable install follows the source folder)
PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install --quiet -e ".[${extras}]"

# CI: tests/integration/test_container.py builds the image with podman (run by root, with runc) on a
# base made by mmdebstrap; install them where we can (root, apt) and they are missing (about 10 s).
if [[ $extras == test && -n "${CI:-}" && "$(id -u)" == 0 ]] && command -v apt-get >/dev/null && ! command -v podman >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >/dev/null
    # Containers get limits a sandbox allows (podman's default asks for more open files than CI's
    # machine has) and runc (crun fails on its cgroup v1 layout).
    mkdir -p /etc/containers/containers.conf.d
    cat > /etc/containers/containers.conf.d/nbstream-ci.conf <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
CONF
fi
