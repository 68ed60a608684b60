"""``arkouda_server_real`` STAND-IN: one locale. Started by the launcher's ssh command on each host, it
connects back to the launcher (``ARKOUDA_STANDIN_MASTER``, from GASNET_MASTERIP) as an AMUDP worker does,
sends one JSON report (who and where it runs, which binary, selected environment), and stays up until the
launcher closes the connection. Exit status 1 with one line on stderr when it cannot reach the launcher.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from . import BANNER, __version__, udp
from .config import select_env
from .server import physical_memory


def build_report(argv: list[str], env: dict[str, str], *, locale: int, local_ip: str) -> dict[str, object]:
    return {
        "locale": locale,
        "standIn": True,
        "hostname": socket.gethostname(),
        "ip": local_ip,
        "uid": os.getuid(),
        "gid": os.getgid(),
        "cwd": os.getcwd(),
        "binary": os.path.realpath(argv[0]),
        "argv0": argv[0],
        "args": argv[1:],
        "pid": os.getpid(),
        "numPUs": os.cpu_count() or 0,
        "physicalMemory": physical_memory(),
        "env": select_env(env),
    }


def main(argv: list[str], env: dict[str, str]) -> int:
    if "--version" in argv[1:]:
        print(f"{BANNER} {__version__} (locale program arkouda_server_real)")
        return 0
    master = env.get("ARKOUDA_STANDIN_MASTER", "")
    locale = env.get("ARKOUDA_STANDIN_LOCALE", "")
    if not master or not locale.isdigit():
        print(
            "arkouda_server_real STAND-IN: error: started without the launcher's environment "
            "(ARKOUDA_STANDIN_MASTER, ARKOUDA_STANDIN_LOCALE); start 'arkouda_server -nl N' instead",
            file=sys.stderr,
        )
        return 1
    host, _, port = master.rpartition(":")
    try:
        sock = socket.create_connection((host, int(port)), timeout=30)
    except (OSError, ValueError) as exc:
        print(
            f"arkouda_server_real STAND-IN: error: locale {locale} cannot reach the launcher at {master} "
            f"(GASNET_MASTERIP must be an address the locales can reach): {exc}",
            file=sys.stderr,
        )
        return 1
    mesh = udp.Mesh(int(locale))
    with sock, sock.makefile("rb") as lines:
        report = build_report(argv, env, locale=int(locale), local_ip=sock.getsockname()[0])
        report["udpPort"] = mesh.port
        sock.sendall(json.dumps(report).encode() + b"\n")
        print(
            f"arkouda_server_real STAND-IN: locale {locale} on {report['hostname']} ({report['ip']}) "
            f"uid {report['uid']} reported to {master}",
            flush=True,
        )
        sock.settimeout(None)
        try:
            # The launcher answers with the UDP endpoints of all locales once every locale reported.
            table = json.loads(lines.readline() or b"{}")
            peers = {int(p["locale"]): (str(p["ip"]), int(p["udpPort"])) for p in table.get("peers", [])}
            peers.pop(int(locale), None)
            missing = mesh.exchange(peers, timeout=float(table.get("udpTimeout", 20)))
            sock.sendall(json.dumps({"udp": {"peers": sorted(peers), "missing": missing}}).encode() + b"\n")
            # Serve until the launcher goes away (a real locale runs until the program ends).
            while lines.readline():
                pass
        except (OSError, ValueError, KeyError):
            pass
        finally:
            mesh.close()
    return 0
