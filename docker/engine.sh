#!/usr/bin/env bash
# Makes sure a Docker engine runs and the sandbox image exists. Idempotent: each step is skipped
# when its result is already there, so it is cheap to call before every test run.
#
#   bash docker/engine.sh            # engine + image
#   IMAGE=name:tag bash docker/engine.sh
#
# No registry is needed: the base image is bootstrapped from the Debian mirror configured in
# apt (debootstrap + docker import). Set AGENTRL_SANDBOX_BASE=debian:bookworm-slim to build
# FROM a registry image instead.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
IMAGE="${IMAGE:-agentrl-sandbox:latest}"
BASE_IMAGE="${BASE_IMAGE:-agentrl-sandbox-base:bookworm}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

log() { echo "[engine.sh] $*" >&2; }

# --- 1. the engine -----------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
    if ! command -v dockerd >/dev/null 2>&1; then
        log "installing docker.io"
        $SUDO apt-get update -q
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q docker.io
    fi
    if ! docker info >/dev/null 2>&1; then
        log "starting dockerd (no bridge, no iptables: sandboxes never get a network)"
        $SUDO sh -c 'nohup dockerd --bridge=none --iptables=false >/var/log/dockerd.log 2>&1 &'
        for _ in $(seq 1 60); do
            docker info >/dev/null 2>&1 && break
            sleep 1
        done
        docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /var/log/dockerd.log"; exit 1; }
    fi
fi

# --- 2. the image --------------------------------------------------------------------------------
# The image is labelled with a hash of what it is built from, so an edited Dockerfile, package list or
# MCP server lock (mcp-servers.txt) rebuilds it.
recipe_hash="$(cat "$here/Dockerfile" "$here/packages.txt" "$here/mcp-servers.txt" | sha256sum | cut -c1-16)"
current="$(docker image inspect -f '{{ index .Config.Labels "org.agentrl.recipe" }}' "$IMAGE" 2>/dev/null || true)"
if [ "$current" = "$recipe_hash" ]; then
    exit 0
fi

base="${AGENTRL_SANDBOX_BASE:-}"
if [ -z "$base" ]; then
    base="$BASE_IMAGE"
    if ! docker image inspect "$base" >/dev/null 2>&1; then
        if ! command -v debootstrap >/dev/null 2>&1; then
            log "installing debootstrap"
            $SUDO apt-get update -q
            DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q debootstrap
        fi
        # the first Debian mirror apt is configured with (deb822 .sources or one-line .list)
        mirror="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}')"
        if [ -z "$mirror" ]; then
            mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
                | awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}')"
        fi
        mirror="${mirror:-http://deb.debian.org/debian}"
        include="$(grep -v '^#' "$here/packages.txt" | paste -sd, -)"
        rootfs="$(mktemp -d /tmp/agentrl-rootfs.XXXXXX)"
        log "bootstrapping Debian bookworm from $mirror into $rootfs (a few minutes)"
        $SUDO debootstrap --variant=minbase --include="$include" bookworm "$rootfs" "$mirror" >/tmp/agentrl-debootstrap.log 2>&1 \
            || { tail -30 /tmp/agentrl-debootstrap.log >&2; exit 1; }
        $SUDO rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        $SUDO tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$base" >/dev/null
        $SUDO rm -rf "$rootfs"
    fi
fi
# the MCP servers' wheels, downloaded here for the image's python3 (Debian bookworm's 3.11) into the build
# context, where the Dockerfile installs them without a network
IMAGE_PYTHON=3.11
rm -rf "$here/wheels"
log "downloading the MCP servers' wheels (mcp-servers.txt) for Python $IMAGE_PYTHON"
"${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: -d "$here/wheels" \
    --python-version "$IMAGE_PYTHON" --implementation cp --abi "cp${IMAGE_PYTHON/./}" \
    --platform manylinux_2_36_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    -r "$here/mcp-servers.txt" >/tmp/agentrl-wheels.log 2>&1 \
    || { tail -30 /tmp/agentrl-wheels.log >&2; exit 1; }
log "building $IMAGE FROM $base"
# a base that already holds every package builds without a network; otherwise (a registry base, or
# a local base made before packages.txt grew) the build installs the missing ones with apt
network=none
missing="$(docker run --rm -i --network none "$base" sh -c \
    'for p in $(grep -v "^#" /dev/stdin); do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done' <"$here/packages.txt")"
if [ -n "$missing" ]; then network=host; log "the base lacks: $(echo $missing)"; fi
DOCKER_BUILDKIT=0 docker build -q --network "$network" --build-arg BASE="$base" \
    --label "org.agentrl.recipe=$recipe_hash" -t "$IMAGE" "$here" >/tmp/agentrl-build.log 2>&1 \
    || { tail -30 /tmp/agentrl-build.log >&2; exit 1; }
log "built $IMAGE"
