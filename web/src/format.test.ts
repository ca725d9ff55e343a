import { describe, expect, it } from "vitest";
import { modelLabel } from "./format";

describe("modelLabel", () => {
  it("keeps a model's name and provider, and cuts a server path to its last part", () => {
    expect(modelLabel("gpt-4.1")).toBe("gpt-4.1");
    expect(modelLabel("anthropic:claude-sonnet-4-6")).toBe("anthropic:claude-sonnet-4-6");
    expect(modelLabel("vllm:Qwen/Qwen2.5-Coder-7B")).toBe("vllm:Qwen/Qwen2.5-Coder-7B"); // a hub name
    expect(modelLabel("vllm:/models/llama-3-8b")).toBe("vllm:llama-3-8b");
    expect(modelLabel("scripted:/srv/burrow/tests/script.json")).toBe("scripted:script.json");
    expect(modelLabel("/opt/models/x.gguf")).toBe("x.gguf");
  });
});
