// @vitest-environment jsdom
// Which key means what, and where a key is left to the field or the terminal that has focus.
import { afterEach, describe, expect, it } from "vitest";
import { COMPOSER_ID, shortcutFor } from "./shortcuts";
import { resolve } from "./theme";

function press(target: Element, key: string, init: KeyboardEventInit = {}) {
  let seen: ReturnType<typeof shortcutFor> = null;
  const listener = (e: KeyboardEvent) => (seen = shortcutFor(e));
  window.addEventListener("keydown", listener);
  target.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true, ...init }));
  window.removeEventListener("keydown", listener);
  return seen;
}

function add<K extends keyof HTMLElementTagNameMap>(tag: K, setup?: (el: HTMLElementTagNameMap[K]) => void) {
  const el = document.createElement(tag);
  setup?.(el);
  document.body.append(el);
  return el;
}

afterEach(() => document.body.replaceChildren());

describe("shortcutFor", () => {
  it("maps the keys on the page", () => {
    expect(press(document.body, "Escape")).toBe("stop");
    expect(press(document.body, "/")).toBe("focus");
    expect(press(document.body, "?", { shiftKey: true })).toBe("help");
    expect(press(document.body, "O", { ctrlKey: true, shiftKey: true })).toBe("new");
    expect(press(document.body, "o", { metaKey: true, shiftKey: true })).toBe("new");
    expect(press(document.body, "o", { ctrlKey: true })).toBeNull();
    expect(press(document.body, "k", { ctrlKey: true })).toBe("search");
    expect(press(document.body, "K", { metaKey: true })).toBe("search");
    expect(press(add("textarea"), "k", { ctrlKey: true })).toBe("search"); // from the composer too
    expect(press(document.body, "x")).toBeNull();
  });

  it("leaves single keys to text fields, and Esc to all but the message box", () => {
    const composer = add("textarea", (t) => (t.id = COMPOSER_ID));
    const rename = add("input");
    expect(press(composer, "/")).toBeNull();
    expect(press(composer, "?")).toBeNull();
    expect(press(composer, "Escape")).toBe("stop");
    expect(press(rename, "Escape")).toBeNull(); // cancels the rename instead
    expect(press(rename, "O", { ctrlKey: true, shiftKey: true })).toBe("new");
  });

  it("leaves every key to the terminal and to open dialogs", () => {
    const terminal = add("div", (d) => (d.className = "xterm"));
    const inner = document.createElement("textarea");
    terminal.append(inner);
    expect(press(inner, "Escape")).toBeNull();
    expect(press(inner, "O", { ctrlKey: true, shiftKey: true })).toBeNull();
    add("dialog", (d) => d.setAttribute("open", ""));
    expect(press(document.body, "Escape")).toBeNull();
    expect(press(document.body, "?")).toBeNull();
  });

  it("ignores keys an IME is composing", () => {
    expect(press(document.body, "Escape", { isComposing: true })).toBeNull();
  });
});

describe("theme", () => {
  it("follows the system unless a theme was chosen", () => {
    expect(resolve("system", true)).toBe("light");
    expect(resolve("system", false)).toBe("dark");
    expect(resolve("dark", true)).toBe("dark");
    expect(resolve("light", false)).toBe("light");
  });
});
