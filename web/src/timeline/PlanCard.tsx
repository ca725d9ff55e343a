// The model's checklist (`todo`), as one call left it; a plan-mode run's proposal has
// Approve / Edit / Reject while its run waits (POST …/plans/{plan_id}).
import { memo, useState } from "react";
import { type ApprovalMode, api, errorMessage } from "../api/client";
import { MODES } from "../composer/StartOptions";
import type { PlanItem, PlanStep } from "./reducer";

const AFTER_PLAN = MODES.filter((m) => m.id !== "plan");

export const PlanCard = memo(function PlanCard({ cid, item }: { cid: string; item: PlanItem }) {
  const done = item.steps.filter((s) => s.done).length;
  const [editing, setEditing] = useState<string | null>(null); // the steps, one a line
  const [mode, setMode] = useState<ApprovalMode | "">("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const decide = async (decision: "approve" | "reject") => {
    setBusy(true);
    setError(null);
    try {
      const items: PlanStep[] | undefined =
        editing === null
          ? undefined
          : editing
              .split("\n")
              .map((line) => line.trim())
              .filter(Boolean)
              .map((text) => ({ text, done: false }));
      await api.decidePlan(cid, item.planId, {
        decision,
        ...(decision === "approve" && items ? { items } : {}),
        ...(decision === "approve" && mode && mode !== "plan" ? { mode } : {}),
      });
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <article
      className={`plan-card ${item.waiting ? "pending" : ""}`}
      data-testid={item.proposed ? "plan-proposal" : "plan-card"}
      data-plan-id={item.planId}
      aria-label={item.proposed ? "Proposed plan" : "Checklist"}
    >
      <div className="plan-head">
        {item.proposed ? "Proposed plan" : "Checklist"} · {done}/{item.steps.length} done
      </div>
      {editing === null ? (
        <ul className="plan-steps" aria-label="Checklist">
          {item.steps.map((step, i) => (
            <li key={i} className={step.done ? "plan-step done" : "plan-step"}>
              <input type="checkbox" checked={step.done} readOnly disabled aria-label={step.text} />
              <span>{step.text}</span>
            </li>
          ))}
        </ul>
      ) : (
        <textarea
          aria-label="Plan steps, one a line"
          value={editing}
          rows={Math.min(12, Math.max(3, item.steps.length + 1))}
          onChange={(e) => setEditing(e.target.value)}
        />
      )}
      {item.waiting && (
        <div className="actions">
          <select aria-label="Go on in" value={mode} onChange={(e) => setMode(e.target.value as ApprovalMode)}>
            <option value="">the conversation's mode</option>
            {AFTER_PLAN.map((m) => (
              <option key={m.id} value={m.id} title={m.hint}>
                {m.label}
              </option>
            ))}
          </select>
          <button type="button" className="primary" disabled={busy} onClick={() => decide("approve")}>
            Approve
          </button>
          {editing === null && (
            <button type="button" disabled={busy} onClick={() => setEditing(item.steps.map((s) => s.text).join("\n"))}>
              Edit
            </button>
          )}
          <button type="button" className="danger" disabled={busy} onClick={() => decide("reject")}>
            Reject
          </button>
        </div>
      )}
      {error && <p className="error-text">{error}</p>}
    </article>
  );
});
