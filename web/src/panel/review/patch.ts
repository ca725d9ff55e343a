// One file's unified diff (git diff-tree -p) as hunks of numbered lines, for the review.

export type LineKind = "add" | "del" | "ctx";

export interface DiffLine {
  kind: LineKind;
  old: number | null; // its number in the old file (null: added)
  new: number | null; // its number in the new file (null: deleted)
  text: string;
}

export interface Hunk {
  header: string; // "@@ -1,3 +1,4 @@ def f():"
  lines: DiffLine[];
}

const HUNK = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

/** The hunks of `patch`; its file header lines (diff --git, index, ---, +++) are skipped,
 * and so is "\ No newline at end of file". */
export function parsePatch(patch: string): Hunk[] {
  const hunks: Hunk[] = [];
  let current: Hunk | null = null;
  let oldNo = 0;
  let newNo = 0;
  for (const line of patch.split("\n")) {
    const start = HUNK.exec(line);
    if (start) {
      current = { header: line, lines: [] };
      hunks.push(current);
      oldNo = Number(start[1]);
      newNo = Number(start[2]);
      continue;
    }
    if (!current || line.startsWith("\\")) continue;
    const mark = line[0];
    const text = line.slice(1);
    if (mark === "+") current.lines.push({ kind: "add", old: null, new: newNo++, text });
    else if (mark === "-") current.lines.push({ kind: "del", old: oldNo++, new: null, text });
    else if (mark === " ") current.lines.push({ kind: "ctx", old: oldNo++, new: newNo++, text });
    // anything else (an empty last line) is not part of a hunk
  }
  return hunks;
}

export interface Row {
  left: DiffLine | null;
  right: DiffLine | null;
}

/** A hunk side by side: context on both sides, each run of deletions paired with the
 * additions that follow it, line by line. */
export function sideBySide(hunk: Hunk): Row[] {
  const rows: Row[] = [];
  const lines = hunk.lines;
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.kind === "ctx") {
      rows.push({ left: line, right: line });
      i++;
      continue;
    }
    const dels: DiffLine[] = [];
    const adds: DiffLine[] = [];
    while (i < lines.length && lines[i]!.kind === "del") dels.push(lines[i++]!);
    while (i < lines.length && lines[i]!.kind === "add") adds.push(lines[i++]!);
    for (let k = 0; k < Math.max(dels.length, adds.length); k++) {
      rows.push({ left: dels[k] ?? null, right: adds[k] ?? null });
    }
  }
  return rows;
}

/** A short fingerprint of a file's patch: a "reviewed" mark holds while it is unchanged. */
export function fingerprint(patch: string): string {
  let h = 0x811c9dc5; // FNV-1a, 32 bits: enough to tell a changed patch from the same one
  for (let i = 0; i < patch.length; i++) {
    h ^= patch.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return `${patch.length.toString(36)}.${h.toString(36)}`;
}
