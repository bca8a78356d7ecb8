#!/usr/bin/env bash
# Container smoke test: builds the image with podman, checks its labels and configuration, runs it, uploads
# a graph with curl, checks the answers to its query files, replaces the container by a new one on the same
# volumes and checks that the graph is served again without a rebuild (and the kernels come from the numba
# cache volume), then removes everything it started. Prints the image size and the start-up times.
#
#   docker/smoke-test.sh            (as root; needs podman, runc, mmdebstrap or debootstrap, curl, python3)
#
# Environment:
#   GRAIL_DATASETS        folder with <name>.gra/.que/.ans (default: ../shared/datasets beside the repo)
#   SMOKE_DATASET         dataset name (default kegg_dag_uniq); where it is missing, the generated graph `dag`
#                         of tests/generated.py is used (made with .venv/bin/python, which `make test` installs)
#   SMOKE_WITH_CUDA       the WITH_CUDA build arg (default 0 here: the CUDA wheels add ~500 MB and a minute or more to CI; the
#                         Dockerfile's own default is 1)
#   BASE                  base image; default: a local Debian image built with mmdebstrap/debootstrap
#                         (docker/build-base.sh), since no registry can be pulled from here
#   SMOKE_CA_BUNDLE       CA bundle passed to the build as the secret `pipca`
#                         (default /etc/ssl/certs/ca-certificates.crt)
#   SMOKE_BACKEND         GRAIL_BACKEND for the container (default: the image's, auto: the GPU if there
#                         is one, else the CPU)
#   SMOKE_NETWORK         `publish` (default: -p 127.0.0.1:PORT:8000) or `host` (--network host)
#   SMOKE_WORKDIR         scratch folder for podman's storage (default: a new temporary folder, removed)
#   SMOKE_KEEP=1          keep the image and the scratch folder (for a quicker second run)
#   SMOKE_BUILD_ONLY=1    build the base image and the image into SMOKE_WORKDIR (required), keep them and stop;
#                         a later run with the same SMOKE_WORKDIR finds them (its build takes every layer from
#                         the cache) and runs the checks. CI builds so while the unit tests run (.ci/run).
# pip inside the build uses the same package index settings as this machine's pip (PIP_INDEX_URL,
# PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS, PIP_TRUSTED_HOST, from the environment or `pip config`); local
# file:// indexes and find-links folders are mounted read-only into the build.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
here="$repo/docker"
datasets=${GRAIL_DATASETS:-$repo/../shared/datasets}
dataset=${SMOKE_DATASET:-kegg_dag_uniq}
with_cuda=${SMOKE_WITH_CUDA:-0}
ca_bundle=${SMOKE_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
network=${SMOKE_NETWORK:-publish}
keep=${SMOKE_KEEP:-0}
build_only=${SMOKE_BUILD_ONLY:-0}
image=localhost/grail:smoke

t_start=$SECONDS
step_t=$SECONDS
timings=()
log() { printf '[smoke %4ds] %s\n' "$((SECONDS - t_start))" "$*"; }
lap() { timings+=("$(printf '%-34s %4d s' "$1" "$((SECONDS - step_t))")"); step_t=$SECONDS; }
die() { log "FAIL: $*"; exit 1; }
since() { python3 -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"; }

for tool in podman runc curl python3; do
    command -v "$tool" >/dev/null || die "$tool is not installed (bash .ci/container installs what this test needs)"
done
[ "$(id -u)" = 0 ] || die "run as root (podman with runc and cgroupfs, debootstrap)"
if [ "$build_only" = 1 ]; then
    [ -n "${SMOKE_WORKDIR:-}" ] || die "SMOKE_BUILD_ONLY=1 needs SMOKE_WORKDIR (where the later run finds the image)"
    keep=1
fi

# --- scratch space and podman configuration ----------------------------------------------------------
if [ -n "${SMOKE_WORKDIR:-}" ]; then work=$SMOKE_WORKDIR; mkdir -p "$work"; else work=$(mktemp -d /tmp/grail-smoke.XXXXXX); fi
# shellcheck source=docker/podman-env.sh
. "$here/podman-env.sh" "$work"

tag=$$
volume=grail-smoke-$tag
cache_volume=grail-smoke-$tag-numba
containers=()
cleanup() {
    local rc=$?
    set +e
    if [ "$rc" != 0 ]; then
        for c in "${containers[@]}"; do
            log "logs of container $c (last 40 lines):"
            podman logs --tail 40 "$c" 2>&1 | sed 's/^/    /'
        done
    fi
    for c in "${containers[@]}"; do podman rm -f -t 5 "$c" >/dev/null 2>&1; done
    podman volume rm -f "$volume" "$cache_volume" >/dev/null 2>&1
    if [ "$keep" != 1 ]; then
        podman rmi -f "$image" >/dev/null 2>&1
        [ -n "${built_base:-}" ] && podman rmi -f "$built_base" >/dev/null 2>&1
        podman image prune -f >/dev/null 2>&1
        # Nothing of ours may stay mounted before the folder goes.
        findmnt -rn -o TARGET | grep -F "$work/" | sort -r | while read -r m; do umount -l "$m"; done
        rm -rf "$work"
    fi
    if [ "$rc" = 0 ]; then log "PASS (${SECONDS}s)"; else log "FAILED (exit $rc)"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- base image --------------------------------------------------------------------------------------
if [ -n "${BASE:-}" ]; then
    base=$BASE
else
    base=localhost/grail-base:smoke
    if ! podman image exists "$base"; then
        command -v mmdebstrap >/dev/null || command -v debootstrap >/dev/null ||
            die "neither mmdebstrap nor debootstrap is installed"
        log "building the base image (docker/build-base.sh)"
        bash "$here/build-base.sh" "$work" "$base"
        built_base=$base
    fi
    # The Dockerfile takes its base by digest: the local one too, where podman resolves it so.
    digest=$(podman image inspect --format '{{.Digest}}' "$base")
    if podman image exists "${base%:*}@$digest"; then base="${base%:*}@$digest"; fi
fi
lap "base image"

# --- pip settings of this machine, for the build -----------------------------------------------------
pip_value() {  # the effective value of a pip option: environment first, then pip's configuration files
    local env_name v
    env_name=PIP_$(echo "$1" | tr 'a-z-' 'A-Z_')
    v=${!env_name:-}
    if [ -z "$v" ]; then
        v=$(python3 -m pip config get "global.$1" 2>/dev/null || python3 -m pip config get "install.$1" 2>/dev/null || true)
    fi
    printf '%s' "$v"
}
build_args=()
mounted=" "
for opt in index-url extra-index-url find-links trusted-host; do
    val=$(pip_value "$opt")
    [ -n "$val" ] || continue
    arg=PIP_$(echo "$opt" | tr 'a-z-' 'A-Z_')
    build_args+=(--build-arg "$arg=$val")
    [ "$opt" = trusted-host ] && continue
    for loc in $val; do
        path=${loc#file://}
        [ "$path" != "$loc" ] || [ "${loc:0:1}" = / ] || continue
        [ -e "$path" ] || continue
        # A PEP 503 ".../simple" folder links to files beside it: mount its parent.
        [ "$(basename "$path")" = simple ] && path=$(dirname "$path")
        case "$mounted" in *" $path "*) continue ;; esac
        build_args+=(--volume "$path:$path:ro")
        mounted="$mounted$path "
    done
done
if [ -f "$ca_bundle" ]; then build_args+=(--secret "id=pipca,src=$ca_bundle"); fi

# --- build -------------------------------------------------------------------------------------------
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/pyproject.toml" | head -n 1)
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
# The creation time is a build argument: a run after SMOKE_BUILD_ONLY=1 passes the same one, or every layer
# after the label would be built again.
if [ -f "$work/created" ]; then created=$(cat "$work/created"); else created=$(date -u +%Y-%m-%dT%H:%M:%SZ); fi
echo "$created" >"$work/created"
log "building $image (BASE=$base, WITH_CUDA=$with_cuda, version $version, revision $revision)"
podman build --format docker --network host --layers \
    --build-arg "BASE=$base" --build-arg "WITH_CUDA=$with_cuda" \
    --build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "CREATED=$created" \
    "${build_args[@]}" -t "$image" -f "$repo/Dockerfile" "$repo" >"$work/build.log" 2>&1 || {
    tail -n 40 "$work/build.log"
    die "podman build failed (log above)"
}
size=$(podman image inspect --format '{{.Size}}' "$image")
log "image built: $((size / 1000000)) MB"
lap "image build (pip installs)"
if [ "$build_only" = 1 ]; then
    log "built; kept in $work for the run (SMOKE_BUILD_ONLY=1)"
    exit 0
fi

# Static checks on the image's configuration.
cfg=$(podman image inspect "$image")
python3 - "$cfg" "$version" "$revision" <<'EOF' || die "image configuration"
import json, sys
cfg = json.loads(sys.argv[1])[0]
c = cfg.get("Config") or cfg["config"]
problems = []
labels = c.get("Labels") or {}
expected = {"version": sys.argv[2], "revision": sys.argv[3], "licenses": "Apache-2.0"}
for key in ("version", "revision", "created", "source", "licenses", "base.name"):
    name = f"org.opencontainers.image.{key}"
    if name not in labels or (key != "source" and not labels[name]):
        problems.append(f"label {name} missing or empty")
    elif key in expected and labels[name] != expected[key]:
        problems.append(f"label {name} is {labels[name]!r}, not {expected[key]!r}")
if c.get("User") in (None, "", "0", "root", "0:0"):
    problems.append(f"runs as root (User={c.get('User')!r})")
if "8000/tcp" not in (c.get("ExposedPorts") or {}):
    problems.append("port 8000 not exposed")
if "/data" not in (c.get("Volumes") or {}):
    problems.append("/data is not a volume")
if not (c.get("Healthcheck") or cfg.get("Healthcheck")):
    problems.append("no HEALTHCHECK")
if "grail-serve" not in " ".join(c.get("Entrypoint") or []):
    problems.append(f"entrypoint is {c.get('Entrypoint')!r}")
for p in problems:
    print("image config:", p)
sys.exit(1 if problems else 0)
EOF

# --- the graph to upload -----------------------------------------------------------------------------
if [ ! -f "$datasets/$dataset.gra" ] || [ ! -f "$datasets/$dataset.que" ] || [ ! -f "$datasets/$dataset.ans" ]; then
    [ -x "$repo/.venv/bin/python" ] || die "no dataset $datasets/$dataset and no .venv to generate one (run make test)"
    log "dataset $datasets/$dataset absent: generating the graph 'dag' (tests/generated.py)"
    (cd "$repo" && .venv/bin/python -m tests.generated "$work/graphs" dag)
    datasets=$work/graphs
    dataset=dag
fi

# --- run ---------------------------------------------------------------------------------------------
podman volume create "$volume" >/dev/null
# numba's compiled code on a second volume (as in compose.yaml), so that the second container reuses it.
podman volume create "$cache_volume" >/dev/null
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port

backend_args=()
if [ -n "${SMOKE_BACKEND:-}" ]; then backend_args=(-e "GRAIL_BACKEND=$SMOKE_BACKEND"); fi

start_container() {  # name
    local net_args
    if [ "$network" = host ]; then
        net_args=(--network host -e GRAIL_HOST=127.0.0.1 -e "GRAIL_PORT=$port")
    else
        net_args=(-p "127.0.0.1:$port:8000")
    fi
    containers+=("$1")
    if ! podman run -d --name "$1" "${net_args[@]}" -v "$volume:/data" -v "$cache_volume:/var/cache/grail/numba" \
        "${backend_args[@]}" --memory 4g --pids-limit 4096 --no-healthcheck "$image" >/dev/null; then
        [ "$network" = publish ] || die "podman run failed"
        # Port publishing needs the bridge network; where that is not allowed, use the host's network.
        log "podman run with -p failed; retrying with --network host"
        podman rm -f "$1" >/dev/null 2>&1 || true
        network=host
        start_container "$1"
        return
    fi
    local t0=$SECONDS started
    started=$(date +%s.%N)
    until curl -fsS -o /dev/null "$url/health" 2>/dev/null; do
        [ "$(podman inspect -f '{{.State.Running}}' "$1")" = true ] || die "container $1 exited"
        [ $((SECONDS - t0)) -lt 300 ] || die "no answer on $url/health after 300 s"
        sleep 0.1
    done
    log "container $1 answers /health after $(since "$started") s: $(curl -fsS "$url/health")"
    # /ready once the query kernels are compiled (a cold numba cache) or loaded (the cache volume, warm).
    until curl -fsS -o /dev/null "$url/ready" 2>/dev/null; do
        [ $((SECONDS - t0)) -lt 600 ] || die "not ready after 600 s: $(curl -sS "$url/ready")"
        sleep 0.1
    done
    log "container $1 answers /ready after $(since "$started") s: $(curl -fsS "$url/ready")"
    # The image's HEALTHCHECK command, run once inside the container (podman runs it periodically only
    # through systemd timers, which these machines lack; the container runs with --no-healthcheck).
    local hc=()
    mapfile -d '' hc < <(podman image inspect "$image" | python3 -c '
import json, sys
img = json.load(sys.stdin)[0]
t = (img.get("Healthcheck") or img["Config"].get("Healthcheck") or {}).get("Test") or []
args = t[1:] if t[:1] == ["CMD"] else ["sh", "-c", t[1]] if t[:1] == ["CMD-SHELL"] else []
sys.stdout.write("".join(a + "\0" for a in args))')
    [ "${#hc[@]}" -gt 0 ] || die "the image has no HEALTHCHECK"
    podman exec "$1" "${hc[@]}" >/dev/null || die "the image's HEALTHCHECK command fails in $1"
}

json() {  # json FILE EXPR: evaluate a Python expression on the parsed file (as `d`)
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

check_queries() {  # id label
    local q
    for q in "$dataset" "$dataset.pos"; do
        [ -f "$datasets/$q.que" ] && [ -f "$datasets/$q.ans" ] || continue
        local t0=$SECONDS code
        code=$(curl -sS -o "$work/answers" -w '%{http_code}' -X POST \
            -H 'Content-Type: text/plain' -H 'Accept: text/plain' \
            --data-binary "@$datasets/$q.que" "$url/graphs/$1/queries")
        [ "$code" = 200 ] || { head -c 500 "$work/answers"; echo; die "$2: POST queries answered $code"; }
        if ! diff -q <(tr -d '\r' <"$work/answers" | sed '/^$/d') <(sed '/^$/d' "$datasets/$q.ans") >/dev/null; then
            diff <(tr -d '\r' <"$work/answers" | sed '/^$/d') <(sed '/^$/d' "$datasets/$q.ans") | head -n 5
            die "$2: answers to $q.que differ from $q.ans"
        fi
        log "$2: $(wc -l <"$datasets/$q.que") answers to $q.que match $q.ans ($((SECONDS - t0)) s)"
    done
    # One pair over GET as well.
    local u v expect
    read -r u v <"$datasets/$dataset.que"
    expect=$(head -n 1 "$datasets/$dataset.ans")
    curl -fsS -o "$work/one.json" "$url/graphs/$1/reachable?source=$u&target=$v" || die "$2: GET reachable failed"
    [ "$(json "$work/one.json" 'int(d["reachable"])')" = "$expect" ] || die "$2: GET reachable $u->$v is not $expect"
}

start_container "grail-smoke-$tag-1"
# numba must have a thread-safe threading layer (tbb or omp): "workqueue" aborts the server when a
# query and a build run parallel code at the same time.
layer=$(podman exec "grail-smoke-$tag-1" python -c 'import numba, numpy as np
f = numba.njit(parallel=True)(lambda a: (a * 2).sum())
f(np.arange(100))
print(numba.threading_layer())') || die "numba parallel code fails in the container"
case "$layer" in tbb | omp) log "numba threading layer: $layer" ;; *) die "numba threading layer is '$layer', not tbb or omp" ;; esac
lap "first start"

log "uploading $dataset.gra ($(wc -c <"$datasets/$dataset.gra") bytes, wait=true)"
code=$(curl -sS -o "$work/upload.json" -w '%{http_code}' -X POST -H 'Content-Type: text/x-grail-gra' \
    --data-binary "@$datasets/$dataset.gra" "$url/graphs?name=$dataset&format=gra&wait=true")
[ "$code" = 201 ] || { cat "$work/upload.json"; echo; die "upload answered $code, not 201"; }
id=$(json "$work/upload.json" 'd["id"]')
curl -fsS -o "$work/before.json" "$url/graphs/$id" || die "GET /graphs/$id failed"
[ "$(json "$work/before.json" 'd["status"]')" = ready ] || die "graph $id is not ready after wait=true"
log "graph $id ready: $(json "$work/before.json" 'json.dumps(d.get("stats", {}).get("phase_seconds"))')"
lap "upload + index build"

check_queries "$id" "first container"
lap "queries (first container)"

# --- a new container on the same volume: the graph must be served again without a rebuild -----------
log "replacing the container (stop, remove, run a new one on volume $volume)"
podman stop -t 20 "grail-smoke-$tag-1" >/dev/null
podman rm "grail-smoke-$tag-1" >/dev/null
start_container "grail-smoke-$tag-2"
lap "second start"

curl -fsS -o "$work/after.json" "$url/graphs/$id" || die "graph $id is gone after the restart"
python3 - "$work/before.json" "$work/after.json" <<'EOF' || die "graph record changed across the restart (rebuilt?)"
import json, sys
before, after = (json.load(open(p)) for p in sys.argv[1:3])
ok = True
if after.get("status") != "ready":
    print("status after restart:", after.get("status")); ok = False
if after.get("stats") != before.get("stats"):
    print("stats before:", json.dumps(before.get("stats"))); print("stats after: ", json.dumps(after.get("stats"))); ok = False
sys.exit(0 if ok else 1)
EOF
log "graph $id still ready after the restart, stats and phase times unchanged"
check_queries "$id" "second container"
lap "queries (second container)"

log "timings:"
for t in "${timings[@]}"; do log "  $t"; done
