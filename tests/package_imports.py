"""Which modules of one package a module of it imports — for the tests that hold a
package's parts to one direction (tests/unit/test_gateway_parts.py, test_cli_parts.py).

Every import counts, inside functions too: a part that imports its package back only when
called is still a part that needs the whole to run.
"""

from __future__ import annotations

import ast
from pathlib import Path


def package_imports(path: Path, package: str, directory: Path) -> set[str]:
    """The modules of ``package`` (kept in ``directory``), or the package itself, that the
    module at ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from . import x / from .x import y
                module = ".".join([package, module] if module else [package])
            if module == package:
                found |= {f"{package}.{a.name}" if (directory / f"{a.name}.py").exists()
                          else package for a in node.names}
            elif module.startswith(package + "."):
                found.add(module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(package)}
    return found
