// The app the agent started, on its own origin (DESIGN.md §5). The iframe opens a fresh
// signed link from GET /previews (the journal's URL carries no credentials).
import { useEffect, useState } from "react";
import { ApiError, api, type PreviewLink } from "../api/client";

export function Preview({
  cid,
  preview,
}: {
  cid: string;
  preview: { port: number; url: string } | null;
}) {
  const [links, setLinks] = useState<PreviewLink[] | null>(null);
  const [port, setPort] = useState<number | null>(preview?.port ?? null);
  const [reloads, setReloads] = useState(0);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (preview) setPort(preview.port);
  }, [preview]);

  // A new link on every reload: the token in it is short-lived.
  useEffect(() => {
    if (!preview) return;
    let live = true;
    api.previews(cid).then(
      (list) => {
        if (!live) return;
        setLinks(list);
        setError(null);
      },
      (e: unknown) => {
        if (!live) return;
        if (e instanceof ApiError && e.status === 404) setLinks([]);
        else setError(e instanceof Error ? e.message : String(e));
      },
    );
    return () => {
      live = false;
    };
  }, [cid, preview, reloads]);

  if (!preview) {
    return (
      <div className="panel-empty muted">
        No preview yet. When the agent starts a web server with the preview tool, it appears here.
      </div>
    );
  }
  const chosen = links?.find((l) => l.port === port);
  const src = chosen?.url ?? (links !== null && port === preview.port ? preview.url : null);
  return (
    <div className="preview">
      <div className="panel-toolbar">
        <button
          type="button"
          className="icon"
          title="Reload"
          aria-label="Reload preview"
          onClick={() => setReloads(reloads + 1)}
        >
          ↻
        </button>
        {links && links.length > 1 ? (
          <select
            aria-label="Preview port"
            value={port ?? ""}
            onChange={(e) => setPort(Number(e.target.value))}
          >
            {links.map((l) => (
              <option key={l.port} value={l.port}>
                :{l.port} {l.status !== "running" ? `(${l.status})` : ""}
              </option>
            ))}
          </select>
        ) : (
          <span className="badge">:{port}</span>
        )}
        <code className="url" title={chosen?.command || preview.url}>
          {chosen?.command || preview.url}
        </code>
        {chosen && chosen.status !== "running" && <span className="badge warn">{chosen.status}</span>}
        {src && port !== null && (
          // Not `src`: the iframe has spent that link; this route signs a fresh one.
          <a
            className="button"
            href={api.previewOpenUrl(cid, port)}
            target="_blank"
            rel="noopener noreferrer"
          >
            Open ↗
          </a>
        )}
      </div>
      {error && <p className="pad error-text">{error}</p>}
      {src ? (
        <iframe
          key={`${src}#${reloads}`}
          src={src}
          title={`Preview of port ${port}`}
          sandbox="allow-scripts allow-forms allow-same-origin allow-popups allow-modals allow-downloads"
        />
      ) : (
        <div className="panel-empty muted">{links === null ? "Opening…" : "This preview is gone."}</div>
      )}
    </div>
  );
}
