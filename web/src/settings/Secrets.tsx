// The user's secrets: set, list by name, delete. A value goes to the server and never comes back.
import { useState } from "react";
import { api } from "../api/client";
import { relativeTime } from "../format";
import { useList } from "./useList";

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function SecretsSection() {
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const { items: secrets, error, setError, busy, act } = useList(api.secrets);

  return (
    <section className="secrets" aria-labelledby="secrets-title">
      <h2 id="secrets-title">Secrets</h2>
      <p className="muted">
        Environment variables for the commands and terminals of the conversations you choose them
        in. Their values are stored encrypted, never shown again, and appear as <code>****</code> in
        output and in what the model sees.
      </p>
      {secrets && secrets.length > 0 ? (
        <ul className="secret-list" aria-label="Your secrets">
          {secrets.map((s) => (
            <li key={s.name}>
              <code>{s.name}</code>
              <span className="muted">set {relativeTime(s.updated_at)}</span>
              <span className="spacer" />
              <button
                type="button"
                disabled={busy}
                aria-label={`Delete ${s.name}`}
                onClick={() => void act(() => api.deleteSecret(s.name))}
              >
                Delete
              </button>
            </li>
          ))}
        </ul>
      ) : (
        secrets && <p className="muted">No secrets yet.</p>
      )}
      <form
        className="secret-form"
        onSubmit={(e) => {
          e.preventDefault();
          const chosen = name.trim();
          if (!NAME.test(chosen)) {
            setError("A name is an environment variable name: letters, digits and _, not starting with a digit.");
            return;
          }
          void act(async () => {
            await api.putSecret(chosen, value);
            setName("");
            setValue("");
          });
        }}
      >
        <label>
          Name
          <input
            value={name}
            onChange={(e) => setName(e.target.value)}
            placeholder="e.g. GITHUB_TOKEN"
            autoComplete="off"
            spellCheck={false}
          />
        </label>
        <label>
          Value
          <input
            type="password"
            value={value}
            onChange={(e) => setValue(e.target.value)}
            placeholder="set or replace"
            autoComplete="new-password"
          />
        </label>
        <button type="submit" disabled={busy || !name.trim() || !value}>
          Set secret
        </button>
      </form>
      {error && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
