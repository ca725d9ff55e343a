"""The conversation's machine: its sandbox (started, hibernated, woken; per-user caps),
checkpoints and diffs of its workspace, archives in and out, copies between sandboxes,
git (import, push, pull requests) and the scripts run inside the sandbox. Depends on
`runs.loop` and `runs.journal` below it."""
