#!/usr/bin/env bash
# Runs every gwhub test, including the end-to-end ones against real kube-apiservers.
# On a fresh machine this first builds and caches the API server (scripts/kube-assets.sh,
# about 5 minutes once); later runs reuse the cache. kubectl must be on PATH: the
# end-to-end tests install gwhub with `kubectl apply -k` as a user does.
#
# Every suite runs once, against Gateway API v1.5.1. Then only the tests whose
# outcome depends on the CRDs run again: with every other Gateway API version
# OpenShift ships (v1.2.1, v1.3.0, v1.4.1), with upstream v1.6.1 for a
# management cluster (the hub's writes only), and with the CRDs a clone
# without ../shared generates from the Rust types. See docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/phase.sh
source scripts/lib/phase.sh

phase "setup (check-deps, check-sizes, promtool, API server, Python, browser, DNS servers)"
# Cheap (cargo tree only): the rules crates stay free of I/O.
bash scripts/check-deps.sh
# Cheap too: no production file over 800 lines, at most three functions
# over 100, each saying why.
python3 scripts/check-sizes.py
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
# `cargo nextest` builds the workspace's binaries before it runs any test; the
# end-to-end tests use those instead of building their own (one build, less disk).
export GWHUB_BIN_DIR="${CARGO_TARGET_DIR:-$PWD/target}/debug"
# Python's grpcio, grpcio-reflection and grpcio-health-checking from PyPI, in a
# venv, for the independent-client test (hub/runtime/tests/python_client.rs).
GWHUB_PY_VENV=$(bash scripts/python-client.sh)
export GWHUB_PY_VENV GWHUB_REQUIRE_PYTHON=1
# Debian's chromium and playwright-core from npm for the web page's browser
# test (cli/tests/browser.rs, tests/browser/page.mjs); screenshots go to
# target/browser-artifacts/.
GWHUB_BROWSER_DIR=$(bash scripts/browser.sh)
export GWHUB_BROWSER_DIR GWHUB_REQUIRE_BROWSER=1
# cargo-nextest runs each test as its own process and packs them over the
# cores; the machine image has it, a fresh machine builds it once.
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

phase "every test, Gateway API v1.5.1"
# The upstream CRDs where ../shared/crds has them, else (a bare clone) CRDs
# generated from the Rust types and pinned to upstream v1.5.1.
GATEWAY_API_VERSION=v1.5.1 cargo nextest run --workspace --all-targets --locked --profile full
# The ten slowest, from the run's JUnit report (.config/nextest.toml).
python3 - "$PWD/target/nextest/full/junit.xml" <<'PY' || true
import sys, xml.etree.ElementTree as ET
cases = [(float(c.get("time", 0)), c.get("classname", ""), c.get("name", ""))
         for c in ET.parse(sys.argv[1]).iter("testcase")]
print("the ten slowest tests:")
for took, binary, name in sorted(cases, reverse=True)[:10]:
    print(f"{took:8.1f} s  {binary} {name}")
PY

# The tests whose outcome depends on the Gateway API CRDs (the schema the API
# server validates a status write against, the manifests it takes):
# - the agent's own status writes on the local Gateway (agent_kube: every
#   reason, beside Istio's fields, the 8-condition limit);
# - the hub's aggregated writes (hub_status_accepted, hub_status_writer's
#   write and withdrawal tests, and hub_manifests);
# - the shipped install, end to end (fleet_e2e's real binaries; its
#   mixed-versions test already gives each cluster its own version).
# Identity, TLS, inventory, RBAC, the Dashboard, faults and the store are
# the same whatever the Gateway CRD is: they run once, above.
hub_writes='test(/^hub_status_accepted::/)
  | test(/^hub_manifests::/)
  | (test(/^hub_status_writer::/) & (test(hub_writes_the_aggregate_onto_hub_gateways)
      | test(withdrawn_addresses_and_listeners_leave_the_hub_gateway)))'
agent_writes='(test(/^agent_kube::/) & (test(every_reason_end_to_end)
      | test(istio_writer_and_agent_keep_each_others_fields)
      | test(read_only_mode_and_condition_limit)))
  | (test(/^fleet_e2e::/) & test(fleet_end_to_end_with_the_real_binaries))'
upstream="${GWHUB_CRDS_DIR:-$PWD/../shared/crds}"
if [ -d "$upstream" ]; then
  for v in v1.2.1 v1.3.0 v1.4.1; do
    phase "CRD-dependent tests, Gateway API $v (upstream CRDs)"
    GATEWAY_API_VERSION=$v cargo nextest run --workspace --locked \
      -E "package(gwhub-tests) & ($hub_writes | $agent_writes)"
  done
  # A management cluster on upstream Gateway API: the hub writes there, no
  # OpenShift agent does.
  phase "hub write tests, Gateway API v1.6.1 (upstream CRDs, management cluster)"
  GATEWAY_API_VERSION=v1.6.1 cargo nextest run --workspace --locked \
    -E "package(gwhub-tests) & ($hub_writes)"
  # A bare clone generates every CRD it needs (Gateway API, ClusterProfile,
  # PlacementDecision, external-dns DNSEndpoint): the inventory's tests and
  # fleet DNS's DNSEndpoint tests depend on those too (its rfc2136 tests
  # write no Kubernetes object but the hub Gateways' status: they run once).
  phase "CRD-dependent tests, generated CRDs (a clone without ../shared)"
  GWHUB_CRDS_DIR=/nonexistent cargo nextest run --workspace --locked \
    -E "package(gwhub-tests) & ($hub_writes | $agent_writes | test(/^inventory::/)
      | (test(/^fleet_dns::/) & !test(rfc2136) & !test(two_replicas)))"
fi
