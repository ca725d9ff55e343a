// Environments: systems set up once (packages, a setup script) that a new conversation's
// sandbox starts from. Everyone sees them and their builds; administrators define them.
import { useState } from "react";
import { api, type Environment } from "../api/client";
import { ErrorLine } from "./useAction";
import { useList } from "./useList";

const STATUS: Record<Environment["status"], string> = {
  building: "building…",
  ready: "ready",
  failed: "build failed",
  cancelled: "build cancelled",
};

export function EnvironmentsSection({ isAdmin = false }: { isAdmin?: boolean }) {
  const { items, error, busy, act } = useList(api.environments);
  const [name, setName] = useState("");
  const [packages, setPackages] = useState("");
  const [setup, setSetup] = useState("");

  const define = () =>
    act(() =>
      api.defineEnvironment({ name, base: "host", packages: packages.split(/\s+/).filter(Boolean), setup }),
    ).then((ok) => {
      if (ok) {
        setName("");
        setPackages("");
        setSetup("");
      }
    });

  return (
    <section className="environments" aria-labelledby="environments-title">
      <h2 id="environments-title">Environments</h2>
      <p className="muted">
        A system set up once — Debian packages from the server's apt sources, then a setup script — that
        a new conversation's sandbox starts from. Each build runs in a sandbox of its own.
      </p>
      <ErrorLine error={error} />
      {items && items.length === 0 && <p className="muted">No environments are defined.</p>}
      {items && items.length > 0 && (
        <ul className="environment-list" aria-label="Environments">
          {items.map((e) => (
            <li key={e.name} data-status={e.status}>
              <div className="environment-head">
                <code>{e.name}</code>
                <span className={`environment-status ${e.status}`}>{STATUS[e.status]}</span>
                {e.packages.length > 0 && <span className="muted">{e.packages.join(" ")}</span>}
              </div>
              {e.status === "failed" && <pre className="error">{e.detail}</pre>}
              {e.status === "building" && e.log_tail && (
                <pre className="environment-log" aria-label={`Build output of ${e.name}`}>
                  {e.log_tail.split("\n").slice(-8).join("\n")}
                </pre>
              )}
              {isAdmin && (
                <div className="actions">
                  {e.status === "building" && (
                    <button type="button" disabled={busy} onClick={() => void act(() => api.cancelEnvironment(e.name))}>
                      Cancel build
                    </button>
                  )}
                  <button type="button" disabled={busy} onClick={() => void act(() => api.deleteEnvironment(e.name))}>
                    Delete {e.name}
                  </button>
                </div>
              )}
            </li>
          ))}
        </ul>
      )}
      <button type="button" onClick={() => void act(async () => undefined)} disabled={busy}>
        Refresh
      </button>
      {isAdmin && (
        <form
          className="environment-form"
          onSubmit={(ev) => {
            ev.preventDefault();
            void define();
          }}
        >
          <label>
            Environment name
            <input value={name} onChange={(ev) => setName(ev.target.value)} placeholder="python-db" required />
          </label>
          <label>
            Packages
            <input
              value={packages}
              onChange={(ev) => setPackages(ev.target.value)}
              placeholder="postgresql redis-server"
            />
          </label>
          <label>
            Setup script
            <textarea
              rows={4}
              spellCheck={false}
              value={setup}
              onChange={(ev) => setSetup(ev.target.value)}
              placeholder="pip install --break-system-packages poetry"
            />
          </label>
          <button type="submit" className="primary" disabled={busy || !name}>
            Define and build
          </button>
        </form>
      )}
    </section>
  );
}
