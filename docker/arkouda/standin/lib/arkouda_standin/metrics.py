"""Arkouda's metrics tables and the replies of its metrics socket, as in v2025.01.13 (src/MetricsMsg.chpl,
``processMetrics`` in src/ServerDaemon.chpl, METRICS.md).

The main daemon records a request (after its reply is sent; never ``shutdown``) only when ``--trace`` and
``--memTrack`` are on and ``METRICS`` is among the daemon types:

* NUM_REQUESTS per command (+1), RESPONSE_TIME per command (the last one, seconds), AVG_RESPONSE_TIME per
  command (running mean), TOTAL_RESPONSE_TIME per command (sum), TOTAL_MEMORY_USED per command
  (sum of memory used times numLocales / 1e9), and per user NUM_REQUESTS per command plus ``total``.
* SERVER and NUM_ERRORS tables exist but nothing fills them at this tag (NUM_ERRORS still lists ``total`` 0).

``metrics`` takes one argument ``category``; the reply's ``msg`` is a JSON array of metric objects
(SERVER_INFO: one object). A category the select statement does not handle (``RESPONSE_TIME`` among them)
or a missing argument throws an error that ends the metrics daemon: :class:`~.protocol.UncaughtError`.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from typing import Any

from .options import Locale, ServerOptions
from .protocol import STANDIN_VERSION, UncaughtError

CATEGORIES = (
    "ALL",
    "NUM_REQUESTS",
    "RESPONSE_TIME",
    "AVG_RESPONSE_TIME",
    "TOTAL_RESPONSE_TIME",
    "TOTAL_MEMORY_USED",
    "SYSTEM",
    "SERVER",
    "SERVER_INFO",
    "NUM_ERRORS",
)
# What the stand-in reports as Chapel's memoryUsed(): it allocates no Arkouda arrays.
MEMORY_USED = 0


def _metric(name: str, category: str, value: float, *, scope: str = "GLOBAL", **extra: Any) -> dict[str, Any]:
    # Chapel's Metric class fields in declaration order; dateTime serializes as its ISO string.
    return {
        "name": name,
        "category": category,
        "scope": scope,
        "timestamp": datetime.now().isoformat(),
        "value": float(value),
        **extra,
    }


class MetricsTables:
    """The module-level tables of MetricsMsg.chpl, shared by the main and the metrics daemon threads."""

    def __init__(self, *, options: ServerOptions, locales: list[Locale], hostname: str) -> None:
        self.options = options
        self.locales = locales
        self.hostname = hostname
        self._lock = threading.Lock()
        self.requests: dict[str, int] = {}
        self.response_time: dict[str, float] = {}
        self.avg_response_time: dict[str, float] = {}
        self._avg_counts: dict[str, int] = {}
        self._avg_totals: dict[str, float] = {}
        self.total_response_time: dict[str, float] = {}
        self.total_memory_used: dict[str, float] = {}
        self.per_user: dict[str, dict[str, int]] = {}
        self.server: dict[str, int] = {}
        self.errors: dict[str, int] = {}

    def record(self, *, user: str, cmd: str, elapsed: float, mem_used: int) -> None:
        with self._lock:
            self.requests[cmd] = self.requests.get(cmd, 0) + 1
            counts = self.per_user.setdefault(user, {})
            counts[cmd] = counts.get(cmd, 0) + 1
            counts["total"] = counts.get("total", 0) + 1
            self.response_time[cmd] = elapsed
            self._avg_counts[cmd] = self._avg_counts.get(cmd, 0) + 1
            self._avg_totals[cmd] = self._avg_totals.get(cmd, 0.0) + elapsed
            self.avg_response_time[cmd] = self._avg_totals[cmd] / self._avg_counts[cmd]
            self.total_response_time[cmd] = self.total_response_time.get(cmd, 0.0) + elapsed
            self.total_memory_used[cmd] = self.total_memory_used.get(cmd, 0.0) + mem_used / 1e9

    def _table(self, table: dict[str, Any], category: str) -> list[dict[str, Any]]:
        return [_metric(name, category, value) for name, value in table.items()]

    def _counted(self, table: dict[str, int], category: str) -> list[dict[str, Any]]:
        return [*self._table(table, category), _metric("total", category, sum(table.values()))]

    def _system(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for loc in self.locales:
            # Arkouda reads memoryUsed() on locale 0 for every locale; the limit is memMax or physical memory.
            total = self.options.mem_max or loc.physical_memory or 1
            where = {"locale_num": loc.id, "locale_name": loc.name, "locale_hostname": loc.name}
            out.append(_metric("arkouda_memory_used_per_locale", "SYSTEM", MEMORY_USED, scope="LOCALE", **where))
            out.append(
                _metric(
                    "arkouda_percent_memory_used_per_locale",
                    "SYSTEM",
                    MEMORY_USED / total * 100,
                    scope="LOCALE",
                    **where,
                )
            )
        return out

    def _users(self) -> list[dict[str, Any]]:
        return [
            _metric(cmd, "NUM_REQUESTS", count, scope="USER", user=user)
            for user, counts in self.per_user.items()
            for cmd, count in counts.items()
        ]

    def _server_info(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname,
            "version": STANDIN_VERSION,
            "server_port": self.options.server_port,
            "locales": [
                {
                    "name": loc.name,
                    "id": str(loc.id),
                    "hostname": loc.name,
                    "number_of_processing_units": loc.num_pus,
                    "physical_memory": loc.physical_memory,
                    "max_number_of_tasks": loc.num_pus,
                }
                for loc in self.locales
            ],
            "number_of_locales": len(self.locales),
        }

    def answer(self, params: dict[str, str]) -> str:
        """metricsMsg: the reply's msg for ``metrics`` with these arguments."""
        if "category" not in params:
            raise UncaughtError("ErrorWithContext: Key category not found in MessageArgs (metrics needs a category)")
        category = params["category"].removeprefix("MetricCategory.")
        with self._lock:
            if category == "ALL":
                doc: Any = [
                    *self._counted(self.requests, "NUM_REQUESTS"),
                    *self._table(self.response_time, "RESPONSE_TIME"),
                    *self._table(self.avg_response_time, "AVG_RESPONSE_TIME"),
                    *self._table(self.total_response_time, "TOTAL_RESPONSE_TIME"),
                    *self._table(self.total_memory_used, "TOTAL_MEMORY_USED"),
                    *self._system(),
                    *self._table(self.server, "SERVER"),
                    *self._users(),
                    *self._counted(self.errors, "NUM_ERRORS"),
                ]
            elif category == "NUM_REQUESTS":
                doc = self._counted(self.requests, "NUM_REQUESTS")
            elif category == "SERVER":
                doc = self._table(self.server, "SERVER")
            elif category == "SYSTEM":
                doc = self._system()
            elif category == "SERVER_INFO":
                doc = self._server_info()
            elif category == "TOTAL_MEMORY_USED":
                doc = self._table(self.total_memory_used, "TOTAL_MEMORY_USED")
            elif category == "AVG_RESPONSE_TIME":
                doc = self._table(self.avg_response_time, "AVG_RESPONSE_TIME")
            elif category == "TOTAL_RESPONSE_TIME":
                doc = self._table(self.total_response_time, "TOTAL_RESPONSE_TIME")
            elif category == "NUM_ERRORS":
                doc = self._counted(self.errors, "NUM_ERRORS")
            elif category in CATEGORIES:
                # RESPONSE_TIME is a MetricCategory but metricsMsg's select has no branch for it.
                raise UncaughtError("IllegalArgumentError: Invalid MetricType")
            else:
                raise UncaughtError(
                    f"IllegalArgumentError: bad cast from string '{params['category']}' to MetricCategory"
                )
        return json.dumps(doc)
