import { describe, expect, it } from "vitest";
import css from "./styles.css?raw";

// A rule left open swallows every rule after it: the browser reads them as nested
// selectors that match nothing (a merge once dropped one "}", unstyling the plan card and
// the editor). No rule here is written nested, so each section starts at the top level.
describe("styles.css", () => {
  it("closes every rule before the next section comment, and at its end", () => {
    let depth = 0;
    const open: number[] = [];
    css.split("\n").forEach((line, i) => {
      if (line.startsWith("/*") && depth !== 0) open.push(i + 1);
      for (const c of line.replace(/\/\*.*?\*\//g, "")) {
        if (c === "{") depth++;
        if (c === "}") depth--;
      }
    });
    expect(open).toEqual([]);
    expect(depth).toBe(0);
  });
});
