"""Collect ``bench.sh``'s raw outputs into one results file, a Markdown table and a chart.

Reads ``bench/raw/<name>.json`` (one JSON object per benchmark, as each ``bench.*``
module prints it; a benchmark that failed leaves ``<name>.error``), writes:

- ``bench/results.json``: every raw object, plus the rows below;
- ``bench/results.md``: one row per target: measured value, target, ratio, met;
- ``bench/scale.png``: retrieval p50 vs corpus size per backend beside brute force.

    .venv/bin/python -m bench.report [--raw bench/raw] [--out bench]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    """One measured value against its target (``kind``: ``max`` or ``min``)."""

    benchmark: str
    metric: str
    value: float
    target: float
    kind: str

    @property
    def ratio(self) -> float:
        return round(self.value / self.target, 3) if self.target else float("nan")

    @property
    def met(self) -> bool:
        return self.value <= self.target if self.kind == "max" else self.value >= self.target


def _engine_overhead(r: dict[str, Any]) -> list[Row]:
    t = r["targets"]
    name = "engine_overhead"
    return [
        Row(name, "overhead ms/turn", r["overhead_ms"], t["overhead_ms_max"], "max"),
        Row(name, "ours / plain ReActAgent", r["ratio_vs_plain"], t["ratio_max"], "max"),
    ]


def _embeddings(r: dict[str, Any]) -> list[Row]:
    return [
        Row("embeddings", "adapter / raw encode", r["ratios"]["adapter_vs_raw_batch"], 0.95, "min"),
        Row(
            "embeddings",
            "adapter / raw encode (CPU time)",
            r["ratios_cpu_time"]["adapter_vs_raw_batch"],
            0.95,
            "min",
        ),
    ]


def _retrieval(r: dict[str, Any]) -> list[Row]:
    rows = []
    t = r["targets"]
    for size in r["sizes"]:
        if size["chunks"] == 100_000:
            rows.append(
                Row(
                    "retrieval",
                    "embedded / numpy p50 at 100k",
                    size["ratio_ours_numpy_p50"],
                    t["ratio_ours_numpy_p50_at_100k_max"],
                    "max",
                )
            )
    ours = r.get("load", {}).get("ours")
    if ours:
        rows.append(
            Row(
                "retrieval",
                "embedded load 10k (s)",
                ours["load_s_median"],
                t["ours_load_10k_max_s"],
                "max",
            )
        )
    return rows


def _ingest(r: dict[str, Any]) -> list[Row]:
    ratio, target = r["ratio_ingest_over_raw"], r["target_ratio"]
    return [Row("ingest", "ingest / raw encode chunks/s", ratio, target, "min")]


def _chat_page(r: dict[str, Any]) -> list[Row]:
    return [
        Row(
            "chat_page",
            "first answer token, warm (s)",
            r["ours_warm_first_token_median_s"],
            r["target_first_token_s"],
            "max",
        )
    ]


def _scale(r: dict[str, Any]) -> list[Row]:
    rows = []
    t = r["targets"]
    for size in r["sizes"]:
        n = size["chunks"]
        label = f"{n // 1000}k" if n < 1_000_000 else f"{n // 1_000_000}M"
        if n >= 100_000:
            rows.append(
                Row(
                    "scale",
                    f"postgres p50 ms at {label} ({r['distribution']})",
                    size["postgres"]["p50_ms"],
                    t["postgres_p50_ms_at_100k_max"],
                    "max",
                )
            )
        rows.append(
            Row(
                "scale",
                f"postgres recall@10 at {label}",
                size["postgres_recall_at_10"],
                t["postgres_recall_at_10_min"],
                "min",
            )
        )
    return rows


def _load(r: dict[str, Any]) -> list[Row]:
    rows = []
    for run in r["runs"]:
        t, name = run["targets"], f"load ({run['backend']}, {run['sessions']} sessions)"
        rows += [
            Row(name, "isolation problems", len(run["isolation_problems"]), 0, "max"),
            Row(name, "turns interrupted", run["interrupted_turns"], 0, "max"),
            Row(name, "questions dropped", len(run["questions_dropped"]), 0, "max"),
            Row(
                name,
                "RSS per added session (MB)",
                run["rss_per_added_session_mb"],
                t["rss_per_added_session_mb_max"],
                "max",
            ),
            Row(
                name,
                "first token p95 (s)",
                run["first_token_p95_s"],
                t["first_token_p95_s_max"],
                "max",
            ),
        ]
    return rows


EXTRACTORS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "engine_overhead": _engine_overhead,
    "embeddings": _embeddings,
    "retrieval": _retrieval,
    "ingest": _ingest,
    "chat_page": _chat_page,
    "scale": _scale,
    "load": _load,
}


def markdown(rows: list[Row], errors: dict[str, str], raw: dict[str, Any]) -> str:
    lines = [
        "| benchmark | metric | value | target | value / target | met |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        sign = "≤" if row.kind == "max" else "≥"
        met = "yes" if row.met else "**no**"
        ratio = f"{row.ratio:g}" if row.target else "—"  # a zero target has no ratio
        lines.append(
            f"| {row.benchmark} | {row.metric} | {row.value:g} | {sign} {row.target:g} "
            f"| {ratio} | {met} |"
        )
    for name in sorted(set(raw) - set(EXTRACTORS)):
        lines.append(f"| {name} | see results.json | | | | |")
    for name, error in sorted(errors.items()):
        lines.append(f"| {name} | failed: {error} | | | | |")
    return "\n".join(lines) + "\n"


def chart(scale: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = scale["sizes"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, style in (("postgres", "o-"), ("embedded", "s-"), ("numpy", "^--")):
        points = [(s["chunks"], s[name]["p50_ms"]) for s in sizes if name in s]
        if points:
            xs, ys = zip(*points, strict=True)
            label = {"postgres": "postgres (pgvector HNSW)", "embedded": "embedded (numpy store)"}
            ax.plot(xs, ys, style, label=label.get(name, "numpy brute force"))
    target = scale["targets"]["postgres_p50_ms_at_100k_max"]
    ax.axhline(target, color="grey", linestyle=":", label=f"target {target:g} ms at 100k")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks (384-d, top-10)")
    ax.set_ylabel("query p50 (ms)")
    ax.set_title(f"Retrieval p50 vs corpus size ({scale['distribution']} vectors)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--raw", type=Path, default=Path("bench/raw"))
    parser.add_argument("--out", type=Path, default=Path("bench"))
    args = parser.parse_args()
    raw: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for path in sorted(args.raw.glob("*.json")):
        try:
            raw[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            errors[path.stem] = "no JSON output"
    for path in sorted(args.raw.glob("*.error")):
        errors[path.stem] = path.read_text(encoding="utf-8").strip().splitlines()[-1][:120]
    rows: list[Row] = []
    for name, result in raw.items():
        extract = EXTRACTORS.get(name)
        if extract is not None:
            rows.extend(extract(result))
    table = markdown(rows, errors, raw)
    results = {
        "rows": [asdict(r) | {"ratio": r.ratio, "met": r.met} for r in rows],
        "errors": errors,
        "raw": raw,
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(table, encoding="utf-8")
    if "scale" in raw:
        chart(raw["scale"], args.out / "scale.png")
    print(table)


if __name__ == "__main__":
    main()
