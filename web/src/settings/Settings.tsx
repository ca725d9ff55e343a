// Model settings: stored on the server; the key is write-only (only a hint comes back).
import { useEffect, useRef, useState } from "react";
import { ApiError, api, errorMessage, type Me, type ModelSettings, type ProviderSettings } from "../api/client";
import { AppearanceSection } from "../ThemeToggle";
import { PasswordSection, TokensSection } from "./Account";
import { AdminUsageSection } from "./AdminUsage";
import { EnvironmentsSection } from "./Environments";
import { McpServersSection } from "./McpServers";
import { ModelServersSection } from "./ModelServers";
import { ProfilesSection } from "./Profiles";
import { NotificationsSection } from "./NotificationsSection";
import { SecretsSection } from "./Secrets";
import { UsersSection } from "./Users";

export type SettingsState = ModelSettings | "unavailable" | null;

export async function loadModelSettings(): Promise<SettingsState> {
  try {
    return await api.modelSettings();
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 405)) return "unavailable";
    throw e;
  }
}

export function SettingsDialog({
  settings,
  me,
  onClose,
  onSaved,
}: {
  settings: SettingsState;
  me?: Me | null;
  onClose: () => void;
  onSaved: (s: ModelSettings) => void;
}) {
  const loaded = settings && settings !== "unavailable" ? settings : null;
  // Only an administrator may save the server's model (PUT /api/settings/model is 403 else).
  const editable = settings !== "unavailable" && !!me?.is_admin;
  // The field edits the saved model: one given by --model or a default may win over it.
  const [model, setModel] = useState(
    loaded ? (loaded.saved_model !== undefined ? loaded.saved_model : loaded.model) ?? "" : "",
  );
  const [baseUrl, setBaseUrl] = useState(loaded?.base_url ?? "");
  const [apiKey, setApiKey] = useState("");
  const [clearKey, setClearKey] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const [anthropic, setAnthropic] = useState<ProviderSettings | null>(null);
  const [anthropicKey, setAnthropicKey] = useState("");
  const [anthropicUrl, setAnthropicUrl] = useState("");
  const [tested, setTested] = useState<string | null>(null);
  const dialog = useRef<HTMLDialogElement>(null);

  useEffect(() => {
    const el = dialog.current;
    if (el && !el.open) el.showModal();
  }, []);

  useEffect(() => {
    if (!loaded) return;
    api.providers().then(
      (all) => {
        const found = all.find((p) => p.provider === "anthropic") ?? null;
        setAnthropic(found);
        setAnthropicUrl(found?.base_url ?? "");
      },
      () => setAnthropic(null), // an older server: no per-provider settings
    );
  }, [loaded]);

  /** What the Anthropic form changes: the values a save would send, and a test tries. */
  const anthropicChanges = () => {
    const update: { api_key?: string; base_url?: string } = {};
    if (anthropicKey) update.api_key = anthropicKey;
    if (anthropicUrl.trim() !== (anthropic?.base_url ?? "")) update.base_url = anthropicUrl.trim();
    return update;
  };

  const saveAnthropic = async () => {
    const update = anthropicChanges();
    if (Object.keys(update).length) setAnthropic(await api.saveProvider("anthropic", update));
  };

  const testAnthropic = async () => {
    setTested("Testing…");
    try {
      // The form's values, unsaved: Cancel after a test leaves the stored key as it was.
      const result = await api.testProvider("anthropic", anthropicChanges());
      setTested(result.ok ? `✓ ${result.detail}` : `✗ ${result.detail}`);
    } catch (e) {
      setTested(errorMessage(e));
    }
  };

  const save = async (update: { model?: string; base_url?: string; api_key?: string }) => {
    setSaving(true);
    setError(null);
    try {
      if (anthropic) await saveAnthropic();
      onSaved(await api.saveModelSettings(update));
      onClose();
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setSaving(false);
    }
  };

  return (
    <dialog ref={dialog} className="settings" onClose={onClose} aria-labelledby="settings-title">
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          const update: { model?: string; base_url?: string; api_key?: string } = {
            model: model.trim(),
            base_url: baseUrl.trim(),
          };
          if (apiKey) update.api_key = apiKey;
          else if (clearKey) update.api_key = "";
          void save(update);
        }}
      >
        <h2 id="settings-title">Model</h2>
        {settings === "unavailable" ? (
          <p className="muted">
            This server does not offer model settings over HTTP. Configure it with{" "}
            <code>BURROW_MODEL</code>, <code>OPENAI_API_KEY</code> and <code>OPENAI_BASE_URL</code>,
            or start it with <code>--model demo</code>.
          </p>
        ) : !editable ? (
          // The server refuses anyone else's save: no form to fill in and lose.
          <p className="muted" role="note">
            {settings?.model ? (
              <>
                This server's model is <code>{settings.model}</code>.{" "}
              </>
            ) : (
              "No model is connected yet. "
            )}
            Only an administrator can change it.
          </p>
        ) : (
          <>
            <p className="muted">
              Any OpenAI-compatible server (OpenAI, DeepSeek, vLLM, Ollama, LM Studio), Claude as{" "}
              <code>anthropic:claude-…</code>, or <code>demo</code> for the offline demo model.
              Keys stay on the server and never enter a sandbox.
            </p>
            {settings && (settings.source === "--model" || settings.source === "BURROW_MODEL") && (
              <p className="muted" role="note">
                This server was started with <code>{settings.source}</code>{" "}
                <code>{settings.model}</code>: it is used instead of the model saved here until the
                server starts without it.
              </p>
            )}
            <label>
              Model name
              <input
                value={model}
                onChange={(e) => setModel(e.target.value)}
                placeholder="e.g. gpt-4.1, anthropic:claude-sonnet-4-6, demo"
                autoComplete="off"
              />
            </label>
            <label>
              Base URL
              <input
                value={baseUrl}
                onChange={(e) => setBaseUrl(e.target.value)}
                placeholder="https://api.openai.com/v1 (default)"
                autoComplete="off"
                inputMode="url"
              />
            </label>
            <label>
              API key
              <input
                type="password"
                value={apiKey}
                onChange={(e) => {
                  setApiKey(e.target.value);
                  setClearKey(false);
                }}
                placeholder={
                  loaded?.api_key_set
                    ? `set (${loaded.api_key_hint ?? "hidden"}) — type to replace`
                    : "not set"
                }
                autoComplete="off"
              />
            </label>
            {loaded?.api_key_set && (
              <label className="check">
                <input
                  type="checkbox"
                  checked={clearKey}
                  onChange={(e) => setClearKey(e.target.checked)}
                  disabled={!!apiKey}
                />
                Remove the stored key
              </label>
            )}
            {anthropic && (
              <fieldset>
                <legend>Anthropic</legend>
                <label>
                  Anthropic key
                  <input
                    type="password"
                    value={anthropicKey}
                    onChange={(e) => setAnthropicKey(e.target.value)}
                    placeholder={
                      anthropic.api_key_set
                        ? `set (${anthropic.api_key_hint ?? "hidden"}) — type to replace`
                        : "not set"
                    }
                    autoComplete="off"
                  />
                </label>
                <label>
                  Anthropic endpoint
                  <input
                    value={anthropicUrl}
                    onChange={(e) => setAnthropicUrl(e.target.value)}
                    placeholder="https://api.anthropic.com (default)"
                    autoComplete="off"
                    inputMode="url"
                  />
                </label>
                <button type="button" onClick={() => void testAnthropic()}>
                  Test the Anthropic key
                </button>
                {tested && (
                  <p className="muted" role="status">
                    {tested}
                  </p>
                )}
              </fieldset>
            )}
          </>
        )}
        {error && (
          <p className="error-text" role="alert">
            {error}
          </p>
        )}
        <div className="actions">
          {editable && (
            <button
              type="button"
              disabled={saving}
              onClick={() => void save({ model: "demo" })}
              title="The offline demo model: no key needed"
            >
              Use the demo model
            </button>
          )}
          <span className="spacer" />
          <button type="button" onClick={onClose}>
            {editable ? "Cancel" : "Close"}
          </button>
          {editable && (
            <button type="submit" className="primary" disabled={saving}>
              Save
            </button>
          )}
        </div>
      </form>
      {settings !== "unavailable" && <ModelServersSection isAdmin={!!me?.is_admin} />}
      <SecretsSection />
      <McpServersSection isAdmin={me?.is_admin ?? false} />
      <EnvironmentsSection isAdmin={!!me?.is_admin} />
      <ProfilesSection isAdmin={!!me?.is_admin} />
      <AppearanceSection />
      <NotificationsSection />
      <PasswordSection />
      <TokensSection />
      {me?.is_admin && <UsersSection selfId={me.id} />}
      {me?.is_admin && <AdminUsageSection />}
    </dialog>
  );
}
