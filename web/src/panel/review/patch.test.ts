import { describe, expect, it } from "vitest";
import { reviewMessage } from "./comments";
import { fingerprint, parsePatch, sideBySide } from "./patch";

const PATCH = [
  "diff --git a/app.py b/app.py",
  "index 1..2 100644",
  "--- a/app.py",
  "+++ b/app.py",
  "@@ -1,4 +1,4 @@ def main():",
  " import os",
  "-print('a')",
  "-print('b')",
  "+print('A')",
  " x = 1",
  "@@ -10,2 +10,3 @@",
  " y = 2",
  "+z = 3",
  " w = 4",
  "\\ No newline at end of file",
  "",
].join("\n");

describe("parsePatch", () => {
  it("numbers every line on its side, hunk by hunk", () => {
    const [first, second] = parsePatch(PATCH);
    expect(first!.header).toBe("@@ -1,4 +1,4 @@ def main():");
    expect(first!.lines.map((l) => [l.kind, l.old, l.new, l.text])).toEqual([
      ["ctx", 1, 1, "import os"],
      ["del", 2, null, "print('a')"],
      ["del", 3, null, "print('b')"],
      ["add", null, 2, "print('A')"],
      ["ctx", 4, 3, "x = 1"],
    ]);
    expect(second!.lines.map((l) => [l.kind, l.old, l.new])).toEqual([
      ["ctx", 10, 10],
      ["add", null, 11],
      ["ctx", 11, 12],
    ]);
  });

  it("pairs deletions with the additions after them, side by side", () => {
    const rows = sideBySide(parsePatch(PATCH)[0]!);
    expect(rows.map((r) => [r.left?.text ?? null, r.right?.text ?? null])).toEqual([
      ["import os", "import os"],
      ["print('a')", "print('A')"],
      ["print('b')", null],
      ["x = 1", "x = 1"],
    ]);
  });

  it("has no hunks for a binary or empty patch", () => {
    expect(parsePatch("Binary files a/x and b/x differ\n")).toEqual([]);
    expect(parsePatch("")).toEqual([]);
  });

  it("fingerprints a changed patch differently", () => {
    expect(fingerprint(PATCH)).toBe(fingerprint(PATCH));
    expect(fingerprint(PATCH)).not.toBe(fingerprint(PATCH.replace("'A'", "'B'")));
  });
});

describe("reviewMessage", () => {
  it("gathers every comment by file, each with its line", () => {
    const [hunk] = parsePatch(PATCH);
    const text = reviewMessage([
      { path: "app.py", line: hunk!.lines[3]!, text: "use a constant" },
      { path: "app.py", line: hunk!.lines[1]!, text: "why remove `a`?" },
      { path: "README.md", line: { kind: "ctx", old: 3, new: 3, text: "`x`" }, text: "typo" },
    ]);
    expect(text).toBe(
      [
        "Please address these review comments on your changes:",
        "",
        "app.py:",
        "- line 2 (`+print('A')`): use a constant",
        "- deleted line 2 (`-print('a')`): why remove `a`?",
        "",
        "README.md:",
        "- line 3 (` 'x'`): typo",
      ].join("\n"),
    );
  });
});
