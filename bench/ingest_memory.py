"""Peak memory and progress of ingesting one large text file (issue 11, finding 9).

A text file of ``--mb`` megabytes (French/English paragraphs, fixed seed) is ingested into
a fresh theme, in a child process per case so that each peak RSS (``VmHWM``) is its own.
The embedding is, by default, the packaged all-MiniLM-L6-v2's *tokenizer* with a fast fake
encoder (``--embed fake``: a deterministic vector per text), so that reading, chunking and
storing are measured without the hour a real 50 MB embedding takes on 2 cores;
``--embed real`` embeds for real. ``--throughput N`` separately measures real MiniLM chunks
per second on N full-size chunks (what the up-front time estimate divides by).

Reports, per case: peak RSS before (model loaded) and after the ingest, seconds per stage,
the number of progress events seen during chunking and embedding (finding 9: "no progress
for 85 s"), and whether the file was refused up front by the time estimate.

    .venv/bin/python -m bench.ingest_memory --mb 10 50 [--embed fake|real] [--throughput 256]
        [--limit-minutes -1]   # the configured limit: shows the up-front refusal
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_WORDS = (
    "budget", "contrat", "client", "facture", "livraison", "projet", "équipe", "réunion",
    "rapport", "délai", "qualité", "service", "produit", "commande", "stock", "fournisseur",
    "analyse", "risque", "sécurité", "procédure", "congés", "télétravail", "serveur",
    "the", "invoice", "was", "paid", "after", "meeting", "with", "our", "supplier", "about",
    "delivery", "schedule", "policy", "employee", "password", "network", "access",
)  # fmt: skip


def write_text_file(path: Path, megabytes: float, seed: int = 11, separator: str = "\n\n") -> int:
    """A Markdown-free text file of about ``megabytes`` MB, streamed to disk; paragraphs are
    separated by ``separator`` (``"\n\n\n"`` is llama-index's own paragraph separator)."""
    rng = random.Random(seed)
    target = int(megabytes * 2**20)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            sentences = [
                " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 16))).capitalize() + "."
                for _ in range(rng.randint(4, 7))
            ]
            para = " ".join(sentences) + separator
            out.write(para)
            written += len(para.encode("utf-8"))
    return written


def _vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_hwm() -> None:
    # Writing "5" to clear_refs resets the peak RSS counter (Linux >= 4.0).
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _fake_model() -> Any:
    import numpy as np

    from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm

    real = load_packaged_minilm()

    class FastFake(LlamaIndexEmbeddingAdapter):
        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            out = []
            for text in texts:
                rng = np.random.default_rng(abs(hash(text)) % 2**32)
                vec = rng.standard_normal(384).astype(np.float32)
                out.append((vec / np.linalg.norm(vec)).tolist())
            return out

    return FastFake(real.wrapper, model_name=real.model_name)


def child(megabytes: float, embed: str, limit: float | None, separator: str) -> dict[str, Any]:
    import inspect

    from models.embeddings import load_packaged_minilm
    from themes.ingest import IngestProgress, ingest_files
    from themes.theme import ThemeRepository

    model = load_packaged_minilm() if embed == "real" else _fake_model()
    model.get_text_embedding_batch(["warm-up"] * 4)
    events: dict[str, int] = {}
    gaps: list[float] = []
    last = [time.perf_counter()]

    def progress(event: IngestProgress) -> None:
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now
        events[event.stage] = events.get(event.stage, 0) + 1

    with tempfile.TemporaryDirectory(prefix="chatitego-bench-mem-") as tmp:
        source = Path(tmp) / "big.txt"
        size = write_text_file(source, megabytes, separator=separator)
        theme = ThemeRepository(Path(tmp) / "data").create("big")
        _reset_hwm()
        before = _vm_hwm_mb()
        started = time.perf_counter()
        # The code before issue 11 had no time budget (same script, older checkout).
        budget = (
            {"max_minutes": limit}
            if "max_minutes" in inspect.signature(ingest_files).parameters
            else {}
        )
        try:
            report = ingest_files(theme, [source], model, progress=progress, **budget)
        except Exception as exc:  # noqa: BLE001 - reported as the outcome of this case
            return {
                "mb": megabytes,
                "error": f"{type(exc).__name__}: {str(exc)[:160]}",
                "peak_rss_mb_before": round(before, 1),
                "peak_rss_mb_during_ingest": round(_vm_hwm_mb(), 1),
                "seconds": round(time.perf_counter() - started, 2),
            }
        elapsed = time.perf_counter() - started
        (result,) = report.files
        return {
            "mb": megabytes,
            "bytes": size,
            "embed": embed,
            "status": result.status,
            "reason": result.reason,
            "chunks": result.chunks,
            "peak_rss_mb_before": round(before, 1),
            "peak_rss_mb_during_ingest": round(_vm_hwm_mb(), 1),
            "seconds": round(elapsed, 2),
            "timings_s": {k: round(v, 2) for k, v in report.timings.items()},
            "progress_events": events,
            "longest_silence_s": round(max(gaps, default=0.0), 2),
        }


def throughput(chunks: int) -> dict[str, Any]:
    """Real MiniLM chunks/s on full-size chunks (the limit's divisor)."""
    from models.embeddings import load_packaged_minilm
    from themes.ingest import chunk_parameters, token_counter
    from themes.theme import RetrievalSettings

    model = load_packaged_minilm()
    size, _ = chunk_parameters(RetrievalSettings(), model)
    count = token_counter(model)
    rng = random.Random(5)
    texts = []
    for _ in range(chunks):
        words: list[str] = []
        while len(count(" ".join(words))) < size - 8:
            words.append(rng.choice(_WORDS))
        texts.append(" ".join(words))
    model.get_text_embedding_batch(texts[:8])
    started = time.perf_counter()
    cpu = time.process_time()
    model.get_text_embedding_batch(texts)
    wall = time.perf_counter() - started
    chars = sum(len(t) for t in texts) / len(texts)
    return {
        "chunks": chunks,
        "chunk_tokens": size,
        "chars_per_chunk": round(chars),
        "seconds": round(wall, 2),
        "chunks_per_s": round(chunks / wall, 2),
        "chunks_per_cpu_s": round(chunks / (time.process_time() - cpu), 2),
        "threads": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, nargs="*", default=[10.0, 50.0])
    parser.add_argument("--embed", choices=("fake", "real"), default="fake")
    parser.add_argument("--throughput", type=int, default=0)
    parser.add_argument(
        "--limit-minutes",
        type=float,
        default=0.0,
        help="time budget given to ingest_files (default 0: no limit, to measure memory; "
        "-1: the configured INGEST_MAX_MINUTES, to see the refusal)",
    )
    parser.add_argument("--separator", choices=("blank", "triple"), default="blank")
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child is not None:
        limit = None if args.limit_minutes < 0 else args.limit_minutes
        separator = "\n\n" if args.separator == "blank" else "\n\n\n"
        print(json.dumps(child(args.child, args.embed, limit, separator)))
        return
    results: dict[str, Any] = {"benchmark": "ingest_memory", "cases": []}
    for mb in args.mb:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.ingest_memory",
                "--child",
                str(mb),
                "--embed",
                args.embed,
                "--limit-minutes",
                str(args.limit_minutes),
                "--separator",
                args.separator,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            results["cases"].append({"mb": mb, "error": done.stderr.strip().splitlines()[-3:]})
        else:
            results["cases"].append(json.loads(done.stdout.strip().splitlines()[-1]))
    if args.throughput:
        results["throughput"] = throughput(args.throughput)
    print(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
