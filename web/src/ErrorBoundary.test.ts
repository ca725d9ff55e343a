// @vitest-environment jsdom
// A view that throws while drawing leaves a message and a way out, never a blank page.
import { act, createElement } from "react";
import { createRoot } from "react-dom/client";
import { describe, expect, it, vi } from "vitest";
import { ErrorBoundary } from "./ErrorBoundary";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

function Broken(): never {
  throw new TypeError("Cannot read properties of undefined (reading 'toFixed')");
}

describe("ErrorBoundary", () => {
  it("shows what failed and leads back to the list", () => {
    const host = document.createElement("div");
    document.body.append(host);
    const onLeave = vi.fn();
    const quiet = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const root = createRoot(host);
    const children = createElement(Broken);
    act(() => root.render(createElement(ErrorBoundary, { what: "this conversation", onLeave, children })));
    const alert = host.querySelector('[role="alert"]');
    expect(alert?.textContent).toContain("Burrow could not show this conversation.");
    expect(alert?.textContent).toContain("reading 'toFixed'");
    const back = [...host.querySelectorAll("button")].find((b) => b.textContent === "Back to conversations");
    act(() => back?.click());
    expect(onLeave).toHaveBeenCalledOnce();
    act(() => root.unmount());
    quiet.mockRestore();
  });
});
