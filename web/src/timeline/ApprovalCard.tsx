// A tool call waiting for the person's decision.
import { memo, useState } from "react";
import { ApiError, api, errorMessage, type Decision } from "../api/client";
import type { ApprovalItem } from "./reducer";

const LABELS: Record<string, string> = {
  allow_once: "Allowed once",
  allow_session: "Allowed for this session",
  deny: "Denied",
};

export const ApprovalCard = memo(function ApprovalCard({
  cid,
  item,
}: {
  cid: string;
  item: ApprovalItem;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const decide = async (decision: Decision) => {
    setBusy(true);
    setError(null);
    try {
      await api.decide(cid, item.requestId, decision);
    } catch (e) {
      setError(
        e instanceof ApiError && e.status === 404
          ? "This server does not accept approvals yet."
          : errorMessage(e),
      );
    } finally {
      setBusy(false);
    }
  };
  const pending = item.decision === null && !item.expired;
  const command =
    item.arguments && typeof item.arguments === "object" && "command" in item.arguments
      ? String((item.arguments as { command: unknown }).command)
      : JSON.stringify(item.arguments, null, 2);
  return (
    <article
      className={`approval-card ${pending ? "pending" : ""}`}
      data-request-id={item.requestId}
      aria-label="Approval request"
    >
      <header>
        <strong>Approve {item.tool}?</strong>
        {item.risk && <span className={`badge risk-${item.risk}`}>{item.risk} risk</span>}
      </header>
      {item.reason && <p>{item.reason}</p>}
      <pre>{command}</pre>
      {pending ? (
        <div className="actions">
          <button type="button" className="primary" disabled={busy} onClick={() => decide("allow_once")}>
            Allow once
          </button>
          <button type="button" disabled={busy} onClick={() => decide("allow_session")}>
            Allow for this session
          </button>
          <button type="button" className="danger" disabled={busy} onClick={() => decide("deny")}>
            Deny
          </button>
        </div>
      ) : (
        <p className="muted">
          {item.decision ? (LABELS[item.decision] ?? item.decision) : "The run ended before a decision."}
        </p>
      )}
      {error && <p className="error-text">{error}</p>}
    </article>
  );
});
