// Administrators: every account, to create, disable, promote, or give a new password.
import { useEffect, useState } from "react";
import { api, errorMessage, type Account, type AccountChange } from "../api/client";
import { ErrorLine, useAction } from "./useAction";

export function UsersSection({ selfId }: { selfId: string }) {
  const [accounts, setAccounts] = useState<Account[] | null>(null);
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [admin, setAdmin] = useState(false);
  const [resetting, setResetting] = useState<{ id: string; password: string } | null>(null);
  const { busy, error, setError, act } = useAction();

  const reload = () => api.users().then(setAccounts, (e: unknown) => setError(errorMessage(e)));
  useEffect(() => {
    void reload();
  }, []);

  const change = (id: string, update: AccountChange) =>
    act(async () => {
      await api.updateUser(id, update);
      await reload();
    });

  return (
    <section className="settings-section" aria-labelledby="users-title">
      <h2 id="users-title">Users</h2>
      <p className="muted">
        Disabling an account signs it out everywhere and stops its API tokens at once. The last enabled
        administrator cannot be demoted or disabled.
      </p>
      {accounts && (
        <ul className="user-list" aria-label="Accounts">
          {accounts.map((a) => (
            <li key={a.id} className={a.disabled ? "disabled" : undefined}>
              <span className="user-name">
                {a.username}
                {a.id === selfId && <span className="muted"> (you)</span>}
                {a.is_admin && <span className="badge">admin</span>}
                {a.disabled && <span className="badge bad">disabled</span>}
              </span>
              <span className="spacer" />
              <button
                type="button"
                disabled={busy}
                onClick={() => void change(a.id, { is_admin: !a.is_admin })}
                aria-label={`${a.is_admin ? "Demote" : "Make admin"} ${a.username}`}
              >
                {a.is_admin ? "Demote" : "Make admin"}
              </button>
              <button
                type="button"
                disabled={busy}
                onClick={() => void change(a.id, { disabled: !a.disabled })}
                aria-label={`${a.disabled ? "Enable" : "Disable"} ${a.username}`}
              >
                {a.disabled ? "Enable" : "Disable"}
              </button>
              <button
                type="button"
                disabled={busy}
                onClick={() => setResetting({ id: a.id, password: "" })}
                aria-label={`New password for ${a.username}`}
              >
                New password
              </button>
              {resetting?.id === a.id && (
                <form
                  className="token-form"
                  onSubmit={(e) => {
                    e.preventDefault();
                    void change(a.id, { password: resetting.password }).then((ok) => ok && setResetting(null));
                  }}
                >
                  <label>
                    New password for {a.username}
                    <input
                      type="password"
                      value={resetting.password}
                      onChange={(e) => setResetting({ id: a.id, password: e.target.value })}
                      autoComplete="new-password"
                      minLength={8}
                    />
                  </label>
                  <button type="submit" disabled={busy || resetting.password.length < 8}>
                    Set
                  </button>
                </form>
              )}
            </li>
          ))}
        </ul>
      )}
      <form
        className="secret-form"
        onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            await api.createUser(username.trim(), password, admin);
            setUsername("");
            setPassword("");
            setAdmin(false);
            await reload();
          });
        }}
      >
        <label>
          Username
          <input value={username} onChange={(e) => setUsername(e.target.value)} autoComplete="off" />
        </label>
        <label>
          Password
          <input
            type="password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            autoComplete="new-password"
          />
        </label>
        <button type="submit" disabled={busy || !username.trim() || password.length < 8}>
          Add user
        </button>
        <label className="check">
          <input type="checkbox" checked={admin} onChange={(e) => setAdmin(e.target.checked)} />
          Administrator
        </label>
      </form>
      <ErrorLine error={error} />
    </section>
  );
}
