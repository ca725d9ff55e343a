// highlight.js with the languages a workspace mostly holds; imported lazily, never upfront.
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
import { languageFor } from "./languages";

const LANGUAGES = { bash, css, javascript, json, markdown, python, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);
hljs.registerAliases(["sh", "shell", "console"], { languageName: "bash" });
hljs.registerAliases(["html", "svg"], { languageName: "xml" });
hljs.registerAliases(["js", "jsx", "mjs"], { languageName: "javascript" });
hljs.registerAliases(["ts", "tsx"], { languageName: "typescript" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["yml", "toml"], { languageName: "yaml" });

/** Highlight the fenced code blocks inside `root` whose language is known. */
export function highlightBlocks(root: HTMLElement): void {
  for (const code of root.querySelectorAll<HTMLElement>("pre code[class*='language-']")) {
    const language = /language-(\S+)/.exec(code.className)?.[1];
    if (!language || !hljs.getLanguage(language) || code.dataset.highlighted) continue;
    code.innerHTML = hljs.highlight(code.textContent ?? "", { language, ignoreIllegals: true }).value;
    code.dataset.highlighted = "yes";
    code.classList.add("hljs");
  }
}

export { hljs, languageFor };
