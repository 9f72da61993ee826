"""The gateway is composed of objects that do not know it: no part imports the gateway
package back, and its modules import one another in one direction only.

Before the gateway became objects, every part imported ``Gateway`` for the type of ``self`` (its
functions were
bound onto the class), so the eight modules formed one import cycle and a call could be
followed only by knowing which file bound which name. Imports inside functions and under
``TYPE_CHECKING`` count: they are what a reader follows too.
"""

from __future__ import annotations

from pathlib import Path

from package_imports import package_imports

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "livetable/server/gateway"
PACKAGE = "livetable.server.gateway"


def _imports(path: Path) -> set[str]:
    return package_imports(path, PACKAGE, GATEWAY)


def _graph() -> dict[str, set[str]]:
    """Each gateway module's imports of the others; the package (``__init__``) is a node too."""
    return {PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}": _imports(path)
            for path in GATEWAY.glob("*.py")}


def test_no_part_imports_the_gateway_back() -> None:
    back = sorted(part for part, imported in _graph().items()
                  if part != PACKAGE and PACKAGE in imported)
    assert back == [], f"these import livetable.server.gateway (the Gateway) back: {back}"


def test_the_parts_import_one_another_without_a_cycle() -> None:
    graph = _graph()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            cycle = " -> ".join((*path[path.index(module):], module))
            raise AssertionError(f"an import cycle: {cycle}")
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())
    assert len(done) >= 9  # every part was walked: the glob found them
