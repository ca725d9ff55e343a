// Which highlight.js language a file's name says, apart from highlight.js itself: the
// first load can ask without loading the highlighter (highlight.ts, loaded on demand).

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

export function languageFor(path: string): string | undefined {
  return BY_EXTENSION[path.split(".").pop()?.toLowerCase() ?? ""];
}
