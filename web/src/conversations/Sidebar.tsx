// The conversations: create, open, rename, delete, and each one's live status.
import { useState } from "react";
import { ThemeToggle } from "../ThemeToggle";
import type { Conversation, RepoIn } from "../api/client";
import { modelLabel, relativeTime } from "../format";
import { RepoImport } from "./RepoImport";
import { SearchBox, SearchResults } from "./Search";

/** The list's word for a conversation; `offline`: the server cannot be reached. */
export function statusLabel(
  c: Pick<Conversation, "status" | "sandbox_status" | "last_run_failed">,
  offline = false,
): string {
  if (offline) return "server unreachable";
  if (c.status === "running") return "running";
  if (c.status === "waiting_approval") return "needs approval";
  if (c.last_run_failed) return "last run failed";
  if (c.sandbox_status === "hibernated") return "hibernated";
  if (c.sandbox_status === "failed") return "sandbox failed";
  if (c.sandbox_status === "starting") return "starting";
  return "idle";
}

function Entry({
  c,
  active,
  offline,
  onOpen,
  onRename,
  onDelete,
}: {
  c: Conversation;
  active: boolean;
  offline: boolean;
  onOpen: () => void;
  onRename: (title: string) => Promise<void>;
  onDelete: () => Promise<void>;
}) {
  const [editing, setEditing] = useState(false);
  const [title, setTitle] = useState(c.title);
  const [confirming, setConfirming] = useState(false);
  const label = statusLabel(c, offline);
  const dot = offline ? "offline" : c.last_run_failed && c.status === "idle" ? "failed" : c.status;

  if (editing) {
    return (
      <li className="conv editing">
        <input
          autoFocus
          aria-label="Conversation title"
          value={title}
          maxLength={200}
          onChange={(e) => setTitle(e.target.value)}
          onBlur={() => setEditing(false)}
          onKeyDown={(e) => {
            if (e.key === "Escape") setEditing(false);
            if (e.key === "Enter" && title.trim()) {
              void onRename(title.trim()).then(() => setEditing(false));
            }
          }}
        />
      </li>
    );
  }
  return (
    <li className={`conv ${active ? "active" : ""}`} data-cid={c.id}>
      <button
        type="button"
        className="conv-open"
        onClick={onOpen}
        aria-current={active ? "page" : undefined}
        onDoubleClick={() => {
          setTitle(c.title);
          setEditing(true);
        }}
      >
        <span className={`dot ${dot} sb-${c.sandbox_status}`} aria-hidden="true" />
        <span className="conv-title">{c.title}</span>
        <span className="conv-sub muted">
          <span className="conv-status">{label}</span> · {relativeTime(c.updated_at)}
        </span>
      </button>
      <span className="conv-actions">
        <button
          type="button"
          className="icon"
          title="Rename"
          aria-label={`Rename ${c.title}`}
          onClick={() => {
            setTitle(c.title);
            setEditing(true);
          }}
        >
          ✎
        </button>
        <button
          type="button"
          className={`icon ${confirming ? "danger" : ""}`}
          title={confirming ? "Click again to delete" : "Delete"}
          aria-label={confirming ? `Confirm deleting ${c.title}` : `Delete ${c.title}`}
          onBlur={() => setConfirming(false)}
          onClick={() => {
            if (confirming) void onDelete();
            else setConfirming(true);
          }}
        >
          {confirming ? "Delete?" : "✕"}
        </button>
      </span>
    </li>
  );
}

export function Sidebar({
  conversations,
  activeId,
  offline,
  onOpen,
  onOpenAt,
  onCreate,
  onCreateFromRepo,
  onRename,
  onDelete,
  onSettings,
  onLogout,
  user,
  model,
}: {
  conversations: Conversation[] | null;
  activeId: string | null;
  offline: boolean;
  onOpen: (cid: string) => void;
  /** A search hit: the conversation, at the message `seq` when there is one. */
  onOpenAt: (cid: string, seq: number | null) => void;
  onCreate: () => void;
  /** A new conversation whose workspace starts as a clone of `repo`. */
  onCreateFromRepo?: (repo: RepoIn, environment: string | null) => Promise<void>;
  onRename: (cid: string, title: string) => Promise<void>;
  onDelete: (cid: string) => Promise<void>;
  onSettings: () => void;
  onLogout: () => void;
  user: string;
  model: string | null;
}) {
  const [query, setQuery] = useState("");
  return (
    <nav className="sidebar" aria-label="Conversations">
      <div className="brand">
        <svg viewBox="0 0 16 16" width="18" height="18" aria-hidden="true">
          <path d="M1 14a7 7 0 0 1 14 0z" fill="currentColor" />
          <path d="M6 14a2 2 0 0 1 4 0z" fill="var(--bg)" />
        </svg>
        <span>Burrow</span>
      </div>
      <button type="button" className="new-conv primary" onClick={onCreate}>
        + New conversation
      </button>
      {onCreateFromRepo && <RepoImport onCreate={onCreateFromRepo} />}
      <SearchBox onQuery={setQuery} />
      {query.trim() ? (
        <SearchResults query={query} onOpen={onOpenAt} />
      ) : (
      <ul className="conv-list">
        {conversations === null && <li className="muted pad">Loading…</li>}
        {conversations?.length === 0 && <li className="muted pad">No conversations yet.</li>}
        {conversations?.map((c) => (
          <Entry
            key={c.id}
            c={c}
            active={c.id === activeId}
            offline={offline}
            onOpen={() => onOpen(c.id)}
            onRename={(title) => onRename(c.id, title)}
            onDelete={() => onDelete(c.id)}
          />
        ))}
      </ul>
      )}
      <div className="sidebar-footer">
        <button type="button" className="settings-button" onClick={onSettings}>
          <span aria-hidden="true">⚙</span> Settings
          <span className="muted model-name">{model ? modelLabel(model) : "no model"}</span>
        </button>
        <div className="account muted">
          <span>{user}</span>
          <ThemeToggle />
          <button type="button" className="link" onClick={onLogout}>
            Sign out
          </button>
        </div>
      </div>
    </nav>
  );
}
