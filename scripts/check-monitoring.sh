#!/usr/bin/env bash
# Checks manifests/monitoring/ with Debian's promtool (scripts/prometheus.sh
# installs it): the PrometheusRule's rules are valid, every alert has a unit
# test in manifests/monitoring/tests/ and they pass (input series -> the
# alerts expected, annotations included), and every runbook_url names a
# section of docs/runbooks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
promtool=$(bash scripts/prometheus.sh)
rule=manifests/monitoring/prometheusrule.yaml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One source of truth: the PrometheusRule's `spec` (its last key) is a
# Prometheus rule file once two spaces less indented.
sed -n '/^spec:$/,$p' "$rule" | tail -n +2 | sed 's/^  //' >"$work/rules.yaml"
cp manifests/monitoring/tests/*.test.yaml "$work/"
"$promtool" check rules "$work/rules.yaml"
"$promtool" test rules "$work"/*.test.yaml
fail=0
for alert in $(sed -n 's/^ *- alert: *//p' "$rule"); do
  if ! grep -q "alertname: $alert\$" manifests/monitoring/tests/*.test.yaml; then
    echo "check-monitoring: alert $alert has no test in manifests/monitoring/tests/" >&2
    fail=1
  fi
done
for anchor in $(sed -n 's/^ *runbook_url: .*docs\/runbooks\.md#//p' "$rule"); do
  # GitHub's anchor of a `## Name` heading is its lowercased text.
  if ! grep -qix "## $anchor" docs/runbooks.md; then
    echo "check-monitoring: runbook_url #$anchor: no such section in docs/runbooks.md" >&2
    fail=1
  fi
done
exit "$fail"
