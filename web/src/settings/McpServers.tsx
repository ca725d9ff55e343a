// The MCP servers an administrator configured in mcp.json, as your conversations found them.
import { useEffect, useState } from "react";
import { api, errorMessage, type McpServer } from "../api/client";

const WHERE: Record<string, string> = {
  sandbox: "runs in each conversation's sandbox",
  host: "runs on the server (set by an administrator)",
  http: "reached over HTTP from the server",
};

const STATUS: Record<string, string> = {
  connected: "connected",
  failed: "unavailable",
  stopped: "stopped (starts again at the next run)",
  not_started: "starts at a conversation's next run",
  invalid: "misconfigured",
};

function risk(kind: McpServer["tools"][number]["kind"]): string {
  if (kind.destructive) return "asks first: may destroy";
  if (kind.network) return "asks first: reaches out";
  if (kind.writes) return "changes things";
  return "read-only";
}

export function McpServersSection({ isAdmin = false }: { isAdmin?: boolean }) {
  const [servers, setServers] = useState<McpServer[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [draft, setDraft] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);

  useEffect(() => {
    api.mcpServers().then(setServers, (e: unknown) => setError(errorMessage(e)));
  }, []);

  const edit = async () => {
    setError(null);
    try {
      setDraft(JSON.stringify(await api.mcpConfig(), null, 2));
    } catch (e) {
      setError(errorMessage(e));
    }
  };

  const save = async () => {
    if (draft === null) return;
    setSaving(true);
    setError(null);
    try {
      const parsed: unknown = JSON.parse(draft);
      setServers(await api.saveMcpConfig(parsed as Parameters<typeof api.saveMcpConfig>[0]));
      setDraft(null);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setSaving(false);
    }
  };

  return (
    <section className="mcp-servers" aria-labelledby="mcp-title">
      <h2 id="mcp-title">MCP servers</h2>
      <p className="muted">
        Tools from the servers in <code>mcp.json</code> of the data directory, offered to the model
        as <code>mcp__server__tool</code>. A tool that does not say it only reads asks for approval.
      </p>
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
      {servers && servers.length === 0 && <p className="muted">No MCP servers are configured.</p>}
      {servers && servers.length > 0 && (
        <ul className="mcp-list" aria-label="MCP servers">
          {servers.map((s) => (
            <li key={s.name} data-status={s.status}>
              <div className="mcp-head">
                <code>{s.name}</code>
                <span className={`mcp-status ${s.status}`}>{STATUS[s.status] ?? s.status}</span>
                <span className="muted">{WHERE[s.transport] ?? s.transport}</span>
              </div>
              {s.error && <p className="error">{s.error}</p>}
              {s.tools.length > 0 && (
                <ul className="mcp-tools" aria-label={`Tools of ${s.name}`}>
                  {s.tools.map((t) => (
                    <li key={t.name} title={t.description}>
                      <code>{t.name}</code>
                      <span className="muted">{risk(t.kind)}</span>
                    </li>
                  ))}
                </ul>
              )}
            </li>
          ))}
        </ul>
      )}
      {isAdmin && draft === null && (
        <button type="button" onClick={() => void edit()}>
          Edit mcp.json
        </button>
      )}
      {isAdmin && draft !== null && (
        <div className="mcp-editor">
          <p className="muted">
            Servers on the host (<code>"host": true</code>) are added or changed only in the file on the
            server itself.
          </p>
          <textarea
            aria-label="mcp.json"
            rows={10}
            spellCheck={false}
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
          />
          <div className="actions">
            <button type="button" onClick={() => setDraft(null)} disabled={saving}>
              Discard
            </button>
            <button type="button" className="primary" onClick={() => void save()} disabled={saving}>
              Save mcp.json
            </button>
          </div>
        </div>
      )}
    </section>
  );
}
