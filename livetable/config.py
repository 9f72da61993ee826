"""Settings of a livetable process, from flags and ``LIVETABLE_*`` environment variables.

Every setting has a default that makes ``livetable serve`` (no flags) a working embedded
table; docs/operations.md lists them all. Flags win over the environment.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path


def _env(name: str, default: str) -> str:
    return os.environ.get(f"LIVETABLE_{name}", default)


class StreamError(ValueError):
    """A ``--stream``/``LIVETABLE_STREAMS`` entry that cannot be used, and why."""


def parse_stream(entry: str) -> tuple[str, str]:
    """``TABLE=URL`` → ``(table, url)``. The URL is where browsers fetch the table's HLS
    playlist: an absolute http(s) URL, or a path on the pages' own origin (``/live/t1/…``,
    what the nginx in deploy/ serves)."""
    table, sep, url = entry.strip().partition("=")
    table, url = table.strip(), url.strip()
    if not sep or not table or not url:
        raise StreamError(f"a stream is TABLE=URL, got {entry!r}")
    if any(c.isspace() or c in "\"'<>" for c in url):
        raise StreamError(f"stream URL for {table!r} has a space or quote: {url!r}")
    if not (url.startswith(("http://", "https://")) or
            (url.startswith("/") and not url.startswith("//"))):
        raise StreamError(f"stream URL for {table!r} must start with http://, https:// or /"
                          f" (a path on the pages' origin), got {url!r}")
    return table, url


def parse_streams(entries: list[str]) -> dict[str, str]:
    """Every ``TABLE=URL`` of ``entries`` (blank entries are skipped)."""
    streams: dict[str, str] = {}
    for entry in entries:
        if entry.strip():
            table, url = parse_stream(entry)
            if table in streams and streams[table] != url:
                raise StreamError(f"two streams for table {table!r}: "
                                  f"{streams[table]!r} and {url!r}")
            streams[table] = url
    return streams


@dataclass
class Settings:
    host: str = field(default_factory=lambda: _env("HOST", "127.0.0.1"))
    port: int = field(default_factory=lambda: int(_env("PORT", "8000")))
    data_dir: Path = field(default_factory=lambda: Path(_env("DATA_DIR", "data")))
    db: Path | None = field(default_factory=lambda: Path(v) if (v := _env("DB", "")) else None)
    redis_url: str | None = field(default_factory=lambda: _env("REDIS_URL", "") or None)
    #: Optional: a Redis Cluster node for pub/sub only (sharded SPUBLISH/SSUBSCRIBE); the
    #: ledger, leases and commands stay on the primary at redis_url (see store/redis.py).
    redis_pubsub_cluster: str | None = field(
        default_factory=lambda: _env("REDIS_PUBSUB_CLUSTER", "") or None)
    tables: int = field(default_factory=lambda: int(_env("TABLES", "1")))
    table_ids: list[str] | None = None
    betting_seconds: float = field(default_factory=lambda: float(_env("BETTING_SECONDS", "15")))
    reveal_interval: float = field(default_factory=lambda: float(_env("REVEAL_INTERVAL", "1.5")))
    deal_interval: float = field(default_factory=lambda: float(_env("DEAL_INTERVAL", "0.15")))
    between_rounds: float = field(default_factory=lambda: float(_env("BETWEEN_ROUNDS", "4")))
    #: Manual mode: seconds after a round ends before the next opens by itself; 0 = never
    #: (the dealer opens every round).
    next_round_after: float = field(
        default_factory=lambda: float(_env("NEXT_ROUND_AFTER", "0")))
    #: Seconds after closes_at before betting closes for bets that arrived in time.
    close_grace: float = field(default_factory=lambda: float(_env("CLOSE_GRACE", "1")))
    mode: str = field(default_factory=lambda: _env("MODE", "auto"))
    #: ``serve``/``gateway``/``engine``: seconds between full garbage collections, run when
    #: no table is busy (server/gcpolicy.py); 0 leaves CPython's own schedule.
    gc_interval: float = field(default_factory=lambda: float(_env("GC_INTERVAL", "60")))
    demo: bool = field(
        default_factory=lambda: _env("DEMO", "1").lower() not in ("0", "false", "no", "off"))
    guest_balance: int = field(default_factory=lambda: int(_env("GUEST_BALANCE", "10000")))
    player_balance: int = field(default_factory=lambda: int(_env("PLAYER_BALANCE", "0")))
    #: New demo guests per client address per minute (POST /api/guest); 0 = no limit.
    guests_per_minute: float = field(
        default_factory=lambda: float(_env("GUESTS_PER_MINUTE", "30")))
    secret: bytes | None = field(
        default_factory=lambda: v.encode() if (v := _env("SECRET", "")) else None)
    allowed_origins: list[str] = field(
        default_factory=lambda: [o for o in _env("ALLOWED_ORIGINS", "").split(",") if o])
    event_log_size: int = field(default_factory=lambda: int(_env("EVENT_LOG_SIZE", "5000")))
    send_queue: int = field(default_factory=lambda: int(_env("SEND_QUEUE", "256")))
    #: Compress HTTP responses (brotli or gzip; never websocket frames).
    compress: bool = field(
        default_factory=lambda: _env("COMPRESS", "1").lower() not in ("0", "false", "no", "off"))
    #: Seconds of quiet on a table after which its connections get a heartbeat frame (0: none).
    heartbeat: float = field(default_factory=lambda: float(_env("HEARTBEAT", "1.5")))
    hello_timeout: float = field(default_factory=lambda: float(_env("HELLO_TIMEOUT", "5")))
    max_frame: int = field(default_factory=lambda: int(_env("MAX_FRAME", "4096")))
    frames_per_second: float = field(default_factory=lambda: float(_env("FRAMES_PER_SECOND", "20")))
    player_frames_per_second: float = field(
        default_factory=lambda: float(_env("PLAYER_FRAMES_PER_SECOND", "40")))
    limit_min: int = field(default_factory=lambda: int(_env("LIMIT_MIN", "10")))
    limit_max: int = field(default_factory=lambda: int(_env("LIMIT_MAX", "5000")))
    pair_min: int = field(default_factory=lambda: int(_env("PAIR_MIN", "10")))
    pair_max: int = field(default_factory=lambda: int(_env("PAIR_MAX", "1000")))
    round_max: int = field(default_factory=lambda: int(_env("ROUND_MAX", "20000")))
    token_ttl: int = field(default_factory=lambda: int(_env("TOKEN_TTL", str(30 * 24 * 3600))))
    #: Addresses (or networks) of the reverse proxies whose X-Forwarded-For is believed;
    #: none by default, so no client can claim another address.
    trusted_proxies: list[str] = field(
        default_factory=lambda: [a.strip() for a in _env("TRUSTED_PROXIES", "").split(",")
                                 if a.strip()])
    #: Seconds a connection has to complete a request's head (request line and headers).
    request_head_timeout: float = field(
        default_factory=lambda: float(_env("REQUEST_HEAD_TIMEOUT", "10")))
    #: Open connections allowed from one client address (trusted proxies exempt); 0 = no cap.
    connections_per_address: int = field(
        default_factory=lambda: int(_env("CONNECTIONS_PER_ADDRESS", "256")))
    #: HTTP API requests per client address (``limits`` notation), and Bet Record reads.
    api_rate: str = field(default_factory=lambda: _env("API_RATE", "50/second"))
    bet_record_rate: str = field(default_factory=lambda: _env("BET_RECORD_RATE", "10/second"))
    #: Frames refused for rate in a row before a connection is closed (4029).
    rate_strikes: int = field(default_factory=lambda: int(_env("RATE_STRIKES", "50")))
    #: Seconds between two ledger audits by an engine (0 = never); a failed audit holds the
    #: tables and turns /readyz red.
    audit_interval: float = field(default_factory=lambda: float(_env("AUDIT_INTERVAL", "60")))
    #: The identity the store must carry (``livetable`` prints it at start); empty = take
    #: the store's own. Pinning it keeps a process off a wiped or different store.
    store_id: str = field(default_factory=lambda: _env("STORE_ID", ""))
    #: Seconds a closing websocket has to finish its close before its socket is aborted.
    close_timeout: float = field(default_factory=lambda: float(_env("CLOSE_TIMEOUT", "3")))
    #: The key that seals engine states at rest (store/sealing.py): LIVETABLE_SHOE_KEY, or
    #: the file LIVETABLE_SHOE_KEY_FILE; else the signing secret. Never in the data directory.
    shoe_key: bytes | None = field(
        default_factory=lambda: v.encode() if (v := _env("SHOE_KEY", "")) else None)
    shoe_key_file: Path | None = field(
        default_factory=lambda: Path(v) if (v := _env("SHOE_KEY_FILE", "")) else None)
    #: Where load_secret found (or made) the secret, when it came from a file.
    secret_path: Path | None = field(default=None, init=False)
    #: Table id → the URL of its live video's HLS playlist (``t1=URL,t2=URL``); a table
    #: without one has ``stream: null`` in its snapshot and shows the drawn table only.
    streams: dict[str, str] = field(
        default_factory=lambda: parse_streams(_env("STREAMS", "").split(",")))
    #: Who holds the players' money (DESIGN §5): ``internal`` (this ledger: demo guests,
    #: deposits) or ``seamless`` (the operator's wallet at ``wallet_url``, called per bet
    #: slip and per settled round; livetable holds no balance of its own for a player).
    wallet: str = field(default_factory=lambda: _env("WALLET", "internal"))
    wallet_url: str | None = field(default_factory=lambda: _env("WALLET_URL", "") or None)
    #: Signs every wallet call (X-Livetable-Signature); required in seamless mode.
    wallet_secret: bytes | None = field(
        default_factory=lambda: v.encode() if (v := _env("WALLET_SECRET", "")) else None)
    #: Seconds one wallet call may take (a debit gets less if the betting window closes
    #: sooner); past it the outcome is unknown and the debit is rolled back.
    wallet_timeout: float = field(default_factory=lambda: float(_env("WALLET_TIMEOUT", "3")))
    #: Keep-alive HTTP connections to the wallet, at most (per process): three quarters
    #: for debits and balances, a quarter for the outbox.
    wallet_connections: int = field(
        default_factory=lambda: int(_env("WALLET_CONNECTIONS", "64")))
    #: The longest wait between two deliveries of a credit or rollback (back-off cap, s).
    wallet_retry_max: float = field(
        default_factory=lambda: float(_env("WALLET_RETRY_MAX", "30")))
    #: Checks the operator's signature on POST /api/operator/sessions and the wallet
    #: report; unset = those endpoints answer 404 (no operator integration).
    operator_secret: bytes | None = field(
        default_factory=lambda: v.encode() if (v := _env("OPERATOR_SECRET", "")) else None)
    #: Seconds a launch session's token lives.
    session_ttl: int = field(default_factory=lambda: int(_env("SESSION_TTL", str(8 * 3600))))
    #: The address players reach this service at (launch URLs start with it); empty = the
    #: address the operator's request came to.
    public_url: str = field(default_factory=lambda: _env("PUBLIC_URL", ""))

    @property
    def db_path(self) -> Path:
        return self.db if self.db is not None else self.data_dir / "livetable.sqlite3"

    @property
    def table_names(self) -> list[str]:
        return self.table_ids or [f"t{i}" for i in range(1, self.tables + 1)]

    @property
    def seamless(self) -> bool:
        return self.wallet == "seamless"

    def check_wallet(self) -> None:
        """ValueError unless the wallet settings make sense together."""
        if self.wallet not in ("internal", "seamless"):
            raise ValueError(f"--wallet must be internal or seamless, not {self.wallet!r}")
        if self.seamless and not (self.wallet_url and self.wallet_secret):
            raise ValueError("--wallet seamless needs --wallet-url URL and "
                             "LIVETABLE_WALLET_SECRET")

    def load_secret(self, create: bool = True) -> bytes:
        """The signing secret: from the settings, else kept in the data directory so that
        tokens survive a restart (and every process sharing the directory agrees)."""
        if self.secret:
            return self.secret
        path = self.data_dir / "secret"
        if path.exists():
            self.secret = path.read_bytes().strip()
            self.secret_path = path
            return self.secret
        if not create:
            raise FileNotFoundError(
                f"no signing secret: set LIVETABLE_SECRET or run where {path} exists")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        value = secrets.token_urlsafe(32).encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(value)
        self.secret = value
        self.secret_path = path
        return value

    def state_key(self) -> tuple[bytes, str, list[str]]:
        """The master key that seals engine states at rest, where it came from, and what is
        wrong with where it lives (warnings for the log).

        A dedicated key (LIVETABLE_SHOE_KEY, or the file LIVETABLE_SHOE_KEY_FILE) wins;
        else the signing secret. Keys kept inside the data directory protect nothing against
        a copy of that directory, so that is warned about (docs/security.md).
        """
        from livetable.store.sealing import MIN_KEY_BYTES

        warnings: list[str] = []
        if self.shoe_key is not None:
            key, source = self.shoe_key, "LIVETABLE_SHOE_KEY"
        elif self.shoe_key_file is not None:
            try:
                key = self.shoe_key_file.read_bytes().strip()
            except OSError as exc:
                raise ValueError(f"LIVETABLE_SHOE_KEY_FILE {self.shoe_key_file}: "
                                 f"{exc.strerror}") from None
            source = f"the key file {self.shoe_key_file}"
            if _inside(self.shoe_key_file, self.data_dir):
                warnings.append(f"the shoe key file {self.shoe_key_file} is inside the data "
                                f"directory {self.data_dir}: a copy of the directory can "
                                "read every future card; keep it elsewhere")
        else:
            key = self.load_secret()
            source = "the signing secret"
            if self.secret_path is not None:
                source = f"the signing secret {self.secret_path}"
                warnings.append(f"engine states are sealed with a key derived from "
                                f"{self.secret_path}, kept in the data directory beside the "
                                "database: a copy of the directory (a backup) can read every "
                                "future card; in production set LIVETABLE_SECRET or "
                                "LIVETABLE_SHOE_KEY(_FILE) from outside it")
        dedicated = self.shoe_key is not None or self.shoe_key_file is not None
        if dedicated and len(key) < MIN_KEY_BYTES:
            raise ValueError(f"{source} holds {len(key)} bytes; a shoe key needs at least "
                             f"{MIN_KEY_BYTES} (e.g. openssl rand -hex 32)")
        return key, source, warnings


def _inside(path: Path, directory: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except OSError:
        return False
