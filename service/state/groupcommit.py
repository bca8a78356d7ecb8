"""Group commit: requests that arrive while a commit is in flight wait for it to end and then go together in the
next one, so that one durable commit (one flush of the disk) acknowledges all of them.

There is no timer and no commit thread: the first caller to find no commit in flight leads, commits its group
and, when it is done, hands the lead to the oldest waiter, which commits everything queued meanwhile (at most
``max_group`` requests) and so on. A lone caller commits at once, alone, as it would without a group. Each
request gets its own outcome: the value the commit function gave it, or the refusal it gave it (an exception
instance, raised in that caller's thread only); when the commit function raises, every request of the group
gets that error (their transaction did not commit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["GroupCommit", "GroupStats"]

R = TypeVar("R")
V = TypeVar("V")


@dataclass(frozen=True)
class GroupStats:
    commits: int  # transactions committed (or failed) for groups
    requests: int  # requests they carried
    largest: int  # the most requests one transaction carried
    in_flight: int  # requests of the commit under way (0: none is)
    queued: int  # requests waiting for it to end


class _Waiter(Generic[R, V]):
    __slots__ = ("request", "woken", "lead", "value", "error")

    def __init__(self, request: R) -> None:
        self.request = request
        self.woken: threading.Event | None = None  # made for a request that waits (a lone one does not)
        self.lead = False  # woken to commit the next group, not with an outcome
        self.value: V | None = None
        self.error: BaseException | None = None


class GroupCommit(Generic[R, V]):
    """``submit(request)`` returns once ``commit`` has committed a group holding it; see the module doc.
    ``commit(requests)`` returns one outcome per request, in order: a value, or an exception to raise."""

    def __init__(self, commit: Callable[[list[R]], Sequence[V | BaseException]], max_group: int) -> None:
        self._commit = commit
        self._max_group = max_group
        self._lock = threading.Lock()
        self._queue: list[_Waiter[R, V]] = []
        self._leading = False
        self._in_flight = 0
        self._commits = 0
        self._requests = 0
        self._largest = 0

    def submit(self, request: R) -> V:
        waiter: _Waiter[R, V] = _Waiter(request)
        with self._lock:
            self._queue.append(waiter)
            lead = not self._leading
            if lead:
                self._leading = True
            else:
                waiter.woken = threading.Event()
        if waiter.woken is not None:
            waiter.woken.wait()
            if not waiter.lead:
                return self._outcome(waiter)
        self._lead(waiter)
        return self._outcome(waiter)

    def _lead(self, leader: _Waiter[R, V]) -> None:
        """Commit the oldest queued requests (the leader's first among them), then pass the lead on."""
        with self._lock:
            group, self._queue = self._queue[: self._max_group], self._queue[self._max_group :]
            self._in_flight = len(group)
        try:
            outcomes = self._commit([waiter.request for waiter in group])
            for waiter, outcome in zip(group, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    waiter.error = outcome
                else:
                    waiter.value = outcome
        except BaseException as exc:
            for waiter in group:
                waiter.error = exc
        finally:
            with self._lock:
                self._commits += 1
                self._requests += len(group)
                self._largest = max(self._largest, len(group))
                self._in_flight = 0
                successor = self._queue[0] if self._queue else None
                if successor is None:
                    self._leading = False
                else:
                    successor.lead = True
            for waiter in group:
                if waiter.woken is not None and waiter is not leader:
                    waiter.woken.set()
            if successor is not None and successor.woken is not None:  # a queued request always has one
                successor.woken.set()

    @staticmethod
    def _outcome(waiter: _Waiter[R, V]) -> V:
        if waiter.error is not None:
            raise waiter.error
        return waiter.value  # type: ignore[return-value]  # set with no error

    def stats(self) -> GroupStats:
        with self._lock:
            return GroupStats(self._commits, self._requests, self._largest, self._in_flight, len(self._queue))
