// How full the model's context is (used / window), and a way to compact it now.
import { useState } from "react";
import { api, errorMessage } from "./api/client";
import { formatTokens } from "./format";

export function ContextMeter({
  cid,
  used,
  window,
  running,
}: {
  cid: string;
  used: number;
  window: number | undefined;
  running: boolean;
}) {
  const [problem, setProblem] = useState<string | null>(null);
  if (!window) return null;
  const share = Math.min(1, used / window);
  const compact = async () => {
    setProblem(null);
    try {
      await api.compact(cid);
    } catch (error) {
      setProblem(errorMessage(error));
    }
  };
  return (
    <span className="context-meter header-meta" data-testid="context-meter">
      <meter
        min={0}
        max={window}
        low={window * 0.6}
        high={window * 0.8}
        optimum={0}
        value={Math.min(used, window)}
        aria-label="Context used"
        title={`${used} of ${window} tokens of the model's context (${Math.round(share * 100)}%)`}
      />
      <span className="muted">
        {formatTokens(used)} / {formatTokens(window)}
      </span>
      <button
        type="button"
        className="icon compact"
        aria-label="Compact"
        disabled={running}
        title={problem ?? "Compact: summarize the older turns now"}
        onClick={() => void compact()}
      >
        ⇊
      </button>
    </span>
  );
}
