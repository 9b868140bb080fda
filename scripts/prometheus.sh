#!/usr/bin/env bash
# Prepares (once) what the monitoring tests need: Debian's `prometheus`
# package (the server and promtool), installed with apt-get if promtool is
# missing. Prints promtool's path (prometheus is beside it).
set -euo pipefail
if ! command -v promtool >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "prometheus.sh: installing Debian's prometheus (apt-get)" >&2
    # The package's service is not wanted here: no start on install.
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >&2 ||
      { apt-get update >&2 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >&2; }
  else
    echo "prometheus.sh: promtool is needed (apt-get install prometheus, as root)" >&2; exit 1
  fi
fi
command -v promtool
