"""``python -m manager hash-password``: make the admin password hash line.

The password is read with ``getpass`` (typed twice), or from standard input with
``--stdin`` (one line, for scripts). The output is the line to put in
``chatitego.toml``, and the same value for the ``ADMIN_PASSWORD_HASH`` variable.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Sequence

from manager.auth import hash_password

MIN_PASSWORD_CHARS = 8


def _read_password(from_stdin: bool) -> str | None:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("Admin password: ")
    second = getpass.getpass("Same password again: ")
    if first != second:
        print("error: the two passwords differ, nothing made; try again", file=sys.stderr)
        return None
    return first


def cmd_hash_password(args: argparse.Namespace) -> int:
    password = _read_password(args.stdin)
    if password is None:
        return 1
    if len(password) < MIN_PASSWORD_CHARS:
        print(
            f"error: use at least {MIN_PASSWORD_CHARS} characters for the admin password",
            file=sys.stderr,
        )
        return 1
    line = hash_password(password)
    print("# chatitego.toml:")
    print(f'admin_password_hash = "{line}"')
    print("# or in the environment (single quotes keep the $ signs):")
    print(f"ADMIN_PASSWORD_HASH='{line}'")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m manager", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hash-password", help="make the admin password hash line")
    p.add_argument("--stdin", action="store_true", help="read the password from stdin")
    p.set_defaults(func=cmd_hash_password)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
