"""docs/architecture.md names real files and real names, so that it cannot go stale silently.

Every path of the repository it mentions (``livetable/…``, ``static/…``, ``tests/…``) must
exist, and every backticked dotted name that starts with one of livetable's modules
(``engine.TableEngine``, ``server.gateway.intake.place_bet``, ``protocol.ErrorCode``…) must
resolve: the longest importable ``livetable.<prefix>``, then attributes for the rest.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import livetable

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"\b((?:livetable|static|tests)/[\w/.*-]*[\w*/])")
DOTTED = re.compile(r"`([a-z_]\w*(?:\.\w+)+)`")
TOP = {m.name for m in pkgutil.iter_modules(livetable.__path__)}


def _lines() -> list[tuple[int, str]]:
    return list(enumerate(DOC.read_text().splitlines(), start=1))


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    if parts[0] == "livetable":
        parts = parts[1:]
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module("livetable." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            found = getattr(found, attr)
        return found
    raise ModuleNotFoundError(dotted)


def test_every_path_in_architecture_md_exists() -> None:
    missing = []
    for number, line in _lines():
        for path in PATH.findall(line):
            if "*" in path:
                if not list(ROOT.glob(path)):
                    missing.append(f"line {number}: {path}")
            elif not (ROOT / path).exists():
                missing.append(f"line {number}: {path}")
    assert not missing, "docs/architecture.md names paths that do not exist:\n" + "\n".join(
        missing)


def test_every_module_name_in_architecture_md_resolves() -> None:
    checked, missing = 0, []
    for number, line in _lines():
        for dotted in DOTTED.findall(line):
            if dotted.split(".")[0] not in TOP | {"livetable"} or "/" in dotted:
                continue  # a file name (ledger.lua) or not ours
            checked += 1
            try:
                _resolve(dotted)
            except (ImportError, AttributeError) as exc:
                missing.append(f"line {number}: {dotted} ({exc})")
    assert not missing, "docs/architecture.md names what does not exist:\n" + "\n".join(
        missing)
    assert checked >= 40  # the page is checked, not skipped by a broken pattern


def test_the_check_catches_a_stale_name() -> None:
    try:
        _resolve("server.gateway.intake.no_such_function")
    except AttributeError:
        pass
    else:
        raise AssertionError("a name that does not exist resolved")


#: The layer table of docs/architecture.md: what each layer may import of ours.
MAY_IMPORT = {
    "rules": {"rules"},
    "protocol": {"protocol"},  # a package: its modules import one another
    "engine": {"engine", "rules", "protocol"},
    "store": {"store", "engine", "rules", "protocol", "accounts"},
    "bus": {"bus", "protocol", "store", "engine", "tasks"},
}


def _imports_of_ours(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if isinstance(node, ast.ImportFrom) and node.module == "livetable":
            names = ["livetable." + a.name for a in node.names]
        found |= {n.split(".")[1] for n in names if n.startswith("livetable.")}
    return found


def test_each_layer_imports_only_what_the_page_says() -> None:
    package = ROOT / "livetable"
    wrong = []
    for layer, allowed in MAY_IMPORT.items():
        files = [package / f"{layer}.py"] if (package / f"{layer}.py").exists() else sorted(
            (package / layer).rglob("*.py"))
        for path in files:
            for imported in _imports_of_ours(path) - allowed:
                wrong.append(f"{path.relative_to(ROOT)} imports livetable.{imported}")
    assert not wrong, "\n".join(wrong)
