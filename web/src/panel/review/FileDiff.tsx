// One changed file in the review: its diff colored, unified or side by side, highlighted
// by language once the highlighter has loaded; a click on a line's number comments on it.
import { useEffect, useMemo, useState } from "react";
import { languageFor } from "../languages";
import { lineKey, lineLabel, type ReviewComment } from "./comments";
import { type DiffLine, type Hunk, parsePatch, sideBySide } from "./patch";

type Highlight = (text: string) => string | null; // HTML, escaped by highlight.js

/** highlight.js for `path`'s language, loaded on demand (null until then, or unknown). */
function useHighlighter(path: string): Highlight | null {
  const [fn, setFn] = useState<{ highlight: Highlight } | null>(null);
  useEffect(() => {
    const language = languageFor(path);
    if (!language) return;
    let live = true;
    void import("../highlight").then(({ hljs }) => {
      if (!live || !hljs.getLanguage(language)) return;
      setFn({ highlight: (text) => hljs.highlight(text, { language, ignoreIllegals: true }).value });
    });
    return () => {
      live = false;
    };
  }, [path]);
  return fn?.highlight ?? null;
}

function Code({ line, highlight }: { line: DiffLine; highlight: Highlight | null }) {
  const html = highlight?.(line.text);
  return html != null ? (
    <code dangerouslySetInnerHTML={{ __html: html }} />
  ) : (
    <code>{line.text}</code>
  );
}

export function FileDiff({
  path,
  patch,
  sideBySide: split,
  comments,
  onComment,
}: {
  path: string;
  patch: string;
  sideBySide: boolean;
  comments: ReviewComment[];
  onComment: (line: DiffLine, text: string) => void;
}) {
  const hunks = useMemo(() => parsePatch(patch), [patch]);
  const highlight = useHighlighter(path);
  const [draftAt, setDraftAt] = useState<string | null>(null); // a lineKey
  const [draft, setDraft] = useState("");
  if (hunks.length === 0) return <pre className="change-patch">{patch || "No textual changes."}</pre>;

  const number = (line: DiffLine | null, side: "old" | "new") => {
    const n = line?.[side];
    if (!line || n === null || n === undefined) return <td className="diff-no" />;
    return (
      <td className="diff-no">
        <button
          type="button"
          className="diff-comment-add"
          aria-label={`Comment on ${path} ${lineLabel(line)}`}
          title="Comment on this line"
          onClick={() => {
            setDraftAt(lineKey(path, line));
            setDraft("");
          }}
        >
          {n}
        </button>
      </td>
    );
  };
  const after = (line: DiffLine | null, columns: number) => {
    if (!line) return null;
    const key = lineKey(path, line);
    const here = comments.filter((c) => lineKey(c.path, c.line) === key);
    const drafting = draftAt === key;
    if (here.length === 0 && !drafting) return null;
    return (
      <tr className="diff-comments">
        <td colSpan={columns}>
          {here.map((c, i) => (
            <div key={i} className="diff-comment">
              {c.text}
            </div>
          ))}
          {drafting && (
            <form
              className="diff-comment-form"
              onSubmit={(e) => {
                e.preventDefault();
                if (draft.trim()) onComment(line, draft.trim());
                setDraftAt(null);
              }}
            >
              <textarea
                aria-label={`Comment on ${lineLabel(line)}`}
                value={draft}
                autoFocus
                rows={2}
                onChange={(e) => setDraft(e.target.value)}
                onKeyDown={(e) => {
                  if (e.key === "Escape") setDraftAt(null);
                }}
              />
              <div className="message-actions">
                <button type="button" onClick={() => setDraftAt(null)}>
                  Cancel
                </button>
                <button type="submit" className="primary" disabled={!draft.trim()}>
                  Add comment
                </button>
              </div>
            </form>
          )}
        </td>
      </tr>
    );
  };

  const unified = (hunk: Hunk) =>
    hunk.lines.map((line, i) => (
      <FragmentRows key={i}>
        <tr className={`diff-line ${line.kind}`}>
          {number(line.kind === "add" ? null : line, "old")}
          {number(line.kind === "del" ? null : line, "new")}
          <td className="diff-sign">{line.kind === "add" ? "+" : line.kind === "del" ? "-" : " "}</td>
          <td className="diff-code">
            <Code line={line} highlight={highlight} />
          </td>
        </tr>
        {after(line, 4)}
      </FragmentRows>
    ));
  const paired = (hunk: Hunk) =>
    sideBySide(hunk).map((row, i) => (
      <FragmentRows key={i}>
        <tr className="diff-line split">
          {number(row.left, "old")}
          <td className={`diff-code ${row.left?.kind ?? "empty"}`}>
            {row.left && <Code line={row.left} highlight={highlight} />}
          </td>
          {number(row.right, "new")}
          <td className={`diff-code ${row.right?.kind ?? "empty"}`}>
            {row.right && <Code line={row.right} highlight={highlight} />}
          </td>
        </tr>
        {after(row.left, 4)}
        {row.right !== row.left && after(row.right, 4)}
      </FragmentRows>
    ));

  return (
    <table className={`diff ${split ? "side-by-side" : "unified"}`} aria-label={`Diff of ${path}`}>
      {/* Fixed layout takes its widths from here (the first row, a hunk's header, spans all). */}
      {split ? (
        <colgroup>
          <col className="diff-no-col" />
          <col />
          <col className="diff-no-col" />
          <col />
        </colgroup>
      ) : (
        <colgroup>
          <col className="diff-no-col" />
          <col className="diff-no-col" />
          <col className="diff-sign-col" />
          <col />
        </colgroup>
      )}
      {hunks.map((hunk, h) => (
        <tbody key={h}>
          <tr className="diff-hunk">
            <td colSpan={4}>{hunk.header}</td>
          </tr>
          {split ? paired(hunk) : unified(hunk)}
        </tbody>
      ))}
    </table>
  );
}

function FragmentRows({ children }: { children: React.ReactNode }) {
  return <>{children}</>;
}
