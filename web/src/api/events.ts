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

/** The envelope as it arrives; events of a type this client does not know are kept as-is. */
export function asEvent(envelope: Envelope): BurrowEvent {
  return envelope as unknown as BurrowEvent;
}
