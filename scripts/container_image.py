"""Build the nbstream container image with podman, from the Containerfile at the top of the repository.

    python3 scripts/container_image.py build [--tag nbstream:dev] [--base IMAGE | --debian-base]
                                                  # prints the image's name, size and build time
    python3 scripts/container_image.py base       # prints the name of a base image built from Debian packages

`build` passes --base (default: the Containerfile's own, python:3.11-slim from a registry) as the
build argument BASE. Where no registry is reachable, --debian-base builds one first: `base` runs
mmdebstrap (Debian bookworm, minbase, python3 with its venv module and the CA certificates), makes
a virtual environment /opt/python first on PATH, copies in this machine's CA certificates and has
its pip trust them (so a package index behind a proxy that re-signs TLS answers as it does here),
and imports the tree as localhost/nbstream-base:KEY. KEY is a hash of that recipe and of the
certificates, so the base is made once (about 20 s) and reused until one of them changes; its
tarball is kept in ~/.cache/nbstream/container-base too. The wheels come from the index pip uses
on this machine (PIP_INDEX_URL, or index-url in pip's configuration), else from PyPI.

Needs podman (as root, or rootless with subordinate ids) and, for the Debian base, mmdebstrap;
nothing from the project's virtual environment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONTAINERFILE = REPO / "Containerfile"
DEFAULT_TAG = "localhost/nbstream:dev"
BASE_NAME = "localhost/nbstream-base"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nbstream" / "container-base"
HOST_CERTIFICATES = Path("/etc/ssl/certs/ca-certificates.crt")
VENV = "/opt/python"
SUITE = "bookworm"  # Debian 12: python3 is 3.11, as in python:3.11-slim
PACKAGES = ["python3", "python3-venv", "ca-certificates"]
# documentation a base image needs no copy of, but for the licenses
DPKG_PATHS = ["path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
              "path-exclude=/usr/share/man/*", "path-exclude=/usr/share/info/*", "path-exclude=/usr/share/locale/*"]


class ImageError(Exception):
    """A step of the build failed; the message says which, and the tool's last words."""


def run(command: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    """``command``, its output captured; ImageError naming ``what`` failed when it does."""
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        last_words = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise ImageError(f"{what} failed (exit status {done.returncode}):\n{last_words}")
    return done


def pip_index() -> str | None:
    """The package index pip uses on this machine: PIP_INDEX_URL, else index-url in pip's configuration."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in listed.stdout.splitlines():  # e.g. global.index-url='https://...'
        key, _, value = line.partition("=")
        if key.endswith(".index-url"):
            return value.strip().strip("'\"")
    return None


def base_recipe() -> list[str]:
    """The mmdebstrap command (without its output path) that makes the Debian base's tree."""
    pip_conf = f"[global]\\ncert = {HOST_CERTIFICATES}\\n"
    return ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES),
            *[f"--dpkgopt={path}" for path in DPKG_PATHS],
            f'--customize-hook=chroot "$1" python3 -m venv {VENV}',
            f'--customize-hook=printf "{pip_conf}" > "$1{VENV}/pip.conf"',
            f'--customize-hook=upload {HOST_CERTIFICATES} {HOST_CERTIFICATES}',
            SUITE]


def base_key(recipe: list[str], certificates: bytes) -> str:
    """A short hash of what the base is made from: a change of recipe or of certificates makes a new one."""
    digest = hashlib.sha256(json.dumps(recipe).encode())
    digest.update(certificates)
    return digest.hexdigest()[:16]


def image_exists(name: str) -> bool:
    return subprocess.run(["podman", "image", "exists", name], capture_output=True).returncode == 0


def debian_base() -> str:
    """The Debian base image's name, built and imported unless it already is."""
    certificates = HOST_CERTIFICATES.read_bytes() if HOST_CERTIFICATES.exists() else b""
    recipe = base_recipe()
    key = base_key(recipe, certificates)
    name = f"{BASE_NAME}:{key}"
    if image_exists(name):
        return name
    tarball = CACHE / f"{key}.tar"
    if not tarball.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as scratch:  # a tarball is complete or absent
            partial = Path(scratch) / "base.tar"
            run([*recipe, str(partial)], "mmdebstrap")
            partial.rename(tarball)
    run(["podman", "import", "--change", f"ENV=PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
         "/sbin:/bin", "--change", "ENV=LANG=C.UTF-8", str(tarball), name], "podman import")
    return name


def build(tag: str, base: str | None) -> str:
    """Build the image from the Containerfile as ``tag``; ``base`` is its BASE (None: the Containerfile's)."""
    command = ["podman", "build", "--file", str(CONTAINERFILE), "--tag", tag]
    if base:
        command += ["--build-arg", f"BASE={base}"]
    index = pip_index()
    if index:
        command += ["--build-arg", f"PIP_INDEX_URL={index}"]
    run([*command, str(REPO)], "podman build")
    return tag


def image_size(name: str) -> int:
    """The image's size in bytes, as podman counts it (all its layers)."""
    return int(run(["podman", "image", "inspect", "--format", "{{.Size}}", name], "podman image inspect").stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("base", help="build (or find) the Debian base image and print its name")
    builder = commands.add_parser("build", help="build the image and print its name, size and build time")
    builder.add_argument("--tag", default=DEFAULT_TAG, help=f"the image's name (default: {DEFAULT_TAG})")
    bases = builder.add_mutually_exclusive_group()
    bases.add_argument("--base", help="the base image (default: the Containerfile's, python:3.11-slim)")
    bases.add_argument("--debian-base", action="store_true", help="build on the Debian base (no registry needed)")
    args = parser.parse_args()
    try:
        if args.command == "base":
            print(debian_base())
            return
        started = time.monotonic()
        base = debian_base() if args.debian_base else args.base
        name = build(args.tag, base)
        print(f"{name}\t{image_size(name) / 1e6:.0f} MB\t{time.monotonic() - started:.1f} s")
    except ImageError as error:
        sys.exit(str(error))


if __name__ == "__main__":
    main()
