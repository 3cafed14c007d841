"""Versioned, atomic, locked storage of one theme's index.

Layout under ``<theme_dir>/``::

    .write.lock              per-theme writer lock (filelock)
    index/CURRENT            name of the published version, e.g. "v000007"
    index/v000006/           the previous version (kept for one more commit)
    index/v000007/
        vectors/             NumpyVectorStore files
        keywords/            KeywordIndex files
        docstore.json        llama-index SimpleDocumentStore (ingestion's content hashes)
        VERSION.json         what this version is (based on, counts, creation time) and
                             the size and sha256 of every other file (themes.index_integrity)

A version folder is never modified once its name has no ``.tmp`` suffix. A
writer builds the next version in ``vNNNNNN.tmp/``, fsyncs every file and
folder, renames it, fsyncs the parent, then switches ``CURRENT`` with the
write-temp/fsync/``os.replace``/fsync-dir sequence. ``CURRENT`` therefore only
ever names a complete, durable version: a crash at any point leaves either the
old or the new version published, and readers never need the lock.

Damage after the fact (a truncated or altered file, a garbled ``CURRENT``) is reported as
``IndexCorrupted`` by every reader and writer, naming the file; ``writer(rebuild=True)``
starts from an empty index without reading the damaged one (``themes.ingest.repair`` and
``clear_index`` use it). A write that the file system refuses (read-only, full) raises
``IndexWriteFailed`` with the previous version still published.

    with IndexStorage(theme_dir).writer() as w:    # ThemeBusy if another writer holds it
        w.vectors.add(nodes)                       # keywords follow the vectors at commit
    version = IndexStorage(theme_dir).load_current()
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import filelock
from llama_index.core.storage.docstore import BaseDocumentStore, SimpleDocumentStore

from themes.atomic_write import atomic_write, fsync_path
from themes.errors import ThemesError
from themes.index_integrity import FILES_KEY, DamagedFile, check_files, describe_files
from themes.keyword_index import KeywordIndex
from themes.store_protocol import ChunkStore, KeywordSearch
from themes.vector_store import NumpyVectorStore

logger = logging.getLogger(__name__)

INDEX_DIR = "index"
CURRENT_FILE = "CURRENT"
LOCK_FILE = ".write.lock"
VECTORS_DIR = "vectors"
KEYWORDS_DIR = "keywords"
DOCSTORE_FILE = "docstore.json"
VERSION_FILE = "VERSION.json"
DEFAULT_LOCK_TIMEOUT = 2.0

_VERSION_RE = re.compile(r"^v(\d{6,})$")
_ANY_VERSION_DIR_RE = re.compile(r"^v(\d{6,})(\.tmp|\.trash)?$")
_READ_ATTEMPTS = 5

CRASH_ENV = "CHATITEGO_CRASH_AT"
# Every step of a commit, in order; tests kill the writer at each one (see _crash_point).
CRASH_POINTS: tuple[str, ...] = (
    "begin",  # lock held, stale leftovers removed, nothing written yet
    "vectors_written",  # vNNNNNN.tmp/vectors complete
    "keywords_written",
    "docstore_written",
    "version_file_written",
    "files_synced",  # every file and folder of vNNNNNN.tmp fsynced
    "version_renamed",  # vNNNNNN.tmp -> vNNNNNN, parent folder not yet fsynced
    "version_synced",
    "current_tmp_written",  # CURRENT.tmp written and fsynced
    "current_replaced",  # CURRENT switched, parent folder not yet fsynced
    "current_synced",
    "gc_renamed",  # an old version renamed to .trash, not yet deleted
    "gc_done",
)


def _crash_point(name: str) -> None:
    """Test hook: die here, like a power cut, when CHATITEGO_CRASH_AT names this step."""
    if os.environ.get(CRASH_ENV) == name:
        os._exit(1)


class ThemeBusy(ThemesError, RuntimeError):
    """Another writer holds the theme's write lock."""

    def __init__(self, theme_dir: Path, timeout: float, lock: str | None = None) -> None:
        where = lock or f"lock {theme_dir / LOCK_FILE}"
        super().__init__(
            f"theme {theme_dir.name!r} is being updated by another writer "
            f"({where} still held after {timeout:g} s); try again later"
        )
        self.theme_dir = theme_dir


class IndexCorrupted(ThemesError, RuntimeError):
    """``CURRENT`` is unreadable or names a version that cannot be loaded.

    ``str()`` names the theme folder and the damaged file; ``theme_dir`` is the folder.
    """

    def __init__(self, theme_dir: Path, detail: str) -> None:
        super().__init__(f"the index of theme {theme_dir.name!r} is damaged: {detail}")
        self.theme_dir = theme_dir
        self.detail = detail


class IndexWriteFailed(ThemesError, OSError):
    """The file system refused a write (read-only, full, ...); nothing new was published.

    ``errno`` is the refused operation's error number (``errno.ENOSPC``, ``errno.EROFS``...);
    ``str()`` is one sentence saying what happened, what is still served, and what to do.
    """

    def __init__(self, theme_dir: Path, error: OSError, published: str | None) -> None:
        where = error.filename or theme_dir
        code = error.errno
        if code == errno.ENOSPC or code == errno.EDQUOT:
            cause = f"no space left on the disk holding {where}"
            fix = "free some space and try again"
        elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
            cause = f"{where} is read-only ({error.strerror})"
            fix = "make the theme folder writable (owner, permissions, mount) and try again"
        else:
            cause = f"could not write {where} ({error.strerror or error})"
            fix = "check the disk and try again"
        kept = f"still version {published}" if published else "still empty"
        super().__init__(
            f"theme {theme_dir.name!r} not changed: {cause}; the index is {kept}; {fix}"
        )
        self.theme_dir = theme_dir
        self.errno = code


class ThemeFolderGone(ThemesError, FileNotFoundError):
    """The theme folder disappeared (deleted) while a writer waited for its lock."""


class VersionGone(ThemesError, LookupError):
    """The version asked for is no longer stored (a newer one replaced it); load the current."""


class IndexInconsistent(ThemesError, RuntimeError):
    """A commit would publish a keyword index that disagrees with the vector store."""


@dataclass(frozen=True)
class IndexVersion:
    """One published, complete version of a theme's index; treat it as read-only.

    ``vectors`` and ``keywords`` are frozen (mutations raise); ``docstore`` cannot
    be frozen, so changes to it are simply never saved. ``name`` is ``None``
    when nothing was ever published (all three are then empty).
    """

    name: str | None
    vectors: ChunkStore
    keywords: KeywordSearch
    docstore: BaseDocumentStore
    info: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


class IndexWriter:
    """What a writer mutates: private, writable copies of the current version.

    At commit the keyword index is brought in line with the vector store's
    chunks (``KeywordIndex.sync``), so callers normally touch only ``vectors``
    and ``docstore``.
    """

    def __init__(
        self,
        base_version: str | None,
        vectors: ChunkStore,
        keywords: KeywordSearch,
        docstore: BaseDocumentStore,
    ) -> None:
        self.base_version = base_version
        self.vectors = vectors
        self.keywords = keywords
        self.docstore = docstore
        self.committed_version: str | None = None
        self._discarded = False

    @property
    def discarded(self) -> bool:
        return self._discarded

    def discard(self) -> None:
        """Leave the block without publishing anything (no new version is written)."""
        self._discarded = True

    def clear(self) -> None:
        """Empty the index: no chunk, no docstore entry (the dimension is kept)."""
        self.vectors.clear()
        self.docstore = SimpleDocumentStore()


def _fsync_tree(root: Path) -> None:
    """fsync every file, then every folder bottom-up (a new file's name lives in its folder)."""
    for folder, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            fsync_path(Path(folder) / name)
        fsync_path(Path(folder))


class IndexStorage:
    """The index of the theme whose (existing, validated) folder is ``theme_dir``."""

    def __init__(
        self,
        theme_dir: str | os.PathLike[str],
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        required_file: str | None = None,
    ) -> None:
        """``required_file``: a file of the theme folder that must still exist once the lock
        is held (the theme's settings), or the writer raises ``ThemeFolderGone``."""
        self.theme_dir = Path(theme_dir)
        self.index_dir = self.theme_dir / INDEX_DIR
        self.lock_timeout = lock_timeout
        self.required_file = required_file

    # ------------------------------------------------------------------ readers

    def current_version_name(self) -> str | None:
        """The published version's name, or ``None`` if nothing was ever published."""
        try:
            raw = (self.index_dir / CURRENT_FILE).read_text(encoding="ascii")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise IndexCorrupted(
                self.theme_dir, f"{INDEX_DIR}/{CURRENT_FILE} is unreadable ({exc})"
            ) from exc
        name = raw.strip()
        if _VERSION_RE.fullmatch(name) is None:
            raise IndexCorrupted(
                self.theme_dir,
                f"{INDEX_DIR}/{CURRENT_FILE} holds {raw[:40]!r}, not a version name",
            )
        return name

    def list_versions(self) -> list[str]:
        """Complete version folders on disk, oldest first (published or not)."""
        if not self.index_dir.is_dir():
            return []
        names = [p.name for p in self.index_dir.iterdir() if _VERSION_RE.fullmatch(p.name)]
        return sorted(names, key=lambda n: int(n[1:]))

    def load_current(self) -> IndexVersion:
        """Load the published version; always complete, never a mix of two versions.

        Needs no lock. If a writer publishes twice while this reads, the version
        being read may be garbage-collected: the load then starts over on the
        new ``CURRENT``.
        """
        for _ in range(_READ_ATTEMPTS):
            name = self.current_version_name()
            if name is None:
                return _empty_version(frozen=True)
            try:
                return self._load_version(name, frozen=True)
            except Exception as exc:  # noqa: BLE001 - any failure to parse is damage
                # Most likely collected by a writer that published twice meanwhile.
                if self.current_version_name() == name:
                    raise self._damaged(name, exc) from exc
        raise IndexCorrupted(
            self.theme_dir, f"{INDEX_DIR} changed {_READ_ATTEMPTS} times during one load"
        )

    def load_version(self, name: str) -> IndexVersion:
        """Load one complete version by name, e.g. the previous one from ``list_versions()``.

        A version that cannot be loaded (missing, truncated, altered) raises
        ``IndexCorrupted`` naming the file, as ``load_current`` does.
        """
        if _VERSION_RE.fullmatch(name) is None:
            raise ValueError(f"not a version name: {name!r}")
        try:
            return self._load_version(name, frozen=True)
        except Exception as exc:  # noqa: BLE001 - any failure to parse is damage
            raise self._damaged(name, exc) from exc

    def refresh(self, previous: IndexVersion | None) -> IndexVersion:
        """``previous`` if it is still the published version, else a fresh ``load_current()``."""
        if previous is not None and previous.name == self.current_version_name():
            return previous
        return self.load_current()

    def check_current(self) -> None:
        """Raise ``IndexCorrupted`` if the published version cannot be loaded (no lock)."""
        self.load_current()

    def _damaged(self, name: str, exc: BaseException) -> IndexCorrupted:
        if isinstance(exc, DamagedFile):
            detail = str(exc)
        elif isinstance(exc, FileNotFoundError) and exc.filename:
            missing = Path(exc.filename)
            shown = (
                missing.relative_to(self.index_dir)
                if missing.is_relative_to(self.index_dir)
                else missing
            )
            detail = f"{shown.as_posix()} is missing"
        else:
            detail = f"{name}: {type(exc).__name__}: {exc}"
        return IndexCorrupted(self.theme_dir, detail[:300])

    def _load_version(self, name: str, *, frozen: bool) -> IndexVersion:
        folder = self.index_dir / name
        try:
            info = json.loads((folder / VERSION_FILE).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DamagedFile(f"{name}/{VERSION_FILE} is not readable ({exc})") from exc
        if not isinstance(info, dict):
            raise DamagedFile(f"{name}/{VERSION_FILE} is not a JSON object")
        check_files(folder, info)
        vectors = NumpyVectorStore.load(folder / VECTORS_DIR, mmap=True)
        keywords = KeywordIndex.load(folder / KEYWORDS_DIR)
        docstore = SimpleDocumentStore.from_persist_path(str(folder / DOCSTORE_FILE))
        if frozen:
            vectors.freeze()
            keywords.freeze()
        return IndexVersion(name, vectors, keywords, docstore, MappingProxyType(info))

    # ------------------------------------------------------------------ writers

    @contextmanager
    def exclusive(self, *, lock_timeout: float | None = None) -> Iterator[None]:
        """Hold the theme's write lock (``ThemeBusy`` after ``lock_timeout`` s), nothing else.

        For operations on the whole theme folder (deleting it) that must not run under a
        writer's feet.
        """
        timeout = self.lock_timeout if lock_timeout is None else lock_timeout
        if not self.theme_dir.is_dir():
            # Not created here: a typo, or a theme deleted meanwhile, must not
            # quietly (re)appear as an index-only folder.
            raise ThemeFolderGone(f"theme folder {self.theme_dir} does not exist")
        lock = filelock.FileLock(str(self.theme_dir / LOCK_FILE), timeout=timeout)
        try:
            lock.acquire()
        except filelock.Timeout as exc:
            raise ThemeBusy(self.theme_dir, timeout) from exc
        except OSError as exc:
            if not self.theme_dir.is_dir():
                raise self._gone() from exc
            raise IndexWriteFailed(self.theme_dir, exc, self.published_or_none()) from exc
        try:
            if (
                self.required_file is not None
                and not (self.theme_dir / self.required_file).exists()
            ):
                # Deleted while we waited: filelock re-created the folder to hold its lock file.
                self._remove_ghost()
                raise self._gone()
            yield
        finally:
            lock.release()

    @contextmanager
    def writer(
        self,
        *,
        lock_timeout: float | None = None,
        sync_keywords: bool = True,
        rebuild: bool = False,
    ) -> Iterator[IndexWriter]:
        """Mutate a copy of the current version; publish it as a new version on clean exit.

        Raises ``ThemeBusy`` when another writer (thread or process) holds the
        theme for longer than ``lock_timeout`` seconds. If the block raises or
        calls ``discard()``, nothing is published. With ``sync_keywords=False``
        the keyword index is not derived from the vectors, but a commit whose
        keyword and vector node ids differ raises ``IndexInconsistent``. With
        ``rebuild=True`` the writer starts from an empty index and never reads the
        published one (which may be damaged). ``IndexWriteFailed`` when the file
        system refuses a write; the published version is then unchanged.
        """
        with self.exclusive(lock_timeout=lock_timeout):
            try:
                self.index_dir.mkdir(exist_ok=True)
                self._remove_leftovers()
            except OSError as exc:
                raise IndexWriteFailed(self.theme_dir, exc, self.published_or_none()) from exc
            base, current = self._writer_base(rebuild)
            w = IndexWriter(base, current.vectors, current.keywords, current.docstore)
            try:
                yield w
                if not w.discarded:
                    try:
                        w.committed_version = self._commit(w, sync_keywords=sync_keywords)
                    except OSError as exc:
                        raise IndexWriteFailed(
                            self.theme_dir, exc, self.published_or_none()
                        ) from exc
            finally:
                # Later edits would silently go nowhere: make them fail instead.
                vectors, keywords = _embedded_parts(w)
                vectors.freeze()
                keywords.freeze()

    def _writer_base(self, rebuild: bool) -> tuple[str | None, IndexVersion]:
        """The version a writer starts from: (its name, a writable copy)."""
        if rebuild:
            try:
                base = self.current_version_name()
            except IndexCorrupted:
                base = None
            # Kept by the next garbage collection (as "the version it replaced").
            return base, _empty_version(frozen=False)
        base = self.current_version_name()
        if base is None:
            return None, _empty_version(frozen=False)
        try:
            return base, self._load_version(base, frozen=False)
        except Exception as exc:  # noqa: BLE001 - any failure to parse is damage
            raise self._damaged(base, exc) from exc

    def _gone(self) -> ThemeFolderGone:
        return ThemeFolderGone(
            f"theme {self.theme_dir.name!r} was deleted while this operation waited for it; "
            "nothing was written"
        )

    def published_or_none(self) -> str | None:
        """The published version's name; ``None`` when there is none or it is unreadable."""
        try:
            return self.current_version_name()
        except IndexCorrupted:
            return None

    def _remove_ghost(self) -> None:
        """Remove a theme folder that holds nothing but our lock file."""
        try:
            entries = {p.name for p in self.theme_dir.iterdir()}
            if entries <= {LOCK_FILE}:
                (self.theme_dir / LOCK_FILE).unlink(missing_ok=True)
                self.theme_dir.rmdir()
        except OSError:
            pass

    def _remove_leftovers(self) -> None:
        """Delete what a crashed writer left: unfinished versions, trash, CURRENT.tmp."""
        for path in self.index_dir.iterdir():
            match = _ANY_VERSION_DIR_RE.fullmatch(path.name)
            if match is not None and match.group(2) is not None:
                shutil.rmtree(path, ignore_errors=True)
        (self.index_dir / f"{CURRENT_FILE}.tmp").unlink(missing_ok=True)

    def _next_name(self) -> str:
        numbers = [
            int(m.group(1))
            for p in self.index_dir.iterdir()
            if (m := _ANY_VERSION_DIR_RE.fullmatch(p.name)) is not None
        ]
        return f"v{max(numbers, default=0) + 1:06d}"

    def _commit(self, w: IndexWriter, *, sync_keywords: bool) -> str:
        _crash_point("begin")
        vectors, keywords = _embedded_parts(w)
        if sync_keywords:
            keywords.sync(vectors.iter_texts())
        elif set(keywords.node_ids()) != set(vectors.node_ids()):
            raise IndexInconsistent(
                f"keyword index has {keywords.count()} chunks, vector store "
                f"{vectors.count()}, and their node ids differ"
            )
        name = self._next_name()
        tmp = self.index_dir / f"{name}.tmp"
        final = self.index_dir / name
        try:
            tmp.mkdir()
            vectors.persist(tmp / VECTORS_DIR)
            _crash_point("vectors_written")
            keywords.persist(tmp / KEYWORDS_DIR)
            _crash_point("keywords_written")
            w.docstore.persist(str(tmp / DOCSTORE_FILE))
            _crash_point("docstore_written")
            info: dict[str, Any] = {
                "name": name,
                "based_on": w.base_version,
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "chunks": w.vectors.count(),
                "documents": len(w.vectors.ref_doc_ids()),
                "dim": w.vectors.dim,
                "embed_model": w.vectors.embed_model_name,
                FILES_KEY: describe_files(tmp, skip=VERSION_FILE),
            }
            (tmp / VERSION_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
            _crash_point("version_file_written")
            _fsync_tree(tmp)
            _crash_point("files_synced")
            os.rename(tmp, final)
            _crash_point("version_renamed")
            fsync_path(self.index_dir)
            _crash_point("version_synced")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._switch_current(name)
        try:
            self._collect_garbage(keep={name, w.base_version})
        except OSError as exc:
            # Published already; leftovers are removed by the next writer.
            logger.warning("could not remove old index versions in %s: %s", self.index_dir, exc)
        return name

    def _switch_current(self, name: str) -> None:
        steps = {"written": "current_tmp_written", "replaced": "current_replaced"}
        atomic_write(
            self.index_dir / CURRENT_FILE,
            name + "\n",
            # A fixed name: the next writer removes what a crash left behind.
            temp_path=self.index_dir / f"{CURRENT_FILE}.tmp",
            checkpoint=lambda step: _crash_point(steps[step]),
        )
        _crash_point("current_synced")

    def _collect_garbage(self, keep: set[str | None]) -> None:
        """Remove every version but the published one and the one it replaced."""
        for name in self.list_versions():
            if name in keep:
                continue
            # Rename first: the version disappears atomically, so no one can open
            # a half-deleted folder under its real name.
            trash = self.index_dir / f"{name}.trash"
            os.rename(self.index_dir / name, trash)
            _crash_point("gc_renamed")
            shutil.rmtree(trash)
        _crash_point("gc_done")


def _embedded_parts(w: IndexWriter) -> tuple[NumpyVectorStore, KeywordIndex]:
    """The embedded writer's concrete stores (what ``IndexStorage`` persists)."""
    assert isinstance(w.vectors, NumpyVectorStore) and isinstance(w.keywords, KeywordIndex)
    return w.vectors, w.keywords


def _empty_version(*, frozen: bool) -> IndexVersion:
    vectors, keywords = NumpyVectorStore(), KeywordIndex()
    if frozen:
        vectors.freeze()
        keywords.freeze()
    return IndexVersion(None, vectors, keywords, SimpleDocumentStore())
