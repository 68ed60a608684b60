"""Query a (stand-in or real) Arkouda server without the arkouda package:

    python3 -m arkouda_standin.client HOST PORT [getconfig|ruok|standinreport|shutdown]  [--token T]

Sends the current client's JSON request over ZeroMQ REQ (the stand-in's own ZMTP code) and prints the
reply's ``msg``; exit 1 with one line when the server is unreachable or answers an error.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys

from . import zmtp


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="arkouda-standin-client", description=__doc__.splitlines()[0])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("cmd", nargs="?", default="getconfig")
    ap.add_argument("--token", default="")
    ap.add_argument("--timeout", type=float, default=10.0)
    ns = ap.parse_args(argv)
    req = {"user": getpass.getuser(), "token": ns.token, "cmd": ns.cmd, "format": "STRING", "args": "", "size": -1}
    try:
        raw = zmtp.request(ns.host, ns.port, json.dumps(req).encode(), timeout=ns.timeout)
        reply = json.loads(raw)
    except (OSError, zmtp.ZmtpError, ValueError) as exc:
        print(f"arkouda-standin-client: error: no answer from {ns.host}:{ns.port}: {exc}", file=sys.stderr)
        return 1
    if reply.get("msgType") == "ERROR":
        print(f"arkouda-standin-client: error from server: {reply.get('msg')}", file=sys.stderr)
        return 1
    print(reply.get("msg", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
