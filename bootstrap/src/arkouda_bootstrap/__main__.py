"""`python -m arkouda_bootstrap` runs the same CLI as the `arkouda-bootstrap` console script."""

from arkouda_bootstrap.cli.main import entrypoint

entrypoint()
