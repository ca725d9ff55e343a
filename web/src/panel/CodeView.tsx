// Read-only source with highlighting; highlight.js and its languages load on first use.
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import css from "highlight.js/lib/languages/css";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import { useMemo } from "react";

const LANGUAGES = { bash, css, javascript, json, markdown, python, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

const BY_EXTENSION: Record<string, string> = {
  sh: "bash",
  bash: "bash",
  css: "css",
  js: "javascript",
  mjs: "javascript",
  cjs: "javascript",
  jsx: "javascript",
  json: "json",
  md: "markdown",
  py: "python",
  ts: "typescript",
  tsx: "typescript",
  html: "xml",
  htm: "xml",
  xml: "xml",
  svg: "xml",
  yml: "yaml",
  yaml: "yaml",
  toml: "yaml",
};

const HIGHLIGHT_LIMIT = 200_000;

export default function CodeView({ path, text }: { path: string; text: string }) {
  const html = useMemo(() => {
    const ext = path.split(".").pop()?.toLowerCase() ?? "";
    const language = BY_EXTENSION[ext];
    if (!language || text.length > HIGHLIGHT_LIMIT) return null;
    return hljs.highlight(text, { language, ignoreIllegals: true }).value; // escapes the text
  }, [path, text]);
  return html === null ? (
    <pre className="code">{text}</pre>
  ) : (
    <pre className="code hljs" dangerouslySetInnerHTML={{ __html: html }} />
  );
}
