"""`burrow eval`: run the suite (embedded server or --server), report, or --compare two runs."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burrow.evals.replay_model import Shape
    from burrow.evals.runner import TaskResult
    from burrow.evals.task import Task

SCRIPTED = "scripted"  # the suite's own scripts: the offline run CI asserts
REPLAY = "replay"  # the same scripts through the OpenAI provider, from a fake server
OFFLINE = (SCRIPTED, REPLAY)  # the models whose outcomes are known: asserted


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "eval",
        help="run the agent eval suite through a real server and report",
        description="Run each task of the suite in its own conversation, check the "
        "workspace with the task's check.sh, and report pass rate, tokens, cost, wall time, "
        "time to first token and tool time per task.",
    )
    # The suite's modules load when the command runs: every `burrow` start builds this parser.
    p.add_argument("--suite", type=Path, help="the suite's folder (default: the built-in one)")
    p.add_argument("--only", nargs="+", default=(), metavar="TASK", help="run only these tasks")
    p.add_argument(
        "--model",
        help=f"the embedded server's model; `{SCRIPTED}` (the default without BURROW_MODEL) "
        f"replays each task's script.json and asserts each task's [expect]; `{REPLAY}` does "
        "the same through Burrow's OpenAI provider and a fake OpenAI-compatible server with "
        "a real model's pace (burrow/evals/replay_model.py)",
    )
    p.add_argument(
        "--agent",
        choices=("model", "oracle"),
        default="model",
        help="who does each task: the model (default), or `oracle`, the task's own "
        "solution/solve.sh run in its sandbox, which proves its environment and check "
        "before a model is judged on them (every task must then pass)",
    )
    p.add_argument("--server", help="a running server's URL instead of an embedded one")
    p.add_argument(
        "--token",
        default=os.environ.get("BURROW_EVAL_TOKEN"),
        help="its API token (BURROW_EVAL_TOKEN)",
    )
    p.add_argument("--parallel", type=int, default=4, help="attempts at once (default 4)")
    p.add_argument(
        "--trials",
        type=_positive,
        default=1,
        metavar="K",
        help="run each task K times, each in a new conversation, and report pass@1 over "
        "them with its 95%% interval (default 1)",
    )
    p.add_argument("--json", type=Path, dest="json_out", help="write the results as JSON here")
    p.add_argument("--chart", type=Path, help="write a PNG chart of the results here")
    p.add_argument("--data-dir", type=Path, help="the embedded server's data (default: temporary)")
    p.add_argument(
        "--expect",
        action="store_true",
        help="fail unless every task ends as its [expect] says (implied by the scripted model)",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("BEFORE", "AFTER"),
        help="compare two --json files",
    )
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    # Here, not at the top: `burrow serve` builds this parser and needs no HTTP client.
    from burrow.evals import report

    if args.compare:
        before, after = (report.load(p) for p in args.compare)
        print(report.compare(before, after))
        return 0
    from burrow.evals.suite import SUITE, load_suite
    from burrow.evals.task import SuiteError

    try:
        tasks = load_suite(args.suite or SUITE, args.only)
    except SuiteError as exc:
        print(f"burrow eval: {exc}", file=sys.stderr)
        return 2
    model = args.model or os.environ.get("BURROW_MODEL") or SCRIPTED
    if args.server and not args.token:
        print("burrow eval: --server needs --token (or BURROW_EVAL_TOKEN)", file=sys.stderr)
        return 2
    results, shown = asyncio.run(_run(args, tasks, model))
    if args.agent == "oracle":
        shown = "oracle: each task's own solution/solve.sh"
    print(report.table(results))
    if args.json_out:
        args.json_out.write_text(json.dumps(report.as_json(results, shown), indent=2) + "\n")
    if args.chart:
        from burrow.evals.chart import draw_chart  # Pillow loads only when a chart is asked for

        draw_chart(results, shown, args.chart)
    if args.agent == "oracle":
        failed = [r for r in results if not r.met_expectation]
        for r in failed:
            print(f"{r.name}: the oracle did not pass: {r.error or r.check_output[-500:]}")
        return 1 if failed else 0
    if args.expect or (model in OFFLINE and not args.server):
        unmet = [r for r in results if not r.met_expectation]
        for r in unmet:
            want = f"{r.name}: expected {_expected(tasks, r.name)}"
            print(f"{want}, got {r.status}/{'pass' if r.passed else 'fail'} {r.error or ''}")
        return 1 if unmet else 0
    return 0


async def _run(
    args: argparse.Namespace, tasks: list[Task], model: str
) -> tuple[list[TaskResult], str]:
    from burrow.evals.client import BurrowClient
    from burrow.evals.replay_model import MODEL as REPLAY_MODEL
    from burrow.evals.runner import run_suite
    from burrow.evals.server import embedded_server

    if args.server:
        client = BurrowClient(args.server, args.token)
        try:
            return await run_suite(
                client, tasks, args.parallel, args.trials, args.agent
            ), args.server
        finally:
            await client.close()
    async with AsyncExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="burrow-eval-"))
        data_dir = args.data_dir or Path(scratch) / "data"
        script = Path(scratch) / "suite-script.json"
        from burrow.evals.suite import routed_script

        script.write_text(json.dumps(routed_script(tasks)))
        env = _offline_env(model)
        if model == SCRIPTED:
            served, shown = f"scripted:{script}", model
        elif model == REPLAY:
            base_url, shape = await stack.enter_async_context(_replay_server(script))
            env.update(
                OPENAI_BASE_URL=base_url,
                OPENAI_API_KEY="replay",
                BURROW_PRICE_PROMPT=str(shape.prompt_price),
                BURROW_PRICE_COMPLETION=str(shape.completion_price),
            )
            served = f"openai:{REPLAY_MODEL}"
            shown = f"{served}: a fake OpenAI server replaying the suite ({shape.describe()})"
        else:
            served = shown = model
        async with embedded_server(data_dir, served, env) as server:
            client = await BurrowClient.login(server.base_url, server.username, server.password)
            try:
                results = await run_suite(client, tasks, args.parallel, args.trials, args.agent)
                return results, shown
            finally:
                await client.close()


@asynccontextmanager
async def _replay_server(script: Path) -> AsyncIterator[tuple[str, Shape]]:
    """The fake model on a free local port: (its base URL, its shape)."""
    import uvicorn

    from burrow.evals.replay_model import Shape, replay_app
    from burrow.llm.scripted import RoutedScripts, load_provider

    provider = load_provider(script)
    assert isinstance(provider, RoutedScripts)
    shape = Shape()
    config = uvicorn.Config(
        replay_app(provider, shape), host="127.0.0.1", port=0, log_level="error"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", shape
    finally:
        server.should_exit = True
        await task


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {number}")
    return number


def _offline_env(model: str) -> dict[str, str]:
    """The offline runs use a small window, so the compaction task compacts after a few
    long outputs as it would after many with a real model; the other tasks stay below it."""
    return {"BURROW_CONTEXT_WINDOW": "32000"} if model in OFFLINE else {}


def _expected(tasks: list[Task], name: str) -> str:
    task = next(t for t in tasks if t.name == name)
    return f"{task.expect.status}/{'pass' if task.expect.passed else 'fail'}"
