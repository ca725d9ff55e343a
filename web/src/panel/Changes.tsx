// What the agent changed in the workspace since a checkpoint, and restoring one (undoable).
import { useCallback, useEffect, useState } from "react";
import { api, errorMessage, type Checkpoint } from "../api/client";
import type { components } from "../api/schema";
import { formatBytes } from "../format";

type Diff = components["schemas"]["DiffOut"];

const SIGN = { added: "A", modified: "M", deleted: "D" } as const;

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
  const [error, setError] = useState<string | null>(null);
  const [undo, setUndo] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

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

  if (error) return <div className="panel-empty error-text">{error}</div>;
  if (!checkpoints) return <div className="panel-empty muted">Loading…</div>;
  if (checkpoints.length === 0)
    return <div className="panel-empty muted">No checkpoints yet: each run starts with one.</div>;
  const start = from || checkpoints[0]!.id;
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
      </div>
      {diff && diff.files.length === 0 && <div className="panel-empty muted">No changes since then.</div>}
      <ul className="changes-list" aria-label="Changed files">
        {diff?.files.map((f) => (
          <li key={f.path}>
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
            {open[f.path] && <pre className="change-patch">{f.patch}</pre>}
          </li>
        ))}
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
