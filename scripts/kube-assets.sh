#!/usr/bin/env bash
# Builds (once) and caches a real kube-apiserver + etcd for gwhub's end-to-end tests,
# from Debian packages only (nothing is downloaded outside the package registries).
# kube-apiserver 1.20.2 comes from Debian bookworm's source package `kubernetes`, built with
# Go 1.15 from bullseye (newer Go builds a binary that crashes serving CRDs).
# Prints the directory holding `etcd` and `kube-apiserver`. Takes ~5 minutes the first time.
set -euo pipefail
CACHE=${GWHUB_KUBE_ASSETS:-${KUBE_ASSETS_CACHE:-/var/cache/gwhub-kube-assets}}
# The end-to-end tests install gwhub with `kubectl apply -k`, as users do:
# Debian's kubectl (1.20, like the API server) when there is none.
if ! command -v kubectl >/dev/null; then
  if [ "$(id -u)" != 0 ]; then echo "kube-assets.sh: kubectl is missing (needs root to install Debian's kubernetes-client)" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y kubernetes-client >/dev/null 2>&1 || { apt-get update >/dev/null; apt-get install -y kubernetes-client >/dev/null; }
fi
if [ -x "$CACHE/kube-apiserver" ] && [ -x "$CACHE/etcd" ]; then echo "$CACHE"; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "kube-assets.sh: needs root for apt-get (or set GWHUB_KUBE_ASSETS to a built cache)" >&2; exit 1; fi
mkdir -p "$CACHE"
export DEBIAN_FRONTEND=noninteractive
if ! grep -rqs "bullseye" /etc/apt/sources.list.d/; then
  cat > /etc/apt/sources.list.d/gwhub-bullseye.sources <<'EOS'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
fi
if ! grep -rqs "deb-src" /etc/apt/sources.list.d/; then
  cat > /etc/apt/sources.list.d/gwhub-src.sources <<'EOS'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
fi
apt-get update >/dev/null
apt-get install -y golang-1.15-go etcd-server rsync dpkg-dev openssl >/dev/null
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cd "$W"
apt-get source -t bookworm kubernetes >/dev/null 2>&1
cd kubernetes-*/
mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
env GOPATH="$PWD/.go" CGO_ENABLED=0 HOME="$W" PATH=/usr/lib/go-1.15/bin:$PATH make WHAT=cmd/kube-apiserver >/dev/null
cp _output/local/bin/linux/amd64/kube-apiserver "$CACHE/"
ln -sf "$(command -v etcd)" "$CACHE/etcd"
echo "$CACHE"
