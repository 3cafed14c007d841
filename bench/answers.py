"""Answer benchmark: the real engine on the configured model over the eval set, beside a baseline.

For every question of ``eval/questions.jsonl`` (documentation of the demo theme
and the product owner's design documents; calculator, date and general
questions without a theme), two rows are measured in the same run:

- **engine**: a whole turn of ``ReActEngine`` on the configured model (the
  embedded one by default), as the chat page runs it;
- **baseline**: one focused call of the same model: a two-line instruction,
  the top-k passages of the theme search (none for questions without a
  theme), the question.

Each row reports accuracy (all the facts of the question present), mean fact
score, citation accuracy (a right file among the sources the answer cites with
[Source n]; all the sources it was shown when it cites none), p50/p95 seconds
per turn, steps, prompt tokens (counted by the model's tokenizer when it is
in-process; of which read from the KV cache), stop reasons and context
overflows. The engine runs all its turns first, then the baseline: interleaved,
each would evict the other's cached prompt prefix, which a real chat does not.

    .venv/bin/python -m bench.answers [--ids demo-fr,calc] [--details out.json]

The JSON summary goes to stdout, with ``targets`` and whether each is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.llms import ChatMessage, MessageRole

from bench.answer_eval import (
    THEME_CORPORA,
    EvalQuestion,
    cites_expected,
    facts_score,
    is_correct,
    load_eval_set,
)
from config.settings import AppConfig
from engine import ReActEngine
from engine.types import StopReason
from models.inprocess import GenerationUsage, is_in_process

BASELINE_TOP_K = 3
BASELINE_MAX_TOKENS = 400
BASELINE_INSTRUCTION = {
    "fr": "Réponds à la question à partir des sources ci-dessous, en citant [Source n].",
    "en": "Answer the question from the sources below, citing [Source n].",
}
DIRECT_INSTRUCTION = {"fr": "Réponds à la question.", "en": "Answer the question."}
CONCEPTION_TITLE = "Conception de ReActEngine"
CONCEPTION_DESCRIPTION = (
    "Les documents de conception de ReActEngine et de systèmes voisins : agent ReAct, "
    "Finalizer, StreamParser, erreurs, ModelLoaderFactory, AppSettings, chat engine, RAG."
)
TARGETS = {
    "accuracy_min": 0.85,
    "citation_accuracy_min": 0.9,
    "p50_ratio_max": 1.3,
    "context_overflows_max": 0,
}
_CITATION = re.compile(r"\[\s*Sources?\s*([\d\s,;et&and]+)\]", re.IGNORECASE)


@dataclass
class Turn:
    """One question asked to one row (engine or baseline)."""

    id: str
    kind: str
    seconds: float
    correct: bool
    fact_score: float
    cited_ok: bool | None
    answer: str
    stop_reason: str
    steps: int
    prompt_tokens: int
    cached_tokens: int
    route: str = ""
    cited: list[str] = field(default_factory=list)


# --- setup -------------------------------------------------------------------------------------


def prepare_themes(data_dir: Path, embed_model: Any) -> None:
    """The demo theme and the design documents' theme, indexed in ``data_dir``."""
    from themes.demo import ensure_demo_theme
    from themes.ingest import ingest_files
    from themes.theme import ThemeRepository

    ensure_demo_theme(data_dir, embed_model)
    repository = ThemeRepository(data_dir)
    if not repository.exists("conception"):
        theme = repository.create(
            "conception",
            title=CONCEPTION_TITLE,
            description=CONCEPTION_DESCRIPTION,
            language="fr",
        )
        ingest_files(theme, sorted(THEME_CORPORA["conception"].glob("*.md")), embed_model)


def cited_files(answer: str, shown: Sequence[str]) -> list[str]:
    """Files the answer cites as [Source n]; all the shown ones when it cites none."""
    numbers: list[int] = []
    for match in _CITATION.finditer(answer):
        numbers += [int(n) for n in re.findall(r"\d+", match.group(1))]
    cited = [shown[n - 1] for n in numbers if 0 < n <= len(shown)]
    return list(dict.fromkeys(cited)) if cited else list(dict.fromkeys(shown))


# --- the two rows --------------------------------------------------------------------------------


async def engine_turn(engine: ReActEngine, question: EvalQuestion) -> Turn:
    engine.start(theme=question.theme, language=question.lang)
    engine.set_history([])
    started = time.perf_counter()
    async for _ in engine.stream(question.question):
        pass
    seconds = time.perf_counter() - started
    outcome = engine.last_outcome
    assert outcome is not None
    cited = cited_files(outcome.answer, [s.file for s in outcome.sources])
    return Turn(
        id=question.id,
        kind=question.kind,
        seconds=seconds,
        correct=is_correct(outcome.answer, question),
        fact_score=facts_score(outcome.answer, question),
        cited_ok=cites_expected(cited, question) if question.cite else None,
        answer=outcome.answer,
        stop_reason=outcome.stop_reason.value,
        steps=outcome.steps,
        prompt_tokens=outcome.usage.prompt_tokens,
        cached_tokens=outcome.usage.cached_tokens,
        route=outcome.route,
        cited=cited,
    )


async def baseline_turn(llm: Any, retrievers: dict[str, Any], question: EvalQuestion) -> Turn:
    """One focused call: instruction, top-k passages, question (timed with the search)."""
    started = time.perf_counter()
    shown: list[str] = []
    if question.theme is not None:
        result = retrievers[question.theme].retrieve(question.question)
        items = result.items[:BASELINE_TOP_K]
        shown = [item.file_name or "" for item in items]
        passages = "\n\n".join(
            f"[Source {i}: {item.file_name}]\n{item.compressed_text}"
            for i, item in enumerate(items, start=1)
        )
        content = (
            f"{BASELINE_INSTRUCTION[question.lang]}\n\n{passages}\n\nQuestion : {question.question}"
        )
    else:
        content = f"{DIRECT_INSTRUCTION[question.lang]}\n\n{question.question}"
    usage: list[GenerationUsage] = []
    kwargs: dict[str, Any] = {"max_tokens": BASELINE_MAX_TOKENS}
    if is_in_process(llm):
        kwargs["usage_sink"] = usage
    answer = ""
    stream = await llm.astream_chat([ChatMessage(role=MessageRole.USER, content=content)], **kwargs)
    async for chunk in stream:
        answer += chunk.delta or ""
    seconds = time.perf_counter() - started
    cited = cited_files(answer, shown)
    return Turn(
        id=question.id,
        kind=question.kind,
        seconds=seconds,
        correct=is_correct(answer, question),
        fact_score=facts_score(answer, question),
        cited_ok=cites_expected(cited, question) if question.cite else None,
        answer=answer.strip(),
        stop_reason=StopReason.ANSWERED.value,
        steps=1,
        prompt_tokens=sum(u.prompt_tokens for u in usage),
        cached_tokens=sum(u.cached_tokens for u in usage),
        cited=cited,
    )


# --- the summary -------------------------------------------------------------------------------


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def summarise(turns: Sequence[Turn]) -> dict[str, Any]:
    documents = [t for t in turns if t.cited_ok is not None]
    seconds = [t.seconds for t in turns]
    by_kind: dict[str, list[Turn]] = {}
    for t in turns:
        by_kind.setdefault(t.kind, []).append(t)
    return {
        "questions": len(turns),
        "accuracy": round(sum(t.correct for t in turns) / len(turns), 3) if turns else 0.0,
        "fact_score": round(statistics.fmean(t.fact_score for t in turns), 3) if turns else 0.0,
        "citation_accuracy": (
            round(sum(bool(t.cited_ok) for t in documents) / len(documents), 3)
            if documents
            else None
        ),
        "accuracy_by_kind": {
            kind: round(sum(t.correct for t in ts) / len(ts), 3) for kind, ts in by_kind.items()
        },
        "p50_s": round(percentile(seconds, 0.5), 2),
        "p95_s": round(percentile(seconds, 0.95), 2),
        "mean_s": round(statistics.fmean(seconds), 2) if seconds else 0.0,
        "steps_mean": round(statistics.fmean(t.steps for t in turns), 2) if turns else 0.0,
        "prompt_tokens_mean": round(statistics.fmean(t.prompt_tokens for t in turns), 1)
        if turns
        else 0.0,
        "cached_tokens_mean": round(statistics.fmean(t.cached_tokens for t in turns), 1)
        if turns
        else 0.0,
        "stop_reasons": dict(Counter(t.stop_reason for t in turns)),
        "context_overflows": sum(t.stop_reason == StopReason.CONTEXT_OVERFLOW.value for t in turns),
    }


def verdict(engine: dict[str, Any], baseline: dict[str, Any] | None) -> dict[str, Any]:
    ratios: dict[str, Any] = {}
    met: dict[str, bool] = {
        "accuracy": engine["accuracy"] >= TARGETS["accuracy_min"],
        "citations": (engine["citation_accuracy"] or 0.0) >= TARGETS["citation_accuracy_min"],
        "context_overflows": engine["context_overflows"] <= TARGETS["context_overflows_max"],
    }
    if baseline is not None:
        ratios = {
            "accuracy_vs_baseline": round(engine["accuracy"] / baseline["accuracy"], 3)
            if baseline["accuracy"]
            else None,
            "p50_vs_baseline": round(engine["p50_s"] / baseline["p50_s"], 3)
            if baseline["p50_s"]
            else None,
            "p95_vs_baseline": round(engine["p95_s"] / baseline["p95_s"], 3)
            if baseline["p95_s"]
            else None,
            "prompt_tokens_vs_baseline": round(
                engine["prompt_tokens_mean"] / baseline["prompt_tokens_mean"], 3
            )
            if baseline["prompt_tokens_mean"]
            else None,
        }
        met["accuracy_not_below_baseline"] = engine["accuracy"] >= baseline["accuracy"]
        met["p50_time"] = (ratios["p50_vs_baseline"] or 99.0) <= TARGETS["p50_ratio_max"]
    return {"ratios": ratios, "targets": TARGETS, "met": met}


# --- main ----------------------------------------------------------------------------------------


def select(questions: list[EvalQuestion], ids: str | None) -> list[EvalQuestion]:
    if not ids:
        return questions
    prefixes = [p.strip() for p in ids.split(",") if p.strip()]
    return [q for q in questions if any(q.id.startswith(p) for p in prefixes)]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from models.app_settings import AppSettingsManager
    from themes.retrieval import HybridRetriever
    from themes.theme import RetrievalSettings, ThemeRepository

    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="chatitego-answers-"))
    config = AppConfig(data_dir=data_dir)
    models = AppSettingsManager.load_models(config)
    assert models.embed_model is not None and models.llm is not None
    prepare_themes(data_dir, models.embed_model)
    questions = select(load_eval_set(), args.ids)

    engine = ReActEngine(config=config)
    loaded = time.perf_counter()
    engine.start(theme="demo", language="fr")
    engine.warm_up()
    warm_up_s = time.perf_counter() - loaded
    engine_turns = []
    for question in questions:
        turn = await engine_turn(engine, question)
        engine_turns.append(turn)
        print(json.dumps({"engine": asdict(turn)}, ensure_ascii=False), file=sys.stderr)

    baseline_turns: list[Turn] = []
    if not args.skip_baseline:
        repository = ThemeRepository(data_dir)
        retrievers = {
            name: HybridRetriever(
                repository.get(name).load_data(),
                models.embed_model,
                RetrievalSettings(top_k=BASELINE_TOP_K),
            )
            for name in THEME_CORPORA
        }
        for question in questions:
            turn = await baseline_turn(models.llm, retrievers, question)
            baseline_turns.append(turn)
            print(json.dumps({"baseline": asdict(turn)}, ensure_ascii=False), file=sys.stderr)

    engine_summary = summarise(engine_turns)
    baseline_summary = summarise(baseline_turns) if baseline_turns else None
    result = {
        "bench": "answers",
        "model": engine.describe_llm(),
        "questions": len(questions),
        "warm_up_s": round(warm_up_s, 1),
        "engine": engine_summary,
        "baseline": baseline_summary,
        **verdict(engine_summary, baseline_summary),
    }
    if args.details:
        Path(args.details).write_text(
            json.dumps(
                {
                    "summary": result,
                    "engine": [asdict(t) for t in engine_turns],
                    "baseline": [asdict(t) for t in baseline_turns],
                },
                ensure_ascii=False,
                indent=1,
            ),
            encoding="utf-8",
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", help="comma-separated id prefixes (e.g. demo-fr,calc)")
    parser.add_argument("--data-dir", help="where to build the themes (default: a temp dir)")
    parser.add_argument("--details", help="write every answer of both rows to this JSON file")
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    json.dump(result, sys.stdout, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
