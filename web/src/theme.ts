// Light or dark: the system's choice (prefers-color-scheme) unless the user picked one, which
// is remembered in localStorage. The resolved theme is <html data-theme>, which styles.css keys on.
export type ThemeChoice = "system" | "light" | "dark";
export type Theme = "light" | "dark";

export const THEME_KEY = "burrow.theme";
const query = () => window.matchMedia("(prefers-color-scheme: light)");

export function storedChoice(): ThemeChoice {
  try {
    const v = localStorage.getItem(THEME_KEY);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system"; // storage blocked: follow the system
  }
}

export function resolve(choice: ThemeChoice, systemLight: boolean): Theme {
  return choice === "system" ? (systemLight ? "light" : "dark") : choice;
}

export function applyTheme(choice: ThemeChoice = storedChoice()): Theme {
  const theme = resolve(choice, query().matches);
  document.documentElement.dataset.theme = theme;
  return theme;
}

export function chooseTheme(choice: ThemeChoice): Theme {
  try {
    if (choice === "system") localStorage.removeItem(THEME_KEY);
    else localStorage.setItem(THEME_KEY, choice);
  } catch {
    // storage blocked: the choice holds until the page is reloaded
  }
  return applyTheme(choice);
}

/** Applies the theme now and again whenever the system's preference changes. */
export function followSystemTheme(): void {
  applyTheme();
  query().addEventListener("change", () => applyTheme());
}
