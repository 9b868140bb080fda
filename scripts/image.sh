#!/usr/bin/env bash
# Builds the container images `$REGISTRY/gwhub:$VERSION` and
# `$REGISTRY/gwhub-agent:$VERSION` (REGISTRY defaults to localhost, VERSION to
# the workspace version, the tags manifests/ name) with buildah, from
# `scratch`: the release binary (profile `image`: no debug info, stripped) and
# exactly the shared libraries ldd lists for it. Installs buildah from
# Debian's packages when it is missing (as root). Prints the image names.
#
# Push with the same storage driver, e.g.:
#   buildah --storage-driver vfs login registry.example.com
#   buildah --storage-driver vfs push localhost/gwhub:0.1.0 docker://registry.example.com/gwhub:0.1.0
# (or build with REGISTRY=registry.example.com and push those names), then
# name the pushed images in manifests/*/deployment.yaml or with a kustomize
# `images:` entry.
set -euo pipefail
cd "$(dirname "$0")/.."
REGISTRY=${REGISTRY:-localhost}
VERSION=${VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
if ! command -v buildah >/dev/null; then
  if [ "$(id -u)" != 0 ]; then echo "image.sh: buildah is missing (apt-get install buildah)" >&2; exit 1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y buildah >/dev/null
fi
# vfs and chroot isolation: no overlay mounts or namespaces needed, so this
# works inside containers and CI runners too.
BUILDAH=(buildah --storage-driver "${BUILDAH_STORAGE_DRIVER:-vfs}")
cargo build --locked --profile image -p gwhub --bin gwhub --bin gwhub-agent >&2
for bin in gwhub gwhub-agent; do
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  mkdir -p "$ctx/rootfs"
  cp "$TARGET/image/$bin" "$ctx/rootfs/$bin"
  # Every library the dynamic linker loads, at the path it loads it from
  # (the loader itself included); a static binary has none.
  for lib in $(ldd "$TARGET/image/$bin" | grep -o '/[^ ]*' || true); do
    mkdir -p "$ctx/rootfs$(dirname "$lib")"
    cp -L "$lib" "$ctx/rootfs$lib"
  done
  "${BUILDAH[@]}" bud --isolation chroot --quiet -f "images/$bin.Containerfile" \
    -t "$REGISTRY/$bin:$VERSION" "$ctx" >&2
  rm -rf "$ctx"
  trap - EXIT
  echo "$REGISTRY/$bin:$VERSION"
done
