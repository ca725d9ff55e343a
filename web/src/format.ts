// Small formatting helpers shared by the views.

// Numbers shown may come from any server version: a missing one reads as 0, never throws.
const num = (n: number): number => (Number.isFinite(n) ? n : 0);

export function formatTokens(value: number): string {
  const n = num(value);
  if (n < 1000) return String(n);
  if (n < 100_000) return `${(n / 1000).toFixed(1)}k`;
  return `${Math.round(n / 1000)}k`;
}

export function formatCost(value: number): string {
  const cost = num(value);
  if (cost === 0) return "$0";
  if (cost < 0.01) return `$${cost.toFixed(4)}`;
  return `$${cost.toFixed(2)}`;
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} m ${Math.round((ms % 60_000) / 1000)} s`;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function relativeTime(iso: string, now = Date.now()): string {
  const seconds = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ago`;
  return `${Math.floor(seconds / 86400)}d ago`;
}

/** Time a person spent deciding on an approval, told apart from run time (DESIGN §8). */
export function formatApprovalWait(ms: number): string | null {
  return ms > 0 ? `waited ${formatDuration(ms)} for approval` : null;
}

/** A model as the sidebar names it: `provider:model`, with a path in it (a scripted model's
 * file, a vLLM model served from /models/…) cut to its last part. The server's paths are
 * not every user's business, and the whole string does not fit. */
export function modelLabel(model: string): string {
  const colon = model.indexOf(":");
  const [provider, name] = colon > 0 ? [model.slice(0, colon + 1), model.slice(colon + 1)] : ["", model];
  const short = name.includes("/") && name.startsWith("/") ? (name.split("/").filter(Boolean).pop() ?? name) : name;
  return provider + short;
}
