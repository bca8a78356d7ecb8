"""What an upload asks for, as one typed object: read from the route's parameters, kept in the graph's record,
handed to the build worker and, for its reading part, to the reader.

Plain data (the build worker unpickles it without the app).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from grail_core.formats import READING_OPTIONS, ReadOptions

__all__ = ["UploadOptions"]


@dataclass(frozen=True)
class UploadOptions:
    """How to read the file (``read``) and how to index it: ``dims`` GRAIL dimensions, ``seed`` of the child
    orders, ``backend`` as asked for ('auto', 'cpu' or 'cuda')."""

    read: ReadOptions = field(default_factory=ReadOptions)
    dims: int = 2
    seed: int = 0
    backend: str = "auto"

    @property
    def format(self) -> str | None:
        return self.read.format

    def with_backend(self, backend: str) -> UploadOptions:
        return replace(self, backend=backend)

    def to_json(self) -> dict[str, Any]:
        """Flat, as records have always kept them: format, dims, seed, backend and the reading options."""
        read = self.read
        return {
            "format": read.format,
            "dims": self.dims,
            "seed": self.seed,
            "backend": self.backend,
            **{name: getattr(read, name) for name in READING_OPTIONS},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UploadOptions:
        read = ReadOptions(data.get("format"), **{name: data.get(name) for name in READING_OPTIONS})
        return cls(read, int(data["dims"]), int(data["seed"]), str(data["backend"]))
