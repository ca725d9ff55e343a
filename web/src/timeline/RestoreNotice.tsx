// A workspace restore, its checkpoints named as a person knows them: "run 2 · 8:58 PM".
import { memo, useEffect, useState } from "react";
import { api, type Checkpoint } from "../api/client";
import type { NoticeItem } from "./reducer";

/** "8:58 PM" (the reader's locale), or "" for a time this client cannot read. */
export function clockTime(iso: string): string {
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? "" : t.toLocaleTimeString([], { hour: "numeric", minute: "2-digit" });
}

/** A checkpoint's name: the run it started ("run 2 · 8:58 PM", by `runs`: run ids in the
 * order they started here), or the restore it was saved before. */
export function checkpointName(c: Checkpoint | undefined, runs: readonly string[]): string {
  if (!c) return "an earlier checkpoint";
  const time = clockTime(c.created_at);
  if (!c.run_id) return `the workspace before a restore${time ? ` · ${time}` : ""}`;
  const n = runs.indexOf(c.run_id);
  const run = n >= 0 ? `run ${n + 1}` : "an earlier run"; // a fork's parent, say
  return `${run}${time ? ` · ${time}` : ""}`;
}

export const RestoreNotice = memo(function RestoreNotice({
  cid,
  item,
  runs,
}: {
  cid: string;
  item: NoticeItem & { restore: NonNullable<NoticeItem["restore"]> };
  runs: readonly string[];
}) {
  const [checkpoints, setCheckpoints] = useState<Checkpoint[] | null>(null);
  useEffect(() => {
    api.checkpoints(cid).then(setCheckpoints, () => setCheckpoints([]));
  }, [cid, item.key]);
  if (checkpoints === null) return <div className="notice info">{item.text}</div>;
  const find = (id: string | null) => checkpoints.find((c) => c.id === id);
  const undo = item.restore.undoId ? find(item.restore.undoId) : undefined;
  return (
    <div className="notice info" data-testid="restore-notice">
      Workspace restored to the start of {checkpointName(find(item.restore.checkpointId), runs)}.
      {undo && ` What it replaced was saved first (${clockTime(undo.created_at)}): restore that in Changes to undo.`}
    </div>
  );
});
