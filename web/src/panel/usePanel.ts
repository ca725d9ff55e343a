// Whether the sandbox panel is open. Beside the conversation when the window has room;
// on a narrow one it covers the conversation like a dialog, so it is also an entry in the
// browser's history: Back closes it (a phone's back gesture), as ✕ and Esc do.
import { useCallback, useEffect, useRef, useState } from "react";

export const narrow = window.matchMedia("(max-width: 1100px)");

export function usePanel(): { open: boolean; show: () => void; close: () => void } {
  const [open, setOpen] = useState(() => !narrow.matches);
  // Whether the history entry pushed for the covering panel is still the current one.
  const entry = useRef(false);

  useEffect(() => {
    const onResize = () => {
      entry.current = false; // the entry stays behind, harmless: popping it finds nothing
      setOpen(!narrow.matches); // closed when the window gets narrow, open when wide
    };
    const onPop = () => {
      if (!entry.current) return;
      entry.current = false;
      setOpen(false);
    };
    narrow.addEventListener("change", onResize);
    window.addEventListener("popstate", onPop);
    return () => {
      narrow.removeEventListener("change", onResize);
      window.removeEventListener("popstate", onPop);
    };
  }, []);

  const show = useCallback(() => {
    setOpen(true);
    if (narrow.matches && !entry.current) {
      history.pushState(history.state, "", location.href); // same URL: the route is unchanged
      entry.current = true;
    }
  }, []);

  const close = useCallback(() => {
    setOpen(false);
    if (entry.current) {
      entry.current = false;
      history.back(); // drop the entry, so Back afterwards leaves the conversation
    }
  }, []);

  return { open, show, close };
}
