"""The house's measures, held by tests so that they stay true.

A newcomer reads a module top to bottom and a function on one screen, follows an import
without coming back to where they started, and finds the Redis scripts in files. So:
no module over 500 lines, no function over 60, no import cycle among livetable's modules
(imports inside functions count: they run, and they hide a cycle instead of removing it),
and no ``redis.call`` in Python (a script belongs in a ``.lua`` file: ``livetable/host/lua/``).

Each test names what breaks the measure and where, so a failure says what to split or move.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import livetable

PACKAGE = Path(livetable.__file__).parent
ROOT = PACKAGE.parent
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60

def _modules() -> Iterator[tuple[str, Path]]:
    """Every module of the package: its path from the repository's root, and the file."""
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path


def _name_of(rel: str) -> str:
    """``livetable/store/postgres/__init__.py`` → ``livetable.store.postgres``."""
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_is_over_500_lines() -> None:
    long = [f"{rel}: {n} lines" for rel, path in _modules()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, f"split these modules by concern (at most {MAX_MODULE_LINES} lines):\n" \
        + "\n".join(long)


def test_no_browser_module_is_over_500_lines() -> None:
    """The pages' ES modules (``static/js/*.js``) are held to the same measure; the
    vendored hls.js (``static/vendor/``) is not ours, and the dictionaries
    (``static/js/i18n/``) are data, one line a string."""
    modules = sorted((ROOT / "static/js").glob("*.js"))
    assert len(modules) > 20, modules  # the folder is where this test looks for it
    long = [f"{path.relative_to(ROOT).as_posix()}: {n} lines" for path in modules
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, f"split these modules by concern (at most {MAX_MODULE_LINES} lines):\n" \
        + "\n".join(long)


def test_no_function_is_over_60_lines() -> None:
    long = []
    for rel, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_no_redis_script_is_written_in_python() -> None:
    inline = [f"{rel}:{no}" for rel, path in _modules()
              for no, line in enumerate(path.read_text().splitlines(), start=1)
              if "redis.call" in line]
    assert not inline, "Lua in Python strings (move it to livetable/host/lua/):\n" \
        + "\n".join(inline)


# --- import cycles -----------------------------------------------------------------------


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:``. They are left out of the
    graph: such an import never runs (``TYPE_CHECKING`` is False at run time), so it
    creates no runtime cycle; it only lets mypy see a name used in annotations."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def _targets(node: ast.Import | ast.ImportFrom, here: str, is_package: bool,
             known: set[str]) -> list[str]:
    """The modules of ours an import statement runs: ``from a.b import c`` runs ``a.b.c``
    when that is a module, else ``a.b`` (where ``c`` is a name)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    base = node.module or ""
    if node.level:  # relative: from the package of ``here``
        package = here.split(".") if is_package else here.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join([*package, base] if base else package)
    found = []
    for alias in node.names:
        if f"{base}.{alias.name}" in known:
            found.append(f"{base}.{alias.name}")
        elif base in known:
            found.append(base)
    return found


def import_graph() -> dict[str, dict[str, list[str]]]:
    """module → {module it imports → the import lines that do it, ``file:line: source``}."""
    files = {_name_of(rel): (rel, path) for rel, path in _modules()}
    known = set(files)
    graph: dict[str, dict[str, list[str]]] = {name: {} for name in files}
    for name, (rel, path) in files.items():
        source = path.read_text()
        tree = ast.parse(source)
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skipped:
                continue
            for target in _targets(node, name, path.name == "__init__.py", known):
                if target != name:
                    line = ast.get_source_segment(source, node) or ""
                    graph[name].setdefault(target, []).append(
                        f"{rel}:{node.lineno}: {' '.join(line.split())}")
    return graph


def strongly_connected(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module: each is a set of
    modules that import one another, around one cycle or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _describe(component: list[str], graph: dict[str, dict[str, list[str]]]) -> str:
    inside = set(component)
    lines = [f"modules importing one another: {', '.join(component)}"]
    for module in component:
        for target, where in sorted(graph[module].items()):
            if target in inside:
                lines += [f"  {module} -> {target}", *(f"    {w}" for w in where)]
    return "\n".join(lines)


def test_no_import_cycle_among_livetables_modules() -> None:
    graph = import_graph()
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles (move the shared piece down, or invert the " \
        "dependency):\n" + "\n".join(_describe(c, graph) for c in cycles)


def test_the_cycle_finder_finds_a_cycle_through_a_function_and_skips_type_checking() -> None:
    """The finder itself, on modules written here: a cycle closed by an import inside a
    function is one; one closed only under ``if TYPE_CHECKING`` is not."""
    graph = {"a": {"b": ["a.py:1"]}, "b": {"a": ["b.py:9 (in a function)"]},
             "c": {"a": ["c.py:1"]}}
    assert strongly_connected(graph) == [["a", "b"]]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from livetable.config import Settings\n"
                     "def f():\n    from livetable import clock\n")
    skipped = _type_checking_only(tree)
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [id(n) in skipped for n in imports] == [False, True, False]
