// The conversation's event stream: SSE from seq 1 (a refresh replays the whole journal
// through the same reducer as live events), batched per animation frame, resumed after drops.
import { useEffect, useRef, useState } from "react";
import { ApiError, api } from "../api/client";
import { EVENT_TYPES, type Envelope } from "../api/events";
import { initialState, reduce, type ViewState } from "./reducer";

/** "gone": the conversation does not exist (deleted, or never was); nothing will come. */
export type Connection = "connecting" | "live" | "reconnecting" | "gone";

const MAX_BACKOFF_MS = 5000;

export class ConversationStream {
  private source: EventSource | null = null;
  private queue: Envelope[] = [];
  private scheduled = false;
  private lastSeq = 0;
  private closed = false;
  private failures = 0;
  private retry: ReturnType<typeof setTimeout> | null = null;
  private resolveOpen: () => void = () => {};
  /** Resolves once the stream is attached: send only after this, so nothing is missed. */
  readonly opened: Promise<void>;

  constructor(
    private cid: string,
    private onBatch: (events: Envelope[]) => void,
    private onConnection: (state: Connection) => void,
  ) {
    this.opened = new Promise((resolve) => (this.resolveOpen = resolve));
    this.connect();
  }

  private connect(): void {
    // EventSource resumes by itself with Last-Event-ID; a manual reconnect (after the
    // browser gave up) resumes with ?after=N instead.
    const source = new EventSource(api.eventsUrl(this.cid, this.lastSeq));
    this.source = source;
    source.onopen = () => {
      this.failures = 0;
      this.onConnection("live");
      this.resolveOpen();
    };
    source.onerror = () => {
      if (this.closed) return;
      this.onConnection("reconnecting");
      if (source.readyState === EventSource.CLOSED) void this.retryUnlessGone();
    };
    const onEvent = (message: MessageEvent<string>) => {
      let envelope: Envelope;
      try {
        envelope = JSON.parse(message.data) as Envelope;
      } catch {
        return; // a frame cut short: the resume after it asks from the last good seq
      }
      if (!(envelope.seq > this.lastSeq)) return;
      this.lastSeq = envelope.seq;
      this.queue.push(envelope);
      this.schedule();
    };
    for (const type of EVENT_TYPES) source.addEventListener(type, onEvent);
  }

  /** The browser gave up on the stream: a 404 means the conversation is gone, else retry. */
  private async retryUnlessGone(): Promise<void> {
    try {
      await api.conversation(this.cid);
    } catch (e) {
      if (this.closed) return;
      if (e instanceof ApiError && e.status === 404) {
        this.onConnection("gone");
        return;
      }
    }
    if (this.closed) return;
    this.failures += 1;
    const delay = Math.min(MAX_BACKOFF_MS, 250 * 2 ** this.failures);
    this.retry = setTimeout(() => this.connect(), delay);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const flush = () => {
      this.scheduled = false;
      if (this.closed || this.queue.length === 0) return;
      const batch = this.queue;
      this.queue = [];
      this.onBatch(batch);
    };
    // One render per frame however many events arrive; background tabs still advance.
    if (document.visibilityState === "visible") requestAnimationFrame(flush);
    else setTimeout(flush, 100);
  }

  close(): void {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.source?.close();
  }
}

export interface ConversationView {
  state: ViewState;
  connection: Connection;
  /** Resolves when the stream is attached (or after a short wait, so a send never hangs). */
  attached: () => Promise<void>;
}

export function useConversationEvents(cid: string): ConversationView {
  const [state, setState] = useState<ViewState>(initialState);
  const [connection, setConnection] = useState<Connection>("connecting");
  const stream = useRef<ConversationStream | null>(null);

  useEffect(() => {
    const s = new ConversationStream(
      cid,
      (batch) => setState((previous) => reduce(previous, batch)),
      setConnection,
    );
    stream.current = s;
    return () => s.close();
  }, [cid]);

  const attached = () =>
    Promise.race([
      stream.current?.opened ?? Promise.resolve(),
      new Promise<void>((resolve) => setTimeout(resolve, 3000)),
    ]);
  return { state, connection, attached };
}
