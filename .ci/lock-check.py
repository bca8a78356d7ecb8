"""Every package in the environment is the version requirements.lock pins for this Python and platform.

pip reads the lock as constraints, which pin what is listed and let anything else through at its newest
version: this turns a dependency added to pyproject.toml without `make lock` into a CI failure.
Run with the environment's Python: .venv/bin/python .ci/lock-check.py requirements.lock
"""

import re
import sys
from importlib.metadata import distributions

from packaging.markers import Marker
from packaging.utils import canonicalize_name

# The project itself and what `python -m venv` puts in every environment.
UNLOCKED = {"grail-reachability", "pip", "setuptools", "wheel"}

pins: dict[str, str] = {}
for line in open(sys.argv[1], encoding="utf-8"):
    match = re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)\s*(?:;\s*(.+))?$", line.strip())
    if match and (match[3] is None or Marker(match[3]).evaluate()):
        pins[canonicalize_name(match[1])] = match[2]

problems = []
for dist in distributions():
    name = canonicalize_name(dist.metadata["Name"])
    if name in UNLOCKED:
        continue
    if name not in pins:
        problems.append(f"{name} {dist.version} is installed but not in the lock")
    elif pins[name] != dist.version:
        problems.append(f"{name} {dist.version} is installed, the lock pins {pins[name]}")
if problems:
    print("lock-check: " + "\n  ".join(["the environment differs from the lock (run `make lock`):", *problems]))
    sys.exit(1)
print(f"lock-check: every installed package is the version {sys.argv[1]} pins")
