// The message box: Enter sends, Shift+Enter adds a line; during a run a message steers it.
// Files pasted or dropped on it are uploaded at once and go with the next message.
import { useEffect, useRef, useState } from "react";
import { errorMessage } from "../api/client";
import { COMPOSER_ID } from "../shortcuts";
import { filesOf, isUploadedImage } from "./attachments";

export function Composer({
  running,
  onSend,
  onStop,
  onUpload,
  thumbnail,
  disabled,
  fill,
}: {
  running: boolean;
  onSend: (text: string, attachments: string[]) => Promise<void>;
  onStop: () => Promise<void>;
  onUpload?: (file: File) => Promise<string>; // -> the workspace path
  thumbnail?: (path: string) => string;
  disabled?: boolean;
  /** Text put in the box to edit before sending (an example prompt picked); `n` tells a
   * second pick of the same text from the first. */
  fill?: { text: string; n: number } | null;
}) {
  const [text, setText] = useState("");
  const [attachments, setAttachments] = useState<string[]>([]);
  const [uploading, setUploading] = useState(0);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const box = useRef<HTMLTextAreaElement>(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 240)}px`;
  }, [text, running]);

  useEffect(() => {
    if (!fill) return;
    setText(fill.text);
    const el = box.current;
    el?.focus();
    el?.setSelectionRange(fill.text.length, fill.text.length);
  }, [fill]);

  // Ready to type on arrival, unless the person already is typing somewhere else (Ctrl+K
  // into search, then the conversation finished loading): never take a field from them.
  useEffect(() => {
    const active = document.activeElement;
    if (!active || active === document.body) box.current?.focus();
  }, []);

  const upload = async (files: File[]) => {
    if (!onUpload || files.length === 0) return;
    setError(null);
    setUploading((n) => n + files.length);
    for (const file of files) {
      try {
        const path = await onUpload(file);
        setAttachments((list) => [...list, path]);
      } catch (e) {
        setError(`${file.name}: ${errorMessage(e)}`);
      } finally {
        setUploading((n) => n - 1);
      }
    }
  };

  const send = async () => {
    const content = text.trim() || (attachments.length ? "(see the attached files)" : "");
    if (!content || busy || uploading) return;
    setBusy(true);
    setError(null);
    try {
      await onSend(content, attachments);
      setText("");
      setAttachments([]);
    } catch (e) {
      setError(errorMessage(e));
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
      setError(errorMessage(e));
    }
  };

  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
      onDragOver={(e) => {
        if (onUpload && e.dataTransfer.types.includes("Files")) e.preventDefault();
      }}
      onDrop={(e) => {
        const files = filesOf(e.dataTransfer);
        if (files.length && onUpload) {
          e.preventDefault();
          void upload(files);
        }
      }}
    >
      {error && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      {(attachments.length > 0 || uploading > 0) && (
        <div className="attachments pending" aria-label="Attached files">
          {attachments.map((path) => (
            <span key={path} className="attachment-pending">
              {isUploadedImage(path) && thumbnail ? (
                <img className="thumbnail" src={thumbnail(path)} alt={path} title={path} />
              ) : (
                <span className="attachment-chip" title={path}>
                  {path.split("/").pop()}
                </span>
              )}
              <button
                type="button"
                className="link"
                aria-label={`Remove ${path}`}
                onClick={() => setAttachments((list) => list.filter((p) => p !== path))}
              >
                ×
              </button>
            </span>
          ))}
          {uploading > 0 && <span className="muted">Uploading {uploading}…</span>}
        </div>
      )}
      <div className="composer-box">
        <textarea
          ref={box}
          id={COMPOSER_ID}
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
          onPaste={(e) => {
            const files = filesOf(e.clipboardData);
            if (files.length && onUpload) {
              e.preventDefault(); // a pasted image is a file, not text
              void upload(files);
            }
          }}
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
          <button type="submit" className="primary" disabled={disabled || busy || uploading > 0 || (!text.trim() && !attachments.length)}>
            {running ? "Steer" : "Send"}
          </button>
        </div>
      </div>
      <p className="composer-hint muted keyboard-hint">
        Enter to send · Shift+Enter for a new line{running ? " · Esc stops" : ""} · ? for shortcuts{onUpload ? " · paste or drop files to attach" : ""}{running ? " · messages now steer the run" : ""}
      </p>
      {/* A touch screen has no Esc, Shift+Enter or "?": only what still holds there. */}
      {running && <p className="composer-hint muted touch-hint">Messages now steer the run.</p>}
    </form>
  );
}
