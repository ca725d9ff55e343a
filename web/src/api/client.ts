// A thin typed client over the HTTP contract (DESIGN.md §3). Types come from /openapi.json.
import type { components } from "./schema";

type Schemas = components["schemas"];
export type Conversation = Schemas["ConversationOut"];
export type FileEntry = Schemas["FileEntryOut"];
export type Health = Schemas["Health"];
export type SecretName = Schemas["SecretOut"];
export type SandboxInfo = Schemas["SandboxStatusOut"];
export type McpServer = Schemas["McpServerOut"];
export type Environment = Schemas["EnvironmentOut"];
export type AdminUsage = Schemas["AdminUsage"];
export type McpConfig = Schemas["McpConfigDocument"];
export type Network = Conversation["network"];
export type Profile = Schemas["ProfileOut"];
export type ProfileUpdate = Schemas["ProfileIn"];

// The settings route may be newer than the server this was built against.
type Fallback<K extends string, T> = K extends keyof Schemas ? Schemas[K] : T;
export type ModelSettings = Fallback<
  "ModelSettingsOut",
  {
    model: string | null;
    base_url: string | null;
    api_key_set: boolean;
    api_key_hint: string | null;
    configured: boolean;
    source: string | null;
    saved_model: string | null;
  }
>;
export interface ModelSettingsUpdate {
  model?: string | null;
  base_url?: string | null;
  api_key?: string | null;
}

export type ProviderSettings = Fallback<
  "ProviderOut",
  {
    id?: string;
    provider: string;
    base_url: string | null;
    api_key_set: boolean;
    api_key_hint: string | null;
  }
>;
export type ProviderTest = Fallback<
  "ProviderTestOut",
  { ok: boolean; detail: string; models?: string[] | null }
>;

export type PreviewLink = Fallback<
  "PreviewOut",
  { port: number; url: string; status: string; command: string }
>;

export type ApprovalMode = "ask" | "auto" | "read_only" | "plan";

export type Decision = "allow_once" | "allow_session" | "deny";

export type SavedFile = Fallback<"SavedFileOut", { path: string; size: number; etag: string }>;

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

const UNREACHABLE = "The server cannot be reached. Is `burrow serve` running?";

/** `fetch`, with a network failure as an ApiError of status 0. */
async function reach(path: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(path, init);
  } catch {
    throw new ApiError(0, "network", UNREACHABLE);
  }
}

/**
 * The one reading of a failed answer's body: the server's `{error: {code, message}}`
 * (DESIGN.md §3), or `fallback` with code `http_error` when the body is not that (a proxy's
 * HTML page, no body, other JSON).
 */
export function apiError(status: number, body: unknown, fallback: string): ApiError {
  const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof error !== "object" || error === null) return new ApiError(status, "http_error", fallback);
  const { code, message } = error as { code: string; message: string };
  return new ApiError(status, code, message);
}

/** A failed response as an ApiError, its body read as JSON if it is JSON. */
async function failure(response: Response, fallback = `HTTP ${response.status}`): Promise<ApiError> {
  const body: unknown = await response.json().catch(() => null);
  return apiError(response.status, body, fallback);
}

/** What an error says, for the UI: an Error's message, anything else as text. */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, headers: {} };
  if (method !== "GET" && method !== "DELETE") {
    // The server accepts state changes only as JSON (CSRF defence), so always send a body.
    init.headers = { "Content-Type": "application/json" };
    init.body = JSON.stringify(body ?? {});
  }
  const response = await reach(path, init);
  if (!response.ok) throw await failure(response, `${method} ${path} failed with ${response.status}`);
  if (response.status === 204) return undefined as T;
  const type = response.headers.get("content-type") ?? "";
  return (type.includes("json") ? await response.json() : await response.text()) as T;
}

const conv = (cid: string) => `/api/conversations/${encodeURIComponent(cid)}`;
const q = (path: string) => `?path=${encodeURIComponent(path)}`;

export type Me = Schemas["Me"];
export type ApiToken = Schemas["TokenOut"];
export type ApiTokenCreated = Schemas["TokenCreated"];
export type Account = Schemas["AccountOut"];
export interface AccountChange {
  disabled?: boolean;
  password?: string;
  is_admin?: boolean;
}
export type Checkpoint = Schemas["CheckpointOut"];
export type RepoIn = Schemas["RepoIn"];
export type SearchHit = Schemas["SearchHitOut"];

export const api = {
  me: () => request<Me>("GET", "/api/me"),
  /** Who is signed in (null: nobody); signed out is an answer, not a 401. Servers older than
   * the route answer 404 or 405: then /api/me says it, its 401 meaning signed out. */
  session: async (): Promise<Me | null> => {
    try {
      const s = await request<{ signed_in: boolean; user?: Me | null }>("GET", "/api/auth/session");
      return s.signed_in && s.user ? s.user : null;
    } catch (e) {
      if (!(e instanceof ApiError && (e.status === 404 || e.status === 405))) throw e;
      return api.me().catch((err: unknown) => {
        if (err instanceof ApiError && err.status === 401) return null;
        throw err;
      });
    }
  },
  login: (username: string, password: string) =>
    request<Me>("POST", "/api/auth/login", { username, password }),
  logout: () => request<void>("POST", "/api/auth/logout", {}),
  health: () => request<Health>("GET", "/api/health"),
  conversations: () => request<Conversation[]>("GET", "/api/conversations"),
  search: (text: string) => request<SearchHit[]>("GET", `/api/search?q=${encodeURIComponent(text)}`),
  conversation: (cid: string) => request<Conversation>("GET", conv(cid)),
  /** With `repo`, the server clones it into the workspace in the background (workspace.import). */
  createConversation: (
    fields: {
      title?: string;
      approval_mode?: ApprovalMode;
      model?: string | null;
      repo?: RepoIn;
      environment?: string | null;
      profile?: string | null;
    } = {},
  ) => request<Conversation>("POST", "/api/conversations", fields),
  /** Commits the working tree to `branch` and pushes it (from the sandbox). */
  gitPush: (cid: string, push: { branch: string; remote?: string; secret?: string; message?: string }) =>
    request<Schemas["GitPushed"]>("POST", `${conv(cid)}/git/push`, push),
  pullRequest: (cid: string, pr: { title: string; body?: string; base: string; head: string; secret: string }) =>
    request<Schemas["PullRequestOut"]>("POST", `${conv(cid)}/git/pull-request`, pr),
  renameConversation: (cid: string, title: string) =>
    request<Conversation>("PATCH", conv(cid), { title }),
  setApprovalMode: (cid: string, approval_mode: ApprovalMode) =>
    request<Conversation>("PATCH", conv(cid), { approval_mode }),
  /** Names of the caller's secrets the conversation's commands and terminals get. */
  setConversationSecrets: (cid: string, secrets: string[]) =>
    request<Conversation>("PATCH", conv(cid), { secrets }),
  /** Between runs; an idle sandbox restarts with it on next use. */
  setNetwork: (cid: string, network: Network) => request<Conversation>("PATCH", conv(cid), { network }),
  /** `""`: back to the server's model. */
  setModel: (cid: string, model: string) => request<Conversation>("PATCH", conv(cid), { model }),
  models: () => request<Schemas["ModelOut"][]>("GET", "/api/settings/models"),
  deleteConversation: (cid: string) => request<void>("DELETE", conv(cid)),
  /** A new conversation with this one's journal before `runId` and the workspace that run
   * started from; without `runId`, all of it as it is now. */
  fork: (cid: string, runId?: string) =>
    request<Conversation>("POST", `${conv(cid)}/fork`, runId ? { run_id: runId } : {}),
  send: (cid: string, content: string, attachments: string[] = []) =>
    request<Schemas["MessageAccepted"]>("POST", `${conv(cid)}/messages`, {
      content,
      ...(attachments.length ? { attachments } : {}),
    }),
  /** Uploads one file into the workspace (.burrow/attachments/); resolves to its path. */
  upload: async (cid: string, file: File): Promise<string> => {
    const form = new FormData();
    form.append("file", file, file.name || "pasted");
    const response = await reach(`${conv(cid)}/uploads`, { method: "POST", body: form });
    const body: unknown = await response.json().catch(() => null);
    const path = (body as { files?: string[] } | null)?.files?.[0];
    if (!response.ok || path === undefined) throw apiError(response.status, body, `Upload failed (${response.status})`);
    return path;
  },
  /** Unpacks a .zip, .tar.gz/.tgz or git .bundle into the workspace (all or nothing). */
  extract: async (cid: string, file: File, folder = ""): Promise<{ files: string[]; total: number }> => {
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("extract", "true");
    if (folder) form.append("path", folder);
    const response = await reach(`${conv(cid)}/uploads`, { method: "POST", body: form });
    if (!response.ok) throw await failure(response);
    const payload = (await response.json()) as { files: string[]; total?: number };
    return { files: payload.files, total: payload.total ?? payload.files.length };
  },
  /** A thumbnail of an uploaded image (a path under .burrow/attachments/). */
  attachmentUrl: (cid: string, path: string) =>
    `${conv(cid)}/attachments/${encodeURIComponent(path.split("/").pop() ?? "")}`,
  interrupt: (cid: string) => request<Schemas["Accepted"]>("POST", `${conv(cid)}/interrupt`, {}),
  compact: (cid: string) => request<Schemas["Compacted"]>("POST", `${conv(cid)}/compact`, {}),
  decide: (cid: string, requestId: string, decision: Decision) =>
    request<unknown>("POST", `${conv(cid)}/approvals/${encodeURIComponent(requestId)}`, {
      decision,
    }),
  /** Approve (maybe edited, going on in `mode`) or reject a `plan.proposed` plan. */
  decidePlan: (cid: string, planId: string, body: Schemas["PlanDecisionIn"]) =>
    request<Schemas["PlanDecided"]>("POST", `${conv(cid)}/plans/${encodeURIComponent(planId)}`, body),
  files: (cid: string, path: string) => request<FileEntry[]>("GET", `${conv(cid)}/files${q(path)}`),
  /** The file's text, or null when the server says it is binary. */
  fileText: async (cid: string, path: string): Promise<string | null> => {
    const response = await fetch(`${conv(cid)}/files/content${q(path)}`);
    if (!response.ok) throw await failure(response);
    if (!(response.headers.get("content-type") ?? "").startsWith("text/")) return null;
    return response.text();
  },
  fileUrl: (cid: string, path: string) => `${conv(cid)}/files/content${q(path)}`,
  /** The file for the editor: its text (null when binary) and the ETag a save sends back. */
  fileForEdit: async (cid: string, path: string): Promise<{ text: string | null; etag: string | null }> => {
    const response = await fetch(`${conv(cid)}/files/content${q(path)}`);
    if (!response.ok) throw await failure(response);
    const etag = response.headers.get("etag");
    if (!(response.headers.get("content-type") ?? "").startsWith("text/")) return { text: null, etag };
    return { text: await response.text(), etag };
  },
  /** Saves the editor's text; with `etag`, refused (412 file_changed) if the file changed. */
  saveFile: async (cid: string, path: string, text: string, etag: string | null): Promise<SavedFile> => {
    const headers: Record<string, string> = { "Content-Type": "text/plain; charset=utf-8" };
    if (etag) headers["If-Match"] = etag;
    const response = await reach(`${conv(cid)}/files/content${q(path)}`, { method: "PUT", headers, body: text });
    if (!response.ok) throw await failure(response);
    return (await response.json()) as SavedFile;
  },
  /** The workspace as a download, without Burrow's internals. */
  archiveUrl: (cid: string, format: "zip" | "tar.gz") => `${conv(cid)}/workspace/archive?format=${format}`,
  /** The diff since a checkpoint as a patch file. */
  patchUrl: (cid: string, from: string) => `${conv(cid)}/diff?from=${encodeURIComponent(from)}&format=patch`,
  /** Oldest first; each run starts with one. */
  checkpoints: (cid: string) => request<Checkpoint[]>("GET", `${conv(cid)}/checkpoints`),
  /** From a checkpoint (default: the first) to the workspace now. */
  diff: (cid: string, from?: string) =>
    request<Schemas["DiffOut"]>("GET", `${conv(cid)}/diff${from ? `?from=${encodeURIComponent(from)}` : ""}`),
  /** One file (or folder) back as it was at the checkpoint; undoable like a restore. */
  revertFile: (cid: string, path: string, checkpointId: string) =>
    request<Schemas["RevertedOut"]>("POST", `${conv(cid)}/files/revert`, { path, checkpoint_id: checkpointId }),
  restore: (cid: string, id: string) =>
    request<Schemas["RestoredOut"]>("POST", `${conv(cid)}/checkpoints/${encodeURIComponent(id)}/restore`, {}),
  eventsUrl: (cid: string, after = 0) =>
    `${conv(cid)}/events${after > 0 ? `?after=${after}` : ""}`,
  sandbox: (cid: string) => request<SandboxInfo>("GET", `${conv(cid)}/sandbox`),
  restartSandbox: (cid: string) => request<unknown>("POST", `${conv(cid)}/sandbox/restart`, {}),
  previews: (cid: string) => request<PreviewLink[]>("GET", `${conv(cid)}/previews`),
  /** Redirects to the preview with a fresh signed link (a link opens a preview once). */
  previewOpenUrl: (cid: string, port: number) => `${conv(cid)}/previews/${port}/open`,
  createTerminal: (cid: string, cols: number, rows: number) =>
    request<{ terminal_id: string }>("POST", `${conv(cid)}/terminals`, { cols, rows }),
  terminals: (cid: string) => request<unknown>("GET", `${conv(cid)}/terminals`),
  deleteTerminal: (cid: string, tid: string) =>
    request<void>("DELETE", `${conv(cid)}/terminals/${encodeURIComponent(tid)}`),
  terminalSocketUrl: (cid: string, tid: string) => {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}${conv(cid)}/terminals/${encodeURIComponent(tid)}/ws`;
  },
  secrets: () => request<SecretName[]>("GET", "/api/secrets"),
  mcpServers: () => request<McpServer[]>("GET", "/api/mcp/servers"),
  environments: () => request<Environment[]>("GET", "/api/environments"),
  defineEnvironment: (definition: { name: string; base: string; packages: string[]; setup: string }) =>
    request<Environment>("POST", "/api/environments", definition),
  deleteEnvironment: (name: string) => request<void>("DELETE", `/api/environments/${encodeURIComponent(name)}`),
  cancelEnvironment: (name: string) =>
    request<Environment>("POST", `/api/environments/${encodeURIComponent(name)}/cancel`, {}),
  adminUsage: () => request<AdminUsage>("GET", "/api/admin/usage"),
  /** Administrators: mcp.json as it is, and replacing it (host servers only on disk). */
  mcpConfig: () => request<McpConfig>("GET", "/api/mcp/config"),
  saveMcpConfig: (config: McpConfig) => request<McpServer[]>("PUT", "/api/mcp/config", config),
  /** Create or replace; the value is never sent back. */
  putSecret: (name: string, value: string) =>
    request<SecretName>("PUT", `/api/secrets/${encodeURIComponent(name)}`, { value }),
  deleteSecret: (name: string) => request<void>("DELETE", `/api/secrets/${encodeURIComponent(name)}`),
  /** The caller's own profiles and the shared ones. */
  profiles: () => request<Profile[]>("GET", "/api/profiles"),
  /** Create or replace (`shared`: an administrator's profile for everyone). */
  putProfile: (name: string, profile: ProfileUpdate) =>
    request<Profile>("PUT", `/api/profiles/${encodeURIComponent(name)}`, profile),
  deleteProfile: (name: string, shared: boolean) =>
    request<void>("DELETE", `/api/profiles/${encodeURIComponent(name)}${shared ? "?shared=true" : ""}`),
  modelSettings: () => request<ModelSettings>("GET", "/api/settings/model"),
  saveModelSettings: (update: ModelSettingsUpdate) =>
    request<ModelSettings>("PUT", "/api/settings/model", update),
  providers: () => request<ProviderSettings[]>("GET", "/api/settings/providers"),
  saveProvider: (provider: string, update: { api_key?: string; base_url?: string; preset?: string }) =>
    request<ProviderSettings>("PUT", `/api/settings/providers/${provider}`, update),
  /** Forgets a named OpenAI-compatible server and its key. */
  removeProvider: (provider: string) =>
    request<void>("DELETE", `/api/settings/providers/${encodeURIComponent(provider)}`),
  /** Tests the given (unsaved) values, or the stored ones; a test never saves. */
  testProvider: (provider: string, values: { api_key?: string; base_url?: string } = {}) =>
    request<ProviderTest>("POST", `/api/settings/providers/${provider}/test`, values),
  /** The current password is checked like a login; other browser sessions end. */
  changePassword: (current: string, next: string) =>
    request<void>("POST", "/api/me/password", { current, new: next }),
  tokens: () => request<ApiToken[]>("GET", "/api/auth/tokens"),
  /** The value is in this answer only: it is never listed again. */
  createToken: (name: string) => request<ApiTokenCreated>("POST", "/api/auth/tokens", { name }),
  revokeToken: (id: string) => request<void>("DELETE", `/api/auth/tokens/${encodeURIComponent(id)}`),
  users: () => request<Account[]>("GET", "/api/users"),
  createUser: (username: string, password: string, is_admin: boolean) =>
    request<Me>("POST", "/api/users", { username, password, is_admin }),
  updateUser: (id: string, change: AccountChange) =>
    request<Account>("PATCH", `/api/users/${encodeURIComponent(id)}`, change),
};
