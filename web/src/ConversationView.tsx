// One open conversation: header, timeline, composer, and the sandbox panel beside them.
import { useCallback, useEffect, useRef, useState } from "react";
import { api, type ApprovalMode, type Conversation } from "./api/client";
import { ContextMeter } from "./ContextMeter";
import { Composer } from "./composer/Composer";
import { ModeOptions, MODES } from "./composer/StartOptions";
import { SecretsPicker, SecretsWarning } from "./conversations/ConversationSecrets";
import { ModelSelect } from "./conversations/ModelSelect";
import { forkTitle } from "./conversations/titles";
import { NetworkSelect, networkLabel, useSandboxNetwork } from "./conversations/NetworkSelect";
import { formatCost, formatTokens } from "./format";
import { useRunNotifications } from "./notify";
import { SidePanel, type Tab } from "./panel/SidePanel";
import { rememberedTab, rememberTab } from "./panel/tabMemory";
import { usePanel } from "./panel/usePanel";
import { type Item, runStatus, type RunStatus, type UserItem } from "./timeline/reducer";
import { useConversationEvents } from "./timeline/stream";
import { Timeline } from "./timeline/Timeline";

function ApprovalModeSelect({
  cid,
  mode,
  onChanged,
}: {
  cid: string;
  mode: string | undefined;
  onChanged: () => void;
}) {
  if (!mode) return null;
  return (
    <select
      className="mode"
      aria-label="Approval mode"
      title={MODES.find((m) => m.id === mode)?.hint}
      value={mode}
      onChange={(e) => {
        void api.setApprovalMode(cid, e.target.value as ApprovalMode).then(onChanged, onChanged);
      }}
    >
      <ModeOptions />
    </select>
  );
}

/** What the open conversation's stream says, fresher than the list's poll. */
export interface LiveStatus {
  cid: string;
  status: RunStatus;
  sandbox: string;
  /** at rest after a failed run */
  failed: boolean;
}

function lastRunFailed(items: readonly Item[]): boolean {
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i]!;
    if (item.kind === "run.finished") return item.status === "failed";
  }
  return false;
}

const STATUS_TEXT: Record<RunStatus, string> = {
  idle: "Idle",
  running: "Running",
  waiting_approval: "Needs approval",
};

export function ConversationView({
  cid,
  conversation,
  initialMessage,
  focusSeq,
  onStatus,
  onSent,
  onMenu,
  onChanged,
  onLeave,
  onForked,
  emptyState,
}: {
  cid: string;
  conversation: Conversation | undefined;
  initialMessage: string | null;
  /** a message to scroll to (a search hit), by its event seq */
  focusSeq?: number | null;
  onStatus: (live: LiveStatus) => void;
  onSent: (cid: string, content: string) => void;
  onMenu: () => void;
  onChanged: () => void;
  /** Back to the list of conversations (this one is gone). */
  onLeave: () => void;
  /** A fork was made from this conversation (edit-and-resend, regenerate): open it. */
  onForked: (forked: Conversation) => void;
  emptyState: React.ReactNode;
}) {
  const { state, connection, attached } = useConversationEvents(cid);
  const status = runStatus(state);
  const sandbox =
    state.sandbox.status !== "none" ? state.sandbox.status : (conversation?.sandbox_status ?? "none");
  const networkInfo = useSandboxNetwork(cid, conversation?.network);
  const network = conversation ? networkLabel(conversation.network, networkInfo) : undefined;
  const { open: panelOpen, show: showPanel, close: closePanel } = usePanel();
  const [tab, setTab] = useState<Tab>(() => rememberedTab());
  const chooseTab = useCallback((next: Tab) => {
    rememberTab(next); // the person's choice; a preview opening by itself is not one
    setTab(next);
  }, []);
  const lastPreview = useRef<string | null>(null);
  const [secretsOpen, setSecretsOpen] = useState(false);


  // A newly opened preview is what the person wants to look at.
  useEffect(() => {
    const url = state.preview?.url ?? null;
    if (url && url !== lastPreview.current) {
      lastPreview.current = url;
      setTab("preview");
    }
  }, [state.preview]);

  const showPreview = useCallback(() => {
    showPanel();
    setTab("preview");
  }, [showPanel]);

  const send = async (content: string, attachments: string[] = []) => {
    await attached(); // subscribed before sending: nothing of the run can be missed
    await api.send(cid, content, attachments);
    onSent(cid, content);
  };

  // Read when a fork is made, through refs: the callback stays the same for every row.
  const first = useRef<UserItem | undefined>(undefined);
  first.current = state.items.find((i): i is UserItem => i.kind === "user" && !i.steering);
  const sourceTitle = useRef<string | undefined>(undefined);
  sourceTitle.current = conversation?.title;
  const resend = useCallback(
    async (runId: string, content: string, attachments: string[]) => {
      let forked = await api.fork(cid, runId);
      // Named after the edited first message, or its source's title marked once.
      const start = first.current;
      const edited = start && runId === start.runId && content !== start.content;
      const title = forkTitle(sourceTitle.current ?? forked.title, edited ? content : undefined);
      if (title !== forked.title) forked = await api.renameConversation(forked.id, title).catch(() => forked);
      await api.send(forked.id, content, attachments);
      onForked(forked);
    },
    [cid, onForked],
  );

  const sentInitial = useRef(false);
  useEffect(() => {
    if (initialMessage && !sentInitial.current) {
      sentInitial.current = true;
      void send(initialMessage);
    }
  }, [initialMessage]);

  const failed = status === "idle" && lastRunFailed(state.items);
  useEffect(() => onStatus({ cid, status, sandbox, failed }), [cid, status, sandbox, failed, onStatus]);

  // The tab's title tells a person in another tab when the agent needs them or is done.
  const title = conversation?.title;
  useRunNotifications(cid, title ?? "Burrow", status, failed);
  useEffect(() => {
    const mark = status === "waiting_approval" ? "◆ " : status === "running" ? "● " : "";
    document.title = `${mark}${title ?? "Conversation"} · Burrow`;
    return () => {
      document.title = "Burrow";
    };
  }, [status, title]);

  const tokens = state.usage.prompt_tokens + state.usage.completion_tokens;
  // One warning, where it can be read: in the open Secrets menu, else below the header.
  const secretsWarning = (
    <SecretsWarning cid={cid} chosen={conversation?.secrets ?? []} network={conversation?.network} />
  );
  if (connection === "gone") {
    return (
      <div className="workspace">
        <main className="conversation">
          <header className="conv-header">
            <button type="button" className="icon menu" aria-label="Conversations" onClick={onMenu}>
              ☰
            </button>
            <h1>Conversation not found</h1>
          </header>
          <section className="gone" role="alert" aria-label="Conversation not found">
            <h2>This conversation does not exist.</h2>
            <p className="muted">It was deleted, or the link is wrong.</p>
            <button type="button" className="primary" onClick={onLeave}>
              Show conversations
            </button>
          </section>
        </main>
      </div>
    );
  }
  return (
    <div className={`workspace ${panelOpen ? "with-panel" : ""}`}>
      <main className="conversation">
        <header className="conv-header">
          <button type="button" className="icon menu" aria-label="Conversations" onClick={onMenu}>
            ☰
          </button>
          <h1 title={conversation?.title}>{conversation?.title ?? "Conversation"}</h1>
          {/* Cut off from the server, the run's last known state would be a guess. */}
          {connection !== "reconnecting" && (
            <span className={`pill ${status}`} role="status" data-status={status}>
              {STATUS_TEXT[status]}
            </span>
          )}
          {connection !== "live" && (
            <span className="pill connection" role="status" data-connection={connection}>
              {connection === "connecting" ? "Connecting…" : "Reconnecting…"}
            </span>
          )}
          <span className="spacer" />
          <ModelSelect cid={cid} model={conversation ? conversation.model : undefined} onChanged={onChanged} />
          <ApprovalModeSelect
            cid={cid}
            mode={conversation?.approval_mode}
            onChanged={onChanged}
          />
          <NetworkSelect
            cid={cid}
            network={conversation?.network}
            running={status !== "idle"}
            onChanged={onChanged}
          />
          {conversation && (
            <SecretsPicker
              cid={cid}
              chosen={conversation.secrets ?? []}
              onChanged={onChanged}
              open={secretsOpen}
              onOpen={setSecretsOpen}
              warning={secretsWarning}
            />
          )}
          {!panelOpen && (
            <span className={`header-meta ${sandbox === "failed" ? "error-text" : "muted"}`} title="Sandbox">
              sandbox {sandbox}
              {network ? ` · ${network}` : ""}
            </span>
          )}
          {sandbox === "failed" && (
            <button type="button" onClick={() => void api.restartSandbox(cid).then(onChanged, onChanged)}>
              Restart sandbox
            </button>
          )}
          <ContextMeter
            cid={cid}
            used={state.contextUsed ?? conversation?.context.used ?? 0}
            window={conversation?.context.window}
            running={status !== "idle"}
          />
          <span className="header-meta muted" title={`${state.usage.prompt_tokens} prompt + ${state.usage.completion_tokens} completion tokens`}>
            {formatTokens(tokens)} tok · {formatCost(state.usage.cost)}
          </span>
          <button
            type="button"
            className={`icon ${panelOpen ? "active" : ""}`}
            aria-pressed={panelOpen}
            aria-label="Toggle sandbox panel"
            title="Preview, terminal and files"
            onClick={panelOpen ? closePanel : showPanel}
          >
            ◧
          </button>
        </header>
        {!secretsOpen && secretsWarning}
        <Timeline
          cid={cid}
          state={state}
          empty={emptyState}
          onShowPreview={showPreview}
          onResend={resend}
          focusSeq={focusSeq}
        />
        <Composer
          running={status !== "idle"}
          onSend={send}
          onUpload={(file) => api.upload(cid, file)}
          thumbnail={(path) => api.attachmentUrl(cid, path)}
          onStop={async () => {
            await api.interrupt(cid);
          }}
        />
      </main>
      {panelOpen && (
        <SidePanel
          cid={cid}
          tab={tab}
          onTab={chooseTab}
          preview={state.preview}
          filesVersion={state.filesVersion}
          sandbox={sandbox}
          network={network}
          onClose={closePanel}
        />
      )}
    </div>
  );
}
