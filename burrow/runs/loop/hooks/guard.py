"""The loop guard: a model repeating the same failing call is told so, then stopped.

A model that retries a failing call unchanged rarely recovers by itself, and each retry
costs a step. The third identical failure in a row adds a note to the result the model
reads; the fifth ends the run as failed.
"""

from __future__ import annotations

import json
from dataclasses import replace

from burrow.runs.loop.hooks.base import Call, Hook, Outcome, Run, RunStop

WARN_AT = 3
STOP_AT = 5


def _signature(call: Call) -> str:
    shown = call.raw if call.arguments is None else json.dumps(call.arguments, sort_keys=True)
    return f"{call.name} {shown}"


class LoopGuard(Hook):
    def __init__(self, warn_at: int = WARN_AT, stop_at: int = STOP_AT) -> None:
        self.warn_at = warn_at
        self.stop_at = stop_at
        self._last = ""
        self._repeats = 0  # consecutive identical failing calls, the last included

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        if not outcome.result.is_error:
            self._last, self._repeats = "", 0
            return
        signature = _signature(call)
        self._repeats = self._repeats + 1 if signature == self._last else 1
        self._last = signature
        shown = signature if len(signature) <= 200 else signature[:200] + "…"
        if self._repeats >= self.stop_at:
            raise RunStop(
                "failed",
                f"Stopped: the same failing call was made {self._repeats} times in a row "
                f"({shown}). Send a message with a different approach to continue.",
            )
        if self._repeats >= self.warn_at:
            outcome.result = replace(
                outcome.result,
                output=f"{outcome.result.output}\n\n[Burrow] This exact call ({call.name} with "
                f"the same arguments) has now failed {self._repeats} times in a row. Do not "
                "repeat it: change the arguments or try another approach. At "
                f"{self.stop_at} identical failures in a row the run is stopped.",
            )
