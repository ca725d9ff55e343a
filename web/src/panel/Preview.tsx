// The app the agent started, on its own origin (DESIGN.md §5). The iframe opens a fresh
// signed link from GET /previews (the journal's URL carries no credentials).
import { useEffect, useRef, useState } from "react";
import { ApiError, api, errorMessage, type PreviewLink } from "../api/client";

export function Preview({
  cid,
  preview,
  sandbox,
}: {
  cid: string;
  preview: { port: number; url: string } | null;
  /** The sandbox's live status: a link listed "hibernated" is stale once it woke. */
  sandbox: string;
}) {
  const [links, setLinks] = useState<PreviewLink[] | null>(null);
  const [port, setPort] = useState<number | null>(preview?.port ?? null);
  const [reloads, setReloads] = useState(0);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (preview) setPort(preview.port);
  }, [preview]);

  const frames = useRef(new Map<string, string>());
  const [relists, setRelists] = useState(0);

  // A new link on every reload: the token in it is short-lived. Listed again when the
  // sandbox wakes or sleeps, so a status shown is never the one from before.
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
        else setError(errorMessage(e));
      },
    );
    return () => {
      live = false;
    };
  }, [cid, preview, reloads, sandbox, relists]);

  // A woken sandbox starts its services again a moment after it is ready: look again
  // (a few times) rather than keep saying "stopped" about a service that is starting.
  const settling = sandbox === "ready" && links?.some((l) => l.status !== "running") && relists < 10;
  useEffect(() => {
    if (!settling) return;
    const timer = setTimeout(() => setRelists((n) => n + 1), 1500);
    return () => clearTimeout(timer);
  }, [settling, links]);

  if (!preview) {
    return (
      <div className="panel-empty muted">
        No preview yet. When the agent starts a web server with the preview tool, it appears here.
      </div>
    );
  }
  const chosen = links?.find((l) => l.port === port);
  // The frame keeps the link it opened with: a relisting must not reload the app.
  const frameKey = `${port}#${reloads}`;
  const fresh = chosen?.url ?? (links !== null && port === preview.port ? preview.url : null);
  if (fresh && !frames.current.has(frameKey)) frames.current.set(frameKey, fresh);
  const src = frames.current.get(frameKey) ?? null;
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
