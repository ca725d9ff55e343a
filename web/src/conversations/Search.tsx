// Search across the person's conversations: titles and message text, from the sidebar.
// Hits replace the list while there is a query; choosing one opens the conversation there.
import { useEffect, useState } from "react";
import { api, errorMessage, type SearchHit } from "../api/client";

export const SEARCH_ID = "conversation-search";
const DEBOUNCE_MS = 200;
const MAX_QUERY = 200; // as the server allows

const KIND: Record<SearchHit["kind"], string> = { title: "title", user: "you", assistant: "agent" };

/** The snippet with the first match marked. */
function Marked({ text, query }: { text: string; query: string }) {
  const at = text.toLowerCase().indexOf(query.toLowerCase());
  if (at < 0) return <>{text}</>;
  return (
    <>
      {text.slice(0, at)}
      <mark>{text.slice(at, at + query.length)}</mark>
      {text.slice(at + query.length)}
    </>
  );
}

export function SearchBox({ onQuery }: { onQuery: (query: string) => void }) {
  const [value, setValue] = useState("");
  return (
    <input
      id={SEARCH_ID}
      type="search"
      className="conv-search"
      placeholder="Search (Ctrl+K)"
      aria-label="Search conversations"
      maxLength={MAX_QUERY}
      value={value}
      onChange={(e) => {
        setValue(e.target.value);
        onQuery(e.target.value);
      }}
      onKeyDown={(e) => {
        if (e.key === "Escape" && value) {
          e.stopPropagation();
          setValue("");
          onQuery("");
        }
      }}
    />
  );
}

export function SearchResults({
  query,
  onOpen,
}: {
  query: string;
  onOpen: (cid: string, seq: number | null) => void;
}) {
  const [hits, setHits] = useState<SearchHit[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const text = query.trim();

  useEffect(() => {
    let live = true;
    setHits(null);
    setError(null);
    const timer = setTimeout(() => {
      api.search(text).then(
        (found) => live && setHits(found),
        (e: unknown) => live && setError(errorMessage(e)),
      );
    }, DEBOUNCE_MS);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [text]);

  return (
    <ul className="conv-list search-results" aria-label="Search results">
      {error && <li className="error-text pad">{error}</li>}
      {!error && hits === null && <li className="muted pad">Searching…</li>}
      {hits?.length === 0 && <li className="muted pad">Nothing found for “{text}”.</li>}
      {hits?.map((h) => (
        <li key={`${h.conversation_id}:${h.seq ?? "title"}`} className="conv hit">
          <button type="button" className="conv-open" onClick={() => onOpen(h.conversation_id, h.seq)}>
            <span className="conv-title">{h.title}</span>
            <span className="conv-sub muted hit-snippet">
              <span className="hit-kind">{KIND[h.kind]}</span> <Marked text={h.snippet} query={text} />
            </span>
          </button>
        </li>
      ))}
    </ul>
  );
}
