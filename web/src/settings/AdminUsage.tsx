// The administrator's usage page: what each account spent (tokens, cost, from the
// database) and, since the server started, runs by status and where their time went.
import { useEffect, useState } from "react";
import { api, errorMessage, type AdminUsage } from "../api/client";

const money = (n: number) => `$${n.toFixed(n < 1 ? 4 : 2)}`;
const seconds = (n: number) => (n < 60 ? `${n.toFixed(1)} s` : `${(n / 60).toFixed(1)} min`);

export function AdminUsageSection() {
  const [usage, setUsage] = useState<AdminUsage | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    api.adminUsage().then(setUsage, (e: unknown) => setError(errorMessage(e)));
  }, []);

  const since = usage?.since_start;
  const other = since ? Math.max(0, since.run_seconds - since.model_seconds - since.tool_seconds) : 0;
  return (
    <section className="settings-section" aria-labelledby="usage-title">
      <h2 id="usage-title">Usage</h2>
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
      {since && (
        <p data-testid="usage-since-start">
          Since the server started: {Object.entries(since.runs).map(([status, n]) => `${n} ${status}`).join(", ") || "no runs"}
          {since.run_seconds > 0 && (
            <>
              {" "}· {seconds(since.run_seconds)} in runs: model {seconds(since.model_seconds)}, tools{" "}
              {seconds(since.tool_seconds)}, approvals and Burrow {seconds(other)}
            </>
          )}
        </p>
      )}
      {usage && (
        <table className="usage-table" aria-label="Usage by account">
          <thead>
            <tr>
              <th scope="col">Account</th>
              <th scope="col">Conversations</th>
              <th scope="col">Tokens in</th>
              <th scope="col">Tokens out</th>
              <th scope="col">Cost</th>
            </tr>
          </thead>
          <tbody>
            {usage.accounts.map((a) => (
              <tr key={a.user_id}>
                <td>{a.username}</td>
                <td>{a.conversations}</td>
                <td>{a.prompt_tokens.toLocaleString()}</td>
                <td>{a.completion_tokens.toLocaleString()}</td>
                <td>{money(a.cost)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
