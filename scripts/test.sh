#!/usr/bin/env bash
# Runs every gwhub test, including the end-to-end ones against real kube-apiservers.
# On a fresh machine this first builds and caches the API server (scripts/kube-assets.sh,
# about 5 minutes once); later runs reuse the cache. kubectl must be on PATH: the
# end-to-end tests install gwhub with `kubectl apply -k` as a user does.
set -euo pipefail
cd "$(dirname "$0")/.."
# Cheap (cargo tree only): the rules crates stay free of I/O.
bash scripts/check-deps.sh
# Cheap too: the PrometheusRule's alerts against their promtool unit tests
# (Debian's prometheus package, installed once by scripts/prometheus.sh).
bash scripts/check-monitoring.sh
# ... and a real Prometheus with those rules against a hub and agents
# (cli/tests/prometheus.rs), and the dashboard's queries (tests/tests/monitoring.rs).
export GWHUB_REQUIRE_PROMETHEUS=1
# Debian's bind9 and knot (with dig and nsupdate) for the rfc2136 client's
# field tests against real authoritative servers (dns-rfc2136/tests/servers.rs).
bash scripts/dns-servers.sh
export GWHUB_REQUIRE_DNS=1
bash scripts/kube-assets.sh >/dev/null
export GWHUB_REQUIRE_KUBE=1
# `cargo test` builds the workspace's binaries before it runs any test; the
# end-to-end tests use those instead of building their own (one build, less disk).
export GWHUB_BIN_DIR="${CARGO_TARGET_DIR:-$PWD/target}/debug"
# Python's grpcio, grpcio-reflection and grpcio-health-checking from PyPI, in a
# venv, for the independent-client test (hub/tests/python_client.rs).
GWHUB_PY_VENV=$(bash scripts/python-client.sh)
export GWHUB_PY_VENV GWHUB_REQUIRE_PYTHON=1
# Debian's chromium and playwright-core from npm for the web page's browser
# test (cli/tests/browser.rs, tests/browser/page.mjs); screenshots go to
# target/browser-artifacts/.
GWHUB_BROWSER_DIR=$(bash scripts/browser.sh)
export GWHUB_BROWSER_DIR GWHUB_REQUIRE_BROWSER=1
# Everything once, against Gateway API v1.5.1: the upstream CRDs where
# ../shared/crds has them, else (a bare clone) CRDs generated from the Rust
# types and pinned to upstream v1.5.1.
GATEWAY_API_VERSION=v1.5.1 cargo test --workspace --all-targets --locked

# The real-API-server suites again, with the CRDs of every other Gateway API
# version OpenShift ships and as a bare clone has them (generated). Only the
# targets whose result depends on the CRDs; `--workspace` keeps the feature
# set of the build above, so nothing is rebuilt.
upstream="${GWHUB_CRDS_DIR:-$PWD/../shared/crds}"
if [ -d "$upstream" ]; then
  api_tests=()
  for f in tests/tests/*.rs; do
    t=$(basename "$f" .rs)
    case "$t" in
      # Not about the CRDs (RBAC, the schema pin, the monitoring dashboard)
      # or slow and run once more below (faults).
      rbac | crd_pin | monitoring | faults) ;;
      *) api_tests+=(--test "$t") ;;
    esac
  done
  for v in v1.2.1 v1.3.0 v1.4.1; do
    echo "== Gateway API $v (upstream CRDs): ${api_tests[*]}"
    GATEWAY_API_VERSION=$v cargo test --workspace --locked "${api_tests[@]}"
  done
  echo "== generated CRDs (a clone without ../shared): ${api_tests[*]} --test faults"
  GWHUB_CRDS_DIR=/nonexistent cargo test --workspace --locked "${api_tests[@]}" --test faults
fi
