"""Edge updates of requests taken in batches by one thread, each request awaiting its own outcome on the event loop.

A request's update goes into a queue and its coroutine awaits an asyncio future. One thread takes what is
queued (at most ``MAX_BATCH``) and hands it to ``GraphRegistry.update_many``: every update planned, their journal
rows committed in one transaction (one flush of the disk), applied; then it settles the batch's futures in one
call into the loop. While that commit is in flight, the requests that arrive wait in the queue and make the next
batch: group commit, with no thread per waiting request and one wake-up of the loop per batch.

An update the batch leaves (see ``update_many``: its graph's lock busy, a version to load first, another
server's update first) is answered None, and the request makes it with ``GraphRegistry.update`` in a worker
thread, which waits for what it needs. What comes after the answers (queuing rebuilds) runs after the
futures are settled. The thread's log lines name the requests of the batch they concern (``batch_request_id``).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .context import NO_REQUEST, request_id
from .registry import GraphRegistry, UpdateOutcome

__all__ = ["UpdateQueue", "MAX_BATCH", "batch_request_id"]

log = logging.getLogger("grail.service.updates")

# Updates one transaction carries at most.
MAX_BATCH = 256
# A batch's log lines name at most this many of its requests.
_NAMED_REQUESTS = 4

# graph id, added and removed edges, the request's future, the request's id
_Item = tuple[str, list[Any], list[Any], "asyncio.Future[UpdateOutcome]", str]


class UpdateQueue:
    """See the module doc. ``answered(graph_ids)``: called by the thread after each batch's answers, with the
    graphs it updated."""

    def __init__(self, registry: GraphRegistry, answered: Callable[[list[str]], None]) -> None:
        self._registry = registry
        self._answered = answered
        self._queue: collections.deque[_Item] = collections.deque()
        self._wake = threading.Event()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, name="grail-updates", daemon=True)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()

    async def submit(self, graph_id: str, add: list[Any], remove: list[Any]) -> dict[str, Any] | None:
        """The update's answer once its journal row has committed; its refusal raised; None when it is left to
        ``GraphRegistry.update``."""
        assert self._loop is not None, "UpdateQueue.start first"
        future: asyncio.Future[UpdateOutcome] = self._loop.create_future()
        self._queue.append((graph_id, add, remove, future, request_id.get()))
        self._wake.set()
        outcome = await future
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _serve(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = [self._queue.popleft() for _ in range(min(len(self._queue), MAX_BATCH))]
                token = request_id.set(batch_request_id([item[4] for item in batch]))
                try:
                    if not self._take(batch):
                        return
                finally:
                    request_id.reset(token)
            if self._stopping:
                return

    def _take(self, batch: list[_Item]) -> bool:
        """One batch: its updates made, its futures settled, its rebuilds queued; False once the loop is
        closed (the server stopped: no one awaits them)."""
        try:
            outcomes = self._registry.update_many([(graph_id, add, remove) for graph_id, add, remove, *_ in batch])
        except Exception as exc:  # a bug: every request of the batch answers 500, the queue goes on
            log.exception("edge updates failed")
            outcomes = [exc] * len(batch)
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(_settle, [item[3] for item in batch], outcomes)
        except RuntimeError:
            return False
        updated = [item[0] for item, outcome in zip(batch, outcomes, strict=True) if isinstance(outcome, dict)]
        if updated:
            try:
                self._answered(updated)
            except Exception:  # the next update asks again; this thread must go on
                log.exception("queuing rebuilds after edge updates failed")
        return True


def batch_request_id(ids: Sequence[str]) -> str:
    """The request id of a batch's log lines: its requests' ids joined by '+', the first few of them and how
    many more."""
    named = list(dict.fromkeys(i for i in ids if i != NO_REQUEST))
    if not named:
        return NO_REQUEST
    shown = "+".join(named[:_NAMED_REQUESTS])
    more = len(named) - _NAMED_REQUESTS
    return f"{shown}+{more} more" if more > 0 else shown


def _settle(futures: list[asyncio.Future[UpdateOutcome]], outcomes: Sequence[UpdateOutcome]) -> None:
    for future, outcome in zip(futures, outcomes, strict=True):
        if not future.done():  # cancelled: its client went away (the update was made all the same)
            future.set_result(outcome)
