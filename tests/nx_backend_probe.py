"""A pytest plugin for the run of networkx's own tests with the grail backend (``tests/test_nx_backend.py``):
counts the calls that reached the backend's functions and writes them, as JSON, to the file that
``GRAIL_NX_CALLS`` names, so that a run where networkx answered everything itself does not pass for one of
the backend."""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import pytest

from grail_core.nx_backend import FUNCTIONS
from grail_core.nx_backend.interface import BackendInterface

calls: Counter[str] = Counter()


def _counted(name: str) -> Any:
    function = getattr(BackendInterface, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return function(*args, **kwargs)

    return staticmethod(counted)


for _name in FUNCTIONS:
    setattr(BackendInterface, _name, _counted(_name))


def pytest_sessionfinish(session: pytest.Session) -> None:
    with open(os.environ["GRAIL_NX_CALLS"], "w") as handle:
        json.dump(dict(calls), handle)
