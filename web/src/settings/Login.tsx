// Sign in: the server sets an HttpOnly session cookie that every later request carries.
import { useState } from "react";
import { api, errorMessage, type Me } from "../api/client";

export function Login({ onLoggedIn }: { onLoggedIn: (me: Me) => void }) {
  const [username, setUsername] = useState("admin");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <div className="login-screen">
      <form
        className="login"
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          setError(null);
          api.login(username, password).then(onLoggedIn, (err: unknown) => {
            setError(errorMessage(err));
            setBusy(false);
          });
        }}
      >
        <div className="brand">
          <svg viewBox="0 0 16 16" width="20" height="20" aria-hidden="true">
            <path d="M1 14a7 7 0 0 1 14 0z" fill="currentColor" />
          </svg>
          <span>Burrow</span>
        </div>
        <label>
          Username
          <input value={username} onChange={(e) => setUsername(e.target.value)} autoComplete="username" />
        </label>
        <label>
          Password
          <input
            type="password"
            value={password}
            autoFocus
            onChange={(e) => setPassword(e.target.value)}
            autoComplete="current-password"
          />
        </label>
        {error && (
          <p className="error-text" role="alert">
            {error}
          </p>
        )}
        <button type="submit" className="primary" disabled={busy || !password}>
          Sign in
        </button>
        <p className="muted small">
          First start? The admin password was printed by <code>burrow serve</code>, or set it with{" "}
          <code>BURROW_ADMIN_PASSWORD</code>.
        </p>
      </form>
    </div>
  );
}
