"""What every test that runs a server in a subprocess needs: a free port, and a way to stop
the process — as in a crash (SIGKILL) or gracefully (SIGTERM, then SIGKILL if it lingers)."""

from __future__ import annotations

import signal
import socket
import subprocess


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kill(process: subprocess.Popen[bytes] | subprocess.Popen[str] | None) -> None:
    """kill -9: no graceful shutdown, nothing flushed on the way out."""
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """A clean shutdown (SIGTERM); SIGKILL if it takes more than 10 s."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill(process)
