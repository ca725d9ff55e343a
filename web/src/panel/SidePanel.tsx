// Preview, terminal and files of the conversation's sandbox, as tabs.
import { lazy, Suspense, useEffect, useRef, useState } from "react";
import { Changes } from "./Changes";
import { GitOut } from "./GitOut";
import { Files } from "./Files";
import { Preview } from "./Preview";
import { narrow } from "./usePanel";

const Terminals = lazy(() => import("./Terminal"));

export type Tab = "preview" | "terminal" | "files" | "changes";
const TABS: { id: Tab; label: string }[] = [
  { id: "preview", label: "Preview" },
  { id: "terminal", label: "Terminal" },
  { id: "files", label: "Files" },
  { id: "changes", label: "Changes" },
];

export function SidePanel({
  cid,
  tab,
  onTab,
  preview,
  filesVersion,
  sandbox,
  network,
  onClose,
}: {
  cid: string;
  tab: Tab;
  onTab: (tab: Tab) => void;
  preview: { port: number; url: string } | null;
  filesVersion: number;
  sandbox: string;
  /** its network policy, as shown ("no network", "egress", "egress + allowlist") */
  network?: string;
  onClose: () => void;
}) {
  // A terminal stays attached while the person looks at another tab.
  const [terminalSeen, setTerminalSeen] = useState(tab === "terminal");
  if (tab === "terminal" && !terminalSeen) setTerminalSeen(true);
  const aside = useRef<HTMLElement>(null);
  // Covering the conversation (a narrow window), it takes the focus as a dialog would, so
  // Esc reaches it; beside the conversation it leaves the focus where it was.
  useEffect(() => {
    if (narrow.matches) aside.current?.querySelector<HTMLElement>('[role="tab"][aria-selected="true"]')?.focus();
  }, []);
  return (
    <aside
      className="panel"
      aria-label="Sandbox"
      ref={aside}
      onKeyDown={(e) => {
        // Esc closes a covering panel instead of stopping the run behind it; a terminal
        // keeps its Esc (vi, less).
        if (e.key !== "Escape" || !narrow.matches) return;
        if (e.target instanceof Element && e.target.closest(".xterm")) return;
        e.stopPropagation();
        onClose();
      }}
    >
      <div className="tabs" role="tablist">
        {TABS.map((t) => (
          <button
            key={t.id}
            type="button"
            role="tab"
            id={`tab-${t.id}`}
            aria-selected={tab === t.id}
            aria-controls={`tabpanel-${t.id}`}
            className={tab === t.id ? "active" : ""}
            onClick={() => onTab(t.id)}
            onKeyDown={(e) => {
              const i = TABS.findIndex((x) => x.id === tab);
              if (e.key === "ArrowRight") onTab(TABS[(i + 1) % TABS.length]!.id);
              if (e.key === "ArrowLeft") onTab(TABS[(i + TABS.length - 1) % TABS.length]!.id);
            }}
          >
            {t.label}
            {t.id === "preview" && preview && <span className="dot running" aria-label="available" />}
          </button>
        ))}
        <span className="spacer" />
        <span className={`sandbox-state ${sandbox}`} title="The conversation's sandbox">
          sandbox {sandbox}
          {network ? ` · ${network}` : ""}
        </span>
        <button type="button" className="icon panel-close" aria-label="Close panel" title="Close panel" onClick={onClose}>
          ✕
        </button>
      </div>
      <div className="tab-body" role="tabpanel" id={`tabpanel-${tab}`} aria-labelledby={`tab-${tab}`}>
        {tab === "preview" && <Preview cid={cid} preview={preview} sandbox={sandbox} />}
        {tab === "files" && <Files cid={cid} version={filesVersion} sandbox={sandbox} />}
        {tab === "changes" && (
          // One scrolling column: the push form follows the review, never over it.
          <div className="changes-tab">
            <Changes cid={cid} version={filesVersion} />
            <GitOut cid={cid} />
          </div>
        )}
        {terminalSeen && (
          <div className="terminal-slot" hidden={tab !== "terminal"}>
            <Suspense fallback={<div className="panel-empty muted">Loading terminal…</div>}>
              <Terminals cid={cid} />
            </Suspense>
          </div>
        )}
      </div>
    </aside>
  );
}
