// Taking the workspace out: commit and push a branch, then open a GitHub pull request.
import { useEffect, useState } from "react";
import { api, errorMessage, type SecretName } from "../api/client";

function SecretSelect({
  label,
  value,
  secrets,
  onChange,
}: {
  label: string;
  value: string;
  secrets: SecretName[];
  onChange: (name: string) => void;
}) {
  return (
    <label>
      {label}{" "}
      <select value={value} onChange={(e) => onChange(e.target.value)} aria-label={label}>
        <option value="">none</option>
        {secrets.map((s) => (
          <option key={s.name} value={s.name}>
            {s.name}
          </option>
        ))}
      </select>
    </label>
  );
}

export function GitOut({ cid }: { cid: string }) {
  const [secrets, setSecrets] = useState<SecretName[]>([]);
  const [branch, setBranch] = useState("burrow/changes");
  const [secret, setSecret] = useState("");
  const [title, setTitle] = useState("");
  const [base, setBase] = useState("main");
  const [token, setToken] = useState("");
  const [result, setResult] = useState<{ text: string; url?: string; error?: boolean } | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    api.secrets().then(setSecrets, () => setSecrets([]));
  }, []);

  const act = async (what: () => Promise<{ text: string; url?: string }>) => {
    setBusy(true);
    try {
      setResult(await what());
    } catch (e) {
      setResult({ text: errorMessage(e), error: true });
    } finally {
      setBusy(false);
    }
  };
  const push = () =>
    act(async () => {
      const done = await api.gitPush(cid, { branch, ...(secret ? { secret } : {}) });
      return { text: `Pushed ${done.branch} to ${done.url} (${done.commit.slice(0, 7)})${done.committed ? "" : ", nothing new to commit"}.` };
    });
  const pullRequest = () =>
    act(async () => {
      const pr = await api.pullRequest(cid, { title, base, head: branch, secret: token });
      return { text: `Pull request #${pr.number} opened.`, url: pr.url };
    });

  return (
    <details className="git-out">
      <summary>Push a branch / open a pull request</summary>
      <form
        className="git-out-form"
        onSubmit={(e) => {
          e.preventDefault();
          void push();
        }}
      >
        <label>
          Branch <input value={branch} onChange={(e) => setBranch(e.target.value)} aria-label="Branch" required />
        </label>
        <SecretSelect label="Credential" value={secret} secrets={secrets} onChange={setSecret} />
        <button type="submit" disabled={busy || !branch}>
          Commit &amp; push
        </button>
      </form>
      <form
        className="git-out-form"
        onSubmit={(e) => {
          e.preventDefault();
          void pullRequest();
        }}
      >
        <label>
          Title <input value={title} onChange={(e) => setTitle(e.target.value)} aria-label="Pull request title" required />
        </label>
        <label>
          Into <input value={base} onChange={(e) => setBase(e.target.value)} aria-label="Base branch" required />
        </label>
        <SecretSelect label="GitHub token" value={token} secrets={secrets} onChange={setToken} />
        <button type="submit" disabled={busy || !title || !token}>
          Open pull request
        </button>
      </form>
      {result && (
        <div className={result.error ? "error-text" : "muted"} role="status">
          {result.text}{" "}
          {result.url && (
            <a href={result.url} target="_blank" rel="noreferrer noopener">
              {result.url}
            </a>
          )}
        </div>
      )}
    </details>
  );
}
