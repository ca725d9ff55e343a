// Review comments on lines of the Changes tab, sent to the agent as one message, and the
// per-file "reviewed" marks (kept in this browser, reset when the file's diff changes).
import type { DiffLine } from "./patch";

export interface ReviewComment {
  path: string;
  line: DiffLine;
  text: string;
}

/** A line's place in its file's diff, which outlives a reload of the diff (the same
 * path, the same old and new numbers); DiffLine objects are parsed anew each time. */
export function lineKey(path: string, line: DiffLine): string {
  return `${path}:${line.old ?? "-"}:${line.new ?? "-"}`;
}

/** Where a comment points: the new file's line, or the old one's for a deleted line. */
export function lineLabel(line: DiffLine): string {
  return line.new !== null ? `line ${line.new}` : `deleted line ${line.old}`;
}

/** The follow-up message: every comment, grouped by file, each with the line it is on. */
export function reviewMessage(comments: ReviewComment[]): string {
  const byFile = new Map<string, ReviewComment[]>();
  for (const c of comments) byFile.set(c.path, [...(byFile.get(c.path) ?? []), c]);
  const parts = ["Please address these review comments on your changes:"];
  for (const [path, list] of byFile) {
    parts.push("", `${path}:`);
    for (const c of list) {
      const sign = c.line.kind === "add" ? "+" : c.line.kind === "del" ? "-" : " ";
      const quoted = c.line.text.length > 200 ? `${c.line.text.slice(0, 200)}…` : c.line.text;
      parts.push(`- ${lineLabel(c.line)} (\`${sign}${quoted.replaceAll("`", "'")}\`): ${c.text}`);
    }
  }
  return parts.join("\n");
}

const KEY = "burrow.reviewed";

type Marks = Record<string, Record<string, string>>; // cid -> path -> fingerprint

function readMarks(): Marks {
  try {
    const parsed: unknown = JSON.parse(localStorage.getItem(KEY) ?? "{}");
    return parsed && typeof parsed === "object" ? (parsed as Marks) : {};
  } catch {
    return {};
  }
}

/** The paths of `cid` marked reviewed, each with the diff's fingerprint it was marked at
 * (read once per draw; a path is reviewed while its fingerprint matches). */
export function reviewedMarks(cid: string): Record<string, string> {
  return readMarks()[cid] ?? {};
}

export function markReviewed(cid: string, path: string, print: string | null): void {
  const marks = readMarks();
  const mine = { ...(marks[cid] ?? {}) };
  if (print === null) delete mine[path];
  else mine[path] = print;
  marks[cid] = mine;
  try {
    localStorage.setItem(KEY, JSON.stringify(marks));
  } catch {
    // storage full or off: the mark lasts until the page is reloaded
  }
}
