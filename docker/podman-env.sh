# shellcheck shell=bash
# Source this file with a scratch directory as its argument:
#
#     . docker/podman-env.sh /tmp/somewhere
#
# It writes a containers.conf and a storage.conf there and exports CONTAINERS_CONF and
# CONTAINERS_STORAGE_CONF, so that podman keeps its images and containers under that directory and
# works on machines where the defaults fail (see ../shared/notes/containers.md):
#   - open-file/process limits: the sandbox refuses podman's default rlimits;
#   - runtime runc with cgroupfs (crun fails on a hybrid cgroup v1/v2 host), file events logger;
#   - overlay storage under the scratch directory, out of the system folders.
# Nothing outside the scratch directory is changed; removing it (after `podman system reset`) removes
# everything podman stored.

grail_podman_env() {
    local dir="$1"
    mkdir -p "$dir/storage/root" "$dir/storage/run" "$dir/tmp"
    local nofile
    nofile=$(ulimit -Hn)
    if [ "$nofile" = unlimited ]; then nofile=1048576; fi
    cat >"$dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$dir/events.log"
tmp_dir = "$dir/tmp"
EOF
    cat >"$dir/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$dir/storage/root"
runroot = "$dir/storage/run"
EOF
    export CONTAINERS_CONF="$dir/containers.conf"
    export CONTAINERS_STORAGE_CONF="$dir/storage.conf"
    # Build layers in the scratch directory too, not in /var/tmp.
    export TMPDIR="$dir/tmp"
}

grail_podman_env "$1"
