// The browser's event types are the server's: events.ts derives them from events.gen.ts
// (generated from burrow/runs/journal/events.py by `make web`), and parseEvent keeps its defaults.
import { describe, expect, expectTypeOf, it } from "vitest";
import type { components } from "./events.gen";
import { type BurrowEvent, EVENT_TYPES, type EventData, parseEvent } from "./events";
// The schema events.gen.ts was generated from, as `make web` wrote it.
import generated from "../../events.json?raw";

type Schemas = components["schemas"];

// Checked by tsc (`npm run typecheck`): a hand-written type in place of a generated one fails.
expectTypeOf<EventData["tool.finished"]>().toEqualTypeOf<Schemas["ToolFinished"]>();
expectTypeOf<EventData["run.finished"]["usage"]>().toEqualTypeOf<Schemas["Usage"]>();
expectTypeOf<Extract<BurrowEvent, { type: "retry" }>["data"]>().toEqualTypeOf<Schemas["Retry"]>();

const document = JSON.parse(generated) as { components: { schemas: Record<string, { properties: Record<string, unknown> }> } };
const schemas = document.components.schemas;

describe("the event vocabulary", () => {
  it("lists exactly the server's event types", () => {
    expect([...EVENT_TYPES].sort()).toEqual(Object.keys(schemas.EventData!.properties).sort());
  });

  it("keeps DESIGN §4's field names", () => {
    expect(Object.keys(schemas.ToolFinished!.properties)).toEqual([
      "call_id",
      "is_error",
      "exit_code",
      "output",
      "truncated",
      "duration_ms",
      "approval_wait_ms", // additive (§8: approval waits shown apart from run time)
      "parent_call_id", // DESIGN §8: on a subagent's events (every type), listed last
    ]);
    expect(Object.keys(schemas.ContextCompacted!.properties)).toEqual([
      "tokens_before",
      "tokens_after",
      "summary",
      "upto_seq",
      "parent_call_id",
    ]);
  });
});

describe("parseEvent", () => {
  it("defaults missing fields and passes unknown types through", () => {
    const finished = parseEvent({ seq: 3, type: "tool.finished", data: { call_id: "c1" } });
    expect(finished?.event?.data).toMatchObject({ call_id: "c1", output: "", is_error: false });
    const future = parseEvent({ seq: 4, type: "tool.exploded", data: { any: [1] } });
    expect(future?.event).toMatchObject({ type: "tool.exploded", data: { any: [1] } });
    expect(parseEvent({ seq: 5, type: "run.finished", data: {} })?.event?.data).toMatchObject({
      usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 },
    });
  });
});
