#!/usr/bin/env bash
# Builds both images (scripts/image.sh) and checks each one: `--version` runs
# inside the image's root filesystem (buildah from + mount + chroot: nothing
# but what the image holds) and prints the tagged version, and the manifests
# name exactly the images the script tags. podman run is not needed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILDAH=(buildah --storage-driver "${BUILDAH_STORAGE_DRIVER:-vfs}")
mapfile -t images < <(REGISTRY=localhost bash scripts/image.sh)
[ "${#images[@]}" = 2 ] || { echo "image-test: image.sh printed ${images[*]}" >&2; exit 1; }
for image in "${images[@]}"; do
  name=${image##*/}; bin=${name%%:*}; version=${name##*:}
  ctr=$("${BUILDAH[@]}" from --quiet "$image")
  mnt=$("${BUILDAH[@]}" mount "$ctr")
  out=$(chroot "$mnt" "/$bin" --version) || { echo "image-test: /$bin --version failed in $image" >&2; exit 1; }
  files=$(cd "$mnt" && find . -type f | sort | tr '\n' ' ')
  "${BUILDAH[@]}" umount "$ctr" >/dev/null
  "${BUILDAH[@]}" rm "$ctr" >/dev/null
  [ "$out" = "$bin $version" ] || { echo "image-test: $image says '$out'" >&2; exit 1; }
  grep -rq "image: $image\$" manifests/ || { echo "image-test: no manifest names $image" >&2; exit 1; }
  echo "image-test: $image: '$out'; files: $files"
done
