// The journal's event vocabulary (DESIGN.md §4). The OpenAPI document types the envelope
// (`EventOut`) with `data: object`; the per-type payloads are spelled out here.
import type { components } from "./schema";

export type Envelope = components["schemas"]["EventOut"];

export interface UsageData {
  prompt_tokens: number;
  completion_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  cost: number;
  /** set on the usage of a compaction's summary call (not the context's size) */
  compaction?: boolean;
}

/** What a tool declares it may do (`tool.started` `kind`); a `shell` tool also does
 * whatever its command does. Absent in events journaled before tools declared it. */
export interface ToolKind {
  reads: boolean;
  writes: boolean;
  destructive: boolean;
  network: boolean;
  shell: boolean;
}

export interface BudgetHit {
  kind: "tokens" | "cost" | "steps" | "tool_seconds" | "total_cost";
  limit: number;
  used: number;
}

export interface EventData {
  "user.message": { content: string; steering: boolean; attachments?: string[] };
  "run.started": { run_id: string };
  "assistant.thinking.delta": { text: string };
  "assistant.text.delta": { text: string };
  "assistant.message": {
    content: string;
    thinking: string;
    tool_calls: { id: string; name: string; arguments: unknown }[];
  };
  "tool.started": { call_id: string; name: string; arguments: unknown; kind?: ToolKind };
  "tool.output": { call_id: string; stream: "stdout" | "stderr"; text: string };
  "tool.finished": {
    call_id: string;
    is_error: boolean;
    exit_code: number | null;
    output: string;
    truncated: boolean;
    duration_ms: number;
  };
  "approval.requested": {
    request_id: string;
    call_id: string;
    tool: string;
    arguments: unknown;
    risk: string;
    reason: string;
  };
  "approval.resolved": { request_id: string; decision: string };
  "sandbox.status": { status: string; detail: string | null };
  "preview.opened": { port: number; url: string };
  usage: UsageData;
  "context.compacted": {
    tokens_before: number;
    tokens_after: number;
    summary: string;
    upto_seq: number;
  };
  "instructions.loaded": { path: string; bytes?: number; truncated?: boolean };
  retry: { attempt: number; delay_s: number; reason: string };
  "model.changed": { model: string };
  "run.finished": {
    status: "completed" | "failed" | "canceled" | "budget_exceeded";
    error: string | null;
    usage: UsageData;
    budget?: BudgetHit;
  };
}

export type EventType = keyof EventData;

export const EVENT_TYPES: readonly EventType[] = [
  "user.message",
  "run.started",
  "assistant.thinking.delta",
  "assistant.text.delta",
  "assistant.message",
  "tool.started",
  "tool.output",
  "tool.finished",
  "approval.requested",
  "approval.resolved",
  "sandbox.status",
  "preview.opened",
  "usage",
  "context.compacted",
  "instructions.loaded",
  "retry",
  "model.changed",
  "run.finished",
];

/** An envelope whose `data` is typed by its `type`. */
export type BurrowEvent = {
  [K in EventType]: {
    seq: number;
    type: K;
    ts: string;
    run_id: string | null;
    data: EventData[K];
  };
}[EventType];

/** How a payload field is checked at the edge; a wrong or missing value becomes the default. */
type Field = "string" | "id" | "number" | "count" | "bool" | "usage" | "object" | "any";

// Only the fields the client reads are checked; any others pass through untouched.
const SHAPES: { [K in EventType]: Partial<Record<keyof EventData[K], Field>> } = {
  "user.message": { content: "string", steering: "bool" },
  "run.started": { run_id: "string" },
  "assistant.thinking.delta": { text: "string" },
  "assistant.text.delta": { text: "string" },
  "assistant.message": { content: "string", thinking: "string" },
  "tool.started": { call_id: "id", name: "string", arguments: "any", kind: "object" },
  "tool.output": { call_id: "id", text: "string" },
  "tool.finished": { call_id: "id", is_error: "bool", output: "string", truncated: "bool", duration_ms: "count" },
  "approval.requested": { request_id: "id", call_id: "string", tool: "string", arguments: "any", risk: "string", reason: "string" },
  "approval.resolved": { request_id: "id", decision: "string" },
  "sandbox.status": { status: "string" },
  "preview.opened": { port: "count", url: "string" },
  usage: { prompt_tokens: "count", completion_tokens: "count", cost: "number" },
  "context.compacted": { tokens_before: "count", tokens_after: "count", summary: "string" },
  "instructions.loaded": { path: "string", truncated: "bool" },
  "model.changed": { model: "string" },
  retry: { attempt: "count", delay_s: "number", reason: "string" },
  "run.finished": { status: "string", usage: "usage", budget: "object" },
};

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const finite = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** Usage with every field a finite number, whatever arrived (a repaired run sent `{}`). */
export function asUsage(raw: unknown): UsageData {
  const u = isObject(raw) ? raw : {};
  return {
    ...u,
    prompt_tokens: finite(u.prompt_tokens),
    completion_tokens: finite(u.completion_tokens),
    cost: finite(u.cost),
  };
}

function field(kind: Field, v: unknown): unknown {
  switch (kind) {
    case "string":
    case "id":
      return typeof v === "string" ? v : "";
    case "number":
      return finite(v);
    case "count":
      return Math.max(0, Math.round(finite(v)));
    case "bool":
      return v === true;
    case "usage":
      return asUsage(v);
    case "object":
      return isObject(v) ? v : undefined; // optional: absent rather than of the wrong type
    case "any":
      return v;
  }
}

/**
 * The event as the reducer may trust it: null when it cannot be placed (no usable seq), an
 * `event` of null when it still takes its seq but says nothing usable (a call or request
 * without an id). Payload fields the views read get their type, or a default; events of a
 * type this client does not know keep their data as-is.
 */
export function parseEvent(raw: unknown): { seq: number; event: BurrowEvent | null } | null {
  if (!isObject(raw)) return null;
  const { seq, type } = raw;
  if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 1) return null;
  if (typeof type !== "string") return { seq, event: null };
  const data: Record<string, unknown> = isObject(raw.data) ? { ...raw.data } : {};
  const shape: Record<string, Field> | undefined = Object.hasOwn(SHAPES, type)
    ? (SHAPES[type as EventType] as Record<string, Field>)
    : undefined;
  for (const [name, kind] of Object.entries(shape ?? {})) {
    data[name] = field(kind, data[name]);
    if (kind === "id" && !data[name]) return { seq, event: null };
  }
  const runId = typeof raw.run_id === "string" ? raw.run_id : null;
  const ts = typeof raw.ts === "string" ? raw.ts : "";
  const event = { seq, type, ts, run_id: runId, data } as unknown as BurrowEvent;
  return { seq, event };
}
