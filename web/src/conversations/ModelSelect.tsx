// The conversation's model: the server's, or one of the models the server can reach.
// A change applies from the next run (the timeline shows it as a notice).
import { useEffect, useState } from "react";
import { api, errorMessage } from "../api/client";

export function ModelSelect({
  cid,
  model,
  onChanged,
}: {
  cid: string;
  model: string | null | undefined;
  onChanged: () => void;
}) {
  const [known, setKnown] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let live = true;
    api.models().then(
      (models) => live && setKnown(models.map((m) => m.id)),
      () => live && setKnown([]),
    );
    return () => {
      live = false;
    };
  }, []);

  if (model === undefined) return null;
  const choices = model && !known.includes(model) ? [model, ...known] : known;
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
      <option value="">Server's model</option>
      {choices.map((id) => (
        <option key={id} value={id}>
          {id}
        </option>
      ))}
    </select>
  );
}
