"""The application service over the other three: scheduling runs (one per conversation,
steering, interrupts, repair after a crash), a person's actions routed to the replica that
owns the run, replicas' leases, forks, the model a run uses, and users' secrets given to
commands. The API reaches `runs/` through here."""
