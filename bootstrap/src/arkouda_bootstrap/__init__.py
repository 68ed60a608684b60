"""arkouda-bootstrap: turns Kubernetes pods into a launched multi-locale Arkouda (or MPI) cluster."""

__version__ = "0.1.0"
