"""PostgreSQL LISTEN/NOTIFY between replicas: notifications carry ids, rows stay in tables.

Two channels. `burrow_events`: "<cid> <first> <last> <replica>" after each journal commit
(sent inside the commit's transaction: PostgreSQL delivers it when, and only if, the
transaction commits). `burrow_commands`: "run <target> <command id>" asks a run's owner to
apply a command, "done <origin> <command id>" tells the asker its result is written.
Replica ids hold no whitespace, so a payload splits on spaces.

`Listener` is each replica's one dedicated LISTEN connection. It reconnects with backoff;
notifications sent while it was away are lost, so `on_connect` runs after every
(re)connection and the caller heals from the tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)

EVENTS = "burrow_events"
COMMANDS = "burrow_commands"

_NOTIFY = sa.text("SELECT pg_notify(:channel, :payload)")

RECONNECT_FIRST = 0.1  # seconds before the first reconnection attempt; doubles up to
RECONNECT_MAX = 5.0
PROBE_SECONDS = 5.0  # a silent connection is probed this often (a dead peer sends no FIN)


def notify(conn: sa.Connection, channel: str, payload: str) -> None:
    """Queue a notification in `conn`'s transaction: it goes out when that commits."""
    conn.execute(_NOTIFY, {"channel": channel, "payload": payload})


def asyncpg_dsn(url: str) -> str:
    """The plain libpq URL asyncpg connects with, from Burrow's SQLAlchemy URL."""
    parsed = sa.make_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


class Listener:
    """One LISTEN connection: `handlers` maps a channel to a function of its payloads.

    Handlers run on the event loop and must be quick (schedule work, do not await it).
    """

    def __init__(
        self,
        dsn: str,
        handlers: Mapping[str, Callable[[str], None]],
        on_connect: Callable[[], None] = lambda: None,
        name: str = "burrow-listen",
    ) -> None:
        self._dsn = dsn
        self._name = name[:63]  # its application_name in pg_stat_activity
        self._handlers = dict(handlers)
        self._on_connect = on_connect
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self.connections = 0  # how many times it (re)connected: tests and /metrics

    async def start(self, timeout: float = 10.0) -> None:
        """Connect (in the background from then on) and wait for the first connection."""
        self._task = asyncio.create_task(self._run(), name="burrow listener")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.connected.wait(), timeout)
        if not self.connected.is_set():
            log.warning("LISTEN connection not up after %.0f s: still trying", timeout)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        import asyncpg  # PostgreSQL only: a SQLite server never imports it

        delay = RECONNECT_FIRST
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(
                    self._dsn, timeout=10, server_settings={"application_name": self._name}
                )
                lost = asyncio.Event()
                conn.add_termination_listener(_setter(lost))
                for channel, handler in self._handlers.items():
                    await conn.add_listener(channel, _callback(handler))
                self.connections += 1
                self.connected.set()
                delay = RECONNECT_FIRST
                self._on_connect()
                while not lost.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lost.wait(), PROBE_SECONDS)
                    if not lost.is_set():
                        await conn.fetchval("SELECT 1", timeout=PROBE_SECONDS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection refused, reset, timed out: try again
                log.warning("LISTEN connection lost (%s); reconnecting in %.1f s", exc, delay)
            finally:
                self.connected.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.terminate()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX)


def _setter(flag: asyncio.Event) -> Callable[[object], None]:
    return lambda _conn: flag.set()


def _callback(handler: Callable[[str], None]) -> Callable[[object, int, str, str], None]:
    def on_notification(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            handler(payload)
        except Exception:  # one bad payload must not end the connection
            log.exception("a notification handler failed on %r", payload[:200])

    return on_notification
