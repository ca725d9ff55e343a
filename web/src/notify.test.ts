// @vitest-environment jsdom
// When a person in another tab is told about a run, and when they are left alone.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { noticeFor, notifyChange, permission, setNotifications, type RunSnapshot } from "./notify";

class FakeNotification {
  static permission: NotificationPermission = "default";
  static asked = 0;
  static shown: FakeNotification[] = [];
  static async requestPermission(): Promise<NotificationPermission> {
    FakeNotification.asked += 1;
    FakeNotification.permission = "granted";
    return "granted";
  }
  onclick: (() => void) | null = null;
  constructor(
    public title: string,
    public options: NotificationOptions,
  ) {
    FakeNotification.shown.push(this);
  }
  close() {}
}

function hidden(value: boolean) {
  Object.defineProperty(document, "hidden", { value, configurable: true });
}

const running: RunSnapshot = { status: "running", failed: false };
const waiting: RunSnapshot = { status: "waiting_approval", failed: false };
const done: RunSnapshot = { status: "idle", failed: false };
const failed: RunSnapshot = { status: "idle", failed: true };

const grant = FakeNotification.requestPermission;

beforeEach(() => {
  FakeNotification.requestPermission = grant;
  FakeNotification.permission = "default";
  FakeNotification.asked = 0;
  FakeNotification.shown = [];
  (globalThis as { Notification?: unknown }).Notification = FakeNotification;
  localStorage.clear();
  hidden(true);
});

afterEach(() => {
  delete (globalThis as { Notification?: unknown }).Notification;
});

describe("noticeFor", () => {
  it("tells of an approval wanted and of a run that ended, nothing else", () => {
    expect(noticeFor(running, waiting)).toMatch(/approval/);
    expect(noticeFor(running, done)).toBe("The run finished.");
    expect(noticeFor(waiting, failed)).toBe("The run failed.");
    expect(noticeFor(done, running)).toBeNull();
    expect(noticeFor(waiting, running)).toBeNull(); // the person just answered
    expect(noticeFor(waiting, waiting)).toBeNull();
  });
});

describe("notifyChange", () => {
  it("is silent until turned on, and asks permission only when turned on", async () => {
    expect(notifyChange("c1", "Todo app", running, done)).toBeNull();
    expect(FakeNotification.asked).toBe(0);
    expect(await setNotifications(true)).toBe("granted");
    expect(FakeNotification.asked).toBe(1);
    const shown = notifyChange("c1", "Todo app", running, waiting);
    expect(shown).not.toBeNull();
    expect(FakeNotification.shown.map((n) => [n.title, n.options.tag])).toEqual([["Todo app", "burrow-c1"]]);
  });

  it("stays quiet while the tab is visible, and once turned off", async () => {
    await setNotifications(true);
    hidden(false);
    expect(notifyChange("c1", "t", running, done)).toBeNull();
    hidden(true);
    await setNotifications(false);
    expect(notifyChange("c1", "t", running, done)).toBeNull();
    expect(FakeNotification.shown).toEqual([]);
  });

  it("never turns on without the browser's permission", async () => {
    FakeNotification.requestPermission = async () => "denied";
    FakeNotification.permission = "default";
    expect(await setNotifications(true)).toBe("denied");
    FakeNotification.permission = "denied";
    expect(notifyChange("c1", "t", running, done)).toBeNull();
  });

  it("knows a browser without notifications", () => {
    delete (globalThis as { Notification?: unknown }).Notification;
    expect(permission()).toBe("unsupported");
    expect(notifyChange("c1", "t", running, done)).toBeNull();
  });
});
