"""Every documented command runs on what ``bin/setup`` installs, and on nothing more.

``bin/setup`` installs the service's lock (requirements.txt); the test suite runs in the
dev environment (``bin/setup --test``: requirements-dev.txt), which holds more. A command
that imports a package of the dev extras (``livetable operator-demo`` imported uvloop) then
passes every other test and fails on a fresh clone. Here a copy of the checkout gets its own
``.venv`` from ``bin/setup`` alone (pip's cache makes it a minute, not a download), and in
it:

- every subcommand of ``livetable`` answers ``--help``, and every ``livetable X`` and
  ``bin/X`` the README and docs/*.md name exists;
- every package any module of ``livetable`` imports — at the top or inside a function, where
  ``--help`` never reaches — is installed (an import guarded by ``except ImportError`` is
  optional by design);
- ``livetable operator-demo``, the operator quick start's server, really starts.

Slow (a virtualenv made from scratch): marked ``slow``, in the full suite, not a fast tier.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from procutil import free_port, stop

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the checkout's tracked files with a .venv made by bin/setup alone."""
    copy = tmp_path_factory.mktemp("fresh-clone")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if not source.is_file():
            continue  # deleted in the work tree
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(ROOT)))
    done = subprocess.run(["bin/setup"], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (copy / ".venv/.livetable-installed-dev").exists()
    yield copy


def run(copy: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(copy / ".venv/bin/livetable"), *args], cwd=copy,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "LIVETABLE_DATA_DIR": str(copy / "data")})


def subcommands(copy: Path) -> set[str]:
    done = run(copy, "--help")
    assert done.returncode == 0, done.stderr
    # argparse lists them four spaces in, under "positional arguments"
    return set(re.findall(r"(?m)^    ([a-z][a-z-]+)(?:\s|$)", done.stdout))


def code(text: str) -> list[str]:
    """The command text of a Markdown page: its fenced blocks and inline code spans."""
    fenced = re.findall(r"(?ms)^```[^\n]*\n(.*?)^```", text)
    prose = re.sub(r"(?ms)^```[^\n]*\n.*?^```", "", text)
    return fenced + re.findall(r"`([^`\n]+)`", prose)


def documented(pattern: str) -> set[str]:
    return {m for doc in DOCS for block in code(doc.read_text())
            for m in re.findall(pattern, block)}


def test_every_subcommand_answers_help_and_every_documented_one_exists(fresh: Path) -> None:
    commands = subcommands(fresh)
    assert {"serve", "operator-demo", "token"} <= commands
    for name in sorted(commands):
        done = run(fresh, name, "--help")
        assert done.returncode == 0, (name, done.stderr[-2000:])
    # (redis-cli's "--user livetable ping" names a Redis user, not a command)
    named = documented(r"(?m)(?:^|[\s;&|$/])(?<!--user )livetable ([a-z][a-z-]+)")
    assert named, "the docs name no livetable command"
    assert named <= commands, named - commands
    for script in documented(r"\bbin/([a-z][a-z-]+)\b") - {"livetable", "python", "pip",
                                                           "pytest", "ruff", "mypy", "uv"}:
        assert os.access(fresh / "bin" / script, os.X_OK), script


def imported_packages(root: Path) -> set[str]:
    """Top-level names of every package imported anywhere in ``root`` (not optional ones)."""
    names: set[str] = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        optional: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError",
                                                                   "ModuleNotFoundError")
                    for h in node.handlers):
                optional.update(id(n) for stmt in node.body for n in ast.walk(stmt))
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                optional.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"livetable", "__future__"}


def test_every_package_livetable_imports_is_installed(fresh: Path) -> None:
    packages = sorted(imported_packages(fresh / "livetable"))
    assert "msgspec" in packages and "uvicorn" in packages
    check = ("import importlib.util, sys; missing = [n for n in sys.argv[1:] "
             "if importlib.util.find_spec(n) is None]; print(' '.join(missing))")
    done = subprocess.run([str(fresh / ".venv/bin/python"), "-c", check, *packages],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == [], f"imported but not installed by bin/setup: {done.stdout}"


def test_operator_demo_starts_on_the_service_lock(fresh: Path) -> None:
    port = free_port()
    log = fresh / "operator-demo.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(fresh / ".venv/bin/livetable"), "operator-demo",
                                 "--port", str(port), "--secret", "fresh-clone-secret"],
                                cwd=fresh, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.2)
        assert "wallet at" in log.read_text()
    finally:
        stop(proc)
