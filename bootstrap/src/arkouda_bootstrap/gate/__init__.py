"""`gate`: the always-on door of a release that sleeps when idle (proxy, idle policy, controller)."""
