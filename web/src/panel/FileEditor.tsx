// A workspace file (mounted per path): highlighted to read, a code editor to edit
// (CodeEditor.tsx, CodeMirror, loaded on demand: the initial bundle stays small). Saves go through PUT …/files/content with the ETag the file
// was read with, so a file the agent changed meanwhile is not silently overwritten.
import { lazy, Suspense, useCallback, useEffect, useRef, useState } from "react";
import { api, ApiError, errorMessage, type FileEntry } from "../api/client";
import { formatBytes } from "../format";

const CodeView = lazy(() => import("./CodeView"));
const CodeEditor = lazy(() => import("./CodeEditor"));

const MAX_VIEW_BYTES = 1024 * 1024;

type Status =
  | { kind: "idle" }
  | { kind: "saving" }
  | { kind: "saved" }
  | { kind: "conflict" }
  | { kind: "error"; message: string };

export function FileEditor({
  cid,
  entry,
  version,
  onDirty,
  onSaved,
}: {
  cid: string;
  entry: FileEntry;
  version: number;
  onDirty?: (dirty: boolean) => void;
  onSaved?: () => void;
}) {
  const [text, setText] = useState<string | null>(null);
  const [etag, setEtag] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [draft, setDraft] = useState<string | null>(null); // non-null while editing
  const [status, setStatus] = useState<Status>({ kind: "idle" });
  const [reload, setReload] = useState(0);
  const dirty = draft !== null && draft !== text;
  const editing = draft !== null;

  useEffect(() => onDirty?.(dirty), [dirty, onDirty]);

  // A refresh of the panel (`version`) must not throw away an edit under way.
  const keepDraft = useRef(false);
  keepDraft.current = editing;
  useEffect(() => {
    let live = true;
    if (!keepDraft.current) {
      setText(null);
      setError(null);
    }
    if (entry.size > MAX_VIEW_BYTES) {
      setError(`${formatBytes(entry.size)} is too large to show here; download it instead.`);
      return;
    }
    api.fileForEdit(cid, entry.path).then(
      (file) => {
        if (!live || keepDraft.current) return;
        if (file.text === null) setError("A binary file: download it to open it.");
        else {
          setText(file.text);
          setEtag(file.etag);
        }
      },
      (e: unknown) => live && !keepDraft.current && setError(errorMessage(e)),
    );
    return () => {
      live = false;
    };
  }, [cid, entry.path, entry.size, version, reload]);

  const save = useCallback(
    async (overwrite = false) => {
      if (draft === null) return;
      setStatus({ kind: "saving" });
      try {
        const saved = await api.saveFile(cid, entry.path, draft, overwrite ? null : etag);
        setText(draft);
        setEtag(saved.etag);
        setStatus({ kind: "saved" });
        onSaved?.();
      } catch (e) {
        if (e instanceof ApiError && e.code === "file_changed") setStatus({ kind: "conflict" });
        else setStatus({ kind: "error", message: errorMessage(e) });
      }
    },
    [cid, entry.path, draft, etag, onSaved],
  );

  const onKeyDown = (e: React.KeyboardEvent) => {
    if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "s") {
      e.preventDefault();
      void save();
    }
  };

  const startEditing = () => {
    setDraft(text ?? "");
    setStatus({ kind: "idle" });
  };
  const stopEditing = () => {
    if (dirty && !window.confirm(`Discard your changes to ${entry.path}?`)) return;
    setDraft(null);
    setStatus({ kind: "idle" });
  };
  const reloadFile = () => {
    setDraft(null);
    setStatus({ kind: "idle" });
    setReload((n) => n + 1);
  };

  return (
    <div className="viewer" onKeyDown={onKeyDown}>
      <div className="panel-toolbar">
        <code className="url" title={entry.path}>
          {entry.path}
          {dirty && (
            <span className="dirty-mark" title="Unsaved changes" aria-label="unsaved changes">
              {" "}
              ●
            </span>
          )}
        </code>
        {editing ? (
          <>
            <button type="button" disabled={!dirty || status.kind === "saving"} onClick={() => void save()} title="Save (Ctrl+S)">
              {status.kind === "saving" ? "Saving…" : "Save"}
            </button>
            <button type="button" onClick={stopEditing}>
              Close editor
            </button>
          </>
        ) : (
          text !== null && (
            <button type="button" onClick={startEditing}>
              Edit
            </button>
          )
        )}
        <a className="button" href={api.fileUrl(cid, entry.path)} download={entry.name}>
          Download
        </a>
      </div>
      {status.kind === "saved" && !dirty && (
        <p className="editor-note muted" role="status">
          Saved. The agent is told on its next turn.
        </p>
      )}
      {status.kind === "error" && (
        <p className="editor-note error-text" role="alert">
          Not saved: {status.message}
        </p>
      )}
      {status.kind === "conflict" && (
        <div className="editor-note warning-text" role="alert">
          {entry.path} changed since you opened it (the agent or a command wrote it).{" "}
          <button type="button" onClick={() => void save(true)}>
            Overwrite
          </button>{" "}
          <button type="button" onClick={reloadFile}>
            Reload (drop my edit)
          </button>
        </div>
      )}
      {error && <p className="pad error-text">{error}</p>}
      {editing ? (
        <Suspense fallback={<pre className="code">{draft}</pre>}>
          <CodeEditor path={entry.path} initial={draft} onChange={setDraft} />
        </Suspense>
      ) : (
        text !== null && (
          <Suspense fallback={<pre className="code">{text}</pre>}>
            <CodeView path={entry.path} text={text} />
          </Suspense>
        )
      )}
    </div>
  );
}
