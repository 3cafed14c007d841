"""``python -m themes``: the scriptable admin CLI (the seed's IngestCmd), JSON out.

Exit codes: 0 ok, 1 an operation failed (the message says why), 2 bad usage
(argparse), 3 theme busy (another ingestion holds it). Errors are one line on
stderr; ``--json`` output is one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from engine.settings import get_config
from themes.index_storage import ThemeBusy
from themes.names import InvalidThemeName
from themes.theme import ThemeExists, ThemeNotFound, ThemeRepository

EXIT_OK, EXIT_FAILED, EXIT_BUSY = 0, 1, 3


def _repository() -> ThemeRepository:
    return ThemeRepository(get_config().data_dir)


def _embed_model() -> Any:
    from engine.models.app_settings import AppSettingsManager

    return AppSettingsManager.load_embedding(get_config())


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
    """A one-line progress bar on stderr (stdout stays clean for --json)."""

    def __call__(self, progress: Any) -> None:
        total = max(1, progress.files_total)
        done = progress.files_done
        width = 30
        filled = int(width * done / total)
        chunks = ""
        if progress.chunks_total:
            chunks = f" chunks {progress.chunks_done}/{progress.chunks_total}"
        bar = "#" * filled + "-" * (width - filled)
        print(
            f"\r[{bar}] {done}/{progress.files_total} {progress.stage:<9} "
            f"{(progress.file_name or '')[:30]:<30}{chunks}",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
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


def cmd_list(args: argparse.Namespace) -> int:
    repo = _repository()
    rows = []
    for name in repo.names():
        theme = repo.get(name)
        version = theme.load_data()
        rows.append(
            {
                "name": name,
                "title": theme.settings.title,
                "language": theme.settings.language,
                "documents": len(theme.document_files()),
                "chunks": version.vectors.count(),
                "index_version": version.name,
            }
        )
    text = "\n".join(
        f"{r['name']:<24} {r['documents']:>4} docs {r['chunks']:>6} chunks  {r['title']}"
        for r in rows
    )
    _emit(rows, args.json, text or "no theme yet")
    return EXIT_OK


def _report_text(report: Any) -> str:
    lines = []
    for item in report.files:
        reason = f" — {item.reason}" if getattr(item, "reason", None) else ""
        lines.append(f"{item.status:<10} {item.file_name}{reason}")
    return "\n".join(lines) or "nothing to do"


def _run_ingest(args: argparse.Namespace, action: Callable[[Any, Any, Any], Any]) -> int:
    theme = _repository().get(args.name)
    bar = _ProgressBar()
    try:
        report = action(theme, _embed_model(), bar)
    finally:
        bar.close()
    _emit(report, args.json, _report_text(report))
    rejected = [f for f in report.files if f.status == "rejected"]
    return EXIT_FAILED if rejected and len(rejected) == len(report.files) else EXIT_OK


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


def cmd_remove(args: argparse.Namespace) -> int:
    from themes.ingest import remove_document

    theme = _repository().get(args.name)
    result = remove_document(theme, args.doc)
    _emit(result, args.json, f"removed {args.doc}")
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
    parser = argparse.ArgumentParser(prog="python -m themes", description=__doc__)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("create", help="create a theme")
    p.add_argument("name")
    p.add_argument("--title")
    p.add_argument("--description")
    p.add_argument("--language", choices=("fr", "en"), default="fr")
    p.set_defaults(func=cmd_create)
    sub.add_parser("list", help="list themes with counts").set_defaults(func=cmd_list)
    p = sub.add_parser("ingest", help="ingest files, folders or http(s) URLs into a theme")
    p.add_argument("name")
    p.add_argument("paths", nargs="+", help="files, folders or URLs")
    p.set_defaults(func=cmd_ingest)
    p = sub.add_parser("update", help="re-synchronise the theme's documents folder")
    p.add_argument("name")
    p.set_defaults(func=cmd_update)
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
    args = _parse(argv)
    try:
        return int(args.func(args))
    except ThemeBusy as exc:
        print(f"busy: {exc}", file=sys.stderr)
        return EXIT_BUSY
    except (InvalidThemeName, ThemeNotFound, ThemeExists, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    # --json is accepted before or after the sub-command.
    raw = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in raw
    args = build_parser().parse_args([a for a in raw if a != "--json"])
    args.json = as_json
    return args
