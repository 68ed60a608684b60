"""`server` on Kubernetes: wait for the locales, probe, launch, supervise (and the Job run mode)."""
