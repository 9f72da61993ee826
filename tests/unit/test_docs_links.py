"""Every link between the repository's markdown pages leads somewhere: the file exists, and
the ``#anchor`` (a page's section) is a heading of that page, as GitHub names it (lower
case, punctuation dropped, spaces to hyphens, ``-1``, ``-2``… for a repeated heading) or an
``<a id=…>`` on it. So a
section moved to another page (docs/benchmarks/ took the dated runs of docs/benchmarks.md)
cannot leave a link behind."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("static/**/*.md"),
        *ROOT.glob("tests/**/*.md"),
        *ROOT.glob("deploy/**/*.md"),
    ]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$")
HTML_ANCHOR = re.compile(r"<a (?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _lines(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside code fences."""
    found, fenced = [], False
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            found.append((number, line))
    return found


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    names = set()
    for _, line in _lines(page):
        names.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            names.add(base if count == 0 else f"{base}-{count}")
    return names


def broken(page: Path) -> list[str]:
    wrong = []
    for number, line in _lines(page):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}:{number}: {target}"
            if not file.exists():
                wrong.append(f"{where} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                wrong.append(f"{where} (no such section)")
    return wrong


def test_every_link_between_pages_resolves() -> None:
    wrong = [line for page in PAGES for line in broken(page)]
    assert not wrong, "links that lead nowhere:\n" + "\n".join(wrong)
    assert len(PAGES) > 10


def test_the_check_catches_a_missing_section_and_a_missing_file(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A section, with `code`\n")
    page.write_text(
        "[ok](other.md#a-section-with-code) [gone](other.md#gone) [no](none.md)\n"
        "```\n[in a fence](nowhere.md)\n```\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = broken(page)
    finally:
        ROOT = saved
    assert found == [
        "page.md:1: other.md#gone (no such section)",
        "page.md:1: none.md (no such file)",
    ]
