import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { ErrorBoundary } from "./ErrorBoundary";
import "./styles.css";
import { followSystemTheme } from "./theme";

followSystemTheme(); // before the first paint

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <ErrorBoundary what="Burrow" onLeave={() => location.assign("/")}>
      <App />
    </ErrorBoundary>
  </StrictMode>,
);
