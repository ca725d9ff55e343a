// A settings list the server owns (secrets, profiles): loaded once, reloaded after each
// change, with one error line and a busy flag that disables the section's buttons.
import { useEffect, useState } from "react";
import { errorMessage } from "../api/client";
import { useAction } from "./useAction";

export function useList<T>(load: () => Promise<T[]>) {
  const [items, setItems] = useState<T[] | null>(null);
  const { busy, error, setError, act: run } = useAction();

  const reload = () => load().then(setItems, (e: unknown) => setError(errorMessage(e)));
  useEffect(() => {
    void reload();
  }, []);

  /** Run a change, then show the list as the server has it (or why the change failed). */
  const act = (action: () => Promise<unknown>): Promise<boolean> =>
    run(async () => {
      await action();
      await reload();
    });

  return { items, error, setError, busy, act };
}
