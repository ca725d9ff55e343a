// A running command that has printed nothing for a while says so: it may be waiting for
// input nobody can give (commands get none), stuck on the network, or simply busy.
import { useEffect, useState } from "react";

export const SILENT_AFTER_MS = 30_000;

/** "no output for 45 s" once `since` (the server's time of the last output) is that old. */
export function Silence({ since }: { since: string }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const quiet = now - Date.parse(since);
  if (!(quiet >= SILENT_AFTER_MS)) return null;
  return (
    <span className="muted silence" role="status" title="The command is still running but has printed nothing">
      no output for {Math.floor(quiet / 1000)} s
    </span>
  );
}
