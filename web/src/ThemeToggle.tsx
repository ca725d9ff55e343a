// Switches between light and dark; the choice is remembered (theme.ts), "Follow the system" forgets it.
import { useState } from "react";
import { applyTheme, chooseTheme, storedChoice, type ThemeChoice } from "./theme";

export function ThemeToggle() {
  const [theme, setTheme] = useState(() => applyTheme());
  const next = theme === "light" ? "dark" : "light";
  return (
    <button
      type="button"
      className="icon theme-toggle"
      aria-label={`Switch to the ${next} theme`}
      title={`Switch to the ${next} theme`}
      data-theme-now={theme}
      onClick={() => setTheme(chooseTheme(next))}
    >
      <span aria-hidden="true">{theme === "light" ? "☾" : "☀"}</span>
    </button>
  );
}

export function AppearanceSection() {
  const [choice, setChoice] = useState<ThemeChoice>(storedChoice);
  return (
    <section className="settings-section" aria-labelledby="appearance-title">
      <h2 id="appearance-title">Appearance</h2>
      <label>
        Theme
        <select
          value={choice}
          onChange={(e) => {
            const picked = e.target.value as ThemeChoice;
            setChoice(picked);
            chooseTheme(picked);
          }}
        >
          <option value="system">Follow the system</option>
          <option value="light">Light</option>
          <option value="dark">Dark</option>
        </select>
      </label>
    </section>
  );
}
