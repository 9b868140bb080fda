#!/usr/bin/env bash
# Runs every gwhub test, including the end-to-end ones against real kube-apiservers.
# On a fresh machine this first builds and caches the API server (scripts/kube-assets.sh,
# about 5 minutes once); later runs reuse the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/kube-assets.sh >/dev/null
export GWHUB_REQUIRE_KUBE=1
# `cargo test` builds the workspace's binaries before it runs any test; the
# end-to-end tests use those instead of building their own (one build, less disk).
export GWHUB_BIN_DIR="${CARGO_TARGET_DIR:-$PWD/target}/debug"
cargo test --workspace --all-targets --locked
# The same API-server tests against CRDs generated from the Rust types, as on a
# clone without ../shared (limits and list markers added in code). `--workspace`
# keeps the feature set of the build above, so nothing is rebuilt.
GWHUB_CRDS_DIR=/nonexistent cargo test --workspace --locked --test harness --test hub_status_accepted
