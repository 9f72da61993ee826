"""The repository stands alone: no file sends a reader to a design document outside it.

The design, the rules as livetable reads them and the public contracts are in
docs/design.md, in the project's own words; code comments, tests and docs cite its
sections (``docs/design.md §7``). A reference to a file beside the repository (the spec it
was first written from) leaves a newcomer, a reviewer or an operator with a dead end, so
every file of the repository is searched for the forms such a reference took.

"The repository" is what git would commit: tracked files and new files that are not
ignored (so ``.git``, ``.venv``, caches and the ``*.egg-info`` that pip writes from an
older README are not searched).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

#: Starts processes: not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]

# Spelled in pieces so that this file does not match itself.
FORBIDDEN: tuple[str, ...] = (
    "../" + "shared",
    "shared/" + "DESIGN",
    "DESIGN" + ".md",
    "DESIGN" + " §",
)


def repository_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    skip = {".git", ".venv"}
    paths = {ROOT / name for name in listed if name}
    return sorted(p for p in paths
                  if p.is_file() and not skip.intersection(p.relative_to(ROOT).parts))


def references(text: str) -> list[tuple[int, str]]:
    """(line number, the forbidden form) for every reference to the outside design."""
    return [(number, form)
            for number, line in enumerate(text.splitlines(), start=1)
            for form in FORBIDDEN if form in line]


def test_the_search_finds_each_form() -> None:
    up, shared, spec_file, spec_section = FORBIDDEN
    text = f"ok\nsee {up}/{spec_file} §1\n# ({spec_section}7)\n{shared}/x\n"
    assert references(text) == [
        (2, up), (2, shared), (2, spec_file),
        (3, spec_section),
        (4, shared),
    ]
    assert references("docs/design.md §7, the design") == []


def test_no_file_refers_to_a_design_outside_the_repository() -> None:
    files = repository_files()
    assert ROOT / "docs" / "design.md" in files
    assert len(files) > 100  # the whole repository was listed, not an empty corner of it
    found = []
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [f"{path.relative_to(ROOT)}:{number}: {form!r}"
                  for number, form in references(text)]
    assert not found, ("cite docs/design.md (its sections: 'docs/design.md §N') instead of "
                       "a file outside the repository:\n" + "\n".join(found))
