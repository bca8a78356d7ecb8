"""Listings being read, shared: a request that lists the same node of the same version as others reading it
now takes their ``Listing`` (grail_core.listing: where a search found it, a bit set over the graph's nodes)
instead of making its own, and one that comes while it is being made waits for it. A listing is kept only
while some request holds it (weak references), so a thousand slow readers of one large listing hold one bit
set, and the search runs once."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future

from grail_core.listing import Listing
from grail_core.version import Version

__all__ = ["SharedListings"]

# (node as the request named it, forward: descendants rather than ancestors)
_Key = tuple[str, bool]


class SharedListings:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: weakref.WeakKeyDictionary[Version, weakref.WeakValueDictionary[_Key, Listing]] = (
            weakref.WeakKeyDictionary()
        )
        self._making: dict[tuple[Version, _Key], Future[Listing]] = {}

    def get(self, version: Version, node: str, forward: bool, make: Callable[[], Listing]) -> Listing:
        """The listing of ``node`` on ``version``: one that a request holds, else the one being made, else
        ``make()``'s (its error raised to every request waiting for it)."""
        key = (node, forward)
        with self._lock:
            held = self._held.get(version)
            listing = held.get(key) if held is not None else None
            if listing is not None:
                return listing
            making = self._making.get((version, key))
            mine = making is None
            if making is None:
                making = self._making[(version, key)] = Future()
        if not mine:
            return making.result()
        try:
            listing = make()
        except BaseException as exc:
            with self._lock:
                del self._making[(version, key)]
            making.set_exception(exc)
            raise
        with self._lock:
            del self._making[(version, key)]
            self._held.setdefault(version, weakref.WeakValueDictionary())[key] = listing
        making.set_result(listing)
        return listing
