"""How long indexing a text will take, and the budget that refuses a batch too long to run.

Embedding dominates ingestion time, and it is proportional to the tokens embedded. The
rates below were measured with ``python -m bench.ingest_memory --throughput 512`` on the
reference machine (all-MiniLM-L6-v2 on 2 shared CPU cores, full 240-token chunks of French
and English text); a faster machine simply finishes early. Issue 11, finding 9: a 50 MB
text file held its theme's lock for ~50 min before anyone was told; now a file whose
estimate exceeds the limit (``INGEST_MAX_MINUTES``) is refused before anything is embedded.

    budget = TimeBudget(limit_minutes=30, chunk_tokens=240, overlap=32)
    budget.admit("big.txt", chars=52_000_000)   # RejectedFile: "≈ 130 min estimated, ..."
"""

from __future__ import annotations

import math

from themes.readers import RejectedFile

# Measured: 7.6 to 8.7 chunks/s of 240 tokens (1,810 to 2,090 tokens/s, the machine shared
# with other work); rounded down, since an estimate that errs should err towards refusing.
EMBED_TOKENS_PER_S = 1_800.0
# all-MiniLM-L6-v2's tokenizer on French/English prose: 1,028 characters per 240 tokens.
CHARS_PER_TOKEN = 4.3
DEFAULT_MAX_MINUTES = 30.0
# Chunk size and overlap used when the theme is not known yet (an upload being staged).
DEFAULT_CHUNK_TOKENS = 240
DEFAULT_OVERLAP = 32


def estimate_seconds(chars: int, chunk_tokens: int, overlap: int) -> float:
    """Seconds to chunk and embed ``chars`` characters of text (overlaps embedded twice)."""
    tokens = chars / CHARS_PER_TOKEN
    step = max(1, chunk_tokens - overlap)
    return tokens * (chunk_tokens / step) / EMBED_TOKENS_PER_S


def minutes(seconds: float) -> int:
    """Whole minutes, at least 1, for messages ("≈ 3 min")."""
    return max(1, math.ceil(seconds / 60))


class TimeBudget:
    """The estimated indexing time one call may spend; ``limit_minutes <= 0`` means no limit.

    Files are admitted in order while the total stays under the limit, so one call never
    holds a theme's lock much longer than the limit, whatever the number of files.
    """

    def __init__(self, limit_minutes: float, chunk_tokens: int, overlap: int) -> None:
        self.limit_s = max(0.0, limit_minutes) * 60
        self.chunk_tokens = chunk_tokens
        self.overlap = overlap
        self.admitted_s = 0.0

    def admit(self, name: str, chars: int) -> None:
        """Count ``chars`` against the budget, or raise ``RejectedFile`` saying why not."""
        needed = estimate_seconds(chars, self.chunk_tokens, self.overlap)
        if self.limit_s and self.admitted_s + needed > self.limit_s:
            raise RejectedFile(name, too_long_reason(needed, self.limit_s, self.admitted_s))
        self.admitted_s += needed


def too_long_reason(needed_s: float, limit_s: float, already_s: float = 0.0) -> str:
    """The refusal sentence: estimate, limit, and what the admin can do."""
    limit = minutes(limit_s)
    if already_s and needed_s <= limit_s:
        return (
            f"≈ {minutes(needed_s)} min estimated, and the files before it in this batch "
            f"already take ≈ {minutes(already_s)} min: limit {limit} min per batch, not "
            "ingested (ingest it in a separate batch)"
        )
    return (
        f"≈ {minutes(needed_s)} min estimated, limit {limit} min: not ingested (split the "
        "file into smaller ones, or raise INGEST_MAX_MINUTES)"
    )
