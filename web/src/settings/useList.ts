// A settings list the server owns (secrets, profiles): loaded once, reloaded after each
// change, with one error line and a busy flag that disables the section's buttons.
import { useEffect, useState } from "react";
import { errorMessage } from "../api/client";

export function useList<T>(load: () => Promise<T[]>) {
  const [items, setItems] = useState<T[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const reload = () => load().then(setItems, (e: unknown) => setError(errorMessage(e)));
  useEffect(() => {
    void reload();
  }, []);

  /** Run a change, then show the list as the server has it (or why the change failed). */
  const act = async (action: () => Promise<unknown>): Promise<boolean> => {
    setBusy(true);
    setError(null);
    try {
      await action();
      await reload();
      return true;
    } catch (e) {
      setError(errorMessage(e));
      return false;
    } finally {
      setBusy(false);
    }
  };

  return { items, error, setError, busy, act };
}
