"""Immutable index artifacts: a graph's version N is a folder of files, written once with a manifest of their
sizes and sha256 checksums, fetched into a local folder with every checksum verified.

``ArtifactStore`` is the interface; ``LocalArtifactStore`` (a folder, the default: ``<data_dir>/graphs/<id>/v<N>/``)
and ``S3ArtifactStore`` (service.state.s3: an S3-compatible bucket) implement it. Both keep one rule: a version is
visible only once complete. Locally the files are written (or moved) into a temporary folder, fsynced with the
manifest, and the folder renamed into place (a rename onto a published version fails: create-only); in a bucket
the manifest is the last object written, create-only (``If-None-Match: *``). A refused write (full disk,
``StorageFull``) leaves nothing visible.

The artifact's checksum (``Manifest.checksum``) is what the metadata store's version row records: sha256 over the
manifest's lines ``path size sha256``, sorted by path.

The same store keeps uploads, the graph files that wait for their build: ``put_upload`` reads a stream in chunks
(memory bounded whatever its size), counting and hashing it, and makes it visible under its key only once it is
whole and durable, with its size and sha256 (``Upload``), create-only, by the same rule as versions: locally a
folder ``uploads/<key>/`` (the file ``data`` and the record ``upload.json``) renamed into place; in a bucket the
record, written last. ``fetch_upload`` copies one to a local path, checksum verified, through a temporary file
renamed into place. An interrupted put leaves nothing visible; what it wrote is removed by
``remove_incomplete`` once older than a grace period (service.state.sweep).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

from .errors import (
    ArtifactCorrupt,
    ArtifactExists,
    ArtifactNotFound,
    StateError,
    UploadExists,
    UploadNotFound,
    UploadTooLarge,
    storage_error,
)

__all__ = [
    "ArtifactStore",
    "ArtifactFile",
    "Manifest",
    "Upload",
    "UploadSource",
    "LocalArtifactStore",
    "ARTIFACT_MANIFEST",
    "artifact_key",
    "describe_folder",
    "check_id",
    "UPLOAD_RECORD",
    "UPLOAD_DATA",
]

ARTIFACT_MANIFEST = "artifact.json"
UPLOAD_RECORD = "upload.json"
UPLOAD_DATA = "data"
_FORMAT = "grail-artifact"
_UPLOAD_FORMAT = "grail-upload"
_FORMAT_VERSION = 1
CHUNK = 1 << 22  # bytes read or written at a time
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_VERSION_FOLDER = re.compile(r"v(\d+)")
_TEMPORARY = re.compile(r"\.(.+)\.(tmp|del)-[0-9a-f]{32}")  # what a write or a removal works in, hidden

# What put_upload reads: a binary file object (read in chunks) or chunks of bytes.
UploadSource = IO[bytes] | Iterable[bytes]
# Temporary folders of writes a crash interrupted are removed once this old when a store opens (another server
# may be writing a younger one into a shared folder).
_STALE_TEMPORARY_S = 3600.0


def check_id(graph_id: str) -> str:
    """A graph id as a path component: letters, digits, '_' and '-' only (nothing can climb out of the store)."""
    if not _SAFE_ID.fullmatch(graph_id):
        raise StateError(f"{graph_id[:80]!r} is not a graph id")
    return graph_id


def artifact_key(graph_id: str, version: int) -> str:
    """Where a version lives, relative to the store's root: ``graphs/<id>/v<N>``."""
    return f"graphs/{check_id(graph_id)}/v{int(version)}"


@dataclass(frozen=True)
class ArtifactFile:
    path: str  # relative, with '/'
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    graph_id: str
    version: int
    files: tuple[ArtifactFile, ...]
    created_at: float
    objects: str = ""  # S3: the prefix (under the version's) that holds this publish's objects

    @property
    def checksum(self) -> str:
        lines = "".join(f"{f.path} {f.size} {f.sha256}\n" for f in sorted(self.files, key=lambda f: f.path))
        return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()

    @property
    def size_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> bytes:
        body = {
            "format": _FORMAT,
            "format_version": _FORMAT_VERSION,
            "graph_id": self.graph_id,
            "version": self.version,
            "created_at": self.created_at,
            "objects": self.objects,
            "checksum": self.checksum,
            "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files],
        }
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Manifest:
        try:
            body = json.loads(data)
            if body.get("format") != _FORMAT:
                raise ValueError("not an artifact manifest")
            manifest = cls(
                graph_id=str(body["graph_id"]),
                version=int(body["version"]),
                files=tuple(ArtifactFile(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in body["files"]),
                created_at=float(body["created_at"]),
                objects=str(body.get("objects", "")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ArtifactCorrupt(f"the manifest of {where} is unreadable: {exc}") from None
        if manifest.checksum != body.get("checksum"):
            raise ArtifactCorrupt(f"the manifest of {where} does not match its own checksum")
        return manifest


@dataclass(frozen=True)
class Upload:
    key: str
    size: int
    sha256: str  # hex, of the bytes as stored
    created_at: float
    objects: str = ""  # S3: the prefix (under the upload's) that holds this put's object

    def to_json(self) -> bytes:
        body = {
            "format": _UPLOAD_FORMAT,
            "format_version": _FORMAT_VERSION,
            "key": self.key,
            "size": self.size,
            "sha256": self.sha256,
            "created_at": self.created_at,
            "objects": self.objects,
        }
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, key: str) -> Upload:
        try:
            body = json.loads(data)
            if body.get("format") != _UPLOAD_FORMAT:
                raise ValueError("not an upload record")
            upload = cls(
                key=str(body["key"]),
                size=int(body["size"]),
                sha256=str(body["sha256"]),
                created_at=float(body["created_at"]),
                objects=str(body.get("objects", "")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ArtifactCorrupt(f"the record of upload {key!r} is unreadable: {exc}") from None
        if upload.key != key:
            raise ArtifactCorrupt(f"the record of upload {key!r} names another upload")
        return upload


def source_chunks(source: UploadSource) -> Iterator[bytes]:
    """The stream's bytes, a chunk at a time."""
    read = getattr(source, "read", None)
    if read is not None:
        while block := read(CHUNK):
            yield block
    else:
        for block in source:  # not a file object: chunks
            if block:
                yield bytes(block)


class Counted:
    """Chunks passed through, counted and hashed on the way; UploadTooLarge as soon as they pass ``limit``."""

    def __init__(self, chunks: Iterable[bytes], limit: int | None) -> None:
        self._chunks = chunks
        self._limit = limit
        self._digest = hashlib.sha256()
        self.size = 0
        self.error: BaseException | None = None  # what the stream raised, or UploadTooLarge: not the store's

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._chunks)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except BaseException as exc:
                self.error = exc
                raise
            self.size += len(chunk)
            if self._limit is not None and self.size > self._limit:
                self.error = UploadTooLarge(self._limit)
                raise self.error
            self._digest.update(chunk)
            yield chunk

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()


def copy_verified(chunks: Iterable[bytes], target: Path, upload: Upload) -> None:
    """Write ``chunks`` to ``target`` through a temporary file beside it, renamed into place only when the bytes
    match the upload's size and sha256 (ArtifactCorrupt otherwise, and no file); StorageFull with no file."""
    target = Path(target)
    temporary = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        counted = Counted(chunks, None)
        with open(temporary, "wb") as handle:
            for chunk in counted:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        if counted.size != upload.size or counted.sha256 != upload.sha256:
            raise ArtifactCorrupt(f"upload {upload.key!r} does not match its checksum")
        os.replace(temporary, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OSError):
            raise_storage(exc, f"fetching upload {upload.key}")
        raise


@runtime_checkable
class ArtifactStore(Protocol):
    """Where published index versions live. Keys are ``artifact_key(graph_id, version)``."""

    url: str

    def publish(self, graph_id: str, version: int, folder: Path, *, move: bool = False) -> Manifest:
        """Store the files under ``folder`` as (graph, version), create-only; the manifest, once every file is
        durable. ``move``: the folder may be taken (renamed into place where it can be, instead of copied).
        ArtifactExists when the version is stored already; StorageFull with nothing visible."""
        ...

    def fetch(self, graph_id: str, version: int, *, verify: bool = True) -> Path:
        """A local folder holding the version's files (the published folder itself locally, a cache folder
        for a bucket), sizes and checksums verified (``verify``: every byte read). ArtifactNotFound,
        ArtifactCorrupt."""
        ...

    def manifest(self, graph_id: str, version: int) -> Manifest: ...

    def exists(self, graph_id: str, version: int) -> bool: ...

    def delete(self, graph_id: str, version: int) -> None:
        """Remove a version (the manifest first: it is gone at once, or still whole); nothing when absent."""
        ...

    def versions(self, graph_id: str) -> list[int]:
        """The graph's published versions, ascending."""
        ...

    def graphs(self) -> list[str]:
        """Ids of graphs with at least one stored version."""
        ...

    def put_upload(self, key: str, source: UploadSource, *, max_bytes: int | None = None) -> Upload:
        """Store the stream ``source`` under ``key`` (letters, digits, '_', '-'), read a chunk at a time; the
        upload, once it is whole and durable. UploadExists when the key is taken; UploadTooLarge past
        ``max_bytes``, StorageFull, or the stream's own error, with nothing visible."""
        ...

    def upload(self, key: str) -> Upload:
        """A stored upload's size, checksum and time; UploadNotFound."""
        ...

    def fetch_upload(self, key: str, target: Path) -> Upload:
        """Copy an upload to the local file ``target`` (replaced whole, or not at all), its size and checksum
        verified. UploadNotFound, ArtifactCorrupt, StorageFull."""
        ...

    def upload_file(self, key: str, scratch: Path) -> Path:
        """A local file holding the upload's bytes, for a build to read: the stored file itself in a folder, a
        verified copy at ``scratch`` from a bucket. UploadNotFound, ArtifactCorrupt, StorageFull."""
        ...

    def delete_upload(self, key: str) -> None:
        """Remove an upload (its record first: it is gone at once, or still whole); nothing when absent."""
        ...

    def uploads(self) -> list[Upload]:
        """Every stored upload, by key."""
        ...

    def remove_incomplete(self, older_than_s: float) -> list[str]:
        """Remove what interrupted writes left (files or objects that no manifest or record names: a publish
        or a put cut short, the loser of a race) once ``older_than_s`` seconds old or more, by the time of
        their last write; what was removed, as paths under the store's root."""
        ...


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _hash_file(path: Path, sync: bool = False) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
            size += len(block)
        if sync:
            os.fsync(handle.fileno())
    return size, digest.hexdigest()


def describe_folder(folder: Path, sync: bool = False) -> tuple[ArtifactFile, ...]:
    """Every regular file under ``folder`` (but a manifest) with its size and sha256, by path; ``sync``:
    each fsynced on the way."""
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if relative == ARTIFACT_MANIFEST:
            continue
        size, sha = _hash_file(path, sync=sync)
        files.append(ArtifactFile(relative, size, sha))
    return tuple(files)


def verify_folder(folder: Path, manifest: Manifest, where: str) -> None:
    """ArtifactCorrupt unless every file of the manifest is in ``folder`` with its size and checksum."""
    for entry in manifest.files:
        path = folder / entry.path
        if not path.is_file() or path.stat().st_size != entry.size:
            raise ArtifactCorrupt(f"{where}: {entry.path} is missing or truncated")
        if _hash_file(path)[1] != entry.sha256:
            raise ArtifactCorrupt(f"{where}: {entry.path} does not match its checksum")


def _copy_files(source: Path, target: Path) -> None:
    """Copy a folder's files (shutil.copytree would hide a full disk's errno in its aggregate error)."""
    target.mkdir()
    for path in sorted(source.rglob("*")):
        copy = target / path.relative_to(source)
        if path.is_dir():
            copy.mkdir(exist_ok=True)
        elif path.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)


def raise_storage(exc: OSError, doing: str) -> None:
    """A full or read-only disk as its StateError; any other OSError as it is."""
    known = storage_error(exc, doing)
    if known is not None:
        raise known from exc
    raise exc


class LocalArtifactStore:
    """Versions and uploads as folders under ``root`` (``<data_dir>`` by default): ``graphs/<id>/v<N>/`` and
    ``uploads/<key>/``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.url = f"file://{self.root.resolve()}"
        self.remove_incomplete(_STALE_TEMPORARY_S)

    def _folder(self, graph_id: str, version: int) -> Path:
        return self.root / artifact_key(graph_id, version)

    def _upload_folder(self, key: str) -> Path:
        return self.root / "uploads" / check_id(key)

    def remove_incomplete(self, older_than_s: float) -> list[str]:
        """The hidden folders of publishes, puts and removals a crash cut short, once nothing in them has changed
        for ``older_than_s`` seconds or more (a put still streaming keeps writing its file)."""
        removed = []
        now = time.time()
        for leftover in [*self.root.glob("graphs/*/.*"), *self.root.glob("uploads/.*")]:
            if not _TEMPORARY.fullmatch(leftover.name):
                continue
            try:
                changed = max(p.stat().st_mtime for p in [leftover, *leftover.rglob("*")])
            except OSError:  # removed meanwhile, or its owner is still at work in it
                continue
            if now - changed >= older_than_s:
                shutil.rmtree(leftover, ignore_errors=True)
                removed.append(leftover.relative_to(self.root).as_posix())
        return sorted(removed)

    def publish(self, graph_id: str, version: int, folder: Path, *, move: bool = False) -> Manifest:
        final = self._folder(graph_id, version)
        if final.exists():
            raise ArtifactExists(graph_id, version)
        temporary = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex}"
        moved = False
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            if move:
                with contextlib.suppress(OSError):  # another filesystem: copied below
                    os.rename(folder, temporary)
                    moved = True
            if not moved:
                _copy_files(folder, temporary)
            manifest = Manifest(graph_id, int(version), describe_folder(temporary, sync=True), time.time())
            manifest_path = temporary / ARTIFACT_MANIFEST
            with open(manifest_path, "wb") as handle:
                handle.write(manifest.to_json())
                handle.flush()
                os.fsync(handle.fileno())
            for sub in sorted({p.parent for p in temporary.rglob("*")}, key=lambda p: len(p.parts), reverse=True):
                _fsync(sub)
            try:
                os.rename(temporary, final)  # onto a published (never empty) folder: ENOTEMPTY, create-only
            except OSError as exc:
                if final.exists():
                    raise ArtifactExists(graph_id, version) from exc
                raise
            _fsync(final.parent)
        except BaseException as exc:
            if moved:  # give the caller its folder back, less the manifest
                with contextlib.suppress(OSError):
                    (temporary / ARTIFACT_MANIFEST).unlink(missing_ok=True)
                    os.rename(temporary, folder)
            shutil.rmtree(temporary, ignore_errors=True)
            if isinstance(exc, OSError):
                raise_storage(exc, f"storing version {version} of graph {graph_id}")
            raise
        return manifest

    def manifest(self, graph_id: str, version: int) -> Manifest:
        path = self._folder(graph_id, version) / ARTIFACT_MANIFEST
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFound(graph_id, version) from None
        manifest = Manifest.from_json(data, f"version {version} of graph {graph_id}")
        if manifest.graph_id != graph_id or manifest.version != version:
            raise ArtifactCorrupt(f"the manifest of version {version} of graph {graph_id} names another version")
        return manifest

    def fetch(self, graph_id: str, version: int, *, verify: bool = True) -> Path:
        manifest = self.manifest(graph_id, version)
        folder = self._folder(graph_id, version)
        if verify:
            verify_folder(folder, manifest, f"version {version} of graph {graph_id}")
        return folder

    def exists(self, graph_id: str, version: int) -> bool:
        return (self._folder(graph_id, version) / ARTIFACT_MANIFEST).is_file()

    def delete(self, graph_id: str, version: int) -> None:
        final = self._folder(graph_id, version)
        retired = final.parent / f".{final.name}.del-{uuid.uuid4().hex}"
        try:
            os.rename(final, retired)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise_storage(exc, f"removing version {version} of graph {graph_id}")
        shutil.rmtree(retired, ignore_errors=True)
        with contextlib.suppress(OSError):  # the graph's folder, once empty
            final.parent.rmdir()

    def versions(self, graph_id: str) -> list[int]:
        folder = self.root / "graphs" / check_id(graph_id)
        if not folder.is_dir():
            return []
        found = []
        for child in folder.iterdir():
            match = _VERSION_FOLDER.fullmatch(child.name)
            if match and (child / ARTIFACT_MANIFEST).is_file():
                found.append(int(match.group(1)))
        return sorted(found)

    def graphs(self) -> list[str]:
        folder = self.root / "graphs"
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if _SAFE_ID.fullmatch(p.name) and self.versions(p.name))

    # ---- uploads ------------------------------------------------------------------------------------

    def put_upload(self, key: str, source: UploadSource, *, max_bytes: int | None = None) -> Upload:
        final = self._upload_folder(key)
        if final.exists():
            raise UploadExists(key)
        temporary = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex}"
        counted = Counted(source_chunks(source), max_bytes)
        try:
            if not final.parent.is_dir():
                final.parent.mkdir(parents=True, exist_ok=True)
                _fsync(final.parent.parent)
            temporary.mkdir()
            with open(temporary / UPLOAD_DATA, "wb") as handle:
                for chunk in counted:
                    handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            upload = Upload(key, counted.size, counted.sha256, time.time())
            with open(temporary / UPLOAD_RECORD, "wb") as handle:
                handle.write(upload.to_json())
                handle.flush()
                os.fsync(handle.fileno())
            _fsync(temporary)
            try:
                os.rename(temporary, final)  # onto a stored (never empty) folder: ENOTEMPTY, create-only
            except OSError as exc:
                if final.exists():
                    raise UploadExists(key) from exc
                raise
            _fsync(final.parent)
        except BaseException as exc:
            shutil.rmtree(temporary, ignore_errors=True)
            if isinstance(exc, OSError) and exc is not counted.error:
                raise_storage(exc, f"storing upload {key}")
            raise
        return upload

    def upload(self, key: str) -> Upload:
        try:
            data = (self._upload_folder(key) / UPLOAD_RECORD).read_bytes()
        except FileNotFoundError:
            raise UploadNotFound(key) from None
        return Upload.from_json(data, key)

    def fetch_upload(self, key: str, target: Path) -> Upload:
        upload = self.upload(key)
        try:
            handle = open(self._upload_folder(key) / UPLOAD_DATA, "rb")  # closed below
        except FileNotFoundError:
            raise ArtifactCorrupt(f"upload {key!r} has lost its data") from None
        with handle:
            copy_verified(source_chunks(handle), target, upload)
        return upload

    def upload_file(self, key: str, scratch: Path) -> Path:
        self.upload(key)  # UploadNotFound unless whole
        path = self._upload_folder(key) / UPLOAD_DATA
        if not path.is_file():
            raise ArtifactCorrupt(f"upload {key!r} has lost its data")
        return path

    def delete_upload(self, key: str) -> None:
        final = self._upload_folder(key)
        retired = final.parent / f".{final.name}.del-{uuid.uuid4().hex}"
        try:
            os.rename(final, retired)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise_storage(exc, f"removing upload {key}")
        shutil.rmtree(retired, ignore_errors=True)

    def uploads(self) -> list[Upload]:
        folder = self.root / "uploads"
        if not folder.is_dir():
            return []
        found = []
        for child in sorted(folder.iterdir()):
            if _SAFE_ID.fullmatch(child.name) and (child / UPLOAD_RECORD).is_file():
                with contextlib.suppress(UploadNotFound):  # removed meanwhile
                    found.append(self.upload(child.name))
        return found
