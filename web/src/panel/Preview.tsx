// The app the agent started, in its own origin (DESIGN.md §5), framed.
import { useState } from "react";

export function Preview({ preview }: { preview: { port: number; url: string } | null }) {
  const [reloads, setReloads] = useState(0);
  if (!preview) {
    return (
      <div className="panel-empty muted">
        No preview yet. When the agent starts a web server with the preview tool, it appears here.
      </div>
    );
  }
  return (
    <div className="preview">
      <div className="panel-toolbar">
        <button type="button" className="icon" title="Reload" aria-label="Reload preview" onClick={() => setReloads(reloads + 1)}>
          ↻
        </button>
        <code className="url" title={preview.url}>
          {preview.url}
        </code>
        <a className="button" href={preview.url} target="_blank" rel="noopener noreferrer">
          Open ↗
        </a>
      </div>
      <iframe
        key={`${preview.url}#${reloads}`}
        src={preview.url}
        title={`Preview of port ${preview.port}`}
        sandbox="allow-scripts allow-forms allow-same-origin allow-popups allow-modals"
      />
    </div>
  );
}
