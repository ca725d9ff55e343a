// Every failed answer becomes an ApiError through one parser (apiError); the messages the UI
// shows are the ones each call showed before there was one: the server's own, else the
// call's generic text. fetch is faked here: this is the client's edge, not the server's.
import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError, api, apiError, errorMessage } from "./client";

const UNREACHABLE = "The server cannot be reached. Is `burrow serve` running?";
const SERVER = { error: { code: "not_found", message: "No such conversation" } };

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const html = (status: number) =>
  new Response("<html>Bad Gateway</html>", { status, headers: { "content-type": "text/html" } });

function answer(response: Response | Error) {
  vi.stubGlobal(
    "fetch",
    vi.fn(() => (response instanceof Error ? Promise.reject(response) : Promise.resolve(response))),
  );
}

async function failed(call: () => Promise<unknown>): Promise<{ status: number; code: string; message: string }> {
  try {
    await call();
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    const { status, code, message } = e as ApiError;
    return { status, code, message };
  }
  throw new Error("the call did not fail");
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("apiError", () => {
  it("takes the server's {error: {code, message}}", () => {
    const e = apiError(404, SERVER, "fallback");
    expect([e.status, e.code, e.message]).toEqual([404, "not_found", "No such conversation"]);
  });

  it.each([
    ["no body", null],
    ["a body without error", { detail: "Not Found" }],
    ["an error that is not an object", { error: null }],
    ["an array", [1, 2]],
    ["text", "Bad Gateway"],
  ])("falls back on %s", (_, body) => {
    const e = apiError(502, body, "GET /api/me failed with 502");
    expect([e.status, e.code, e.message]).toEqual([502, "http_error", "GET /api/me failed with 502"]);
  });
});

describe("the calls' messages", () => {
  const file = new File(["x"], "a.txt");
  // [what, call, generic message for a status]
  const calls: [string, () => Promise<unknown>, (status: number) => string][] = [
    ["a GET", () => api.conversations(), (s) => `GET /api/conversations failed with ${s}`],
    ["a POST", () => api.createConversation(), (s) => `POST /api/conversations failed with ${s}`],
    ["a DELETE", () => api.deleteConversation("c 1"), (s) => `DELETE /api/conversations/c%201 failed with ${s}`],
    ["an upload", () => api.upload("c1", file), (s) => `Upload failed (${s})`],
    ["an extract", () => api.extract("c1", file), (s) => `HTTP ${s}`],
    ["a file's text", () => api.fileText("c1", "a.txt"), (s) => `HTTP ${s}`],
    ["a file to edit", () => api.fileForEdit("c1", "a.txt"), (s) => `HTTP ${s}`],
    ["a save", () => api.saveFile("c1", "a.txt", "x", null), (s) => `HTTP ${s}`],
  ];

  it.each(calls)("%s shows the server's message", async (_, call) => {
    answer(json(404, SERVER));
    expect(await failed(call)).toEqual({ status: 404, code: "not_found", message: "No such conversation" });
  });

  it.each(calls)("%s shows its generic message for a page that is not JSON", async (_, call, generic) => {
    answer(html(502));
    expect(await failed(call)).toEqual({ status: 502, code: "http_error", message: generic(502) });
  });

  it.each(calls)("%s shows its generic message for JSON without an error", async (_, call, generic) => {
    answer(json(422, { detail: [{ msg: "field required" }] }));
    expect(await failed(call)).toEqual({ status: 422, code: "http_error", message: generic(422) });
  });

  it.each(calls.filter(([what]) => !what.startsWith("a file")))(
    "%s says the server cannot be reached when fetch fails",
    async (_, call) => {
      answer(new TypeError("Failed to fetch"));
      expect(await failed(call)).toEqual({ status: 0, code: "network", message: UNREACHABLE });
    },
  );

  it("a file read passes fetch's own failure on, as before", async () => {
    answer(new TypeError("Failed to fetch"));
    await expect(api.fileText("c1", "a.txt")).rejects.toThrow("Failed to fetch");
    await expect(api.fileForEdit("c1", "a.txt")).rejects.toThrow("Failed to fetch");
  });

  it("an upload the server answers without a path fails as an upload", async () => {
    answer(json(200, { files: [] }));
    expect(await failed(() => api.upload("c1", file))).toEqual({
      status: 200,
      code: "http_error",
      message: "Upload failed (200)",
    });
  });

  it("a refused save keeps the code the editor looks for", async () => {
    answer(json(412, { error: { code: "file_changed", message: "The file changed" } }));
    expect((await failed(() => api.saveFile("c1", "a.txt", "x", "etag"))).code).toBe("file_changed");
  });

  it("a success still answers as before", async () => {
    answer(json(201, { files: [".burrow/attachments/ab-a.txt"] }));
    expect(await api.upload("c1", file)).toBe(".burrow/attachments/ab-a.txt");
    answer(new Response(null, { status: 204 }));
    expect(await api.deleteConversation("c1")).toBeUndefined();
  });
});

describe("errorMessage", () => {
  it("is an Error's message, or anything else as text", () => {
    expect(errorMessage(new ApiError(500, "x", "It broke"))).toBe("It broke");
    expect(errorMessage(new Error("plain"))).toBe("plain");
    expect(errorMessage("just text")).toBe("just text");
    expect(errorMessage(42)).toBe("42");
  });
});
