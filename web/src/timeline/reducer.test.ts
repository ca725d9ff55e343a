import { describe, expect, it } from "vitest";
import type { Envelope } from "../api/events";
import {
  type AssistantItem,
  type ToolItem,
  type ViewState,
  addUsage,
  initialState,
  reduce,
  runStatus,
} from "./reducer";

let seq = 0;
function ev(type: string, data: Record<string, unknown>, run_id: string | null = "r1"): Envelope {
  seq += 1;
  return { seq, type, ts: "2026-11-29T08:00:00Z", run_id, data };
}

/** A realistic run: thinking and text deltas, a bash call with streamed output, a file write. */
function journal(): Envelope[] {
  seq = 0;
  return [
    ev("user.message", { content: "build it", steering: false }, null),
    ev("run.started", { run_id: "r1" }),
    ev("sandbox.status", { status: "starting", detail: null }, null),
    ev("assistant.thinking.delta", { text: "Let me " }),
    ev("assistant.thinking.delta", { text: "think." }),
    ev("assistant.text.delta", { text: "I'll **list** " }),
    ev("assistant.text.delta", { text: "the files." }),
    ev("sandbox.status", { status: "ready", detail: null }, null),
    ev("assistant.message", {
      content: "I'll **list** the files.",
      thinking: "Let me think.",
      tool_calls: [{ id: "c1", name: "bash", arguments: { command: "ls" } }],
    }),
    ev("usage", { prompt_tokens: 100, completion_tokens: 20, cost: 0.01 }),
    ev("tool.started", { call_id: "c1", name: "bash", arguments: { command: "ls" } }),
    ev("tool.output", { call_id: "c1", stream: "stdout", text: "a.txt\n" }),
    ev("tool.output", { call_id: "c1", stream: "stdout", text: "b.txt\n" }),
    ev("tool.output", { call_id: "c1", stream: "stderr", text: "warn\n" }),
    ev("tool.finished", {
      call_id: "c1",
      is_error: false,
      exit_code: 0,
      output: "a.txt\nb.txt\nwarn",
      truncated: false,
      duration_ms: 12,
    }),
    ev("user.message", { content: "also README", steering: true }, "r1"),
    ev("assistant.text.delta", { text: "Done." }),
    ev("assistant.message", { content: "Done.", thinking: "", tool_calls: [] }),
    ev("usage", { prompt_tokens: 150, completion_tokens: 5, cost: 0.02 }),
    ev("preview.opened", { port: 8000, url: "http://8000-x.preview.localhost:8421/" }),
    ev("run.finished", {
      status: "completed",
      error: null,
      usage: { prompt_tokens: 250, completion_tokens: 25, cost: 0.03 },
    }),
  ];
}

function oneByOne(events: Envelope[], start: ViewState = initialState): ViewState {
  return events.reduce((s, e) => reduce(s, [e]), start);
}

/** What a person sees: the items and the derived status, without bookkeeping indices. */
function visible(s: ViewState) {
  return {
    items: s.items,
    status: runStatus(s),
    usage: s.usage,
    preview: s.preview,
    sandbox: s.sandbox,
    lastSeq: s.lastSeq,
    filesVersion: s.filesVersion,
  };
}

describe("reduce", () => {
  it("merges text and thinking deltas into one assistant item", () => {
    const events = journal();
    const s = reduce(initialState, events.slice(0, 7));
    const assistant = s.items.filter((i) => i.kind === "assistant") as AssistantItem[];
    expect(assistant).toHaveLength(1);
    expect(assistant[0]).toMatchObject({
      text: "I'll **list** the files.",
      thinking: "Let me think.",
      streaming: true,
    });
    expect(runStatus(s)).toBe("running");
  });

  it("pairs tool output and result by call_id, keeping stdout and stderr apart", () => {
    const s = reduce(initialState, journal());
    const tool = s.items.find((i) => i.kind === "tool") as ToolItem;
    expect(tool.output).toEqual([
      { stream: "stdout", text: "a.txt\nb.txt\n" },
      { stream: "stderr", text: "warn\n" },
    ]);
    expect(tool.result).toMatchObject({ exitCode: 0, isError: false, durationMs: 12 });
    expect(s.filesVersion).toBe(2); // the shell call, then the run's end (its checkpoint committed)
  });

  it("ends the run: status idle, usage summed, preview remembered", () => {
    const s = reduce(initialState, journal());
    expect(runStatus(s)).toBe("idle");
    expect(s.usage.prompt_tokens).toBe(250);
    expect(s.usage.cost).toBeCloseTo(0.03);
    expect(s.preview?.port).toBe(8000);
    expect(s.items.map((i) => i.kind)).toEqual([
      "user",
      "assistant",
      "tool",
      "user",
      "assistant",
      "notice",
      "run.finished",
    ]);
  });

  it("ignores duplicates and out-of-order events", () => {
    const events = journal();
    const s = reduce(initialState, events);
    expect(reduce(s, events)).toBe(s); // nothing new: the very same state
    expect(reduce(s, [events[5]!, events[3]!])).toBe(s);
    const shuffled = [events[0]!, events[1]!, events[0]!, events[1]!, events[3]!, events[2]!];
    expect(reduce(initialState, shuffled).lastSeq).toBe(4);
    const partial = reduce(initialState, events.slice(0, 5));
    const withStale = reduce(partial, [events[3]!, events[4]!, ...events.slice(5)]);
    expect(visible(withStale)).toEqual(visible(s));
  });

  it("replay equals live: one batch, one by one, and with duplicates injected", () => {
    const events = journal();
    const batch = reduce(initialState, events);
    const live = oneByOne(events);
    expect(visible(live)).toEqual(visible(batch));

    // A reconnect replays overlapping ranges: every event twice, and a burst repeated.
    const noisy: Envelope[] = [];
    events.forEach((e, i) => noisy.push(e, e, ...events.slice(Math.max(0, i - 3), i)));
    expect(visible(oneByOne(noisy))).toEqual(visible(batch));

    // Random batch boundaries give the same view.
    let s = initialState;
    for (let i = 0; i < events.length; ) {
      const n = 1 + ((i * 7) % 4);
      s = reduce(s, events.slice(Math.max(0, i - 1), i + n));
      i += n;
    }
    expect(visible(s)).toEqual(visible(batch));
  });

  it("never mutates the state it is given and keeps untouched items identical", () => {
    const events = journal();
    const before = reduce(initialState, events.slice(0, 12));
    const frozen = JSON.stringify(before);
    const after = reduce(before, events.slice(12, 14));
    expect(JSON.stringify(before)).toBe(frozen);
    expect(after.items[0]).toBe(before.items[0]); // the user message did not change
    expect(after.items[2]).not.toBe(before.items[2]); // the tool card did
  });

  it("takes assistant.message as the authority over coalesced deltas", () => {
    seq = 0;
    const s = reduce(initialState, [
      ev("run.started", { run_id: "r1" }),
      ev("assistant.text.delta", { text: "Hel" }),
      ev("assistant.message", { content: "Hello", thinking: "", tool_calls: [] }),
    ]);
    expect(s.items).toHaveLength(1);
    expect(s.items[0]).toMatchObject({ kind: "assistant", text: "Hello", streaming: false });
  });

  it("tracks approvals: waiting, resolved, and expired when the run ends", () => {
    seq = 0;
    const requested = [
      ev("run.started", { run_id: "r1" }),
      ev("approval.requested", {
        request_id: "q1",
        call_id: "c1",
        tool: "bash",
        arguments: { command: "rm -rf build" },
        risk: "high",
        reason: "deletes files",
      }),
    ];
    const waiting = reduce(initialState, requested);
    expect(runStatus(waiting)).toBe("waiting_approval");
    const withTool = reduce(initialState, [
      requested[0]!,
      ev("tool.started", { call_id: "c1", name: "bash", arguments: { command: "rm -rf build" } }),
      { ...requested[1]!, seq: 100 },
    ]);
    expect(withTool.items[0]).toMatchObject({ kind: "tool", approval: "pending" });
    const resolved = reduce(waiting, [ev("approval.resolved", { request_id: "q1", decision: "deny" })]);
    expect(runStatus(resolved)).toBe("running");
    expect(resolved.items[0]).toMatchObject({ kind: "approval", decision: "deny" });

    const ended = reduce(waiting, [
      ev("run.finished", {
        status: "canceled",
        error: null,
        usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 },
      }),
    ]);
    expect(ended.items[0]).toMatchObject({ kind: "approval", decision: null, expired: true });
    expect(runStatus(ended)).toBe("idle");
  });

  it("reduces a 2,000-event journal quickly", () => {
    seq = 0;
    const events: Envelope[] = [ev("run.started", { run_id: "r1" })];
    for (let i = 0; i < 400; i++) {
      const call = `c${i}`;
      events.push(
        ev("assistant.text.delta", { text: `Step ${i}. ` }),
        ev("tool.started", { call_id: call, name: "bash", arguments: { command: "ls" } }),
        ev("tool.output", { call_id: call, stream: "stdout", text: "x\n" }),
        ev("tool.output", { call_id: call, stream: "stdout", text: "y\n" }),
        ev("tool.finished", {
          call_id: call,
          is_error: false,
          exit_code: 0,
          output: "x\ny",
          truncated: false,
          duration_ms: 1,
        }),
      );
    }
    const t0 = performance.now();
    const batch = reduce(initialState, events);
    const live = oneByOne(events);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(visible(live)).toEqual(visible(batch));
    expect(batch.items).toHaveLength(800);
  });

  it("keeps an answer whole when steering arrives while it streams", () => {
    seq = 0;
    const state = reduce(initialState, [
      ev("user.message", { content: "write a poem", steering: false }, null),
      ev("run.started", { run_id: "r1" }),
      ev("assistant.text.delta", { text: "Roses are " }),
      ev("user.message", { content: "make it short", steering: true }, null),
      ev("assistant.text.delta", { text: "red." }),
      ev("assistant.message", { content: "Roses are red.", thinking: "", tool_calls: [] }),
      ev("assistant.text.delta", { text: "Short." }),
      ev("assistant.message", { content: "Short.", thinking: "", tool_calls: [] }),
    ]);
    const shown = state.items.map((i) => (i.kind === "assistant" ? i.text : i.kind === "user" ? `> ${i.content}` : i.kind));
    expect(shown).toEqual(["> write a poem", "Roses are red.", "> make it short", "Short."]);
  });

  it("shows a repaired run.finished without usage as zero usage", () => {
    seq = 0;
    const state = reduce(initialState, [
      ev("run.started", { run_id: "r1" }),
      ev("run.finished", { status: "failed", error: "The server restarted", usage: {} }),
    ]);
    const end = state.items[0]!;
    expect(end.kind === "run.finished" && end.usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, cost: 0 });
    expect(state.activeRun).toBeNull();
  });

  it("keeps the time waited for an approval apart from run time", () => {
    seq = 0;
    const state = reduce(initialState, [
      ev("run.started", { run_id: "r1" }),
      ev("tool.started", { call_id: "c1", name: "bash", arguments: { command: "rm -rf build" } }),
      ev("tool.finished", { call_id: "c1", is_error: false, output: "", duration_ms: 35_400, approval_wait_ms: 35_300 }),
      ev("run.finished", { status: "completed", error: null, usage: {}, duration_ms: 1900, approval_wait_ms: 35_300 }),
    ]);
    const [tool, end] = state.items;
    expect(tool!.kind === "tool" && tool!.result).toMatchObject({ durationMs: 35_400, approvalWaitMs: 35_300 });
    expect(end).toMatchObject({ kind: "run.finished", durationMs: 1900, approvalWaitMs: 35_300 });
    // A run closed by crash repair was not timed: no figures rather than wrong ones.
    const repaired = reduce(state, [ev("run.finished", { status: "failed", error: "restart", usage: {} })]);
    expect(repaired.items[2]).toMatchObject({ durationMs: 0, approvalWaitMs: 0 });
  });

  it("splits a run's time into model and tools from the events' times", () => {
    seq = 0;
    const at = (type: string, data: Record<string, unknown>, ts: string): Envelope => ({
      ...ev(type, data),
      ts: `2026-11-29T08:00:${ts}Z`,
    });
    const state = reduce(initialState, [
      at("run.started", { run_id: "r1" }, "00.000"),
      at("assistant.text.delta", { text: "Let me look." }, "00.400"),
      at("usage", { prompt_tokens: 10, completion_tokens: 5, cost: 0 }, "01.000"), // model 1 s
      at("tool.started", { call_id: "c1", name: "bash", arguments: { command: "ls" } }, "01.010"),
      at("approval.resolved", { request_id: "q1", decision: "allow_once" }, "04.000"), // 3 s wait
      at("tool.finished", { call_id: "c1", is_error: false, output: "", duration_ms: 3500, approval_wait_ms: 3000 }, "04.500"),
      at("usage", { prompt_tokens: 20, completion_tokens: 5, cost: 0 }, "06.500"), // model 2 s
      at("run.finished", { status: "completed", error: null, usage: {}, duration_ms: 3600, approval_wait_ms: 3000 }, "06.600"),
    ]);
    const end = state.items.find((i) => i.kind === "run.finished");
    expect(end).toMatchObject({ split: { modelMs: 3000, toolMs: 500 } });
    expect(state.clock).toBeNull();
    // A run this client did not see start (a page opened mid-run) has no split.
    const late = reduce(initialState, [at("run.finished", { status: "completed", error: null, usage: {} }, "09.000")]);
    expect(late.items[0]).toMatchObject({ split: null });
    // The server's own measure wins where run.finished has it: the estimate above counts
    // a sandbox's start before the first request as the model's.
    const measured = reduce(initialState, [
      at("run.started", { run_id: "r2" }, "00.000"),
      at("usage", { prompt_tokens: 10, completion_tokens: 5, cost: 0 }, "02.000"),
      at("run.finished", { status: "completed", error: null, usage: {}, duration_ms: 2100, model_ms: 900, tool_ms: 0 }, "02.100"),
    ]);
    expect(measured.items.find((i) => i.kind === "run.finished")).toMatchObject({ split: { modelMs: 900, toolMs: 0 } });
  });

  it("reads what a tool may do from its declared flags, not its name", () => {
    seq = 0;
    const flags = { reads: true, writes: false, destructive: false, network: false, shell: false };
    const call = (id: string, kind?: Record<string, boolean>) => [
      ev("tool.started", { call_id: id, name: `t_${id}`, arguments: {}, ...(kind ? { kind } : {}) }),
      ev("tool.finished", {
        call_id: id,
        is_error: false,
        exit_code: null,
        output: "",
        truncated: false,
        duration_ms: 1,
      }),
    ];
    const reads = reduce(initialState, call("a", flags));
    expect(reads.filesVersion).toBe(0);
    expect(reads.items[0]).toMatchObject({ kind: "tool", toolKind: flags });
    expect(reduce(reads, call("b", { ...flags, writes: true })).filesVersion).toBe(1);
    expect(reduce(reads, call("c", { ...flags, shell: true })).filesVersion).toBe(1);
    const undeclared = reduce(reads, call("d"));
    expect(undeclared.filesVersion).toBe(1); // journaled before flags: assume it may write
    expect(undeclared.items[1]).toMatchObject({ toolKind: null });
  });

  it("ends a run that reached its budget with which limit", () => {
    seq = 0;
    const budget = { kind: "steps", limit: 3, used: 3 };
    const s = reduce(initialState, [
      ev("run.started", { run_id: "r1" }),
      ev("run.finished", {
        status: "budget_exceeded",
        error: "Stopped: this run used 3 of its 3 model calls",
        usage: { prompt_tokens: 5, completion_tokens: 1, cost: 0 },
        budget,
      }),
    ]);
    expect(runStatus(s)).toBe("idle");
    expect(s.items[0]).toMatchObject({ kind: "run.finished", status: "budget_exceeded", budget });
  });
});

describe("retry", () => {
  it("shows each retry of a model call as a notice with its reason and wait", () => {
    seq = 0;
    const state = reduce(initialState, [
      ev("run.started", { run_id: "r1" }),
      ev("retry", { attempt: 1, delay_s: 2.5, reason: "The Anthropic API is overloaded." }),
    ]);
    expect(state.items.at(-1)).toMatchObject({
      kind: "notice",
      tone: "info",
      text: "The Anthropic API is overloaded. Trying again in 2.5 s (attempt 2).",
    });
  });

  it("updates one line while a call is retried, and starts another after something else", () => {
    seq = 0;
    const retry = (attempt: number) =>
      ev("retry", { attempt, delay_s: attempt, reason: "Rate limited." });
    const state = reduce(initialState, [ev("run.started", { run_id: "r1" }), retry(1), retry(2), retry(3)]);
    const notices = state.items.filter((i) => i.kind === "notice");
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ text: "Rate limited. Trying again in 3.0 s (attempt 4)." });
    const later = reduce(state, [ev("assistant.text.delta", { text: "partial" }), retry(1)]);
    expect(later.items.filter((i) => i.kind === "notice")).toHaveLength(2);
  });
});

describe("mcp warnings", () => {
  it("shows a broken server's warning once, however many runs repeat it", () => {
    seq = 0;
    const warn = (message: string) => ev("mcp.warning", { server: "docs", message });
    const state = reduce(initialState, [
      warn("could not start: exit 1"),
      ev("run.started", { run_id: "r2" }),
      warn("could not start: exit 1"),
      warn("timed out listing tools"),
    ]);
    const notices = state.items.filter((i) => i.kind === "notice").map((i) => i.kind === "notice" && i.text);
    expect(notices).toEqual(["MCP server docs: could not start: exit 1", "MCP server docs: timed out listing tools"]);
  });
});

describe("attachments and model changes", () => {
  it("keeps a message's attachment paths and shows a model change as a notice", () => {
    seq = 0;
    const state = reduce(initialState, [
      ev("user.message", { content: "see", steering: false, attachments: [".burrow/attachments/ab-x.png"] }, null),
      ev("user.message", { content: "no files", steering: false }, null),
      ev("model.changed", { model: "anthropic:claude-haiku-4-5" }, null),
    ]);
    const [first, second, notice] = state.items;
    expect(first).toMatchObject({ kind: "user", attachments: [".burrow/attachments/ab-x.png"] });
    expect(second).toMatchObject({ kind: "user", attachments: [] });
    expect(notice).toMatchObject({ kind: "notice", text: "Model: anthropic:claude-haiku-4-5 (from the next run)" });
  });
});

describe("context", () => {
  it("follows the last answer's usage and a compaction, which is a marker in the timeline", () => {
    seq = 0;
    const s = reduce(initialState, [
      ev("user.message", { content: "go", steering: false }, null),
      ev("usage", { prompt_tokens: 900, completion_tokens: 100, cost: 0 }),
      ev("instructions.loaded", { path: "AGENTS.md", bytes: 10, truncated: false }),
      ev("usage", { prompt_tokens: 50, completion_tokens: 5, cost: 0, compaction: true }),
      ev("context.compacted", {
        tokens_before: 1000,
        tokens_after: 200,
        summary: "did things",
        upto_seq: 2,
      }),
    ]);
    expect(s.contextUsed).toBe(200);
    expect(s.usage.prompt_tokens).toBe(950); // the summary call is spent like any other
    const marker = s.items.find((i) => i.kind === "compaction");
    expect(marker).toMatchObject({ tokensBefore: 1000, tokensAfter: 200, summary: "did things" });
    expect(s.items.some((i) => i.kind === "notice" && i.text.includes("AGENTS.md"))).toBe(true);

    const next = reduce(s, [ev("usage", { prompt_tokens: 300, completion_tokens: 10, cost: 0 })]);
    expect(next.contextUsed).toBe(310);
    expect(reduce(next, [ev("usage", { prompt_tokens: 1, completion_tokens: 1, cost: 0, compaction: true })]).contextUsed).toBe(310);
  });
});

describe("workspace.restored", () => {
  it("shows the restore and how to undo it", () => {
    seq = 0;
    const s = reduce(initialState, [
      ev("workspace.restored", { checkpoint_id: "ck_1", undo_checkpoint_id: "ck_2" }, null),
    ]);
    expect(s.items[0]).toMatchObject({
      kind: "notice",
      text: "Workspace restored to an earlier checkpoint.",
      restore: { checkpointId: "ck_1", undoId: "ck_2" },
    });
  });
});

describe("workspace.import", () => {
  it("shows each stage, a failure as an error", () => {
    seq = 0;
    const s = reduce(initialState, [
      ev("workspace.import", { stage: "started", detail: "https://example.com/r.git" }, null),
      ev("workspace.import", { stage: "failed", detail: "Authentication failed" }, null),
    ]);
    expect(s.items[0]).toMatchObject({ kind: "notice", tone: "info", text: "Importing: https://example.com/r.git" });
    expect(s.items[1]).toMatchObject({ kind: "notice", tone: "error", text: "Import failed: Authentication failed" });
  });
});

describe("environment.build", () => {
  it("keeps one notice that follows the build's progress, then its end", () => {
    seq = 0;
    const s = reduce(initialState, [
      ev("environment.build", { name: "tools", stage: "started", detail: "Building the environment tools" }, null),
      ev("environment.build", { name: "tools", stage: "progress", detail: "Get:1 http://deb.debian.org" }, null),
      ev("environment.build", { name: "tools", stage: "progress", detail: "Setting up memcached" }, null),
      ev("environment.build", { name: "tools", stage: "failed", detail: "its build exited with 100" }, null),
    ]);
    expect(s.items).toHaveLength(2);
    expect(s.items[0]).toMatchObject({ kind: "notice", tone: "info", text: "Environment tools: Setting up memcached" });
    expect(s.items[1]).toMatchObject({ kind: "notice", tone: "error", text: "Environment tools: its build exited with 100" });
  });
});

describe("mcp", () => {
  it("shows a server that could not be used as an error notice", () => {
    const s = reduce(initialState, [
      ev("mcp.warning", { server: "files", message: "MCP server 'files' needs the secret(s) TOKEN" }, null),
    ]);
    expect(s.items[0]).toMatchObject({
      kind: "notice",
      tone: "error",
      text: "MCP server files: MCP server 'files' needs the secret(s) TOKEN",
    });
  });
});

describe("subagents", () => {
  it("nest a task's events under its card and count their usage and approvals", () => {
    seq = 0;
    const task = { description: "look around", prompt: "list the files" };
    const sub = (type: string, data: Record<string, unknown>, parent = "t1") =>
      ev(type, { ...data, parent_call_id: parent });
    const events = [
      ev("user.message", { content: "go", steering: false }, null),
      ev("run.started", { run_id: "r1" }),
      ev("assistant.message", { content: "", thinking: "", tool_calls: [] }),
      ev("tool.started", { call_id: "t1", name: "task", arguments: task }),
      sub("assistant.text.delta", { text: "Looking." }),
      sub("assistant.message", { content: "Looking.", thinking: "", tool_calls: [] }),
      sub("usage", { prompt_tokens: 10, completion_tokens: 5, cost: 0.5 }),
      sub("tool.started", { call_id: "n1", name: "bash", arguments: { command: "rm -rf x" } }),
      sub("approval.requested", { request_id: "q1", call_id: "n1", tool: "bash", arguments: {}, risk: "dangerous", reason: "deletes" }),
    ];
    const waiting = reduce(initialState, events);
    expect(runStatus(waiting)).toBe("waiting_approval");
    const later = reduce(waiting, [
      sub("approval.resolved", { request_id: "q1", decision: "allow_once" }),
      sub("tool.output", { call_id: "n1", stream: "stdout", text: "done\n" }),
      sub("tool.finished", { call_id: "n1", is_error: false, exit_code: 0, output: "done\n" }),
      sub("usage", { prompt_tokens: 1, completion_tokens: 1, cost: 0 }, "nope"), // no such call
      ev("tool.finished", { call_id: "t1", is_error: false, output: "All listed." }),
    ]);
    expect(runStatus(later)).toBe("running");
    const tools = later.items.filter((i) => i.kind === "tool") as ToolItem[];
    expect(tools.map((t) => t.callId)).toEqual(["t1"]); // nested calls are not top-level rows
    const card = tools[0]!;
    expect(card.result?.output).toBe("All listed.");
    const kinds = card.sub!.items.map((i) => i.kind);
    expect(kinds).toEqual(["assistant", "tool", "approval"]);
    const nested = card.sub!.items[1] as ToolItem;
    expect(nested.result?.output).toBe("done\n");
    expect(nested.approval).toBe("allow_once");
    expect(later.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, cost: 0.5 });
    expect(later.contextUsed).toBeNull(); // a subagent's context is not the conversation's
    expect(later.filesVersion).toBeGreaterThan(waiting.filesVersion);
  });
});

describe("file.saved", () => {
  it("is a small line naming the file, even in the middle of a run", () => {
    seq = 0;
    const s = reduce(initialState, [
      ev("run.started", { run_id: "r1" }),
      ev("file.saved", { path: "src/app.py", bytes: 16 }, null),
      ev("file.saved", { path: 42 }, null), // a drifted payload still renders
    ]);
    const notices = s.items.filter((i) => i.kind === "notice");
    expect(notices[0]).toMatchObject({ kind: "notice", text: "You saved src/app.py in the editor." });
    expect(notices).toHaveLength(2);
  });
});

describe("usage", () => {
  it("is summed the same way for the conversation and a subagent's card", () => {
    seq = 0;
    const s = reduce(initialState, [
      ev("run.started", { run_id: "r1" }),
      ev("usage", { prompt_tokens: 100, completion_tokens: 20, cost: 0.25 }),
      ev("tool.started", { call_id: "t1", name: "task", arguments: {} }),
      ev("usage", { prompt_tokens: 7, completion_tokens: 3, cost: 0.5, parent_call_id: "t1" }),
      ev("usage", { prompt_tokens: 1, completion_tokens: 1, cost: 0, parent_call_id: "t1" }),
    ]);
    const card = s.items.find((i) => i.kind === "tool") as ToolItem;
    expect(card.sub!.usage).toEqual({ prompt_tokens: 8, completion_tokens: 4, cost: 0.5 });
    expect(s.usage).toEqual({ prompt_tokens: 108, completion_tokens: 24, cost: 0.75 });
  });

  it("addUsage counts a missing field as zero and keeps just the three totals", () => {
    const total = { prompt_tokens: 1, completion_tokens: 2, cost: 0.5, cache_read_tokens: 9 };
    expect(addUsage(total, {})).toEqual({ prompt_tokens: 1, completion_tokens: 2, cost: 0.5 });
    expect(addUsage(total, { prompt_tokens: 10, cost: 1 })).toEqual({ prompt_tokens: 11, completion_tokens: 2, cost: 1.5 });
  });
});

describe("plan.updated (the todo tool's checklist)", () => {
  it("shows each list as a checklist card, keeping only well-formed steps", () => {
    seq = 0;
    const state = reduce(initialState, [
      ev("plan.updated", { plan_id: "p_1", items: [{ text: "read", done: false }, { text: "fix", done: false }] }),
      ev("plan.updated", {
        plan_id: "p_1",
        items: [{ text: "read", done: true }, { text: "", done: true }, null, { text: 3 }, { text: "fix", done: "yes" }],
      }),
      ev("plan.updated", { plan_id: "p_1", items: "not a list" }),
      ev("plan.updated", { items: [] }), // no plan id: takes its seq, shows nothing
    ]);
    const plans = state.items.filter((i) => i.kind === "plan");
    expect(plans.map((p) => p.kind === "plan" && p.steps)).toEqual([
      [{ text: "read", done: false }, { text: "fix", done: false }],
      [{ text: "read", done: true }, { text: "fix", done: false }],
      [],
    ]);
    expect(state.lastSeq).toBe(4);
  });
});

describe("plan.proposed (plan mode)", () => {
  it("waits for a decision until its run goes on or ends", () => {
    seq = 0;
    const steps = [{ text: "look", done: false }];
    const proposed = reduce(initialState, [
      ev("run.started", { run_id: "r1" }),
      ev("plan.proposed", { plan_id: "p_1", items: steps }),
    ]);
    const card = proposed.items.find((i) => i.kind === "plan");
    expect(card).toMatchObject({ proposed: true, waiting: true, steps });
    expect(runStatus(proposed)).toBe("waiting_approval");
    const approved = reduce(proposed, [ev("user.message", { content: "The user approved", steering: true })]);
    expect(approved.items.find((i) => i.kind === "plan")).toMatchObject({ waiting: false });
    expect(runStatus(approved)).toBe("running");
    const again = reduce(initialState, [
      ev("plan.proposed", { plan_id: "p_2", items: [] }),
      ev("run.finished", { status: "canceled", error: null, usage: {} }),
    ]);
    expect(again.items.find((i) => i.kind === "plan")).toMatchObject({ waiting: false });
    expect(again.pendingPlan).toBeNull();
  });
});
