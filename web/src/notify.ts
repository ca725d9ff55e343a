// Browser notifications for a person who is in another tab: a run needs their approval, or
// it ended. Off until they turn it on in Settings (the permission is asked on that click);
// only while the tab is hidden; one per change of the run, and one slot per conversation
// (the tag), so a new one replaces the last instead of piling up.
import { useEffect, useRef } from "react";
import type { RunStatus } from "./timeline/reducer";

export const NOTIFY_KEY = "burrow.notify";

export type Permission = NotificationPermission | "unsupported";

export function permission(): Permission {
  return typeof Notification === "undefined" ? "unsupported" : Notification.permission;
}

function stored(): boolean {
  try {
    return localStorage.getItem(NOTIFY_KEY) === "on";
  } catch {
    return false;
  }
}

export function notificationsOn(): boolean {
  return stored() && permission() === "granted";
}

/** Turn them on (asks the browser's permission: call it from a click) or off. */
export async function setNotifications(on: boolean): Promise<Permission> {
  let granted = permission();
  if (on && granted === "default") granted = await Notification.requestPermission();
  try {
    if (on && granted === "granted") localStorage.setItem(NOTIFY_KEY, "on");
    else localStorage.removeItem(NOTIFY_KEY);
  } catch {
    // not remembered
  }
  return granted;
}

export interface RunSnapshot {
  status: RunStatus;
  failed: boolean; // at rest after a failed run
}

/** What changed that a person away from the tab wants to know, or null. */
export function noticeFor(prev: RunSnapshot, next: RunSnapshot): string | null {
  if (next.status === "waiting_approval" && prev.status !== "waiting_approval") {
    return "The agent needs your approval to go on.";
  }
  if (next.status === "idle" && prev.status !== "idle") {
    return next.failed ? "The run failed." : "The run finished.";
  }
  return null;
}

/** Shows the notice for `prev` -> `next` when the tab is hidden and they are on. */
export function notifyChange(
  cid: string,
  title: string,
  prev: RunSnapshot,
  next: RunSnapshot,
): Notification | null {
  if (!document.hidden || !notificationsOn()) return null;
  const body = noticeFor(prev, next);
  if (!body) return null;
  const shown = new Notification(title, { body, tag: `burrow-${cid}`, icon: "/icon-192.png" });
  shown.onclick = () => {
    window.focus();
    shown.close();
  };
  return shown;
}

/** Notifies on each change of the open conversation's run (not on first sight of it). */
export function useRunNotifications(cid: string, title: string, status: RunStatus, failed: boolean): void {
  const last = useRef<{ cid: string; run: RunSnapshot } | null>(null);
  useEffect(() => {
    const run = { status, failed };
    const prev = last.current;
    if (prev && prev.cid === cid && prev.run.status !== status) notifyChange(cid, title, prev.run, run);
    last.current = { cid, run };
  }, [cid, title, status, failed]);
}
