"""STAND-IN (test double) for the server side of Arkouda's Chapel program, on locale 0.

Chapel and Arkouda cannot be built where there is no network to download them. The launch path around them is
real: ``arkouda_server`` (C, ../../src/) runs GASNet-EX's own ``amudprun`` the way Chapel's generated launcher
does, and ``arkouda_server_real`` (C, linked against GASNet's udp conduit) joins the GASNet job on every locale,
exchanges active messages, passes a barrier, and on locale 0 starts ``bin/arkouda_standin_server``. Only what
Arkouda's Chapel code would do from there is imitated here, read from Arkouda v2025.01.13's sources: start-up
files and the token (``startup``), the client protocol on pyzmq (``protocol``, ``server``), the metrics daemon
(``metrics``), program arguments (``options``), and a replay of the pinned client's connect requests
(``client``). Every reply a user reads says STAND-IN; nothing here computes anything.
"""

from __future__ import annotations

__version__ = "0.1.0"
BANNER = "arkouda_server STAND-IN (test double for Arkouda's amudprun launcher and server; not Arkouda)"
