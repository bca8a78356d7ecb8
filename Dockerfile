# syntax=docker/dockerfile:1
# GRAIL reachability-index service.
#
#   docker build -t grail .                                  # GPU-ready (numba-cuda + NVIDIA's CUDA wheels)
#   docker build --build-arg WITH_CUDA=0 -t grail:cpu .      # CPU only, ~1 GB smaller
#   docker run -d -p 127.0.0.1:8000:8000 -v grail-data:/data grail     # CPU, this machine only
#   docker run -d --gpus all -p 127.0.0.1:8000:8000 -v grail-data:/data grail   # GPU (NVIDIA Container Toolkit)
# Without access keys anyone who reaches the port may upload and delete: publish on 127.0.0.1, or mount a keys
# file and set GRAIL_API_KEYS_FILE before publishing on other interfaces (docker/README.md, "Access keys").
#
# Labels: --build-arg VERSION=... REVISION=$(git rev-parse HEAD) CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) SOURCE=<repo URL>
# Behind a TLS-intercepting proxy, pass its CA bundle as a build secret (it does not stay in the image):
#   --secret id=pipca,src=/etc/ssl/certs/ca-certificates.crt
# and a package index with --build-arg PIP_INDEX_URL=... (PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS likewise).
# See docker/README.md.

# The base image by digest, so that a rebuild starts from the same files: python:3.12-slim's multi-platform
# index as published in August 2026. To move on: docker buildx imagetools inspect python:3.12-slim, and
# replace the digest (keep the tag beside it for people).
ARG BASE=python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea

# ---------------------------------------------------------------------------------------------------
# Build stage: a virtual environment in /opt/grail with the service and its dependencies.
FROM ${BASE} AS build

# 1: numba-cuda with NVIDIA's CUDA toolkit wheels (nvrtc, nvvm, cudart, nvjitlink); 0: CPU only.
ARG WITH_CUDA=1
# numba-cuda's extra that picks the toolkit: cu12 (drivers >= 525) or cu13 (drivers >= 580).
ARG CUDA_EXTRA=cu12
# Optional package index settings, passed through to pip (empty: pip's defaults).
ARG PIP_INDEX_URL=""
ARG PIP_EXTRA_INDEX_URL=""
ARG PIP_FIND_LINKS=""
ARG PIP_TRUSTED_HOST=""

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DEFAULT_TIMEOUT=180

SHELL ["/bin/sh", "-eu", "-c"]

RUN python3 -m venv /opt/grail

WORKDIR /src
COPY . /src

# tbb gives numba a thread-safe threading layer: with only its default "workqueue" layer, two threads
# running parallel code at once (a query during a build) abort the process. numba finds libtbb through
# the loader path set in the final stage. Every version comes from requirements.lock (pip reads it as
# constraints), as in CI. pip reads PIP_* from the environment; empty ones are dropped so that pip keeps its
# defaults.
# The CA secret, when given, is used for this step only. The test suites shipped inside the numba and
# numpy wheels and pip itself are dead weight at run time and are removed; duplicate copies of shared
# libraries become links (docker/dedup-libs.py). The bytecode pip compiled stays (the non-root user
# could not write it, and every start would compile again).
RUN --mount=type=secret,id=pipca,target=/run/secrets/pipca \
    for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS PIP_TRUSTED_HOST; do \
        eval "val=\${$v:-}"; if [ -z "$val" ]; then unset "$v"; fi; \
    done; \
    if [ -s /run/secrets/pipca ]; then export PIP_CERT=/run/secrets/pipca; fi; \
    if [ "$WITH_CUDA" = 1 ]; then set -- ".[cuda]" "numba-cuda[$CUDA_EXTRA]"; else set -- "."; fi; \
    /opt/grail/bin/python -m pip install --no-cache-dir --constraint requirements.lock "$@" tbb; \
    site=$(/opt/grail/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))'); \
    rm -rf "$site"/numba/tests "$site"/numpy/*/tests "$site"/numpy/tests "$site"/pip "$site"/pip-*.dist-info; \
    /opt/grail/bin/python -I docker/dedup-libs.py /opt/grail/lib; \
    LD_LIBRARY_PATH=/opt/grail/lib /opt/grail/bin/python -I -c \
        'import grail_core, service.app, service.main; from numba.np.ufunc import tbbpool'

# ---------------------------------------------------------------------------------------------------
# Final stage: the base image, the virtual environment and a non-root user; no compilers, no pip cache.
FROM ${BASE}

ARG WITH_CUDA=1
ARG BASE
ARG VERSION=unknown
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.title="grail" \
      org.opencontainers.image.description="GRAIL reachability index service: upload a directed graph, ask whether u reaches v." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE}" \
      grail.with-cuda="${WITH_CUDA}"

RUN groupadd --system --gid 10001 grail \
    && useradd --system --uid 10001 --gid grail --home-dir /var/lib/grail --create-home \
        --shell /usr/sbin/nologin grail \
    && mkdir -p /data /var/cache/grail/numba /var/cache/grail/cupy \
    && chown grail:grail /data /var/cache/grail /var/cache/grail/numba /var/cache/grail/cupy

COPY --from=build /opt/grail /opt/grail
# The shared libraries that wheels put in the environment's lib/ (libtbb for numba's threading layer).
RUN echo /opt/grail/lib > /etc/ld.so.conf.d/grail.conf && ldconfig

# Configuration: every setting of grail-serve has a GRAIL_* variable; these are the image's defaults.
# NUMBA_CACHE_DIR keeps numba's compiled code (CPU and GPU) and the search cost model's fit, CUPY_CACHE_DIR
# CuPy's kernels, in a writable place (mount a volume on /var/cache/grail to keep them across containers:
# a new container otherwise compiles again, in the background, before /ready).
# GRAIL_ALLOW_ANONYMOUS: inside its own network namespace the server listens on every interface of the
# container; who reaches it is decided by how the port is published (-p 127.0.0.1:8000:8000), or by keys.
# The memory limits' defaults follow the container's memory limit (--memory), where one is set.
ENV PATH=/opt/grail/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    GRAIL_HOST=0.0.0.0 \
    GRAIL_PORT=8000 \
    GRAIL_DATA_DIR=/data \
    GRAIL_BACKEND=auto \
    GRAIL_ALLOW_ANONYMOUS=true \
    NUMBA_CACHE_DIR=/var/cache/grail/numba \
    CUPY_CACHE_DIR=/var/cache/grail/cupy \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

VOLUME ["/data"]
EXPOSE 8000
USER 10001:10001
WORKDIR /var/lib/grail

# The caches filled with every kernel of the builds (every input format), the queries (every request
# body), paths, listings and updates, so that a container's server and build workers only load them and its
# first upload compiles nothing: numba's CPU kernels (keyed by CPU model: on another kind of CPU the
# start-up warm-up compiles again) and, where the build sees a GPU (a builder with GPU access,
# e.g. BuildKit's --device), the GPU kernels of kernels.specializations, CuPy's and the search cost model
# of this GPU. Without one they are filled by the first start on a GPU machine: mount a volume on
# /var/cache/grail to keep them for every later container.
# (service.main first: it names the cache's folder for these sources before numba is imported.)
RUN python -c "import service.main, service.warmup as w; print('caches filled for', w.fill_caches('auto'))"

# Liveness: /health answers within seconds of the start, while the kernels may still compile (/ready says when
# they are done; use it for a load balancer's readiness).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/opt/grail/bin/python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('GRAIL_PORT', '8000'), timeout=4)"]

ENTRYPOINT ["grail-serve"]
