// The side panel's tab, remembered across conversations and reloads (one choice per app).
import type { Tab } from "./SidePanel";

const KEY = "burrow.panelTab";
const TABS: readonly Tab[] = ["preview", "terminal", "files", "changes"];

export function rememberedTab(fallback: Tab = "files"): Tab {
  try {
    const saved = localStorage.getItem(KEY);
    return TABS.includes(saved as Tab) ? (saved as Tab) : fallback;
  } catch {
    return fallback; // storage refused (privacy mode): the default
  }
}

export function rememberTab(tab: Tab): void {
  try {
    localStorage.setItem(KEY, tab);
  } catch {
    // not remembered; the tab still changes
  }
}
