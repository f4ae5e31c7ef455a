#!/usr/bin/env bash
# Installs the Python kubernetes client (tests/clients/python/requirements.txt, every package
# pinned) from PyPI into a venv of its own, in a cache folder keyed by the client's version, the
# Python version and the requirements' hash, and prints the venv's python. A no-op when it is there.
# Not part of build.sh: only TestRealClients needs it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

python=${PYTHON:-python3}
requirements="$CLIENTS_DIR/python/requirements.txt"
grep -qx "kubernetes==$PYTHON_KUBERNETES_VERSION" "$requirements" ||
  die "$requirements does not pin kubernetes==$PYTHON_KUBERNETES_VERSION (lib.sh)"
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
key=$(sha256sum "$requirements" | cut -c1-12)
venv="$CACHE_DIR/bin/python-kubernetes-$PYTHON_KUBERNETES_VERSION-py$pyver-$key"

# The venv is made where it stays (a venv's scripts name its path), so .installed marks a finished one.
if [[ ! -e "$venv/.installed" ]]; then
  log "installing the Python kubernetes client $PYTHON_KUBERNETES_VERSION (about 30 seconds cold)"
  start=$(date +%s)
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check -r "$requirements" >&2
  touch "$venv/.installed"
  log "installed in $(( $(date +%s) - start ))s into $venv"
fi
echo "$venv/bin/python"
