// The workspace: a lazily expanded tree, a viewer that edits (FileEditor), and downloads.
import { useCallback, useEffect, useRef, useState } from "react";
import { api, errorMessage, type FileEntry } from "../api/client";
import { formatBytes } from "../format";
import { FileEditor } from "./FileEditor";

function Dir({
  cid,
  path,
  depth,
  version,
  selected,
  onSelect,
}: {
  cid: string;
  path: string;
  depth: number;
  version: number;
  selected: string | null;
  onSelect: (entry: FileEntry) => void;
}) {
  const [entries, setEntries] = useState<FileEntry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [open, setOpen] = useState<Record<string, boolean>>({});

  useEffect(() => {
    let live = true;
    api.files(cid, path).then(
      (list) => {
        if (live) {
          setEntries(list);
          setError(null);
        }
      },
      (e: unknown) => live && setError(errorMessage(e)),
    );
    return () => {
      live = false;
    };
  }, [cid, path, version]);

  if (error) return <div className="tree-note error-text" style={{ paddingLeft: depth * 14 + 8 }}>{error}</div>;
  if (!entries) return <div className="tree-note muted" style={{ paddingLeft: depth * 14 + 8 }}>Loading…</div>;
  if (entries.length === 0 && depth === 0) return <div className="tree-note muted">The workspace is empty.</div>;
  return (
    <ul className="tree" role={depth === 0 ? "tree" : "group"}>
      {entries.map((e) => {
        const isDir = e.kind === "dir";
        const expanded = !!open[e.path];
        return (
          <li key={e.path} role="treeitem" aria-expanded={isDir ? expanded : undefined}>
            <button
              type="button"
              className={`tree-row ${selected === e.path ? "selected" : ""}`}
              style={{ paddingLeft: depth * 14 + 8 }}
              onClick={() => (isDir ? setOpen({ ...open, [e.path]: !expanded }) : onSelect(e))}
            >
              <span className="tree-icon" aria-hidden="true">
                {isDir ? (expanded ? "▾" : "▸") : "·"}
              </span>
              <span className="tree-name">{e.name}</span>
              {!isDir && <span className="muted tree-size">{formatBytes(e.size)}</span>}
            </button>
            {isDir && expanded && (
              <Dir cid={cid} path={e.path} depth={depth + 1} version={version} selected={selected} onSelect={onSelect} />
            )}
          </li>
        );
      })}
    </ul>
  );
}

export function Files({
  cid,
  version,
  sandbox,
}: {
  cid: string;
  version: number;
  sandbox: string;
}) {
  const [selected, setSelected] = useState<FileEntry | null>(null);
  const [manual, setManual] = useState(0);
  const [wake, setWake] = useState(false);
  const dirty = useRef(false);
  const onDirty = useCallback((d: boolean) => {
    dirty.current = d;
  }, []);
  const [imported, setImported] = useState<{ ok: boolean; text: string } | null>(null);
  const importArchive = async (file: File) => {
    setImported({ ok: true, text: `Unpacking ${file.name}…` });
    try {
      const done = await api.extract(cid, file);
      setImported({ ok: true, text: `${file.name}: ${done.total} file${done.total === 1 ? "" : "s"} unpacked.` });
      setManual((m) => m + 1);
    } catch (e) {
      setImported({ ok: false, text: `${file.name} was not unpacked: ${errorMessage(e)}` });
    }
  };
  const onSaved = useCallback(() => setManual((m) => m + 1), []); // sizes in the tree
  const onSelect = useCallback((e: FileEntry) => {
    if (dirty.current && !window.confirm("Leave this file? Your unsaved changes are lost.")) return;
    dirty.current = false;
    setSelected(e);
  }, []);
  const v = version + manual;
  // Listing files starts the sandbox: looking at a conversation must not wake it by itself.
  if (!wake && sandbox !== "ready" && sandbox !== "starting") {
    return (
      <div className="panel-empty muted">
        <p>
          The sandbox is {sandbox === "none" ? "not started" : sandbox}. Browsing its files starts
          it.
        </p>
        <button type="button" onClick={() => setWake(true)}>
          Show files
        </button>
      </div>
    );
  }
  return (
    <div className="files">
      <div className="files-tree">
        <div className="panel-toolbar">
          <strong>Workspace</strong>
          <span className="spacer" />
          <label className="button" title="Unpack a .zip, .tar.gz or git .bundle into the workspace">
            ⤒ Import
            <input
              type="file"
              hidden
              accept=".zip,.tar.gz,.tgz,.bundle"
              aria-label="Import an archive"
              onChange={(e) => {
                const file = e.target.files?.[0];
                e.target.value = "";
                if (file) void importArchive(file);
              }}
            />
          </label>
          <a className="button" href={api.archiveUrl(cid, "zip")} download title="Download the workspace as a zip">
            ⤓ zip
          </a>
          <a className="button" href={api.archiveUrl(cid, "tar.gz")} download title="Download the workspace as a tar.gz">
            ⤓ tar.gz
          </a>
          <button type="button" className="icon" title="Refresh" aria-label="Refresh files" onClick={() => setManual(manual + 1)}>
            ↻
          </button>
        </div>
        {imported && (
          <p className={`editor-note ${imported.ok ? "muted" : "error-text"}`} role={imported.ok ? "status" : "alert"}>
            {imported.text}
          </p>
        )}
        <Dir cid={cid} path="." depth={0} version={v} selected={selected?.path ?? null} onSelect={onSelect} />
      </div>
      {selected ? (
        <FileEditor key={selected.path} cid={cid} entry={selected} version={v} onDirty={onDirty} onSaved={onSaved} />
      ) : (
        <div className="viewer panel-empty muted">Select a file to view it.</div>
      )}
    </div>
  );
}
