"""The Kubernetes seam: the typed API over the official client, pod watches, Events, pod addresses."""
