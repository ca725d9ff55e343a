// A new conversation from a git repository: the server clones it into the workspace.
import { useState } from "react";
import { api, errorMessage, type Environment, type RepoIn, type SecretName } from "../api/client";

export function RepoImport({
  onCreate,
}: {
  onCreate: (repo: RepoIn, environment: string | null) => Promise<void>;
}) {
  const [url, setUrl] = useState("");
  const [ref, setRef] = useState("");
  const [secret, setSecret] = useState("");
  const [secrets, setSecrets] = useState<SecretName[]>([]);
  const [environment, setEnvironment] = useState("");
  const [environments, setEnvironments] = useState<Environment[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async () => {
    setBusy(true);
    try {
      const repo = { url: url.trim(), ...(ref.trim() ? { ref: ref.trim() } : {}), ...(secret ? { secret } : {}) };
      await onCreate(repo, environment || null);
      setUrl("");
      setRef("");
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <details
      className="repo-import"
      onToggle={(e) => {
        if ((e.target as HTMLDetailsElement).open) {
          api.secrets().then(setSecrets, () => setSecrets([]));
          api.environments().then(setEnvironments, () => setEnvironments([]));
        }
      }}
    >
      <summary>From a git repository…</summary>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void submit();
        }}
      >
        <input
          value={url}
          onChange={(e) => setUrl(e.target.value)}
          placeholder="https://github.com/owner/repo.git"
          aria-label="Repository URL"
          required
        />
        <input value={ref} onChange={(e) => setRef(e.target.value)} placeholder="branch or tag (optional)" aria-label="Ref" />
        <select value={secret} onChange={(e) => setSecret(e.target.value)} aria-label="Credential secret">
          <option value="">no credential (public)</option>
          {secrets.map((s) => (
            <option key={s.name} value={s.name}>
              {s.name}
            </option>
          ))}
        </select>
        {environments.length > 0 && (
          <select value={environment} onChange={(e) => setEnvironment(e.target.value)} aria-label="Environment">
            <option value="">the server's system</option>
            {environments.map((env) => (
              <option key={env.name} value={env.name} disabled={env.status === "failed"}>
                {env.name}
              </option>
            ))}
          </select>
        )}
        <button type="submit" disabled={busy || !url.trim()}>
          Clone into a new conversation
        </button>
        {error && <div className="error-text">{error}</div>}
      </form>
    </details>
  );
}
