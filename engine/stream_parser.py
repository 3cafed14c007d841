"""ReActStreamParser: raw token stream -> typed ReAct blocks.

Invariant (tested with hypothesis): whatever the chunking of the input, the
blocks produced by ``feed`` + ``flush`` are identical to those produced by
feeding the whole text at once. This holds because every decision is taken on
complete lines only (or at ``flush``): a marker split across deltas
(``"Act" + "ion:"``) is simply not looked at until its line is complete.

Rules, in order:
- a marker line (``Thought:``, ``**Action**:``, ``## Réponse finale``...,
  see ``engine.markers``) starts a new block; text before the first marker is
  a THOUGHT if a marker follows, else the whole text is an ANSWER;
- inside a closing block (answer, response, conclusion), only protocol markers
  (thought, action, action input, observation) start a new block: an answer may
  contain a line such as "Conclusion: ..." without being cut;
- a code fence directly followed by a marker (``` then ``Thought:``) is
  scaffolding and dropped, as is its closing fence; any other fence is
  content, and marker-looking lines inside it are content too; so is a fence
  that ends a marker line (as in "Action Input: ```json").

The parser does no I/O, calls no LLM and never decides to stop: that is the
Finalizer's job.
"""

from __future__ import annotations

from engine.markers import (
    PROTOCOL_TYPES,
    PartialLine,
    classify_partial_line,
    is_fence,
    match_marker,
)
from engine.types import ReActBlock, ReActType


class ReActStreamParser:
    """Incremental segmentation of a ReAct text stream into ``ReActBlock``s."""

    def __init__(self) -> None:
        self._partial = ""  # incomplete last line
        self._blocks: list[ReActBlock] = []
        self._open_type: ReActType | None = None  # None: preamble before any marker
        self._open_lines: list[str] = []
        self._deferred: list[str] = []  # a fence line and blank lines awaiting lookahead
        self._in_content_fence = False
        self._in_scaffold_fence = False
        self._flushed = False

    # --- public API -------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> ReActStreamParser:
        """A flushed parser over a whole text (same blocks as any chunked feeding)."""
        parser = cls()
        parser.feed(text)
        parser.flush()
        return parser

    def feed(self, delta: str) -> list[ReActBlock]:
        """Consume a delta; return the blocks that this delta completed."""
        if self._flushed:
            raise RuntimeError("feed() after flush(): create a new parser per stream")
        if not delta:
            return []
        text = self._partial + delta
        *lines, self._partial = text.split("\n")
        completed: list[ReActBlock] = []
        for line in lines:
            completed.extend(self._process_line(line.rstrip("\r")))
        return completed

    def flush(self) -> list[ReActBlock]:
        """End of stream: close the open block; return the blocks completed now."""
        if self._flushed:
            return []
        completed: list[ReActBlock] = []
        if self._partial:
            completed.extend(self._process_line(self._partial.rstrip("\r")))
            self._partial = ""
        completed.extend(self._resolve_deferred(next_kind="eof"))
        closed = self._close_open_block(at_end=True)
        if closed is not None:
            completed.append(closed)
        self._flushed = True
        return completed

    @property
    def blocks(self) -> list[ReActBlock]:
        """All blocks completed so far, in order."""
        return list(self._blocks)

    @property
    def current(self) -> ReActBlock | None:
        """The block being written, for live display (UNKNOWN while undecided).

        Only what is decided is shown: a held fence line (scaffolding or code?)
        and a partial line that may still become a marker ("Act") are not; a
        partial line that already is one ("Action: sea") shows its new block.
        """
        if self._flushed:
            return None
        lines = list(self._open_lines)
        partial = self._partial.rstrip("\r")
        if partial and not self._in_content_fence:
            state = classify_partial_line(partial)
            marker = self._marker_for(partial) if state is PartialLine.MARKER else None
            if state is PartialLine.MAYBE:
                partial = ""  # may still become a marker or a fence: not shown yet
            elif marker is not None and (
                not self._deferred or self._fence_is_scaffold(next_kind="marker")
            ):
                return ReActBlock(marker[0], marker[1])
            else:
                lines.extend(self._deferred)  # the held fence opens a code block
        if partial:
            lines.append(partial)
        if self._open_type is None and not any(line.strip() for line in lines):
            return None
        kind = self._open_type if self._open_type is not None else ReActType.UNKNOWN
        return ReActBlock(kind, "\n".join(lines).strip())

    def has_final_answer(self) -> bool:
        """True when a closing block (final answer, answer, response, conclusion) exists."""
        return any(b.type.is_closing for b in self._blocks)

    def get_final_answer(self) -> str | None:
        """Content of the last closing block, or None."""
        for block in reversed(self._blocks):
            if block.type.is_closing:
                return block.content
        return None

    # --- internals --------------------------------------------------------
    def _process_line(self, line: str) -> list[ReActBlock]:
        if self._in_content_fence:
            self._open_lines.append(line)
            if is_fence(line):
                self._in_content_fence = False
            return []
        if is_fence(line):
            if self._deferred:
                # Two fences in a row: the first one cannot precede a marker.
                out = self._resolve_deferred(next_kind="text")
                if self._in_content_fence:
                    self._open_lines.append(line)
                    self._in_content_fence = False
                    return out
                self._deferred = [line]
                return out
            self._deferred = [line]
            return []
        if self._deferred and not line.strip():
            self._deferred.append(line)
            return []
        marker = self._marker_for(line)
        out = self._resolve_deferred(next_kind="text" if marker is None else "marker")
        if marker is None or self._in_content_fence:
            self._open_lines.append(line)
            return out
        closed = self._close_open_block(at_end=False)
        if closed is not None:
            out.append(closed)
        self._open_type, rest = marker
        self._open_lines = [rest] if rest else []
        if is_fence(rest):
            self._in_content_fence = True  # "Action Input: ```json": a code block opens
        return out

    def _marker_for(self, line: str) -> tuple[ReActType, str] | None:
        marker = match_marker(line)
        if marker is None:
            return None
        in_answer = self._open_type is not None and self._open_type.is_closing
        if in_answer and marker[0] not in PROTOCOL_TYPES:
            return None  # an answer may contain "Conclusion: ..."
        return marker

    def _resolve_deferred(self, *, next_kind: str) -> list[ReActBlock]:
        """Decide what a held fence line was, now that the next line is known."""
        if not self._deferred:
            return []
        scaffold = self._fence_is_scaffold(next_kind=next_kind)
        fence, *blanks = self._deferred
        self._deferred = []
        if scaffold:
            self._in_scaffold_fence = not self._in_scaffold_fence
            self._open_lines.extend(blanks)
            return []
        self._open_lines.append(fence)
        self._open_lines.extend(blanks)
        self._in_content_fence = True
        return []

    def _fence_is_scaffold(self, *, next_kind: str) -> bool:
        """Whether the held fence wraps the protocol (dropped) rather than opens code."""
        if self._in_scaffold_fence and next_kind != "text":
            return True  # closes the fence that wrapped the protocol
        if self._open_type is not None and self._open_type.is_closing:
            return False  # a code block inside the answer
        return next_kind == "marker"  # ``` directly before "Thought:"

    def _close_open_block(self, *, at_end: bool) -> ReActBlock | None:
        content = "\n".join(self._open_lines).strip()
        self._open_lines = []
        if self._open_type is None:
            if not content:
                return None
            # Text before any marker: a thought if a marker follows, else the answer.
            kind = ReActType.ANSWER if at_end and not self._blocks else ReActType.THOUGHT
            block = ReActBlock(kind, content)
        else:
            block = ReActBlock(self._open_type, content)
        self._blocks.append(block)
        return block
