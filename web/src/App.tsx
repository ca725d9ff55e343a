// The shell: conversations on the left, the open conversation, settings and first run.
import { type ReactNode, useCallback, useEffect, useState } from "react";
import { ApiError, api, errorMessage, type Conversation, type Health, type Me } from "./api/client";
import { Composer } from "./composer/Composer";
import { DEFAULT_START, StartOptions, type StartChoice } from "./composer/StartOptions";
import { ConversationView } from "./ConversationView";
import { ErrorBoundary } from "./ErrorBoundary";
import { SEARCH_ID } from "./conversations/Search";
import { Sidebar } from "./conversations/Sidebar";
import { DEFAULT_TITLE, titleFrom } from "./conversations/titles";
import { Login } from "./settings/Login";
import { focusComposer, ShortcutsDialog, useShortcuts } from "./Shortcuts";
import { ConnectModel, DemoNotice } from "./settings/ConnectModel";
import { loadModelSettings, SettingsDialog, type SettingsState } from "./settings/Settings";
import type { LiveStatus } from "./ConversationView";

const POLL_MS = 3000;

function routeId(): string | null {
  const m = /^\/c\/([^/]+)/.exec(location.pathname);
  return m ? decodeURIComponent(m[1]!) : null;
}

export function App() {
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [conversations, setConversations] = useState<Conversation[] | null>(null);
  const [activeId, setActiveId] = useState<string | null>(routeId);
  const [live, setLive] = useState<LiveStatus | null>(null);
  // The server cannot be reached: no status shown is current (the list says so, not a toast).
  const [offline, setOffline] = useState(false);
  const [health, setHealth] = useState<Health | null>(null);
  const [settings, setSettings] = useState<SettingsState>(null);
  const [settingsOpen, setSettingsOpen] = useState(false);
  const [shortcutsOpen, setShortcutsOpen] = useState(false);
  const [menuOpen, setMenuOpen] = useState(false);
  const [pending, setPending] = useState<{ cid: string; text: string } | null>(null);
  // An example prompt picked on the home screen: put in the composer to edit, not sent.
  const [example, setExample] = useState<{ text: string; n: number } | null>(null);
  // A search hit's message, to be scrolled to once its conversation is open.
  const [focusAt, setFocusAt] = useState<{ cid: string; seq: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  // The approval mode and model a conversation started from the home screen gets.
  const [start, setStart] = useState<StartChoice>(DEFAULT_START);

  const refresh = useCallback(async () => {
    try {
      setConversations(await api.conversations());
      setError(null);
      setOffline(false);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) setMe(null);
      else if (e instanceof ApiError && e.status === 0) setOffline(true);
      else setError(errorMessage(e));
    }
  }, []);

  useEffect(() => {
    api.session().then(setMe, (e: unknown) => setError(errorMessage(e)));
  }, []);

  // The session probe first: signed out, it answers so without a 401 (which a browser logs
  // as an error), and nothing else is asked (each would be a 401).
  const signedIn = me !== null && me !== undefined;
  useEffect(() => {
    if (!signedIn) return;
    void refresh();
    const timer = setInterval(() => void refresh(), POLL_MS);
    api.health().then(setHealth, () => setHealth(null));
    loadModelSettings().then(setSettings, () => setSettings("unavailable"));
    return () => clearInterval(timer);
  }, [refresh, signedIn]);

  useEffect(() => {
    const onPop = () => setActiveId(routeId());
    window.addEventListener("popstate", onPop);
    return () => window.removeEventListener("popstate", onPop);
  }, []);

  const open = useCallback((cid: string | null) => {
    history.pushState(null, "", cid ? `/c/${encodeURIComponent(cid)}` : "/");
    setActiveId(cid);
    setMenuOpen(false);
  }, []);

  // Out of a conversation that failed or is gone: the list is what is offered (a drawer on
  // a phone, so it is opened).
  const leave = () => {
    open(null);
    void refresh();
    setMenuOpen(true);
  };

  // Every conversation made here (new, from a repo, a fork) is listed first and opened,
  // with the message it is to start with, if any.
  const openNew = useCallback(
    (created: Conversation, firstMessage?: string) => {
      // A poll may have listed it already, while it was being made.
      setConversations((list) => [created, ...(list ?? []).filter((c) => c.id !== created.id)]);
      if (firstMessage) setPending({ cid: created.id, text: firstMessage });
      open(created.id);
    },
    [open],
  );

  const create = async (firstMessage?: string) => {
    const chosen = firstMessage
      ? {
          title: titleFrom(firstMessage),
          approval_mode: start.approval_mode,
          model: start.model,
          environment: start.environment,
          profile: start.profile,
        }
      : {};
    const created = await api.createConversation(chosen);
    if (firstMessage) setStart(DEFAULT_START);
    openNew(created, firstMessage);
  };

  const onStatus = useCallback((next: LiveStatus) => setLive(next), []);
  const onSent = useCallback(
    (cid: string, content: string) => {
      const c = conversations?.find((x) => x.id === cid);
      if (c && c.title === DEFAULT_TITLE) {
        void api.renameConversation(cid, titleFrom(content)).then(refresh, () => undefined);
      } else {
        void refresh();
      }
    },
    [conversations, refresh],
  );

  // The open conversation's status comes from its event stream, fresher than the poll.
  const shown =
    conversations?.map((c) =>
      live &&
      c.id === live.cid &&
      (c.status !== live.status || c.sandbox_status !== live.sandbox || c.last_run_failed !== live.failed)
        ? { ...c, status: live.status, sandbox_status: live.sandbox, last_run_failed: live.failed }
        : c,
    ) ?? null;
  const active = shown?.find((c) => c.id === activeId);
  const configuredModel =
    settings && settings !== "unavailable" ? (settings.configured ? settings.model : null) : (health?.model ?? null);
  const needsModel =
    health !== null && !health.model && (settings === "unavailable" || (settings !== null && !settings.configured));

  const useDemo = async () => {
    setSettings(await api.saveModelSettings({ model: "demo" }));
    setHealth(await api.health());
  };
  const newConversation = () => {
    // An untouched conversation is reused: each click must not store another empty one.
    const empty = conversations?.find((c) => c.last_seq === 0 && c.title === DEFAULT_TITLE);
    if (empty) open(empty.id);
    else void create().catch((e: unknown) => setError(String(e)));
  };
  // The stream's status, not the poll's: Esc right after sending must stop the new run.
  const running = !!activeId && live?.cid === activeId && live.status !== "idle";
  useShortcuts({
    stop: running ? () => void api.interrupt(activeId).catch((e: unknown) => setError(String(e))) : undefined,
    new: signedIn ? newConversation : undefined,
    focus: focusComposer,
    // Wherever the sidebar is drawn (also while the account probe is still out: a slow
    // /api/me must not swallow the key).
    search: me !== null
      ? () => {
          setMenuOpen(true); // the sidebar is a drawer on a phone
          document.getElementById(SEARCH_ID)?.focus();
        }
      : undefined,
    help: () => setShortcutsOpen(true),
  });

  const firstRun = needsModel ? (
    <ConnectModel
      settings={settings}
      isAdmin={!!me?.is_admin}
      onUseDemo={useDemo}
      onConnected={(s) => {
        setSettings(s);
        api.health().then(setHealth, () => undefined);
      }}
    />
  ) : null;
  const demoNotice =
    (configuredModel ?? health?.model) === "demo" ? <DemoNotice onConnect={() => setSettingsOpen(true)} /> : null;

  if (me === null) {
    return (
      <div className="app">
        <Login onLoggedIn={setMe} />
      </div>
    );
  }
  return (
    <div className={`app ${menuOpen ? "menu-open" : ""}`}>
      <Sidebar
        conversations={shown}
        activeId={activeId}
        offline={offline}
        onOpen={open}
        onOpenAt={(cid, seq) => {
          setFocusAt(seq === null ? null : { cid, seq });
          open(cid);
        }}
        onCreate={newConversation}
        onCreateFromRepo={async (repo, environment) =>
          openNew(await api.createConversation({ title: titleFrom(repo.url), repo, environment }))
        }
        onRename={async (cid, title) => {
          await api.renameConversation(cid, title);
          await refresh();
        }}
        onDelete={async (cid) => {
          await api.deleteConversation(cid);
          if (cid === activeId) open(null);
          await refresh();
        }}
        onSettings={() => setSettingsOpen(true)}
        onLogout={() => void api.logout().finally(() => setMe(null))}
        user={me?.username ?? ""}
        model={configuredModel ?? health?.model ?? null}
      />
      {menuOpen && <div className="scrim" onClick={() => setMenuOpen(false)} aria-hidden="true" />}
      {error && (
        <div className="toast error-text" role="alert">
          {error}
          <button type="button" className="icon" aria-label="Dismiss" onClick={() => setError(null)}>
            ✕
          </button>
        </div>
      )}
      {activeId ? (
        <ErrorBoundary key={activeId} what="this conversation" onLeave={leave}>
          <ConversationView
            cid={activeId}
            conversation={active}
            initialMessage={pending?.cid === activeId ? pending.text : null}
            focusSeq={focusAt?.cid === activeId ? focusAt.seq : null}
            onStatus={onStatus}
            onSent={onSent}
            onMenu={() => setMenuOpen(true)}
            onChanged={() => void refresh()}
            onLeave={leave}
            onForked={openNew}
            emptyState={
              firstRun ?? <Welcome notice={demoNotice} onPick={(text) => setPending({ cid: activeId, text })} />
            }
          />
        </ErrorBoundary>
      ) : (
        <div className="workspace">
          <main className="conversation home">
            <header className="conv-header">
              <button type="button" className="icon menu" aria-label="Conversations" onClick={() => setMenuOpen(true)}>
                ☰
              </button>
              <h1>Burrow</h1>
            </header>
            <div className="timeline">
              <div className="timeline-inner">
                {firstRun ?? (
                  <Welcome
                    notice={demoNotice}
                    onPick={(text) => setExample((was) => ({ text, n: (was?.n ?? 0) + 1 }))}
                  />
                )}
              </div>
            </div>
            {/* Signed in first: the sign-in screen probes nothing but the session. */}
            {signedIn && <StartOptions choice={start} onChange={setStart} />}
            <Composer running={false} onSend={(text) => create(text)} onStop={async () => undefined} fill={example} />
          </main>
        </div>
      )}
      {shortcutsOpen && <ShortcutsDialog onClose={() => setShortcutsOpen(false)} />}
      {settingsOpen && (
        <SettingsDialog
          settings={settings}
          me={me}
          onClose={() => setSettingsOpen(false)}
          onSaved={(s) => {
            setSettings(s);
            api.health().then(setHealth, () => undefined);
          }}
        />
      )}
    </div>
  );
}

// Things the agent does well in a sandbox with no network: each one is sent as it is.
const EXAMPLES = [
  "Build a to-do list web app in plain HTML, CSS and JavaScript, and open it in the preview",
  "Write a Python script that finds the primes below 10,000, with tests, and run them",
  "Make a landing page for a neighbourhood bakery and show it in the preview",
  "Write a shell script that counts lines of code per file type in the workspace",
];

function Welcome({ onPick, notice }: { onPick: (text: string) => void; notice: ReactNode }) {
  return (
    <section className="welcome">
      <h2>What should we build?</h2>
      {notice}
      <p className="muted">
        The agent works in a sandbox of its own: it writes files, runs commands and starts
        servers. Watch every step here, open a terminal beside it, browse the files, and try the
        app in the preview.
      </p>
      <ul className="examples" aria-label="Example prompts">
        {EXAMPLES.map((text) => (
          <li key={text}>
            <button type="button" className="example" onClick={() => onPick(text)}>
              {text}
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
