// The caller's own account: its password, and API tokens for the command line.
import { useEffect, useState } from "react";
import { api, errorMessage, type ApiToken, type ApiTokenCreated } from "../api/client";
import { relativeTime } from "../format";
import { ErrorLine, useAction } from "./useAction";

const MIN_PASSWORD = 8; // the server's rule (burrow/api/routes/me.py)

export function PasswordSection() {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [repeat, setRepeat] = useState("");
  const [done, setDone] = useState(false);
  const { busy, error, setError, act } = useAction();

  return (
    <section className="settings-section" aria-labelledby="password-title">
      <h2 id="password-title">Password</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setDone(false);
          if (next.length < MIN_PASSWORD) return setError(`Use at least ${MIN_PASSWORD} characters.`);
          if (next !== repeat) return setError("The two new passwords differ: type the same one twice.");
          void act(() => api.changePassword(current, next)).then((ok) => {
            if (!ok) return;
            setCurrent("");
            setNext("");
            setRepeat("");
            setDone(true);
          });
        }}
      >
        <label>
          Current password
          <input
            type="password"
            value={current}
            onChange={(e) => setCurrent(e.target.value)}
            autoComplete="current-password"
          />
        </label>
        <label>
          New password
          <input type="password" value={next} onChange={(e) => setNext(e.target.value)} autoComplete="new-password" />
        </label>
        <label>
          New password again
          <input
            type="password"
            value={repeat}
            onChange={(e) => setRepeat(e.target.value)}
            autoComplete="new-password"
          />
        </label>
        <div className="actions">
          <button type="submit" disabled={busy || !current || !next}>
            Change password
          </button>
        </div>
        {done && (
          <p className="muted" role="status">
            Password changed. Your other browser sessions are signed out; API tokens still work.
          </p>
        )}
        <ErrorLine error={error} />
      </form>
    </section>
  );
}

export function TokensSection() {
  const [tokens, setTokens] = useState<ApiToken[] | null>(null);
  const [name, setName] = useState("");
  const [created, setCreated] = useState<ApiTokenCreated | null>(null);
  const { busy, error, setError, act } = useAction();

  const reload = () => api.tokens().then(setTokens, (e: unknown) => setError(errorMessage(e)));
  useEffect(() => {
    void reload();
  }, []);

  return (
    <section className="settings-section" aria-labelledby="tokens-title">
      <h2 id="tokens-title">API tokens</h2>
      <p className="muted">
        For scripts and the command line: send <code>Authorization: Bearer &lt;token&gt;</code>. A token's value
        is shown once, when it is created.
      </p>
      {created && (
        <div className="token-created" role="status">
          <p>
            New token <strong>{created.name}</strong> — copy it now, it will not be shown again:
          </p>
          <code aria-label="New token value">{created.token}</code>
          <button type="button" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      {tokens && tokens.length > 0 ? (
        <ul className="secret-list" aria-label="Your API tokens">
          {tokens.map((t) => (
            <li key={t.id}>
              <code>{t.name || "(unnamed)"}</code>
              <span className="muted">created {relativeTime(t.created_at)}</span>
              <span className="spacer" />
              <button
                type="button"
                disabled={busy}
                aria-label={`Revoke ${t.name}`}
                onClick={() =>
                  void act(async () => {
                    await api.revokeToken(t.id);
                    if (created?.id === t.id) setCreated(null);
                    await reload();
                  })
                }
              >
                Revoke
              </button>
            </li>
          ))}
        </ul>
      ) : (
        tokens && <p className="muted">No API tokens yet.</p>
      )}
      <form
        className="token-form"
        onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            setCreated(await api.createToken(name.trim() || "cli"));
            setName("");
            await reload();
          });
        }}
      >
        <label>
          Token name
          <input
            value={name}
            onChange={(e) => setName(e.target.value)}
            placeholder="e.g. laptop"
            maxLength={200}
            autoComplete="off"
          />
        </label>
        <button type="submit" disabled={busy}>
          Create token
        </button>
      </form>
      <ErrorLine error={error} />
    </section>
  );
}
