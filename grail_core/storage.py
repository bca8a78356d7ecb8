"""Index files: one ``.npy`` per array plus ``manifest.json`` (format version, shapes, sha256 checksums).

A directory is written under a temporary name and renamed when complete, so a crash never leaves a
half-written index under the final name; loading verifies every checksum before trusting an array.
``save_labels`` and ``load_labels`` write and read ``Labels`` (with the edge updates of a version past them,
by name) in this layout.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from .errors import IndexFileError
from .labels import Labels
from .names import NodeNames
from .query import QueryArrays
from .stats import IndexStats

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "write_index_dir",
    "read_index_dir",
    "index_checksum",
    "save_labels",
    "load_labels",
]

FORMAT_NAME = "grail-index"
# Version 2 stores node names as a hash table (grail_core.names); version 1 stored them sorted, and still loads.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
_CHUNK = 1 << 22


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_index_dir(
    directory: str | os.PathLike[str], arrays: dict[str, np.ndarray], metadata: dict[str, Any], overwrite: bool = False
) -> Path:
    """Write ``arrays`` and ``metadata`` to ``directory`` atomically (temporary folder, then rename)."""
    final = Path(directory)
    if final.exists() and not overwrite:
        raise IndexFileError(f"{final} already exists")
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex}"
    temporary.mkdir()
    try:
        entries = {}
        for name, array in arrays.items():
            path = temporary / f"{name}.npy"
            np.save(path, np.ascontiguousarray(array), allow_pickle=False)
            _fsync(path)
            entries[name] = {
                "file": path.name,
                "sha256": _sha256(path),
                "dtype": array.dtype.str,
                "shape": list(array.shape),
                "bytes": path.stat().st_size,
            }
        manifest = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "metadata": metadata, "arrays": entries}
        manifest_path = temporary / MANIFEST
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        _fsync(manifest_path)
        _fsync(temporary)
        if final.exists():
            retired = final.parent / f".{final.name}.old-{uuid.uuid4().hex}"
            final.rename(retired)
            temporary.rename(final)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            temporary.rename(final)
        _fsync(final.parent)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return final


def read_index_dir(
    directory: str | os.PathLike[str], mmap: bool = True, verify: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Arrays and metadata of an index directory; IndexFileError when anything is missing or altered."""
    root = Path(directory)
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except FileNotFoundError:
        raise IndexFileError(f"{root} is not an index directory (no {MANIFEST})") from None
    except (OSError, ValueError) as error:
        raise IndexFileError(f"{root / MANIFEST} is unreadable: {error}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise IndexFileError(f"{root / MANIFEST} does not describe a {FORMAT_NAME}")
    if manifest.get("version") not in READABLE_VERSIONS:
        raise IndexFileError(
            f"index format version {manifest.get('version')!r} is not supported "
            f"(this build reads versions {', '.join(map(str, READABLE_VERSIONS))})"
        )
    arrays: dict[str, np.ndarray] = {}
    try:
        for name, entry in manifest["arrays"].items():
            path = root / entry["file"]
            if not path.is_file() or path.stat().st_size != entry["bytes"]:
                raise IndexFileError(f"{path} is missing or truncated")
            if verify and _sha256(path) != entry["sha256"]:
                raise IndexFileError(f"{path} is corrupted (checksum mismatch)")
            array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
            if array.dtype.str != entry["dtype"] or list(array.shape) != entry["shape"]:
                raise IndexFileError(f"{path} holds {array.dtype}{array.shape}, the manifest says otherwise")
            arrays[name] = array
        return arrays, manifest["metadata"]
    except (KeyError, TypeError) as error:
        raise IndexFileError(f"{root / MANIFEST} is incomplete: {error}") from None
    except ValueError as error:
        raise IndexFileError(f"{root} holds an unreadable array: {error}") from None


def index_checksum(directory: str | os.PathLike[str]) -> str:
    """The checksum of an index's content: sha256 over the names and sha256 checksums of its arrays, as its
    manifest records them (loading with ``verify`` checks each array against its own)."""
    root = Path(directory)
    try:
        entries = json.loads((root / MANIFEST).read_text())["arrays"]
        lines = "".join(f"{name} {entries[name]['sha256']}\n" for name in sorted(entries))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise IndexFileError(f"{root / MANIFEST} is unreadable: {error}") from None
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def save_labels(
    labels: Labels,
    directory: str | os.PathLike[str],
    *,
    version: int,
    updates: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> str:
    """Write ``labels`` as the graph's ``version`` (``updates``: the updates past the labels' own version, by
    name, that a load applies again); returns the files' checksum, which the labels record."""
    arrays = {f"query_{name}": value for name, value in labels.arrays._asdict().items()}
    arrays |= {"graph_out_indptr": labels.graph_csr[0], "graph_out_indices": labels.graph_csr[1]}
    arrays |= labels.names.to_arrays()
    metadata: dict[str, Any] = {
        "stats": labels.stats.to_dict(),
        "num_nodes": labels.names.size,
        "names": labels.names.metadata(),
        "version": version,
    }
    if updates is not None:
        metadata["updates"] = updates
    write_index_dir(directory, arrays, metadata, overwrite=overwrite)
    checksum = index_checksum(directory)
    labels.saved_as(checksum)
    return checksum


def load_labels(
    directory: str | os.PathLike[str], mmap: bool = True, verify: bool = True
) -> tuple[Labels, dict[str, Any] | None]:
    """Labels written by ``save_labels`` and the updates saved with them (None: none); IndexFileError when the
    files are missing, truncated or corrupted."""
    arrays, metadata = read_index_dir(directory, mmap=mmap, verify=verify)
    try:
        query = QueryArrays(**{name: arrays[f"query_{name}"] for name in QueryArrays._fields})
        graph_csr = (arrays["graph_out_indptr"], arrays["graph_out_indices"])
        size = int(metadata["num_nodes"])
        if "names" in metadata:
            names = NodeNames.from_arrays(size, metadata["names"], arrays)
        else:  # format version 1: sorted names; the table is built now
            names = NodeNames.from_sorted_array(size, np.asarray(arrays["names"]))
        stats = IndexStats.from_dict(metadata["stats"])
        version = int(metadata.get("version", 1))
    except (KeyError, TypeError, ValueError) as error:
        raise IndexFileError(f"{directory} is incomplete: {error}") from None
    labels = Labels(names, graph_csr, query, stats, version=version, checksum=index_checksum(directory))
    return labels, metadata.get("updates")
