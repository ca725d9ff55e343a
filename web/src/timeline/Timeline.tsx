// The conversation as a person reads it: one row per item of the reduced view state.
import { memo, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import { api } from "../api/client";
import { isUploadedImage } from "../composer/attachments";
import { formatApprovalWait, formatCost, formatDuration, formatTokens } from "../format";
import { ApprovalCard } from "./ApprovalCard";
import { Markdown } from "./Markdown";
import { PlanCard } from "./PlanCard";
import { AssistantActions, type Resend, UserActions } from "./MessageActions";
import type { ApprovalItem, AssistantItem, Item, RunEndItem, UserItem, ViewState } from "./reducer";
import { RestoreNotice } from "./RestoreNotice";
import { ToolCard } from "./ToolCard";

const Assistant = memo(function Assistant({
  item,
  regenerate,
  resend,
}: {
  item: AssistantItem;
  regenerate?: UserItem;
  resend?: Resend;
}) {
  return (
    <div className={`assistant ${item.streaming ? "streaming" : ""}`}>
      {item.thinking && (
        <details className="thinking" open={item.streaming && !item.text}>
          <summary>{item.streaming && !item.text ? "Thinking…" : "Thought"}</summary>
          <div className="thinking-text">{item.thinking}</div>
        </details>
      )}
      {item.text && <Markdown text={item.text} final={!item.streaming} />}
      {item.text && !item.streaming && (
        <AssistantActions
          text={item.text}
          resend={resend}
          regenerate={
            regenerate?.runId
              ? { runId: regenerate.runId, content: regenerate.content, attachments: regenerate.attachments }
              : undefined
          }
        />
      )}
    </div>
  );
});

/** "model 8.1 s, tools 3.9 s, Burrow 0.3 s": the run time (approval waits apart) split by
 * what it was spent on; tools overlapping in parallel are capped at what is left. */
function runSplit(item: RunEndItem): string | null {
  if (!item.split || item.durationMs <= 0) return null;
  const model = Math.min(item.split.modelMs, item.durationMs);
  const tools = Math.min(item.split.toolMs, item.durationMs - model);
  const burrow = item.durationMs - model - tools;
  return `model ${formatDuration(model)}, tools ${formatDuration(tools)}, Burrow ${formatDuration(burrow)}`;
}

function RunEnd({ cid, item, latest }: { cid: string; item: RunEndItem; latest: boolean }) {
  const tokens = item.usage.prompt_tokens + item.usage.completion_tokens;
  // Run time apart from the time a person took to approve (DESIGN §8).
  const time = [
    item.durationMs > 0 ? formatDuration(item.durationMs) : null,
    runSplit(item),
    formatApprovalWait(item.approvalWaitMs),
  ].filter(Boolean);
  const usage = [...time, `${formatTokens(tokens)} tokens`, formatCost(item.usage.cost)].join(" · ");
  if (item.status === "failed" || item.status === "budget_exceeded") {
    const title = item.status === "failed" ? "Run failed." : "Budget reached.";
    return (
      <div className="run-end failed" role="alert">
        <strong>{title}</strong> {item.error}
        <span className="muted"> · {usage}</span>
        {item.status === "budget_exceeded" && latest && (
          // A new run starts with fresh per-run limits; a conversation's total stays spent
          // until it is raised, and the next run then says so again.
          <button type="button" className="continue" onClick={() => void api.send(cid, "continue")}>
            Continue
          </button>
        )}
        {item.status === "failed" && latest && (
          // The journal keeps what the failed run did: a new run picks up from there.
          <button
            type="button"
            className="continue"
            onClick={() => void api.send(cid, "The last run failed (see above). Try again from where it stopped.")}
          >
            Retry
          </button>
        )}
      </div>
    );
  }
  return (
    <div className={`run-end ${item.status}`}>
      {item.status === "canceled" ? "Stopped" : "Done"} · {usage}
    </div>
  );
}

/** A message's attachments: uploaded images as thumbnails, other files by name. */
function Attachments({ cid, paths }: { cid: string; paths: string[] }) {
  return (
    <div className="attachments">
      {paths.map((path) =>
        isUploadedImage(path) ? (
          <img key={path} className="thumbnail" src={api.attachmentUrl(cid, path)} alt={path} title={path} />
        ) : (
          <span key={path} className="attachment-chip" title={path}>
            {path.split("/").pop()}
          </span>
        ),
      )}
    </div>
  );
}

const Row = memo(function Row({
  cid,
  item,
  latest,
  onShowPreview,
  starts,
  regenerate,
  resend,
  runs,
  approval,
}: {
  cid: string;
  item: Item;
  approval?: ApprovalItem; // for a tool: the request to run it, shown in its card
  runs?: readonly string[]; // for a restore notice: the runs in the order they started
  latest: boolean; // the timeline's last item, with no run going
  onShowPreview?: () => void;
  starts: boolean; // a user message that started its run, which a fork can cut before
  regenerate?: UserItem; // for a run's final reply: the message that started the run
  resend?: Resend;
}) {
  switch (item.kind) {
    case "user":
      return (
        <div className="user">
          {item.steering && <span className="badge">steering</span>}
          <div className="user-text">{item.content}</div>
          {item.attachments.length > 0 && <Attachments cid={cid} paths={item.attachments} />}
          <UserActions
            runId={starts ? item.runId : null}
            content={item.content}
            attachments={item.attachments}
            resend={resend}
          />
        </div>
      );
    case "assistant":
      return <Assistant item={item} regenerate={regenerate} resend={resend} />;
    case "tool":
      return (
        <ToolCard item={item}>
          {approval && <ApprovalCard cid={cid} item={approval} />}
          {item.sub && <Subagent cid={cid} state={item.sub} />}
        </ToolCard>
      );
    case "approval":
      return <ApprovalCard cid={cid} item={item} />;
    case "run.finished":
      return <RunEnd cid={cid} item={item} latest={latest} />;
    case "plan":
      return <PlanCard cid={cid} item={item} />;
    case "compaction":
      return (
        <details className="compaction-marker" data-testid="compaction-marker">
          <summary role="separator" aria-label="Context compacted">
            Context compacted · {formatTokens(item.tokensBefore)} → {formatTokens(item.tokensAfter)}{" "}
            tokens
          </summary>
          <div className="compaction-summary">{item.summary}</div>
        </details>
      );
    case "notice":
      if (item.restore) return <RestoreNotice cid={cid} item={{ ...item, restore: item.restore }} runs={runs ?? []} />;
      return (
        <div className={`notice ${item.tone}`} role={item.tone === "error" ? "alert" : undefined}>
          {item.text}
          {item.url && onShowPreview && (
            <>
              {" · "}
              <button type="button" className="link" onClick={onShowPreview}>
                show
              </button>
            </>
          )}
        </div>
      );
  }
});

/** A subagent's own timeline, inside its `task` card. */
function Subagent({ cid, state }: { cid: string; state: ViewState }) {
  const approvals = useMemo(() => approvalsByCall(state), [state]);
  return (
    <div className="subagent" data-testid="subagent">
      {state.items.map((item) =>
        shownElsewhere(state, item) ? null : (
          <div className={`row row-${item.kind}`} key={item.key}>
            <Row
              cid={cid}
              item={item}
              latest={false}
              starts={false}
              approval={item.kind === "tool" ? approvals.get(item.callId) : undefined}
            />
          </div>
        ),
      )}
    </div>
  );
}

/** A request to run a tool is shown inside that tool's card, between its arguments and its
 * output (not as a row of its own below a card that already shows the result); a denied one
 * is told by the card's "denied" badge alone. A request whose call has no card stays a row. */
// A `todo` call that worked is told by its checklist card (plan.updated), shown instead.
function shownElsewhere(state: ViewState, item: Item): boolean {
  if (item.kind === "tool") return item.name === "todo" && item.result !== null && !item.result.isError;
  return item.kind === "approval" && Object.hasOwn(state.tools, item.callId);
}

/** Each tool call's approval request to show in its card (a denial only as its badge). */
function approvalsByCall(state: ViewState): Map<string, ApprovalItem> {
  const byCall = new Map<string, ApprovalItem>();
  for (const item of state.items) {
    if (item.kind === "approval" && item.decision !== "deny" && Object.hasOwn(state.tools, item.callId)) {
      byCall.set(item.callId, item);
    }
  }
  return byCall;
}

/** Which user messages started a run (not steering), and each finished run's last reply
 * with the message that started it: what edit-and-resend and regenerate fork at. */
function forkPoints(state: ViewState): {
  starters: Set<string>;
  replies: Map<string, UserItem>;
  runs: string[];
} {
  const started = new Map<string, UserItem>();
  const lastReply = new Map<string, string>(); // run -> key of its last reply with text
  for (const item of state.items) {
    if (item.kind === "user" && !item.steering && item.runId && !started.has(item.runId)) {
      started.set(item.runId, item);
    } else if (item.kind === "assistant" && item.runId && item.text) {
      lastReply.set(item.runId, item.key);
    }
  }
  const replies = new Map<string, UserItem>();
  for (const [runId, key] of lastReply) {
    const starter = started.get(runId);
    if (starter && runId !== state.activeRun) replies.set(key, starter);
  }
  return { starters: new Set([...started.values()].map((u) => u.key)), replies, runs: [...started.keys()] };
}

/** The row holding event `seq`: the last one that starts at or before it (an item's key is
 * the seq it started at, an answer's prefixed with "a"). -1 when none does. */
export function rowAt(items: readonly Item[], seq: number): number {
  for (let i = items.length - 1; i >= 0; i--) {
    if (Number(items[i]!.key.replace(/^\D+/, "")) <= seq) return i;
  }
  return -1;
}

/** Rows rendered at first; earlier ones come in pages as the reader scrolls up. */
const WINDOW = 150;

export function Timeline({
  cid,
  state,
  empty,
  onShowPreview,
  onResend,
  focusSeq,
}: {
  cid: string;
  state: ViewState;
  empty?: React.ReactNode;
  onShowPreview?: () => void;
  onResend?: Resend;
  /** scroll to the message of this event once it is loaded (a search hit) */
  focusSeq?: number | null;
}) {
  const scroller = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  const sentinel = useRef<HTMLDivElement>(null);
  // null: follow the end (the newest WINDOW rows); a number: show from that row on.
  const [from, setFrom] = useState<number | null>(null);
  const start = from ?? Math.max(0, state.items.length - WINDOW);
  const anchor = useRef<number | null>(null);

  const showEarlier = () => {
    const el = scroller.current;
    if (el) anchor.current = el.scrollHeight - el.scrollTop;
    setFrom(Math.max(0, start - WINDOW));
  };

  // Keep the rows the reader was looking at in place when earlier rows are added above.
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && anchor.current !== null) {
      el.scrollTop = el.scrollHeight - anchor.current;
      anchor.current = null;
    }
  }, [from]);

  useEffect(() => {
    const el = sentinel.current;
    if (!el || start === 0) return;
    const observer = new IntersectionObserver(
      (entries) => {
        if (entries.some((e) => e.isIntersecting) && !pinned.current) showEarlier();
      },
      { root: scroller.current, rootMargin: "200px 0px 0px 0px" },
    );
    observer.observe(el);
    return () => observer.disconnect();
  }, [start]);

  useEffect(() => {
    const el = scroller.current;
    if (!el) return;
    const onScroll = () => {
      pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    };
    el.addEventListener("scroll", onScroll, { passive: true });
    return () => el.removeEventListener("scroll", onScroll);
  }, []);

  // Follow the output while the reader is at the bottom; leave them be when they scrolled up.
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  }, [state]);

  // Rows are laid out late (content-visibility skips off-screen rows, code is highlighted
  // after it loads): a conversation opened at its end must stay there as they grow.
  useEffect(() => {
    const el = scroller.current;
    const inner = el?.firstElementChild;
    if (!el || !inner) return;
    const observer = new ResizeObserver(() => {
      if (pinned.current) el.scrollTop = el.scrollHeight;
    });
    observer.observe(inner);
    return () => observer.disconnect();
  }, []);

  // A new request for a decision is shown, wherever the reader was.
  const waiting = state.pendingApprovals[state.pendingApprovals.length - 1];
  useEffect(() => {
    if (!waiting) return;
    const card = scroller.current?.querySelector(`[data-request-id="${CSS.escape(waiting)}"]`);
    card?.scrollIntoView({ block: "nearest" });
  }, [waiting]);

  // A search hit: its row is rendered (earlier rows too, if it was among them), then shown.
  const [found, setFound] = useState<string | null>(null);
  const shownSeq = useRef<number | null>(null);
  useEffect(() => {
    if (!focusSeq || shownSeq.current === focusSeq || state.lastSeq < focusSeq) return;
    const index = rowAt(state.items, focusSeq);
    if (index < 0) return;
    if (index < start) {
      setFrom(index);
      return; // shown once rendered
    }
    shownSeq.current = focusSeq;
    const key = state.items[index]!.key;
    pinned.current = false;
    setFound(key);
    scroller.current?.querySelector(`[data-key="${CSS.escape(key)}"]`)?.scrollIntoView({ block: "center" });
  }, [focusSeq, state, start]);

  const running = state.activeRun !== null;
  const last = state.items[state.items.length - 1];
  const waitingForModel = running && (!last || last.kind === "user" || (last.kind === "tool" && last.result));
  const { starters, replies, runs } = useMemo(() => forkPoints(state), [state]);
  const approvals = useMemo(() => approvalsByCall(state), [state]);
  return (
    <div className="timeline" ref={scroller} data-last-seq={state.lastSeq}>
      <div className="timeline-inner">
        {state.items.length === 0 && empty}
        {start > 0 && (
          <div ref={sentinel} className="earlier">
            <button type="button" className="link" onClick={showEarlier}>
              Show {Math.min(WINDOW, start)} earlier of {start} items
            </button>
          </div>
        )}
        {state.items.slice(start).map((item) =>
          shownElsewhere(state, item) ? null : (
            <div
              className={`row row-${item.kind}${item.key === found ? " found" : ""}`}
              key={item.key}
              data-key={item.key}
            >
              <Row
                cid={cid}
                item={item}
                latest={item === last && !running}
                onShowPreview={onShowPreview}
                starts={starters.has(item.key)}
                regenerate={replies.get(item.key)}
                resend={onResend}
                runs={item.kind === "notice" && item.restore ? runs : undefined}
                approval={item.kind === "tool" ? approvals.get(item.callId) : undefined}
              />
            </div>
          ),
        )}
        {waitingForModel && <div className="working pulse">Working…</div>}
      </div>
    </div>
  );
}
