// Model text as sanitized HTML: marked renders, DOMPurify removes anything executable.
// Fenced code is highlighted once the text is final, with highlight.js loaded on demand.
import DOMPurify from "dompurify";
import { marked } from "marked";
import { memo, useEffect, useMemo, useRef } from "react";

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

export function renderMarkdown(text: string): string {
  const html = marked.parse(text, { async: false, gfm: true, breaks: false });
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
}

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
