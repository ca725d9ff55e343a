// Settings: browser notifications when a run needs approval or ends while the tab is hidden.
import { useState } from "react";
import { permission, setNotifications, notificationsOn, type Permission } from "../notify";

const STATE_TEXT: Record<Permission, string> = {
  default: "",
  granted: "",
  denied: "The browser blocks notifications for this site: allow them in its site settings.",
  unsupported: "This browser cannot show notifications.",
};

export function NotificationsSection() {
  const [on, setOn] = useState(notificationsOn);
  const [state, setState] = useState<Permission>(permission);
  return (
    <section className="settings-section" aria-labelledby="notifications-title">
      <h2 id="notifications-title">Notifications</h2>
      <label className="check">
        <input
          type="checkbox"
          checked={on}
          disabled={state === "unsupported"}
          onChange={(e) => {
            const wanted = e.target.checked;
            void setNotifications(wanted).then((granted) => {
              setState(granted);
              setOn(wanted && granted === "granted");
            });
          }}
        />
        Notify me when a run needs my approval or ends while Burrow is in the background
      </label>
      {STATE_TEXT[state] && <p className="muted">{STATE_TEXT[state]}</p>}
    </section>
  );
}
