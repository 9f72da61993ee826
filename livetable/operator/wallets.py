"""A wallet per operator: which operator's wallet a player's wallet call goes to.

Why a routing layer. One deployment serves many operators (operator/registry.py), and in
seamless mode each holds its own players' money behind its own wallet: its own URL, its
own secret, its own currencies. Every wallet call is about one player, and a player's
ledger id names their operator (``acme~p-1``, :func:`~livetable.operator.registry.
ledger_player_id`), so the seamless wallet (operator/seamless.py) asks here for that
operator's wallet and sends the call there, signed with that operator's secret and
carrying the id the operator knows its player by (``p-1``,
:func:`~livetable.operator.registry.operator_player_id`). Nothing crosses: another
operator's wallet never hears of the call, and ``acme``'s ``p-1`` and ``bet7``'s ``p-1``
are two players at two wallets. The single-operator deployment (``--wallet-url``) is one
operator, ``default``, whose players' ids carry no prefix.

Each operator gets two pools of connections, as the one wallet had: most for debits and
balances (a player waits for them), a quarter for the outbox, so that a backlog of
credits never takes the connections a bet is waiting for. (The outbox may borrow up to
three quarters of the debit connections while no debit waits: operator/gate.py, operator/outbox.py.)

Reloads (SIGHUP, :meth:`OperatorWallets.update`) never drop a call in flight: a new
operator gets its pools; a changed URL or secret is taken by the next call (the client
reads both when it sends), while a call already sent finishes where it went; an operator
taken out of the registry keeps its wallet, because what livetable owes its players
(credits and rollbacks in the outbox) must still be delivered.
"""

from __future__ import annotations

from dataclasses import dataclass

from livetable.operator.client import Reply, WalletClient
from livetable.operator.registry import DEFAULT_OPERATOR, Registry, operator_of


@dataclass(frozen=True, slots=True)
class OperatorWallet:
    """One operator's wallet: where its players' calls go."""

    operator_id: str
    #: Debits and balances: a player is waiting.
    debits: WalletClient
    #: Credits and rollbacks (the outbox).
    outbox: WalletClient


class NoWallet(WalletClient):
    """The wallet of an operator this process was never told of: every call is an
    unknown outcome (a debit refused and rolled back, a credit kept queued and retried
    until the operator's wallet is configured), never a call to another operator."""

    def __init__(self, operator_id: str) -> None:
        super().__init__("http://invalid/", b"", timeout=0.001, connections=1)
        self.operator_id = operator_id

    async def call(self, method: str, body: bytes, timeout: float | None = None) -> Reply:
        return Reply(None, None, f"no wallet for operator {self.operator_id!r}",
                     "no wallet for the operator")


class OperatorWallets:
    """Every operator's wallet, by operator id (see the module docstring)."""

    def __init__(self, *, timeout: float, connections: int) -> None:
        self.timeout = timeout
        #: Connections per operator: three quarters for debits, a quarter for the outbox.
        self.connections = max(2, connections)
        self._wallets: dict[str, OperatorWallet] = {}
        #: For tools and tests: one wallet for every player, whatever their operator.
        self._every: OperatorWallet | None = None

    @classmethod
    def one(cls, debits: WalletClient, outbox: WalletClient) -> OperatorWallets:
        """One wallet for every player (the clients given)."""
        wallets = cls(timeout=debits.timeout, connections=debits.connections)
        wallets._every = OperatorWallet(DEFAULT_OPERATOR, debits, outbox)
        return wallets

    def serve(self, operator_id: str, url: str, secret: bytes) -> None:
        """Call ``operator_id``'s wallet at ``url``, signed with ``secret``, from the next
        call on (a new operator, or a changed one)."""
        wallet = self._wallets.get(operator_id)
        if wallet is None:
            outbox = max(1, self.connections // 4)
            self._wallets[operator_id] = OperatorWallet(
                operator_id,
                WalletClient(url, secret, timeout=self.timeout,
                             connections=self.connections - outbox),
                WalletClient(url, secret, timeout=self.timeout, connections=outbox))
            return
        for client in (wallet.debits, wallet.outbox):
            # read by the client as it sends: a call in flight is not touched
            client.point_at(url, secret)

    def update(self, registry: Registry) -> None:
        """The registry's wallets (at start, and again on each SIGHUP): each operator's
        ``wallet_url``, signed with the first of its ``wallet_secrets``."""
        for operator in registry.operators.values():
            if operator.wallet_url and operator.wallet_secrets:
                self.serve(operator.id, operator.wallet_url, operator.wallet_secrets[0])

    def of(self, ledger_player: str) -> OperatorWallet:
        """The wallet of the player whose ledger id is ``ledger_player``."""
        if self._every is not None:
            return self._every
        operator_id = operator_of(ledger_player)
        wallet = self._wallets.get(operator_id)
        if wallet is None:
            nowhere = NoWallet(operator_id)
            return OperatorWallet(operator_id, nowhere, nowhere)
        return wallet

    @property
    def operators(self) -> list[str]:
        return sorted(self._wallets)

    def _all(self) -> list[OperatorWallet]:
        """Every wallet calls go to: the one for every player, else each operator's."""
        return [self._every] if self._every is not None else list(self._wallets.values())

    @property
    def outbox_connections(self) -> int:
        """The outbox's connections, every operator's together: how many credits and
        rollbacks may be in flight at once."""
        return max(1, sum(wallet.outbox.connections for wallet in self._all()))

    def lenders(self) -> list[OperatorWallet]:
        """The wallets whose debit connections the outbox may borrow (those whose outbox
        has connections of its own: operator/outbox.py)."""
        return [wallet for wallet in self._all() if wallet.debits is not wallet.outbox]

    async def aclose(self) -> None:
        for wallet in self._all():
            await wallet.debits.aclose()
            if wallet.outbox is not wallet.debits:
                await wallet.outbox.aclose()
