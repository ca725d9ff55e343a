// Events -> view state: the one rendering path for live events and replay.
//
// `reduce(state, batch)` is pure: it never mutates `state`, and items it does not touch keep
// their identity (so memoized rows do not re-render). Events at or below the last seen seq
// are duplicates or stale (a reconnect, a replay overlapping the live stream) and are ignored,
// so feeding the same journal in one batch, one by one, or with repeats gives the same view.
// It is total: every envelope is checked at the edge (`parseEvent`) first, so no sequence of
// events, however partial, duplicated or malformed, can throw or put a non-number in usage.
import {
  type BudgetHit,
  type BurrowEvent,
  type Envelope,
  parseEvent,
  type ToolKind,
  type UsageData,
} from "../api/events";

export type Stream = "stdout" | "stderr";

export interface OutputChunk {
  stream: Stream;
  text: string;
}

export interface UserItem {
  kind: "user";
  key: string;
  runId: string | null; // the run it started (or steered)
  content: string;
  steering: boolean;
  attachments: string[]; // workspace paths of uploaded files
}

export interface AssistantItem {
  kind: "assistant";
  key: string;
  runId: string | null;
  text: string;
  thinking: string;
  streaming: boolean;
}

export interface ToolResult {
  isError: boolean;
  exitCode: number | null;
  output: string;
  truncated: boolean;
  /** from start to finish, a wait for approval included */
  durationMs: number;
  /** how long a person took to approve it (0: not asked) */
  approvalWaitMs: number;
}

export interface ToolItem {
  kind: "tool";
  key: string;
  callId: string;
  name: string;
  arguments: unknown;
  /** what the tool declares it may do; null for calls journaled before tools declared it */
  toolKind: ToolKind | null;
  output: readonly OutputChunk[];
  outputChars: number;
  result: ToolResult | null;
  /** "pending" while a person must decide, then the decision */
  approval: string | null;
  /** a `task` call's subagent: its own timeline (events with this call's parent_call_id) */
  sub: ViewState | null;
  /** when it last showed life (started, printed, was approved): the server's time */
  lastActivity: string;
}

export interface ApprovalItem {
  kind: "approval";
  key: string;
  requestId: string;
  callId: string;
  tool: string;
  arguments: unknown;
  risk: string;
  reason: string;
  decision: string | null;
  expired: boolean;
}

export interface RunEndItem {
  kind: "run.finished";
  key: string;
  runId: string | null;
  status: "completed" | "failed" | "canceled" | "budget_exceeded";
  error: string | null;
  usage: UsageData;
  budget: BudgetHit | null;
  /** the run's time without its waits for approvals (0: not timed, a recovered run) */
  durationMs: number;
  approvalWaitMs: number;
  /** where the run's time went, from the events' times (null: not seen from its start) */
  split: { modelMs: number; toolMs: number } | null;
}

export interface NoticeItem {
  kind: "notice";
  key: string;
  tone: "info" | "error";
  text: string;
  url?: string;
  /** a workspace restore: its checkpoints, which the timeline names by run and time */
  restore?: { checkpointId: string; undoId: string | null };
  /** a model call being retried: the run's id (its next retry updates this notice) */
  retryOf?: string | null;
}

/** The point where the older turns were summarized to fit the model's context. */
export interface CompactionItem {
  kind: "compaction";
  key: string;
  tokensBefore: number;
  tokensAfter: number;
  summary: string;
}

/** One step of a checklist, as the reducer trusts it. */
export interface PlanStep {
  text: string;
  done: boolean;
}

/** The model's checklist as one `todo` call left it (`plan.updated`), or a plan-mode
 * run's proposal (`plan.proposed`), `waiting` for the owner's decision until its run goes
 * on or ends. */
export interface PlanItem {
  kind: "plan";
  key: string;
  planId: string;
  runId: string | null;
  steps: readonly PlanStep[];
  proposed: boolean;
  waiting: boolean;
}

export type Item =
  | UserItem
  | AssistantItem
  | ToolItem
  | ApprovalItem
  | RunEndItem
  | NoticeItem
  | CompactionItem
  | PlanItem;

export type RunStatus = "idle" | "running" | "waiting_approval";

export interface ViewState {
  lastSeq: number;
  items: readonly Item[];
  /** call_id -> index in items */
  tools: Readonly<Record<string, number>>;
  /** request_id -> index in items */
  approvals: Readonly<Record<string, number>>;
  /** index of the assistant item receiving deltas, or -1 */
  openAssistant: number;
  activeRun: string | null;
  pendingApprovals: readonly string[];
  usage: UsageData;
  /** tokens the model context holds, from the events (null: none said yet) */
  contextUsed: number | null;
  sandbox: { status: string; detail: string | null };
  preview: { port: number; url: string } | null;
  /** bumps when a tool that may change the workspace finishes */
  filesVersion: number;
  /** the active run's clock (telemetry's rule: a model call runs from the event before it
   * to its usage; a tool from its start to its end, approval waits left out) */
  clock: RunClock | null;
  /** index of the `plan.proposed` item waiting for the owner's decision, or null */
  pendingPlan: number | null;
}

export interface RunClock {
  askedAt: number; // ms since the epoch: when the model was last asked
  modelMs: number;
  toolMs: number;
}

/** An event's time in ms, or null when it is not a time this client can read. */
function eventTime(e: { ts?: unknown }): number | null {
  const t = typeof e.ts === "string" ? Date.parse(e.ts) : NaN;
  return Number.isFinite(t) ? t : null;
}

/** The model was asked again at `e` (after a tool, an answer, an approval or a retry). */
function asked(d: Draft, e: { ts?: unknown }, modelDone: boolean): void {
  const clock = d.s.clock;
  const t = eventTime(e);
  if (!clock || t === null) return;
  const modelMs = modelDone ? clock.modelMs + Math.max(0, t - clock.askedAt) : clock.modelMs;
  d.s.clock = { ...clock, askedAt: t, modelMs };
}

/** The run's time by what it went to: as the server measured it (`model_ms`, `tool_ms`,
 * since run.finished carries them), else estimated from the events' times, where the
 * model's share also holds whatever Burrow did before each request (a sandbox's start). */
function runSplit(
  data: { model_ms?: unknown; tool_ms?: unknown },
  clock: RunClock | null,
): { modelMs: number; toolMs: number } | null {
  const { model_ms: modelMs, tool_ms: toolMs } = data;
  if (typeof modelMs === "number" && typeof toolMs === "number" && modelMs >= 0 && toolMs >= 0) {
    return { modelMs, toolMs };
  }
  return clock ? { modelMs: clock.modelMs, toolMs: clock.toolMs } : null;
}

/** Whether a finished call may have changed the workspace's files (unknown: assume so). */
export function mayChangeFiles(kind: ToolKind | null): boolean {
  return !kind || kind.writes || kind.destructive || kind.shell;
}

export const initialState: ViewState = {
  lastSeq: 0,
  items: [],
  tools: {},
  approvals: {},
  openAssistant: -1,
  activeRun: null,
  pendingApprovals: [],
  usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 },
  contextUsed: null,
  sandbox: { status: "none", detail: null },
  preview: null,
  filesVersion: 0,
  clock: null,
  pendingPlan: null,
};

export function runStatus(state: ViewState): RunStatus {
  if (state.pendingApprovals.length > 0 || state.pendingPlan !== null) return "waiting_approval";
  return state.activeRun ? "running" : "idle";
}

/** An index by id: only the map's own keys count (an id may be any string, "__proto__" too). */
function lookup(map: Readonly<Record<string, number>>, id: string): number | undefined {
  return Object.hasOwn(map, id) ? map[id] : undefined;
}

function remember(map: Record<string, number>, id: string, index: number): void {
  Object.defineProperty(map, id, { value: index, enumerable: true, writable: true, configurable: true });
}

/** A copy-on-write view of the state for one batch: each item is copied at most once. */
class Draft {
  items: Item[];
  tools: Record<string, number>;
  approvals: Record<string, number>;
  private fresh = new Set<number>();

  constructor(public s: ViewState) {
    this.items = s.items.slice();
    this.tools = { ...s.tools };
    this.approvals = { ...s.approvals };
    this.s = { ...s };
  }

  push(item: Item): number {
    this.fresh.add(this.items.length);
    return this.items.push(item) - 1;
  }

  /** The item at `index`, copied once per batch so it may be changed in place. */
  edit<T extends Item>(index: number): T {
    const item = this.items[index] as T;
    if (this.fresh.has(index)) return item;
    const copy = { ...item };
    if (copy.kind === "tool") copy.output = copy.output.slice();
    this.items[index] = copy;
    this.fresh.add(index);
    return copy;
  }

  closeAssistant(): void {
    if (this.s.openAssistant >= 0) {
      this.edit<AssistantItem>(this.s.openAssistant).streaming = false;
      this.s.openAssistant = -1;
    }
  }

  assistantFor(runId: string | null): AssistantItem {
    const open = this.s.openAssistant;
    if (open >= 0 && (this.items[open] as AssistantItem).runId === runId) {
      return this.edit<AssistantItem>(open);
    }
    this.closeAssistant();
    const item: AssistantItem = {
      kind: "assistant",
      key: `a${this.s.lastSeq}`,
      runId,
      text: "",
      thinking: "",
      streaming: true,
    };
    this.s.openAssistant = this.push(item);
    return item;
  }

  markTool(callId: string, approval: string, at?: string): void {
    const index = lookup(this.tools, callId);
    if (index === undefined) return;
    const tool = this.edit<ToolItem>(index);
    tool.approval = approval;
    if (at) tool.lastActivity = at; // an approved command starts now
  }

  finish(): ViewState {
    return { ...this.s, items: this.items, tools: this.tools, approvals: this.approvals };
  }
}

/** `total` with one `usage` event's tokens and cost added (the conversation's, or a subagent's card). */
export function addUsage(
  total: UsageData,
  more: { prompt_tokens?: number; completion_tokens?: number; cost?: number },
): UsageData {
  return {
    prompt_tokens: total.prompt_tokens + (more.prompt_tokens ?? 0),
    completion_tokens: total.completion_tokens + (more.completion_tokens ?? 0),
    cost: total.cost + (more.cost ?? 0),
  };
}

/**
 * A subagent's event goes to the timeline inside its parent `task` call's card; what the
 * conversation as a whole shows (usage, pending approvals, changed files) counts it too.
 * Nesting is one level deep (subagents start no subagents): a nested event names a call
 * of the top level, or is dropped.
 */
function applyNested(d: Draft, parentCallId: string, e: BurrowEvent): void {
  const index = lookup(d.tools, parentCallId);
  if (index === undefined) return;
  const tool = d.edit<ToolItem>(index);
  const sub = new Draft(tool.sub ?? initialState);
  sub.s.lastSeq = e.seq;
  const files = sub.s.filesVersion;
  apply(sub, e, true);
  tool.sub = sub.finish();
  if (tool.sub.filesVersion !== files) d.s.filesVersion += 1;
  if (e.type === "usage") {
    d.s.usage = addUsage(d.s.usage, e.data);
  } else if (e.type === "approval.requested") {
    d.s.pendingApprovals = [...d.s.pendingApprovals, e.data.request_id];
  } else if (e.type === "approval.resolved") {
    d.s.pendingApprovals = d.s.pendingApprovals.filter((id) => id !== e.data.request_id);
  }
}

function apply(d: Draft, e: BurrowEvent, nested = false): void {
  const key = String(e.seq);
  const parent = (e.data as { parent_call_id?: string }).parent_call_id;
  if (parent !== undefined && !nested) {
    applyNested(d, parent, e);
    return;
  }
  switch (e.type) {
    case "user.message":
      // Steering waits for the next model call: the answer streaming now is not cut by it,
      // its later deltas keep going to the same item (above the steering bubble).
      if (!e.data.steering) d.closeAssistant();
      settlePlan(d); // an approved plan goes on with it (or the user wrote instead)
      d.push({
        kind: "user",
        key,
        runId: typeof e.run_id === "string" ? e.run_id : null,
        content: e.data.content,
        steering: !!e.data.steering,
        attachments: Array.isArray(e.data.attachments) ? e.data.attachments.map(String) : [],
      });
      return;
    case "run.started": {
      d.s.activeRun = e.data.run_id || e.run_id;
      const t = eventTime(e);
      d.s.clock = t === null ? null : { askedAt: t, modelMs: 0, toolMs: 0 };
      return;
    }
    case "assistant.thinking.delta":
      d.assistantFor(e.run_id).thinking += e.data.text;
      return;
    case "assistant.text.delta":
      d.assistantFor(e.run_id).text += e.data.text;
      return;
    case "assistant.message": {
      const { content, thinking } = e.data;
      if (d.s.openAssistant >= 0) {
        const item = d.assistantFor(e.run_id);
        // The message is the authority: deltas may have been coalesced or cut by a stop.
        item.text = content;
        item.thinking = thinking;
      } else if (content || thinking) {
        d.push({
          kind: "assistant",
          key,
          runId: e.run_id,
          text: content,
          thinking,
          streaming: false,
        });
      }
      d.closeAssistant();
      return;
    }
    case "tool.started":
      d.closeAssistant();
      remember(d.tools, e.data.call_id, d.push({
        kind: "tool",
        key,
        callId: e.data.call_id,
        name: e.data.name,
        arguments: e.data.arguments,
        toolKind: e.data.kind ?? null,
        output: [],
        outputChars: 0,
        result: null,
        approval: null,
        sub: null,
        lastActivity: e.ts,
      }));
      return;
    case "tool.output": {
      const index = lookup(d.tools, e.data.call_id);
      if (index === undefined || !e.data.text) return;
      const tool = d.edit<ToolItem>(index);
      const chunks = tool.output as OutputChunk[];
      const last = chunks[chunks.length - 1];
      const stream = e.data.stream === "stderr" ? "stderr" : "stdout";
      if (last && last.stream === stream) {
        chunks[chunks.length - 1] = { stream, text: last.text + e.data.text };
      } else {
        chunks.push({ stream, text: e.data.text });
      }
      tool.outputChars += e.data.text.length;
      tool.lastActivity = e.ts;
      return;
    }
    case "tool.finished": {
      const index = lookup(d.tools, e.data.call_id);
      if (index === undefined) return;
      const tool = d.edit<ToolItem>(index);
      if (tool.result) return;
      tool.result = {
        isError: !!e.data.is_error,
        exitCode: e.data.exit_code ?? null,
        output: e.data.output ?? "",
        truncated: !!e.data.truncated,
        durationMs: e.data.duration_ms ?? 0,
        approvalWaitMs: e.data.approval_wait_ms ?? 0,
      };
      if (mayChangeFiles(tool.toolKind)) d.s.filesVersion += 1;
      if (d.s.clock) {
        const ran = Math.max(0, tool.result.durationMs - tool.result.approvalWaitMs);
        d.s.clock = { ...d.s.clock, toolMs: d.s.clock.toolMs + ran };
      }
      asked(d, e, false);
      return;
    }
    case "approval.requested":
      d.closeAssistant();
      remember(d.approvals, e.data.request_id, d.push({
        kind: "approval",
        key,
        requestId: e.data.request_id,
        callId: e.data.call_id,
        tool: e.data.tool,
        arguments: e.data.arguments,
        risk: e.data.risk ?? "",
        reason: e.data.reason ?? "",
        decision: null,
        expired: false,
      }));
      d.s.pendingApprovals = [...d.s.pendingApprovals, e.data.request_id];
      d.markTool(e.data.call_id, "pending");
      return;
    case "approval.resolved": {
      asked(d, e, false);
      const index = lookup(d.approvals, e.data.request_id);
      if (index !== undefined) {
        const approval = d.edit<ApprovalItem>(index);
        approval.decision = e.data.decision;
        d.markTool(approval.callId, e.data.decision, e.ts);
      }
      d.s.pendingApprovals = d.s.pendingApprovals.filter((id) => id !== e.data.request_id);
      return;
    }
    case "sandbox.status":
      d.s.sandbox = { status: e.data.status, detail: e.data.detail ?? null };
      if (e.data.status === "failed") {
        d.push({
          kind: "notice",
          key,
          tone: "error",
          text: `Sandbox failed${e.data.detail ? `: ${e.data.detail}` : ""}`,
        });
      }
      return;
    case "preview.opened":
      d.s.preview = { port: e.data.port, url: e.data.url };
      d.push({
        kind: "notice",
        key,
        tone: "info",
        text: `Preview opened on port ${e.data.port}`,
        url: e.data.url,
      });
      return;
    case "usage": {
      d.s.usage = addUsage(d.s.usage, e.data);
      if (!e.data.compaction) {
        d.s.contextUsed = (e.data.prompt_tokens ?? 0) + (e.data.completion_tokens ?? 0);
      }
      asked(d, e, true);
      return;
    }
    case "retry": {
      asked(d, e, true); // the failed attempt took model time too
      const text = `${e.data.reason} Trying again in ${e.data.delay_s.toFixed(1)} s (attempt ${e.data.attempt + 1}).`;
      // One line per run that updates, not a paragraph per attempt.
      const last = d.items.length - 1;
      const previous = d.items[last];
      if (previous?.kind === "notice" && previous.retryOf !== undefined && previous.retryOf === e.run_id) {
        d.edit<NoticeItem>(last).text = text;
        return;
      }
      d.push({ kind: "notice", key, tone: "info", text, retryOf: e.run_id });
      return;
    }
    case "model.changed":
      d.push({ kind: "notice", key, tone: "info", text: `Model: ${e.data.model} (from the next run)` });
      return;
    case "workspace.restored":
      d.push({
        kind: "notice",
        key,
        tone: "info",
        text: "Workspace restored to an earlier checkpoint.",
        restore: { checkpointId: e.data.checkpoint_id, undoId: e.data.undo_checkpoint_id || null },
      });
      return;
    case "workspace.import": {
      const what = { started: "Importing", progress: "Import", done: "Imported", failed: "Import failed" };
      const stage = e.data.stage in what ? (e.data.stage as keyof typeof what) : "progress";
      d.push({
        kind: "notice",
        key,
        tone: stage === "failed" ? "error" : "info",
        text: `${what[stage]}: ${e.data.detail}`,
      });
      return;
    }
    case "environment.build": {
      // One notice per build, its text following the build's progress line by line.
      const text = `Environment ${e.data.name}: ${e.data.detail}`;
      const last = d.items.length - 1;
      const previous = d.items[last];
      if (e.data.stage === "progress" && previous?.kind === "notice" && previous.key.startsWith("env:")) {
        d.edit<NoticeItem>(last).text = text;
        return;
      }
      d.push({ kind: "notice", key: `env:${key}`, tone: e.data.stage === "failed" ? "error" : "info", text });
      return;
    }
    case "plan.updated":
    case "plan.proposed": {
      d.closeAssistant();
      settlePlan(d);
      // Each list is a snapshot: the timeline shows how the checklist moved along.
      const proposed = e.type === "plan.proposed";
      const index = d.push({
        kind: "plan",
        key,
        planId: e.data.plan_id,
        runId: e.run_id,
        steps: planSteps(e.data.items),
        proposed,
        waiting: proposed,
      });
      if (proposed) d.s.pendingPlan = index;
      return;
    }
    case "file.saved":
      d.push({ kind: "notice", key, tone: "info", text: `You saved ${e.data.path} in the editor.` });
      return;
    case "context.compacted":
      d.s.contextUsed = e.data.tokens_after;
      d.push({
        kind: "compaction",
        key,
        tokensBefore: e.data.tokens_before,
        tokensAfter: e.data.tokens_after,
        summary: e.data.summary ?? "",
      });
      return;
    case "mcp.warning": {
      // Said at every run's start while the server stays broken: shown once, not per run.
      const text = `MCP server ${e.data.server}: ${e.data.message}`;
      if (d.items.some((i) => i.kind === "notice" && i.text === text)) return;
      d.push({ kind: "notice", key, tone: "error", text });
      return;
    }
    case "instructions.loaded":
      d.push({
        kind: "notice",
        key,
        tone: "info",
        text:
          `Project instructions from ${e.data.path} are in use` +
          (e.data.truncated ? " (cut to their first 32 KiB)" : ""),
      });
      return;
    case "run.finished":
      d.closeAssistant();
      settlePlan(d);
      for (const id of d.s.pendingApprovals) {
        const index = lookup(d.approvals, id);
        if (index !== undefined) {
          const approval = d.edit<ApprovalItem>(index);
          approval.expired = true;
          d.markTool(approval.callId, "expired");
        }
      }
      d.s.pendingApprovals = [];
      if (d.s.activeRun === e.run_id || e.run_id === null) d.s.activeRun = null;
      d.push({
        kind: "run.finished",
        key,
        runId: e.run_id,
        status: e.data.status,
        error: e.data.error ?? null,
        usage: e.data.usage,
        budget: e.data.budget ?? null,
        durationMs: e.data.duration_ms ?? 0,
        approvalWaitMs: e.data.approval_wait_ms ?? 0,
        split: runSplit(e.data, d.s.clock),
      });
      d.s.clock = null;
      d.s.filesVersion += 1; // its starting checkpoint is committed now: Changes lists it
      return;
    default:
      return; // a type this client does not know yet: skip it, keep the seq
  }
}

/** A payload's checklist, whatever arrived: steps with text, at most 200 of them. */
function planSteps(raw: unknown): PlanStep[] {
  if (!Array.isArray(raw)) return [];
  const steps: PlanStep[] = [];
  for (const step of raw.slice(0, 200)) {
    if (typeof step !== "object" || step === null) continue;
    const { text, done } = step as { text?: unknown; done?: unknown };
    if (typeof text === "string" && text) steps.push({ text, done: done === true });
  }
  return steps;
}

/** The waiting proposal, if any, is decided: its run went on or ended. */
function settlePlan(d: Draft): void {
  if (d.s.pendingPlan === null) return;
  const index = d.s.pendingPlan;
  d.s.pendingPlan = null;
  if (d.items[index]?.kind === "plan") d.edit<PlanItem>(index).waiting = false;
}

export function reduce(state: ViewState, batch: readonly (Envelope | unknown)[]): ViewState {
  let draft: Draft | null = null;
  for (const envelope of batch) {
    const parsed = parseEvent(envelope);
    const last = draft ? draft.s.lastSeq : state.lastSeq;
    if (!parsed || !(parsed.seq > last)) continue;
    draft ??= new Draft(state);
    draft.s.lastSeq = parsed.seq;
    if (parsed.event) apply(draft, parsed.event);
  }
  return draft ? draft.finish() : state;
}
