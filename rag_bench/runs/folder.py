"""Where a runs folder lives: a local path, or an object-store URL, behind one small interface.

``--runs-dir`` takes a path, a ``file://`` URL (the same local folder) or a URL that pyarrow's
filesystems (or, failing those, fsspec's) understand, such as ``s3://bucket/prefix``. A
:class:`RunsFolder` reads, lists, writes and deletes files under the folder through
``pyarrow.fs``; on a local folder the store adds its own atomic renames and fsyncs.

A remote folder keeps its run-id locks, checkpoints and staging files in a local bookkeeping
folder under the cache directory, keyed by the URL; only finished tables and manifests go to
the object store. S3 credentials, endpoint and region come from the usual environment
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``, ``AWS_REGION``); nothing secret is written anywhere. A failing object
store (missing bucket, refused credentials, unreachable endpoint) is one :class:`RemoteError`
line saying what to fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from rag_bench.errors import RagBenchError, UsageError, first_line

URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.S)


class RemoteError(RagBenchError):
    """The object store holding the runs folder refused or failed a request."""

    exit_code = 2


@dataclass(frozen=True, eq=False)
class Entry:
    """One listed name under a folder."""

    name: str
    is_dir: bool
    mtime: float | None  # seconds since the epoch; None when the store does not say


@dataclass(frozen=True, eq=False)
class RunsFolder:
    """A runs folder: ``given`` as the user wrote it, ``root`` inside the filesystem ``fs``.

    ``local`` is the folder on this machine (None for an object store); ``bookkeeping`` is the
    local folder of locks, checkpoints and staging: the folder itself when it is local.
    """

    given: str
    fs: Any = field(repr=False)  # pyarrow.fs.FileSystem
    root: str
    local: Path | None
    bookkeeping: Path

    def __str__(self) -> str:
        return self.given

    def _key(self) -> tuple:
        return ("local", self.root) if self.local is not None else ("remote", self.url())

    def __eq__(self, other) -> bool:
        return isinstance(other, RunsFolder) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def path(self, *parts: str) -> str:
        """A path inside the filesystem (for pyarrow)."""
        return "/".join([self.root, *parts])

    def url(self, *parts: str) -> str:
        """The path or URL a person reads in a message."""
        if self.local is not None:
            return str(self.local.joinpath(*parts))
        scheme = URL.match(self.given).group(1)
        return f"{scheme}://" + self.path(*parts)

    # --- operations (pyarrow errors become one-line RemoteErrors) --------------------------

    @contextlib.contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """Translate a remote store's failure into a :class:`RemoteError`; local errors pass."""
        if self.local is not None:
            yield
            return
        try:
            yield
        except OSError as exc:
            raise remote_error(self, doing, exc) from None

    def list(self, *parts: str, recursive: bool = False) -> list[Entry]:
        """The entries under a folder (names relative to it); [] when it does not exist."""
        from pyarrow.fs import FileSelector, FileType

        base = self.path(*parts)
        with self.errors("cannot list"):
            infos = self.fs.get_file_info(
                FileSelector(base, allow_not_found=True, recursive=recursive)
            )
        out = []
        for info in infos:
            if info.type not in (FileType.File, FileType.Directory):
                continue
            name = info.path[len(base) :].lstrip("/")
            mtime = info.mtime.timestamp() if info.mtime is not None else None
            out.append(Entry(name, info.type == FileType.Directory, mtime))
        return out

    def exists(self, *parts: str) -> bool:
        from pyarrow.fs import FileType

        with self.errors("cannot read"):
            return self.fs.get_file_info(self.path(*parts)).type != FileType.NotFound

    def read_bytes(self, *parts: str) -> bytes:
        with self.errors("cannot read"), self.fs.open_input_stream(self.path(*parts)) as stream:
            return stream.read()

    def put(self, data: bytes, *parts: str) -> None:
        """Store one object whole (an object store's put is atomic; used only when remote)."""
        with self.errors("cannot write"), self.fs.open_output_stream(self.path(*parts)) as out:
            out.write(data)

    def upload(self, source: Path, *parts: str) -> None:
        from pyarrow.fs import LocalFileSystem, copy_files

        with self.errors("cannot write"):
            copy_files(
                str(source),
                self.path(*parts),
                source_filesystem=LocalFileSystem(),
                destination_filesystem=self.fs,
            )

    def delete_file(self, *parts: str) -> None:
        with self.errors("cannot delete"), contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self.path(*parts))

    def delete_dir(self, *parts: str) -> None:
        with self.errors("cannot delete"), contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(self.path(*parts))

    def check(self) -> None:
        """Fail early, in one line, when a remote folder's bucket is missing or unreachable."""
        if self.local is not None:
            return
        from pyarrow.fs import FileType

        bucket = self.root.split("/", 1)[0]
        with self.errors("cannot reach"):
            found = self.fs.get_file_info(bucket).type
        if found == FileType.NotFound:
            raise RemoteError(
                f"the bucket {bucket!r} of the runs folder {self.given} does not exist"
                + _at_endpoint(),
                f"create it (e.g. `aws s3 mb s3://{bucket}`) or pass another --runs-dir",
            )


def runs_folder(where: str | Path | None = None) -> RunsFolder:
    """The runs folder named by a path or URL; None means ``$RAG_BENCH_RUNS_DIR`` or ``runs/``."""
    if where is None:
        where = os.environ.get("RAG_BENCH_RUNS_DIR") or Path.cwd() / "runs"
    if str(where).strip() == "":
        raise UsageError(
            "the runs folder is named by an empty string",
            "name a folder or a URL (e.g. runs or s3://bucket/prefix), or none for ./runs",
        )
    if isinstance(where, str):
        match = URL.match(where)
        if match:
            scheme = match.group(1).lower()
            if scheme == "file":
                return _local(file_url_path(where), given=where)
            return _remote(where, scheme, match.group(2))
    return _local(Path(where), given=str(where))


def file_url_path(url: str) -> Path:
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise UsageError(
            f"--runs-dir {url} is not a local file URL",
            "write file:///absolute/path (three slashes), or a plain path",
        )
    return Path(unquote(parts.path))


def _local(path: Path, given: str) -> RunsFolder:
    from pyarrow.fs import LocalFileSystem

    root = Path(os.path.abspath(path)).as_posix()
    return RunsFolder(given, LocalFileSystem(), root, path, path)


def _remote(url: str, scheme: str, rest: str) -> RunsFolder:
    root = rest.strip("/")
    if not root:
        raise UsageError(f"--runs-dir {url} names no bucket", f"write {scheme}://bucket/prefix")
    if scheme in ("s3", "s3a"):
        fs = _s3_filesystem(root.split("/", 1)[0])
    else:
        fs, root = _other_filesystem(url, scheme)
    from rag_bench.io.cache import default_cache_dir

    key = hashlib.sha256(f"{scheme}://{root}".encode()).hexdigest()[:16]
    bookkeeping = default_cache_dir() / "remote-runs" / key
    return RunsFolder(url, fs, root.rstrip("/"), None, bookkeeping)


def note_bookkeeping(folder: RunsFolder) -> None:
    """Name the URL in the local bookkeeping folder, so a person (and ``--resume <folder>``)
    can tell which runs folder it belongs to."""
    if folder.local is None:
        folder.bookkeeping.mkdir(parents=True, exist_ok=True)
        (folder.bookkeeping / "runs-dir.url").write_text(folder.given + "\n", encoding="utf-8")


def bookkept_folder(bookkeeping: Path) -> RunsFolder:
    """The runs folder whose locks and checkpoints live in ``bookkeeping``."""
    try:
        url = (bookkeeping / "runs-dir.url").read_text(encoding="utf-8").strip()
    except OSError:
        return runs_folder(bookkeeping)
    return runs_folder(url)


def _s3_filesystem(bucket: str):
    from pyarrow import fs as pafs

    options: dict[str, Any] = {
        "connect_timeout": 5,
        "request_timeout": 60,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3),
    }
    endpoint = _endpoint()
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
        options["scheme"] = parts.scheme
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    elif not endpoint:
        with contextlib.suppress(OSError, ValueError):
            options["region"] = pafs.resolve_s3_region(bucket)
    return pafs.S3FileSystem(**options)


def _other_filesystem(url: str, scheme: str):
    from pyarrow import ArrowInvalid
    from pyarrow import fs as pafs

    try:
        return pafs.FileSystem.from_uri(url)
    except (ArrowInvalid, ValueError) as exc:
        reason = str(exc)
    except OSError as exc:
        raise RemoteError(f"cannot open the runs folder {url}: {first_line(exc)}", _HINT) from None
    try:
        import fsspec
    except ImportError:
        fsspec = None
    if fsspec is not None and scheme in fsspec.available_protocols():
        try:
            filesystem = fsspec.filesystem(scheme)
        except (ImportError, ValueError) as exc:
            reason = str(exc)
        else:
            fs = pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
            return fs, filesystem._strip_protocol(url)
    extra = (
        f"install the fsspec implementation of {scheme}://"
        if fsspec is not None
        else "install fsspec and its implementation of that scheme"
    )
    raise UsageError(
        f"--runs-dir {url}: no filesystem for {scheme}:// ({first_line(reason)})",
        f"use a local path, file:///path or s3://bucket/prefix, or {extra}",
    )


_HINT = "check --runs-dir and the AWS_* credentials and endpoint in the environment"


def _endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _at_endpoint() -> str:
    endpoint = _endpoint()
    return f" at {endpoint}" if endpoint else ""


def remote_error(folder: RunsFolder, doing: str, exc: Exception) -> RemoteError:
    """One line naming the object store's failure and its fix."""
    text = str(exc)
    bucket = folder.root.split("/", 1)[0]
    if "NO_SUCH_BUCKET" in text or re.search(r"[Bb]ucket '[^']*' not found", text):
        return RemoteError(
            f"the bucket {bucket!r} of the runs folder {folder.given} does not exist"
            + _at_endpoint(),
            f"create it (e.g. `aws s3 mb s3://{bucket}`) or pass another --runs-dir",
        )
    if any(
        marker in text
        for marker in (
            "ACCESS_DENIED",
            "INVALID_ACCESS_KEY",
            "SIGNATURE_DOES_NOT_MATCH",
            "MISSING_AUTHENTICATION",
            "UNRECOGNIZED_CLIENT",
            "EXPIRED_TOKEN",
            "credentials",
            "Forbidden",
        )
    ):
        return RemoteError(
            f"{doing} the runs folder {folder.given}: access denied ({first_line(text)})",
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to credentials "
            f"that may use s3://{bucket}",
        )
    if any(m in text for m in ("NETWORK_CONNECTION", "curlCode", "Could not connect", "resolve")):
        return RemoteError(
            f"{doing} the runs folder {folder.given}: the object store"
            + (_at_endpoint() or "")
            + " is unreachable",
            "check the network and AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3)",
        )
    return RemoteError(f"{doing} {folder.given}: {first_line(text)}", _HINT)
