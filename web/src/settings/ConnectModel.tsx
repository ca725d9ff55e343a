// The first run: connect a model (a provider, its key, a Test, one of its models), or use
// the offline demo. A test never saves; Connect saves what was tested.
import { useState } from "react";
import { api, errorMessage, type ModelSettings } from "../api/client";
import type { SettingsState } from "./Settings";

type Preset = "ollama" | "vllm" | "llamacpp" | "lmstudio" | "openrouter";

interface Choice {
  id: string;
  label: string;
  provider: "openai" | "anthropic";
  baseUrl: string; // filled in, editable; "" = the provider's own API
  keyNeeded: boolean; // local servers take any key, or none
  preset?: Preset;
}

export const CHOICES: Choice[] = [
  { id: "openai", label: "OpenAI", provider: "openai", baseUrl: "", keyNeeded: true },
  { id: "anthropic", label: "Anthropic", provider: "anthropic", baseUrl: "", keyNeeded: true },
  { id: "ollama", label: "Ollama", provider: "openai", baseUrl: "http://localhost:11434/v1", keyNeeded: false, preset: "ollama" },
  { id: "llamacpp", label: "llama.cpp server", provider: "openai", baseUrl: "http://localhost:8080/v1", keyNeeded: false, preset: "llamacpp" },
  { id: "vllm", label: "vLLM", provider: "openai", baseUrl: "http://localhost:8000/v1", keyNeeded: false, preset: "vllm" },
  { id: "lmstudio", label: "LM Studio", provider: "openai", baseUrl: "http://localhost:1234/v1", keyNeeded: false, preset: "lmstudio" },
  { id: "openrouter", label: "OpenRouter", provider: "openai", baseUrl: "https://openrouter.ai/api/v1", keyNeeded: true, preset: "openrouter" },
  { id: "other", label: "Another OpenAI-compatible server", provider: "openai", baseUrl: "", keyNeeded: false },
];

type Tested = { ok: true; detail: string; models: string[] } | { ok: false; detail: string } | null;

export function ConnectModel({
  settings,
  isAdmin,
  onUseDemo,
  onConnected,
}: {
  settings: SettingsState;
  isAdmin: boolean;
  onUseDemo: () => Promise<void>;
  onConnected: (settings: ModelSettings) => void;
}) {
  const [choiceId, setChoiceId] = useState("openai");
  const choice = CHOICES.find((c) => c.id === choiceId) ?? CHOICES[0]!;
  const [baseUrl, setBaseUrl] = useState(choice.baseUrl);
  const [apiKey, setApiKey] = useState("");
  const [tested, setTested] = useState<Tested>(null);
  const [testing, setTesting] = useState(false);
  const [model, setModel] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);

  const choose = (id: string) => {
    const next = CHOICES.find((c) => c.id === id) ?? CHOICES[0]!;
    setChoiceId(next.id);
    setBaseUrl(next.baseUrl);
    setTested(null);
    setModel("");
  };
  // What a test tries and Connect saves: "" for the base URL means the provider's own API.
  const values = () => ({ base_url: baseUrl.trim(), ...(apiKey.trim() ? { api_key: apiKey.trim() } : {}) });

  const test = async () => {
    setTesting(true);
    setTested(null);
    setError(null);
    try {
      const result = await api.testProvider(choice.provider, values());
      const models = result.models ?? [];
      setTested(result.ok ? { ok: true, detail: result.detail, models } : { ok: false, detail: result.detail });
      if (result.ok) setModel(models[0] ?? "");
    } catch (e) {
      setTested({ ok: false, detail: errorMessage(e) });
    } finally {
      setTesting(false);
    }
  };

  const connect = async () => {
    setSaving(true);
    setError(null);
    try {
      await api.saveProvider(choice.provider, { ...values(), preset: choice.preset ?? "" });
      const name = choice.provider === "anthropic" ? `anthropic:${model.trim()}` : model.trim();
      onConnected(await api.saveModelSettings({ model: name }));
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setSaving(false);
    }
  };

  const demo = (
    <button
      type="button"
      onClick={() => {
        onUseDemo().catch((e: unknown) => setError(errorMessage(e)));
      }}
    >
      Use the offline demo instead
    </button>
  );

  if (settings === "unavailable" || !isAdmin) {
    return (
      <section className="first-run" aria-labelledby="first-run-title">
        <h2 id="first-run-title">Connect a model</h2>
        <p>
          {settings === "unavailable" ? (
            <>
              This server takes its model from its environment: restart it with <code>OPENAI_API_KEY</code>{" "}
              (and <code>OPENAI_BASE_URL</code> for another server) or with <code>--model demo</code>.
            </>
          ) : (
            "No model is connected yet, and only an administrator can connect one. Ask yours to open Burrow and connect a model."
          )}
        </p>
        {error && <p className="error-text">{error}</p>}
      </section>
    );
  }

  return (
    <section className="first-run connect" aria-labelledby="first-run-title">
      <h2 id="first-run-title">Connect a model</h2>
      <p className="muted">
        Burrow's agent needs a model to plan and write code: a hosted one with your key, or one you run yourself.
        The key stays on this server and never enters a sandbox.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (tested?.ok && model.trim()) void connect();
          else void test();
        }}
      >
        <label>
          Provider
          <select value={choiceId} onChange={(e) => choose(e.target.value)}>
            {CHOICES.map((c) => (
              <option key={c.id} value={c.id}>
                {c.label}
              </option>
            ))}
          </select>
        </label>
        {choice.id !== "openai" && choice.id !== "anthropic" && (
          <label>
            Base URL
            <input
              value={baseUrl}
              onChange={(e) => {
                setBaseUrl(e.target.value);
                setTested(null);
              }}
              placeholder="http://host:port/v1"
              inputMode="url"
              autoComplete="off"
            />
          </label>
        )}
        <label>
          {choice.keyNeeded ? "API key" : "API key (optional)"}
          <input
            type="password"
            value={apiKey}
            onChange={(e) => {
              setApiKey(e.target.value);
              setTested(null);
            }}
            placeholder={choice.keyNeeded ? "paste your key" : "only if the server asks for one"}
            autoComplete="off"
          />
        </label>
        <div className="actions">
          <button type="button" onClick={() => void test()} disabled={testing}>
            {testing ? "Testing…" : "Test"}
          </button>
        </div>
        {tested && (
          <p className={tested.ok ? "muted" : "error-text"} role={tested.ok ? "status" : "alert"}>
            {tested.ok ? `✓ ${tested.detail}` : `✗ ${tested.detail}`}
          </p>
        )}
        {tested?.ok && (
          <label>
            Model
            {tested.models.length ? (
              <select value={model} onChange={(e) => setModel(e.target.value)}>
                {tested.models.map((m) => (
                  <option key={m} value={m}>
                    {m}
                  </option>
                ))}
              </select>
            ) : (
              <input value={model} onChange={(e) => setModel(e.target.value)} placeholder="the model's name" />
            )}
          </label>
        )}
        {error && (
          <p className="error-text" role="alert">
            {error}
          </p>
        )}
        <div className="actions">
          {demo}
          <span className="spacer" />
          <button type="submit" className="primary" disabled={!tested?.ok || !model.trim() || saving}>
            Connect
          </button>
        </div>
      </form>
    </section>
  );
}

/** While the demo model is the one in use: what it is, in words, and the way out. */
export function DemoNotice({ onConnect }: { onConnect: () => void }) {
  return (
    <p className="demo-notice" role="note">
      You are using the offline <strong>demo</strong> model: it follows a fixed plan (it builds a small site) whatever you
      ask, so it shows how Burrow works, not what an agent can do.{" "}
      <button type="button" className="link" onClick={onConnect}>
        Connect a real model…
      </button>
    </p>
  );
}
