#!/usr/bin/env bash
# Builds the two static binaries (topocomm, topocomm-node) and the topocomm image
# FROM scratch: nothing is pulled, no registry is needed.
#
#   deploy/build-image.sh            # tag topocomm:latest
#   TOPOCOMM_IMAGE=topocomm:dev deploy/build-image.sh
#
# Reproducible as far as the inputs go: Cargo.lock is enforced (--locked), paths are
# remapped out of the binaries, symbols are stripped, and the build context is staged
# from nothing but the two binaries and three small files written here. The script
# prints the binaries' sha256 and the image's id and size.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

image=${TOPOCOMM_IMAGE:-topocomm:latest}
target=x86_64-unknown-linux-gnu # named even on this host: proc-macros then build for the host, without crt-static
out=${CARGO_TARGET_DIR:-target}/$target/release

for tool in cargo docker; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is not installed" >&2; exit 1; }
done

echo "== static binaries (cargo build --release --target $target, crt-static)"
export RUSTFLAGS="-C target-feature=+crt-static --remap-path-prefix=$root=/topocomm --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo"
export CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=symbols
# The image's topocomm serves, runs and reports; it draws no pictures, so it is built
# without the `pictures` feature (plotters, resvg, the embedded font, indicatif).
cargo build --release --locked --target "$target" -p topocomm-node --bins
cargo build --release --locked --target "$target" -p topocomm-coordinator --bins --no-default-features

for bin in topocomm topocomm-node; do
  if readelf -lW "$out/$bin" 2>/dev/null | grep -q 'Requesting program interpreter'; then
    echo "build-image: $out/$bin is dynamically linked; a FROM scratch image cannot run it" >&2
    exit 1
  fi
done

context=$(mktemp -d "${TMPDIR:-/tmp}/topocomm-image.XXXXXX")
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/etc" "$context/run/topocomm"
cp "$out/topocomm" "$out/topocomm-node" "$context/"
# What the static glibc resolver needs to find compose/swarm/k8s service names: the
# runtime mounts /etc/hosts, /etc/resolv.conf and /etc/hostname; this says to use them.
printf 'hosts: files dns\n' >"$context/etc/nsswitch.conf"
printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$context/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$context/etc/group"
chmod 0755 "$context/topocomm" "$context/topocomm-node"
chmod 0644 "$context"/etc/*
# Where compose's coordinator writes the cluster token for the nodes (a volume there
# starts out with this folder's owner, the image's user).
chmod 0755 "$context/run/topocomm"
# Fixed timestamps, so the staged files do not differ from one build to the next.
find "$context" -exec touch -h -d @0 {} +

revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD 2>/dev/null; then revision="$revision-dirty"; fi

echo "== image $image (FROM scratch)"
# Without the buildx plugin the docker CLI falls back to the classic builder by itself;
# with it, BuildKit builds the same Dockerfile. Either way nothing is pulled.
if ! docker buildx version >/dev/null 2>&1; then export DOCKER_BUILDKIT=0; fi
docker build --quiet -f deploy/Dockerfile --build-arg "REVISION=$revision" -t "$image" "$context" >/dev/null

(cd "$context" && sha256sum topocomm topocomm-node)
size=$(docker image inspect -f '{{.Size}}' "$image")
id=$(docker image inspect -f '{{.Id}}' "$image")
echo "image $image ($id, revision $revision): $size bytes ($(numfmt --to=iec-i --suffix=B "$size" 2>/dev/null || echo "$size B"))"
