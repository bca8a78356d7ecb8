#!/usr/bin/env bash
# Builds a minimal Debian base image with Python 3 and imports it into podman, for machines that cannot
# pull images from a registry (see ../shared/notes/containers.md).
#
#   docker/build-base.sh WORKDIR [IMAGE]
#
# WORKDIR: a scratch directory (the root file system is made in WORKDIR/rootfs and removed afterwards);
# podman must already be configured (source docker/podman-env.sh first). IMAGE defaults to
# localhost/grail-base:<suite>. The Debian mirror is the one apt is configured with on this machine
# (override with DEBIAN_MIRROR); the suite is this machine's (override with DEBIAN_SUITE).
# Uses mmdebstrap when it is installed (faster), else debootstrap (or USE_DEBOOTSTRAP=1).
# Needs root and podman.
set -euo pipefail

work=${1:?usage: build-base.sh WORKDIR [IMAGE]}
. /etc/os-release
suite=${DEBIAN_SUITE:-${VERSION_CODENAME:-bookworm}}
image=${2:-localhost/grail-base:$suite}

# The first http(s) mirror that apt uses for the suite, from deb822 .sources files or one-line lists.
find_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # deb822 stanzas are separated by blank lines; print URIs of a stanza whose Suites list the suite.
        awk -v suite="$suite" '
            BEGIN { RS = ""; FS = "\n" }
            {
                uris = ""; ok = 0; enabled = 1
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
                    if ($i ~ /^Suites:/) { s = " " $i " "; if (s ~ (" " suite " ")) ok = 1 }
                    if ($i ~ /^Enabled:[ \t]*no/) enabled = 0
                }
                if (ok && enabled && uris != "") { split(uris, u, /[ \t]+/); print u[1] }
            }' "$f"
    done
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk -v suite="$suite" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i == suite) { u = $(i - 1); print u } }' || true
}
mirror=${DEBIAN_MIRROR:-$(find_mirror | grep -E '^https?://' | grep -v -- '-security' | head -n 1 || true)}
if [ -z "$mirror" ]; then
    echo "build-base: no Debian mirror for '$suite' found in apt's sources; set DEBIAN_MIRROR" >&2
    exit 1
fi

packages=python3,python3-venv,ca-certificates
import_image() {  # a root file system as a tar stream on stdin -> the podman image
    podman import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["python3"]' \
        - "$image" >/dev/null 2>"$work/import.log" || { cat "$work/import.log" >&2; return 1; }
}

t0=$SECONDS
if command -v mmdebstrap >/dev/null && [ "${USE_DEBOOTSTRAP:-0}" != 1 ]; then
    # mmdebstrap (apt-based, one dpkg run) is 2-3x faster than debootstrap here and streams a tarball.
    echo "build-base: mmdebstrap $suite (minbase + python3) from $mirror"
    mmdebstrap --mode=root --variant=minbase --include="$packages" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        "$suite" - "$mirror" 2>"$work/bootstrap.log" | import_image || {
        tail -n 30 "$work/bootstrap.log" >&2
        exit 1
    }
else
    rootfs="$work/rootfs"
    rm -rf "$rootfs"
    mkdir -p "$rootfs"
    echo "build-base: debootstrap $suite (minbase + python3) from $mirror"
    debootstrap --variant=minbase --include="$packages" \
        "$suite" "$rootfs" "$mirror" >"$work/bootstrap.log" 2>&1 || {
        tail -n 30 "$work/bootstrap.log" >&2
        exit 1
    }
    # Trim what an image does not need.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
    tar -C "$rootfs" -c . | import_image
    rm -rf "$rootfs"
fi
echo "build-base: $image built and imported in $((SECONDS - t0)) s"
