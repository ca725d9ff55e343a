// Shells in the conversation's sandbox: xterm.js over the terminal WebSocket (DESIGN.md §3).
// Binary frames carry PTY bytes both ways; a text frame carries a resize. Loaded on demand.
import { FitAddon } from "@xterm/addon-fit";
import { Terminal as XTerm } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";
import { useEffect, useRef, useState } from "react";
import { ApiError, api, errorMessage } from "../api/client";

// "reconnecting": the socket dropped and the server is asked whether the terminal still
// exists; "lost": it does not (the server restarted, its shells with it); "ended": the shell
// exited. The browser sees a refused handshake as a bare drop (1006), so only the list can tell.
type Link = "connecting" | "open" | "reconnecting" | "lost" | "ended";

const CLOSE_ENDED = 4000; // the shell exited or the sandbox stopped
const RETRY_MS = [500, 1000, 2000, 5000];

function terminalId(entry: unknown): string | null {
  if (typeof entry === "string") return entry;
  if (entry && typeof entry === "object") {
    const e = entry as { terminal_id?: unknown; id?: unknown };
    const id = e.terminal_id ?? e.id;
    return typeof id === "string" ? id : null;
  }
  return null;
}

function TerminalView({ cid, tid, onReplace }: { cid: string; tid: string; onReplace: () => void }) {
  const host = useRef<HTMLDivElement>(null);
  const [link, setLink] = useState<Link>("connecting");
  const [attempt, setAttempt] = useState(0);
  const [retry, setRetry] = useState(0);

  // After a drop: reattach if the terminal is still there, say so if it is gone, and keep
  // asking while the server cannot be reached.
  useEffect(() => {
    if (link !== "reconnecting") return;
    let live = true;
    const timer = setTimeout(() => {
      api.terminals(cid).then(
        (list) => {
          if (!live) return;
          const ids = (Array.isArray(list) ? list : []).map(terminalId);
          if (ids.includes(tid)) setAttempt((a) => a + 1);
          else setLink("lost");
        },
        () => live && setRetry((r) => r + 1),
      );
    }, RETRY_MS[Math.min(retry, RETRY_MS.length - 1)]);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [link, retry, cid, tid]);

  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const term = new XTerm({
      cursorBlink: true,
      fontFamily: 'ui-monospace, "JetBrains Mono", "DejaVu Sans Mono", Menlo, monospace',
      fontSize: 13,
      scrollback: 5000,
      theme: { background: "#101214", foreground: "#e4e2dd", cursor: "#d9a15b" },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(el);
    fit.fit();
    setLink("connecting");
    const ws = new WebSocket(api.terminalSocketUrl(cid, tid));
    ws.binaryType = "arraybuffer";
    const encoder = new TextEncoder();
    const resize = () => {
      if (ws.readyState === WebSocket.OPEN) {
        ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
      }
    };
    ws.onopen = () => {
      setLink("open");
      setRetry(0);
      resize();
      term.focus();
    };
    ws.onmessage = (m: MessageEvent<ArrayBuffer | string>) => {
      term.write(typeof m.data === "string" ? m.data : new Uint8Array(m.data));
    };
    ws.onclose = (e) => setLink(e.code === CLOSE_ENDED ? "ended" : "reconnecting");
    const typing = term.onData((data) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(data));
    });
    const sized = term.onResize(resize);
    const observer = new ResizeObserver(() => {
      if (el.clientWidth > 0 && el.clientHeight > 0) fit.fit();
    });
    observer.observe(el);
    return () => {
      observer.disconnect();
      typing.dispose();
      sized.dispose();
      ws.onclose = null;
      ws.close();
      term.dispose();
    };
  }, [cid, tid, attempt]);

  return (
    <div className="terminal-view" data-link={link}>
      {link === "reconnecting" && (
        <div className="terminal-banner" role="status">
          Connection lost — reconnecting…
        </div>
      )}
      {(link === "lost" || link === "ended") && (
        <div className="terminal-banner" role="alert">
          {link === "lost"
            ? "This terminal ended when the server restarted — open a new one."
            : "The shell exited."}{" "}
          <button type="button" className="link" onClick={onReplace}>
            Open a new terminal
          </button>
        </div>
      )}
      <div className="terminal-host" ref={host} />
    </div>
  );
}

export default function Terminals({ cid }: { cid: string }) {
  const [ids, setIds] = useState<string[] | null>(null);
  const [active, setActive] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [unavailable, setUnavailable] = useState(false);
  const [opening, setOpening] = useState(false); // a shell is being started (a sandbox may boot first)

  const create = async () => {
    setError(null);
    setOpening(true);
    try {
      const { terminal_id } = await api.createTerminal(cid, 100, 30);
      setIds((list) => [...(list ?? []), terminal_id]);
      setActive(terminal_id);
    } catch (e) {
      if (e instanceof ApiError && (e.status === 404 || e.status === 405)) setUnavailable(true);
      else setError(errorMessage(e));
    } finally {
      setOpening(false);
    }
  };

  useEffect(() => {
    let live = true;
    api.terminals(cid).then(
      (list) => {
        if (!live) return;
        const found = (Array.isArray(list) ? list : []).map(terminalId).filter((x): x is string => !!x);
        setIds(found);
        if (found.length > 0) setActive(found[found.length - 1]!);
        else void create();
      },
      (e: unknown) => {
        if (!live) return;
        if (e instanceof ApiError && (e.status === 404 || e.status === 405)) setUnavailable(true);
        else setError(errorMessage(e));
        setIds([]);
      },
    );
    return () => {
      live = false;
    };
  }, [cid]);

  const close = async (tid: string) => {
    try {
      await api.deleteTerminal(cid, tid);
    } catch {
      // already gone: drop it from the list anyway
    }
    const rest = (ids ?? []).filter((t) => t !== tid);
    setIds(rest);
    if (active === tid) setActive(rest[rest.length - 1] ?? null);
  };

  if (unavailable) {
    return <div className="panel-empty muted">This server does not offer terminals yet.</div>;
  }
  return (
    <div className="terminals">
      <div className="panel-toolbar terminal-tabs" role="tablist" aria-label="Terminals">
        {(ids ?? []).map((tid, i) => (
          <span key={tid} className={`terminal-tab ${tid === active ? "active" : ""}`}>
            <button type="button" role="tab" aria-selected={tid === active} onClick={() => setActive(tid)}>
              Shell {i + 1}
            </button>
            <button type="button" className="icon" aria-label={`Close shell ${i + 1}`} onClick={() => void close(tid)}>
              ✕
            </button>
          </span>
        ))}
        <button type="button" className="icon" title="New terminal" aria-label="New terminal" onClick={() => void create()}>
          +
        </button>
      </div>
      {error && <p className="pad error-text">{error}</p>}
      {active ? (
        <TerminalView key={active} cid={cid} tid={active} onReplace={() => void close(active).then(create)} />
      ) : (
        ids !== null &&
        !error && (
          <div className="panel-empty muted" role="status">
            {opening ? "Opening a terminal…" : "No terminal open."}
          </div>
        )
      )}
    </div>
  );
}
