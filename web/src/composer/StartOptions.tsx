// What a conversation starts with, chosen before its first message: the approval mode and
// the model, above the home screen's composer and sent with the new conversation (POST).
// An open conversation, empty or not, has both in its header.
import { useEffect, useState } from "react";
import { api, type ApprovalMode, type Environment, type Profile } from "../api/client";
import { ModelOptions } from "../conversations/ModelSelect";
import { useModels } from "../conversations/useModels";

export const MODES: { id: ApprovalMode; label: string; hint: string }[] = [
  { id: "ask", label: "Ask before risky", hint: "Ask before dangerous commands" },
  { id: "auto", label: "Auto-approve", hint: "Run everything inside the sandbox without asking" },
  { id: "read_only", label: "Read-only", hint: "Allow only calls that read" },
  { id: "plan", label: "Plan first", hint: "Read only, then propose a plan to approve before anything changes" },
];

/** The approval modes as a select's options, each with its hint. */
export function ModeOptions() {
  return (
    <>
      {MODES.map((m) => (
        <option key={m.id} value={m.id} title={m.hint}>
          {m.label}
        </option>
      ))}
    </>
  );
}

export interface StartChoice {
  approval_mode: ApprovalMode;
  model: string | null; // null: the server's model
  environment: string | null; // null: the host's system
  profile: string | null; // null: the default profile
}

export const DEFAULT_START: StartChoice = {
  approval_mode: "ask",
  model: null,
  environment: null,
  profile: null,
};

/** A profile chosen: its approval mode and model become the choice's (what is sent with
 * the conversation wins over the profile's own, so they must show what will be used). */
export function withProfile(choice: StartChoice, profile: Profile | null): StartChoice {
  return {
    ...choice,
    profile: profile?.name ?? null,
    approval_mode: profile?.approval_mode ?? choice.approval_mode,
    model: profile?.model ?? choice.model,
  };
}

export function StartOptions({
  choice,
  onChange,
}: {
  choice: StartChoice;
  onChange: (next: StartChoice) => void;
}) {
  const models = useModels(choice.model);
  const [environments, setEnvironments] = useState<Environment[]>([]);
  const [profiles, setProfiles] = useState<Profile[]>([]);
  useEffect(() => {
    api.environments().then(setEnvironments, () => setEnvironments([]));
    api.profiles().then(setProfiles, () => setProfiles([]));
  }, []);
  return (
    <div className="start-options" role="group" aria-label="Start with">
      {profiles.length > 0 && (
        <label>
          <span className="muted">Profile</span>
          <select
            aria-label="Profile for this conversation"
            value={choice.profile ?? ""}
            onChange={(e) =>
              onChange(withProfile(choice, profiles.find((p) => p.name === e.target.value) ?? null))
            }
          >
            <option value="">Default</option>
            {profiles.map((p) => (
              <option key={`${p.shared}:${p.name}`} value={p.name}>
                {p.name}
                {p.shared ? " (shared)" : ""}
              </option>
            ))}
          </select>
        </label>
      )}
      <label>
        <span className="muted">Approvals</span>
        <select
          aria-label="Approval mode for this conversation"
          title={MODES.find((m) => m.id === choice.approval_mode)?.hint}
          value={choice.approval_mode}
          onChange={(e) => onChange({ ...choice, approval_mode: e.target.value as ApprovalMode })}
        >
          <ModeOptions />
        </select>
      </label>
      <label>
        <span className="muted">Model</span>
        <select
          aria-label="Model for this conversation"
          value={choice.model ?? ""}
          onChange={(e) => onChange({ ...choice, model: e.target.value || null })}
        >
          <ModelOptions models={models} />
        </select>
      </label>
      {environments.length > 0 && (
        <label>
          <span className="muted">Environment</span>
          <select
            aria-label="Environment for this conversation"
            value={choice.environment ?? ""}
            onChange={(e) => onChange({ ...choice, environment: e.target.value || null })}
          >
            <option value="">The server's system</option>
            {environments.map((env) => (
              <option key={env.name} value={env.name} disabled={env.status === "failed"}>
                {env.name}
                {env.status === "ready" ? "" : ` (${env.status})`}
              </option>
            ))}
          </select>
        </label>
      )}
    </div>
  );
}
