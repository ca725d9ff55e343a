// Model text as sanitized HTML (see sanitize.ts). Fenced code is highlighted once the text
// is final, with highlight.js loaded on demand.
import { memo, useEffect, useMemo, useRef } from "react";
import { renderMarkdown } from "./sanitize";

export const Markdown = memo(function Markdown({ text, final }: { text: string; final: boolean }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  const root = useRef<HTMLDivElement>(null);
  const hasCode = final && html.includes('class="language-');
  useEffect(() => {
    if (!hasCode) return;
    let live = true;
    void import("../panel/highlight").then(({ highlightBlocks }) => {
      if (live && root.current) highlightBlocks(root.current);
    });
    return () => {
      live = false;
    };
  }, [html, hasCode]);
  return <div ref={root} className="markdown" dangerouslySetInnerHTML={{ __html: html }} />;
});
