// A conversation's network policy: none, egress, or egress limited to the server's allowlist.
import { useEffect, useState } from "react";
import { api, errorMessage, type Network, type SandboxInfo } from "../api/client";

/** How the sandbox is connected, as the server says (with the allowlist and any fallback). */
export function useSandboxNetwork(cid: string, network: Network | undefined): SandboxInfo | null {
  const [info, setInfo] = useState<SandboxInfo | null>(null);
  useEffect(() => {
    if (!network) return;
    let live = true;
    api.sandbox(cid).then(
      (s) => live && setInfo(s),
      () => live && setInfo(null),
    );
    return () => {
      live = false;
    };
  }, [cid, network]);
  return info && info.network === network ? info : null;
}

export function networkLabel(network: Network, info: SandboxInfo | null): string {
  if (network === "none") return "no network";
  return info && info.allow_domains.length > 0 ? "egress + allowlist" : "egress";
}

/** The policy, changeable between runs (the server refuses during one). */
export function NetworkSelect({
  cid,
  network,
  running,
  onChanged,
}: {
  cid: string;
  network: Network | undefined;
  running: boolean;
  onChanged: () => void;
}) {
  const info = useSandboxNetwork(cid, network);
  const [error, setError] = useState<string | null>(null);
  if (!network) return null;
  const egress = networkLabel("egress", info);
  const allowed = info?.allow_domains.join(", ");
  const hint = [
    info?.network_detail,
    allowed ? `Reachable: ${allowed}` : "",
    running ? "Changes between runs." : "A change restarts an idle sandbox.",
    error ?? "",
  ]
    .filter(Boolean)
    .join("\n");
  return (
    <select
      className="mode network"
      aria-label="Network"
      data-network={network}
      title={hint}
      value={network}
      disabled={running}
      onChange={(e) => {
        setError(null);
        void api.setNetwork(cid, e.target.value as Network).then(onChanged, (err: unknown) => {
          setError(errorMessage(err));
          onChanged();
        });
      }}
    >
      <option value="egress">Network: {egress}</option>
      <option value="none">Network: none</option>
    </select>
  );
}
