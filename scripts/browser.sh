#!/usr/bin/env bash
# Prepares (once) what the browser test needs (cli/tests/browser.rs runs
# tests/browser/page.mjs): Debian's chromium, installed with apt-get if it
# is missing, and playwright-core from npm in a cache directory (it drives
# the system chromium; no browser download). Prints that directory.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${GWHUB_BROWSER_DIR:-${CARGO_TARGET_DIR:-$PWD/target}/browser-node}
PLAYWRIGHT_VERSION=1.65.1
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "browser.sh: installing Debian's chromium (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >&2; }
  else
    echo "browser.sh: chromium is needed (apt-get install chromium, as root)" >&2; exit 1
  fi
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm >&2
  else
    echo "browser.sh: node and npm are needed" >&2; exit 1
  fi
fi
have=$(node -e "try{console.log(require('$DIR/node_modules/playwright-core/package.json').version)}catch(e){}" 2>/dev/null || true)
if [ "$have" != "$PLAYWRIGHT_VERSION" ]; then
  mkdir -p "$DIR"
  # No browser download: PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD is belt and braces
  # (playwright-core downloads none anyway).
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$DIR" --no-audit --no-fund --silent \
    "playwright-core@$PLAYWRIGHT_VERSION" >&2
fi
echo "$DIR"
