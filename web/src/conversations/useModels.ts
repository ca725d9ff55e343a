// The models a conversation can be given: the ones the server can reach (GET
// /api/settings/models), for the home screen's start options and an open conversation's header.
import { useEffect, useState } from "react";
import { api } from "../api/client";

/** The ids to offer: the server's, with `current` first when the server does not list it. */
export function modelChoices(known: string[], current: string | null | undefined): string[] {
  return current && !known.includes(current) ? [current, ...known] : known;
}

/** Fetched once per mount; none when the server cannot list them (the server's model is still offered). */
export function useModels(current: string | null | undefined): string[] {
  const [known, setKnown] = useState<string[]>([]);
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
  return modelChoices(known, current);
}
