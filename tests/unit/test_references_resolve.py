"""Every reference in the repository resolves inside it.

Two kinds of reference led nowhere: a comment or docstring that cited "issue N" of a tracker
this repository does not hold (the reason now lives in docs/decisions.md, in a section a
reader can open), and a docstring that named a function or class by a dotted path after it
had moved (``store.bets.judge_slip`` once it lived elsewhere). Both are searched for here:
the first in every file of the repository, the second in every docstring of the package.
(docs/architecture.md's names are held by tests/unit/test_docs_architecture.py.)
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
from pathlib import Path

import pytest
from test_repo_stands_alone import ROOT, repository_files

# A tracker number in any of its spellings (this file spells it in pieces, so as not to match).
TRACKER = re.compile(r"\b[Ii]ssues?" + r" #?\d+")

# Nothing is left out: a results file keeps the commit subjects of the run it measured, and
# those point to docs/ too.
RECORDS: tuple[str, ...] = ()

PACKAGES = ("rules", "protocol", "engine", "store", "bus", "operator", "server", "config",
            "cli", "auth", "clock", "tasks", "chat", "accounts", "media", "dealer")

# :func:`~livetable.x.y`, ``livetable.x.y``, `store.x.Y` (with or without the package).
DOTTED = re.compile(
    r"(?::[a-z]+:)?`{1,2}~?((?:livetable\.)?(?:" + "|".join(PACKAGES) + r")\.[A-Za-z_][\w.]*)`{1,2}"
)


def tracker_references(text: str) -> list[tuple[int, str]]:
    return [(number, match.group(0))
            for number, line in enumerate(text.splitlines(), start=1)
            for match in TRACKER.finditer(line)]


def test_the_search_finds_tracker_references() -> None:
    text = "ok\n# why: see " + "issue" + " 23\n" + '"""' + "Issue" + " #7: x"
    assert [number for number, _ in tracker_references(text)] == [2, 3]
    assert tracker_references("an issue of money, 23 bets") == []


@pytest.mark.process  # git ls-files
def test_no_file_cites_a_tracker_the_repository_does_not_hold() -> None:
    found = []
    for path in repository_files():
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(RECORDS):
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [f"{name}:{number}: {form!r}" for number, form in tracker_references(text)]
    assert not found, ("say the reason (and its figure) or link a section of docs/ "
                       "(docs/decisions.md) instead:\n" + "\n".join(found))


@functools.cache
def docstrings() -> list[tuple[str, int, str]]:
    """(module file, line, docstring) for every module, class and function of the package."""
    found = []
    for path in sorted((ROOT / "livetable").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                          | ast.AsyncFunctionDef):
                text = ast.get_docstring(node, clean=False)
                if text:
                    line = getattr(node, "lineno", 1)
                    found.append((path.relative_to(ROOT).as_posix(), line, text))
    return found


def _member(owner: object, name: str) -> object:
    """``owner.name``, where owner may be a class whose instances carry ``name`` (a field of
    a dataclass or a Struct, or an attribute set in a method)."""
    if hasattr(owner, name):
        return getattr(owner, name)
    if inspect.isclass(owner):
        for cls in owner.__mro__:
            if name in getattr(cls, "__annotations__", {}):
                return None
            try:
                source = inspect.getsource(cls)
            except (OSError, TypeError):
                continue
            if re.search(rf"\bself\.{re.escape(name)}\b\s*(?::[^=]*)?=", source):
                return None
    raise AttributeError(name)


def resolves(dotted: str) -> bool:
    parts = dotted.removeprefix("livetable.").split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module("livetable." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        try:
            for name in parts[cut:]:
                target = _member(target, name)
        except AttributeError:
            return False
        return True
    return False


def test_the_resolver_tells_a_name_from_a_moved_one() -> None:
    assert resolves("livetable.rules.settlement.spot_result")
    assert resolves("store.base.Store")
    assert resolves("engine.table.TableEngine._move")
    assert not resolves("store.bets.no_such_function")
    assert not resolves("livetable.nowhere.Thing")
    names = DOTTED.findall("see :func:`~livetable.rules.hands.evaluate` and ``bus.keys.RedisKeys``"
                           " and `store.base.Store` but not ``self.store``")
    assert names == ["livetable.rules.hands.evaluate", "bus.keys.RedisKeys", "store.base.Store"]


@pytest.mark.parametrize("module", sorted({m for m, _, _ in docstrings()}))
def test_every_dotted_name_in_a_docstring_resolves(module: str) -> None:
    broken = [f"{module}:{line}: {name}"
              for path, line, text in docstrings() if path == module
              for name in DOTTED.findall(text) if not resolves(name.rstrip("."))]
    assert not broken, "a docstring names what is not there:\n" + "\n".join(broken)


@pytest.mark.process  # git ls-files
def test_the_docs_are_searched_where_they_are() -> None:
    assert (ROOT / "docs" / "decisions.md").is_file()
    assert Path(__file__).name in {p.name for p in repository_files()}


def test_the_readme_maps_every_package() -> None:
    """The README's "What is here" names every package of livetable (it once left out four)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## What is here", 1)[1].split("\n## ", 1)[0]
    packages = sorted(p.parent.name for p in (ROOT / "livetable").glob("*/__init__.py"))
    missing = [p for p in packages if f"`livetable/{p}/`" not in section]
    assert len(packages) >= 9
    assert not missing, f"add these to the README's map: {missing}"
    assert "`livetable/*.py`" in section  # the top-level modules, in one row
