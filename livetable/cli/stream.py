"""``livetable test-stream``: a table's live video, before there is a camera.

Why here and not in deploy/: the media server of deploy/media/ and a test card with a
running clock (:mod:`livetable.cli.media`, through ffmpeg) let anyone see the video path work —
the media server, the HLS playlist, the page's player — on their own machine, with one
command. This module checks the flags, starts the local media server unless ``--publish``
names one, and stops both cleanly on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from livetable.cli.arguments import Commands, UsageError


def cmd_test_stream(args: argparse.Namespace) -> int:
    """The media server of deploy/media/ run locally, and a test card pushed into it."""
    import signal
    import subprocess

    from livetable.cli.media import MediaError, MediaServer, card_command, require

    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size is WIDTHxHEIGHT, got {args.size!r}") from None
    if width < 640 or height < 180:
        raise UsageError("--size must be at least 640x180 (the clock strip is 640 wide)")
    if not args.table.replace("-", "").replace("_", "").isalnum():
        raise UsageError(f"--table {args.table!r}: letters, digits, '-' and '_' only")
    server: MediaServer | None = None
    try:
        require("ffmpeg")
        if args.publish:
            target = args.publish
        else:
            server = MediaServer(args.dir, args.rtmp_port, args.http_port).start()
            target = server.publish_url(args.table)
            url = server.playlist_url(args.table, "localhost")
            print(f"livetable test-stream: HLS at {url}\n"
                  f"  serve it with: livetable serve --stream {args.table}={url}", flush=True)
    except MediaError as exc:
        raise UsageError(str(exc)) from None
    command = card_command(["-f", "flv", target], width=width, height=height,
                                label=f"livetable {args.table}",
                                seconds=args.seconds or None)
    print(f"livetable test-stream: test card → {target} (Ctrl-C stops)", flush=True)
    card = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    stop = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: card.terminate())
    try:
        code = card.wait()
    except KeyboardInterrupt:
        card.terminate()
        code = card.wait()
    finally:
        signal.signal(signal.SIGTERM, stop)
        if server is not None:
            server.stop()
    return 0 if code in (0, 255, -signal.SIGTERM) else 1


def add_test_stream(commands: Commands) -> None:
    p = commands.add_parser(
        "test-stream", help="a test card with a running clock, through ffmpeg into the "
                            "media server (started here unless --publish)")
    p.add_argument("--table", default="t1", help="stream name = table id (default t1)")
    p.add_argument("--publish", metavar="RTMP_URL",
                   help="push to this media server (rtmp://HOST:1935/live/TABLE) instead of "
                        "starting one")
    p.add_argument("--dir", type=Path, default=Path("data/media"),
                   help="the local media server's directory (default data/media)")
    p.add_argument("--rtmp-port", dest="rtmp_port", type=int, default=1935)
    p.add_argument("--http-port", dest="http_port", type=int, default=8090)
    p.add_argument("--size", default="960x540", help="picture size (default 960x540)")
    p.add_argument("--seconds", type=float, default=0, help="stop after this long (default: "
                                                             "run until stopped)")
    p.set_defaults(handler=cmd_test_stream)
