// @vitest-environment jsdom
// One fetch of the model list per picker, the current model kept in front when the server
// does not list it, and none (not an error) when the server cannot list them.
import { act, createElement } from "react";
import { createRoot } from "react-dom/client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type ModelChoice, modelChoices, modelLabel, useModels } from "./useModels";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

afterEach(() => {
  vi.unstubAllGlobals();
});

/** What the hook returns after its fetch settled, and how often the models were asked for. */
async function shown(current: string | null | undefined, answer: () => Promise<Response>) {
  const fetch = vi.fn((_url: string) => answer());
  vi.stubGlobal("fetch", fetch);
  let seen: string[] = [];
  function Probe() {
    seen = useModels(current).map((m) => m.id);
    return null;
  }
  const root = createRoot(document.createElement("div"));
  await act(async () => root.render(createElement(Probe)));
  await act(async () => root.render(createElement(Probe))); // a re-render does not fetch again
  act(() => root.unmount());
  return { seen, calls: fetch.mock.calls.map(([url]) => url) };
}

const listed = () =>
  Promise.resolve(
    new Response(JSON.stringify([{ id: "gpt-a" }, { id: "gpt-b" }]), {
      headers: { "content-type": "application/json" },
    }),
  );

describe("useModels", () => {
  it("fetches the server's models once", async () => {
    const { seen, calls } = await shown(null, listed);
    expect(seen).toEqual(["gpt-a", "gpt-b"]);
    expect(calls).toEqual(["/api/settings/models"]);
  });

  it("puts a current model the server does not list first", async () => {
    expect((await shown("old-model", listed)).seen).toEqual(["old-model", "gpt-a", "gpt-b"]);
    expect((await shown("gpt-b", listed)).seen).toEqual(["gpt-a", "gpt-b"]);
  });

  it("offers none, or just the current one, when the list fails", async () => {
    const down = () => Promise.resolve(new Response("", { status: 404 }));
    expect((await shown(undefined, down)).seen).toEqual([]);
    expect((await shown("mine", () => Promise.reject(new TypeError("offline")))).seen).toEqual(["mine"]);
  });
});

describe("modelChoices", () => {
  it("keeps the list as it is when there is no current model or it is listed", () => {
    const known: ModelChoice[] = [{ id: "a" }, { id: "b" }];
    expect(modelChoices(known, null)).toBe(known);
    expect(modelChoices(known, undefined)).toBe(known);
    expect(modelChoices(known, "")).toBe(known);
    expect(modelChoices(known, "b")).toBe(known);
    expect(modelChoices(known, "c").map((m) => m.id)).toEqual(["c", "a", "b"]);
  });
});

describe("modelLabel", () => {
  it("names the provider, the window and vision where they are known", () => {
    expect(modelLabel({ id: "anthropic:claude-x", context_window: 200_000, vision: true })).toBe(
      "claude-x · anthropic · 200k · images",
    );
    expect(modelLabel({ id: "llama3.2:3b", context_window: 8192, vision: false })).toBe("llama3.2:3b · openai · 8k");
    expect(modelLabel({ id: "openai:gpt-x", context_window: 1_047_576 })).toBe("gpt-x · openai · 1M");
    expect(modelLabel({ id: "mine" })).toBe("mine · openai");
    // A named server's model: its id is the provider, and the rest (colons too) the name.
    expect(modelLabel({ id: "ollama:llama3.2:8b", provider: "ollama", context_window: 8192 })).toBe(
      "llama3.2:8b · ollama · 8k",
    );
  });
});
