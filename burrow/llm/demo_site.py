"""The small static site the offline demo model writes: the page shows the user's prompt."""

from __future__ import annotations

import html

INDEX_HTML = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{title}</title>
  <link rel="stylesheet" href="style.css">
</head>
<body>
  <main class="card">
    <p class="eyebrow">Built by Burrow's demo model</p>
    <h1>Hello from your sandbox</h1>
    <p class="prompt">You asked for: <q>{prompt}</q></p>
    <p>This page was written with the <code>write_file</code> tool and is served from the
      conversation's own sandbox. Connect a real model and Burrow will build what you
      actually asked for.</p>
    <button id="cheer" type="button">Dig deeper</button>
    <p class="count" id="count" aria-live="polite"></p>
    <footer>Served at <span id="clock"></span></footer>
  </main>
  <script src="app.js"></script>
</body>
</html>
"""

STYLE_CSS = """:root {
  --ink: #1d1b16;
  --paper: #fbf7ef;
  --accent: #b4532a;
}
* { box-sizing: border-box; }
body {
  margin: 0;
  min-height: 100vh;
  display: grid;
  place-items: center;
  font: 17px/1.6 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--ink);
  background: radial-gradient(circle at 20% 10%, #f3d9b1, transparent 45%),
    radial-gradient(circle at 80% 90%, #c9e4d4, transparent 40%), var(--paper);
}
.card {
  max-width: 36rem;
  margin: 2rem;
  padding: 2.5rem;
  border-radius: 1.25rem;
  background: rgba(255, 255, 255, 0.85);
  box-shadow: 0 20px 50px rgba(60, 40, 20, 0.15);
}
.eyebrow {
  margin: 0;
  font-size: 0.8rem;
  letter-spacing: 0.12em;
  text-transform: uppercase;
  color: var(--accent);
}
h1 { margin: 0.3rem 0 1rem; font-size: 2.2rem; line-height: 1.15; }
.prompt { padding: 0.8rem 1rem; border-left: 4px solid var(--accent); background: #fff5e8; }
button {
  padding: 0.6rem 1.3rem;
  border: 0;
  border-radius: 999px;
  font: inherit;
  color: white;
  background: var(--accent);
  cursor: pointer;
  transition: transform 0.15s ease;
}
button:hover { transform: translateY(-2px); }
.count { min-height: 1.6em; font-weight: 600; }
footer { margin-top: 1.5rem; font-size: 0.85rem; color: #6b6559; }
"""

APP_JS = """const count = document.getElementById("count");
const clock = document.getElementById("clock");
let digs = 0;

document.getElementById("cheer").addEventListener("click", () => {
  digs += 1;
  count.textContent = "⛏️".repeat(Math.min(digs, 12)) + ` ${digs} dig${digs === 1 ? "" : "s"}`;
});

function tick() {
  clock.textContent = new Date().toLocaleTimeString();
}
tick();
setInterval(tick, 1000);
"""


def site_files(prompt: str) -> dict[str, str]:
    """index.html, style.css and app.js, with the prompt HTML-escaped into the page."""
    shown = " ".join(prompt.split()) or "a website"
    title = shown if len(shown) <= 60 else shown[:59] + "…"
    return {
        "index.html": INDEX_HTML.format(title=html.escape(title), prompt=html.escape(shown)),
        "style.css": STYLE_CSS,
        "app.js": APP_JS,
    }
