#!/usr/bin/env bash
# Creates (once) a Python virtualenv with the standard gRPC client packages
# from PyPI -- grpcio, grpcio-reflection, grpcio-health-checking -- for the
# independent-client test (tests/python/dashboard_client.py, run by
# hub/runtime/tests/python_client.rs). Prints the venv's directory.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GWHUB_PY_VENV:-${CARGO_TARGET_DIR:-$PWD/target}/py-grpc}
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import grpc, grpc_reflection, grpc_health' 2>/dev/null; then
  echo "$VENV"; exit 0
fi
PY=$(command -v python3 || true)
if [ -z "$PY" ]; then echo "python-client.sh: python3 is needed" >&2; exit 1; fi
if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
  # Debian's python3 has venv in a separate package.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv >/dev/null
    "$PY" -m venv "$VENV" >/dev/null
  else
    echo "python-client.sh: cannot create a venv (install python3-venv)" >&2; exit 1
  fi
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check \
  grpcio grpcio-reflection grpcio-health-checking >&2
echo "$VENV"
