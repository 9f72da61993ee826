"""docs/operator.md's quick start, run as written: its five commands, the two servers on
free ports (the only change: 9000 and 8000 become those ports, in the commands and in a
copy of the demo registry), a player launched, a bet placed over the websocket, and the
debit found in the reference operator's books by the fifth command.

``bin/setup`` is the one command not run: it made the virtualenv this test runs in (the
checkout's ``.venv`` is linked into the test's directory, as a fresh clone would have it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from liveserver import ROOT, WireClient
from procutil import free_port, stop

QUICK_START = re.compile(r"## Quick start[^\n]*\n.*?```sh\n(.*?)```", re.S)


def quick_start() -> list[str]:
    """The commands of docs/operator.md's quick start, one a line."""
    found = QUICK_START.search((ROOT / "docs/operator.md").read_text())
    assert found is not None, "docs/operator.md has no quick start"
    return [line for line in found.group(1).splitlines() if line.strip()]


def test_the_quick_start_is_five_commands_from_a_fresh_clone() -> None:
    commands = quick_start()
    assert len(commands) == 5, commands
    assert commands[0] == "bin/setup"
    assert (ROOT / "bin/setup").exists()
    assert shutil.which("curl") is not None  # commands 4 and 5 are curl's


def _wait(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    with httpx.Client(trust_env=False, timeout=1.0) as http:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if http.get(url).status_code == 200:
                    return
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], list[str]]]:
    """A directory laid out as a fresh clone after ``bin/setup``, the environment to run
    in, and the commands with their ports moved to free ones."""
    operator, livetable = free_port(), free_port()

    def ported(text: str) -> str:
        return text.replace("9000", str(operator)).replace("8000", str(livetable))

    venv = Path(sys.executable).parent.parent
    assert (venv / "bin" / "livetable").exists(), venv
    (tmp_path / ".venv").symlink_to(venv)
    demo = tmp_path / "deploy" / "operator-demo"
    shutil.copytree(ROOT / "deploy" / "operator-demo", demo)
    registry = demo / "operators.toml"
    registry.write_text(ported(registry.read_text()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVETABLE_")}
    env["LIVETABLE_DATA_DIR"] = str(tmp_path / "data")  # not the checkout's ./data
    yield tmp_path, env, [ported(command) for command in quick_start()]


async def _bet(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    token = url.split("#token=", 1)[1].split("&", 1)[0]
    ws = url.split("/table.html", 1)[0].replace("http://", "ws://") + "/ws"
    client = await WireClient.connect(ws, "quick-start")
    try:
        welcome = await client.hello(token)
        opened = await client.expect("round_opened", timeout=60)
        answer = await client.bet("qs-1", opened["round_id"], "P1", 1000)  # ฿10
        return welcome, answer
    finally:
        await client.close()


def test_the_quick_start_puts_a_launched_player_at_a_table_betting_at_the_operator(
        checkout: tuple[Path, dict[str, str], list[str]]) -> None:
    cwd, env, commands = checkout
    servers: list[subprocess.Popen[bytes]] = []
    outputs: list[str] = []
    try:
        for n, command in enumerate(commands[1:], start=2):
            if command.endswith(" &"):  # a server, left running
                log = cwd / f"command-{n}.log"
                with log.open("wb") as out:
                    process = subprocess.Popen(shlex.split(command[:-2]), cwd=cwd, env=env,
                                               stdout=out, stderr=subprocess.STDOUT)
                servers.append(process)
                port = re.search(r"--port (\d+)", command)
                assert port is not None, command
                probe = "/state" if "livetable operator-demo" in command else "/readyz"
                _wait(f"http://127.0.0.1:{port.group(1)}{probe}", process, log)
                continue
            done = subprocess.run(shlex.split(command), cwd=cwd, env=env, check=True,
                                  capture_output=True, text=True, timeout=60)
            outputs.append(done.stdout)
            if len(outputs) == 1:  # the launch: open its url, bet
                launched = json.loads(done.stdout)
                welcome, answer = asyncio.run(_bet(launched["url"]))
        books = json.loads(outputs[-1])
    finally:
        for process in reversed(servers):
            stop(process)
    player = welcome["player"]
    assert (player["id"], player["currency"], player["balance"]) == ("acme~p-1", "THB",
                                                                     100_000)
    assert player["chips"] == [1000, 2500, 5000, 10000, 50000]  # acme's THB chips
    assert answer["type"] == "bet_accepted", answer
    [debit] = [call for call in books["operators"]["acme"]["THB"]["applied"].values()
               if call["method"] == "debit"]
    assert (debit["player_id"], debit["currency"], debit["amount"]) == ("p-1", "THB", 2000)
    assert [b["bet_id"] for b in debit["bets"]] == ["qs-1"]
    assert "bet7" not in books["operators"] and books["forged"] == {}
