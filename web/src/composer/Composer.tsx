// The message box: Enter sends, Shift+Enter adds a line; during a run a message steers it.
import { useEffect, useRef, useState } from "react";

export function Composer({
  running,
  onSend,
  onStop,
  disabled,
}: {
  running: boolean;
  onSend: (text: string) => Promise<void>;
  onStop: () => Promise<void>;
  disabled?: boolean;
}) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const box = useRef<HTMLTextAreaElement>(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 240)}px`;
  }, [text, running]);

  useEffect(() => box.current?.focus(), []);

  const send = async () => {
    const content = text.trim();
    if (!content || busy) return;
    setBusy(true);
    setError(null);
    try {
      await onSend(content);
      setText("");
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
      box.current?.focus();
    }
  };

  const stop = async () => {
    setError(null);
    try {
      await onStop();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      {error && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      <div className="composer-box">
        <textarea
          ref={box}
          rows={1}
          value={text}
          disabled={disabled}
          aria-label={running ? "Steer the running agent" : "Message"}
          placeholder={
            running
              ? "Steer the run: the agent reads this before its next step…"
              : "Describe what you want to build…"
          }
          onChange={(e) => setText(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
              e.preventDefault();
              void send();
            }
          }}
        />
        <div className="composer-actions">
          {running && (
            <button type="button" className="danger" onClick={() => void stop()} title="Interrupt the run">
              Stop
            </button>
          )}
          <button type="submit" className="primary" disabled={disabled || busy || !text.trim()}>
            {running ? "Steer" : "Send"}
          </button>
        </div>
      </div>
      <p className="composer-hint muted">
        Enter to send · Shift+Enter for a new line{running ? " · messages now steer the run" : ""}
      </p>
    </form>
  );
}
