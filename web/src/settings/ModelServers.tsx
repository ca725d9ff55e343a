// OpenAI-compatible servers an administrator names (a laptop's Ollama, a GPU box's vLLM):
// each has its own base URL and key, and its models are offered as `<name>:<model>`.
import { useEffect, useState } from "react";
import { api, errorMessage, type ProviderSettings } from "../api/client";
import { CHOICES } from "./ConnectModel";
import { ErrorLine, useAction } from "./useAction";

const PRESETS = CHOICES.filter((c) => c.preset);
const BUILTIN = new Set(["openai", "anthropic"]);

function seen(p: ProviderSettings): string {
  const caps = p.capabilities;
  if (!caps) return "";
  const parts = [];
  if (caps.stream_tools === false) parts.push("tool turns unstreamed (the server refuses to stream them)");
  if (caps.tool_format === "text") parts.push("tool calls read from its text");
  if (caps.context_window) parts.push(`window ${caps.context_window.toLocaleString()} tokens`);
  return parts.length ? `Seen: ${parts.join("; ")}.` : "";
}

export function ModelServersSection({ isAdmin }: { isAdmin: boolean }) {
  const [servers, setServers] = useState<ProviderSettings[] | null>(null);
  const [name, setName] = useState("");
  const [preset, setPreset] = useState("");
  const [baseUrl, setBaseUrl] = useState("");
  const [apiKey, setApiKey] = useState("");
  const [status, setStatus] = useState<string | null>(null);
  const { busy, error, setError, act: run } = useAction();
  const [adding, setAdding] = useState(false);

  const reload = () =>
    api.providers().then(
      (all) => setServers(all.filter((p) => !BUILTIN.has(p.id ?? p.provider))),
      (e: unknown) => setError(errorMessage(e)),
    );
  useEffect(() => void reload(), []);

  const values = () => ({
    base_url: baseUrl.trim(),
    ...(apiKey.trim() ? { api_key: apiKey.trim() } : {}),
    ...(preset ? { preset } : {}),
  });

  /** One action at a time (useAction); what it did, in words, as the section's status. */
  const act = async (what: () => Promise<string>) => {
    setStatus(null);
    await run(async () => setStatus(await what()));
  };

  const test = () =>
    act(async () => {
      const { base_url, api_key } = values();
      const result = await api.testProvider(name.trim(), { base_url, ...(api_key ? { api_key } : {}) });
      return result.ok ? `✓ ${result.detail}` : `✗ ${result.detail}`;
    });

  const add = () =>
    act(async () => {
      const saved = await api.saveProvider(name.trim(), values());
      await reload();
      setName("");
      setBaseUrl("");
      setApiKey("");
      setPreset("");
      setAdding(false);
      return `Saved: choose its models as ${saved.id ?? saved.provider}:<model>.`;
    });

  const remove = (id: string) =>
    act(async () => {
      await api.removeProvider(id);
      await reload();
      return `Removed ${id}: conversations that chose its models are told to choose another.`;
    });

  return (
    <section className="model-servers" aria-labelledby="model-servers-title">
      <h2 id="model-servers-title">Model servers</h2>
      <p className="muted">
        OpenAI-compatible servers besides the one above, each with its own address and key. A server
        named <code>gpu-box</code> offers its models as <code>gpu-box:&lt;model&gt;</code>.
      </p>
      <ErrorLine error={error} />
      {servers && servers.length === 0 && <p className="muted">No other model servers.</p>}
      {servers && servers.length > 0 && (
        <ul className="model-server-list" aria-label="Model servers">
          {servers.map((s) => (
            <li key={s.id ?? s.provider}>
              <div className="mcp-head">
                <code>{s.id ?? s.provider}</code>
                <span className="muted">{s.base_url}</span>
                {s.preset && <span className="muted">{s.preset}</span>}
                <span className="muted">{s.api_key_set ? `key ${s.api_key_hint ?? "set"}` : "no key"}</span>
                {isAdmin && (
                  <button type="button" disabled={busy} onClick={() => void remove(s.id ?? s.provider)}>
                    Remove
                  </button>
                )}
              </div>
              {seen(s) && <p className="muted">{seen(s)}</p>}
            </li>
          ))}
        </ul>
      )}
      {isAdmin && !adding && (
        <button type="button" onClick={() => setAdding(true)}>
          Add a model server…
        </button>
      )}
      {isAdmin && adding && (
        <form
          className="model-server-form"
          aria-label="Add a model server"
          onSubmit={(e) => {
            e.preventDefault();
            void add();
          }}
        >
          <label>
            Server name
            <input
              value={name}
              onChange={(e) => setName(e.target.value)}
              placeholder="e.g. gpu-box"
              pattern="[a-z][a-z0-9_\-]{0,31}"
              title="1–32 lowercase letters, digits, - or _, starting with a letter"
              required
              autoComplete="off"
            />
          </label>
          <label>
            Server kind
            <select
              value={preset}
              onChange={(e) => {
                const next = PRESETS.find((c) => c.preset === e.target.value);
                setPreset(e.target.value);
                if (next && !baseUrl.trim()) setBaseUrl(next.baseUrl);
              }}
            >
              <option value="">Other OpenAI-compatible server</option>
              {PRESETS.map((c) => (
                <option key={c.id} value={c.preset}>
                  {c.label}
                </option>
              ))}
            </select>
          </label>
          <label>
            Server address
            <input
              value={baseUrl}
              onChange={(e) => setBaseUrl(e.target.value)}
              placeholder="http://gpu-box:8000/v1"
              required
              inputMode="url"
              autoComplete="off"
            />
          </label>
          <label>
            Server key
            <input
              type="password"
              value={apiKey}
              onChange={(e) => setApiKey(e.target.value)}
              placeholder="optional: local servers need none"
              autoComplete="off"
            />
          </label>
          <div className="actions">
            <button type="button" disabled={busy} onClick={() => setAdding(false)}>
              Cancel
            </button>
            <button type="button" disabled={busy || !name.trim() || !baseUrl.trim()} onClick={() => void test()}>
              Test the server
            </button>
            <button type="submit" className="primary" disabled={busy}>
              Add the server
            </button>
          </div>
        </form>
      )}
      {status && (
        <p className="muted" role="status">
          {status}
        </p>
      )}
    </section>
  );
}
