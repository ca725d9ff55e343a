// Profiles: named agent setups (system prompt, model, allowed tools and skills, approval
// mode) a conversation may choose. Your own, and (administrators) shared ones for everyone.
import { useState } from "react";
import { api, type Profile, type ProfileUpdate } from "../api/client";
import { useList } from "./useList";

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;
type Mode = NonNullable<ProfileUpdate["approval_mode"]>;

/** "a, b" -> ["a", "b"]; empty -> null (no allowlist: everything). */
function names(text: string): string[] | null {
  const list = text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
  return list.length ? list : null;
}

const EMPTY = { name: "", systemPrompt: "", model: "", tools: "", skills: "", mode: "", shared: false };

export function ProfilesSection({ isAdmin }: { isAdmin: boolean }) {
  const [form, setForm] = useState(EMPTY);
  const { items: profiles, error, setError, busy, act } = useList(api.profiles);

  const edit = (p: Profile) =>
    setForm({
      name: p.name,
      systemPrompt: p.system_prompt ?? "",
      model: p.model ?? "",
      tools: (p.tools ?? []).join(", "),
      skills: (p.skills ?? []).join(", "),
      mode: p.approval_mode ?? "",
      shared: p.shared,
    });

  const set = (field: keyof typeof EMPTY) => (e: { target: { value: string } }) =>
    setForm({ ...form, [field]: e.target.value });

  return (
    <section className="profiles" aria-labelledby="profiles-title">
      <h2 id="profiles-title">Profiles</h2>
      <p className="muted">
        A profile names a system prompt, a model, the tools and skills the agent may use, and an
        approval mode. Choose one when you create a conversation; fields set on the conversation
        win over the profile's.
      </p>
      {profiles && profiles.length > 0 ? (
        <ul className="secret-list" aria-label="Profiles">
          {profiles.map((p) => (
            <li key={`${p.shared}:${p.name}`}>
              <code>{p.name}</code>
              {p.shared && <span className="badge">shared</span>}
              <span className="muted">{p.tools ? `tools: ${p.tools.join(", ") || "none"}` : "all tools"}</span>
              <span className="spacer" />
              {(!p.shared || isAdmin) && (
                <>
                  <button type="button" disabled={busy} aria-label={`Edit ${p.name}`} onClick={() => edit(p)}>
                    Edit
                  </button>
                  <button
                    type="button"
                    disabled={busy}
                    aria-label={`Delete ${p.name}`}
                    onClick={() => void act(() => api.deleteProfile(p.name, p.shared))}
                  >
                    Delete
                  </button>
                </>
              )}
            </li>
          ))}
        </ul>
      ) : (
        profiles && <p className="muted">No profiles yet.</p>
      )}
      <form
        className="profile-form"
        onSubmit={(e) => {
          e.preventDefault();
          const name = form.name.trim();
          if (!NAME.test(name)) {
            setError("A profile name is letters, digits, '.', '_' or '-', up to 100.");
            return;
          }
          const update: ProfileUpdate = {
            system_prompt: form.systemPrompt.trim() || null,
            model: form.model.trim() || null,
            tools: names(form.tools),
            skills: names(form.skills),
            approval_mode: (form.mode || null) as Mode | null,
            shared: form.shared,
          };
          void act(async () => {
            await api.putProfile(name, update);
            setForm(EMPTY);
          });
        }}
      >
        <label>
          Profile name
          <input value={form.name} onChange={set("name")} placeholder="e.g. reviewer" autoComplete="off" />
        </label>
        <label>
          System prompt
          <textarea value={form.systemPrompt} onChange={set("systemPrompt")} rows={3} placeholder="Burrow's own" />
        </label>
        <label>
          Model
          <input value={form.model} onChange={set("model")} placeholder="the server's" autoComplete="off" />
        </label>
        <label>
          Tools
          <input value={form.tools} onChange={set("tools")} placeholder="all; or e.g. read_file, task" />
        </label>
        <label>
          Skills
          <input value={form.skills} onChange={set("skills")} placeholder="all" />
        </label>
        <label>
          Approval mode
          <select value={form.mode} onChange={set("mode")}>
            <option value="">the conversation's</option>
            <option value="ask">ask</option>
            <option value="auto">auto</option>
            <option value="read_only">read only</option>
          </select>
        </label>
        {isAdmin && (
          <label className="inline">
            <input
              type="checkbox"
              checked={form.shared}
              onChange={(e) => setForm({ ...form, shared: e.target.checked })}
            />
            Shared with every user
          </label>
        )}
        <button type="submit" disabled={busy || !form.name.trim()}>
          Set profile
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
