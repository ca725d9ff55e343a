// The conversation's model: the server's, or one of the models the server can reach.
// A change applies from the next run (the timeline shows it as a notice).
import { useState } from "react";
import { api, errorMessage } from "../api/client";
import { type ModelChoice, modelLabel, useModels } from "./useModels";

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

/** The server's model (value "") first, named where the server said which it is, then
 * each model that can be chosen, with its provider, window and whether it sees images. */
export function ModelOptions({ models }: { models: ModelChoice[] }) {
  const server = models.find((m) => m.server_model);
  return (
    <>
      <option value="">{server ? `Server's model (${modelLabel(server)})` : "Server's model"}</option>
      {models.map((m) => (
        <option key={m.id} value={m.id}>
          {modelLabel(m)}
        </option>
      ))}
    </>
  );
}
