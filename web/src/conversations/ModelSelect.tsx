// The conversation's model: the server's, or one of the models the server can reach.
// A change applies from the next run (the timeline shows it as a notice).
import { useState } from "react";
import { api, errorMessage } from "../api/client";
import { useModels } from "./useModels";

export function ModelSelect({
  cid,
  model,
  onChanged,
}: {
  cid: string;
  model: string | null | undefined;
  onChanged: () => void;
}) {
  const choices = useModels(model);
  const [error, setError] = useState<string | null>(null);

  if (model === undefined) return null;
  return (
    <select
      className="mode"
      aria-label="Model"
      title={error ?? "The model of this conversation's next runs"}
      value={model ?? ""}
      onChange={(e) => {
        setError(null);
        api.setModel(cid, e.target.value).then(onChanged, (err: unknown) => {
          setError(errorMessage(err));
          onChanged();
        });
      }}
    >
      <ModelOptions models={choices} />
    </select>
  );
}

/** The server's model (value "") first, then each model that can be chosen. */
export function ModelOptions({ models }: { models: string[] }) {
  return (
    <>
      <option value="">Server's model</option>
      {models.map((id) => (
        <option key={id} value={id}>
          {id}
        </option>
      ))}
    </>
  );
}
