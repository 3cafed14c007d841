"""What an ingest, update, removal or repair call reports, per file and for the whole call."""

from __future__ import annotations

from dataclasses import dataclass, field

from themes.chunking import FileStatus


@dataclass(frozen=True)
class FileResult:
    """What happened to one file.

    ``chunks``: the file's chunks in the index after the call; ``removed_chunks``: chunks
    deleted by the call (the previous version of an updated file, or a removed file).
    ``reason`` says why a file was rejected; ``warning`` what the admin should check in a
    file that was indexed (not valid UTF-8, name changed to a safe one).
    """

    file_name: str
    status: FileStatus
    chunks: int = 0
    removed_chunks: int = 0
    reason: str | None = None
    warning: str | None = None


@dataclass
class IngestReport:
    """Outcome of one ingest/sync/remove/repair call.

    ``version`` is the index version published by the call, or ``None`` when nothing in
    the index changed (no version is written then). ``timings`` holds seconds spent
    "reading", "chunking", "embedding", "writing" and in "total". ``rebuilt``: the
    published index was damaged and this call rebuilt it from the documents (``repair``).
    """

    theme: str
    files: list[FileResult] = field(default_factory=list)
    version: str | None = None
    chunks_embedded: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    rebuilt: bool = False

    def result(self, file_name: str) -> FileResult | None:
        return next((r for r in self.files if r.file_name == file_name), None)

    def names(self, status: FileStatus) -> list[str]:
        return [r.file_name for r in self.files if r.status == status]

    @property
    def changed(self) -> bool:
        return self.version is not None

    def summary(self) -> str:
        """One line per file, for the admin."""
        lines = []
        for r in self.files:
            if r.status == "rejected":
                lines.append(f"{r.file_name}: rejected: {r.reason}")
            elif r.status == "removed":
                lines.append(f"{r.file_name}: removed ({r.removed_chunks} chunks)")
            else:
                lines.append(f"{r.file_name}: {r.status} ({r.chunks} chunks)")
            if r.warning:
                lines.append(f"{r.file_name}: warning: {r.warning}")
        version = f"index version {self.version}" if self.version else "index unchanged"
        if self.rebuilt:
            version += " (rebuilt from the documents: the previous index was damaged)"
        lines.append(f"theme {self.theme!r}: {version}")
        return "\n".join(lines)
