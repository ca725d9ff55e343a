// The keyboard shortcuts: one table, which both the handler and the "?" list read.
export type ShortcutAction = "stop" | "new" | "focus" | "search" | "help";

export interface Shortcut {
  action: ShortcutAction;
  keys: string; // as shown in the list
  does: string;
}

export const SHORTCUTS: readonly Shortcut[] = [
  { action: "stop", keys: "Esc", does: "Stop the running agent" },
  { action: "new", keys: "Ctrl+Shift+O  (⌘⇧O)", does: "New conversation" },
  { action: "focus", keys: "/", does: "Focus the message box" },
  { action: "search", keys: "Ctrl+K  (⌘K)", does: "Search conversations" },
  { action: "help", keys: "?", does: "Show these shortcuts" },
];

export const COMPOSER_ID = "composer-input";

/** What the key event asks for, or null. Single keys ("/", "?") count only when no text field
 * has focus; Esc is left to open dialogs, the terminal and the field being edited (where it
 * cancels), but in the message box it stops the run. */
export function shortcutFor(e: KeyboardEvent): ShortcutAction | null {
  if (e.isComposing || e.defaultPrevented) return null;
  const target = e.target instanceof Element ? e.target : null;
  const inTerminal = !!target?.closest(".xterm");
  const inDialog = !!target?.closest("dialog") || !!document.querySelector("dialog[open]");
  const typing =
    !!target &&
    (target instanceof HTMLInputElement ||
      target instanceof HTMLTextAreaElement ||
      target instanceof HTMLSelectElement ||
      (target instanceof HTMLElement && target.isContentEditable));
  if (inTerminal || inDialog) return null;
  const mod = e.ctrlKey || e.metaKey;
  if (mod && e.shiftKey && !e.altKey && e.key.toLowerCase() === "o") return "new";
  if (mod && !e.shiftKey && !e.altKey && e.key.toLowerCase() === "k") return "search";
  if (mod || e.altKey) return null;
  if (e.key === "Escape") return !typing || target?.id === COMPOSER_ID ? "stop" : null;
  if (typing) return null;
  if (e.key === "/") return "focus";
  if (e.key === "?") return "help";
  return null;
}
