"""Index artifacts in an S3-compatible bucket (``--store s3://bucket/prefix``), through obstore.

A version's objects are written under a prefix of their own publish (``graphs/<id>/v<N>/<token>/<file>``), then
its manifest, create-only (``If-None-Match: *``), at ``graphs/<id>/v<N>/artifact.json``: the manifest is the
version. Two builders publishing one version race on the manifest; the loser's objects, under its own token,
are removed, and never mixed with the winner's. Deleting removes the manifest first.

Fetching downloads every object into ``<cache_dir>/<id>/v<N>/`` through a temporary folder, hashing as it
writes; the folder is renamed into place only when every checksum matches, so the cache holds whole versions
only (a full disk leaves none half-written, and raises StorageFull).

An upload is one object, ``uploads/<key>/<token>/data``, streamed in parts (a multipart upload: a few parts in
memory at a time, whatever its size) and hashed on the way, then its record, create-only, at
``uploads/<key>/upload.json``: the record is the upload. A put cut short leaves no record, at most an object
under its own token (or the hidden parts of a multipart upload, which the bucket's lifecycle rule for
incomplete uploads removes); ``remove_incomplete`` removes such objects once older than a grace period.

Credentials and endpoint come from the ``AWS_*`` environment variables or the options given.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError, PreconditionError
from obstore.store import S3Store

from .artifacts import (
    ARTIFACT_MANIFEST,
    CHUNK,
    UPLOAD_DATA,
    UPLOAD_RECORD,
    ArtifactFile,
    Counted,
    Manifest,
    Upload,
    UploadSource,
    artifact_key,
    check_id,
    copy_verified,
    describe_folder,
    raise_storage,
    source_chunks,
    verify_folder,
)
from .errors import (
    ArtifactCorrupt,
    ArtifactExists,
    ArtifactNotFound,
    StateError,
    StoreUnavailable,
    UploadExists,
    UploadNotFound,
)

if TYPE_CHECKING:  # a type of obstore's stubs only
    from obstore.store import ClientConfig

__all__ = ["S3ArtifactStore"]

# A streamed upload's parts: S3 takes 5 MiB and more (but the last); a few in flight at a time bound the memory.
_PART_BYTES = 8 << 20
_PARTS_IN_FLIGHT = 2


def _unavailable(exc: Exception, doing: str) -> StoreUnavailable:
    return StoreUnavailable(f"the artifact store cannot be reached now ({doing}); try again: {type(exc).__name__}")


class S3ArtifactStore:
    def __init__(
        self,
        url: str,
        cache_dir: Path,
        *,
        client_options: ClientConfig | None = None,
        **config: Any,
    ) -> None:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise StateError("an S3 store URL is s3://BUCKET or s3://BUCKET/PREFIX")
        self.url = url.rstrip("/")
        self.cache_dir = Path(cache_dir)
        self._store = S3Store(bucket, prefix=prefix.strip("/") or None, client_options=client_options, **config)

    # ---- publishing ---------------------------------------------------------------------------------

    def publish(self, graph_id: str, version: int, folder: Path, *, move: bool = False) -> Manifest:
        key = artifact_key(graph_id, version)
        if self.exists(graph_id, version):
            raise ArtifactExists(graph_id, version)
        token = uuid.uuid4().hex
        files = describe_folder(Path(folder))
        manifest = Manifest(graph_id, int(version), files, time.time(), objects=token)
        try:
            for entry in files:
                obstore.put(self._store, f"{key}/{token}/{entry.path}", Path(folder) / entry.path)
            obstore.put(self._store, f"{key}/{ARTIFACT_MANIFEST}", manifest.to_json(), mode="create")
        except (AlreadyExistsError, PreconditionError):
            self._remove_prefix(f"{key}/{token}/")
            raise ArtifactExists(graph_id, version) from None
        except (BaseError, OSError) as exc:
            with contextlib.suppress(BaseError, OSError):
                self._remove_prefix(f"{key}/{token}/")
            raise _unavailable(exc, f"storing version {version} of graph {graph_id}") from exc
        if move:
            shutil.rmtree(folder, ignore_errors=True)
        return manifest

    # ---- reading ------------------------------------------------------------------------------------

    def manifest(self, graph_id: str, version: int) -> Manifest:
        key = f"{artifact_key(graph_id, version)}/{ARTIFACT_MANIFEST}"
        try:
            data = bytes(obstore.get(self._store, key).bytes())
        except (FileNotFoundError, NotFoundError):
            raise ArtifactNotFound(graph_id, version) from None
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, f"reading version {version} of graph {graph_id}") from exc
        manifest = Manifest.from_json(data, f"version {version} of graph {graph_id}")
        if manifest.graph_id != graph_id or manifest.version != version:
            raise ArtifactCorrupt(f"the manifest of version {version} of graph {graph_id} names another version")
        return manifest

    def fetch(self, graph_id: str, version: int, *, verify: bool = True) -> Path:
        manifest = self.manifest(graph_id, version)
        final = self.cache_dir / check_id(graph_id) / f"v{int(version)}"
        where = f"version {version} of graph {graph_id}"
        cached = final / ARTIFACT_MANIFEST
        if cached.is_file():
            if cached.read_bytes() == manifest.to_json():
                if verify:
                    verify_folder(final, manifest, where)
                return final
            shutil.rmtree(final, ignore_errors=True)  # a version of an earlier store at this key
        temporary = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex}"
        key = artifact_key(graph_id, version)
        try:
            temporary.mkdir(parents=True)
            for entry in manifest.files:
                self._download(f"{key}/{manifest.objects}/{entry.path}", temporary / entry.path, entry, where)
            with open(temporary / ARTIFACT_MANIFEST, "wb") as handle:
                handle.write(manifest.to_json())
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.rename(temporary, final)
            except OSError:
                if not final.is_dir():  # else another fetch of the same version finished first
                    raise
        except BaseException as exc:
            shutil.rmtree(temporary, ignore_errors=True)
            if isinstance(exc, NotFoundError):
                raise ArtifactCorrupt(f"{where}: an object its manifest lists is missing") from None
            if isinstance(exc, BaseError):
                raise _unavailable(exc, f"reading {where}") from exc
            if isinstance(exc, OSError):
                raise_storage(exc, f"caching {where}")
            raise
        return final

    def _download(self, key: str, target: Path, entry: ArtifactFile, where: str) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        size = 0
        with open(target, "wb") as handle:
            for chunk in obstore.get(self._store, key).stream(min_chunk_size=CHUNK):
                data = memoryview(chunk)
                digest.update(data)
                handle.write(data)
                size += len(data)
            handle.flush()
            os.fsync(handle.fileno())
        if size != entry.size or digest.hexdigest() != entry.sha256:
            raise ArtifactCorrupt(f"{where}: {entry.path} does not match its checksum")

    def exists(self, graph_id: str, version: int) -> bool:
        try:
            obstore.head(self._store, f"{artifact_key(graph_id, version)}/{ARTIFACT_MANIFEST}")
        except (FileNotFoundError, NotFoundError):
            return False
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, f"looking for version {version} of graph {graph_id}") from exc
        return True

    def delete(self, graph_id: str, version: int) -> None:
        key = artifact_key(graph_id, version)
        try:
            with contextlib.suppress(FileNotFoundError, NotFoundError):
                obstore.delete(self._store, f"{key}/{ARTIFACT_MANIFEST}")
            self._remove_prefix(f"{key}/")
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, f"removing version {version} of graph {graph_id}") from exc
        shutil.rmtree(self.cache_dir / check_id(graph_id) / f"v{int(version)}", ignore_errors=True)

    def _remove_prefix(self, prefix: str) -> None:
        paths = [meta["path"] for batch in obstore.list(self._store, prefix=prefix) for meta in batch]
        if paths:
            obstore.delete(self._store, paths)

    def _listing(self, prefix: str) -> list[str]:
        try:
            return list(obstore.list_with_delimiter(self._store, prefix=prefix)["common_prefixes"])
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, "listing stored versions") from exc

    def versions(self, graph_id: str) -> list[int]:
        found = []
        for prefix in self._listing(f"graphs/{check_id(graph_id)}/"):
            name = prefix.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith("v") and name[1:].isdigit() and self.exists(graph_id, int(name[1:])):
                found.append(int(name[1:]))
        return sorted(found)

    def graphs(self) -> list[str]:
        names = [prefix.rstrip("/").rsplit("/", 1)[-1] for prefix in self._listing("graphs/")]
        return sorted(name for name in names if self.versions(name))

    # ---- uploads ------------------------------------------------------------------------------------

    def put_upload(self, key: str, source: UploadSource, *, max_bytes: int | None = None) -> Upload:
        prefix = f"uploads/{check_id(key)}"
        if self._exists(f"{prefix}/{UPLOAD_RECORD}", f"looking for upload {key}"):
            raise UploadExists(key)
        token = uuid.uuid4().hex
        counted = Counted(source_chunks(source), max_bytes)
        try:
            obstore.put(
                self._store,
                f"{prefix}/{token}/{UPLOAD_DATA}",
                iter(counted),
                chunk_size=_PART_BYTES,
                max_concurrency=_PARTS_IN_FLIGHT,
            )
            upload = Upload(key, counted.size, counted.sha256, time.time(), objects=token)
            obstore.put(self._store, f"{prefix}/{UPLOAD_RECORD}", upload.to_json(), mode="create")
        except BaseException as exc:
            with contextlib.suppress(BaseError, OSError):
                self._remove_prefix(f"{prefix}/{token}/")
            if exc is counted.error:  # the stream's own error
                raise
            if isinstance(exc, (AlreadyExistsError, PreconditionError)):
                raise UploadExists(key) from None
            if isinstance(exc, (BaseError, OSError)):
                raise _unavailable(exc, f"storing upload {key}") from exc
            raise
        return upload

    def upload(self, key: str) -> Upload:
        try:
            data = bytes(obstore.get(self._store, f"uploads/{check_id(key)}/{UPLOAD_RECORD}").bytes())
        except (FileNotFoundError, NotFoundError):
            raise UploadNotFound(key) from None
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, f"reading upload {key}") from exc
        return Upload.from_json(data, key)

    def fetch_upload(self, key: str, target: Path) -> Upload:
        upload = self.upload(key)
        try:
            stream = obstore.get(self._store, f"uploads/{key}/{upload.objects}/{UPLOAD_DATA}").stream(CHUNK)
            copy_verified((bytes(chunk) for chunk in stream), Path(target), upload)
        except (FileNotFoundError, NotFoundError):
            raise ArtifactCorrupt(f"upload {key!r} has lost its data") from None
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, f"reading upload {key}") from exc
        return upload

    def upload_file(self, key: str, scratch: Path) -> Path:
        self.fetch_upload(key, scratch)
        return Path(scratch)

    def delete_upload(self, key: str) -> None:
        prefix = f"uploads/{check_id(key)}"
        try:
            with contextlib.suppress(FileNotFoundError, NotFoundError):
                obstore.delete(self._store, f"{prefix}/{UPLOAD_RECORD}")
            self._remove_prefix(f"{prefix}/")
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, f"removing upload {key}") from exc

    def uploads(self) -> list[Upload]:
        found = []
        for prefix in self._listing("uploads/"):
            key = prefix.rstrip("/").rsplit("/", 1)[-1]
            with contextlib.suppress(UploadNotFound, StateError):
                found.append(self.upload(check_id(key)))
        return sorted(found, key=lambda upload: upload.key)

    def remove_incomplete(self, older_than_s: float) -> list[str]:
        """Objects under a token that no manifest or record names (a publish or put cut short, or the loser
        of a race on the manifest), once the newest of them is ``older_than_s`` seconds old or more."""
        now = time.time()
        tokens: dict[tuple[str, str], list[tuple[str, float]]] = {}  # (owner, token): [(path, modified)]
        try:
            for prefix, depth in (("graphs/", 3), ("uploads/", 2)):
                for batch in obstore.list(self._store, prefix=prefix):
                    for meta in batch:
                        parts = meta["path"].split("/")
                        if len(parts) > depth + 1:  # under a token, not the manifest or record itself
                            owner = "/".join(parts[:depth])
                            tokens.setdefault((owner, parts[depth]), []).append(
                                (meta["path"], meta["last_modified"].timestamp())
                            )
            removed = []
            for (owner, token), objects in sorted(tokens.items()):
                if now - max(modified for _, modified in objects) < older_than_s:
                    continue
                kept = self._objects_of(owner)
                if kept is None or kept == token:  # unreadable manifest: left alone; or the stored one
                    continue
                obstore.delete(self._store, [path for path, _ in objects])
                removed.append(f"{owner}/{token}/")
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, "removing what interrupted writes left") from exc
        return removed

    def _objects_of(self, owner: str) -> str | None:
        """The token a version's manifest or an upload's record names ("" when there is none); None when it
        cannot be read."""
        parts = owner.split("/")
        try:
            if parts[0] == "graphs" and parts[2][1:].isdigit():
                return self.manifest(parts[1], int(parts[2][1:])).objects
            if parts[0] == "uploads":
                return self.upload(parts[1]).objects
        except (ArtifactNotFound, UploadNotFound):
            return ""
        except StateError:
            return None
        return None

    def _exists(self, path: str, doing: str) -> bool:
        try:
            obstore.head(self._store, path)
        except (FileNotFoundError, NotFoundError):
            return False
        except (BaseError, OSError) as exc:
            raise _unavailable(exc, doing) from exc
        return True
