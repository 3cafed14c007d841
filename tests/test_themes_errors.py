"""The themes library's error root: every error it defines derives from ThemesError and
keeps its conventional base, and the manager's sentences branch on that root."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

import themes
from manager.operations import user_message
from themes.errors import ThemesError
from themes.index_storage import IndexWriteFailed, ThemeFolderGone
from themes.readers import RejectedFile
from themes.theme import ThemeNotFound


def _themes_exception_classes() -> list[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for module_info in pkgutil.walk_packages(themes.__path__, "themes."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("themes."):
                found.add(value)
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def test_every_themes_exception_derives_from_the_root() -> None:
    classes = _themes_exception_classes()
    assert len(classes) >= 20
    assert [cls.__qualname__ for cls in classes if not issubclass(cls, ThemesError)] == []


def test_conventional_bases_still_catch() -> None:
    with pytest.raises(LookupError):
        raise ThemeNotFound("gone")
    with pytest.raises(FileNotFoundError):
        raise ThemeFolderGone("gone")
    assert issubclass(IndexWriteFailed, OSError)


def test_rejected_file_still_pickles_with_the_root() -> None:
    copy = pickle.loads(pickle.dumps(RejectedFile("a.pdf", "encrypted PDF")))
    assert isinstance(copy, ThemesError)
    assert (copy.file_name, copy.reason) == ("a.pdf", "encrypted PDF")


def test_user_message_gives_a_sentence_only_for_errors_of_the_library() -> None:
    assert user_message(RejectedFile("a.pdf", "encrypted PDF"), "en") == "a.pdf: encrypted PDF"
    assert user_message(ValueError("bug"), "fr") is None
    # Raised on purpose but nothing the admin can act on: the page logs it as a bug.
    assert user_message(ThemesError("internal"), "fr") is None
