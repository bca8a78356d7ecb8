"""Checks rendered Kubernetes manifests and resolved compose files, offline (run by .ci/deploy-check).

    python .ci/validate-manifests.py SETTINGS kubernetes VERSION[,VERSION...] FILE...   (YAML streams: helm template)
    python .ci/validate-manifests.py SETTINGS compose FILE...                (docker compose config --format json)

SETTINGS: a file of grail-serve's variables, one a line (.ci/deploy-check writes it from service/settings.py
with the project's environment; this script runs in the tools' environment, beside kubernetes-validate).

Kubernetes objects are validated against the API's schemas in strict mode (an unknown or misspelt field is an
error) with kubernetes-validate's bundled schemas, for every version given. Then what the schemas cannot see:
- every pod's containers run as non-root on a read-only root file system, without privilege escalation, with
  CPU and memory requests and limits; the serving containers have probes on /health and /ready;
- every GRAIL_* variable, in the manifests and the compose files alike, is a setting of service/settings.py
  (pydantic-settings ignores an unknown one: a misspelt name would silently keep the default);
- every API replica (GRAIL_ROLE api) has a memory limit and sets GRAIL_REPLICA_CACHE_MB below it (the setting's
  default knows nothing of the container's memory).
Prints one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
_MIB = 1 << 20
# Kubernetes' memory quantities (and compose's, which `config` gives in bytes).
_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def known_settings(file: str) -> set[str]:
    return set(Path(file).read_text().split())


def check_environment(where: str, names: list[str], settings: set[str], problems: list[str]) -> None:
    for name in names:
        if name.startswith("GRAIL_") and name not in settings:
            problems.append(f"{where}: {name} is not a grail-serve setting (service/settings.py)")


def memory_bytes(quantity: object) -> int:
    text = str(quantity).strip()
    for unit, factor in sorted(_UNITS.items(), key=lambda item: -len(item[0])):
        if text.endswith(unit):
            return int(float(text.removesuffix(unit)) * factor)
    return int(float(text))


def check_replica_cache(where: str, environment: dict[str, str], memory_limit: object, problems: list[str]) -> None:
    """An API replica's cache of loaded versions fits in its memory limit."""
    if environment.get("GRAIL_ROLE") != "api":
        return
    cache = environment.get("GRAIL_REPLICA_CACHE_MB")
    if cache is None or memory_limit is None:
        problems.append(f"{where}: an API replica needs a memory limit and GRAIL_REPLICA_CACHE_MB below it")
        return
    limit_mib = memory_bytes(memory_limit) // _MIB
    if not 0 <= int(cache) < limit_mib:
        problems.append(f"{where}: GRAIL_REPLICA_CACHE_MB {cache} is not below the memory limit ({limit_mib} MiB)")


def check_pod(where: str, pod: dict[str, Any], settings: set[str], problems: list[str]) -> None:
    security = pod.get("securityContext", {})
    if not security.get("runAsNonRoot"):
        problems.append(f"{where}: the pod's securityContext lacks runAsNonRoot: true")
    for kind in ("initContainers", "containers"):
        for container in pod.get(kind, []):
            at = f"{where} container {container['name']}"
            context = container.get("securityContext", {})
            if not context.get("readOnlyRootFilesystem"):
                problems.append(f"{at}: root file system not read-only")
            if context.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{at}: allowPrivilegeEscalation is not false")
            resources = container.get("resources", {})
            for part in ("requests", "limits"):
                missing = {"cpu", "memory"} - set(resources.get(part, {}))
                if missing:
                    problems.append(f"{at}: no {part} for {', '.join(sorted(missing))}")
            check_environment(at, [entry["name"] for entry in container.get("env", [])], settings, problems)
            values = {entry["name"]: entry["value"] for entry in container.get("env", []) if "value" in entry}
            check_replica_cache(at, values, resources.get("limits", {}).get("memory"), problems)
            if kind == "containers":
                probes = {
                    probe: container.get(probe, {}).get("httpGet", {}).get("path")
                    for probe in ("livenessProbe", "readinessProbe")
                }
                if probes != {"livenessProbe": "/health", "readinessProbe": "/ready"}:
                    problems.append(f"{at}: probes {probes}, not liveness /health and readiness /ready")


def check_kubernetes(settings: set[str], versions: list[str], files: list[str], problems: list[str]) -> int:
    import kubernetes_validate
    import yaml

    count = 0
    for file in files:
        for document in yaml.safe_load_all(Path(file).read_text()):
            if not document:
                continue
            count += 1
            where = f"{Path(file).name}: {document.get('kind')} {document.get('metadata', {}).get('name')}"
            for version in versions:
                try:
                    kubernetes_validate.validate(document, version, strict=True)
                except kubernetes_validate.ValidationError as error:
                    path = ".".join(str(part) for part in error.path)
                    problems.append(f"{where} (Kubernetes {version}): {path}: {error.message}")
                except kubernetes_validate.SchemaNotFoundError as error:
                    problems.append(f"{where} (Kubernetes {version}): {error}")
            if document.get("kind") in POD_KINDS:
                check_pod(where, document["spec"]["template"]["spec"], settings, problems)
    return count


def check_compose(settings: set[str], files: list[str], problems: list[str]) -> int:
    count = 0
    for file in files:
        project = json.loads(Path(file).read_text())
        for name, service in project["services"].items():
            count += 1
            where = f"{Path(file).name}: service {name}"
            check_environment(where, list(service.get("environment", {})), settings, problems)
            limit = service.get("deploy", {}).get("resources", {}).get("limits", {}).get("memory")
            check_replica_cache(where, service.get("environment", {}), limit, problems)
    return count


def main(argv: list[str]) -> int:
    problems: list[str] = []
    if len(argv) >= 4 and argv[1] == "kubernetes":
        versions = argv[2].split(",")
        count = check_kubernetes(known_settings(argv[0]), versions, argv[3:], problems)
        what = f"{count} Kubernetes objects (schemas of {', '.join(versions)}, strict)"
    elif len(argv) >= 3 and argv[1] == "compose":
        count = check_compose(known_settings(argv[0]), argv[2:], problems)
        what = f"{count} compose services"
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for problem in problems:
        print(f"invalid: {problem}")
    if problems or not count:
        print(f"{what}: {len(problems)} problems" + ("" if count else ", and nothing to check"))
        return 1
    print(f"{what}: valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
