// Which of the user's secrets a conversation's commands and terminals get, and a warning
// when the sandbox could send them anywhere.
import { type ReactNode, useEffect, useLayoutEffect, useRef, useState } from "react";
import { api, errorMessage, type Network, type SecretName } from "../api/client";
import { useSandboxNetwork } from "./NetworkSelect";

export function SecretsPicker({
  cid,
  chosen,
  onChanged,
  open,
  onOpen,
  warning,
}: {
  cid: string;
  chosen: string[];
  onChanged: () => void;
  open: boolean;
  onOpen: (open: boolean) => void;
  /** the egress warning: shown inside the menu while it is open, since the menu would
   * otherwise cover the bar below the header where it stands */
  warning?: ReactNode;
}) {
  const root = useRef<HTMLDetailsElement>(null);
  // Opened under the button, towards the side with room (a wrapped header puts it at the
  // left); checked again as it grows (the warning comes in after the choice).
  useLayoutEffect(() => {
    const menu = root.current?.querySelector<HTMLElement>(".secrets-menu");
    if (!open || !menu) return;
    const place = () => {
      menu.classList.remove("from-left");
      if (menu.getBoundingClientRect().left < 0) menu.classList.add("from-left");
    };
    place();
    const observer = new ResizeObserver(place);
    observer.observe(menu);
    return () => observer.disconnect();
  }, [open]);

  // A popover: a click elsewhere or Esc closes it (a <details> alone ignores both). Read
  // from the element, which opens before React hears of it: Esc at once still closes it.
  useEffect(() => {
    const onPointer = (e: PointerEvent) => {
      const el = root.current;
      if (el?.open && !el.contains(e.target as Node)) {
        el.open = false;
        onOpen(false);
      }
    };
    const onKey = (e: KeyboardEvent) => {
      const el = root.current;
      if (e.key !== "Escape" || !el?.open) return;
      e.stopPropagation(); // Esc here closes the menu; it does not also stop the run
      el.open = false;
      onOpen(false);
      el.querySelector("summary")?.focus();
    };
    document.addEventListener("pointerdown", onPointer);
    document.addEventListener("keydown", onKey, true);
    return () => {
      document.removeEventListener("pointerdown", onPointer);
      document.removeEventListener("keydown", onKey, true);
    };
  }, [onOpen]);
  const [secrets, setSecrets] = useState<SecretName[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Shown at once; the server's answer (or its refusal) then sets it.
  const [picked, setPicked] = useState(chosen);
  const key = chosen.join(",");
  useEffect(() => setPicked(chosen), [cid, key]);

  const toggle = (name: string, on: boolean) => {
    const next = on ? [...picked, name] : picked.filter((n) => n !== name);
    setPicked(next);
    setError(null);
    api.setConversationSecrets(cid, next).then(
      (c) => {
        setPicked(c.secrets);
        onChanged();
      },
      (e: unknown) => {
        setPicked(chosen);
        setError(errorMessage(e));
        onChanged();
      },
    );
  };

  return (
    <details
      ref={root}
      className="secrets-picker"
      open={open}
      onToggle={(e) => {
        const now = (e.currentTarget as HTMLDetailsElement).open;
        if (now) api.secrets().then(setSecrets, () => setSecrets([]));
        if (now !== open) onOpen(now);
      }}
    >
      <summary title="Secrets given to this conversation's commands and terminals as environment variables">
        Secrets{picked.length > 0 ? ` · ${picked.length}` : ""}
      </summary>
      <div className="secrets-menu" role="group" aria-label="Secrets for this conversation">
        {secrets === null ? (
          <p className="muted">Loading…</p>
        ) : secrets.length === 0 ? (
          <p className="muted">No secrets yet: add them in Settings.</p>
        ) : (
          secrets.map((s) => (
            <label key={s.name} className="check">
              <input
                type="checkbox"
                checked={picked.includes(s.name)}
                onChange={(e) => toggle(s.name, e.target.checked)}
              />
              <code>{s.name}</code>
            </label>
          ))
        )}
        <p className="muted">The next command and new terminals get the change.</p>
        {warning}
        {error && (
          <p className="error-text" role="alert">
            {error}
          </p>
        )}
      </div>
    </details>
  );
}

/** Shown while secrets are chosen and the sandbox reaches any internet host (egress with no
 * domain allowlist). */
export function SecretsWarning({
  cid,
  chosen,
  network,
}: {
  cid: string;
  chosen: string[];
  network: Network | undefined;
}) {
  const any = chosen.length > 0;
  const info = useSandboxNetwork(cid, any ? network : undefined);
  if (!any || !info || info.network !== "egress" || info.allow_domains.length > 0) return null;
  return (
    <p className="secrets-warning" role="alert">
      This sandbox holds {chosen.length === 1 ? "the secret" : "the secrets"}{" "}
      {chosen.map((n, i) => (
        <span key={n}>
          {i > 0 && ", "}
          <code>{n}</code>
        </span>
      ))}{" "}
      and can reach any internet host: a command can send them anywhere. Unselect them, set the
      conversation's network to none, or have the server limit egress to a domain allowlist (
      <code>BURROW_SANDBOX_ALLOW_DOMAINS</code>).
    </p>
  );
}
