"""An API replica's loaded versions, bounded by memory (``--replica-cache-mb``): a graph is loaded on its first
use, and the least recently used graphs are dropped while the memory of the loaded versions exceeds the bound.

The cache keeps no versions itself; it keeps, per graph, the bytes of the version the registry serves, in the
order of their last use, and tells the registry which graph to drop (``drop``: the registry forgets its version;
requests that hold it finish on it, the files it maps stay in place). A graph in use by a request (``acquire``
until ``release``) is never dropped, nor is the most recently used one: a graph larger than the whole bound is
served alone. Requests for a graph that is loading wait on that one load.

``LoadOnUseMiddleware`` loads the graph of every request on ``/graphs/{id-or-name}`` and below (but its deletion)
before the route runs, in a thread (the event loop goes on), and keeps it until the response is sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, NamedTuple

import numpy as np
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["CacheStats", "LoadOnUseMiddleware", "VersionCache", "memory_bytes"]

# /graphs/{ref} and below: the graph's record (its version) and the routes that read one; not its deletion.
_GRAPH_PATH = re.compile(r"^/graphs/([^/]+)(/?)")
# How deep ``memory_bytes`` follows attributes, and the longest list or dict it looks into (arrays are held in
# a few levels of small objects; long Python containers hold no arrays of a version).
_DEPTH = 8
_LONGEST_CONTAINER = 256
# A graph's version is measured again at the end of a request at most this often (queries build some of its
# structures on first use; a measure walks the whole version, too slow for every request).
MEASURE_EVERY_S = 1.0


class CacheStats(NamedTuple):
    limit_bytes: int
    held_bytes: int
    graphs: int
    loads: int
    evictions: int


class VersionCache:
    """See the module doc. ``drop(key)``: forget the graph's version; called with the cache's lock held, so it
    must take no lock of its own (it assigns an attribute)."""

    def __init__(self, limit_bytes: int, drop: Callable[[str], None]) -> None:
        self.limit_bytes = limit_bytes
        self._drop = drop
        self._sizes: OrderedDict[str, int] = OrderedDict()  # least recently used first
        self._measured: dict[str, float] = {}  # when each graph's size was last measured (time.monotonic)
        self._held = 0
        self._pins: dict[str, int] = {}
        self._loads: dict[str, Future[None]] = {}
        self._lock = threading.Lock()
        self._loaded = 0
        self._evicted = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self.limit_bytes, self._held, len(self._sizes), self._loaded, self._evicted)

    def install(self, key: str, nbytes: int | None, put: Callable[[], None]) -> None:
        """``put`` (which sets the graph's version) and its size, at once: no drop comes between (``nbytes``
        None: the size it had, for an update of a version held). The graph becomes the most recently used;
        others go while the bound is exceeded."""
        with self._lock:
            put()
            before = self._sizes.pop(key, 0)
            if nbytes is None:
                nbytes = before
            else:
                self._measured[key] = time.monotonic()
            self._held += nbytes - before
            self._sizes[key] = nbytes
            self._evict()

    def measure_due(self, key: str) -> bool:
        """Whether the graph's size is to be measured again now (``release`` with its bytes)."""
        return key in self._sizes and time.monotonic() - self._measured.get(key, 0.0) >= MEASURE_EVERY_S

    def discard(self, key: str) -> None:
        """A graph deleted, or its version no longer held: its bytes are free."""
        with self._lock:
            self._held -= self._sizes.pop(key, 0)
            self._measured.pop(key, None)

    def acquire_held(self, key: str) -> bool:
        """``acquire`` without a load: True, and the graph kept until ``release``, when it is held."""
        with self._lock:
            if key not in self._sizes:
                return False
            self._pins[key] = self._pins.get(key, 0) + 1
            self._sizes.move_to_end(key)
            return True

    def acquire(self, key: str, load: Callable[[], None]) -> None:
        """Keep the graph until ``release``; ``load`` it first unless it is held (one load at a time per graph:
        the others wait on it, and see its exception)."""
        with self._lock:
            self._pins[key] = self._pins.get(key, 0) + 1
            if key in self._sizes:
                self._sizes.move_to_end(key)
                return
            pending = self._loads.get(key)
            mine = pending is None
            if pending is None:
                pending = self._loads[key] = Future()
        if mine:
            try:
                load()
            except BaseException as exc:
                with self._lock:
                    del self._loads[key]
                pending.set_exception(exc)
            else:
                with self._lock:
                    del self._loads[key]
                    self._loaded += 1
                pending.set_result(None)
        try:
            pending.result()
        except BaseException:
            self.release(key)
            raise

    def release(self, key: str, nbytes: int | None = None) -> None:
        """A request done with the graph; ``nbytes``: its version's memory now (queries build some of its
        structures on first use)."""
        with self._lock:
            if nbytes is not None and key in self._sizes:
                self._held += nbytes - self._sizes[key]
                self._sizes[key] = nbytes
                self._measured[key] = time.monotonic()
            left = self._pins[key] - 1
            if left:
                self._pins[key] = left
            else:
                del self._pins[key]
            self._evict()

    def _evict(self) -> None:
        """The least recently used graphs out, but those in use and the most recently used one (served alone
        when it is larger than the bound), while the bound is exceeded."""
        if self._held <= self.limit_bytes:
            return
        for key in list(self._sizes)[:-1]:
            if self._held <= self.limit_bytes:
                return
            if key in self._pins:
                continue
            self._held -= self._sizes.pop(key)
            self._measured.pop(key, None)
            self._evicted += 1
            self._drop(key)


def memory_bytes(root: object) -> int:
    """The bytes of the numpy arrays an object holds (through its attributes, dataclass fields, tuples, lists and
    dicts), each array's memory counted once: a version's memory."""
    seen: set[int] = set()
    buffers: set[int] = set()
    total = 0
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        obj, depth = stack.pop()
        if id(obj) in seen or depth > _DEPTH:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            if id(base) not in buffers:  # views of one array share its memory
                buffers.add(id(base))
                total += base.nbytes
            continue
        if obj is None or isinstance(obj, (str, bytes, int, float, bool, type)) or callable(obj):
            continue
        children: list[Any] = []
        if isinstance(obj, (tuple, list)):
            children = list(obj) if len(obj) <= _LONGEST_CONTAINER else []
        elif isinstance(obj, dict):
            children = list(obj.values()) if len(obj) <= _LONGEST_CONTAINER else []
        else:
            if dataclasses.is_dataclass(obj):
                children.extend(getattr(obj, f.name, None) for f in dataclasses.fields(obj))
            children.extend(getattr(obj, "__dict__", {}).values())
            for cls in type(obj).__mro__:
                for name in getattr(cls, "__slots__", ()):
                    children.append(getattr(obj, name, None))
        stack.extend((child, depth + 1) for child in children)
    return total


class LoadOnUseMiddleware:
    """See the module doc: the graph a request names, loaded (or waited for) before the route and kept until the
    response is sent. A graph that does not load here is left to the route (404, 409 or 424, as the registry
    says)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _GRAPH_PATH.match(scope["path"]) if scope["type"] == "http" else None
        if match is None or (scope["method"] == "DELETE" and scope["path"] == match.group(0)):
            await self.app(scope, receive, send)
            return
        registry = scope["app"].state.grail.registry
        held = registry.acquire_held(match.group(1))  # no thread hop for a graph held already
        if held is None:
            held = await asyncio.to_thread(registry.acquire, match.group(1))
        try:
            await self.app(scope, receive, send)
        finally:
            if held is not None:
                registry.release(held)
