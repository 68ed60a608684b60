"""Benchmarks for Arkouda on Kubernetes (`make bench`): every figure is measured here, in the same run."""

__all__ = ["__version__"]
__version__ = "0.1.0"
