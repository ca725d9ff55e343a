// Read-only source with highlighting; highlight.js and its languages load on first use.
import { useMemo } from "react";
import { hljs, languageFor } from "./highlight";

const HIGHLIGHT_LIMIT = 200_000;

export default function CodeView({ path, text }: { path: string; text: string }) {
  const html = useMemo(() => {
    const language = languageFor(path);
    if (!language || text.length > HIGHLIGHT_LIMIT) return null;
    return hljs.highlight(text, { language, ignoreIllegals: true }).value; // escapes the text
  }, [path, text]);
  return html === null ? (
    <pre className="code">{text}</pre>
  ) : (
    <pre className="code hljs" dangerouslySetInnerHTML={{ __html: html }} />
  );
}
