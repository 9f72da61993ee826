"""``livetable dealer`` against a real server: what a dealer at a terminal sees.

Readable lines, not JSON; no line for the heartbeats a quiet table sends every interval;
``help`` lists the commands; the token comes from the environment (or a prompt), never the
command line, where ``ps`` would show it to every user of the machine.
"""

from __future__ import annotations

import subprocess
import time

from liveserver import TABLE, LiveServer, livetable_command

from livetable.cli.terminal import HELP, TOKEN_VARIABLE


def test_the_terminal_console_reads_well_and_keeps_its_token_off_the_command_line(
        manual_server: LiveServer) -> None:
    token = manual_server.dealer_token()
    env = dict(manual_server.env, **{TOKEN_VARIABLE: token})
    console = subprocess.Popen(
        [*livetable_command(), "dealer", "--url", manual_server.http, "--table", TABLE],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        assert console.stdin is not None
        with open(f"/proc/{console.pid}/cmdline", "rb") as cmdline:
            assert token.encode() not in cmdline.read()  # what `ps` shows
        console.stdin.write("help\nping\nZZ\n")
        console.stdin.flush()
        time.sleep(3.5)  # a quiet manual table: heartbeats every 1.5 s meanwhile
        out, _ = console.communicate("", timeout=20)
    finally:
        if console.poll() is None:
            console.kill()
    lines = out.splitlines()
    assert any(line.startswith(f"connected to {TABLE} (manual)") for line in lines), out
    assert HELP.splitlines()[0] in lines and "pong" in lines, out
    assert any(line.startswith("ERROR") and "help lists them" in line for line in lines), out
    assert not any("heartbeat" in line or "presence" in line for line in lines), out
    assert not any("{" in line for line in lines), out  # words, not JSON


def test_the_terminal_console_without_a_token_asks_and_says_why_it_stops(
        manual_server: LiveServer) -> None:
    env = {k: v for k, v in manual_server.env.items() if k != TOKEN_VARIABLE}
    done = subprocess.run(
        [*livetable_command(), "dealer", "--url", manual_server.http, "--table", TABLE],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert TOKEN_VARIABLE in done.stderr or "token" in done.stderr, done.stderr
    helped = subprocess.run([*livetable_command(), "dealer", "--help"], env=env,
                            capture_output=True, text=True, timeout=30)
    assert "--token" not in helped.stdout and TOKEN_VARIABLE in helped.stdout
