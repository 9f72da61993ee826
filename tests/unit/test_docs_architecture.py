"""docs/architecture.md names real files and real names, so that it cannot go stale silently.

Every path of the repository it mentions (``livetable/…``, ``static/…``, ``tests/…``) must
exist, and every backticked dotted name that starts with one of livetable's modules
(``engine.TableEngine``, ``server.gateway.intake.place_bet``, ``protocol.ErrorCode``…) must
resolve: the longest importable ``livetable.<prefix>``, then attributes for the rest. And
its layer table holds every package and top-level module, each importing only the rows
below it that the table names.
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


#: The layer table's header in docs/architecture.md; its rows go from the bottom layer up.
LAYER_HEADER = "| layer | package | what it is | imports of ours |"


def _layer_table() -> dict[str, set[str]]:
    """Each row of the layer table: its layer and what it may import of ours (itself
    included), in the table's order. A name in the last column must be a row above."""
    lines = DOC.read_text().splitlines()
    start = lines.index(LAYER_HEADER) + 2
    table: dict[str, set[str]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        layer, said = cells[0], re.sub(r"\([^)]*\)", "", cells[-1])
        if said == "nothing":
            allowed: set[str] = set()
        elif said == "all of the above":
            allowed = set(table)
        else:
            allowed = {name.strip() for name in said.split(",")}
        above = allowed - set(table)
        assert not above, f"the layer {layer} may import {above}: not a row above it"
        table[layer] = allowed | {layer}
    return table


def _imports_of_ours(path: Path) -> set[str]:
    """The top-level packages and modules of livetable that ``path`` imports (a relative
    import resolved from where ``path`` is)."""
    here = ["livetable", *path.relative_to(ROOT / "livetable").parent.parts]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            names = ([f"{module}.{a.name}" for a in node.names] if module == "livetable"
                     else [module])
        found |= {n.split(".")[1] for n in names if n.startswith("livetable.")}
    return found


def _ours() -> dict[str, list[Path]]:
    """Every top-level package and module of livetable, with its files."""
    package = ROOT / "livetable"
    return {name: ([package / f"{name}.py"] if (package / f"{name}.py").exists()
                   else sorted((package / name).rglob("*.py")))
            for name in sorted(TOP)}


def _upward(table: dict[str, set[str]]) -> list[str]:
    wrong = []
    for layer, files in _ours().items():
        for path in files:
            for imported in _imports_of_ours(path) - table.get(layer, set()):
                wrong.append(f"{path.relative_to(ROOT)} imports livetable.{imported}")
    return wrong


def test_the_layer_table_has_a_row_for_every_package_and_module() -> None:
    table = _layer_table()
    assert set(table) == set(_ours()), (
        f"without a row: {sorted(set(_ours()) - set(table))}; "
        f"a row of nothing: {sorted(set(table) - set(_ours()))}")


def test_each_layer_imports_only_what_the_page_says() -> None:
    wrong = _upward(_layer_table())
    assert not wrong, "\n".join(wrong)


def test_the_layer_check_catches_an_import_the_page_does_not_allow() -> None:
    table = _layer_table()
    table["operator"] = table["operator"] - {"metrics"}
    table["store"] = table["store"] - {"config"}
    wrong = _upward(table)
    assert "livetable/operator/seamless.py imports livetable.metrics" in wrong
    assert "livetable/store/sealing.py imports livetable.config" in wrong
