// What the agent changed in the workspace since a checkpoint, and restoring one (undoable).
// A review: each changed file's diff (unified or side by side), comments on its lines
// sent to the agent as one message, a per-file revert and a "reviewed" mark.
import { useCallback, useEffect, useState } from "react";
import { api, errorMessage, type Checkpoint } from "../api/client";
import type { components } from "../api/schema";
import { formatBytes } from "../format";
import { markReviewed, reviewedMarks, reviewMessage, type ReviewComment } from "./review/comments";
import { FileDiff } from "./review/FileDiff";
import { fingerprint } from "./review/patch";

type Diff = components["schemas"]["DiffOut"];

const SIGN = { added: "A", modified: "M", deleted: "D" } as const;
// A diff past this many lines is summarized until asked for.
const LARGE_LINES = 1500;

function label(c: Checkpoint, i: number): string {
  const when = new Date(c.created_at).toLocaleString();
  const size = c.size != null ? ` · ${formatBytes(c.size)}` : "";
  return `${i + 1}. ${c.run_id ? "run start" : "before a restore"} · ${when}${size}`;
}

export function Changes({ cid, version }: { cid: string; version: number }) {
  const [checkpoints, setCheckpoints] = useState<Checkpoint[] | null>(null);
  const [from, setFrom] = useState<string>("");
  const [diff, setDiff] = useState<Diff | null>(null);
  const [open, setOpen] = useState<Record<string, boolean>>({});
  const [showLarge, setShowLarge] = useState<Record<string, boolean>>({}); // past LARGE_LINES, asked for
  const [error, setError] = useState<string | null>(null);
  const [undo, setUndo] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [split, setSplit] = useState(false);
  const [comments, setComments] = useState<ReviewComment[]>([]);
  const [sent, setSent] = useState<string | null>(null);
  const [, setMarks] = useState(0); // a reviewed mark changed: draw again

  const load = useCallback(async () => {
    try {
      const list = await api.checkpoints(cid);
      setCheckpoints(list);
      const start = from || list[0]?.id || "";
      setDiff(start ? await api.diff(cid, start) : null);
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  }, [cid, from]);

  useEffect(() => {
    void load();
  }, [load, version]);

  const restore = async (id: string) => {
    setBusy(true);
    try {
      const done = await api.restore(cid, id);
      setUndo(done.undo_checkpoint_id);
      await load();
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };

  const revert = async (path: string, checkpoint: string) => {
    setBusy(true);
    try {
      const done = await api.revertFile(cid, path, checkpoint);
      setUndo(done.undo_checkpoint_id);
      setComments(comments.filter((c) => c.path !== path));
      await load();
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };

  const requestChanges = async () => {
    setBusy(true);
    try {
      await api.send(cid, reviewMessage(comments));
      setSent(`Sent ${comments.length} comment${comments.length === 1 ? "" : "s"} to the agent.`);
      setComments([]);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };

  if (error) return <div className="panel-empty error-text">{error}</div>;
  if (!checkpoints) return <div className="panel-empty muted">Loading…</div>;
  if (checkpoints.length === 0)
    return <div className="panel-empty muted">No checkpoints yet: each run starts with one.</div>;
  const start = from || checkpoints[0]!.id;
  const marks = reviewedMarks(cid);
  return (
    <div className="changes">
      <div className="changes-bar">
        <label>
          Since{" "}
          <select value={start} onChange={(e) => setFrom(e.target.value)} aria-label="Since checkpoint">
            {checkpoints.map((c, i) => (
              <option key={c.id} value={c.id}>
                {label(c, i)}
              </option>
            ))}
          </select>
        </label>
        <button type="button" disabled={busy} onClick={() => void restore(start)}>
          Restore this checkpoint
        </button>
        {undo && (
          <button type="button" disabled={busy} onClick={() => void restore(undo)}>
            Undo restore
          </button>
        )}
        <a className="button" href={api.patchUrl(cid, start)} download="changes.patch">
          Download patch
        </a>
        <label className="toggle">
          <input type="checkbox" checked={split} onChange={(e) => setSplit(e.target.checked)} /> Side by side
        </label>
        {comments.length > 0 && (
          <button type="button" className="primary" disabled={busy} onClick={() => void requestChanges()}>
            Request changes ({comments.length})
          </button>
        )}
      </div>
      {sent && (
        <div className="tree-note muted" role="status">
          {sent}
        </div>
      )}
      {diff && diff.files.length === 0 && <div className="panel-empty muted">No changes since then.</div>}
      <ul className="changes-list" aria-label="Changed files">
        {diff?.files.map((f) => {
          const print = fingerprint(`${f.status}:${f.patch}`);
          const reviewed = marks[f.path] === print;
          const large = f.additions + f.deletions > LARGE_LINES;
          return (
            <li key={f.path} className={reviewed ? "reviewed" : ""}>
              <div className="change-row">
                <button
                  type="button"
                  className="tree-row"
                  aria-expanded={!!open[f.path]}
                  onClick={() => setOpen({ ...open, [f.path]: !open[f.path] })}
                >
                  <span className={`change-status ${f.status}`} title={f.status}>
                    {SIGN[f.status]}
                  </span>{" "}
                  {f.path}{" "}
                  <span className="muted">{f.binary ? "binary" : `+${f.additions} -${f.deletions}`}</span>
                </button>
                <label className="toggle" title="Marked until the file changes again">
                  <input
                    type="checkbox"
                    aria-label={`Reviewed ${f.path}`}
                    checked={reviewed}
                    onChange={(e) => {
                      markReviewed(cid, f.path, e.target.checked ? print : null);
                      setMarks((n) => n + 1);
                    }}
                  />{" "}
                  Reviewed
                </label>
                <button
                  type="button"
                  className="link"
                  disabled={busy}
                  aria-label={`Revert ${f.path}`}
                  title="Put this file back as it was at the checkpoint (undoable)"
                  onClick={() => void revert(f.path, start)}
                >
                  Revert
                </button>
              </div>
              {open[f.path] &&
                (f.binary ? (
                  <div className="tree-note muted">A binary file: no line diff.</div>
                ) : large && !showLarge[f.path] ? (
                  <div className="tree-note muted">
                    A large change ({f.additions + f.deletions} lines).{" "}
                    <button type="button" className="link" onClick={() => setShowLarge({ ...showLarge, [f.path]: true })}>
                      Show it
                    </button>
                  </div>
                ) : (
                  <FileDiff
                    path={f.path}
                    patch={f.patch}
                    sideBySide={split}
                    comments={comments.filter((c) => c.path === f.path)}
                    onComment={(line, text) => setComments([...comments, { path: f.path, line, text }])}
                  />
                ))}
            </li>
          );
        })}
      </ul>
      {diff && diff.skipped.length > 0 && (
        <div className="tree-note muted">Too large to checkpoint: {diff.skipped.join(", ")}</div>
      )}
      <div className="tree-note muted" data-testid="checkpoints-size" title="What each took when it was made">
        {checkpoints.length} checkpoint{checkpoints.length === 1 ? "" : "s"} ·{" "}
        {formatBytes(checkpoints.reduce((sum, c) => sum + (c.size ?? 0), 0))} stored (the oldest are pruned)
      </div>
    </div>
  );
}
