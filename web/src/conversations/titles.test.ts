import { describe, expect, it } from "vitest";
import { forkTitle, titleFrom } from "./titles";

describe("fork titles", () => {
  it("marks a fork once, however deep", () => {
    expect(forkTitle("tour")).toBe("tour (fork)");
    expect(forkTitle("tour (fork)")).toBe("tour (fork)");
    expect(forkTitle("tour (fork) (fork)")).toBe("tour (fork)");
    expect(forkTitle("(fork)")).toBe("New conversation (fork)");
  });
  it("takes the edited first message's title", () => {
    expect(forkTitle("tour (fork)", "Build a blog\nwith tags")).toBe("Build a blog");
    expect(forkTitle("x", "a".repeat(80))).toBe(titleFrom("a".repeat(80)));
  });
});
