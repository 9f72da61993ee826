"""The ``livetable`` command is a package of small modules that import one way.

Once every subcommand lived in one 920-line ``livetable/cli.py``. Now each
concern is a module of ``livetable/cli/``; they share ``livetable/cli/arguments.py`` and
import neither the package (``__init__``, which assembles the parser) nor one another, so no
cycle can form — but for the two programs a command runs, the dealer's terminal console
(``cli/terminal.py``, run by ``cli/console.py``) and the local media server
(``cli/media.py``, run by ``cli/stream.py``), which import nothing of the package. Imports
inside functions and under ``TYPE_CHECKING`` count. The house's sizes are held here too: no
module of the package over 500 lines, no function over 60.
"""

from __future__ import annotations

import ast
from pathlib import Path

from package_imports import package_imports

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "livetable/cli"
PACKAGE = "livetable.cli"
SHARED = f"{PACKAGE}.arguments"
#: What a command runs, each imported by its one command: (program, command).
PROGRAMS = {f"{PACKAGE}.terminal": f"{PACKAGE}.console", f"{PACKAGE}.media": f"{PACKAGE}.stream"}


def _name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def _imports(path: Path) -> set[str]:
    return package_imports(path, PACKAGE, CLI)


def test_the_command_modules_import_only_the_shared_arguments() -> None:
    graph = {_name(path): _imports(path) for path in CLI.glob("*.py")
             if path.stem != "__main__"}
    assert len(graph) >= 9  # the glob found the package
    def allowed(module: str) -> set[str]:
        if module in PROGRAMS:
            return set()
        return {SHARED} | {program for program, command in PROGRAMS.items() if command == module}
    wrong = {module: sorted(imported - allowed(module)) for module, imported in graph.items()
             if module != PACKAGE and imported - allowed(module)}
    assert wrong == {}, f"command modules import more than {SHARED}: {wrong}"
    assert graph[SHARED] == set()
    assert PACKAGE not in graph[PACKAGE]


def test_no_module_over_500_lines_and_no_function_over_60() -> None:
    too_long = []
    for path in sorted(CLI.glob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > 500:
            too_long.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    too_long.append(f"{path.name}: {node.name} is {lines} lines")
    assert too_long == [], "\n".join(too_long)


def test_every_module_opens_with_its_reasoning() -> None:
    missing = [path.name for path in sorted(CLI.glob("*.py"))
               if not ast.get_docstring(ast.parse(path.read_text()))]
    assert missing == []
