// One tool call: what was asked, its live output, and how it ended.
import { memo, type ReactNode, useLayoutEffect, useRef, useState } from "react";
import { formatApprovalWait, formatDuration } from "../format";
import type { OutputChunk, ToolItem } from "./reducer";
import { Silence } from "./Silence";

const TAIL_LINES = 120;
const TAIL_CHARS = 12_000;

function args(item: ToolItem): Record<string, unknown> {
  const a = item.arguments;
  return a && typeof a === "object" ? (a as Record<string, unknown>) : {};
}

function summary(item: ToolItem): string {
  const a = args(item);
  if (typeof item.arguments === "string") return item.arguments.slice(0, 200);
  if (typeof a.command === "string") {
    const port = typeof a.port === "number" ? ` → :${a.port}` : "";
    return a.command.split("\n")[0]!.slice(0, 240) + port;
  }
  if (typeof a.path === "string") return a.path;
  if (typeof a.description === "string") return a.description.slice(0, 200); // a subagent's task
  return JSON.stringify(a).slice(0, 200);
}

/** The last lines of the output, so a long log renders as fast as a short one. */
function tail(chunks: readonly OutputChunk[], total: number): { shown: OutputChunk[]; hidden: number } {
  if (total <= TAIL_CHARS) {
    const lines = chunks.reduce((n, c) => n + (c.text.match(/\n/g)?.length ?? 0), 0);
    if (lines <= TAIL_LINES) return { shown: chunks.slice(), hidden: 0 };
  }
  const shown: OutputChunk[] = [];
  let budget = TAIL_CHARS;
  let lines = TAIL_LINES;
  for (let i = chunks.length - 1; i >= 0 && budget > 0 && lines > 0; i--) {
    let text = chunks[i]!.text;
    if (text.length > budget) text = text.slice(text.length - budget);
    const parts = text.split("\n");
    if (parts.length - 1 > lines) text = parts.slice(parts.length - 1 - lines).join("\n");
    lines -= text.split("\n").length - 1;
    budget -= text.length;
    shown.unshift({ stream: chunks[i]!.stream, text });
  }
  const hidden = total - shown.reduce((n, c) => n + c.text.length, 0);
  return { shown, hidden };
}

function Output({ item }: { item: ToolItem }) {
  const [full, setFull] = useState(false);
  const pre = useRef<HTMLPreElement>(null);
  const following = useRef(true);
  // Show the newest output, unless the reader scrolled up inside the box.
  useLayoutEffect(() => {
    const el = pre.current;
    if (el && following.current) el.scrollTop = el.scrollHeight;
  });
  const streamed = item.output.length > 0;
  const chunks: readonly OutputChunk[] = streamed
    ? item.output
    : item.result?.output
      ? [{ stream: item.result.isError ? "stderr" : "stdout", text: item.result.output }]
      : [];
  if (chunks.length === 0) return null;
  const total = streamed ? item.outputChars : (item.result?.output.length ?? 0);
  const { shown, hidden } = full ? { shown: chunks, hidden: 0 } : tail(chunks, total);
  return (
    <div className="tool-output">
      {hidden > 0 && (
        <button type="button" className="link" onClick={() => setFull(true)}>
          Show {hidden.toLocaleString()} earlier characters
        </button>
      )}
      <pre
        ref={pre}
        onScroll={(e) => {
          const el = e.currentTarget;
          following.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {shown.map((c, i) => (
          <span key={i} className={c.stream}>
            {c.text}
          </span>
        ))}
      </pre>
    </div>
  );
}

function Arguments({ item }: { item: ToolItem }) {
  const a = args(item);
  if (item.name === "bash" && typeof a.command === "string" && !a.command.includes("\n")) {
    return null; // the one-line command is already the card's title
  }
  if (Object.keys(a).every((k) => k === "path")) return null; // the path is the title
  let body: string;
  if (item.name === "write_file" && typeof a.content === "string") body = a.content;
  else if (item.name === "edit_file" && typeof a.old_text === "string")
    body = `- ${String(a.old_text).replace(/\n/g, "\n- ")}\n+ ${String(a.new_text ?? "").replace(/\n/g, "\n+ ")}`;
  else if (typeof a.command === "string") body = a.command;
  else body = JSON.stringify(item.arguments, null, 2);
  const label = item.name === "write_file" ? "Content" : item.name === "edit_file" ? "Change" : "Arguments";
  return (
    <details className="tool-args">
      <summary>{label}</summary>
      <pre>{body}</pre>
    </details>
  );
}

export const ToolCard = memo(function ToolCard({
  item,
  children,
}: {
  item: ToolItem;
  children?: ReactNode; // a subagent's timeline, for a `task` call
}) {
  const r = item.result;
  const state = !r ? "running" : r.isError ? "error" : "ok";
  // null: open while it runs or when it failed; a call that runs no command (a file tool)
  // folds away once it succeeds: its output is not worth the space.
  const [chosen, setOpen] = useState<boolean | null>(null);
  // A subagent's timeline stays in view: it is the work, not a side effect.
  const quiet = item.toolKind !== null && !item.toolKind.shell && !item.sub;
  const open = chosen ?? (!r || r.isError || !quiet);
  return (
    <article className={`tool-card ${state}`} data-call-id={item.callId} data-state={state}>
      <header>
        <button
          type="button"
          className="tool-toggle"
          aria-expanded={open}
          onClick={() => setOpen(!open)}
          title={open ? "Collapse" : "Expand"}
        >
          <span className={`tool-status ${state}`} aria-label={state} />
          <span className="tool-name">{item.name}</span>
          <code className="tool-summary">{summary(item)}</code>
        </button>
        <span className="tool-meta">
          {r ? (
            <>
              {r.exitCode !== null && (
                <span className={`badge ${r.exitCode === 0 ? "" : "bad"}`}>exit {r.exitCode}</span>
              )}
              {r.truncated && (
                <span className="badge warn" title="The model saw the head and tail of the output; the full log was saved in the sandbox">
                  truncated
                </span>
              )}
              <span className="muted" data-testid="tool-time">
                {formatDuration(Math.max(0, r.durationMs - r.approvalWaitMs))}
              </span>
              {r.approvalWaitMs > 0 && (
                <span className="muted approval-waited">{formatApprovalWait(r.approvalWaitMs)}</span>
              )}
            </>
          ) : item.approval === "pending" ? (
            <span className="approval-wait">awaiting approval</span>
          ) : (
            <>
              <span className="muted pulse">running…</span>
              <Silence since={item.lastActivity} />
            </>
          )}
          {r && item.approval === "deny" && <span className="badge bad">denied</span>}
        </span>
      </header>
      {open && (
        <div className="tool-body">
          <Arguments item={item} />
          {children}
          <Output item={item} />
          {r && item.output.length > 0 && r.isError && r.exitCode === null && (
            <p className="note bad">{r.output.trim().split("\n").slice(-1)[0]}</p>
          )}
          {r?.truncated && (
            <p className="note">
              Output was truncated for the model (head and tail kept); the full log is saved in
              the sandbox.
            </p>
          )}
        </div>
      )}
    </article>
  );
});
