// What a person can do with a message: copy it; edit and resend their own; regenerate a
// reply. The last two are forks (DESIGN §8): the conversation is forked at the message's run
// (the journal before it, the workspace as the run found it), the message is sent in the
// fork and the fork is opened. The conversation they came from stays as it was.
import { useState } from "react";
import { errorMessage } from "../api/client";

/** Fork at `runId`, send `content` there and open the fork. */
export type Resend = (runId: string, content: string, attachments: string[]) => Promise<void>;

function CopyButton({ text }: { text: string }) {
  const [said, setSaid] = useState<string | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setSaid("Copied");
    } catch {
      setSaid("Copy failed");
    }
    setTimeout(() => setSaid(null), 1500);
  };
  return (
    <button type="button" className="link" title="Copy to the clipboard" onClick={() => void copy()}>
      {said ?? "Copy"}
    </button>
  );
}

function useResend(resend: Resend | undefined) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async (runId: string, content: string, attachments: string[]) => {
    if (!resend) return;
    setBusy(true);
    setError(null);
    try {
      await resend(runId, content, attachments);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}

export function UserActions({
  runId,
  content,
  attachments,
  resend,
}: {
  runId: string | null; // null: steering or older than runs; it can only be copied
  content: string;
  attachments: string[];
  resend?: Resend;
}) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(content);
  const { busy, error, run } = useResend(resend);
  if (editing && runId) {
    return (
      <form
        className="message-edit"
        aria-label="Edit and resend"
        onSubmit={(e) => {
          e.preventDefault();
          if (draft.trim()) void run(runId, draft, attachments);
        }}
      >
        <textarea aria-label="Edited text" value={draft} onChange={(e) => setDraft(e.target.value)} rows={3} />
        <div className="message-actions">
          <span className="muted">Sent in a copy of this conversation, as it was before this message.</span>
          <button type="button" onClick={() => setEditing(false)} disabled={busy}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={busy || !draft.trim()}>
            {busy ? "Forking…" : "Send"}
          </button>
        </div>
        {error && <div className="error-text" role="alert">{error}</div>}
      </form>
    );
  }
  return (
    <div className="message-actions">
      <CopyButton text={content} />
      {runId && resend && (
        <button
          type="button"
          className="link"
          title="Edit and resend, in a fork of the conversation"
          onClick={() => {
            setDraft(content);
            setEditing(true);
          }}
        >
          Edit
        </button>
      )}
    </div>
  );
}

export function AssistantActions({
  text,
  regenerate,
  resend,
}: {
  text: string;
  /** The run's own message, to send again in a fork; absent: the reply cannot be regenerated. */
  regenerate?: { runId: string; content: string; attachments: string[] };
  resend?: Resend;
}) {
  const { busy, error, run } = useResend(resend);
  return (
    <div className="message-actions">
      <CopyButton text={text} />
      {regenerate && resend && (
        <button
          type="button"
          className="link"
          title="Ask again, in a fork of the conversation"
          disabled={busy}
          onClick={() => void run(regenerate.runId, regenerate.content, regenerate.attachments)}
        >
          {busy ? "Forking…" : "Regenerate"}
        </button>
      )}
      {error && <span className="error-text" role="alert">{error}</span>}
    </div>
  );
}
