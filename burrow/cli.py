"""`burrow serve`, `burrow run "prompt"` (DESIGN.md §6), `burrow db` (schema migrations) and
`burrow eval` (the agent eval suite, burrow/evals/)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burrow import descriptors
from burrow.api.bind import PortUnavailable, bind_listening_socket
from burrow.store.datadir import ensure_private_dir
from burrow.telemetry import logs
from burrow.telemetry.startup import StartClock

# Imported by the commands, after `main` turned off cyclic garbage collection: this module
# itself loads only the standard library.
if TYPE_CHECKING:
    import uvicorn

    from burrow.api.listener import Listener
    from burrow.config import Settings
    from burrow.services import Services
    from burrow.store.records import Event

EXIT_STATUS = {"completed": 0, "failed": 1, "canceled": 130}
# Seconds requests still going get after the streams ended at shutdown, before they are
# cancelled: a stuck one must not keep the sandboxes from being stopped.
SHUTDOWN_GRACE_SECONDS = 3.0
# Below this many descriptors `burrow serve` says that its caps are low.
LOW_OPEN_FILE_LIMIT = 4096


def _settings(args: argparse.Namespace) -> Settings:
    from burrow.config import Settings

    overrides: dict[str, Any] = {}
    for name in ("host", "port", "preview_port", "data_dir", "model"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    if "model" in overrides:
        overrides["model_source"] = "--model"
    return Settings(**overrides)


def serve(args: argparse.Namespace) -> int:
    clock = StartClock()
    clock.mark("python, the CLI and its parser")
    # Before anything is opened or spawned (burrow/descriptors.py).
    descriptors.close_inherited_on_exec()
    open_files = descriptors.raise_open_file_limit()
    settings = _settings(args)
    try:
        api_socket, preview_socket = _bind(settings)
    except PortUnavailable as exc:
        print(f"burrow: {exc}", file=sys.stderr, flush=True)
        return 2
    clock.mark("config, the listening sockets bound")
    from burrow.api.app import create_app
    from burrow.api.forwarded import ForwardedHeaders, TrustedProxies
    from burrow.api.listener import HeadGuard, Listener
    from burrow.api.streams import SHUTTING_DOWN
    from burrow.preview.proxy import build_proxy
    from burrow.services import open_services
    from burrow.store.migrate import prepare_database

    clock.mark("server imports")
    logs.configure(settings.log_format, settings.log_level)
    opened: list[Services] = []

    async def start() -> Services:
        opened.append(await open_services(settings))
        # After the settings table is read: the saved model is one of the candidates.
        print(opened[0].models.banner(), flush=True)
        clock.mark("services: stores, runtime and sandbox recovery, admin")
        return opened[0]

    trusted = TrustedProxies.parse(settings.trusted_proxies)
    app = create_app(start, trusted)
    proxy = ForwardedHeaders(build_proxy(settings, lambda: opened[0] if opened else None), trusted)
    print(
        f"Burrow on http://{settings.host}:{settings.port}  "
        f"(previews on port {settings.preview_listen_port()})  "
        f"(sandbox: {settings.sandbox}, data: {settings.data_dir})",
        flush=True,
    )
    if open_files < LOW_OPEN_FILE_LIMIT:
        print(
            f"The open-file limit is {open_files} (ulimit -Hn): streams and connections are "
            "capped to fit; raise it (e.g. LimitNOFILE=65536) for more clients.",
            file=sys.stderr,
            flush=True,
        )
    # One guard for both listeners: an address's slow heads count on either.
    guard = HeadGuard.for_limit(
        settings.head_timeout_seconds,
        settings.max_pending_connections_per_address,
        open_files,
        trusted.trusts,
    )
    servers = [
        Listener(
            server_config(app, settings.host, settings.port, http=guard.protocol()), api_socket
        ),
        Listener(
            server_config(
                proxy,
                settings.host,
                settings.preview_listen_port(),
                lifespan="on",
                http=guard.protocol(),
            ),
            preview_socket,
        ),
    ]

    clock.mark("app, listeners' configuration")

    def end_streams() -> None:
        cap = getattr(app.state, "stream_cap", None)  # absent when start-up failed
        if cap is not None:
            cap.end(SHUTTING_DOWN)

    loop_factory = servers[0].config.get_loop_factory()
    runner = asyncio.Runner(loop_factory=loop_factory) if loop_factory else asyncio.Runner()
    with runner:
        # The schema first, before anything listens: a refusal is then one clear message
        # and exit status 2, not a failed ASGI start-up inside uvicorn.
        migrated = runner.run(
            prepare_database(_database_url(settings), upgrade=settings.auto_migrate)
        )
        clock.mark(f"database: open, {'migrated' if migrated else 'schema at head'}")

        after_start: list[asyncio.Future[None]] = []  # held: the loop keeps weak references

        def started() -> None:
            clock.mark("listeners up")
            collect_from_now_on()
            clock.report(sys.stderr if args.timings else None)
            after_start.append(asyncio.ensure_future(_after_start()))

        runner.run(_serve_together(servers, end_streams, started))
    return 0


async def _after_start() -> None:
    """Start-up work that no request waits for, done once listening, a slice at a time so
    requests go between the slices."""
    from burrow.runs.journal.events import build_validators

    for _ in build_validators():
        await asyncio.sleep(0)


def collect_from_now_on() -> None:
    """Cyclic garbage collection back on, after start-up (`main` turned it off). What the
    start made is frozen first: long-lived, it is never garbage, and the collector will
    not walk it again (nor will its full collections, which walked it in tenths of a
    second). The few cycles the imports left (about a thousand objects) stay with it."""
    gc.freeze()
    gc.enable()


def _bind(settings: Settings) -> tuple[socket.socket, socket.socket]:
    """Both listening sockets, or PortUnavailable for the first that cannot be bound (the
    other is closed again)."""
    api = bind_listening_socket(
        settings.host, settings.port, "the API and UI", "--port (BURROW_PORT)"
    )
    try:
        preview = bind_listening_socket(
            settings.host,
            settings.preview_listen_port(),
            "previews",
            "--preview-port (BURROW_PREVIEW_PORT)",
        )
    except PortUnavailable:
        api.close()
        raise
    return api, preview


def _database_url(settings: Settings) -> str:
    if settings.database_url is None:
        ensure_private_dir(settings.data_dir)
    return settings.database()


def server_config(app: Callable[..., Any], host: str, port: int, **options: Any) -> uvicorn.Config:
    """uvicorn as Burrow runs it. Its own proxy-header handling is off: by default it
    believes X-Forwarded-For from 127.0.0.1, which let anyone on the host pick the address
    the login throttle counts; `ForwardedHeaders` decides instead (BURROW_TRUSTED_PROXIES).
    Its log records have their control characters escaped, as Burrow's own do."""
    import uvicorn

    options.setdefault("timeout_graceful_shutdown", SHUTDOWN_GRACE_SECONDS)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", proxy_headers=False, **options
    )
    logs.escape_uvicorn_records()
    return config


async def _serve_together(
    servers: list[Listener],
    end_streams: Callable[[], None],
    started: Callable[[], None] = lambda: None,
) -> None:
    """Both listeners in one event loop; when one stops (SIGTERM, Ctrl+C, a failed bind) so
    does the other. Stopping, they first stop accepting and end every open stream and
    terminal socket, which would otherwise hold the shutdown (and the sandboxes, their
    mounts and lock) for as long as their clients stay; a second Ctrl+C stops at once.
    `started` is called once both accept connections."""
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()

    def on_signal() -> None:
        if signalled.is_set():
            for server in servers:
                server.force_exit = True
        signalled.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    tasks = [asyncio.ensure_future(server.serve()) for server in servers]
    waiting = asyncio.ensure_future(signalled.wait())
    watching = asyncio.ensure_future(_when_started(servers, tasks, started))
    await asyncio.wait([*tasks, waiting], return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    watching.cancel()
    for server in servers:
        server.stop_accepting()
    end_streams()
    for server in servers:
        server.should_exit = True
    await asyncio.gather(*tasks)


async def _when_started(
    servers: list[Listener], tasks: Sequence[asyncio.Future[None]], then: Callable[[], None]
) -> None:
    # uvicorn offers only its `started` flag; a few milliseconds of polling, once.
    while not all(server.started for server in servers):
        if any(task.done() for task in tasks):
            return  # a listener failed to start: there is no "up" to report
        await asyncio.sleep(0.002)
    then()


def _render(event: Event, as_json: bool) -> str | None:
    """How `burrow run` prints an event: JSON lines, or a readable transcript."""
    if as_json:
        return event.envelope_json() + "\n"
    data = event.data
    match event.type:
        case "assistant.text.delta":
            return str(data["text"])
        case "assistant.message":
            return "\n"
        case "tool.started":
            arguments = json.dumps(data["arguments"], ensure_ascii=False)
            if len(arguments) > 160:  # a file's whole content is not worth a screen
                arguments = arguments[:160] + "…"
            return f"\n$ {data['name']} {arguments}\n"
        case "tool.output":
            return str(data["text"])
        case "tool.finished":
            mark = "error" if data["is_error"] else "ok"
            # file tools run no process: they have no exit status to show
            code = data.get("exit_code")
            exit_part = "" if code is None else f", exit {code}"
            return f"[{mark}{exit_part}, {data['duration_ms']} ms]\n"
        case "retry":
            return f"\n[{data['reason']} Trying again in {data['delay_s']:.1f} s.]\n"
        case "context.compacted":
            before, after = data["tokens_before"], data["tokens_after"]
            return f"\n[context compacted: {before} -> {after} tokens]\n"
        case "instructions.loaded":
            return f"[project instructions: {data['path']}]\n"
        case "sandbox.status" if data["status"] == "failed":
            return f"sandbox failed: {data['detail']}\n"
        case "run.finished":
            error = f": {data['error']}" if data.get("error") else ""
            return f"\n[run {data['status']}{error}]\n"
    return None


async def _run(settings: Settings, prompt: str, as_json: bool) -> int:
    from burrow.services import open_services

    svc = await open_services(settings)
    status = "failed"
    try:
        conversation = await svc.conversations.create(svc.owner.id, prompt[:60])
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(
            signal.SIGINT, lambda: asyncio.ensure_future(svc.runtime.interrupt(conversation.id))
        )
        run_id, _ = await svc.runtime.send(conversation.id, prompt)
        async for batch in svc.journal.follow(conversation.id):
            for event in batch:
                text = _render(event, as_json)
                if text:
                    sys.stdout.write(text)
                    sys.stdout.flush()
                if event.type == "run.finished" and event.run_id == run_id:
                    status = str(event.data["status"])
            if status != "failed" or any(e.type == "run.finished" for e in batch):
                break
    finally:
        await svc.close()
    return EXIT_STATUS.get(status, 1)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(_settings(args), args.prompt, args.json))


def db(args: argparse.Namespace) -> int:
    return asyncio.run(_db(args.action, _settings(args), args.message))


async def _db(action: str, settings: Settings, message: str | None) -> int:
    from burrow.store import migrate
    from burrow.store.database import connect
    from burrow.store.migrate import SchemaError, open_database

    if action == "revision":
        if not message:
            raise SchemaError('Say what the revision does: burrow db revision -m "..."')
        print(f"Wrote {await migrate.write_revision(message)}")
        return 0
    url = _database_url(settings)
    db = await open_database(url) if action == "upgrade" else connect(url)
    try:
        print(await migrate.describe(db))
    finally:
        await db.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    # Starting allocates some 200,000 objects and frees almost none: collecting meanwhile
    # cost a quarter of the imports' time. `serve` turns it on once listening, others now.
    gc.disable()
    parser = argparse.ArgumentParser(prog="burrow", description="A self-hosted coding agent.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser(
        "serve",
        help="start the server and the web UI",
        description="Start the API, the web UI and the preview proxy. Each flag but "
        "--timings overrides its BURROW_* environment variable; every other setting is an "
        "environment variable only (README.md, Configuration).",
        epilog="First start: the admin's password is BURROW_ADMIN_PASSWORD, or one is "
        "generated and printed once.",
    )
    p_serve.add_argument(
        "--host", help="address to listen on (BURROW_HOST; default 127.0.0.1, this machine only)"
    )
    p_serve.add_argument(
        "--port", type=int, help="port of the API and UI (BURROW_PORT; default 8420)"
    )
    p_serve.add_argument(
        "--preview-port",
        type=int,
        help="port of the preview proxy serving the sandboxes' web servers "
        "(BURROW_PREVIEW_PORT; default --port + 1)",
    )
    p_serve.add_argument(
        "--data-dir",
        type=Path,
        help="directory of the database, workspaces and secrets "
        "(BURROW_DATA_DIR; default ~/.local/share/burrow)",
    )
    p_serve.add_argument(
        "--model",
        help="[provider:]model, e.g. gpt-4.1 or anthropic:claude-sonnet-4-6; `demo` for the "
        "offline demo model; `scripted:<file.json>` for tests (BURROW_MODEL)",
    )
    p_serve.add_argument(
        "--timings",
        action="store_true",
        help="print how long each phase of the start took, once listening (they are "
        "logged at debug level either way)",
    )
    p_serve.set_defaults(handler=serve)
    p_run = sub.add_parser("run", help="run one prompt headless, streaming its events")
    p_run.add_argument("prompt")
    p_run.add_argument("--model")
    p_run.add_argument("--data-dir", type=Path)
    p_run.add_argument("--json", action="store_true", help="print events as JSON lines")
    p_run.set_defaults(handler=run)
    p_db = sub.add_parser("db", help="the database's schema: current, upgrade, revision")
    p_db.add_argument(
        "action",
        choices=["current", "upgrade", "revision"],
        help="current: show its revision; upgrade: migrate it to this version's; revision: "
        "(developers) write a migration for the changes made to burrow/store/schema.py",
    )
    p_db.add_argument("--data-dir", type=Path)
    p_db.add_argument("-m", "--message", help="revision: what the migration does")
    p_db.set_defaults(handler=db)
    from burrow.acp.command import add_parser as add_acp
    from burrow.evals.command import add_parser as add_eval
    from burrow.sandbox_host.command import add_parser as add_sandbox_host

    add_acp(sub)
    add_eval(sub)
    add_sandbox_host(sub)
    args = parser.parse_args(argv)
    if args.handler is not serve:
        collect_from_now_on()
    try:
        code: int = args.handler(args)
    except RuntimeError as exc:
        # A SchemaError can only come from burrow.store.migrate once a command imported
        # it; importing it here would load SQLAlchemy (~90 ms) for `burrow acp` as well.
        migrate = sys.modules.get("burrow.store.migrate")
        if migrate is None or not isinstance(exc, migrate.SchemaError):
            raise
        print(f"burrow: {exc}", file=sys.stderr, flush=True)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
