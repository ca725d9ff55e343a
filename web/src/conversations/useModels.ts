// The models a conversation can be given: the ones the server can reach (GET
// /api/settings/models), for the home screen's start options and an open conversation's header.
import { useEffect, useState } from "react";
import { api } from "../api/client";

/** A model as the pickers show it; only `id` is known of one the server did not list. */
export interface ModelChoice {
  id: string;
  /** openai, anthropic or a named server's id (the server says; older servers do not). */
  provider?: string;
  context_window?: number;
  vision?: boolean;
  server_model?: boolean;
}

/** The models to offer: the server's, with `current` first when the server does not list it. */
export function modelChoices(known: ModelChoice[], current: string | null | undefined): ModelChoice[] {
  return current && !known.some((m) => m.id === current) ? [{ id: current }, ...known] : known;
}

/** "claude-x · anthropic · 200k · images": its name, provider, window and vision, as known. */
export function modelLabel(m: ModelChoice): string {
  const [prefix, ...rest] = m.id.split(":");
  const known = m.provider ? prefix === m.provider : prefix === "openai" || prefix === "anthropic";
  const parts = [known ? rest.join(":") : m.id, known ? prefix! : "openai"];
  if (m.context_window) parts.push(windowLabel(m.context_window));
  if (m.vision) parts.push("images");
  return parts.join(" · ");
}

function windowLabel(tokens: number): string {
  if (tokens >= 1_000_000) return `${+(tokens / 1_000_000).toFixed(1)}M`;
  return tokens >= 1000 ? `${Math.round(tokens / 1000)}k` : `${tokens}`;
}

/** Fetched once per mount; none when the server cannot list them (the server's model is still offered). */
export function useModels(current: string | null | undefined): ModelChoice[] {
  const [known, setKnown] = useState<ModelChoice[]>([]);
  useEffect(() => {
    let live = true;
    api.models().then(
      (models) => live && setKnown(models),
      () => live && setKnown([]),
    );
    return () => {
      live = false;
    };
  }, []);
  return modelChoices(known, current);
}
