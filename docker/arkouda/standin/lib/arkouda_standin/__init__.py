"""STAND-IN (test double) for Arkouda's two server binaries, ``arkouda_server`` and ``arkouda_server_real``.

Chapel and Arkouda cannot be built where there is no network to download them, yet the chart and the
bootstrap must be exercised on the exact launch path the real server uses. This package does what a
Chapel program built with ``CHPL_COMM=gasnet CHPL_COMM_SUBSTRATE=udp CHPL_LAUNCHER=amudprun`` does at start:

* ``arkouda_server -nl N …`` (``launcher``) reads the GASNet/AMUDP SSH spawner's environment
  (``SSH_SERVERS``, ``SSH_CMD``, ``SSH_OPTIONS``, ``SSH_REMOTE_PATH`` with the ``GASNET_``/``AMUDP_`` prefixes,
  ``GASNET_MASTERIP``) and, for each of the first N hosts, runs the same ``/bin/sh -c "<ssh> … <host> 'cd
  <path> ; env … <argv0>_real <args>'"`` command line that AMUDP's ``AMUDP_SPMDSshSpawn`` builds;
* ``arkouda_server_real`` (``locale``) connects back to the launcher over TCP (as AMUDP workers do) and
  reports where and as whom it runs; then every locale exchanges UDP datagrams with every other (the udp
  conduit's traffic; ``udp``); the launcher prints a launch report and exits non-zero if any locale fails;
* then the launcher serves Arkouda's client protocol on ``--ServerPort`` (``server``, over a minimal
  stdlib ZeroMQ REP implementation in ``zmtp``): enough for ``ak.connect()`` and ``ak.get_config()``.

Nothing here computes anything: every message says STAND-IN. Stdlib only, so it runs on the image's python3.
"""

from __future__ import annotations

__version__ = "0.1.0"
BANNER = "arkouda_server STAND-IN (test double for Arkouda's amudprun launcher and server; not Arkouda)"
