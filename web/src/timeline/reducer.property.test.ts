// The reducer is total: any sequence of events (random, partial, malformed, duplicated,
// reordered) reduces without throwing to a state every view can render.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EVENT_TYPES } from "../api/events";
import { type Item, type ViewState, initialState, reduce } from "./reducer";

const ids = fc.constantFrom("c1", "c2", "q1", "q2", "r1", "__proto__", "");
const junk = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.constant({}),
  fc.array(fc.integer(), { maxLength: 2 }),
);
const value = (good: fc.Arbitrary<unknown>) => fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: junk });
const usage = fc.oneof(
  fc.record(
    { prompt_tokens: value(fc.nat()), completion_tokens: value(fc.nat()), cost: value(fc.double({ min: 0, max: 1, noNaN: true })) },
    { requiredKeys: [] },
  ),
  junk,
);

/** A payload with the fields events carry, each maybe missing or of the wrong type. */
const data = fc.oneof(
  fc.record(
    {
      content: value(fc.string({ maxLength: 8 })),
      steering: value(fc.boolean()),
      run_id: value(fc.constantFrom("r1", "r2")),
      text: value(fc.string({ maxLength: 8 })),
      thinking: value(fc.string({ maxLength: 8 })),
      call_id: value(ids),
      request_id: value(ids),
      name: value(fc.constantFrom("bash", "write_file", "preview")),
      arguments: junk,
      stream: value(fc.constantFrom("stdout", "stderr")),
      is_error: value(fc.boolean()),
      exit_code: value(fc.integer({ min: 0, max: 2 })),
      output: value(fc.string({ maxLength: 8 })),
      duration_ms: value(fc.nat()),
      decision: value(fc.constantFrom("allow_once", "deny")),
      tool: value(fc.constantFrom("bash")),
      status: value(fc.constantFrom("completed", "failed", "canceled", "ready", "hibernated", "failed")),
      detail: value(fc.string({ maxLength: 8 })),
      port: value(fc.integer({ min: 1, max: 65535 })),
      url: value(fc.webUrl()),
      prompt_tokens: value(fc.nat()),
      completion_tokens: value(fc.nat()),
      cost: value(fc.double({ min: 0, max: 1, noNaN: true })),
      usage,
      tokens_before: value(fc.nat()),
      summary: value(fc.string({ maxLength: 8 })),
      path: value(fc.string({ maxLength: 8 })),
      model: value(fc.constantFrom("demo", "openai:gpt-test")),
      attachments: value(fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 })),
      tokens_after: value(fc.nat()),
      parent_call_id: value(ids),
    },
    { requiredKeys: [] },
  ),
  junk,
);

const envelope = fc.record(
  {
    seq: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 1, max: 40 }) }, { weight: 1, arbitrary: junk }),
    type: fc.oneof({ weight: 9, arbitrary: fc.constantFrom(...EVENT_TYPES) }, { weight: 1, arbitrary: fc.string({ maxLength: 5 }) }),
    ts: fc.constant("2026-11-30T00:00:00Z"),
    run_id: fc.constantFrom("r1", "r2", null, 7),
    data,
  },
  { requiredKeys: ["seq", "type"] },
);
const events = fc.array(fc.oneof({ weight: 19, arbitrary: envelope }, { weight: 1, arbitrary: fc.anything() }), {
  maxLength: 60,
});

const finite = (n: unknown) => typeof n === "number" && Number.isFinite(n);

function usable(item: Item): boolean {
  switch (item.kind) {
    case "user":
      return typeof item.content === "string";
    case "assistant":
      return typeof item.text === "string" && typeof item.thinking === "string";
    case "tool":
      if (item.sub) check(item.sub);
      return (
        typeof item.name === "string" &&
        item.output.every((c) => typeof c.text === "string") &&
        (item.result === null || (typeof item.result.output === "string" && finite(item.result.durationMs)))
      );
    case "approval":
      return typeof item.tool === "string" && typeof item.reason === "string";
    case "run.finished":
      return [item.usage.prompt_tokens, item.usage.completion_tokens, item.usage.cost].every(finite);
    case "notice":
      return typeof item.text === "string";
    case "compaction":
      return finite(item.tokensBefore) && finite(item.tokensAfter) && typeof item.summary === "string";
    case "plan":
      return (
        item.steps.every((s) => typeof s.text === "string" && typeof s.done === "boolean") &&
        typeof item.waiting === "boolean"
      );
  }
}

/** What the views rely on: numbers are numbers, indexes point at the right items. */
function check(state: ViewState): void {
  expect(Number.isSafeInteger(state.lastSeq)).toBe(true);
  expect([state.usage.prompt_tokens, state.usage.completion_tokens, state.usage.cost].every(finite)).toBe(true);
  for (const item of state.items) expect(usable(item), JSON.stringify(item)).toBe(true);
  expect(new Set(state.items.map((i) => i.key)).size).toBe(state.items.length);
  for (const [callId, index] of Object.entries(state.tools)) {
    const item = state.items[index];
    expect(item?.kind === "tool" && item.callId === callId).toBe(true);
  }
  for (const [requestId, index] of Object.entries(state.approvals)) {
    const item = state.items[index];
    expect(item?.kind === "approval" && item.requestId === requestId).toBe(true);
  }
  if (state.openAssistant >= 0) expect(state.items[state.openAssistant]?.kind).toBe("assistant");
}

describe("reduce over any events", () => {
  it("never throws and always leaves a renderable state", () => {
    fc.assert(
      fc.property(events, (batch) => {
        check(reduce(initialState, batch));
      }),
      { numRuns: 2000 },
    );
  });

  it("gives one view whether fed as a batch, one by one, or twice", () => {
    fc.assert(
      fc.property(events, fc.nat(60), (batch, cut) => {
        const whole = reduce(initialState, batch);
        const single = batch.reduce<ViewState>((s, e) => reduce(s, [e]), initialState);
        const split = reduce(reduce(initialState, batch.slice(0, cut)), batch.slice(cut));
        expect(single).toEqual(whole);
        expect(split).toEqual(whole);
        expect(reduce(whole, batch)).toBe(whole); // all duplicates: nothing changes
      }),
      { numRuns: 1000 },
    );
  });

  it("survives reordering and duplication of a journal", () => {
    fc.assert(
      fc.property(events, fc.array(fc.nat(59), { maxLength: 30 }), (batch, picks) => {
        const repeats = picks.map((i) => batch[i % Math.max(1, batch.length)]);
        check(reduce(reduce(initialState, [...batch, ...repeats].reverse()), batch));
      }),
      { numRuns: 1000 },
    );
  });
});
